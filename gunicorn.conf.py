"""gunicorn settings for the lab spawner service.

gevent workers: a sync worker holds one event stream at a time and gthread one per thread,
while one gevent worker held 2,000 open streams at about 18 KiB each with other requests
still answered in milliseconds. The Kubernetes client and redis-py both work under gevent's
monkey-patching, which this file applies first thing, in the master.

The master builds the app once and the workers fork with it (``preload_app``): they share
its memory pages instead of each importing and building its own, and a restarted replica
answers as soon as the master has built it once. On the Intel machine, three runs each, the
service held 209-216 MiB of distinct pages at a storm's peak against 241 MiB, and a restart
with 430 labs listed them all after 0.85-1.03 s against 1.20-1.41 s
(``docs/developer/benchmarks.md``, "One app, forked").
So the master patches the standard library before anything imports it, as each worker
would, and gives the workers their metrics directory before the app is loaded; an app built
before the fork holds no connection and no per-process name (``app.storage.leader``). A
``SIGHUP`` reads this file again and replaces the workers, but with the same code.

Every value can be set from the environment, so the Helm chart and ``make run`` tune it
without editing this file. ``SPAWNER_ROLE`` says what the workers do
(``app.models.process_role``): a replica's ``web`` workers answer the API and serve event
streams, while its runner, which runs the operations and the elected loops, is a process of
its own (``runner.py``) with no gunicorn over it; unset, each worker does both.

What the server does to its own process (the worker class, its garbage collector) lives in
``app.runtime``: this file only calls it from the hooks.
"""

from __future__ import annotations

# Before anything the app imports is imported: the workers fork with the app loaded here.
from gevent import monkey

monkey.patch_all()

import os
import shutil
import signal
import tempfile
from typing import Any

import gevent

from app import runtime
from app.models.process_role import ProcessRole
from app.runtime.defaults import default_workers

# An unknown role stops the master here, with the message naming the allowed ones.
role = ProcessRole.from_environment()
if role is ProcessRole.RUNNER:
    raise SystemExit(f"{role.value}: the runner runs as `python runner.py`, not under gunicorn")
bind = os.environ.get("SPAWNER_BIND", "0.0.0.0:8080")
# One worker per core this process may use, at least one (see the module). With ``or``, an
# empty variable also means the default.
workers = int(os.environ.get("SPAWNER_WORKERS") or default_workers())
# gevent's WSGI server, with keep-alive connections taking turns (see the class).
worker_class = "app.runtime.worker.SpawnerWorker"
worker_connections = int(os.environ.get("SPAWNER_WORKER_CONNECTIONS", "2100"))
# Event streams stay open for minutes; gevent workers notify the arbiter independently of
# request length, so this only catches a worker whose event loop is truly stuck.
timeout = int(os.environ.get("SPAWNER_WORKER_TIMEOUT", "60"))
# On SIGTERM workers stop accepting, finish what they serve, and are killed after this.
graceful_timeout = int(os.environ.get("SPAWNER_GRACEFUL_TIMEOUT", "30"))
# Seconds an idle keep-alive connection is held open (at least 1). Short, because a
# stopping worker waits for its idle connections too.
keepalive = int(os.environ.get("SPAWNER_KEEPALIVE", "5"))
accesslog = os.environ.get("SPAWNER_ACCESS_LOG", "-")
errorlog = "-"
loglevel = os.environ.get("SPAWNER_GUNICORN_LOG_LEVEL", "info")
proc_name = "lab-spawner"
# Access log lines carry no headers, and query values are redacted, so tokens never reach them.
logger_class = "app.web.access_log.AccessLogger"
# The master builds the app (``wsgi.py``, which stops it with the message of a bad
# configuration) and the workers fork with it: see the module.
preload_app = True


def post_worker_init(worker: Any) -> None:
    """Start the worker's background work, once the app is loaded in the forked worker.

    The app factory starts nothing (importing or testing the app must not), so the event
    hub, and as the role says the operation runner and the elected roles, start here
    (``role``, read from ``SPAWNER_ROLE`` above). On SIGTERM the worker
    also ends its open event streams at once: gunicorn lets a stopping worker finish what
    it serves for up to ``graceful_timeout``, and event streams would use all of it. Their
    clients resume from ``Last-Event-ID`` on another worker, so closing them costs nothing.
    And it hands its work over (``Machinery.drain``): its elected roles and the operations
    it runs go to other workers at once instead of when their leases expire.
    """
    from app.extensions.labs import find_machinery

    # Another app under these settings (the benchmarks' bare route) has none.
    machinery = find_machinery(worker.wsgi)
    if machinery is not None:
        machinery.start(role)

        def on_term(signum: int, frame: Any) -> None:
            worker.handle_exit(signum, frame)
            # Not from inside the handler, which gevent runs as an event loop callback
            # where nothing may block (starting a thread waits for it): greenlets do it.
            gevent.spawn(machinery.hub.close_streams)
            gevent.spawn(machinery.drain)

        signal.signal(signal.SIGTERM, on_term)
    # Last, so that what the app and its machinery made at start is what the collector skips.
    runtime.after_worker_init()


def worker_exit(server: Any, worker: Any) -> None:
    """Stop the worker's background work, so the leases it holds (elected roles, running
    operations) are released at once rather than left to expire."""
    from app.extensions.labs import find_machinery

    machinery = find_machinery(getattr(worker, "wsgi", None))
    if machinery is not None:
        machinery.stop()


def on_starting(server: Any) -> None:
    """The app is built (``preload_app``) and no worker forked yet: what it made at start
    goes where the collector never touches it, so the workers keep sharing those pages
    rather than each copying them as a collection writes to every object."""
    runtime.before_fork()


_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
_OWN_METRICS_ENV = "SPAWNER_OWN_METRICS_DIR"
"""Set to the metrics directory this master made, which it removes at exit."""


def _prepare_master() -> None:
    """What the master does before it builds the app, once (a ``SIGHUP`` reads this file
    again): tell the workers their master's pid, by which an operator knows the replica of
    a leader, and give them one directory for their metrics, emptied.

    ``prometheus_client`` reads ``PROMETHEUS_MULTIPROC_DIR`` when it is first imported, in
    the master as it builds the app, so it is set here for every worker's samples to land
    where a scrape of any worker sums them (``app.metrics``). A directory the environment
    names is emptied (samples of a previous run would be summed in); otherwise a new one per
    master.
    """
    from app.models.leadership import REPLICA_PID_ENV

    if os.environ.get(REPLICA_PID_ENV) == str(os.getpid()):
        return
    os.environ[REPLICA_PID_ENV] = str(os.getpid())
    directory = os.environ.get(_METRICS_ENV)
    if directory:
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".db"):
                os.remove(os.path.join(directory, name))
    else:
        directory = tempfile.mkdtemp(prefix="lab-spawner-metrics-")
        os.environ[_METRICS_ENV] = os.environ[_OWN_METRICS_ENV] = directory


_prepare_master()


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live gauges (event streams, leadership), which would otherwise
    be summed in as if it still held them; its counters stay, so totals never go back."""
    if os.environ.get(_METRICS_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    """Remove the metrics directory this master made."""
    own = os.environ.get(_OWN_METRICS_ENV)
    if own and own == os.environ.get(_METRICS_ENV):
        shutil.rmtree(own, ignore_errors=True)
