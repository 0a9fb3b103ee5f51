"""Maintenance mode's one key in Redis: present (with its message) while it is on, so every
worker of every replica refuses new creations from the moment an administrator turns it on."""

from __future__ import annotations

import redis

from app.models.admin import Maintenance


class MaintenanceStore:
    """``{prefix}maintenance``: the ``Maintenance`` in force, absent while off."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self.key = f"{key_prefix}maintenance"

    def current(self) -> Maintenance | None:
        raw = self._redis.get(self.key)
        return Maintenance.from_json(str(raw)) if raw else None

    def turn_on(self, maintenance: Maintenance) -> None:
        self._redis.set(self.key, maintenance.to_json())

    def turn_off(self) -> Maintenance | None:
        """Turn it off; what was in force (None if it was off)."""
        raw = self._redis.getdel(self.key)
        return Maintenance.from_json(str(raw)) if raw else None
