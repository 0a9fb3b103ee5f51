"""The per-process machinery behind the routes: stores, the workload engine, the event hub,
and the candidates for the elected roles (lab watcher, image refresher, prepuller).

``init_app`` only builds it; nothing runs until ``start_background`` is called, by the
server's worker hook (gunicorn's ``post_worker_init``) or by a test, so importing or
building the app starts no thread and opens no connection. What starts depends on the
process's role (``app.models.process_role``): a web process starts the event hub for its
streams and hands operations to the runner processes; a runner process runs them and
stands for the elected loops; a process of the ``all`` role does both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from flask import Flask, current_app

from app import metrics
from app.engine.admission import Admission
from app.engine.engine import Engine
from app.engine.feeds import WatchFeeds
from app.engine.leadership import ElectedWorker
from app.engine.reads import WorkloadReads
from app.engine.watcher import WorkloadWatcher
from app.metrics import HotCounterFlusher
from app.models.config import Config
from app.models.process_role import ProcessRole
from app.models.workload import Action
from app.storage.admin_feed import AdminFeed
from app.storage.admission import AdmissionStore
from app.storage.audit import AuditLog
from app.storage.event_hub import EventHub
from app.storage.events import EventStore
from app.storage.images import ImageStore
from app.storage.kubernetes import KubernetesStorage
from app.storage.maintenance import MaintenanceStore
from app.storage.operation_notices import OperationNotices
from app.storage.prepull import PrepullStore
from app.storage.rate_limits import RateLimits
from app.storage.registries import RegistryDirectory
from app.storage.workloads import WorkloadStore
from app.workloads.context import WorkloadContext
from app.workloads.image.lifecycle import ImageLifecycle
from app.workloads.image.prepuller import Prepuller
from app.workloads.image.refresh import ImageRefresher
from app.workloads.image.service import ImageService
from app.workloads.kinds import KINDS, KindFactory
from app.workloads.lab.service import LabService
from app.workloads.lab.store import LabStore

EXTENSION_KEY = "lab_spawner"
"""Where the app keeps its ``Machinery`` (``app.extensions``)."""


@dataclass(frozen=True)
class Machinery:
    """This process's stores and background work, held together so whoever starts or
    stops the process (or a test's app) does it with one call."""

    context: WorkloadContext
    engine: Engine
    hub: EventHub
    watcher: WorkloadWatcher
    images: ImageRefresher
    prepuller: Prepuller
    registries: RegistryDirectory
    audit: AuditLog
    """The administrators' audit log."""
    maintenance: MaintenanceStore
    """Maintenance mode's switch, which the engine reads before every user's creation."""
    metrics_flusher: HotCounterFlusher = field(default_factory=HotCounterFlusher)
    """Writes the counters every request bumps to the shared samples once a second."""

    def elections(self) -> list[ElectedWorker]:
        """This process's candidacies for the elected loops, one per loop."""
        return [self.watcher.election, self.images.election, self.prepuller.election]

    def start(self, role: ProcessRole = ProcessRole.ALL) -> None:
        """Start what ``role`` does in this process (see the module)."""
        metrics.declare_series(
            kinds=sorted(self.engine.kinds),
            actions=[action.value for action in Action],
            loops=[election.loop for election in self.elections()],
        )
        self.metrics_flusher.start()
        if role.runs_operations:
            # Now, not in the first operation: building the clients imports the library.
            # A web process builds them only if a request calls Kubernetes (few do).
            self.context.kube.connection.open()
            # Before the hub subscribes: the notices arrive on its one subscription.
            self.hub.add_listener(self.engine.runner)
        self.hub.start()
        self.engine.start(runs_operations=role.runs_operations)
        if role.runs_operations:
            self.watcher.start()
            self.images.start()
            self.prepuller.start()

    def drain(self) -> None:
        """Hand this process's work over, as it starts to stop (SIGTERM): the elected roles
        give their leases up, and the runner takes no more operations and leaves those it
        runs to other workers, which resume them at once. Requests still being served are
        answered; ``stop`` ends the rest when the process exits."""
        self.watcher.stop()
        self.images.stop()
        self.prepuller.stop()
        self.engine.stop()

    def stop(self) -> None:
        # Elected roles first: they give their leases up, so another worker leads at once.
        self.watcher.stop()
        self.images.stop()
        self.prepuller.stop()
        self.engine.stop()
        self.context.feeds.stop()
        self.hub.stop()
        self.registries.close()
        self.metrics_flusher.stop()


def build_machinery(app: Flask, config: Config, kinds: Sequence[KindFactory] = KINDS) -> Machinery:
    redis_client = app.extensions["redis"]
    prefix = config.redis.key_prefix
    kube = KubernetesStorage(connection=app.extensions["kubernetes"])
    image_store = ImageStore(redis_client, prefix)
    prepulls = PrepullStore(redis_client, prefix)
    registries = RegistryDirectory(config, kube)
    store = WorkloadStore(redis_client, prefix)
    workloads = WorkloadReads(store)
    labs = LabStore(redis_client, prefix, workloads)
    events = EventStore(redis_client, prefix)
    context = WorkloadContext(
        config=config,
        labs=labs,
        kube=kube,
        feeds=WatchFeeds(kube),
        images=ImageService(config, image_store, prepulls, records=workloads),
        registries=registries,
        prepulls=prepulls,
        image_store=image_store,
        budgeted=tuple(kind.budget for kind in kinds if kind.budget is not None),
        operator_objects={
            kind.name: kind.operator_objects for kind in kinds if kind.operator_objects
        },
    )
    operations = config.operations
    hub = EventHub(redis_client, events)
    hub.add_listener(image_store)
    declared = [make(context) for make in kinds]
    maintenance = MaintenanceStore(redis_client, prefix)
    engine = Engine(
        store=store,
        events=events,
        hub=hub,
        kinds=declared,
        lease_seconds=operations.lease_seconds,
        scan_seconds=operations.scan_seconds,
        max_concurrent=operations.max_concurrent,
        maintenance=maintenance,
        notices=OperationNotices(redis_client, prefix),
        admission=Admission(
            AdmissionStore(
                redis_client,
                prefix,
                pending_key=store.pending_key,
                events_channel=events.channel,
            ),
            config.admission,
            rates=RateLimits(redis_client, prefix),
            group_mutations_per_minute=config.limits.group_mutations_per_minute,
        ),
    )
    return Machinery(
        context=context,
        engine=engine,
        hub=hub,
        audit=AuditLog(redis_client, prefix, length=config.admin.audit_length),
        maintenance=maintenance,
        watcher=WorkloadWatcher(
            store=store,
            kube=kube,
            kinds=declared,
            config=config.watcher,
            client=redis_client,
            key_prefix=prefix,
            housekeeping=_housekeeping(config, context, engine),
            end=engine.end,
        ),
        images=ImageRefresher(
            config,
            image_store,
            registries,
            redis_client,
            lifecycle=ImageLifecycle(config, engine.workloads, image_store, engine),
        ),
        prepuller=Prepuller(
            config,
            context.images,
            kube,
            prepulls,
            redis_client,
            feed=AdminFeed(redis_client, prefix),
        ),
        registries=registries,
    )


def _housekeeping(
    config: Config, context: WorkloadContext, engine: Engine
) -> list[Callable[[], object]]:
    """What the elected watcher does after each reconcile."""
    age = config.admin.drop_failed_labs_after_seconds
    if age <= 0:
        return []
    return [lambda: LabService(context, engine).drop_failed(older_than_seconds=age)]


def machinery_of(app: Flask) -> Machinery:
    return cast(Machinery, app.extensions[EXTENSION_KEY])


def find_machinery(app: object) -> Machinery | None:
    """The machinery of ``app`` if it is an app of this service (for server hooks, which may
    load another WSGI application under the same settings)."""
    extensions = getattr(app, "extensions", None)
    found = extensions.get(EXTENSION_KEY) if isinstance(extensions, dict) else None
    return found if isinstance(found, Machinery) else None


def start_background(app: Flask, role: ProcessRole = ProcessRole.ALL) -> None:
    """Start ``app``'s background work for ``role``: the event hub, and the runner's
    scanner and the elected roles where it runs operations. Called once per server
    process, after it forked."""
    machinery_of(app).start(role)


def stop_background(app: Flask) -> None:
    """Stop it, giving up the leases this process holds so others take over at once."""
    machinery_of(app).stop()


class LabsExtension:
    """Builds the ``Machinery`` of an app, and finds the current app's."""

    def init_app(self, app: Flask, config: Config, kinds: Sequence[KindFactory] = KINDS) -> None:
        app.extensions[EXTENSION_KEY] = build_machinery(app, config, kinds)

    @property
    def machinery(self) -> Machinery:
        return machinery_of(current_app)

    @property
    def context(self) -> WorkloadContext:
        return self.machinery.context

    @property
    def engine(self) -> Engine:
        return self.machinery.engine

    @property
    def hub(self) -> EventHub:
        return self.machinery.hub
