"""Validation of objects written over HTTP: the official schemas plus the server's own rules.

The OpenAPI schemas (shipped offline by ``kubernetes-validate``) check structure and types.
A real API server checks more in code: name syntax, label syntax, quantities, duplicate and
required container fields. Both are reported the way kube-apiserver reports them: a 422
``Invalid`` Status with one ``details.causes`` entry per field.

Building a schema validator costs about 10 ms (loading and indexing the definitions), so one
validator per kind is built on first use and kept for the life of the process.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import threading
from collections.abc import Iterator
from importlib import resources as importlib_resources
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

from devstack.kube import custom, errors, workload_rules
from devstack.kube.quantities import QuantityError, parse_quantity
from devstack.kube.resources import ResourceType

SCHEMA_VERSION = "1.33.0"
"""The Kubernetes version whose OpenAPI schemas the emulator enforces."""

_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL_MAX = 63
_DNS_SUBDOMAIN_MAX = 253
_LABEL_VALUE_MAX = 63
_ANNOTATIONS_MAX_BYTES = 256 * 1024
_DATA_MAX_BYTES = 1024 * 1024
"""The most a ConfigMap's or a Secret's values may hold in all (kube-apiserver's
``MaxSecretSize``, which it applies to ConfigMaps too)."""
_GENERATED_SUFFIX = "x" * 5
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

Cause = dict[str, str]


def _cause(field: str, reason: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


class _SchemaSet:
    """Schema validators for every kind, built lazily, one per kind."""

    def __init__(self, version: str, *, strict: bool) -> None:
        suffix = "-local-strict" if strict else "-local"
        self._root = importlib_resources.files("kubernetes_validate").joinpath(
            "kubernetes-json-schema", f"v{version}{suffix}"
        )
        self._lock = threading.Lock()
        self._registry: referencing.Registry | None = None
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    def _load(self, filename: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self._root.joinpath(filename).read_text())
        return loaded

    def validator(self, kind: str, group: str, version: str) -> jsonschema.protocols.Validator:
        api = f"{group.split('.')[0]}-{version}" if group else version
        filename = f"{kind.lower()}-{api}.json"
        with self._lock:
            found = self._validators.get(filename)
            if found is not None:
                return found
            if self._registry is None:
                definitions = referencing.Resource.from_contents(self._load("_definitions.json"))
                self._registry = definitions @ referencing.Registry()
            schema = self._load(filename)
            registry = referencing.Resource.from_contents(schema) @ self._registry
            built = jsonschema.Draft202012Validator(schema, registry=registry)
            self._validators[filename] = built
            return built


class Validator:
    """Checks objects of the served kinds; thread-safe and cheap after the first use per kind."""

    def __init__(self, version: str = SCHEMA_VERSION) -> None:
        self._schemas = _SchemaSet(version, strict=False)
        self._strict_schemas = _SchemaSet(version, strict=True)

    def check(self, resource: ResourceType, obj: dict[str, Any], *, strict: bool = False) -> None:
        """Raise 422 Invalid if ``obj`` is not a valid object of ``resource``.

        ``strict`` also rejects unknown fields (the ``fieldValidation=Strict`` query).
        """
        causes = self.causes(resource, obj, strict=strict)
        if causes:
            meta = obj.get("metadata") or {}
            name = meta.get("name") or meta.get("generateName") or ""
            raise errors.invalid(resource.kind, name, causes, resource.group)

    def check_update(
        self, resource: ResourceType, new: dict[str, Any], current: dict[str, Any]
    ) -> None:
        """Raise 422 Invalid if ``new`` changes what may not change once created (a
        workload's selector, a Job's pod template)."""
        if resource.custom:
            return
        causes = workload_rules.update_causes(resource.kind, new, current)
        if causes:
            name = str((new.get("metadata") or {}).get("name") or "")
            raise errors.invalid(resource.kind, name, causes, resource.group)

    def causes(
        self, resource: ResourceType, obj: dict[str, Any], *, strict: bool = False
    ) -> list[Cause]:
        if resource.schema is not None:
            schema = custom.validator(resource.schema)
        else:
            schemas = self._strict_schemas if strict else self._schemas
            schema = schemas.validator(resource.kind, resource.group, resource.version)
        causes = [_schema_cause(e) for e in schema.iter_errors(obj)]
        if causes:
            # Rule checks assume the structure is right; report structure first, as upstream.
            return causes
        causes.extend(_metadata_causes(resource, obj.get("metadata") or {}))
        if resource.kind == "Pod":
            causes.extend(_pod_spec_causes(obj.get("spec") or {}, "spec"))
        elif resource.kind == "DaemonSet":
            template_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
            causes.extend(_pod_spec_causes(template_spec, "spec.template.spec"))
        elif resource.kind in ("Deployment", "ReplicaSet", "Job") and not resource.custom:
            spec = obj.get("spec") or {}
            if resource.kind == "Job":
                causes.extend(workload_rules.job_causes(obj))
            else:
                causes.extend(workload_rules.spec_causes(resource.kind, spec))
            template_spec = (spec.get("template") or {}).get("spec") or {}
            causes.extend(_pod_spec_causes(template_spec, "spec.template.spec"))
        elif resource.kind in ("ConfigMap", "Secret"):
            causes.extend(_data_size_causes(obj))
        elif resource.kind == "ResourceQuota":
            hard = (obj.get("spec") or {}).get("hard") or {}
            causes.extend(_quantity_map_causes(hard, "spec.hard"))
        elif resource.kind == "PersistentVolumeClaim":
            spec_resources = (obj.get("spec") or {}).get("resources") or {}
            for part in ("requests", "limits"):
                values = spec_resources.get(part) or {}
                causes.extend(_quantity_map_causes(values, f"spec.resources.{part}"))
        return causes


def _schema_cause(error: jsonschema.ValidationError) -> Cause:
    field = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in error.absolute_path)
    field = field.replace(".[", "[")
    if error.validator == "required":
        return _cause(field or "<root>", "FieldValueRequired", f"Required value: {error.message}")
    if error.validator == "additionalProperties":
        return _cause(field or "<root>", "FieldValueInvalid", f"unknown field: {error.message}")
    if error.validator == "enum":
        return _cause(field, "FieldValueNotSupported", f"Unsupported value: {error.message}")
    return _cause(field or "<root>", "FieldValueInvalid", f"Invalid value: {error.message}")


def dns_label_errors(value: str) -> list[str]:
    """Why ``value`` is not an RFC 1123 label (empty when it is one)."""
    problems = []
    if len(value) > _DNS_LABEL_MAX:
        problems.append(f"must be no more than {_DNS_LABEL_MAX} characters")
    if not _DNS_LABEL_RE.match(value):
        problems.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
    return problems


def dns_subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is not an RFC 1123 subdomain (empty when it is one)."""
    problems = []
    if len(value) > _DNS_SUBDOMAIN_MAX:
        problems.append(f"must be no more than {_DNS_SUBDOMAIN_MAX} characters")
    if not _DNS_SUBDOMAIN_RE.match(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    return problems


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a label or annotation key (``[prefix/]name``)."""
    prefix, _, name = value.rpartition("/")
    problems = []
    if "/" in value and not prefix:
        problems.append("prefix part must be non-empty")
    elif prefix:
        problems.extend(f"prefix part {p}" for p in dns_subdomain_errors(prefix))
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > _DNS_LABEL_MAX:
        problems.append(f"name part must be no more than {_DNS_LABEL_MAX} characters")
    elif not _QUALIFIED_NAME_RE.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return problems


def label_value_errors(value: str) -> list[str]:
    problems = []
    if len(value) > _LABEL_VALUE_MAX:
        problems.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE_RE.match(value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return problems


def _metadata_causes(resource: ResourceType, meta: dict[str, Any]) -> Iterator[Cause]:
    name = meta.get("name")
    field = "metadata.name"
    if not name and meta.get("generateName"):
        name = meta["generateName"] + _GENERATED_SUFFIX
        field = "metadata.generateName"
    if not name:
        yield _cause(
            "metadata.name",
            "FieldValueRequired",
            "Required value: name or generateName is required",
        )
    else:
        check = dns_label_errors if resource.label_name else dns_subdomain_errors
        for problem in check(name):
            yield _cause(field, "FieldValueInvalid", f"Invalid value: {name!r}: {problem}")
    for key, value in (meta.get("labels") or {}).items():
        for problem in qualified_name_errors(key):
            yield _cause(
                "metadata.labels", "FieldValueInvalid", f"Invalid value: {key!r}: {problem}"
            )
        for problem in label_value_errors(str(value)):
            yield _cause(
                f"metadata.labels.{key}",
                "FieldValueInvalid",
                f"Invalid value: {value!r}: {problem}",
            )
    annotations = meta.get("annotations") or {}
    for key in annotations:
        for problem in qualified_name_errors(key):
            yield _cause(
                "metadata.annotations", "FieldValueInvalid", f"Invalid value: {key!r}: {problem}"
            )
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > _ANNOTATIONS_MAX_BYTES:
        yield _cause(
            "metadata.annotations",
            "FieldValueTooLong",
            f"Too long: must have at most {_ANNOTATIONS_MAX_BYTES} bytes",
        )


def _data_size_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """A ConfigMap's or Secret's values past 1 MiB in all, as the API server refuses them:
    an object the service builds too big must fail here as it would in a cluster."""
    size = 0
    if obj.get("kind") == "Secret":
        for value in (obj.get("data") or {}).values():
            try:
                size += len(base64.b64decode(str(value), validate=True))
            except ValueError:
                size += len(str(value))  # the schema check reports the encoding
        size += sum(len(str(v).encode()) for v in (obj.get("stringData") or {}).values())
    else:
        size += sum(len(str(v).encode()) for v in (obj.get("data") or {}).values())
        size += sum(len(base64.b64decode(str(v))) for v in (obj.get("binaryData") or {}).values())
    if size > _DATA_MAX_BYTES:
        message = f"Too long: must have at most {_DATA_MAX_BYTES} bytes"
        yield _cause("", "FieldValueTooLong", message)


def _quantity_map_causes(values: dict[str, Any], field: str) -> Iterator[Cause]:
    for key, raw in values.items():
        try:
            amount = parse_quantity(raw)
        except QuantityError as exc:
            yield _cause(f"{field}[{key}]", "FieldValueInvalid", f"Invalid value: {raw!r}: {exc}")
            continue
        if amount < 0:
            yield _cause(
                f"{field}[{key}]",
                "FieldValueInvalid",
                f"Invalid value: {raw!r}: must be greater than or equal to 0",
            )


def _pod_spec_causes(spec: dict[str, Any], field: str) -> Iterator[Cause]:
    seen: set[str] = set()
    if not spec.get("containers"):
        yield _cause(f"{field}.containers", "FieldValueRequired", "Required value")
    for list_name in _CONTAINER_LISTS:
        for index, container in enumerate(spec.get(list_name) or []):
            where = f"{field}.{list_name}[{index}]"
            yield from _container_causes(container, where, seen)
    volume_names: set[str] = set()
    for index, volume in enumerate(spec.get("volumes") or []):
        name = volume.get("name", "")
        where = f"{field}.volumes[{index}].name"
        for problem in dns_label_errors(name):
            yield _cause(where, "FieldValueInvalid", f"Invalid value: {name!r}: {problem}")
        if name in volume_names:
            yield _cause(where, "FieldValueDuplicate", f"Duplicate value: {name!r}")
        volume_names.add(name)


def _container_causes(container: dict[str, Any], where: str, seen: set[str]) -> Iterator[Cause]:
    name = container.get("name")
    if not name:
        yield _cause(f"{where}.name", "FieldValueRequired", "Required value")
    else:
        for problem in dns_label_errors(name):
            yield _cause(
                f"{where}.name", "FieldValueInvalid", f"Invalid value: {name!r}: {problem}"
            )
        if name in seen:
            yield _cause(f"{where}.name", "FieldValueDuplicate", f"Duplicate value: {name!r}")
        seen.add(name)
    if not container.get("image"):
        yield _cause(f"{where}.image", "FieldValueRequired", "Required value")
    for index, port in enumerate(container.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int) or not 0 < number < 65536:
            yield _cause(
                f"{where}.ports[{index}].containerPort",
                "FieldValueInvalid",
                f"Invalid value: {number!r}: must be between 1 and 65535, inclusive",
            )
    resources = container.get("resources") or {}
    parsed: dict[str, dict[str, Any]] = {}
    for part in ("requests", "limits"):
        values = resources.get(part) or {}
        causes = list(_quantity_map_causes(values, f"{where}.resources.{part}"))
        yield from causes
        if not causes:
            parsed[part] = {k: parse_quantity(v) for k, v in values.items()}
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for key, amount in requests.items():
        if key in limits and amount > limits[key]:
            yield _cause(
                f"{where}.resources.requests[{key}]",
                "FieldValueInvalid",
                f"Invalid value: {resources['requests'][key]!r}: must be less than or equal "
                f"to {key} limit of {resources['limits'][key]}",
            )


@functools.cache
def shared_validator() -> Validator:
    """One validator per process: its schema validators are costly to build and stateless,
    so every emulator (one per test) shares them."""
    return Validator()
