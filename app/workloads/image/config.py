"""Schema of the image kind's sections of the configuration: ``prepull`` (the sources of lab
images, DMTN-222 blocks, and how each image is validated), ``images`` (reading the
registries) and ``prepuller`` (pulling images onto nodes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    DNS_LABEL,
    POSITIVE,
    ConfigModelSchema,
    ConfigSections,
    StrictCamelCaseSchema,
    camel_case,
    refuse_duplicates,
)
from app.models.config import (
    ImagesConfig,
    ImageValidation,
    PrepullConfig,
    PrepullerConfig,
    SimpleImage,
    SourceType,
)

_REGISTRY_HOST = validate.Regexp(
    r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$",
    error="must be a registry host, optionally with :port (no scheme, no path)",
)
_REPOSITORY = validate.Regexp(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$",
    error="must be a repository path of lowercase letters, digits, '.', '_', '-' and '/'",
)
_PATH_COMPONENT = validate.Regexp(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$",
    error="must be lowercase letters, digits, '.', '_' and '-'",
)
_TAG = validate.Regexp(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", error="must be an image tag (at most 128 characters)"
)
_DIGEST = validate.Regexp(r"^sha256:[0-9a-f]{64}$", error="must be sha256:<64 hex digits>")
_TAGGED_REFERENCE = validate.Regexp(
    r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?"
    r"/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
    error="must be <registry>/<repository>:<tag>",
)
_SOURCE_KEYS = {
    SourceType.RUBIN: ("registry", "docker"),
    SourceType.RUBIN_GAR: ("gar",),
    SourceType.SIMPLE: ("images",),
}
_REGISTRY_KEYS = (
    "registry",
    "docker",
    "gar",
    "recommendedTag",
    "numReleases",
    "numWeeklies",
    "numDailies",
    "cycle",
    "aliasTags",
)


class DockerSourceSchema(StrictCamelCaseSchema):
    repository = fields.String(required=True, validate=_REPOSITORY)


class GarSourceSchema(StrictCamelCaseSchema):
    repository = fields.String(required=True, validate=_PATH_COMPONENT)
    image = fields.String(required=True, validate=_PATH_COMPONENT)
    project_id = fields.String(required=True, validate=_PATH_COMPONENT)
    location = fields.String(required=True, validate=_PATH_COMPONENT)


class SimpleImageSchema(ConfigModelSchema):
    model = SimpleImage

    url = fields.String(required=True, validate=_TAGGED_REFERENCE)
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    digest = fields.String(load_default=None, validate=_DIGEST)


class ImageValidationSchema(ConfigModelSchema):
    model = ImageValidation

    command = fields.List(
        fields.String(validate=validate.Length(min=1)),
        required=True,
        validate=validate.Length(min=1),
        metadata={"description": "What runs in the image under test; exit 0 passes."},
    )
    timeout_seconds = fields.Float(load_default=300.0, validate=POSITIVE, attribute="timeout")
    size = fields.String(load_default="small", validate=validate.Length(min=1))
    nodes = fields.Integer(load_default=1, validate=validate.Range(min=1, max=20))


class PrepullSchema(ConfigModelSchema):
    """A DMTN-222 prepull block: a source of lab images and which of them to prepull."""

    model = PrepullConfig

    name = fields.String(required=True, validate=DNS_LABEL)
    type = fields.Enum(SourceType, by_value=True, required=True)
    registry = fields.String(load_default=None, validate=_REGISTRY_HOST)
    docker = fields.Nested(DockerSourceSchema, load_default=None)
    gar = fields.Nested(GarSourceSchema, load_default=None)
    recommended_tag = fields.String(load_default=None, validate=_TAG)
    num_releases = fields.Integer(load_default=1, validate=validate.Range(min=0, max=100))
    num_weeklies = fields.Integer(load_default=2, validate=validate.Range(min=0, max=100))
    num_dailies = fields.Integer(load_default=3, validate=validate.Range(min=0, max=100))
    cycle = fields.Integer(load_default=None, validate=validate.Range(min=0))
    alias_tags = fields.List(fields.String(validate=_TAG), load_default=list)
    images = fields.List(fields.Nested(SimpleImageSchema), load_default=list)
    groups = fields.List(fields.String(validate=validate.Length(min=1)), load_default=list)
    validation = fields.Nested(ImageValidationSchema, load_default=None, allow_none=True)
    retention = fields.Integer(load_default=2, validate=validate.Range(min=1, max=100))

    @validates_schema(pass_original=True)
    def _fields_of_type(self, data: dict[str, Any], original: Any, **_: Any) -> None:
        kind = data.get("type")
        if kind is None or not isinstance(original, dict):
            return
        for key in _SOURCE_KEYS[kind]:
            if not data.get(key):
                raise ValidationError(f"required for type {kind.value}", key)
        unused: tuple[str, ...] = _REGISTRY_KEYS if kind is SourceType.SIMPLE else ("images",)
        if kind is SourceType.RUBIN:
            unused = ("gar", "images")
        elif kind is SourceType.RUBIN_GAR:
            unused = ("docker", "images")
        for key in unused:
            if key in original:
                raise ValidationError(f"not used by type {kind.value}", key)

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        """The source's registry and repository in place of the keys that name them."""
        kind: SourceType = data["type"]
        registry, repository = data["registry"], None
        if kind is SourceType.RUBIN:
            repository = data["docker"]["repository"]
        elif kind is SourceType.RUBIN_GAR:
            gar = data["gar"]
            registry = registry or f"{gar['location']}-docker.pkg.dev"
            repository = f"{gar['project_id']}/{gar['repository']}/{gar['image']}"
        document = _document(data, registry)
        del data["docker"], data["gar"]
        return {**data, "registry": registry, "repository": repository, "document": document}


def _document(data: dict[str, Any], registry: str | None) -> dict[str, Any]:
    """The block as an operator wrote it (camelCase), with defaults filled in."""
    kind: SourceType = data["type"]
    document: dict[str, Any] = {"name": data["name"], "type": kind.value}
    if kind is SourceType.SIMPLE:
        document["images"] = [
            {"url": i.url, "name": i.name, **({"digest": i.digest} if i.digest else {})}
            for i in data["images"]
        ]
    else:
        document["registry"] = registry
        if kind is SourceType.RUBIN:
            document["docker"] = {"repository": data["docker"]["repository"]}
        else:
            gar = data["gar"]
            document["gar"] = {
                "repository": gar["repository"],
                "image": gar["image"],
                "projectId": gar["project_id"],
                "location": gar["location"],
            }
        for key in ("recommended_tag", "num_releases", "num_weeklies", "num_dailies", "cycle"):
            if data[key] is not None:
                document[camel_case(key)] = data[key]
        if data["alias_tags"]:
            document["aliasTags"] = list(data["alias_tags"])
    if data["groups"]:
        document["groups"] = list(data["groups"])
    validation: ImageValidation | None = data["validation"]
    if validation is not None:
        document["validation"] = {
            "command": list(validation.command),
            "timeoutSeconds": validation.timeout,
            "size": validation.size,
            "nodes": validation.nodes,
        }
    document["retention"] = data["retention"]
    return document


class ImagesSchema(ConfigModelSchema):
    model = ImagesConfig

    refresh_seconds = fields.Float(load_default=300.0, validate=validate.Range(min=1))
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    request_timeout = fields.Float(load_default=5.0, validate=POSITIVE)
    credentials_secret = fields.String(load_default=None, validate=DNS_LABEL)
    insecure_registries = fields.List(fields.String(validate=_REGISTRY_HOST), load_default=list)


class PrepullerSchema(ConfigModelSchema):
    model = PrepullerConfig

    enabled = fields.Boolean(load_default=True)
    interval_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=0.05))
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    pulls_per_node = fields.Integer(load_default=1, validate=validate.Range(min=1, max=100))
    max_pulls = fields.Integer(load_default=20, validate=validate.Range(min=1, max=10000))
    pull_timeout = fields.Float(load_default=900.0, validate=POSITIVE)
    retry_seconds = fields.Float(load_default=60.0, validate=POSITIVE)
    max_retry_seconds = fields.Float(load_default=1800.0, validate=POSITIVE)


def _unique_names(blocks: Sequence[PrepullConfig]) -> None:
    refuse_duplicates((block.name for block in blocks), "names")


SECTIONS: ConfigSections = {
    "prepull": fields.List(
        fields.Nested(PrepullSchema),
        required=True,
        validate=[validate.Length(min=1), _unique_names],
    ),
    "images": fields.Nested(ImagesSchema, load_default=lambda: ImagesSchema().load({})),
    "prepuller": fields.Nested(PrepullerSchema, load_default=lambda: PrepullerSchema().load({})),
}
"""The image kind's sections of the configuration: the prepull blocks every deployment
writes, and how the registries are read and the images pulled."""
