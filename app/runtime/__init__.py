"""How the server process is tuned, in one place, installed from gunicorn's hooks.

The service's code runs the same in a test, a tool or the server; what only the server
process does to itself (its worker class, how its garbage collector runs, its process shape)
lives here, each in a module of its own that says why, which benchmark measured it, and on
which library versions it was checked.
``gunicorn.conf.py`` holds no tuning: it calls one function here per hook.

- ``before_fork`` (gunicorn's ``on_starting``: the master has built the app and forks its
  workers next) and ``after_worker_init`` (``post_worker_init``, the worker's background
  work started): see ``collector``.
- ``worker.SpawnerWorker`` is the settings' ``worker_class``, and ``defaults`` the process
  shape the settings and the tools that start the service share: one worker per core that
  ``cpus`` counts.

What is deliberately not here: ``DeadlineApiClient`` (``app.storage.kubernetes_client``) and the
Redis connection classes (``app.extensions.redis``) are subclasses the app builds its own
clients from, through the libraries' public classes, and patch nothing of the process; they
stay with the clients they configure. Nor is what the server leaves unimported: it runs with
its image's packages alone (``devstack.virtualenvs`` where the tests and benchmarks run it),
so the Kubernetes client's optional validator, a development package, is not there to import.

This is a ground-floor package: it imports only the standard library, gevent and gunicorn,
never the app above it, so gunicorn's settings can load it before the master builds the app.
"""

from __future__ import annotations

from app.runtime.collector import freeze_startup_objects


def before_fork() -> None:
    """What gunicorn's master does once it has built the app, before it forks the workers
    that share it: freeze what the build made, so that no collection in a worker writes to
    those objects and copies the pages it shares with the master and the other workers."""
    freeze_startup_objects()


def after_worker_init() -> None:
    """What a worker does once its background work started (gunicorn's
    ``post_worker_init``): what starting it made joins what the master froze."""
    freeze_startup_objects()
