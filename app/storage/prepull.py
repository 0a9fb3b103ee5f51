"""The prepuller's memory in Redis: its latest status report, and pulls that failed.

The status is written whole by the elected prepuller after every pass and read by the
prepull status route and the spawn form, so neither ever calls Kubernetes. Failures are kept
in Redis rather than in the leader's memory so that a new leader honours the back-off its
predecessor set instead of hammering a broken image at once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, cast

import redis

from app.models.fields_json import from_fields


@dataclass(frozen=True)
class PullFailure:
    """A pull that failed: why, how often in a row, and when it may be tried again."""

    image: str
    node: str
    reason: str
    attempts: int
    retry_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PullFailure:
        return from_fields(cls, data)


def failure_key(image: str, node: str) -> str:
    return f"{image}\n{node}"


class PrepullStore:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis = client
        self._status_key = f"{prefix}prepull:status"
        self._failures_key = f"{prefix}prepull:failures"
        self._everywhere_key = f"{prefix}prepull:everywhere"
        self._progress_key = f"{prefix}prepull:progress"

    def save_status(
        self,
        status: dict[str, Any],
        everywhere: list[str],
        progress: dict[str, int] | None = None,
    ) -> None:
        """The full report, and apart from it the references cached on every eligible node:
        the spawn form reads that short list on every render, never the whole report; and
        the pass's counts (``progress``: images, nodes, missing, running), which the metrics
        read without parsing the report."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._status_key, json.dumps(status))
        pipe.set(self._everywhere_key, json.dumps(everywhere))
        if progress is not None:
            pipe.delete(self._progress_key)
            pipe.hset(self._progress_key, mapping=progress)  # type: ignore[arg-type]
        pipe.execute()

    def status(self) -> dict[str, Any] | None:
        raw = cast(str | None, self._redis.get(self._status_key))
        return None if raw is None else cast(dict[str, Any], json.loads(raw))

    def everywhere(self) -> set[str] | None:
        """References prepulled to every eligible node; None before the first pass."""
        raw = cast(str | None, self._redis.get(self._everywhere_key))
        return None if raw is None else set(json.loads(raw))

    def failures(self) -> dict[str, PullFailure]:
        raw = cast(dict[str, str], self._redis.hgetall(self._failures_key))
        return {key: PullFailure.from_json(json.loads(value)) for key, value in raw.items()}

    def record_failure(self, failure: PullFailure) -> None:
        key = failure_key(failure.image, failure.node)
        self._redis.hset(self._failures_key, key, json.dumps(failure.to_json()))

    def clear_failures(self, keys: list[str]) -> None:
        if keys:
            self._redis.hdel(self._failures_key, *keys)
