"""The app's per-user caps (``app.services.limits``), built once per process."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app

from app.models.config import Config
from app.services.limits import Limits
from app.storage.rate_limits import RateLimits


class LimitsExtension:
    def init_app(self, app: Flask, config: Config) -> None:
        client = app.extensions["redis"]  # the redis extension comes first
        app.extensions["limits"] = Limits(
            config.limits, RateLimits(client, config.redis.key_prefix)
        )

    @property
    def limits(self) -> Limits:
        return cast(Limits, current_app.extensions["limits"])
