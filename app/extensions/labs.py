"""The per-process lab machinery: stores, the Kubernetes storage and the background workers."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app

from app.config import Config
from app.services.context import LabContext
from app.services.image_refresh import ImageRefresher
from app.services.images import ImageService
from app.services.operations import OperationRunner
from app.services.prepuller import Prepuller
from app.services.registries import RegistryDirectory
from app.services.watcher import LabWatcher
from app.storage.event_hub import EventHub
from app.storage.events import EventStore
from app.storage.images import ImageStore
from app.storage.kubernetes import KubernetesStorage
from app.storage.labs import LabStore
from app.storage.prepull import PrepullStore


class LabWorkers:
    """This process's background work: the operation runner, the event hub, and its
    candidates for the elected roles (lab watcher, image refresher).

    Held together so whoever shuts the process (or a test's app) down stops all of them
    with one ``stop``; ``submit`` is the runner's, for callers that only need to start work.
    """

    def __init__(
        self,
        runner: OperationRunner,
        watcher: LabWatcher,
        hub: EventHub,
        images: ImageRefresher,
        prepuller: Prepuller,
        registries: RegistryDirectory,
    ) -> None:
        self.runner = runner
        self.watcher = watcher
        self.hub = hub
        self.images = images
        self.prepuller = prepuller
        self.registries = registries

    def start(self) -> None:
        self.hub.start()
        self.runner.start()
        self.watcher.start()
        self.images.start()
        self.prepuller.start()

    def submit(self, username: str) -> None:
        self.runner.submit(username)

    def stop(self) -> None:
        # Elected roles first: they give their leases up, so another worker leads at once.
        self.watcher.stop()
        self.images.stop()
        self.prepuller.stop()
        self.runner.stop()
        self.hub.stop()
        self.registries.close()


class LabsExtension:
    """Builds the ``LabContext`` and starts this process's background workers."""

    def init_app(self, app: Flask, config: Config) -> None:
        redis_client = app.extensions["redis"]
        prefix = config.redis.key_prefix
        kube = KubernetesStorage(
            app.extensions["kubernetes"], watches=app.extensions["kubernetes_watches"]
        )
        image_store = ImageStore(redis_client, prefix)
        prepulls = PrepullStore(redis_client, prefix)
        registries = RegistryDirectory(config, kube)
        ctx = LabContext(
            config=config,
            labs=LabStore(redis_client, prefix),
            events=EventStore(redis_client, prefix),
            kube=kube,
            images=ImageService(config, image_store, prepulls),
            registries=registries,
            prepulls=prepulls,
        )
        runner = OperationRunner(
            ctx,
            lease_seconds=config.operations.lease_seconds,
            scan_seconds=config.operations.scan_seconds,
            max_concurrent=config.operations.max_concurrent,
        )
        hub = EventHub(redis_client, ctx.events)
        hub.add_listener(image_store)
        refresher = ImageRefresher(config, image_store, registries, redis_client)
        prepuller = Prepuller(config, ctx.images, kube, prepulls, redis_client)
        workers = LabWorkers(
            runner, LabWatcher(ctx, redis_client), hub, refresher, prepuller, registries
        )
        workers.start()
        app.extensions["labs"] = (ctx, workers)

    @property
    def context(self) -> LabContext:
        return self._stored()[0]

    @property
    def runner(self) -> OperationRunner:
        return self._stored()[1].runner

    @property
    def hub(self) -> EventHub:
        return self._stored()[1].hub

    @property
    def watcher(self) -> LabWatcher:
        return self._stored()[1].watcher

    @property
    def images(self) -> ImageRefresher:
        return self._stored()[1].images

    @property
    def prepuller(self) -> Prepuller:
        return self._stored()[1].prepuller

    @staticmethod
    def _stored() -> tuple[LabContext, LabWorkers]:
        return cast(tuple[LabContext, LabWorkers], current_app.extensions["labs"])
