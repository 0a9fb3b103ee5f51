"""Request and response bodies of the compute cluster routes."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from app.models.workload import WorkloadStatus as S
from app.models.workload import status_values


class ClusterRequestSchema(Schema):
    """``POST /spawner/v1/labs/<username>/clusters``: the cluster to create."""

    class Meta:
        unknown = RAISE

    kind = fields.String(
        required=True,
        metadata={"description": "`daskclusters`, `rayclusters` or `sparkclusters`."},
    )
    workers = fields.Integer(
        strict=True,
        load_default=1,
        validate=validate.Range(min=0),
        metadata={"description": "Workers to start."},
    )
    max_workers = fields.Integer(
        strict=True,
        load_default=None,
        validate=validate.Range(min=0),
        metadata={"description": "The most workers it may be scaled to (default: `workers`)."},
    )
    worker_tier = fields.String(
        load_default=None, metadata={"description": "The workers' hardware tier."}
    )
    head_tier = fields.String(
        load_default=None,
        metadata={"description": "The head's (scheduler's, server's) hardware tier."},
    )
    image = fields.String(
        load_default=None,
        metadata={"description": "An image the user may spawn; by default the lab's."},
    )


class UsageSchema(Schema):
    clusters = fields.Integer(required=True)
    workers = fields.Integer(required=True)
    kernels = fields.Integer(load_default=0, dump_default=0)
    cpu = fields.Float(required=True, metadata={"description": "Cores its pods request."})
    memory = fields.Integer(required=True, metadata={"description": "Bytes its pods request."})
    gpus = fields.Integer(required=True)


class ClusterSchema(Schema):
    """A compute cluster, as the service records it."""

    kind = fields.String(required=True)
    name = fields.String(required=True)
    namespace = fields.String(required=True, metadata={"description": "The lab's namespace."})
    owner = fields.String(required=True)
    status = fields.String(
        required=True,
        validate=validate.OneOf(status_values(S.STARTING, S.RUNNING, S.TERMINATING, S.FAILED)),
    )
    workers = fields.Integer(required=True)
    max_workers = fields.Integer(required=True)
    worker_tier = fields.String(required=True)
    head_tier = fields.String(required=True)
    image = fields.String(required=True)
    usage = fields.Nested(UsageSchema, required=True, metadata={"description": "What it holds."})
    scheduler_address = fields.String(
        allow_none=True, metadata={"description": "Where a client reaches it, once running."}
    )
    dashboard_url = fields.String(allow_none=True)
    error = fields.String(allow_none=True, metadata={"description": "Why it failed."})
