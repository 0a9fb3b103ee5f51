"""The Kubernetes emulator as one object: API server, store, watches and simulated cluster.

Tests create one per test (``with KubernetesEmulator() as kube: ...``) and point the real
``kubernetes`` client, or a service under test in another process, at ``kube.url``.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

import kubernetes.client

from devstack.kube.audit import AuditLog
from devstack.kube.cluster import Cluster, ClusterSettings
from devstack.kube.cluster.addresses import LoopbackAddresses
from devstack.kube.control import ControlApi
from devstack.kube.defaults import ClusterIPAllocator, Defaulter
from devstack.kube.faults import RequestFaults
from devstack.kube.handlers import Handlers
from devstack.kube.quota import admit_pod
from devstack.kube.resources import ResourceRegistry
from devstack.kube.server import ApiServer
from devstack.kube.store import Store
from devstack.kube.validation import shared_validator
from devstack.kube.watches import WatchHub
from devstack.serving import ServerThread, StartStop
from devstack.tls import LocalAuthority, shared_authority


class KubernetesEmulator(StartStop):
    """A Kubernetes API server on a loopback port, backed by a simulated cluster."""

    def __init__(
        self,
        *,
        port: int = 0,
        settings: ClusterSettings | None = None,
        watch_history: int = 10000,
        api_latency: float = 0.0,
        authority: LocalAuthority | None = None,
    ) -> None:
        """``api_latency``: seconds each API request waits before it is handled, as on a
        real control plane (see ``api_latency`` below); 0 for tests. The API is served over
        HTTPS, as every cluster's is, with a certificate of ``authority`` (by default the
        process's, ``devstack.tls``)."""
        self.authority = authority if authority is not None else shared_authority()
        """The CA its clients trust (``client_configuration``, the stack's kubeconfig)."""
        self.store = Store()
        self.served = ResourceRegistry()
        """What the API serves: the built-in kinds and those of CustomResourceDefinitions."""
        self._hub = WatchHub(self.store, watch_history, self.served)
        self.audit = AuditLog()
        self.faults = RequestFaults(self._hub.drop_all)
        settings = settings if settings is not None else ClusterSettings()
        # Services of a stack that runs processes carry traffic, on loopback addresses of
        # the block the stack claims (its pods' block too).
        addresses = LoopbackAddresses()
        allocator = ClusterIPAllocator(addresses.service_address) if settings.programs else None
        defaulter = Defaulter(allocator)
        self.defaulter = defaulter
        """What the API server fills in on a create (a Service's cluster IP, a pod's
        defaults): objects stored directly, as a population is, get the same."""
        self.cluster = Cluster(
            self.store, settings, self.served, self._admission(defaulter), addresses=addresses
        )
        handlers = Handlers(self.store, shared_validator(), defaulter)
        control = ControlApi(self.audit, self.faults, lambda: self.cluster)
        self.app = ApiServer(
            self.store,
            self._hub,
            handlers,
            self.audit,
            self.faults,
            control,
            served=self.served,
            logs=self.cluster.logs,
            latency=api_latency,
        )
        self._server = ServerThread(self.app, port=port, tls=self.authority.server_context())
        self._running = False

    def _admission(self, defaulter: Defaulter) -> Callable[[str, dict[str, Any]], None]:
        """What the API server does to an object a controller creates: its defaults, then,
        for a pod, the ResourceQuota admission (a 403 the controller sees, as from the API)."""

        def admit(resource: str, obj: dict[str, Any]) -> None:
            defaulter.on_create(resource, obj)
            namespace = obj["metadata"].get("namespace")
            if resource == "pods" and namespace:
                admit_pod(self.store, namespace, obj)

        return admit

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def api_latency(self) -> float:
        """Seconds each API request waits before it is handled; settable while running."""
        return self.app.latency

    @api_latency.setter
    def api_latency(self, seconds: float) -> None:
        self.app.latency = max(0.0, seconds)

    @property
    def open_watches(self) -> int:
        """How many watch streams are open now (lets tests await a watch being ready)."""
        return self._hub.open_count

    def start(self) -> KubernetesEmulator:
        _quiet_request_log()
        self._server.start()
        self.cluster.start()
        self._running = True
        return self

    def stop(self) -> None:
        """Stop serving: release held requests, end watches, stop the cluster and server."""
        if not self._running:
            return
        self._running = False
        self.faults.clear()
        self._hub.close()
        self.cluster.stop()
        self._server.stop()

    def client_configuration(self) -> kubernetes.client.Configuration:
        """A client configuration for this emulator: its URL and its CA, no credentials."""
        configuration = kubernetes.client.Configuration(host=self.url)
        configuration.ssl_ca_cert = str(self.authority.ca_path)
        return configuration

    def api_client(self) -> kubernetes.client.ApiClient:
        return kubernetes.client.ApiClient(self.client_configuration())

    def kubeconfig(self, name: str = "devstack") -> dict[str, Any]:
        """A kubeconfig document for this emulator (``kubectl --kubeconfig``): its URL and,
        as a cluster's kubeconfig has, the CA its API is signed by; the token is any, since
        the API does not authenticate."""
        cluster = {
            "server": self.url,
            "certificate-authority-data": base64.b64encode(self.authority.ca_pem).decode(),
        }
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": name}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        }


def _quiet_request_log() -> None:
    """werkzeug logs every request at INFO, which costs time and floods test output; keep
    its warnings. werkzeug sets INFO itself on its first log line when nothing configured
    the logger, so NOTSET and INFO both mean "not chosen on purpose"; DEBUG is left alone."""
    logger = logging.getLogger("werkzeug")
    if logger.level in (logging.NOTSET, logging.INFO):
        logger.setLevel(logging.WARNING)
