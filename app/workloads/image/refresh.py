"""The elected image refresher: keeps every prepull configuration's image list in Redis.

Exactly one worker across all processes and replicas leads (a ``LeadershipLease``) and, every
``images.refreshSeconds``, lists each registry source's tags, learns the digests it needs
(aliases, which move, every time; other tags once, since SQR-059 tags never move) and stores
the resulting `ImageSet`. Requests only ever read what it stored, so a slow or broken
registry never delays a spawn form or a spawn.

When a registry fails, the previous list is kept and marked with the error and its time, so
the form still renders and can say the list may be out of date.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import redis

from app.engine.leadership import ElectedLoop, Tenure
from app.errors import ServiceError
from app.models.config import Config, PrepullConfig, SourceType
from app.models.images import ImageSet
from app.storage.images import ImageStore
from app.storage.registries import RegistryDirectory, split_reference
from app.storage.registry import RegistryNotFound, is_valid_tag
from app.workloads.image.catalog import build_image_set, build_simple_set, digest_candidates
from app.workloads.image.lifecycle import ImageLifecycle

logger = logging.getLogger(__name__)

LEASE_NAME = "image-refresher"
DIGEST_LOOKUPS_AT_ONCE = 4
"""Concurrent manifest requests per refresh: fast enough for a new repository's first
pass, gentle enough for registries that rate-limit (Docker Hub does)."""


class ImageRefresher(ElectedLoop):
    """This process's candidate for the refresher role; ``start`` once, ``stop`` at exit."""

    def __init__(
        self,
        config: Config,
        store: ImageStore,
        registries: RegistryDirectory,
        client: redis.Redis,
        *,
        owner: str | None = None,
        lifecycle: ImageLifecycle | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._lifecycle = lifecycle
        self._registries = registries
        super().__init__(
            client,
            key_prefix=config.redis.key_prefix,
            loop=LEASE_NAME,
            ttl_seconds=config.images.lease_seconds,
            owner=owner,
        )

    def _lead(self, tenure: Tenure) -> None:
        while not tenure.ended:
            self.refresh_all()
            tenure.wait(self._config.images.refresh_seconds)

    # One pass ------------------------------------------------------------------------

    def refresh_all(self) -> dict[str, ImageSet]:
        """Refresh every configuration once; one failing source never stops the others."""
        results: dict[str, ImageSet] = {}
        for block in self._config.prepull:
            try:
                results[block.name] = self.refresh(block)
            except redis.RedisError as exc:
                logger.warning("image refresh of %s: Redis unavailable (%s)", block.name, exc)
            except Exception:
                logger.exception("image refresh of %s failed", block.name)
        try:
            stored = set(self._store.load())
            self._store.forget(sorted(stored - {b.name for b in self._config.prepull}))
        except redis.RedisError as exc:
            logger.warning("image refresh: cannot prune old lists (%s)", exc)
        return results

    def refresh(self, block: PrepullConfig) -> ImageSet:
        now = time.time()
        if block.type is SourceType.SIMPLE:
            image_set = self._refresh_simple(block, now)
        else:
            image_set = self._refresh_registry(block, now)
        if self._lifecycle is not None and image_set.refreshed == now:
            # What users are offered of a fresh list is decided by the images' validation.
            return self._lifecycle.admit(block, image_set)
        self._store.save(image_set)
        return image_set

    def _refresh_registry(self, block: PrepullConfig, now: float) -> ImageSet:
        assert block.registry is not None and block.repository is not None
        source = block.source
        try:
            client = self._registries.client(block.registry)
            listed = client.list_tags(block.repository)
            # A tag Docker would not accept cannot be run, and may be an attempt to smuggle
            # markup into the form: it is dropped here, before anything shows it.
            tags = [tag for tag in listed if is_valid_tag(tag)]
            if len(tags) < len(listed):
                logger.warning(
                    "image list %s: ignored %d malformed tags", block.name, len(listed) - len(tags)
                )
            aliases = {*block.alias_tags, *filter(None, [block.recommended_tag])}
            known = self._store.digests([f"{source}:{t}" for t in tags if t not in aliases])
            digests = {ref.rpartition(":")[2]: digest for ref, digest in known.items()}
            wanted = [t for t in digest_candidates(block, tags) if t in aliases or t not in digests]
            fetched = self._fetch_digests(block.registry, block.repository, wanted)
        except ServiceError as exc:
            return self._failed(block, now, exc.message)
        self._store.remember_digests(
            {f"{source}:{tag}": d for tag, d in fetched.items() if tag not in aliases}
        )
        digests.update(fetched)
        image_set = build_image_set(block, tags, digests, refreshed=now)
        logger.info(
            "image list %s: %d tags, %d to prepull, %d digests fetched",
            block.name,
            len(tags),
            len(image_set.prepull),
            len(fetched),
        )
        return image_set

    def _refresh_simple(self, block: PrepullConfig, now: float) -> ImageSet:
        """A fixed list needs only digests for images configured without one; an image
        whose digest cannot be learnt is still offered (the spawn pins it later)."""
        unpinned = [image.url for image in block.images if image.digest is None]
        digests = self._store.digests(unpinned)
        problems: list[str] = []
        learnt: dict[str, str] = {}
        for url in (u for u in unpinned if u not in digests):
            try:
                host, repository, tag = split_reference(url)
                learnt[url] = self._registries.client(host).digest(repository, tag)
            except ServiceError as exc:
                problems.append(exc.message)
        self._store.remember_digests(learnt)
        image_set = build_simple_set(block, {**digests, **learnt}, refreshed=now)
        if problems:
            return ImageSet(
                config=image_set.config,
                images=image_set.images,
                prepull=image_set.prepull,
                recommended=image_set.recommended,
                refreshed=now,
                error="; ".join(problems),
                failed=now,
            )
        return image_set

    def _fetch_digests(self, host: str, repository: str, tags: Iterable[str]) -> dict[str, str]:
        """Digests of ``tags``; a tag deleted since the listing is simply left out."""
        client = self._registries.client(host)

        def lookup(tag: str) -> tuple[str, str | None]:
            try:
                return tag, client.digest(repository, tag)
            except RegistryNotFound:
                return tag, None

        wanted = list(tags)
        if not wanted:
            return {}
        with ThreadPoolExecutor(max_workers=DIGEST_LOOKUPS_AT_ONCE) as pool:
            results = list(pool.map(lookup, wanted))
        return {tag: digest for tag, digest in results if digest is not None}

    def _failed(self, block: PrepullConfig, now: float, message: str) -> ImageSet:
        logger.warning("image list %s not refreshed: %s", block.name, message)
        previous = self._store.load().get(block.name)
        if previous is None:
            return ImageSet(config=block.name, error=message, failed=now)
        return replace(previous, error=message, failed=now)
