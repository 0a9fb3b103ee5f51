"""The per-process lab machinery: stores, the Kubernetes storage and the operation runner."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app

from app.config import Config
from app.services.context import LabContext
from app.services.operations import OperationRunner
from app.storage.events import EventStore
from app.storage.kubernetes import KubernetesStorage
from app.storage.labs import LabStore


class LabsExtension:
    """Builds the ``LabContext`` and starts this process's operation runner."""

    def init_app(self, app: Flask, config: Config) -> None:
        redis_client = app.extensions["redis"]
        prefix = config.redis.key_prefix
        ctx = LabContext(
            config=config,
            labs=LabStore(redis_client, prefix),
            events=EventStore(redis_client, prefix),
            kube=KubernetesStorage(app.extensions["kubernetes"]),
        )
        runner = OperationRunner(
            ctx,
            lease_seconds=config.operations.lease_seconds,
            scan_seconds=config.operations.scan_seconds,
        )
        runner.start()
        app.extensions["labs"] = (ctx, runner)

    @property
    def context(self) -> LabContext:
        return cast(tuple[LabContext, OperationRunner], current_app.extensions["labs"])[0]

    @property
    def runner(self) -> OperationRunner:
        return cast(tuple[LabContext, OperationRunner], current_app.extensions["labs"])[1]
