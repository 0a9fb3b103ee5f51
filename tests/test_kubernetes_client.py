"""The service's Kubernetes client: connection sources and a deadline on every call."""

from __future__ import annotations

import base64
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import MaxRetryError, ReadTimeoutError

from app.config import KubernetesConfig
from app.storage.kubernetes_client import CONNECTIONS, DeadlineApiClient, build_configuration
from devstack.kube import KubernetesEmulator
from devstack.tls import shared_authority
from tests.labs.conftest import wait_for


def _config(**overrides: object) -> KubernetesConfig:
    values: dict[str, object] = {
        "mode": "auto",
        "host": None,
        "kubeconfig": None,
        "request_timeout": 5.0,
        "service_namespace": "nublado",
        # The emulators' CA (the run's one: ``tests/conftest.py``).
        "certificate_authority": str(shared_authority().ca_path),
    }
    values.update(overrides)
    return KubernetesConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def no_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_host_mode_reaches_the_api_over_tls_with_the_configured_ca(
    kube: KubernetesEmulator,
) -> None:
    assert kube.url.startswith("https://")
    config = _config(mode="host", host=kube.url, certificate_authority=str(kube.authority.ca_path))
    api = DeadlineApiClient(build_configuration(config), 5.0)
    assert k8s.VersionApi(api).get_code().major
    # Without the CA the server's certificate is refused: the path is really checked.
    no_ca = _config(mode="host", host=kube.url, certificate_authority=None)
    unverified = DeadlineApiClient(build_configuration(no_ca), 5.0)
    with pytest.raises(MaxRetryError, match="CERTIFICATE_VERIFY_FAILED"):
        k8s.VersionApi(unverified).get_code()


def test_kubeconfig_mode(kube: KubernetesEmulator, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": kube.url,
                            "certificate-authority-data": base64.b64encode(
                                kube.authority.ca_pem
                            ).decode(),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        ),
        encoding="utf-8",
    )
    configuration = build_configuration(_config(mode="kubeconfig", kubeconfig=str(path)))
    assert configuration.host == kube.url
    # The loader's token goes out with every request.
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer t"
    core = k8s.CoreV1Api(DeadlineApiClient(configuration, 5.0))
    for _ in range(3):
        assert isinstance(core.list_namespace().items, list)


@pytest.mark.usefixtures("no_ambient_kubeconfig")
def test_auto_falls_back_to_the_configured_host() -> None:
    configuration = build_configuration(_config(host="http://127.0.0.1:1"))
    assert configuration.host == "http://127.0.0.1:1"


@pytest.mark.usefixtures("no_ambient_kubeconfig")
def test_auto_without_any_source_is_a_clear_error() -> None:
    with pytest.raises(ConfigException, match=r"kubernetes.host is not set"):
        build_configuration(_config())


@pytest.mark.usefixtures("no_ambient_kubeconfig")
def test_in_cluster_mode_outside_a_cluster_fails() -> None:
    with pytest.raises(ConfigException):
        build_configuration(_config(mode="in-cluster"))


def test_every_call_has_a_deadline() -> None:
    emulator = KubernetesEmulator().start()
    try:
        emulator.faults.time_out(hold=3.0)
        configuration = build_configuration(_config(mode="host", host=emulator.url))
        api = k8s.CoreV1Api(DeadlineApiClient(configuration, 0.3))
        started = time.monotonic()
        with pytest.raises((ReadTimeoutError, MaxRetryError)) as info:
            api.list_namespace()
        elapsed = time.monotonic() - started
        # One attempt only: a read timeout is never retried, so the deadline holds.
        assert 0.3 <= elapsed < 1.0
        if isinstance(info.value, MaxRetryError):
            assert isinstance(info.value.reason, ReadTimeoutError)
    finally:
        emulator.faults.clear()
        emulator.stop()


def _storage_in(kube: KubernetesEmulator, namespace: str) -> Any:
    """The service's Kubernetes storage on the emulator, with ``namespace`` made."""
    from app.storage.kubernetes import KubernetesStorage

    kube.store.create(
        "namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    return KubernetesStorage(
        DeadlineApiClient(build_configuration(_config(mode="host", host=kube.url)), 5.0)
    )


def test_secrets_are_replaced_without_being_read(kube: KubernetesEmulator) -> None:
    """The service may write Secrets in lab namespaces but never read them there (its
    ClusterRole has no cluster-wide get on Secrets)."""
    from app.builders.metadata import object_meta

    namespace = "secret-apply-test"
    storage = _storage_in(kube, namespace)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta("nb-someone", "someone", namespace=namespace),
        "data": {"token": "Zmlyc3Q="},
    }
    kube.audit.clear()
    storage.apply("secrets", body)
    storage.apply("secrets", {**body, "data": {"token": "c2Vjb25k"}})
    secret = kube.store.get("secrets", namespace, "nb-someone")
    assert secret is not None and secret["data"] == {"token": "c2Vjb25k"}
    verbs = [e.verb for e in kube.audit.entries(resource="secrets")]
    assert verbs == ["create", "create", "update"]
    # Other kinds are still read before being replaced, to leave foreign objects alone.
    config_map = {**body, "kind": "ConfigMap", "data": {"a": "b"}}
    storage.apply("configmaps", config_map)
    storage.apply("configmaps", config_map)
    assert "get" in [e.verb for e in kube.audit.entries(resource="configmaps")]


def test_a_replace_that_loses_to_another_write_reads_again(kube: KubernetesEmulator) -> None:
    """Another write between the read and the replace (a stale run of the same step, or a
    replace whose answer was lost and went through) is a 409 ``Conflict``: the object is
    read again and replaced, not the step failed."""
    from app.builders.metadata import object_meta

    namespace = "replace-conflict-test"
    storage = _storage_in(kube, namespace)
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta("nb-someone-env", "someone", namespace=namespace),
        "data": {"version": "first"},
    }
    storage.apply("configmaps", body)
    pause = kube.faults.pause_next("update", "configmaps", namespace=namespace)
    with ThreadPoolExecutor(1) as pool:
        replacing = pool.submit(storage.apply, "configmaps", {**body, "data": {"version": "ours"}})
        assert pause.arrived.wait(5)
        # Another writer gets there first: the held replace carries a stale version now.
        current = kube.store.get("configmaps", namespace, "nb-someone-env")
        assert current is not None
        kube.store.update("configmaps", {**current, "data": {"version": "theirs"}})
        pause.release()
        replaced = replacing.result(timeout=10)
    assert replaced["data"] == {"version": "ours"}
    stored = kube.store.get("configmaps", namespace, "nb-someone-env")
    assert stored is not None and stored["data"] == {"version": "ours"}
    verbs = [e.verb for e in kube.audit.entries(resource="configmaps")]
    assert verbs[-4:] == ["get", "update", "get", "update"]


def test_a_quota_in_a_namespace_going_or_gone_is_nothing_to_set(kube: KubernetesEmulator) -> None:
    """A deletion that ends after its lab's namespace was deleted gives nothing back: the API
    server refuses new content there (``NamespaceTerminating``), then the namespace is gone;
    either way ``set_quota`` answers None rather than failing the deletion."""
    from app.builders.resource_quota import Compute, build_namespace_quota

    namespace = "quota-going-test"
    storage = _storage_in(kube, namespace)
    quota = build_namespace_quota("someone", namespace, Compute(1, 1 << 30, 1, 1 << 30))
    assert storage.set_quota(quota) is not None
    # An operator's finalizer keeps the namespace terminating once its quota is gone.
    meta = {"name": "held", "namespace": namespace, "finalizers": ["example.com/x"]}
    kube.store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    api = kube.api_client()
    try:
        k8s.CoreV1Api(api).delete_namespace(namespace)
        wait_for(
            lambda: kube.store.get("resourcequotas", namespace, quota["metadata"]["name"]) is None
        )

        assert storage.set_quota(quota) is None
        assert kube.store.get("namespaces", None, namespace) is not None

        k8s.CoreV1Api(api).patch_namespaced_config_map(
            "held", namespace, {"metadata": {"finalizers": None}}
        )
        wait_for(lambda: kube.store.get("namespaces", None, namespace) is None)
        assert storage.set_quota(quota) is None
    finally:
        api.close()


def _pod_changed_since(kube: KubernetesEmulator, namespace: str) -> str:
    """A pod ``lab`` in a new namespace, changed once since the version returned: a watch
    from that version has an event at once."""
    kube.store.create("namespaces", {"metadata": {"name": namespace}})
    pod = kube.store.create(
        "pods",
        {
            "metadata": {"name": "lab", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    )
    created = str(pod["metadata"]["resourceVersion"])
    pod["metadata"]["labels"] = {"touched": "yes"}
    kube.store.update("pods", pod)
    return created


def _leave_a_watch_early(storage: Any, namespace: str, version: str, seconds: int = 30) -> None:
    """Watch from an earlier version, so an event is there at once, and stop after it; the
    server would go on streaming for ``seconds``."""
    for _ in storage.watch_pod(namespace, "lab", version, seconds):
        break


@pytest.mark.parametrize("own_watch_client", [True, False])
def test_a_watch_left_early_costs_requests_no_connection(
    kube: KubernetesEmulator, own_watch_client: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch its reader leaves early has its connection closed. With watches on their
    own client, requests keep every connection they had; sharing one client, the next
    request has to connect again."""
    from urllib3.connection import HTTPSConnection

    from app.storage.kubernetes import KubernetesStorage

    def client() -> DeadlineApiClient:
        return DeadlineApiClient(build_configuration(_config(mode="host", host=kube.url)), 5.0)

    connects: list[int] = []
    original = HTTPSConnection.connect

    def counting(self: Any) -> None:
        connects.append(1)
        original(self)

    # Counting only: every connection the client opens to the API server (HTTPS, as a
    # cluster's) is one of urllib3's.
    monkeypatch.setattr(HTTPSConnection, "connect", counting)
    storage = KubernetesStorage(client(), watches=client() if own_watch_client else None)
    namespace = f"watch-pool-{str(own_watch_client).lower()}"
    created = _pod_changed_since(kube, namespace)
    assert storage.read_namespace(namespace) is not None
    _leave_a_watch_early(storage, namespace, created)
    connects.clear()
    assert storage.read_namespace(namespace) is not None
    assert storage.read_pod(namespace, "lab") is not None
    assert len(connects) == (0 if own_watch_client else 1)


def test_a_watch_left_early_gives_its_connection_to_the_next_watch(
    kube: KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest of a watch its reader left is read in the background until the server ends
    it; its connection then goes back to the pool, and the next watch opens none (no TLS
    handshake per spawn in a storm)."""
    from urllib3.connection import HTTPSConnection
    from urllib3.response import HTTPResponse

    from app.storage.kubernetes import KubernetesStorage

    namespace = "watch-released"
    connects: list[int] = []
    released = threading.Event()
    connect, release = HTTPSConnection.connect, HTTPResponse.release_conn

    def counting(self: Any) -> None:
        connects.append(1)
        connect(self)

    def telling(self: Any) -> None:
        release(self)
        # Only this test's watch: another test's watch left early may end meanwhile.
        if namespace in (self.url or ""):
            released.set()

    monkeypatch.setattr(HTTPSConnection, "connect", counting)
    monkeypatch.setattr(HTTPResponse, "release_conn", telling)
    configuration = build_configuration(_config(mode="host", host=kube.url))
    storage = KubernetesStorage(
        DeadlineApiClient(configuration, 5.0), watches=DeadlineApiClient(configuration, 5.0)
    )
    created = _pod_changed_since(kube, namespace)
    _leave_a_watch_early(storage, namespace, created, seconds=1)
    assert connects == [1]
    released.clear()
    # The server ends the watch after its one second; the connection is back then.
    assert released.wait(timeout=15)
    connects.clear()
    _leave_a_watch_early(storage, namespace, created, seconds=1)
    assert connects == []


def _discards(caplog: pytest.LogCaptureFixture, api: DeadlineApiClient, calls: int) -> int:
    """Make ``calls`` calls at once; how many connections urllib3 opened and threw away."""
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"),
        ThreadPoolExecutor(max_workers=calls) as pool,
    ):
        answers = list(pool.map(lambda _: k8s.VersionApi(api).get_code().major, range(calls)))
    assert len(answers) == calls and all(answers)
    return len([r for r in caplog.records if "discarding connection" in r.getMessage()])


def test_calls_beyond_the_pool_wait_for_a_connection(caplog: pytest.LogCaptureFixture) -> None:
    """More calls at once than the pool holds: each waits for a pooled connection, and none
    opens one that urllib3 then throws away."""
    # Answers slow enough that every call is in flight at once even on a busy machine,
    # where starting the threads and their TLS handshakes takes a while.
    emulator = KubernetesEmulator(api_latency=0.5).start()
    try:
        configuration = build_configuration(_config(mode="host", host=emulator.url))
        bounded = DeadlineApiClient(configuration, 5.0, bounded=True)
        assert _discards(caplog, bounded, CONNECTIONS * 2) == 0
        # The same load through an unbounded client does discard: the check above can fail.
        assert _discards(caplog, DeadlineApiClient(configuration, 5.0), CONNECTIONS * 2) > 0
    finally:
        emulator.stop()
