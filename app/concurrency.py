"""Run independent Kubernetes calls at once, and start background tasks.

A spawn's reads at the start and its creates after the namespace do not depend on each
other; issued together they cost the slowest call instead of the sum. Threads here are
greenlets under gunicorn's gevent workers, so this is cheap.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol


class Task(Protocol):
    """A started background task: a thread, or a greenlet under gevent."""

    def join(self, timeout: float | None = None) -> Any: ...


def _green() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency of the service
        return False
    return bool(monkey.is_module_patched("threading"))


def start_task(target: Callable[..., Any], *args: Any, name: str) -> Task:
    """Start ``target(*args)`` in the background and return at once.

    Under gevent's monkey-patching ``Thread.start`` blocks its caller until the new
    greenlet has run up to its first wait, and the caller then queues behind everything
    else that became ready meanwhile (a request arriving, a reply): a spawn started that
    way sent its first Kubernetes call only after the POST was answered and the client's
    event stream was served. A plain greenlet is just scheduled, and the caller carries on.
    Plain threads (tests, tools) keep ``threading.Thread``. ``target`` handles its own
    errors: an exception escaping it is only printed.
    """
    if _GREEN:
        import gevent

        greenlet = gevent.spawn(target, *args)
        greenlet.name = name
        return greenlet
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


_GREEN = _green()
"""Decided at import: the gevent worker patches ``threading`` before the app is imported."""


def concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order; the first call's error (in order) is raised."""
    if len(calls) == 1:
        return [calls[0]()]
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as exc:  # handed to the caller below
            errors[index] = exc

    # Each call runs in a copy of the caller's context: what it logs names the caller's
    # request and operation (``app.log``). A new greenlet or thread starts without one.
    tasks = [
        start_task(contextvars.copy_context().run, run, i, name="concurrent-call")
        for i in range(1, len(calls))
    ]
    # The first call runs here: it goes out before the others, and needs no task of its own.
    run(0)
    for task in tasks:
        task.join()
    for error in errors:
        if error is not None:
            raise error
    return results
