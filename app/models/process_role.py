"""What a server process of the service does: answer requests, run operations, or both.

A replica runs two gunicorn masters (the chart's ``web`` and ``runner`` containers, the local
stack's two processes per replica): the web role's workers answer requests and serve event
streams, and queue operations without running them; the runner role's workers run the
operations and the elected loops (watcher, image refresher, prepuller), and serve only the
probes and metrics on a port of their own. Apart, a POST is never answered late because the
process that received it is busy with the Kubernetes work it queued.

``all`` is both in one process: what a test's app, a single-process server and a deployment
of an earlier shape run. Read from ``SPAWNER_ROLE``; here, in a module that imports nothing,
because gunicorn's arbiter reads it before any worker imports the app.
"""

from __future__ import annotations

import enum
import os

ROLE_ENV = "SPAWNER_ROLE"


class ProcessRole(enum.Enum):
    WEB = "web"
    RUNNER = "runner"
    ALL = "all"

    @property
    def serves_requests(self) -> bool:
        """Whether its port is the service's API (a runner's answers probes and metrics)."""
        return self is not ProcessRole.RUNNER

    @property
    def runs_operations(self) -> bool:
        """Whether it runs operations and stands for the elected loops."""
        return self is not ProcessRole.WEB

    @classmethod
    def from_environment(cls) -> ProcessRole:
        """The role ``SPAWNER_ROLE`` names; ``all`` when it is unset. An unknown value is an
        error that names the allowed ones, so a typo never starts a replica that runs nothing."""
        value = os.environ.get(ROLE_ENV, "").strip().lower() or cls.ALL.value
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(role.value for role in cls)
            raise ValueError(f"{ROLE_ENV}={value!r} is not a role; use one of {allowed}") from None
