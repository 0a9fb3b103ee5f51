"""The process: read the settings, serve with cheroot until idle or told to stop, exit 0.

cheroot serves on a thread of its own while the main thread waits for the idle timeout or a
signal (Python runs signal handlers on the main thread). Either way the server then stops
gracefully: it closes its socket and idle connections, and waits up to ``SHUTDOWN_SECONDS``
for the requests in flight to end, inside Kubernetes' default 30-second grace period.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

from cheroot.wsgi import Server

from fileserver.access_log import AccessLog
from fileserver.activity import Activity
from fileserver.config import ConfigError, Settings, settings_from
from fileserver.dav import dav_app

SHUTDOWN_SECONDS = 20
"""How long the requests in flight at shutdown are given to end."""

_LOG = logging.getLogger("fileserver")


def main() -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = settings_from(os.environ)
    except ConfigError as error:
        _LOG.error("cannot start: %s", error)
        return 2
    serve(settings)
    return 0


def serve(settings: Settings) -> None:
    """Serve until the idle timeout passes or SIGTERM (or SIGINT) arrives."""
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    app = dav_app(settings)
    _join_wsgidavs_log()
    activity = Activity()
    server = Server(
        (settings.host, settings.port),
        AccessLog(app, activity),
        server_name="fileserver",
        shutdown_timeout=SHUTDOWN_SECONDS,
    )
    server.prepare()
    mounts = ", ".join(
        f"{m.name} ({'read-only' if m.read_only else 'read-write'}: {m.path})"
        for m in settings.mounts
    )
    _LOG.info(
        "serving %s for %s on %s:%d, idle timeout %gs: %s",
        settings.prefix,
        settings.user,
        settings.host,
        settings.port,
        settings.idle_timeout,
        mounts,
    )
    thread = threading.Thread(target=server.serve, name="cheroot")
    thread.start()
    if activity.wait_until_idle(settings.idle_timeout, stop):
        _LOG.info("no request for %gs: stopping", settings.idle_timeout)
    else:
        _LOG.info("%s: stopping once the requests in flight end", received[0])
    server.stop()
    thread.join()
    _LOG.info("stopped")


def _join_wsgidavs_log() -> None:
    """Send wsgidav's warnings and errors (an internal error's traceback, say) to this log; as
    a library it keeps them to itself. Its informational lines (its own start, each request's
    internals) stay out. Called once the application is built: wsgidav then warns that every
    share allows anonymous access, which is the design (Gafaelfawr authenticates at the
    ingress), not news."""
    wsgidav_log = logging.getLogger("wsgidav")
    wsgidav_log.propagate = True
    wsgidav_log.setLevel(logging.WARNING)
