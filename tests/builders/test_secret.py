"""The lab Secret, the pull Secret and where the token may appear."""

from __future__ import annotations

import base64
import json

import pytest

from app.config import Config
from app.models.identity import UserInfo
from app.workloads.lab.builders import build_lab
from tests.builders.conftest import (
    COPIED,
    HUB_TOKEN,
    PULL_DATA,
    TOKEN,
    USERS,
    make_config,
    make_spec,
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_secret_holds_token_and_copied_keys(full_config: Config) -> None:
    objects = build_lab(
        make_spec(full_config),
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=False,
    )
    secret = objects.secret
    assert secret["metadata"]["name"] == "nb-rachel"
    assert secret["metadata"]["namespace"] == "nublado-rachel"
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"token": _b64(TOKEN), **COPIED}


@pytest.mark.parametrize("provision", [False, True])
@pytest.mark.parametrize("user", USERS, ids=lambda u: u.username)
def test_token_appears_only_in_the_secret(
    full_config: Config, user: UserInfo, provision: bool
) -> None:
    env = {"JUPYTERHUB_API_TOKEN": HUB_TOKEN, "JUPYTERHUB_USER": "x"}
    objects = build_lab(
        make_spec(full_config, user, env=env),
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=provision,
    )
    for obj in objects.all():
        text = json.dumps(obj)
        for secret in (TOKEN, HUB_TOKEN):
            assert secret not in text, obj["kind"]  # never in clear, not even in the Secret
            assert (_b64(secret) in text) == (obj is objects.secret), obj["kind"]


def test_request_hub_token_goes_to_secret_and_env(full_config: Config) -> None:
    env = {"JUPYTERHUB_API_TOKEN": HUB_TOKEN}
    objects = build_lab(
        make_spec(full_config, env=env),
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=False,
    )
    assert objects.secret["data"]["JUPYTERHUB_API_TOKEN"] == _b64(HUB_TOKEN)
    container = objects.pod["spec"]["containers"][0]
    ref = {"secretKeyRef": {"name": "nb-rachel", "key": "JUPYTERHUB_API_TOKEN"}}
    assert {"name": "JUPYTERHUB_API_TOKEN", "valueFrom": ref} in container["env"]


def test_token_wins_over_a_copied_key_named_token(minimal_config: Config) -> None:
    objects = build_lab(
        make_spec(minimal_config),
        minimal_config,
        token=TOKEN,
        copied_secrets={"token": _b64("impostor")},
        pull_secret_data=None,
        provision=False,
    )
    assert objects.secret["data"] == {"token": _b64(TOKEN)}


def test_missing_copied_key_is_an_error(full_config: Config) -> None:
    with pytest.raises(ValueError, match="postgres-password"):
        build_lab(
            make_spec(full_config),
            full_config,
            token=TOKEN,
            copied_secrets={"butler-credentials": "eA=="},
            pull_secret_data=PULL_DATA,
            provision=False,
        )


def test_two_secrets_for_one_variable_is_an_error() -> None:
    config = make_config(secrets=[{"secretName": "s", "secretKey": "k", "env": "ACCESS_TOKEN"}])
    with pytest.raises(ValueError, match="ACCESS_TOKEN"):
        build_lab(
            make_spec(config),
            config,
            token=TOKEN,
            copied_secrets={"k": "eA=="},
            pull_secret_data=None,
            provision=False,
        )


def test_pull_secret(full_config: Config, minimal_config: Config) -> None:
    objects = build_lab(
        make_spec(full_config),
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data={**PULL_DATA, "other": "eA=="},
        provision=False,
    )
    assert objects.pull_secret is not None
    assert objects.pull_secret["metadata"]["name"] == "nb-rachel-pull"
    assert objects.pull_secret["type"] == "kubernetes.io/dockerconfigjson"
    assert objects.pull_secret["data"] == PULL_DATA
    assert objects.pod["spec"]["imagePullSecrets"] == [{"name": "nb-rachel-pull"}]

    without = build_lab(
        make_spec(minimal_config),
        minimal_config,
        token=TOKEN,
        copied_secrets={},
        pull_secret_data=PULL_DATA,  # ignored: no pull secret configured
        provision=False,
    )
    assert without.pull_secret is None
    assert "imagePullSecrets" not in without.pod["spec"]


def test_configured_pull_secret_without_data_is_an_error(full_config: Config) -> None:
    with pytest.raises(ValueError, match="dockerconfigjson"):
        build_lab(
            make_spec(full_config),
            full_config,
            token=TOKEN,
            copied_secrets=COPIED,
            pull_secret_data=None,
            provision=False,
        )
