"""Records kept as JSON read back by their fields' types (``app.models.fields_json``)."""

from __future__ import annotations

import json

import pytest

from app.models.admin import AuditEntry
from app.models.fields_json import from_fields
from app.models.image_tags import TagKind
from app.models.images import ImageSet, KnownImage
from app.models.usage import Usage


def _image(tag: str, *aliases: str) -> KnownImage:
    return KnownImage(
        reference=f"registry.test/lab:{tag}",
        tag=tag,
        name=tag.upper(),
        kind=TagKind.WEEKLY,
        digest=None if aliases else "sha256:" + "0" * 64,
        aliases=aliases,
    )


def test_nested_records_come_back_whole() -> None:
    image_set = ImageSet(
        config="main",
        images=(_image("w_2024_40", "recommended"), _image("w_2024_39")),
        prepull=("registry.test/lab:w_2024_40",),
        recommended="registry.test/lab:w_2024_40",
        refreshed=1.5,
    )
    read = ImageSet.from_json(json.loads(json.dumps(image_set.to_json())))
    assert read == image_set
    assert isinstance(read.images, tuple) and isinstance(read.images[0].aliases, tuple)
    assert read.images[0].kind is TagKind.WEEKLY
    assert read.find("registry.test/lab:w_2024_39") == image_set.images[1]


def test_values_take_their_fields_types() -> None:
    entry = AuditEntry.from_json(
        '{"at": 7, "actor": "ops", "action": "drain", "target": "n1", "outcome": "ok",'
        ' "status": "200"}'
    )
    assert entry == AuditEntry(7.0, "ops", "drain", "n1", "ok", 200)
    assert isinstance(entry.at, float) and isinstance(entry.status, int)


def test_missing_fields_take_defaults_and_unknown_keys_are_ignored() -> None:
    usage = Usage.from_json({"kernels": 1, "cpu": 2, "later": 3})
    assert usage == Usage(kernels=1, cpu=2.0)
    assert isinstance(usage.cpu, float)


def test_a_required_field_missing_or_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(KeyError):
        from_fields(KnownImage, {"reference": "r", "tag": "t", "kind": "weekly"})
    with pytest.raises(ValueError):
        from_fields(KnownImage, {"reference": "r", "tag": "t", "name": "n", "kind": "none"})
    with pytest.raises(TypeError):
        from_fields(ImageSet, {"config": "main", "images": 3})
