"""The image lists in Redis: one `ImageSet` per prepull configuration, plus known digests.

The elected refresher writes; every worker reads on each spawn form and spawn. A set of a
repository with thousands of tags is a few hundred kilobytes of JSON, so each process keeps
the parsed sets and re-reads them only when the version counter, bumped with every write,
has moved: a request costs one small ``GET``, not a download and a parse.

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
        self._lock = threading.Lock()
        self._cached: tuple[str | None, dict[str, ImageSet]] | None = None

    def save(self, image_set: ImageSet) -> None:
        """Store one configuration's set and tell every process to re-read."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(self._sets_key, image_set.config, json.dumps(image_set.to_json()))
        pipe.incr(self._version_key)
        pipe.execute()

    def load(self) -> dict[str, ImageSet]:
        """Every stored set by configuration name (parsed once per version per process)."""
        version = cast(str | None, self._redis.get(self._version_key))
        with self._lock:
            if self._cached is not None and self._cached[0] == version and version is not None:
                return self._cached[1]
        raw = cast(dict[str, str], self._redis.hgetall(self._sets_key))
        sets = {name: ImageSet.from_json(json.loads(text)) for name, text in raw.items()}
        with self._lock:
            self._cached = (version, sets)
        return sets

    def forget(self, names: list[str]) -> None:
        """Drop the sets of configurations that no longer exist."""
        if names:
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self._sets_key, *names)
            pipe.incr(self._version_key)
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
