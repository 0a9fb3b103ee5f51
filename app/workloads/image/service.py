"""Which images a user is offered, and what an image choice in a spawn request resolves to.

Everything here reads the lists the elected refresher stored in Redis (`ImageStore`), never a
registry, so the spawn form and the spawn route answer in milliseconds whatever the state of
the registries. A fixed (``simple``) configuration is known from the configuration itself even
before its first refresh; a registry source is known only once it has been listed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from app.engine.reads import WorkloadReads
from app.errors import DependencyUnavailableError, InvalidRequestError
from app.models.config import Config, PrepullConfig, SourceType
from app.models.identity import UserInfo
from app.models.image_tags import TagKind, parse_tag
from app.models.images import ImageChoice, ImageClass, ImageSet, KnownImage, LabImage
from app.storage.images import ImageStore
from app.storage.prepull import PrepullStore
from app.timestamps import iso_utc
from app.workloads.entitlements import in_any_group
from app.workloads.image.catalog import build_simple_set
from app.workloads.image.models import ImageState
from app.workloads.image.records import parse_image
from app.workloads.refs import image_ref

STALE_AFTER_REFRESHES = 3
"""A list not refreshed for this many refresh intervals is reported as possibly stale."""

_CLASS_KINDS = {
    ImageClass.LATEST_RELEASE: TagKind.RELEASE,
    ImageClass.LATEST_WEEKLY: TagKind.WEEKLY,
    ImageClass.LATEST_DAILY: TagKind.DAILY,
}


@dataclass(frozen=True)
class ImageMenu:
    """The images the form shows one user: the prepulled ones (recommended first, always) as
    radio buttons, every other one in the dropdown, and a warning when the list may be stale."""

    prepulled: list[KnownImage]
    others: list[KnownImage]
    warning: str | None


class ImageService:
    def __init__(
        self,
        config: Config,
        store: ImageStore,
        prepulls: PrepullStore | None = None,
        *,
        clock: Callable[[], float] = time.time,
        records: WorkloadReads | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._records = records
        """Where images' validation records are, to say why an image is not offered."""
        self._prepulls = prepulls if config.prepuller.enabled else None
        self._clock = clock

    # Lists ---------------------------------------------------------------------------

    def image_sets(self) -> list[tuple[PrepullConfig, ImageSet]]:
        """Every configuration with its current set, in configuration order."""
        stored = self._store.load()
        result = []
        for block in self._config.prepull:
            image_set = stored.get(block.name)
            if image_set is None:
                image_set = self._unrefreshed(block)
            result.append((block, image_set))
        return result

    def unread(self) -> list[str]:
        """Configurations whose image list no refresh has tried to read yet (a failed read
        counts as tried: its error is then what the form and a spawn report). Until every
        one has been tried, a spawn may be refused for want of a list, so the service is not
        ready."""
        stored = self._store.load()
        return [block.name for block in self._config.prepull if block.name not in stored]

    def sets_for(self, user: UserInfo) -> list[tuple[PrepullConfig, ImageSet]]:
        return [(b, s) for b, s in self.image_sets() if in_any_group(user, b.groups)]

    def menu(self, user: UserInfo) -> ImageMenu:
        sets = self.sets_for(user)
        prepulled: list[KnownImage] = []
        seen: set[str] = set()
        recommended = self._recommended(sets)
        if recommended is not None:
            # Shown under the alias's name ("Recommended (Weekly 2024_42)"), run as itself.
            prepulled.append(dataclasses.replace(recommended, name=self._recommended_name(sets)))
            seen.add(recommended.reference)
        # With the prepuller on, only images on every eligible node get a radio button, so
        # picking one never means waiting for a pull; the rest wait in the dropdown.
        everywhere = self._prepulls.everywhere() if self._prepulls is not None else None
        for _, image_set in sets:
            for image in image_set.prepulled_images():
                if everywhere is not None and image.reference not in everywhere:
                    continue
                if image.reference not in seen:
                    prepulled.append(image)
                    seen.add(image.reference)
        others = []
        for _, image_set in sets:
            for image in image_set.images:
                if image.reference not in seen:
                    others.append(image)
                    seen.add(image.reference)
        return ImageMenu(prepulled=prepulled, others=others, warning=self._warning(sets))

    def is_stale(self, image_set: ImageSet) -> bool:
        if image_set.refreshed is None:
            return True
        if image_set.error is not None and (image_set.failed or 0) >= image_set.refreshed:
            return True
        limit = STALE_AFTER_REFRESHES * self._config.images.refresh_seconds
        return self._clock() - image_set.refreshed > limit

    # Resolution ----------------------------------------------------------------------

    def resolve(
        self, choice: ImageChoice, user: UserInfo, *, unvalidated: bool = False
    ) -> LabImage:
        """The image a spawn runs; a 4xx naming ``choice.field`` if it is not on offer. With
        ``unvalidated`` (an administrator's choice), an image its source lists is run even
        though it is not validated."""
        sets = self.sets_for(user)
        if unvalidated and choice.reference is not None:
            for block, _ in sets:
                listed = self._store.listed(block.name)
                image = listed.find(choice.reference) if listed is not None else None
                if image is not None:
                    return self._with_known_digest(image)
        if choice.image_class is not None:
            image = self._by_class(choice.image_class, sets)
            if image is None:
                raise InvalidRequestError(
                    f"no {choice.image_class.value} image is available", field=choice.field
                )
            return image.as_lab_image()
        if choice.tag is not None:
            for _, image_set in sets:
                image = image_set.find_tag(choice.tag)
                if image is not None:
                    return self._with_known_digest(image)
            raise InvalidRequestError(
                f"no image with tag {choice.tag!r} is offered; choose one the spawn form offers",
                field=choice.field,
            )
        reference = choice.reference or ""
        for _, image_set in sets:
            image = image_set.find(reference)
            if image is not None:
                return self._with_known_digest(image)
        self._explain_unknown(reference, choice.field, sets)

    def _explain_unknown(
        self, reference: str, field: str, sets: list[tuple[PrepullConfig, ImageSet]]
    ) -> NoReturn:
        for block, image_set in self.image_sets():
            if image_set.find(reference) is not None:
                raise InvalidRequestError(
                    f"image {reference!r} is only for members of {', '.join(block.groups)}",
                    field=field,
                )
        self._explain_unvalidated(reference, field, sets)
        for block, image_set in sets:
            source = block.source
            unlisted = image_set.refreshed is None and not image_set.images
            if source is not None and reference.startswith(f"{source}:") and unlisted:
                raise DependencyUnavailableError(
                    f"the image list of {block.name} has not been read from its registry yet; "
                    "try again shortly"
                )
        raise InvalidRequestError(
            f"unknown image {reference!r}; choose one offered by the spawn form", field=field
        )

    def _explain_unvalidated(
        self, reference: str, field: str, sets: list[tuple[PrepullConfig, ImageSet]]
    ) -> None:
        """A 422 saying so, for an image its source lists but that is not validated."""
        for block, _ in sets:
            listed = self._store.listed(block.name)
            image = listed.find(reference) if listed is not None else None
            if image is None:
                continue
            raw = None
            if image.digest is not None and self._records is not None:
                raw = self._records.record(image_ref(image.digest))
            record = parse_image(raw) if raw is not None else None
            if record is None:
                state = "its digest is not known yet"
            elif record.state is ImageState.REJECTED and record.validation is not None:
                state = f"it was rejected: {record.validation.reason}"
            else:
                state = f"it is {record.state.value}"
            raise InvalidRequestError(
                f"image {reference!r} is not validated ({state}); only validated images may "
                "be spawned",
                field=field,
            )

    def _by_class(
        self, image_class: ImageClass, sets: list[tuple[PrepullConfig, ImageSet]]
    ) -> KnownImage | None:
        if image_class is ImageClass.RECOMMENDED:
            return self._recommended(sets)
        kind = _CLASS_KINDS[image_class]
        candidates = [i for _, s in sets if (i := s.latest(kind)) is not None]
        if not candidates:
            return None
        return min(candidates, key=lambda i: parse_tag(i.tag).sort_key)

    @staticmethod
    def _recommended_name(sets: list[tuple[PrepullConfig, ImageSet]]) -> str:
        for block, image_set in sets:
            if image_set.recommended is None or block.source is None:
                continue
            shown = image_set.find(f"{block.source}:{block.recommended_tag}") or image_set.find(
                image_set.recommended
            )
            return shown.name if shown is not None else image_set.recommended
        return "Recommended"

    @staticmethod
    def _recommended(sets: list[tuple[PrepullConfig, ImageSet]]) -> KnownImage | None:
        for _, image_set in sets:
            if image_set.recommended is not None:
                image = image_set.find(image_set.recommended)
                if image is not None:
                    return image
        return None

    def _with_known_digest(self, image: KnownImage) -> LabImage:
        """The image, pinned by a digest an earlier spawn learnt if the list lacks one."""
        if image.digest is not None or image.kind is TagKind.ALIAS:
            return image.as_lab_image()
        digest = self._store.digests([image.reference]).get(image.reference)
        return LabImage(reference=image.reference, name=image.name, digest=digest)

    def remember_digest(self, reference: str, digest: str) -> None:
        """Record a digest a spawn learnt, so the next spawn of that tag skips the registry.
        Alias tags move, so theirs are never recorded."""
        for _, image_set in self.image_sets():
            image = image_set.find(reference)
            if image is not None and image.kind is TagKind.ALIAS:
                return
        self._store.remember_digests({reference: digest})

    # Reports -------------------------------------------------------------------------

    def _warning(self, sets: list[tuple[PrepullConfig, ImageSet]]) -> str | None:
        problems = []
        for block, image_set in sets:
            if block.type is SourceType.SIMPLE and image_set.error is None:
                continue
            if not self.is_stale(image_set):
                continue
            when = (
                f"last updated {iso_utc(image_set.refreshed)}"
                if image_set.refreshed is not None
                else "never read yet"
            )
            problems.append(f"{block.name} ({when})")
        if not problems:
            return None
        return (
            "The list of images may be out of date: the registry could not be read for "
            + ", ".join(problems)
            + "."
        )

    def catalog(self) -> list[dict[str, object]]:
        """Every configuration's images by kind, for administrators."""
        result: list[dict[str, object]] = []
        for block, image_set in self.image_sets():
            by_kind: dict[str, list[dict[str, object]]] = {}
            for image in image_set.images:
                by_kind.setdefault(image.kind.value, []).append(image.to_json())
            recommended = image_set.find(image_set.recommended or "")
            listed = self._store.listed(block.name)
            pending = None
            if listed is not None and listed.recommended not in (None, image_set.recommended):
                pending = listed.find(listed.recommended or "")
            withheld = self._withheld(listed, image_set)
            result.append(
                {
                    "name": block.name,
                    "type": block.type.value,
                    "source": block.source,
                    "refreshed": iso_utc(image_set.refreshed),
                    "stale": self.is_stale(image_set),
                    "error": image_set.error,
                    "failed": iso_utc(image_set.failed),
                    "recommended": recommended.to_json() if recommended else None,
                    "recommended_pending": pending.to_json() if pending else None,
                    "withheld": withheld,
                    "prepull": [i.to_json() for i in image_set.prepulled_images()],
                    "images": by_kind,
                }
            )
        return result

    def _withheld(self, listed: ImageSet | None, offered: ImageSet) -> list[dict[str, object]]:
        """The images with a known digest that the source lists but are not offered, each
        with its digest's state (``unknown`` before its record is made). Tags whose digest
        was never looked up (old ones of a large repository) are not listed."""
        if listed is None:
            return []
        withheld: list[dict[str, object]] = []
        for image in listed.images:
            if image.digest is None or offered.find(image.reference) is not None:
                continue
            raw = self._records.record(image_ref(image.digest)) if self._records else None
            state = parse_image(raw).state.value if raw is not None else "unknown"
            withheld.append({**image.to_json(), "state": state})
        return withheld

    @staticmethod
    def _unrefreshed(block: PrepullConfig) -> ImageSet:
        if block.type is SourceType.SIMPLE:
            return dataclasses.replace(build_simple_set(block, {}, refreshed=0.0), refreshed=None)
        return ImageSet(config=block.name)
