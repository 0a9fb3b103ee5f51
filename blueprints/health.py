"""Liveness and readiness probes for Kubernetes; not routed by the ingress, no auth."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.openapi import NOT_READY, documented
from app.schemas.health import HealthSchema, NotReadySchema, ReadySchema
from app.services.health import check_readiness

health = Blueprint("health", __name__)


@health.get("/healthz")
@documented(responses={200: HealthSchema})
def healthz() -> Response:
    """Alive: answers without touching any dependency, so a slow Redis never restarts us."""
    return jsonify(HealthSchema().dump({"status": "ok"}))


@health.get("/readyz")
@documented(responses={200: ReadySchema, 503: NOT_READY})
def readyz() -> tuple[Response, int]:
    """Ready only when Redis and the Kubernetes API both answer."""
    report = check_readiness()
    if report.ready:
        return jsonify(ReadySchema().dump({"status": "ready", "checks": report.checks})), 200
    failing = ", ".join(name for name, state in report.checks.items() if state != "ok")
    body = {
        "code": "not_ready",
        "message": f"not ready: {failing} unavailable",
        "checks": report.checks,
    }
    return jsonify(NotReadySchema().dump(body)), 503
