"""The audit log of administrators' actions: a bounded list in Redis, newest first.

Every replica appends to the same list, so an administrator reads one history whichever
replica served each action. Appending and trimming happen in one transaction, so the list
never holds more than its length, however many append at once.
"""

from __future__ import annotations

import redis

from app.models.admin import AuditEntry


class AuditLog:
    """``{prefix}audit``: at most ``length`` entries, newest first."""

    def __init__(self, client: redis.Redis, key_prefix: str, *, length: int) -> None:
        self._redis = client
        self.key = f"{key_prefix}audit"
        self.length = length

    def append(self, entry: AuditEntry) -> None:
        pipeline = self._redis.pipeline(transaction=True)
        pipeline.lpush(self.key, entry.to_json())
        pipeline.ltrim(self.key, 0, self.length - 1)
        pipeline.execute()

    def entries(self, *, limit: int) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first."""
        raw = self._redis.lrange(self.key, 0, max(0, limit - 1))
        return [AuditEntry.from_json(str(text)) for text in raw]
