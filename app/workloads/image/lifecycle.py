"""Only validated images reach users: what a refreshed image list may offer.

The refresher lists a source's images; this decides which of them users see. Every digest
the list holds gets a record (``app.workloads.image.models``) the first time it is seen, and a
validation is queued for it (one operation per digest, whichever worker runs it); a trusted
source's digests are validated at once by that same operation. The list stored for the
form, the spawns and the prepuller keeps only images whose digest is validated: an image
whose digest is not known cannot be validated and is left out too. When the recommended tag
moves to a digest still under test, the image recommended before stays recommended (if it is
still validated) until the new one passes. Of a validated source, only the newest
``retention`` validated builds of each class stay in service (the rest are retired), and a
digest the source no longer lists loses its record.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from app.engine.engine import Engine
from app.engine.kind import WorkloadRecords
from app.errors import ConflictError, NotFoundError
from app.models.config import Config, PrepullConfig
from app.models.image_tags import TagKind, parse_tag
from app.models.images import ImageSet, KnownImage
from app.models.workload import WorkloadStatus
from app.storage.events import EventType
from app.storage.images import ImageStore
from app.timestamps import iso_utc
from app.workloads.image.models import (
    UNDER_TEST,
    ImageRecord,
    ImageState,
    Transition,
)
from app.workloads.image.records import image_json, parse_image
from app.workloads.refs import IMAGE_KIND, image_ref

logger = logging.getLogger(__name__)

REFRESHER = "image refresher"
RETAINED_KINDS = frozenset({TagKind.RELEASE, TagKind.WEEKLY, TagKind.DAILY})
"""The classes retention counts builds of."""


def _now() -> str:
    return iso_utc(time.time()) or ""


class ImageLifecycle:
    """Records digests, queues their validations, and offers validated images only."""

    def __init__(
        self,
        config: Config,
        records: WorkloadRecords,
        images: ImageStore,
        engine: Engine | None,
    ) -> None:
        """``records``: the engine (``engine`` too, to queue validations), or a validation's
        run, which only publishes what it decided."""
        self._config = config
        self._records = records
        self._images = images
        self._engine = engine

    def records(self) -> dict[str, ImageRecord]:
        """Every digest's record, by digest."""
        raw = self._records.records(IMAGE_KIND)
        return {digest: parse_image(text) for digest, text in raw.items()}

    def admit(self, block: PrepullConfig, listed: ImageSet) -> ImageSet:
        """Keep ``listed``, record its new digests and queue their validations; the set as
        users may see it, stored for the form, the spawns and the prepuller.

        The new digests' records come first, the listing after: the catalog names a listed
        digest (a recommended build waiting for its validation) only once its record can be
        read, so an administrator following the one to the other never finds it missing."""
        records = self.records()
        self._forget_unlisted(block, listed, records)
        for image in listed.images:
            if image.digest is None:
                continue
            record = records.get(image.digest)
            if record is None:
                self._discover(block, image)
            elif record.state is ImageState.DISCOVERED and block.validation is not None:
                self._retry(record)
            elif image.reference not in record.references:
                self._also_known_as(record, image.reference)
        self._images.save_listed(listed)
        return self.publish(block.name)

    def _forget_unlisted(
        self, block: PrepullConfig, listed: ImageSet, records: dict[str, ImageRecord]
    ) -> None:
        """A digest its source no longer lists (its tags deleted, or too old to be listed)
        is ``deleting``, and its record goes. Labs running it keep running."""
        assert self._engine is not None
        digests = {image.digest for image in listed.images if image.digest}
        for record in records.values():
            if record.source != block.name or record.digest in digests:
                continue
            if record.state in UNDER_TEST or record.status is not WorkloadStatus.RUNNING:
                continue
            why = f"no longer listed by {block.name}"

            def deleting(raw: str, why: str = why) -> str:
                moved = parse_image(raw).moved(
                    ImageState.DELETING, at=_now(), by=REFRESHER, why=why
                )
                return image_json(replace(moved, status=WorkloadStatus.TERMINATING))

            self._engine.queue_delete(
                image_ref(record.digest),
                terminating=deleting,
                first_events=[(EventType.INFO, f"Deleting the record: {why}")],
            )
            logger.info("image %s is deleting: %s", record.digest, why)

    def publish(self, source: str) -> ImageSet:
        """Store what ``source`` offers now (after a validation ended, or a refresh)."""
        listed = self._images.listed(source) or ImageSet(config=source)
        previous = self._images.load().get(source)
        block = next((b for b in self._config.prepull if b.name == source), None)
        trusted = block is not None and block.validation is None
        if block is not None and not trusted:
            recommended = [
                listed.find(listed.recommended or ""),
                previous.find(previous.recommended or "") if previous else None,
            ]
            keep = {image.digest for image in recommended if image and image.digest}
            self._retire(block, listed, keep=keep)
        published = offered(listed, self.records(), previous, trusted=trusted)
        if published != previous:
            self._images.save(published)
        return published

    def _retire(self, block: PrepullConfig, listed: ImageSet, *, keep: set[str]) -> None:
        """Keep the newest ``retention`` validated builds of each class (release, weekly,
        daily) of a validated source in service; retire the older ones, but never those of
        ``keep``: the build the recommended tag names, and the one recommended until then
        (until its successor passes, it is the recommended one)."""
        records = self.records()
        by_kind: dict[TagKind, list[tuple[KnownImage, ImageRecord]]] = {}
        for image in listed.images:
            record = records.get(image.digest) if image.digest else None
            if record is None or record.state is not ImageState.VALIDATED:
                continue
            if image.kind in RETAINED_KINDS:
                by_kind.setdefault(image.kind, []).append((image, record))
        for kind, builds in by_kind.items():
            builds.sort(key=lambda pair: parse_tag(pair[0].tag).sort_key)
            seen: set[str] = set()
            kept = 0
            for image, record in builds:
                if record.digest in seen or record.digest in keep:
                    continue
                seen.add(record.digest)
                kept += 1
                if kept <= block.retention:
                    continue
                why = f"{block.retention} newer validated {kind.value} builds are in service"
                retired = record.moved(ImageState.RETIRED, at=_now(), by="retention", why=why)
                if self._records.put_if_idle(
                    ref=image_ref(record.digest),
                    record=image_json(retired),
                    expect=image_json(record),
                ):
                    logger.info("image %s (%s) is retired: %s", record.digest, image.tag, why)

    # An administrator's hand --------------------------------------------------------------

    def record(self, digest: str) -> ImageRecord:
        raw = self._records.record(image_ref(digest))
        if raw is None:
            raise NotFoundError(f"no image {digest}")
        return parse_image(raw)

    def revalidate(self, digest: str, *, by: str) -> ImageRecord:
        """Try the digest again: it goes back to ``discovered``, and is not offered until
        it passes again."""
        assert self._engine is not None
        current = self.record(digest)
        wanted = current.moved(
            ImageState.DISCOVERED, at=_now(), by=by, why="validation asked again"
        )
        queued = self._engine.queue_spawn(
            image_ref(digest),
            record=image_json(wanted),
            spec={"reference": current.references[0]},
            secret=None,
            first_events=[(EventType.INFO, f"Re-validation asked by {by}")],
            expect=image_json(current),
        )
        if not queued.queued:
            raise ConflictError(f"image {digest} is being validated; ask again once it is done")
        logger.info("image %s is discovered again: validation asked by %s", digest, by)
        self.publish(current.source)
        return wanted

    def decide(self, digest: str, state: ImageState, *, by: str, why: str) -> ImageRecord:
        """Validate or reject the digest by hand (recorded with who and why)."""
        current = self.record(digest)
        wanted = current.moved(state, at=_now(), by=by, why=why)
        if not self._records.put_if_idle(
            ref=image_ref(digest), record=image_json(wanted), expect=image_json(current)
        ):
            raise ConflictError(f"image {digest} is being validated; ask again once it is done")
        logger.info("image %s is %s by %s: %s", digest, state.value, by, why)
        self.publish(current.source)
        return wanted

    def _discover(self, block: PrepullConfig, image: KnownImage) -> None:
        """Record a new digest: validated at once for a trusted source, else queued for its
        validation."""
        assert image.digest is not None and self._engine is not None
        at = iso_utc(time.time()) or ""
        why = f"listed by {block.name} as {image.reference}"
        record = ImageRecord(
            digest=image.digest,
            source=block.name,
            references=[image.reference],
            state=ImageState.DISCOVERED,
            history=[Transition(ImageState.DISCOVERED, at, REFRESHER, why)],
        )
        if block.validation is None:
            trusted = record.moved(
                ImageState.VALIDATED, at=at, by=REFRESHER, why=f"source {block.name} is trusted"
            )
            if self._records.put_if_idle(
                ref=image_ref(image.digest), record=image_json(trusted), expect=None
            ):
                logger.info("image %s (%s) is validated: trusted", image.digest, image.reference)
            return
        queued = self._engine.queue_spawn(
            image_ref(image.digest),
            record=image_json(record),
            spec={"reference": image.reference},
            secret=None,
            first_events=[(EventType.INFO, f"Discovered {image.reference}")],
        )
        if queued.queued:
            logger.info("image %s (%s) discovered", image.digest, image.reference)

    def _retry(self, record: ImageRecord) -> None:
        """Queue the validation of a digest left discovered (one that could not run: no
        nodes, its deadline), unless one is queued already; each refresh tries again."""
        assert self._engine is not None
        queued = self._engine.queue_spawn(
            image_ref(record.digest),
            record=image_json(record),
            spec={"reference": record.references[0]},
            secret=None,
            first_events=[(EventType.INFO, "Validation tried again")],
            expect=image_json(record),
        )
        if queued.queued:
            logger.info("image %s: its validation is tried again", record.digest)

    def _also_known_as(self, record: ImageRecord, reference: str) -> None:
        """Another tag names the digest (an alias moved to it): remember that tag too."""
        wanted = replace(record, references=[*record.references, reference])
        self._records.put_if_idle(
            ref=image_ref(record.digest), record=image_json(wanted), expect=image_json(record)
        )


def offered(
    listed: ImageSet,
    records: dict[str, ImageRecord],
    previous: ImageSet | None,
    *,
    trusted: bool,
) -> ImageSet:
    """The images of ``listed`` whose digest is validated, and the recommended one: the
    listed one if validated, else the one recommended before if it still is. A trusted
    source's images are offered unless rejected or retired, those whose digest is not known
    yet too (a spawn pins them)."""

    def validated(image: KnownImage | None) -> bool:
        if image is None:
            return False
        record = records.get(image.digest) if image.digest is not None else None
        if trusted:
            return record is None or record.state is ImageState.VALIDATED
        return record is not None and record.state is ImageState.VALIDATED

    images = [image for image in listed.images if validated(image)]
    kept = {image.reference for image in images}
    recommended = listed.recommended if listed.recommended in kept else None
    if recommended is None and listed.recommended is not None and previous is not None:
        before = previous.find(previous.recommended) if previous.recommended else None
        if validated(before):
            assert before is not None
            recommended = before.reference
            if before.reference not in kept:
                images.insert(0, before)
                kept.add(before.reference)
    prepull = [reference for reference in listed.prepull if reference in kept]
    if recommended is not None and recommended not in prepull:
        prepull.insert(0, recommended)
    return ImageSet(
        config=listed.config,
        images=tuple(images),
        prepull=tuple(prepull),
        recommended=recommended,
        refreshed=listed.refreshed,
        error=listed.error,
        failed=listed.failed,
    )
