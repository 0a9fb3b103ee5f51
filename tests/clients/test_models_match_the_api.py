"""The client's models and the OpenAPI document say the same: each model has exactly the
fields of its schema, reads a body that holds only what the schema requires, and keeps every
value of a full one. A field added to a record and not to the client (or the reverse) fails
here, not in a user's notebook."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from flask import Flask
from labspawner import models

from app.extensions import api_ext

MODELS: dict[str, Any] = {
    "LabStatus": models.LabStatus,
    "Cluster": models.Cluster,
    "Kernel": models.Kernel,
    "App": models.App,
    "UserStatus": models.FileServerStatus,
}
"""Each client model by the name of the schema it reads."""

KNOWN_STATUSES = {
    models.STARTING,
    models.RUNNING,
    models.TERMINATING,
    models.FAILED,
    models.EXITED,
}


@pytest.fixture
def schemas(app: Flask) -> Mapping[str, Any]:
    return api_ext.document(app)["components"]["schemas"]  # type: ignore[no-any-return]


def _schema(schemas: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref") or next(
        (part["$ref"] for part in node.get("allOf", ()) if "$ref" in part), None
    )
    return schemas[ref.rsplit("/", 1)[-1]] if ref else node


def _sample(schemas: Mapping[str, Any], node: Mapping[str, Any], name: str) -> Any:
    """A value the schema allows, distinct enough to be recognised after a round trip."""
    node = _schema(schemas, node)
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type")
    if kind == "integer":
        return 7
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [_sample(schemas, node.get("items") or {}, name)]
    if kind == "object" or "properties" in node:
        if "properties" in node:
            return {key: _sample(schemas, value, key) for key, value in node["properties"].items()}
        extra = node.get("additionalProperties")
        return {"shell": _sample(schemas, extra, name) if isinstance(extra, Mapping) else "x"}
    return f"{name}-value"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_models_fields_are_its_schemas_properties(schemas: Mapping[str, Any], name: str) -> None:
    fields = {field.name for field in dataclasses.fields(MODELS[name])}
    assert fields == set(schemas[name]["properties"]), name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_reads_the_least_and_keeps_the_most_its_schema_allows(
    schemas: Mapping[str, Any], name: str
) -> None:
    schema, model = schemas[name], MODELS[name]
    properties = schema["properties"]
    full = {key: _sample(schemas, value, key) for key, value in properties.items()}
    least = {key: full[key] for key in schema.get("required", ())}

    model.from_json(least)
    read = model.from_json(full)
    for key, value in full.items():
        assert getattr(read, key) == value, f"{name}.{key}"


def test_every_status_the_api_names_is_one_the_client_knows(schemas: Mapping[str, Any]) -> None:
    for name in MODELS:
        if "status" not in schemas[name]["properties"]:
            continue  # a file server's user-status says ``running``
        status = _schema(schemas, schemas[name]["properties"]["status"])
        assert set(status.get("enum", ())) <= KNOWN_STATUSES, name
