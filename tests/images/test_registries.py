"""Registry clients per host, with credentials read from a dockerconfigjson Secret through
the Kubernetes API (the emulator) and used against the registry emulator."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from app.config import Config, parse_config
from app.storage import registries as registries_module
from app.storage.kubernetes import KubernetesStorage
from app.storage.kubernetes_client import DeadlineApiClient, build_configuration
from app.storage.registries import RegistryDirectory, parse_docker_config, split_reference
from app.storage.registry import RegistryError
from devstack.demo import LAB_REPOSITORY, demo_registry
from devstack.kube import KubernetesEmulator
from devstack.registry import RegistryEmulator
from tests.conftest import service_config

CREDENTIALS = ("robot", "registry-password-93817")
SECRET = "pull-credentials-test"
NAMESPACE = "nublado"


def _docker_config(auths: dict[str, Any]) -> dict[str, str]:
    text = json.dumps({"auths": auths}).encode()
    return {".dockerconfigjson": base64.b64encode(text).decode()}


def test_split_reference() -> None:
    assert split_reference("reg.io:5000/a/b:w_1") == ("reg.io:5000", "a/b", "w_1")
    for bad in ("lab:1", "reg.io/a", "reg.io/a@sha256:00", "/a:1"):
        with pytest.raises(ValueError, match="reference"):
            split_reference(bad)


def test_docker_config_forms_and_bad_entries(caplog: pytest.LogCaptureFixture) -> None:
    encoded = base64.b64encode(b"user2:pa:ss").decode()
    data = _docker_config(
        {
            "reg.one": {"username": "user1", "password": "secret-one"},
            "https://index.docker.io/v1/": {"auth": encoded},
            "reg.bad": {"auth": "%%%"},
            "reg.empty": {},
        }
    )
    with caplog.at_level(logging.WARNING):
        parsed = parse_docker_config(data)
    assert parsed == {"reg.one": ("user1", "secret-one"), "index.docker.io": ("user2", "pa:ss")}
    assert "reg.bad" in caplog.text and "reg.empty" in caplog.text
    assert "secret-one" not in caplog.text and "%%%" not in caplog.text
    assert parse_docker_config({}) == {}
    assert parse_docker_config({".dockerconfigjson": "not base64 json"}) == {}


@pytest.fixture(scope="module")
def private_registry() -> Iterator[RegistryEmulator]:
    emulator = demo_registry(credentials=CREDENTIALS).start()
    yield emulator
    emulator.stop()


def _config(kube: KubernetesEmulator, secret: str | None) -> Config:
    raw = service_config("redis://127.0.0.1:1/0", "http://gafaelfawr.test", kube.url)
    raw["images"] = {"requestTimeout": 2}
    if secret is not None:
        raw["images"]["credentialsSecret"] = secret
    return parse_config(raw)


def _storage(kube: KubernetesEmulator) -> KubernetesStorage:
    configuration = build_configuration(_config_for_kube(kube))
    return KubernetesStorage(DeadlineApiClient(configuration, 5.0))


def _config_for_kube(kube: KubernetesEmulator) -> Any:
    raw = service_config("redis://127.0.0.1:1/0", "http://gafaelfawr.test", kube.url)
    return parse_config(raw).kubernetes


def _put_secret(kube: KubernetesEmulator, data: dict[str, str]) -> None:
    if kube.store.get("namespaces", None, NAMESPACE) is None:
        kube.store.create("namespaces", {"metadata": {"name": NAMESPACE}})
    secret = {
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "type": "kubernetes.io/dockerconfigjson",
        "data": data,
    }
    if kube.store.get("secrets", NAMESPACE, SECRET) is None:
        kube.store.create("secrets", secret)
    else:
        kube.store.update("secrets", secret)


def test_credentials_from_the_secret_reach_a_private_registry(
    kube: KubernetesEmulator, private_registry: RegistryEmulator
) -> None:
    host = private_registry.host
    _put_secret(
        kube, _docker_config({host: {"username": CREDENTIALS[0], "password": CREDENTIALS[1]}})
    )
    directory = RegistryDirectory(_config(kube, SECRET), _storage(kube))
    try:
        client = directory.client(host)
        assert "w_2024_42" in client.list_tags(LAB_REPOSITORY)
        assert directory.client(host) is client  # same credentials: the same pooled client
    finally:
        directory.close()


def test_rotated_credentials_replace_the_client(
    kube: KubernetesEmulator, private_registry: RegistryEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = private_registry.host
    _put_secret(kube, _docker_config({host: {"username": "robot", "password": "old-wrong"}}))
    directory = RegistryDirectory(_config(kube, SECRET), _storage(kube))
    try:
        old = directory.client(host)
        with pytest.raises(RegistryError) as failure:
            old.list_tags(LAB_REPOSITORY)
        assert "old-wrong" not in str(failure.value)
        _put_secret(
            kube, _docker_config({host: {"username": CREDENTIALS[0], "password": CREDENTIALS[1]}})
        )
        # The Secret is re-read once its cached copy is older than the TTL.
        monkeypatch.setattr(registries_module, "CREDENTIALS_TTL_SECONDS", 0.0)
        new = directory.client(host)
        assert new is not old
        assert "w_2024_42" in new.list_tags(LAB_REPOSITORY)
    finally:
        directory.close()


def test_no_secret_configured_means_anonymous(
    kube: KubernetesEmulator, private_registry: RegistryEmulator
) -> None:
    directory = RegistryDirectory(_config(kube, None), _storage(kube))
    try:
        with pytest.raises(RegistryError):
            directory.client(private_registry.host).list_tags(LAB_REPOSITORY)
    finally:
        directory.close()


def test_a_missing_secret_is_logged_and_anonymous(
    kube: KubernetesEmulator, private_registry: RegistryEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    directory = RegistryDirectory(_config(kube, "no-such-secret"), _storage(kube))
    try:
        with caplog.at_level(logging.WARNING):
            client = directory.client(private_registry.host)
        assert "no-such-secret does not exist" in caplog.text
        assert client.base_url == f"https://{private_registry.host}"
    finally:
        directory.close()
