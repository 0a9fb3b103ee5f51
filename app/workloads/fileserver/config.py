"""The ``fileserver`` section of the configuration: whether users get file servers, what
each runs and mounts, how it is reached and when it stops.

Its model lives here with its schema, not in ``app.models.config``: the kind reads it with
``config.section(SECTION, FileserverConfig)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    DNS_LABEL,
    POSITIVE,
    ConfigModelSchema,
    ConfigSections,
    CpuField,
    MemoryField,
    SectionCheck,
    StrictCamelCaseSchema,
    refuse_duplicates,
)
from app.models.config import Config, LabVolumeMount, Toleration
from app.workloads.lab.config import LabVolumeMountSchema, PodPlacementSchema

SECTION = "fileserver"
MOUNT_NAME = re.compile(r"^[a-z0-9._-]+$")
"""A mount's name in the server's URLs (the file server's own rule)."""


@dataclass(frozen=True)
class FileserverResources:
    cpu_request: float
    memory_request: int
    cpu_limit: float
    memory_limit: int


@dataclass(frozen=True)
class FileserverConfig:
    """Users' file servers; ``enabled`` false (the default) makes their routes 404."""

    enabled: bool
    namespace: str
    image: str
    pull_policy: str
    idle_timeout: float
    creation_timeout: float
    delete_timeout: float
    port: int
    path_prefix: str
    scope: str
    base_url: str
    ingress_namespaces: tuple[str, ...]
    volume_mounts: tuple[LabVolumeMount, ...]
    resources: FileserverResources
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]


def mount_name(mount: LabVolumeMount) -> str:
    """A mount's name in the server's URLs: its path's segments joined by ``-``
    (``/home`` is ``home``, ``/project/data`` is ``project-data``)."""
    return "-".join(segment for segment in mount.mount_path.split("/") if segment)


def fileserver_config(config: Config) -> FileserverConfig:
    """The section, as its model."""
    return config.section(SECTION, FileserverConfig)


class _QuantitiesSchema(StrictCamelCaseSchema):
    cpu = CpuField(load_default=None)
    memory = MemoryField(load_default=None)


DEFAULT_RESOURCES = FileserverResources(
    cpu_request=0.1, memory_request=128 * 2**20, cpu_limit=1.0, memory_limit=2**30
)


class FileserverResourcesSchema(ConfigModelSchema):
    """Kubernetes' shape: ``requests`` and ``limits``, each with ``cpu`` and ``memory``; a
    quantity not given is ``DEFAULT_RESOURCES``'."""

    model = FileserverResources

    requests = fields.Nested(_QuantitiesSchema, load_default=dict)
    limits = fields.Nested(_QuantitiesSchema, load_default=dict)

    @validates_schema
    def _requests_within_limits(self, data: dict[str, Any], **_: Any) -> None:
        chosen = self._values(data)
        if chosen["cpu_request"] > chosen["cpu_limit"]:
            raise ValidationError("must not be above limits.cpu", "requests.cpu")
        if chosen["memory_request"] > chosen["memory_limit"]:
            raise ValidationError("must not be above limits.memory", "requests.memory")

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        requests, limits = data.get("requests") or {}, data.get("limits") or {}
        default = DEFAULT_RESOURCES

        def given(values: dict[str, Any], key: str, fallback: float) -> Any:
            return fallback if values.get(key) is None else values[key]

        return {
            "cpu_request": given(requests, "cpu", default.cpu_request),
            "memory_request": given(requests, "memory", default.memory_request),
            "cpu_limit": given(limits, "cpu", default.cpu_limit),
            "memory_limit": given(limits, "memory", default.memory_limit),
        }


class FileserverSchema(PodPlacementSchema, ConfigModelSchema):
    model = FileserverConfig

    enabled = fields.Boolean(load_default=False)
    namespace = fields.String(load_default="fileservers", validate=DNS_LABEL)
    image = fields.String(
        load_default="docker.io/lsstsqre/fileserver:1.0", validate=validate.Length(min=1)
    )
    pull_policy = fields.String(
        load_default="IfNotPresent", validate=validate.OneOf(["Always", "IfNotPresent", "Never"])
    )
    idle_timeout = fields.Float(load_default=3600.0, validate=POSITIVE)
    creation_timeout = fields.Float(load_default=120.0, validate=POSITIVE)
    delete_timeout = fields.Float(load_default=60.0, validate=POSITIVE)
    port = fields.Integer(load_default=8000, validate=validate.Range(min=1024, max=65535))
    path_prefix = fields.String(
        load_default="/files", validate=validate.Regexp(r"^/[a-z0-9/_-]*[a-z0-9_-]$")
    )
    scope = fields.String(load_default="write:files", validate=validate.Length(min=1))
    base_url = fields.Url(load_default="https://data.example.org", require_tld=False)
    ingress_namespaces = fields.List(
        fields.String(validate=DNS_LABEL), load_default=lambda: ["ingress-nginx"]
    )
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    resources = fields.Nested(FileserverResourcesSchema, load_default=lambda: DEFAULT_RESOURCES)

    @validates_schema
    def _mounts(self, data: dict[str, Any], **_: Any) -> None:
        mounts = data.get("volume_mounts") or []
        for index, mount in enumerate(mounts):
            if not MOUNT_NAME.fullmatch(mount_name(mount)):
                raise ValidationError(
                    f"{mount.mount_path} does not name a mount (lowercase letters, digits, "
                    "'.', '_' and '-' between slashes)",
                    f"volumeMounts.{index}.mountPath",
                )
        refuse_duplicates((mount_name(m) for m in mounts), "mount names", "volumeMounts")
        if data.get("enabled") and not mounts:
            raise ValidationError("a file server needs at least one mount", "volumeMounts")

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        return {
            **data,
            "base_url": data["base_url"].rstrip("/"),
            "tolerations": tuple(data["tolerations"]),
        }


def _mounts_name_lab_volumes(sections: Mapping[str, Any]) -> None:
    """Each mount names a volume of ``lab.volumes``: a file server serves what labs see."""
    lab, section = sections.get("lab"), sections.get(SECTION)
    if lab is None or section is None:
        return
    known = {volume.name for volume in lab.volumes}
    for index, mount in enumerate(section.volume_mounts):
        if mount.volume_name not in known:
            raise ValidationError(
                f"{mount.volume_name!r} is not a volume of lab.volumes",
                f"{SECTION}.volumeMounts.{index}.volumeName",
            )


SECTIONS: ConfigSections = {
    SECTION: fields.Nested(FileserverSchema, load_default=lambda: FileserverSchema().load({}))
}
"""The file-server kind's section of the configuration."""

CHECKS: tuple[SectionCheck, ...] = (_mounts_name_lab_volumes,)
