"""Per-user request counters in Redis, shared by every worker and replica.

Key, with the configured prefix in front: ``rate:<scope>:<name>``, a counter that expires
with its window. One Lua script counts and judges a request in one step.
"""

from __future__ import annotations

import math

import redis

from app.storage import scripts


class RateLimits:
    """Fixed-window request counters: at most ``limit`` requests per ``window_seconds``."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._p = key_prefix
        self._count = scripts.load(client, "rate_limit")
        self._give_back = scripts.load(client, "rate_give_back")

    def key(self, scope: str, name: str) -> str:
        return f"{self._p}rate:{scope}:{name}"

    def take(self, *, scope: str, name: str, limit: int, window_seconds: float) -> int:
        """Count one request of ``name`` in ``scope``; 0 when allowed, else the whole
        seconds to wait before the next one can be."""
        left_ms = int(
            self._count(
                keys=[self.key(scope, name)], args=[limit, max(1, int(window_seconds * 1000))]
            )
        )
        return 0 if left_ms <= 0 else max(1, math.ceil(left_ms / 1000))

    def give_back(self, *, scope: str, name: str) -> None:
        """Uncount one request of ``name`` in ``scope`` counted in the current window (one
        refused after it was counted)."""
        self._give_back(keys=[self.key(scope, name)], args=[])
