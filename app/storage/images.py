"""The image lists in Redis: one `ImageSet` per prepull configuration, plus known digests.

The elected refresher writes; every worker reads on each spawn form and spawn. A set of a
repository with thousands of tags is a few hundred kilobytes of JSON, so each process keeps
the parsed sets and re-reads them only when the version counter, bumped with every write,
has moved. Every write also publishes a notice; while the process's event hub is
subscribed to it (``ImageStore`` is a listener of the hub), the kept sets are known to be
current and a request costs no Redis round trip at all. Without the subscription (it is
reconnecting, or no hub runs) a request costs one small ``GET`` of the version.

Digests of ordinary tags are kept in a hash and never expire: under SQR-059 a release,
weekly or daily tag is never moved, so a digest learnt once (by the refresher, or by a spawn
that pinned a dropdown image) saves every later registry call for it. Alias tags do move and
are never stored there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, cast

import redis

from app.models.images import ImageSet


class ImageStore:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis = client
        self._sets_key = f"{prefix}images:sets"
        self._version_key = f"{prefix}images:version"
        self._digests_key = f"{prefix}images:digests"
        self._listed_key = f"{prefix}images:listed"
        self.channel = f"{prefix}images-changed"
        """Where every write is announced (see ``on_message``)."""
        self._lock = threading.Lock()
        self._cached: tuple[str | None, dict[str, ImageSet]] | None = None
        self._subscribed = False
        self._current = False
        """The kept sets are known to be the stored ones: loaded while subscribed, with no
        notice since."""
        self._notices = 0

    def save(self, image_set: ImageSet) -> None:
        """Store one configuration's set and tell every process to re-read."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(self._sets_key, image_set.config, json.dumps(image_set.to_json()))
        pipe.incr(self._version_key)
        pipe.publish(self.channel, "")
        pipe.execute()

    def save_listed(self, image_set: ImageSet) -> None:
        """Keep one configuration's set as its source lists it, before validation decides
        what of it is offered (``save``), so a finished validation can offer it again."""
        self._redis.hset(self._listed_key, image_set.config, json.dumps(image_set.to_json()))

    def listed(self, name: str) -> ImageSet | None:
        text = cast(str | None, self._redis.hget(self._listed_key, name))
        return ImageSet.from_json(json.loads(text)) if text else None

    def load(self) -> dict[str, ImageSet]:
        """Every stored set by configuration name (parsed once per version per process)."""
        with self._lock:
            if self._current and self._cached is not None:
                return self._cached[1]
            notices, subscribed = self._notices, self._subscribed
        version = cast(str | None, self._redis.get(self._version_key))
        with self._lock:
            cached = self._cached
        if cached is None or cached[0] != version or version is None:
            raw = cast(dict[str, str], self._redis.hgetall(self._sets_key))
            sets = {name: ImageSet.from_json(json.loads(text)) for name, text in raw.items()}
            cached = (version, sets)
        with self._lock:
            self._cached = cached
            # Current only if no notice came while reading: it may announce a later write.
            self._current = subscribed and self._subscribed and notices == self._notices
        return cached[1]

    # As a listener of the event hub ----------------------------------------------------

    def on_message(self, payload: str) -> None:
        """A write happened somewhere: the next load asks Redis again."""
        with self._lock:
            self._notices += 1
            self._current = False

    def on_subscription(self, active: bool) -> None:
        """Notices arrive (True) or may be missed (False); either way, ask Redis next."""
        with self._lock:
            self._subscribed = active
            self._notices += 1
            self._current = False

    def forget(self, names: list[str]) -> None:
        """Drop the sets of configurations that no longer exist."""
        if names:
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self._sets_key, *names)
            pipe.hdel(self._listed_key, *names)
            pipe.incr(self._version_key)
            pipe.publish(self.channel, "")
            pipe.execute()

    # Digests -------------------------------------------------------------------------

    def digests(self, references: list[str]) -> dict[str, str]:
        """The known digests of these references (``<registry>/<repository>:<tag>``)."""
        if not references:
            return {}
        values = cast(list[Any], self._redis.hmget(self._digests_key, references))
        return {ref: value for ref, value in zip(references, values, strict=True) if value}

    def remember_digests(self, digests: Mapping[str, str]) -> None:
        if digests:
            self._redis.hset(self._digests_key, mapping=cast(Mapping[Any, Any], digests))
