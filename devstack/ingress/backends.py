"""Where a route's Service is reached: its loopback ClusterIP and port, if it has somewhere to go.

On a stack whose pods run as processes a Service's ClusterIP is a loopback address with a real
listener per port forwarding to its ready pods (``devstack.kube.cluster.services``); the proxy
connects there, as ingress-nginx connects to a Service's endpoints. A Service that does not
exist, lacks the port, has no loopback address (its pods are emulated) or no ready endpoint is
a 503, as ingress-nginx answers for a backend without endpoints.
"""

from __future__ import annotations

from typing import Any, Protocol

from devstack.kube.cluster.podstatus import is_pod_ready


class ObjectReader(Protocol):
    """The part of the emulator's store the proxy reads."""

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...
    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]: ...


class NoBackend(Exception):
    """Why a request has nowhere to go."""


def backend_address(
    store: ObjectReader, namespace: str, service_name: str, port: int | str
) -> tuple[str, int]:
    """The ClusterIP and port a route reaches; raises :class:`NoBackend` when there is none."""
    where = f"service {namespace}/{service_name}"
    service = store.get("services", namespace, service_name)
    if service is None:
        raise NoBackend(f"{where} does not exist")
    spec = service.get("spec") or {}
    chosen = next(
        (
            p
            for p in spec.get("ports") or []
            if (p.get("port") == port if isinstance(port, int) else p.get("name") == port)
        ),
        None,
    )
    if chosen is None:
        raise NoBackend(f"{where} has no port {port}")
    address = str(spec.get("clusterIP") or "")
    if not address.startswith("127."):
        raise NoBackend(f"{where} has no loopback address (its pods are not run as processes)")
    selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
    if not selector or not _has_ready_endpoint(store, namespace, selector):
        raise NoBackend(f"{where} has no ready endpoint")
    return address, int(chosen["port"])


def _has_ready_endpoint(store: ObjectReader, namespace: str, selector: dict[str, str]) -> bool:
    """Whether a Ready, process-run pod the selector matches is there to take a connection."""
    for pod in store.list("pods", namespace):
        labels = pod["metadata"].get("labels") or {}
        if pod["metadata"].get("deletionTimestamp") or any(
            labels.get(k) != v for k, v in selector.items()
        ):
            continue
        pod_ip = str((pod.get("status") or {}).get("podIP") or "")
        if is_pod_ready(pod) and pod_ip.startswith("127."):
            return True
    return False
