"""Run independent Kubernetes calls at once.

A spawn's reads at the start and its creates after the namespace do not depend on each
other; issued together they cost the slowest call instead of the sum. Threads here are
greenlets under gunicorn's gevent workers, so this is cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


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

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results
