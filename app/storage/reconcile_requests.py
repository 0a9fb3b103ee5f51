"""Administrators' requests for a reconcile now, and the answers the watcher leaves them.

Whichever replica takes ``POST /spawner/v1/admin/reconcile``, the reconcile runs in the
elected watcher, wherever it leads: the request waits in a set the leader checks every
second, the leader takes every waiting request when it starts a reconcile (requests that
arrive together share one), and leaves each one's answer under its own key for a while, so
the replica that took the request finds it without listening for anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import redis

ANSWER_SECONDS = 300
"""How long an answer waits for the replica that asked."""


@dataclass(frozen=True)
class ReconcileResult:
    """How the reconcile run for a request ended."""

    finished: float
    """Unix time it ended."""
    complete: bool
    """Whether Redis was then declared complete (False: emptied meanwhile, run again)."""


class ReconcileRequests:
    """``{prefix}reconcile:requested`` (a set of request ids) and each request's answer at
    ``{prefix}reconcile:done:<id>``."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._requested = f"{key_prefix}reconcile:requested"
        self._done = f"{key_prefix}reconcile:done:"

    def ask(self, request_id: str) -> None:
        self._redis.sadd(self._requested, request_id)

    def waiting(self) -> bool:
        """Whether any request waits for a reconcile."""
        return bool(self._redis.scard(self._requested))

    def take(self) -> list[str]:
        """Every waiting request, removed in one step (the reconcile about to run answers
        them all)."""
        pipeline = self._redis.pipeline(transaction=True)
        pipeline.smembers(self._requested)
        pipeline.delete(self._requested)
        members, _ = pipeline.execute()
        return sorted(str(member) for member in members)

    def answer(self, request_ids: list[str], result: ReconcileResult) -> None:
        if not request_ids:
            return
        text = json.dumps(asdict(result))
        pipeline = self._redis.pipeline(transaction=False)
        for request_id in request_ids:
            pipeline.set(f"{self._done}{request_id}", text, ex=ANSWER_SECONDS)
        pipeline.execute()

    def result(self, request_id: str) -> ReconcileResult | None:
        raw = self._redis.get(f"{self._done}{request_id}")
        if not raw:
            return None
        data = json.loads(str(raw))
        return ReconcileResult(finished=float(data["finished"]), complete=bool(data["complete"]))
