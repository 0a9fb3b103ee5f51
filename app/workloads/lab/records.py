"""The lab record for a lab spec: one place decides what a status shows."""

from __future__ import annotations

from app.builders.env import SECRET_REQUEST_ENV
from app.builders.lab import internal_url, quotas
from app.config import Config
from app.models.lab import LabRecord, LabSpec, LabStatus, PodState


def lab_record(
    spec: LabSpec,
    config: Config,
    *,
    status: LabStatus,
    pod: PodState,
    reachable: bool,
    error: str | None = None,
) -> LabRecord:
    """The record of ``spec``'s lab; ``internal_url`` only once the lab can be reached.

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
        internal_url=internal_url(config, spec.username) if reachable else None,
        error=error,
    )
