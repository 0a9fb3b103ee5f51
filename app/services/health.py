"""Readiness: can this process reach what it needs to serve requests?"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from app.extensions import kubernetes_ext, redis_ext

logger = logging.getLogger(__name__)

_PROBE_TIMEOUT = 2.0


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str]

    @property
    def ready(self) -> bool:
        return all(state == "ok" for state in self.checks.values())


def _check_redis() -> str:
    try:
        redis_ext.client.ping()
    except redis.RedisError as exc:
        logger.warning("readiness: Redis unavailable: %s", type(exc).__name__)
        return f"error: {type(exc).__name__}"
    return "ok"


def _check_kubernetes() -> str:
    try:
        k8s.VersionApi(kubernetes_ext.api_client).get_code(_request_timeout=_PROBE_TIMEOUT)
    except (ApiException, HTTPError, OSError) as exc:
        logger.warning("readiness: Kubernetes API unavailable: %s", type(exc).__name__)
        return f"error: {type(exc).__name__}"
    return "ok"


def check_readiness() -> Readiness:
    return Readiness(checks={"redis": _check_redis(), "kubernetes": _check_kubernetes()})
