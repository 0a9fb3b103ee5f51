"""The runner role's process: ``python runner.py``.

A replica's runner (``app.models.process_role``) runs the operations and the elected loops,
and its port answers only the kubelet's probes and the metrics scraper. It is one process,
with no gunicorn master over it: the web role needs a master to share connections among
its workers, but a runner takes its work from Redis, not from a socket, so a master would
only watch one worker, at 38 MiB and a third of a second of CPU at every start
(``docs/developer/benchmarks.md``, "One runner process"). What that master did, the pod does:
the kubelet restarts the container when the process exits, and when its liveness probe,
answered by the same event loop that runs the operations, stops answering.

On SIGTERM it hands its work over first (``Machinery.drain``: the elected roles give their
leases up and the operations it runs go to other runners at once), then stops answering and
exits; SIGINT does the same, for a terminal.
"""

from __future__ import annotations

# Before anything imports sockets, threads or ssl: the Kubernetes client and redis-py must
# get gevent's cooperative versions, as they do in a gunicorn gevent worker.
from gevent import monkey

monkey.patch_all()

import logging
import os
import signal
import sys

import gevent
import gevent.event
from gevent.pool import Pool
from gevent.pywsgi import WSGIServer

from app import runtime
from app.models.process_role import ROLE_ENV, ProcessRole

DEFAULT_BIND = "0.0.0.0:8081"
"""Where the probes and metrics answer unless ``SPAWNER_BIND`` says otherwise."""

MAX_CONNECTIONS = 64
"""Connections served at once: the kubelet's probes and a scraper need a few; a bound
keeps a misdirected client from holding more."""

STOP_SECONDS = 5.0
"""How long a stopping runner waits for the probe and metrics answers it is writing."""

log = logging.getLogger("app.runner_process")


def main() -> int:
    # Whatever the environment says: this file is the runner. prometheus_client's multiprocess
    # mode sums the samples of a master's workers; one process has none to sum, and a
    # directory left by the previous run of this container would be summed in.
    os.environ[ROLE_ENV] = ProcessRole.RUNNER.value
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)

    from app import create_app
    from app.config import ConfigError
    from app.extensions.labs import machinery_of

    try:
        app = create_app(role=ProcessRole.RUNNER)
    except ConfigError as exc:
        # An operator's mistake, not a bug: say what is wrong, without a traceback.
        print(exc, file=sys.stderr)
        return 1
    machinery = machinery_of(app)
    machinery.start(ProcessRole.RUNNER)
    runtime.after_worker_init()

    bind = os.environ.get("SPAWNER_BIND") or DEFAULT_BIND
    server = WSGIServer(bind, app, spawn=Pool(MAX_CONNECTIONS), log=None, error_log=log)

    stopping = gevent.event.Event()

    def stop() -> None:
        if stopping.is_set():  # a second signal while it stops
            return
        stopping.set()
        log.info("runner stopping: handing its work over")
        machinery.drain()
        server.stop(timeout=STOP_SECONDS)

    for signum in (signal.SIGTERM, signal.SIGINT):
        # The handler runs as an event loop callback, where nothing may block: a greenlet stops.
        gevent.signal_handler(signum, gevent.spawn, stop)
    log.info("runner answering probes and metrics on %s", bind)
    try:
        server.serve_forever()
    finally:
        machinery.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
