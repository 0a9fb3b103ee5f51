"""What a CustomResourceDefinition's schema does to the objects written of its kind.

kube-apiserver treats a custom object in three steps, all from the version's
``openAPIV3Schema``: it prunes fields the schema does not know (unless
``x-kubernetes-preserve-unknown-fields`` keeps them; ``fieldValidation=Strict`` refuses them
instead), fills in ``default`` values, and validates what is left. The schema is OpenAPI v3's
subset that Kubernetes calls structural; here it is turned into a JSON Schema once per version
(``nullable`` allows null, ``x-kubernetes-int-or-string`` allows an integer or a string,
``x-kubernetes-embedded-resource`` keeps ``apiVersion``, ``kind`` and ``metadata``) and checked
with ``jsonschema``.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import jsonschema

Schema = dict[str, Any]

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_EMBEDDED = "x-kubernetes-embedded-resource"
_TRANSLATED = (
    "type",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "required",
)


def prune(obj: Any, schema: Schema, *, root: bool = False) -> list[str]:
    """Remove from ``obj`` (in place) every field ``schema`` does not know; the paths removed."""
    removed: list[str] = []
    _prune(obj, schema, "", removed, root=root)
    return removed


def _prune(value: Any, schema: Schema, path: str, removed: list[str], *, root: bool) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        keep_unknown = bool(schema.get(_PRESERVE)) or bool(additional)
        for key in list(value):
            if (root or schema.get(_EMBEDDED)) and key in _ROOT_FIELDS:
                continue
            child = (properties or {}).get(key)
            if child is None and isinstance(additional, dict):
                child = additional
            if child is None:
                if not keep_unknown:
                    del value[key]
                    removed.append(f"{path}.{key}" if path else key)
                continue
            _prune(value[key], child, f"{path}.{key}" if path else key, removed, root=False)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _prune(item, schema["items"], f"{path}[{index}]", removed, root=False)


def apply_defaults(obj: Any, schema: Schema) -> None:
    """Fill in (in place) the ``default`` of every absent property whose parent is present."""
    if isinstance(obj, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key not in obj and "default" in child:
                obj[key] = copy.deepcopy(child["default"])
            if key in obj:
                apply_defaults(obj[key], child)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key, value in obj.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(value, additional)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def validator(schema: Schema) -> jsonschema.protocols.Validator:
    """A validator of objects against a CRD version's schema (built once per schema)."""
    return _validator(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    translated = to_json_schema(json.loads(schema_json), root=True)
    return jsonschema.Draft7Validator(translated)


def to_json_schema(schema: Schema, *, root: bool = False) -> Schema:
    """A structural OpenAPI schema as JSON Schema (draft 7)."""
    out: Schema = {k: schema[k] for k in _TRANSLATED if k in schema}
    if "properties" in schema:
        out["properties"] = {k: to_json_schema(v) for k, v in schema["properties"].items()}
        if root or schema.get(_EMBEDDED):
            for name in _ROOT_FIELDS:
                out["properties"].pop(name, None)
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = to_json_schema(schema["additionalProperties"])
    if isinstance(schema.get("items"), dict):
        out["items"] = to_json_schema(schema["items"])
    for combinator in ("allOf", "anyOf", "oneOf"):
        if combinator in schema:
            out[combinator] = [to_json_schema(s) for s in schema[combinator]]
    if "not" in schema:
        out["not"] = to_json_schema(schema["not"])
    if schema.get(_INT_OR_STRING):
        out.pop("type", None)
        out["anyOf"] = [*out.get("anyOf", []), {"type": "integer"}, {"type": "string"}]
    if schema.get("nullable"):
        out = {"anyOf": [{"type": "null"}, out]}
    return out
