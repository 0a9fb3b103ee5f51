"""Bodies of the file-server routes; ``FileserverRecordSchema`` is also how a record is
stored (``app.workloads.fileserver.records``)."""

from __future__ import annotations

from marshmallow import Schema, fields

from app.models.workload import WorkloadStatus as S
from app.schemas.records import status_field


class FileserverRecordSchema(Schema):
    """A user's file server as the engine keeps it."""

    username = fields.String(required=True)
    created = fields.String(required=True, metadata={"description": "When it was asked for."})
    status = status_field(S.STARTING, S.RUNNING, S.FAILED, S.TERMINATING)
    message = fields.String(
        load_default="", dump_default="", metadata={"description": "Why it failed or ended."}
    )


class FileserverSchema(FileserverRecordSchema):
    """``/spawner/v1/fileservers/<username>``: the record, and where the server is."""

    url = fields.String(required=True, metadata={"description": "The server's WebDAV URL."})


class MountSchema(Schema):
    name = fields.String(required=True, metadata={"description": "Its segment of the URL."})
    path = fields.String(required=True, metadata={"description": "Where the lab sees it."})
    read_only = fields.Boolean(required=True, data_key="readOnly")
    url = fields.String(required=True, metadata={"description": "Its WebDAV URL."})


class FileserverAccessSchema(Schema):
    """``GET /files`` asked for JSON: the caller's running file server, and its mounts."""

    username = fields.String(required=True)
    url = fields.String(required=True, metadata={"description": "The server's WebDAV URL."})
    running = fields.Boolean(required=True)
    mounts = fields.List(fields.Nested(MountSchema), required=True)


class RunningSchema(Schema):
    """nublado's answer for a user with a file server."""

    running = fields.Boolean(required=True, metadata={"example": True})


class UserStatusSchema(RunningSchema):
    """The caller's file server: nublado's answer, and whose it is and where."""

    username = fields.String(required=True)
    url = fields.String(required=True, metadata={"description": "The server's WebDAV URL."})
