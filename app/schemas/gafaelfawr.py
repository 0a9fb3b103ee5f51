"""Schemas for Gafaelfawr's token-info and user-info answers.

Unknown keys are ignored (Gafaelfawr adds fields over time); the fields we rely on are
required, so a changed API fails clearly instead of producing half an identity.
"""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, fields, post_load

from app.models.identity import Group, NotebookQuota, TokenData, UserInfo


class _Lenient(Schema):
    class Meta:
        unknown = EXCLUDE


class TokenInfoSchema(_Lenient):
    username = fields.String(required=True)
    scopes = fields.List(fields.String(), required=True)
    token_type = fields.String(load_default="unknown")

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> TokenData:
        return TokenData(
            username=data["username"],
            scopes=frozenset(data["scopes"]),
            token_type=data["token_type"],
        )


class GroupSchema(_Lenient):
    name = fields.String(required=True)
    id = fields.Integer(load_default=None, allow_none=True)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Group:
        return Group(name=data["name"], id=data["id"])


class NotebookQuotaSchema(_Lenient):
    cpu = fields.Float(required=True)
    memory = fields.Float(required=True)
    spawn = fields.Boolean(load_default=True)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> NotebookQuota:
        return NotebookQuota(cpu=data["cpu"], memory_gib=data["memory"], spawn=data["spawn"])


class QuotaSchema(_Lenient):
    notebook = fields.Nested(NotebookQuotaSchema, load_default=None, allow_none=True)


class UserInfoSchema(_Lenient):
    username = fields.String(required=True)
    name = fields.String(load_default=None, allow_none=True)
    email = fields.String(load_default=None, allow_none=True)
    uid = fields.Integer(load_default=None, allow_none=True)
    gid = fields.Integer(load_default=None, allow_none=True)
    groups = fields.List(fields.Nested(GroupSchema), load_default=list)
    quota = fields.Nested(QuotaSchema, load_default=None, allow_none=True)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> UserInfo:
        quota = data["quota"]
        return UserInfo(
            username=data["username"],
            name=data["name"],
            email=data["email"],
            uid=data["uid"],
            gid=data["gid"],
            groups=tuple(data["groups"]),
            notebook_quota=quota.get("notebook") if quota else None,
        )
