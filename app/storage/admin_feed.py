"""The administrators' live feed: workload state changes and prepull progress.

Built on flask-sse, the one place its model fits: a live view where a subscriber that
joins late, or reconnects, simply sees what happens from then on (the routes are the
record; ``GET /spawner/v1/labs`` and ``/prepulls`` answer what happened before). Lab event
streams need replay and resume from ``Last-Event-ID``, which flask-sse does not offer, so
they stay on Redis Streams.

Messages are in flask-sse's wire format (a JSON object with ``type`` and ``data``), so its
``messages()`` reads them. Workload changes are published by the storage scripts that make
them (``record_changed.lua``), in the same atomic step; other news goes through
``AdminFeed.publish``, on the service's own Redis connection pool (flask-sse's ``publish``
would open a client per message).
"""

from __future__ import annotations

import json
from typing import Any

import redis
from flask_sse import Message


def admin_feed_channel(key_prefix: str) -> str:
    """The pub/sub channel of the feed."""
    return f"{key_prefix}admin-feed"


class AdminFeed:
    """Publishes news on the feed."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self.channel = admin_feed_channel(key_prefix)

    def publish(self, type_: str, data: dict[str, Any]) -> None:
        """Send ``data`` as an event of type ``type_`` to whoever follows the feed now."""
        self._redis.publish(self.channel, json.dumps(Message(data, type=type_).to_dict()))
