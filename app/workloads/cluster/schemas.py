"""Request and response bodies of the compute cluster routes; ``ClusterSchema`` is also how a
cluster's record is stored (``app.workloads.cluster.records``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import (
    EXCLUDE,
    INCLUDE,
    RAISE,
    Schema,
    ValidationError,
    fields,
    validate,
    validates_schema,
)

from app.models.workload import WorkloadStatus as S
from app.schemas.records import error_field, status_field, usage_field
from app.schemas.requests import lab_image_field


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
    image = lab_image_field()

    @validates_schema
    def _room_for_the_workers(self, data: dict[str, Any], **_: Any) -> None:
        maximum = data.get("max_workers")
        if maximum is not None and maximum < data["workers"]:
            raise ValidationError("must not be less than workers", "max_workers")


class ClusterSchema(Schema):
    """A compute cluster, as the service records it."""

    kind = fields.String(required=True)
    name = fields.String(required=True)
    namespace = fields.String(required=True, metadata={"description": "The lab's namespace."})
    owner = fields.String(required=True)
    status = status_field(S.STARTING, S.RUNNING, S.TERMINATING, S.FAILED)
    workers = fields.Integer(required=True)
    max_workers = fields.Integer(required=True)
    worker_tier = fields.String(required=True)
    head_tier = fields.String(required=True)
    image = fields.String(required=True)
    usage = usage_field()
    scheduler_address = fields.String(
        allow_none=True, metadata={"description": "Where a client reaches it, once running."}
    )
    dashboard_url = fields.String(allow_none=True)
    error = error_field()


# The cluster scaler API's bodies (``/ddl_cluster_scaler/``), as its design words them; the
# answers are built by ``ScalerService``.


class ScalerField(fields.Raw):
    """A field of a scaler request, its body's or its query's, handed to the scaler as sent
    (absent if absent).

    The scaler's design orders its answers: it settles whose the cluster is before it looks
    at the body, so anyone but its owner or an administrator is refused 403 ``unauthorized``
    whatever the body holds. So the scaler checks these fields itself, each where its design
    places the check, answering 400 ``bad_request`` naming the field; its metadata documents
    what that check requires.
    """

    def deserialize(
        self,
        value: Any,
        attr: str | None = None,
        data: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        return value


class OperatorObjectSchema(Schema):
    """The operator's object, as Kubernetes has it."""

    class Meta:
        unknown = INCLUDE


class ClusterListSchema(Schema):
    """An administrator's every cluster of a kind, a user's own."""

    kind = fields.String(required=True)
    count = fields.Integer(required=True)
    clusters = fields.List(fields.Dict(), required=True)


class ScaleRequestSchema(Schema):
    """The workers wanted, and optionally their new hardware tier."""

    class Meta:
        unknown = EXCLUDE

    replicas = ScalerField(required=True, metadata={"type": "integer", "minimum": 0})
    worker_hw_tier_name = ScalerField(metadata={"type": "string"})


class ScaledSchema(Schema):
    """The workers asked for and those the cluster got (capped at its maximum)."""

    kind = fields.String(required=True)
    name = fields.String(required=True)
    requested_replicas = fields.Integer(required=True)
    effective_replicas = fields.Integer(required=True)
    max_replicas = fields.Integer(required=True, data_key="maxReplicas")
    capped = fields.Boolean()
    worker_hw_tier_id = fields.Dict(metadata={"description": "The tier, when one was given."})


class HeadTierRequestSchema(Schema):
    """The hardware tier the head is to have."""

    class Meta:
        unknown = EXCLUDE

    head_hw_tier_name = ScalerField(required=True, metadata={"type": "string", "minLength": 1})


class HeadTieredSchema(Schema):
    """The head's new tier and the patched object."""

    kind = fields.String(required=True)
    name = fields.String(required=True)
    head_hw_tier_name = fields.String(required=True)
    object = fields.Dict(required=True, metadata={"description": "The patched object."})


class RestartedSchema(Schema):
    """A head restart begun: the pod deleted, and when, to ask about it later."""

    ok = fields.Boolean(required=True)
    namespace = fields.String(required=True)
    pod = fields.String(required=True, metadata={"description": "The head pod that was deleted."})
    grace_period_seconds = fields.Integer(required=True)
    started_at = fields.DateTime(
        required=True, metadata={"description": "Pass it to `restart_head_status`."}
    )
    k8s_response = fields.Dict(metadata={"description": "The API server's answer, in short."})


class RestartStatusQuerySchema(Schema):
    """When the restart asked about began."""

    started_at = ScalerField(
        required=True,
        metadata={
            "description": "`started_at` as `restart_head` returned it (ISO 8601).",
            "type": "string",
            "format": "date-time",
        },
    )


class RestartStatusSchema(Schema):
    """Whether the head was made again since a restart began, and is ready."""

    ok = fields.Boolean(
        required=True, metadata={"description": "Restarted since `started_at`, and ready."}
    )
    restarted = fields.Boolean(required=True)
    ready = fields.Boolean(required=True)
    status = fields.String(
        required=True,
        validate=validate.OneOf(["restarted_and_ready", "restarted_not_ready", "not_restarted"]),
    )
    namespace = fields.String(required=True)
    pod = fields.String(
        required=True, allow_none=True, metadata={"description": "Null while there is no head."}
    )
    creation_timestamp = fields.DateTime(allow_none=True, data_key="creationTimestamp")
    started_at = fields.DateTime()
    evaluated_with = fields.String()
