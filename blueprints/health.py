"""Liveness and readiness probes for Kubernetes; not routed by the ingress, no auth."""

from __future__ import annotations

from flask import Response, current_app, jsonify

from app.extensions import kubernetes_ext, labs_ext, redis_ext
from app.models.process_role import ProcessRole
from app.schemas.health import HealthSchema, NotReadySchema, ReadySchema
from app.services.health import check_readiness
from app.web.api import ApiBlueprint

health = ApiBlueprint("health", __name__)


def process_role() -> ProcessRole:
    """The role this app was built for (``create_app``)."""
    role: ProcessRole = current_app.config["SPAWNER_ROLE"]
    return role


@health.get("/healthz")
@health.response(200, HealthSchema)
def healthz() -> dict[str, str]:
    """Alive: answers without touching any dependency, so a slow Redis never restarts us."""
    return {"status": "ok"}


@health.get("/readyz")
@health.response(200, ReadySchema)
@health.alt_response(
    503,
    schema=NotReadySchema,
    description=(
        "Not ready (code `not_ready`): Redis or (in a process that runs operations) the "
        "Kubernetes API did not answer, the "
        "service's state is being rebuilt from Kubernetes after Redis came back empty "
        "(`state`: `rebuilding`), or an image list has not been read yet (`images`)."
    ),
    example={
        "code": "not_ready",
        "message": "not ready: redis unavailable, state unknown",
        "checks": {
            "redis": "error: TimeoutError",
            "kubernetes": "ok",
            "state": "unknown",
            "images": "unknown",
        },
    },
)
def readyz() -> tuple[Response, int]:
    """Ready only when Redis answers, Redis holds every workload, and every image list has
    been read once; and, in a process that runs operations, when the Kubernetes API answers
    (a web process answers from Redis: its pod's runner container answers for the API)."""
    report = check_readiness(
        probe=redis_ext.probe,
        api=kubernetes_ext.api_client if process_role().runs_operations else None,
        images=labs_ext.context.images,
        complete_key=labs_ext.engine.workloads.complete_key,
        maintenance_key=labs_ext.machinery.maintenance.key,
    )
    if report.ready:
        body = {"status": "ready", "checks": report.checks, "maintenance": report.maintenance}
        return jsonify(ReadySchema().dump(body)), 200
    body = {
        "code": "not_ready",
        "message": f"not ready: {report.problems}",
        "checks": report.checks,
        "maintenance": report.maintenance,
    }
    return jsonify(NotReadySchema().dump(body)), 503
