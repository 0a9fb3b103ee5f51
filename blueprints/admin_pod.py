"""The administrators' maintenance pod: a privileged root shell over every user's files.

Its own scope (``admin.pod.scope``, by default ``admin:lab-pods``) rather than the
administrators' ``admin:notebook``, which JupyterHub's own token holds: repairing files as root
is granted to people, not to the hub. Each start and delete is recorded in the audit log.
"""

from __future__ import annotations

from typing import Any

from app.errors import ConflictError, NotConfiguredError, NotFoundError
from app.extensions import labs_ext
from app.schemas.admin_pod import AdminPodStatusSchema
from app.services.admin_pod import AdminPodService
from app.services.auth import ADMIN_POD
from app.web.api import ApiBlueprint, raises
from blueprints.support.audit import audited
from blueprints.support.auth import requires

admin_pod = ApiBlueprint("admin_pod", __name__, url_prefix="/spawner/v1/admin")


def _service() -> AdminPodService:
    context = labs_ext.context
    return AdminPodService(context.config, context.kube)


@admin_pod.post("/pod")
@admin_pod.response(202, AdminPodStatusSchema, description="Created; poll its status.")
@admin_pod.alt_response(
    200, schema=AdminPodStatusSchema, description="It already exists and has not finished."
)
@raises(NotConfiguredError, ConflictError)
@requires(ADMIN_POD)
@audited("admin-pod.start", status=202)
def start_admin_pod() -> tuple[dict[str, Any], int]:
    """Start the maintenance pod, or return the one already there.

    The pod runs `admin.pod.image` as root, privileged, with every configured lab volume
    (or those in `admin.pod.volumes`) mounted whole under `admin.pod.mountPrefix`. There is
    at most one: a pod not yet finished is returned as it is (200); a finished one is
    replaced. The answer does not wait for the pod to be ready: poll its status."""
    result = _service().start()
    return result.status, 202 if result.created else 200


@admin_pod.get("/pod")
@admin_pod.response(200, AdminPodStatusSchema)
@raises(NotFoundError)
@requires(ADMIN_POD)
def admin_pod_status() -> dict[str, Any]:
    """The maintenance pod's status, read from Kubernetes."""
    return _service().status()


@admin_pod.delete("/pod")
@admin_pod.response(202, AdminPodStatusSchema, description="Its deletion was asked for.")
@raises(NotFoundError)
@requires(ADMIN_POD)
@audited("admin-pod.delete", status=202)
def delete_admin_pod() -> dict[str, Any]:
    """Delete the maintenance pod; its namespace stays for the next one."""
    return _service().delete()
