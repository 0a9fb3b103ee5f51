"""Lab images: what a registry offers, what the service knows of it, and what a lab runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.models.fields_json import from_fields
from app.models.image_tags import ParsedTag, TagKind, parse_tag


@dataclass(frozen=True)
class LabImage:
    """The image one lab runs: its reference (with tag), the name users see, and the digest
    it is pinned to (None only when no registry could tell)."""

    reference: str
    name: str
    digest: str | None


def image_to_json(image: LabImage) -> dict[str, Any]:
    return {"reference": image.reference, "name": image.name, "digest": image.digest}


def image_from_json(data: dict[str, Any]) -> LabImage:
    return from_fields(LabImage, data)


@dataclass(frozen=True)
class KnownImage:
    """One tag of a source (or one image of a fixed list) as the spawn form offers it.

    ``reference`` is ``<registry>/<repository>:<tag>``. ``aliases`` are the alias tags
    (``recommended``, ``latest_weekly``...) that point at the same digest. An alias tag
    itself is also a `KnownImage`, of kind ``alias``, so a user may pick it by name.
    """

    reference: str
    tag: str
    name: str
    kind: TagKind
    digest: str | None = None
    aliases: tuple[str, ...] = ()

    def as_lab_image(self) -> LabImage:
        return LabImage(reference=self.reference, name=self.name, digest=self.digest)

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "tag": self.tag,
            "name": self.name,
            "kind": self.kind.value,
            "digest": self.digest,
            "aliases": list(self.aliases),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KnownImage:
        return from_fields(cls, data)


@dataclass(frozen=True)
class ImageSet:
    """Everything one prepull configuration offers, as of its last refresh.

    ``images`` is in listing order (SQR-059 kinds, newest first). ``prepull`` holds the
    references to prepull, the recommended image first; ``recommended`` is the reference of
    the image the recommended tag points at (the real tag, not the alias), if any.
    ``refreshed`` is when the list was last read successfully; ``error`` and ``failed`` say
    why and when the latest attempt failed, if it did (the list is then kept as it was).
    """

    config: str
    images: tuple[KnownImage, ...] = ()
    prepull: tuple[str, ...] = ()
    recommended: str | None = None
    refreshed: float | None = None
    error: str | None = None
    failed: float | None = None
    _by_reference: dict[str, KnownImage] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._by_reference.update((image.reference, image) for image in self.images)

    def find(self, reference: str) -> KnownImage | None:
        return self._by_reference.get(reference)

    def find_tag(self, tag: str) -> KnownImage | None:
        return next((image for image in self.images if image.tag == tag), None)

    def prepulled_images(self) -> list[KnownImage]:
        return [self._by_reference[r] for r in self.prepull if r in self._by_reference]

    def latest(self, kind: TagKind) -> KnownImage | None:
        """The newest plain image of ``kind`` (no architecture suffix or free text), a
        general build before a SAL cycle build of the same kind."""
        plain = [(i, parsed) for i in self.images if (parsed := _plain(i.tag, kind)) is not None]
        general = [i for i, parsed in plain if parsed.cycle is None]
        candidates = general or [i for i, _ in plain]
        return candidates[0] if candidates else None

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "images": [image.to_json() for image in self.images],
            "prepull": list(self.prepull),
            "recommended": self.recommended,
            "refreshed": self.refreshed,
            "error": self.error,
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImageSet:
        return from_fields(cls, data)


def _plain(tag: str, kind: TagKind) -> ParsedTag | None:
    parsed = parse_tag(tag)
    plain = parsed.kind is kind and parsed.extra is None and parsed.architecture is None
    return parsed if plain else None


class ImageClass(StrEnum):
    """Ways to ask for "whatever is current" instead of naming an image."""

    RECOMMENDED = "recommended"
    LATEST_RELEASE = "latest-release"
    LATEST_WEEKLY = "latest-weekly"
    LATEST_DAILY = "latest-daily"


@dataclass(frozen=True)
class ImageChoice:
    """How the spawn request chose its image: a reference, a class or a tag (exactly one)."""

    reference: str | None = None
    image_class: ImageClass | None = None
    tag: str | None = None
    """A tag of the images on offer (nublado's ``image_tag``)."""
    field: str = "options.image"
    """The request field the choice came from, for error messages."""
