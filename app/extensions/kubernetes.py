"""The process's Kubernetes connection: its clients, built at the first call that needs one
(``app.storage.kubernetes.KubernetesConnection``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from flask import Flask, current_app

from app.models.config import KubernetesConfig
from app.storage.kubernetes import KubernetesConnection

if TYPE_CHECKING:
    from kubernetes import client as k8s


class KubernetesExtension:
    """Flask extension holding the process's ``KubernetesConnection``; building the app
    builds no client and imports no ``kubernetes``."""

    def init_app(self, app: Flask, config: KubernetesConfig) -> None:
        app.extensions["kubernetes"] = KubernetesConnection.from_config(config)

    @property
    def connection(self) -> KubernetesConnection:
        return cast(KubernetesConnection, current_app.extensions["kubernetes"])

    @property
    def api_client(self) -> k8s.ApiClient:
        """The request client, built now if it was not yet."""
        return self.connection.clients().requests
