"""Schema of the ``clusters`` section of the configuration: the kinds of cluster offered, the
hardware tiers their pods are sized and placed by, the node pool label, the workers' cap and
how addresses name a cluster's head."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    DNS_LABEL,
    ConfigModelSchema,
    ConfigSections,
    CpuField,
    MemoryField,
    camel_case,
    refuse_duplicates,
)
from app.models.config import ClustersConfig, HardwareTier
from app.workloads.cluster.adapters import ADAPTERS

_LABEL_VALUE = validate.And(
    validate.Length(min=1, max=63),
    validate.Regexp(
        r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        error="must be a label value: letters, digits, '-', '_' and '.', starting and ending "
        "with a letter or digit",
    ),
)
"""A Kubernetes label value (a tier's id and node pool become labels and node selectors)."""


class HardwareTierSchema(ConfigModelSchema):
    model = HardwareTier

    name = fields.String(required=True, validate=DNS_LABEL)
    id = fields.String(load_default=None, validate=_LABEL_VALUE)
    cores = CpuField(required=True)
    cores_limit = CpuField(load_default=None)
    memory = MemoryField(required=True)
    gpus = fields.Integer(load_default=0, validate=validate.Range(min=0))
    node_pool = fields.String(load_default=None, validate=_LABEL_VALUE)
    kinds = fields.List(fields.String(validate=validate.OneOf(sorted(ADAPTERS))), load_default=list)

    @validates_schema
    def _limit_not_below_request(self, data: dict[str, Any], **_: Any) -> None:
        limit = data.get("cores_limit")
        if limit is not None and limit < data.get("cores", 0):
            raise ValidationError("must not be less than cores", "coresLimit")

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        return {
            **data,
            "id": data["id"] or data["name"],
            "cores_limit": data["cores_limit"] or data["cores"],
        }


DEFAULT_TIERS = [{"name": "small", "cores": 1, "coresLimit": 2, "memory": "4Gi"}]
"""One modest tier, so that clusters work before an operator describes their hardware."""


REACH_BY = ("dns", "clusterIP")
"""How clusters' addresses name their head Service (``ClustersConfig.reach_by``)."""


class ClustersSchema(ConfigModelSchema):
    model = ClustersConfig

    kinds = fields.List(
        fields.String(validate=validate.OneOf(sorted(ADAPTERS))),
        load_default=lambda: sorted(ADAPTERS),
    )
    tiers = fields.List(
        fields.Nested(HardwareTierSchema),
        load_default=lambda: [HardwareTierSchema().load(t) for t in DEFAULT_TIERS],
        validate=validate.Length(min=1),
    )
    default_worker_tier = fields.String(load_default=None)
    default_head_tier = fields.String(load_default=None)
    node_pool_label = fields.String(
        load_default="lab-spawner.jupyter.org/node-pool", validate=validate.Length(min=1)
    )
    max_workers = fields.Integer(load_default=32, validate=validate.Range(min=1, max=1000))
    reach_by = fields.String(
        load_default=REACH_BY[0],
        validate=validate.OneOf(REACH_BY),
        metadata={"description": "How addresses name the head Service: its DNS name or IP."},
    )

    @validates_schema
    def _tiers(self, data: dict[str, Any], **_: Any) -> None:
        names = [tier.name for tier in data.get("tiers") or []]
        refuse_duplicates(names, "names", "tiers")
        for key in ("default_worker_tier", "default_head_tier"):
            if data.get(key) is not None and data[key] not in names:
                raise ValidationError(f"not a tier; tiers are: {', '.join(names)}", camel_case(key))

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        first = data["tiers"][0].name
        return {
            **data,
            "default_worker_tier": data["default_worker_tier"] or first,
            "default_head_tier": data["default_head_tier"] or first,
        }


SECTIONS: ConfigSections = {
    "clusters": fields.Nested(ClustersSchema, load_default=lambda: ClustersSchema().load({}))
}
"""The cluster kind's section of the configuration."""
