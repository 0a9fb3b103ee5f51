"""The gunicorn worker: gevent's WSGI server, with connections taking turns.

gunicorn's ``gevent_pywsgi`` worker serves a request in about 15% less time than its plain
``gevent`` worker (it sends a response's headers and body in one write, and parses less),
but both serve a keep-alive connection again at once when its next request has already
arrived: a greenlet only gives way when a read would block, so a fast client is served
request after request while the others wait. In the ``status`` benchmark (``wrk``, 64
connections) one worker answered half its requests in 0.3 ms and its slowest 1% after
1.4 s (``docs/developer/benchmarks.md``, "Lab status"). Here a connection gives way after
each response, so every ready connection is served once before any is served twice (the
slowest 1% then took 1.4 x the median). With the access log built directly, a bare route
under these settings served 6,135 requests/s against 4,900/s under gunicorn's stock
``gevent`` worker and log (1.25 x; ``bench/RESULTS.md``, "Bare route of each stack").

Two more things gunicorn's own ``gevent`` worker does and its ``gevent_pywsgi`` worker does
not: an idle keep-alive connection is closed after ``keepalive`` seconds (otherwise a
stopping worker waits ``graceful_timeout`` for clients that hold idle connections), and
with several workers each accepts one connection at a time, so a burst of new connections
is shared between workers instead of landing on whichever woke first.

The version guard: the handler overrides gevent's ``WSGIHandler.read_requestline`` and
``handle_one_request``, and the worker sets gunicorn's ``wsgi_handler`` and
``server_class``; both were checked on the majors in ``CHECKED_MAJOR_VERSIONS``. Under any
other the worker says so in its log and serves as gunicorn's stock ``gevent_pywsgi`` worker
(``tests/stack/test_worker.py`` then fails, which is the cue to check the new versions).

This module is the worker class gunicorn loads in its arbiter, before forking: it imports
nothing of the app.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventPyWSGIWorker, PyWSGIHandler, PyWSGIServer

CHECKED_MAJOR_VERSIONS: Mapping[str, frozenset[str]] = {
    "gunicorn": frozenset({"27"}),
    "gevent": frozenset({"26"}),
}
"""The majors of the libraries whose internals the turn-taking uses, as checked."""


def unchecked_versions(versions: Mapping[str, str] | None = None) -> list[str]:
    """The libraries (``name version``) installed, or given in ``versions``, at a major the
    turn-taking was not checked on; empty when every one was."""
    unchecked = []
    for name, checked in CHECKED_MAJOR_VERSIONS.items():
        if versions is not None:
            version = versions.get(name, "")
        else:
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                version = ""
        if version.split(".", 1)[0] not in checked:
            unchecked.append(f"{name} {version or '(not installed)'}")
    return unchecked


class TurnTakingHandler(PyWSGIHandler):
    """One connection's requests, one per turn."""

    idle_seconds: float = 5.0
    """How long a keep-alive connection may wait for its next request (set per worker)."""

    def read_requestline(self) -> str | None:
        # An idle connection that sends nothing in time is closed (pywsgi ends the
        # connection when there is no request line).
        with gevent.Timeout(self.idle_seconds, False):
            line: str = super().read_requestline()
            return line
        return None

    def handle_one_request(self) -> Any:
        result = super().handle_one_request()
        # Behind every other connection that is ready, before reading this one's next.
        gevent.sleep(0)
        return result


class OneAtATimeServer(PyWSGIServer):
    """Accepts one connection per wake-up, so that workers sharing a socket share a burst."""

    max_accept = 1


class SpawnerWorker(GeventPyWSGIWorker):
    """gunicorn's ``gevent_pywsgi`` worker with the turn-taking handler."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unchecked = unchecked_versions()
        if unchecked:
            self.log.warning(
                "Connections do not take turns: not checked with %s", ", ".join(unchecked)
            )
            return
        # Per worker, so the setting is read from this worker's configuration.
        idle_seconds = float(max(1, self.cfg.keepalive))
        self.wsgi_handler = type(
            "TurnTakingHandler", (TurnTakingHandler,), {"idle_seconds": idle_seconds}
        )
        if self.cfg.workers > 1:
            self.server_class = OneAtATimeServer
