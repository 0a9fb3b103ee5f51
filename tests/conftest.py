"""Shared fixtures: a private Redis, the emulators, and the app wired to them."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from app.config import Config, parse_config
from app.extensions.labs import machinery_of, start_background, stop_background
from app.workloads.kinds import KindFactory
from devstack.dask_operator import DaskOperatorProcess
from devstack.demo import demo_tokens, demo_users
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from devstack.stack import LocalStack, StackOptions
from devstack.tls import TLS_DIR_ENV, shared_authority
from tests.support.dask_operator import dask_operator_for
from tests.support.rbac import RECORDER
from tests.support.redis_server import RedisServer

RUNS_LAST = "runs_last"
"""Marker of tests that read what the whole run did (the RBAC proof)."""


def pytest_configure(config: pytest.Config) -> None:
    """One certificate authority for every HTTPS server the run starts (the Kubernetes API
    and registry emulators, in this process and in the stacks it runs), which this process's
    HTTP clients trust as the service trusts it: through the kubeconfig or the configured CA
    for Kubernetes, through ``REQUESTS_CA_BUNDLE`` for the rest."""
    directory = Path(tempfile.mkdtemp(prefix="lab-spawner-tests-tls-"))
    os.environ[TLS_DIR_ENV] = str(directory)
    os.environ["REQUESTS_CA_BUNDLE"] = str(shared_authority().bundle_path)


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = os.environ.pop(TLS_DIR_ENV, None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Move the tests marked ``runs_last`` to the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker(RUNS_LAST) is not None)


@pytest.fixture(scope="session", autouse=True)
def kubernetes_calls() -> Iterator[None]:
    """Record every Kubernetes call the service makes during the run, in any emulator."""
    RECORDER.install()
    yield
    RECORDER.uninstall()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client on the test Redis, emptied before each test."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="session")
def gafaelfawr() -> Iterator[GafaelfawrEmulator]:
    emulator = GafaelfawrEmulator(users=demo_users(), tokens=demo_tokens()).start()
    yield emulator
    emulator.stop()


@pytest.fixture(autouse=True)
def _gafaelfawr_healthy(request: pytest.FixtureRequest) -> None:
    """Undo a previous test's injected Gafaelfawr failure."""
    if "gafaelfawr" in request.fixturenames:
        emulator: GafaelfawrEmulator = request.getfixturevalue("gafaelfawr")
        emulator.fail_with(None)
        emulator.set_latency(0)


@pytest.fixture(scope="session")
def tokens() -> dict[str, str]:
    """Demo token values by name: admin, rachel, wile, rachel-readonly, admin-user."""
    return {name: spec.token for name, spec in demo_tokens().items()}


@pytest.fixture(scope="session")
def kube() -> Iterator[KubernetesEmulator]:
    emulator = KubernetesEmulator().start()
    for index in range(3):
        emulator.cluster.add_node(f"node-{index + 1}")
    yield emulator
    emulator.stop()


@pytest.fixture(scope="module")
def dask_operator(
    kube: KubernetesEmulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaskOperatorProcess]:
    """The real dask-kubernetes operator against the shared emulator, one per test module.

    Not one for the whole run: the operator retires a worker by asking the scheduler through
    its Service, and when the Service goes meanwhile (a test ends mid scale-down; the
    emulated pods run no scheduler, so such a retire never finishes) it waits for a port
    forward with a blocking sleep, which stops its event loop for up to 200 s. A module's
    clusters then wait on their own operator, not on one an earlier module left frozen."""
    with dask_operator_for(kube, tmp_path_factory.mktemp("dask-operator")) as operator:
        yield operator


def service_config(
    redis_url: str, gafaelfawr_url: str, kube_url: str, **overrides: Any
) -> dict[str, Any]:
    """The service's YAML configuration as a dict, for these endpoints."""
    raw: dict[str, Any] = {
        "logLevel": "INFO",
        "gafaelfawr": {"url": gafaelfawr_url, "cacheSeconds": 30},
        "redis": {"url": redis_url},
        "kubernetes": {
            "mode": "host",
            "host": kube_url,
            "requestTimeout": 5,
            "certificateAuthority": str(shared_authority().ca_path),
        },
        # The prepuller's tests turn it on; elsewhere its pods would only add noise.
        "prepuller": {"enabled": False},
        "prepull": [
            {
                "name": "test",
                "type": "simple",
                "images": [
                    simple_image("registry.test/lsstsqre/sciplat-lab:w_2024_42", "Weekly 2024_42")
                ],
            }
        ],
        "lab": {
            "sizes": [
                {"name": "small", "cpu": 1, "memory": "4Gi"},
                {"name": "large", "cpu": 4, "memory": "16Gi"},
            ],
        },
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    return raw


def simple_image(url: str, name: str) -> dict[str, str]:
    """An image of a ``simple`` prepull block, pinned to a digest derived from its URL, so
    tests of the lab lifecycle need no registry."""
    return {
        "url": url,
        "name": name,
        "digest": "sha256:" + hashlib.sha256(url.encode()).hexdigest(),
    }


@pytest.fixture
def config(
    redis_client: redis.Redis,
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
) -> Config:
    return parse_config(service_config(redis_server.url, gafaelfawr.url, kube.url))


def await_complete_state(app: Flask, timeout: float = 20.0) -> None:
    """Wait until the app's first reconcile has declared Redis complete: until then lab
    reads answer 503 ``rebuilding``, as they do after Redis comes back empty."""
    store = machinery_of(app).engine.store
    deadline = time.monotonic() + timeout
    while not store.is_complete():
        assert time.monotonic() < deadline, "the first reconcile did not complete in time"
        time.sleep(0.01)


@pytest.fixture
def make_app() -> Iterator[Callable[..., Flask]]:
    """Build apps from configs (running ``kinds``, when a test adds its own) and start their
    background work, as a server's worker does after loading the app; it stops when the
    test ends."""
    apps: list[Flask] = []

    def make(config: Config, kinds: Sequence[KindFactory] | None = None) -> Flask:
        app = create_app(config, kinds)
        apps.append(app)
        start_background(app)
        await_complete_state(app)
        return app

    yield make
    for app in apps:
        stop_background(app)


@pytest.fixture
def app(config: Config, make_app: Callable[[Config], Flask]) -> Flask:
    return make_app(config)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


FILESERVER_IDLE_SECONDS = 8
"""Long enough for a test's steps against a file server, short enough to await its end."""


@pytest.fixture(scope="session")
def real_lab_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A local stack as ``make run`` starts it: each lab a real Jupyter server, each user's
    file server a real WebDAV server; the file servers stop when idle for
    ``FILESERVER_IDLE_SECONDS`` rather than ``make run``'s two minutes."""
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("real-labs"),
        real_labs=True,
        pull_seconds=0.1,
        config_overrides={"fileserver": {"idleTimeout": FILESERVER_IDLE_SECONDS}},
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def real_tokens(real_lab_stack: LocalStack) -> dict[str, str]:
    """The demo tokens of ``real_lab_stack``, by name (admin, rachel, wile...)."""
    return {name: entry["token"] for name, entry in real_lab_stack.state()["tokens"].items()}
