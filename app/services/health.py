"""Readiness: can this process serve requests, is what it would answer complete, and
could it take a spawn (every image list read once)?

The checks run at once, each with its own short deadline, so the probe answers within
Kubernetes' probe timeout however a dependency fails (refusing, or accepting and never
answering).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from urllib3.exceptions import HTTPError

from app.concurrency import concurrently
from app.models.admin import Maintenance
from app.workloads.image.service import ImageService

if TYPE_CHECKING:
    from kubernetes import client as k8s

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 1.0
"""Seconds a readiness check waits for Redis or the Kubernetes API: Kubernetes gives the
whole probe two."""

OK = "ok"
REBUILDING = "rebuilding"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str]
    maintenance: str | None = None
    """Maintenance mode's message while it is on: reported, never a reason to be unready
    (running labs are served as ever)."""

    @property
    def ready(self) -> bool:
        return all(state == OK for state in self.checks.values())

    @property
    def problems(self) -> str:
        """The failing checks in words: ``redis unavailable, state unknown``."""
        return ", ".join(
            f"{name} unavailable" if state.startswith("error") else f"{name} {state}"
            for name, state in self.checks.items()
            if state != OK
        )


def _check_redis(
    probe: redis.Redis, complete_key: str, maintenance_key: str
) -> tuple[str, str, str | None]:
    """Redis's state, whether it holds every workload (``rebuilding`` after it came back
    empty, until the rebuild from Kubernetes is done), and maintenance mode's message, in
    one round trip."""
    try:
        pipeline = probe.pipeline(transaction=False)
        pipeline.exists(complete_key)
        pipeline.get(maintenance_key)
        complete, maintenance = pipeline.execute()
    except redis.RedisError as exc:
        logger.warning("readiness: Redis unavailable: %s", type(exc).__name__)
        return f"error: {type(exc).__name__}", UNKNOWN, None
    message = Maintenance.from_json(str(maintenance)).message if maintenance else None
    return OK, OK if complete else REBUILDING, message


def _check_kubernetes(api: k8s.ApiClient) -> str:
    """Whether the API server answers ``/version`` with a version: read as it came, so an
    answer the client's models would not take (a field missing, not JSON at all) is an
    unready API server in words, never a failed probe."""
    # Loaded with ``api``, which only a process that calls Kubernetes builds.
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    try:
        answer: Any = k8s.VersionApi(api).get_code(
            _request_timeout=PROBE_TIMEOUT, _preload_content=False
        )
        body = json.loads(answer.data or b"null")
    except (ApiException, HTTPError, OSError) as exc:
        logger.warning("readiness: Kubernetes API unavailable: %s", type(exc).__name__)
        return f"error: {type(exc).__name__}"
    except ValueError:
        logger.warning("readiness: the Kubernetes API answered /version with no JSON")
        return "error: /version answered with no JSON"
    if not isinstance(body, dict) or not body.get("gitVersion"):
        logger.warning("readiness: the Kubernetes API answered /version without a version")
        return "error: /version answered without gitVersion"
    return OK


def _check_images(images: ImageService) -> str:
    """Whether every configuration's image list has been read (or tried) once: before
    that, a spawn may be refused for want of a list."""
    try:
        unread = images.unread()
    except redis.RedisError as exc:
        return f"error: {type(exc).__name__}"
    return OK if not unread else "unread: " + ", ".join(unread)


def check_readiness(
    *,
    probe: redis.Redis,
    api: k8s.ApiClient | None,
    images: ImageService,
    complete_key: str,
    maintenance_key: str,
) -> Readiness:
    """The checks, run beside each other: ``probe`` is a Redis client whose deadline is
    ``PROBE_TIMEOUT``; ``complete_key`` is there once Redis holds every workload.

    ``api`` is None in a process that does not run operations (the web role's, which answers
    from Redis): its readiness does not hang on the API server, and the ``kubernetes``
    check is the runner's, in the same pod."""
    if api is None:
        redis_state, state, maintenance = _check_redis(probe, complete_key, maintenance_key)
        kubernetes = None
    else:
        (redis_state, state, maintenance), kubernetes = concurrently(
            lambda: _check_redis(probe, complete_key, maintenance_key),
            lambda: _check_kubernetes(api),
        )
    # Only once Redis has just answered: the image lists are read from it, on the service's
    # own connections, whose deadline is longer than the probe's.
    checks_images = _check_images(images) if redis_state == OK else UNKNOWN
    checks = {"redis": redis_state}
    if kubernetes is not None:
        checks["kubernetes"] = kubernetes
    checks.update(state=state, images=checks_images)
    return Readiness(checks=checks, maintenance=maintenance)
