"""Bodies of the maintenance pod's routes: what an administrator sees of the pod."""

from __future__ import annotations

from marshmallow import Schema, fields


class AdminPodMountSchema(Schema):
    """One file system the maintenance pod holds."""

    volume = fields.String(required=True, metadata={"description": "The `lab.volumes` name."})
    path = fields.String(
        required=True, metadata={"description": "Where it is mounted: `<mountPrefix>/<volume>`."}
    )
    read_only = fields.Boolean(
        required=True, metadata={"description": "True only when the volume itself is read-only."}
    )


class AdminPodStatusSchema(Schema):
    """The maintenance pod as Kubernetes reports it (nothing of it is kept elsewhere)."""

    name = fields.String(required=True)
    namespace = fields.String(required=True)
    phase = fields.String(
        required=True,
        metadata={"description": "The pod's phase: Pending, Running, Succeeded, Failed, Unknown."},
    )
    ready = fields.Boolean(
        required=True, metadata={"description": "Its container runs and is ready."}
    )
    terminating = fields.Boolean(
        required=True, metadata={"description": "Its deletion was asked for."}
    )
    node = fields.String(
        required=True, allow_none=True, metadata={"description": "Where it was scheduled."}
    )
    started = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "When the node started it (RFC 3339); null before."},
    )
    image = fields.String(required=True)
    mounts = fields.List(fields.Nested(AdminPodMountSchema), required=True)
    detail = fields.String(metadata={"description": "What the action did (start and delete)."})
