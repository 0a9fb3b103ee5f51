"""The process's Gafaelfawr client, built once with its HTTP connection pool."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app

from app.models.config import Config
from app.storage.gafaelfawr import GafaelfawrClient


class GafaelfawrExtension:
    """Flask extension holding the process's ``GafaelfawrClient``."""

    def init_app(self, app: Flask, config: Config) -> None:
        app.extensions["gafaelfawr"] = GafaelfawrClient(
            config.gafaelfawr, app.extensions["redis"], config.redis.key_prefix
        )

    @property
    def client(self) -> GafaelfawrClient:
        return cast(GafaelfawrClient, current_app.extensions["gafaelfawr"])
