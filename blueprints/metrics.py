"""Prometheus metrics for the monitoring system; not routed by the ingress, no auth.

Like the probes, the route is reached inside the cluster only (the ServiceMonitor scrapes
the pods' port): it names no user, and its Redis reads are a few round trips per scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from flask import Response, current_app
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import Metric

from app import metrics
from app.extensions.labs import machinery_of
from app.web.api import ApiBlueprint

logger = logging.getLogger(__name__)

metrics_bp = ApiBlueprint("metrics", __name__)


class _AppState(metrics.StateCollector):
    """The app's gauges read from Redis; a scrape while Redis is away still answers the
    counters, without these gauges (``lab_spawner_redis_errors_total`` tells why)."""

    def collect(self) -> Iterator[Metric]:
        try:
            yield from list(super().collect())
        except redis.RedisError as exc:
            logger.warning("metrics: state not read, Redis unavailable (%s)", type(exc).__name__)


def _state() -> metrics.StateCollector:
    """The current app's collector, built once per app."""
    found = current_app.extensions.get("metrics-state")
    if not isinstance(found, metrics.StateCollector):
        config = current_app.config["SPAWNER"]
        found = _AppState(
            current_app.extensions["redis"],
            config.redis.key_prefix,
            sorted(machinery_of(current_app).engine.kinds),
        )
        current_app.extensions["metrics-state"] = found
    return found


@metrics_bp.get("/metrics")
@metrics_bp.text_response(
    "text/plain", description="Prometheus' text exposition format, version 0.0.4."
)
def prometheus_metrics() -> Response:
    """Every metric of this replica (its workers' samples summed) and the service's state
    read from Redis, in Prometheus' text format."""
    return Response(metrics.exposition(_state()), content_type=CONTENT_TYPE_LATEST)
