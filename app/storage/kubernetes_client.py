"""The ``kubernetes`` client's ``ApiClient``, configured with a deadline on every call.

This is the one module that imports the ``kubernetes`` library (all of its generated models
come with it: 12-14 MiB of a worker's memory beside the app's other libraries).
``app.storage.kubernetes`` imports it when the process's first Kubernetes call needs a
client, so a web worker, which answers from Redis, does not load it for nothing.

The ``kubernetes`` client has no default request timeout: a call to an API server that
stops answering would block its caller forever. ``DeadlineApiClient`` supplies the
configured timeout to every call that does not pass its own (watches pass a longer one).

Calls also wait for one of the pool's connections rather than open another. urllib3 opens a
connection beyond the pool's size when every pooled one is busy, and closes it after one
call ("Connection pool is full, discarding connection"): in a storm of spawns a worker with
32 operations creating their objects at once made hundreds of such calls, each paying for a
new connection (and, under gevent, an address lookup in a thread pool) on the busiest path.
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from app.models.config import KubernetesConfig

USER_AGENT = "lab-spawner/1"
"""The ``User-Agent`` of every Kubernetes call the service makes."""

CONNECTIONS = 64
"""Connections the request client keeps to the API server, and its calls in flight. A
worker runs at most ``operations.maxConcurrent`` (32) operations, whose widest step creates
about six objects at once; past 64 calls in flight the API server's own latency, not our
connections, sets the pace."""

WATCH_CONNECTIONS = 512
"""Connections the watch client keeps. Labs, kernels and lab namespaces are followed on one
shared watch each (``app.engine.feeds``), but the other waits watch their object alone, and
waiting operations are not bounded (``Run.waiting``): a storm of them can follow a few
hundred objects at once, each watch holding its connection for a second or two."""


class DeadlineApiClient(k8s.ApiClient):
    """An ``ApiClient`` that never makes a call without a timeout.

    With ``bounded``, at most ``CONNECTIONS`` calls are in flight: the others wait for a
    pooled connection. A bounded client's responses are read before the call returns (its
    connection is free only then), so it is not for watches.
    """

    def __init__(
        self, configuration: k8s.Configuration, request_timeout: float, *, bounded: bool = False
    ) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout
        # Names the service in the API server's audit log (and our RBAC proof reads it there).
        self.user_agent = USER_AGENT
        self._slots = threading.BoundedSemaphore(CONNECTIONS) if bounded else None

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        timeout = _request_timeout or self.request_timeout
        if self._slots is None:
            return super().call_api(
                method, url, header_params, body, post_params, _request_timeout=timeout
            )
        with self._slots:
            response = super().call_api(
                method, url, header_params, body, post_params, _request_timeout=timeout
            )
            response.read()
            return response


def _kubeconfig_path(config: KubernetesConfig) -> str | None:
    if config.kubeconfig:
        return config.kubeconfig
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    default = Path.home() / ".kube" / "config"
    return str(default) if default.exists() else None


def build_configuration(config: KubernetesConfig) -> k8s.Configuration:
    """Pick the connection: in-cluster, else kubeconfig, else the configured host.

    ``mode`` pins one source; ``auto`` tries them in that order, so the same image works
    in a cluster and on a developer's machine.
    """
    configuration = k8s.Configuration()
    mode = config.mode
    if mode in ("auto", "in-cluster"):
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return _tune(configuration)
        except ConfigException:
            if mode == "in-cluster":
                raise
    if mode in ("auto", "kubeconfig"):
        path = _kubeconfig_path(config)
        if path is not None:
            k8s_config.load_kube_config(
                config_file=path, client_configuration=configuration, persist_config=False
            )
            return _tune(configuration)
        if mode == "kubeconfig":
            raise ConfigException("kubernetes.mode is kubeconfig but no kubeconfig was found")
    if config.host is None:
        raise ConfigException(
            "no in-cluster config or kubeconfig found and kubernetes.host is not set"
        )
    configuration.host = config.host
    if config.certificate_authority:
        configuration.ssl_ca_cert = config.certificate_authority
    return _tune(configuration)


def _tune(configuration: k8s.Configuration) -> k8s.Configuration:
    # gevent workers run many requests concurrently in one process; the default pool
    # (5 x CPUs) would make them queue for a connection.
    configuration.connection_pool_maxsize = CONNECTIONS
    # Retry refused connections (an API server restarting), never a request that may have
    # reached the server: a read timeout is reported, so the deadline stays the deadline.
    # A 429 comes back as an answer (not retried here, where its Retry-After would turn it
    # into an error): the storage layer retries it after the wait the server asked for.
    configuration.retries = Retry(
        total=2,
        connect=2,
        read=0,
        redirect=0,
        status=0,
        other=0,
        respect_retry_after_header=False,
    )
    return configuration


@dataclass(frozen=True)
class ApiClients:
    """A process's two clients: one for requests, one for watches.

    Watches have their own connections because a watch its reader leaves early (the pod
    is ready, the namespace gone) leaves the server still streaming on the connection until
    it is read to its end. In a shared pool each such connection was one the requests could
    not use meanwhile: the next spawn's concurrent creates found too few and opened new
    ones, resolving the API server's address each time (under gevent, in a thread pool).
    """

    requests: k8s.ApiClient
    watches: k8s.ApiClient


def connect(config: KubernetesConfig) -> ApiClients:
    """Both clients, from the connection ``build_configuration`` picks; nothing is opened
    until the first call."""
    configuration = build_configuration(config)
    watch_configuration = copy.deepcopy(configuration)
    watch_configuration.connection_pool_maxsize = WATCH_CONNECTIONS
    return ApiClients(
        requests=DeadlineApiClient(configuration, config.request_timeout, bounded=True),
        watches=DeadlineApiClient(watch_configuration, config.request_timeout, bounded=False),
    )
