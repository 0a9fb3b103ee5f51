"""The lab record for a lab spec: one place decides what a status shows."""

from __future__ import annotations

from typing import Any

from app.builders.env import SECRET_REQUEST_ENV
from app.builders.names import LAB_SUFFIX, lab_namespace, object_name
from app.builders.resource_quota import quotas
from app.models.config import Config
from app.models.lab import LabRecord, LabSpec, PodState
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesStorage
from app.workloads.lab.builders import internal_url, needs_service_address, service_address


def lab_record(
    spec: LabSpec,
    config: Config,
    *,
    status: WorkloadStatus,
    pod: PodState,
    url: str | None,
    error: str | None = None,
) -> LabRecord:
    """The record of ``spec``'s lab; ``url`` is its ``internal_url``, given only once the lab
    can be reached (see :func:`reachable_at`).

    Credentials JupyterHub passes in the spawn environment never appear in a record.
    """
    return LabRecord(
        username=spec.username,
        status=status,
        pod=pod,
        options=spec.options.as_dict(),
        env={k: v for k, v in spec.env.items() if k not in SECRET_REQUEST_ENV},
        uid=spec.user.uid,
        gid=spec.user.gid,
        groups=[{"name": g.name, "id": g.id} for g in spec.user.groups],
        quotas=quotas(spec.size),
        internal_url=url,
        error=error,
        api=spec.api,
    )


def reachable_at(
    kube: KubernetesStorage,
    config: Config,
    username: str,
    *,
    service: dict[str, Any] | None = None,
) -> str | None:
    """Where JupyterHub reaches ``username``'s lab.

    Most templates name only what is known from the username. One naming ``{cluster_ip}``
    needs the lab's Service as Kubernetes has it: ``service`` when the caller holds it (the
    spawn that created it), else it is read. None while the Service has no address.
    """
    if not needs_service_address(config):
        return internal_url(config, username)
    if service is None:
        namespace = lab_namespace(config.namespace_prefix, username)
        service = kube.read_service(namespace, object_name(username, LAB_SUFFIX))
    return internal_url(config, username, cluster_ip=service_address(service))
