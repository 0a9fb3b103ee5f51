"""Compute clusters through the service: create one beside the lab, scale it, change its
hardware tiers, restart its head, delete it, and connect Dask to it.

Reached as ``LabSpawnerClient.clusters``. Creation, reads and deletion use the service's own
routes (``/spawner/v1/labs/<user>/clusters``); scaling, tiers and head restarts use the
cluster scaler API (``/ddl_cluster_scaler/``), whose answers are returned as the service gives
them. Waiting is polling: a cluster's state is one small record, and its changes are few.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import requests

from labspawner.errors import ClusterFailedError, LabSpawnerError, NotFoundError
from labspawner.models import Cluster

if TYPE_CHECKING:
    from distributed import Client as DaskClient

SCALER_PREFIX = "/ddl_cluster_scaler"
POLL_SECONDS = 0.5

Request = Callable[..., requests.Response]
"""``LabSpawnerClient._request``: (method, path, *, prefix=..., **requests' arguments)."""


class Clusters:
    """The cluster calls of one :class:`~labspawner.LabSpawnerClient`."""

    def __init__(self, request: Request) -> None:
        self._request = request

    # Service routes ---------------------------------------------------------------------

    def create(
        self,
        username: str,
        kind: str = "daskclusters",
        *,
        workers: int = 1,
        max_workers: int | None = None,
        worker_tier: str | None = None,
        head_tier: str | None = None,
        image: str | None = None,
        wait: bool = True,
        timeout: float = 300.0,
    ) -> Cluster:
        """Create a cluster in ``username``'s lab namespace (their own token, or an
        administrator's); with ``wait``, return it once it runs.

        Raises :class:`ClusterFailedError` if it fails while waited for, and the service's
        errors as they come: ``ConflictError`` with code ``quota_exceeded`` past the budget,
        or ``conflict`` without a running lab.
        """
        body: dict[str, Any] = {"kind": kind, "workers": workers}
        optional = {
            "max_workers": max_workers,
            "worker_tier": worker_tier,
            "head_tier": head_tier,
            "image": image,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        created = Cluster.from_json(
            self._request("POST", f"/labs/{username}/clusters", json=body).json()
        )
        if not wait:
            return created
        return self.wait(username, created.name, timeout=timeout)

    def of(self, username: str) -> list[Cluster]:
        """The user's clusters."""
        answer = self._request("GET", f"/labs/{username}/clusters").json()
        return [Cluster.from_json(item) for item in answer]

    def get(self, username: str, name: str) -> Cluster:
        """One cluster; :class:`NotFoundError` if the user has none of that name."""
        return Cluster.from_json(self._request("GET", f"/labs/{username}/clusters/{name}").json())

    def wait(self, username: str, name: str, *, timeout: float = 300.0) -> Cluster:
        """The cluster once it runs; :class:`ClusterFailedError` if it failed."""
        deadline = time.monotonic() + timeout
        while True:
            cluster = self.get(username, name)
            if cluster.running:
                return cluster
            if cluster.failed:
                raise ClusterFailedError(f"cluster {name} failed: {cluster.error}", code="failed")
            if time.monotonic() > deadline:
                raise LabSpawnerError(f"cluster {name} did not start in time", code="timeout")
            time.sleep(POLL_SECONDS)

    def delete(
        self, username: str, name: str, *, wait: bool = False, timeout: float = 120.0
    ) -> None:
        """Delete a cluster; with ``wait``, return once the service no longer has it."""
        self._request("DELETE", f"/labs/{username}/clusters/{name}")
        deadline = time.monotonic() + timeout
        while wait:
            try:
                self.get(username, name)
            except NotFoundError:
                return
            if time.monotonic() > deadline:
                raise LabSpawnerError(f"cluster {name} was not deleted in time", code="timeout")
            time.sleep(POLL_SECONDS)

    # The cluster scaler API -------------------------------------------------------------

    def scaler_list(self, kind: str = "daskclusters") -> dict[str, Any]:
        """``{kind, count, clusters}``: the caller's clusters of a kind (an administrator's:
        everyone's), as the operators' objects."""
        return dict(self._scaler("GET", f"/list/{kind}"))

    def scaler_object(self, kind: str, name: str) -> dict[str, Any]:
        """The cluster's object, as Kubernetes has it."""
        return dict(self._scaler("GET", f"/cluster/{kind}/{name}"))

    def scale(
        self, kind: str, name: str, replicas: int, *, worker_tier: str | None = None
    ) -> dict[str, Any]:
        """Set the workers (capped at the cluster's maximum), optionally with a new tier for
        them; the answer says what took effect (``effective_replicas``, ``capped``)."""
        body: dict[str, Any] = {"replicas": replicas}
        if worker_tier is not None:
            body["worker_hw_tier_name"] = worker_tier
        return dict(self._scaler("PATCH", f"/scale/{kind}/{name}", json=body))

    def set_head_tier(self, kind: str, name: str, tier: str) -> dict[str, Any]:
        """Give the head a hardware tier; it takes effect when the head is next made
        (:meth:`restart_head`)."""
        body = {"head_hw_tier_name": tier}
        return dict(self._scaler("PATCH", f"/head-hw-tier/{kind}/{name}", json=body))

    def restart_head(
        self, kind: str, name: str, *, wait: bool = True, timeout: float = 120.0
    ) -> dict[str, Any]:
        """Restart the cluster's head; with ``wait``, return the status once the new head is
        ready, else the restart's answer (pass its ``started_at`` to
        :meth:`restart_head_status`)."""
        started = dict(self._scaler("PATCH", f"/restart_head/{kind}/{name}"))
        if not wait:
            return started
        deadline = time.monotonic() + timeout
        while True:
            status = self.restart_head_status(kind, name, started["started_at"])
            if status["ok"]:
                return status
            if time.monotonic() > deadline:
                raise LabSpawnerError(
                    f"the head of {name} was not ready again in time ({status['status']})",
                    code="timeout",
                )
            time.sleep(POLL_SECONDS)

    def restart_head_status(self, kind: str, name: str, started_at: str) -> dict[str, Any]:
        """Whether the head was made again since ``started_at`` and is ready (``ok``)."""
        return dict(
            self._scaler(
                "GET", f"/restart_head_status/{kind}/{name}", params={"started_at": started_at}
            )
        )

    # Dask -------------------------------------------------------------------------------

    def dask_client(
        self,
        username: str,
        name: str | None = None,
        *,
        timeout: float = 300.0,
        **create: Any,
    ) -> tuple[DaskClient, Cluster]:
        """A ``dask.distributed.Client`` connected to the user's Dask cluster ``name``, or to
        a new one made with ``create``'s arguments (see :meth:`create`); and the cluster.

        Returns once the cluster's workers have joined its scheduler, not merely once it
        runs, so the first computation has the workers asked for; :class:`LabSpawnerError`
        (code ``timeout``) if they have not within ``timeout`` seconds, all in all. Needs
        ``distributed`` (the ``dask`` extra of this package).
        """
        from distributed import Client as DaskClient

        deadline = time.monotonic() + timeout
        if name is None:
            cluster = self.create(username, "daskclusters", timeout=timeout, **create)
        else:
            cluster = self.wait(username, name, timeout=timeout)
        if cluster.kind != "daskclusters" or not cluster.scheduler_address:
            raise LabSpawnerError(f"{cluster.name} is not a running Dask cluster", code="kind")
        client = DaskClient(
            cluster.scheduler_address, timeout=max(1.0, deadline - time.monotonic())
        )
        try:
            client.wait_for_workers(cluster.workers, timeout=max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            joined = len(client.scheduler_info().get("workers", {}))
            client.close()
            raise LabSpawnerError(
                f"cluster {cluster.name}: {joined} of {cluster.workers} workers joined in time",
                code="timeout",
            ) from None
        return client, cluster

    def _scaler(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, prefix=SCALER_PREFIX, **kwargs).json()
