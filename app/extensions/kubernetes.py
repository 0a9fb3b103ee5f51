"""The Kubernetes API client, configured once per process with a deadline on every call.

The ``kubernetes`` client has no default request timeout: a call to an API server that
stops answering would block its caller forever. ``DeadlineApiClient`` supplies the
configured timeout to every call that does not pass its own (watches pass a longer one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from flask import Flask, current_app
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from app.config import KubernetesConfig

USER_AGENT = "lab-spawner/1"
"""The ``User-Agent`` of every Kubernetes call the service makes."""


class DeadlineApiClient(k8s.ApiClient):
    """An ``ApiClient`` that never makes a call without a timeout."""

    def __init__(self, configuration: k8s.Configuration, request_timeout: float) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout
        # Names the service in the API server's audit log (and our RBAC proof reads it there).
        self.user_agent = USER_AGENT

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        return super().call_api(
            method,
            url,
            header_params,
            body,
            post_params,
            _request_timeout=_request_timeout or self.request_timeout,
        )


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
    return _tune(configuration)


def _tune(configuration: k8s.Configuration) -> k8s.Configuration:
    # gevent workers run many requests concurrently in one process; the default pool
    # (5 x CPUs) would make them queue for a connection.
    configuration.connection_pool_maxsize = 64
    # Retry refused connections (an API server restarting), never a request that may have
    # reached the server: a read timeout is reported, so the deadline stays the deadline.
    configuration.retries = Retry(total=2, connect=2, read=0, redirect=0, status=0, other=0)
    return configuration


class KubernetesExtension:
    """Flask extension holding the process's Kubernetes ``ApiClient`` for requests, and a
    second one for watches.

    Watches have their own connections because a watch its reader leaves early (the pod
    is ready, the namespace gone) leaves the server still streaming on the connection,
    which urllib3 then closes. In a shared pool each such close took a live connection
    from the requests: the next spawn's concurrent creates found too few and opened new
    ones, resolving the API server's address each time (under gevent, in a thread pool).
    """

    def init_app(self, app: Flask, config: KubernetesConfig) -> None:
        configuration = build_configuration(config)
        app.extensions["kubernetes"] = DeadlineApiClient(configuration, config.request_timeout)
        app.extensions["kubernetes_watches"] = DeadlineApiClient(
            configuration, config.request_timeout
        )

    @property
    def api_client(self) -> DeadlineApiClient:
        return cast(DeadlineApiClient, current_app.extensions["kubernetes"])
