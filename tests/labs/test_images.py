"""Images end to end: the refresher reading a real (emulated) registry with credentials from
a Kubernetes Secret, the admin image list, the per-user spawn form, and every way a spawn
may choose its image, down to the pod that runs it."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape

from app.config import Config, parse_config
from app.extensions.labs import machinery_of
from devstack.demo import LAB_REPOSITORY, SIMPLE_REPOSITORY, demo_registry
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec, NotebookQuotaSpec, UserSpec
from devstack.kube import KubernetesEmulator
from devstack.registry import RegistryEmulator
from tests.conftest import bearer
from tests.labs.conftest import read_events, wait_for

CREDENTIALS = ("puller", "pull-secret-value-4711")
CREDENTIALS_SECRET = "registry-credentials"
HOSTILE_NAME = '<img src=x onerror="alert(1)">'
_users = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryEmulator]:
    emulator = demo_registry(credentials=CREDENTIALS).start()
    yield emulator
    emulator.stop()


def _credentials_secret(kube: KubernetesEmulator, registry: RegistryEmulator) -> None:
    if kube.store.get("namespaces", None, "nublado") is None:
        kube.store.create("namespaces", {"metadata": {"name": "nublado"}})
    config = {"auths": {registry.host: {"username": CREDENTIALS[0], "password": CREDENTIALS[1]}}}
    secret = {
        "metadata": {"name": CREDENTIALS_SECRET, "namespace": "nublado"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }
    if kube.store.get("secrets", "nublado", CREDENTIALS_SECRET) is None:
        kube.store.create("secrets", secret)
    else:
        kube.store.update("secrets", secret)


@pytest.fixture
def image_raw_config(
    lab_raw_config: dict[str, Any], registry: RegistryEmulator, kube: KubernetesEmulator
) -> dict[str, Any]:
    _credentials_secret(kube, registry)
    registry.fail_with(None)
    raw = dict(lab_raw_config)
    raw["prepull"] = [
        {
            "name": "jupyter",
            "type": "rubin",
            "registry": registry.host,
            "docker": {"repository": LAB_REPOSITORY},
            "recommendedTag": "recommended",
            "numReleases": 1,
            "numWeeklies": 2,
            "numDailies": 1,
            "aliasTags": ["latest", "latest_weekly", "latest_daily", "latest_release"],
        },
        {
            "name": "staff",
            "type": "simple",
            "groups": ["staff"],
            "images": [{"url": f"{registry.host}/{SIMPLE_REPOSITORY}:1.0", "name": HOSTILE_NAME}],
        },
    ]
    raw["images"] = {
        "refreshSeconds": 3600,
        "credentialsSecret": CREDENTIALS_SECRET,
    }
    raw["lab"] = {
        **raw["lab"],
        "sizes": [
            {"name": "small", "cpu": 1, "memory": "4Gi"},
            {"name": "large", "cpu": 4, "memory": "16Gi"},
            {"name": "huge", "cpu": 16, "memory": "64Gi"},
            {"name": "gpu", "cpu": 2, "memory": "8Gi", "groups": ["science"]},
        ],
    }
    return raw


def _refresh(app: Flask) -> None:
    machinery_of(app).images.refresh_all()


@pytest.fixture
def image_app(image_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    app = make_app(parse_config(image_raw_config))
    _refresh(app)
    return app


@pytest.fixture
def image_client(image_app: Flask) -> FlaskClient:
    return image_app.test_client()


@pytest.fixture
def person(gafaelfawr: GafaelfawrEmulator) -> Callable[..., dict[str, str]]:
    """A new user with these groups and quota; returns the username and auth headers."""

    def make(
        groups: tuple[str, ...] = (),
        quota: NotebookQuotaSpec | None = None,
        uid: int | None = 0,
        gid: int | None = 0,
    ) -> dict[str, str]:
        n = next(_users)
        username = f"img{n}-{int(time.time() * 1000) % 100000}"
        uid = 40000 + n if uid == 0 else uid
        gid = 50000 + n if gid == 0 else gid
        specs = tuple(GroupSpec(name, 60000 + i) for i, name in enumerate(groups))
        gafaelfawr.add_user(
            UserSpec(username=username, uid=uid, gid=gid, groups=specs, notebook_quota=quota)
        )
        token = gafaelfawr.issue_token(username, ["exec:notebook"], token_type="notebook")
        return {"username": username, **bearer(token)}

    return make


def _headers(user: dict[str, str]) -> dict[str, str]:
    return {"Authorization": user["Authorization"]}


def _ref(registry: RegistryEmulator, tag: str) -> str:
    return f"{registry.host}/{LAB_REPOSITORY}:{tag}"


def _expand(registry: RegistryEmulator, value: Any) -> Any:
    """Option values with ``@<tag>`` standing for that tag's reference in the registry."""
    if isinstance(value, list):
        return [_expand(registry, v) for v in value]
    return _ref(registry, value[1:]) if isinstance(value, str) and value[:1] == "@" else value


# The admin list ------------------------------------------------------------------------


def test_image_list_has_kinds_digests_and_the_recommended_image(
    image_client: FlaskClient, registry: RegistryEmulator, admin_headers: dict[str, str]
) -> None:
    response = image_client.get("/spawner/v1/images", headers=admin_headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    jupyter, staff = response.get_json()["configs"]

    assert jupyter["name"] == "jupyter" and jupyter["stale"] is False and jupyter["error"] is None
    recommended = jupyter["recommended"]
    assert recommended["reference"] == _ref(registry, "w_2024_42")
    assert recommended["digest"] == registry.digest(LAB_REPOSITORY, "w_2024_42")
    assert recommended["aliases"] == ["recommended"]
    prepull = [image["tag"] for image in jupyter["prepull"]]
    assert prepull == ["w_2024_42", "r26_0_0", "w_2024_44", "w_2024_43", "d_2024_11_05"]
    for image in jupyter["prepull"]:
        assert image["digest"] == registry.digest(LAB_REPOSITORY, image["tag"])
    kinds = jupyter["images"]
    assert [i["tag"] for i in kinds["release"]] == ["r26_0_0", "r25_0_1", "r24_1_0", "r22_0_1"]
    assert {i["tag"] for i in kinds["release_candidate"]} == {"r26_0_0_rc1", "r26_0_0_rc2"}
    assert {i["tag"] for i in kinds["experimental"]} == {
        "exp_w_2024_44_nosudo",
        "exp_w_2024_42_fix",
    }
    assert [i["tag"] for i in kinds["unknown"]] == ["something-else"]
    alias = next(i for i in kinds["alias"] if i["tag"] == "recommended")
    assert alias["name"] == "Recommended (Weekly 2024_42)"

    assert staff["type"] == "simple" and staff["source"] is None
    assert staff["prepull"][0]["digest"] == registry.digest(SIMPLE_REPOSITORY, "1.0")


def test_image_list_is_for_administrators_only(
    image_client: FlaskClient, person: Callable[..., dict[str, str]]
) -> None:
    user = person()
    response = image_client.get("/spawner/v1/images", headers=_headers(user))
    assert response.status_code == 403
    assert response.get_json()["code"] == "permission_denied"


def test_refresher_uses_the_credentials_secret_and_caches_digests(
    image_app: Flask, registry: RegistryEmulator, redis_client: redis.Redis
) -> None:
    # Counting requests: the elected refresher must not run a pass of its own meanwhile
    # (a new tenure, after a lease renewal lost on a busy machine, starts with one).
    machinery_of(image_app).images.stop()
    registry.reset_requests()
    _refresh(image_app)
    requests = registry.requests
    # Tokens come from the Secret's credentials; a repeat pass only re-reads the aliases.
    assert requests.get("token", 0) <= 1
    assert requests["manifests"] == 5  # recommended + four alias tags; other digests are cached
    stored = redis_client.hgetall("spawner:images:digests")
    assert stored[_ref(registry, "w_2024_44")] == registry.digest(LAB_REPOSITORY, "w_2024_44")
    assert not any(key.endswith(":recommended") for key in stored)


def test_a_registry_that_is_down_keeps_the_list_and_marks_it_stale(
    image_app: Flask,
    image_client: FlaskClient,
    registry: RegistryEmulator,
    admin_headers: dict[str, str],
    person: Callable[..., dict[str, str]],
) -> None:
    registry.fail_with(503)
    try:
        _refresh(image_app)
        jupyter = image_client.get("/spawner/v1/images", headers=admin_headers).get_json()[
            "configs"
        ][0]
        assert jupyter["stale"] is True
        assert "503" in jupyter["error"] or "unavailable" in jupyter["error"].lower()
        assert jupyter["recommended"]["tag"] == "w_2024_42"  # the old list is kept

        user = person()
        form = image_client.get(
            f"/spawner/v1/spawn-form/{user['username']}", headers=_headers(user)
        )
        text = form.get_data(as_text=True)
        assert form.status_code == 200
        assert "may be out of date" in text and "jupyter" in text
        assert f'value="{_ref(registry, "w_2024_42")}"' in text
    finally:
        registry.fail_with(None)
    _refresh(image_app)
    jupyter = image_client.get("/spawner/v1/images", headers=admin_headers).get_json()["configs"][0]
    assert jupyter["stale"] is False and jupyter["error"] is None


def test_a_new_tag_appears_after_the_next_refresh(
    image_app: Flask,
    image_client: FlaskClient,
    registry: RegistryEmulator,
    admin_headers: dict[str, str],
) -> None:
    registry.add_tag(LAB_REPOSITORY, "w_2024_45", f"{LAB_REPOSITORY}:w_2024_45")
    try:
        _refresh(image_app)
        jupyter = image_client.get("/spawner/v1/images", headers=admin_headers).get_json()[
            "configs"
        ][0]
        assert [i["tag"] for i in jupyter["prepull"]][:3] == ["w_2024_42", "r26_0_0", "w_2024_45"]
    finally:
        registry.remove_tag(LAB_REPOSITORY, "w_2024_45")


def test_malformed_tags_from_a_registry_are_dropped(
    image_app: Flask,
    image_client: FlaskClient,
    registry: RegistryEmulator,
    admin_headers: dict[str, str],
) -> None:
    registry.list_garbage_tags(LAB_REPOSITORY, ['<script>alert("tag")</script>', "w_2024_46\n"])
    try:
        _refresh(image_app)
        body = image_client.get("/spawner/v1/images", headers=admin_headers).get_data(as_text=True)
        assert "script" not in body and "w_2024_46" not in body
        assert "w_2024_44" in body
    finally:
        registry.list_garbage_tags(LAB_REPOSITORY, [])


# The form ------------------------------------------------------------------------------


def _form(client: FlaskClient, user: dict[str, str]) -> str:
    response = client.get(f"/spawner/v1/spawn-form/{user['username']}", headers=_headers(user))
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/html"
    return response.get_data(as_text=True)


def _radio_values(text: str) -> list[str]:
    return re.findall(r'name="image_list" id="[^"]+" value="([^"]+)"', text)


def _options(text: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', text, re.S)
    assert select is not None, f"no {name} select"
    return re.findall(r'<option value="([^"]+)"', select.group(1))


def test_form_lists_prepulled_images_first_then_the_dropdown(
    image_client: FlaskClient, registry: RegistryEmulator, person: Callable[..., dict[str, str]]
) -> None:
    text = _form(image_client, person())
    radios = _radio_values(text)
    assert radios[:-1] == [
        _ref(registry, tag)
        for tag in ("w_2024_42", "r26_0_0", "w_2024_44", "w_2024_43", "d_2024_11_05")
    ]
    assert radios[-1] == "use_image_from_dropdown"
    first = re.search(r'<input type="radio" name="image_list"[^>]*>', text)
    assert first is not None and "checked" in first.group(0)
    radio_part = text.split("<select")[0]
    assert re.search(r">\s*Recommended \(Weekly 2024_42\)\s*<", radio_part)
    dropdown = _options(text, "image_dropdown")
    assert _ref(registry, "r26_0_0_rc1") in dropdown
    assert _ref(registry, "something-else") in dropdown
    assert not set(dropdown) & set(radios)
    for field in ("debug", "reset_user_env"):
        assert re.search(rf'type="checkbox" name="{field}" id="{field}" value="true"', text)


def test_form_sizes_follow_groups_and_quota(
    image_client: FlaskClient, person: Callable[..., dict[str, str]]
) -> None:
    unlimited = person(groups=("science",))
    assert _options(_form(image_client, unlimited), "size") == ["small", "large", "huge", "gpu"]
    assert "Large (4 CPU, 16 GiB)" in _form(image_client, unlimited)

    limited = person(quota=NotebookQuotaSpec(cpu=4, memory=16))
    assert _options(_form(image_client, limited), "size") == ["small", "large"]


def test_form_images_follow_groups_and_names_are_escaped(
    image_client: FlaskClient, registry: RegistryEmulator, person: Callable[..., dict[str, str]]
) -> None:
    simple = f"{registry.host}/{SIMPLE_REPOSITORY}:1.0"
    outsider = _form(image_client, person())
    assert simple not in outsider

    staff = _form(image_client, person(groups=("staff",)))
    assert simple in _radio_values(staff)
    assert HOSTILE_NAME not in staff
    assert str(escape(HOSTILE_NAME)) in staff


def test_form_explains_why_a_user_may_not_spawn(
    image_client: FlaskClient, person: Callable[..., dict[str, str]]
) -> None:
    no_gid = _form(image_client, person(gid=None))
    assert "lab-spawner-refusal" in no_gid and "no UID or GID" in no_gid
    assert 'name="image_list"' not in no_gid

    forbidden = _form(image_client, person(quota=NotebookQuotaSpec(cpu=4, memory=16, spawn=False)))
    assert "may not spawn labs" in forbidden

    tiny = _form(image_client, person(quota=NotebookQuotaSpec(cpu=0.5, memory=2)))
    assert "no lab size fits your quota (0.5 CPU, 2 GiB)" in tiny


def test_form_is_only_for_the_user_themself(
    image_client: FlaskClient, person: Callable[..., dict[str, str]], admin_headers: dict[str, str]
) -> None:
    user, other = person(), person()
    response = image_client.get(
        f"/spawner/v1/spawn-form/{other['username']}", headers=_headers(user)
    )
    assert response.status_code == 403
    response = image_client.get(f"/spawner/v1/spawn-form/{user['username']}", headers=admin_headers)
    assert response.status_code == 403


# Spawning with a choice ----------------------------------------------------------------


def _spawn(client: FlaskClient, user: dict[str, str], options: dict[str, Any]) -> Any:
    return client.post(
        f"/spawner/v1/labs/{user['username']}/spawn",
        json={"options": options, "env": {}},
        headers=_headers(user),
    )


def _spawned(
    client: FlaskClient, kube: KubernetesEmulator, user: dict[str, str], options: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """Spawn, follow the events to the end; the pod, its env ConfigMap and the status."""
    response = _spawn(client, user, options)
    assert response.status_code == 303, response.get_data(as_text=True)
    events = read_events(client, user["username"], _headers(user))
    assert events[-1].type == "complete", [(e.type, e.data) for e in events]
    namespace, name = f"nublado-{user['username']}", user["username"]
    pod = kube.store.get("pods", namespace, f"nb-{name}-lab")
    env = kube.store.get("configmaps", namespace, f"nb-{name}-env")
    assert pod is not None and env is not None
    status = client.get("/spawner/v1/user-status", headers=_headers(user)).get_json()
    return pod, env["data"], status


@pytest.mark.parametrize(
    ("options", "tag", "description"),
    [
        ({"image_class": "recommended"}, "w_2024_42", "Weekly 2024_42"),
        ({"image_class": ["latest-weekly"]}, "w_2024_44", "Weekly 2024_44"),
        ({"image_class": "latest-release"}, "r26_0_0", "Release r26.0.0"),
        ({"image_class": "latest-daily"}, "d_2024_11_05", "Daily 2024_11_05"),
        ({"image_list": ["@r26_0_0"], "image_dropdown": ["@w_2024_40"]}, "r26_0_0", None),
        (
            {"image_list": "use_image_from_dropdown", "image_dropdown": "@w_2024_40"},
            "w_2024_40",
            "Weekly 2024_40",
        ),
        ({"image": "@w_2024_43"}, "w_2024_43", "Weekly 2024_43"),
        ({"image": "@recommended"}, "recommended", "Recommended (Weekly 2024_42)"),
    ],
)
def test_each_way_of_choosing_runs_the_image_pinned_by_digest(
    image_client: FlaskClient,
    registry: RegistryEmulator,
    kube: KubernetesEmulator,
    person: Callable[..., dict[str, str]],
    options: dict[str, Any],
    tag: str,
    description: str | None,
) -> None:
    chosen = {key: _expand(registry, value) for key, value in options.items()}
    user = person()
    pod, env, status = _spawned(
        image_client, kube, user, {**chosen, "size": ["small"], "debug": ["true"]}
    )
    digest = registry.digest(LAB_REPOSITORY, tag)
    assert pod["spec"]["containers"][0]["image"] == f"{_ref(registry, tag)}@{digest}"
    assert env["IMAGE_DIGEST"] == digest
    if description is not None:
        assert env["IMAGE_DESCRIPTION"] == description
    assert env["DEBUG"] == "TRUE" and "RESET_USER_ENV" not in env
    assert status["options"] == {
        "image": _ref(registry, tag),
        "size": "small",
        "debug": True,
        "reset_user_env": False,
        "unvalidated_image": False,
    }


def test_a_dropdown_tag_without_a_digest_is_pinned_at_spawn_and_remembered(
    image_client: FlaskClient,
    registry: RegistryEmulator,
    kube: KubernetesEmulator,
    person: Callable[..., dict[str, str]],
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
) -> None:
    listed = image_client.get("/spawner/v1/images", headers=admin_headers).get_json()
    rc = next(
        i for i in listed["configs"][0]["images"]["release_candidate"] if i["tag"] == "r26_0_0_rc1"
    )
    assert rc["digest"] is None
    user = person()
    pod, env, _ = _spawned(
        image_client,
        kube,
        user,
        {
            "image_list": "use_image_from_dropdown",
            "image_dropdown": rc["reference"],
            "size": "small",
            "reset_user_env": "true",
        },
    )
    digest = registry.digest(LAB_REPOSITORY, "r26_0_0_rc1")
    assert pod["spec"]["containers"][0]["image"] == f"{rc['reference']}@{digest}"
    assert env["IMAGE_DESCRIPTION"] == "Release Candidate r26.0.0-rc1"
    assert env["RESET_USER_ENV"] == "TRUE" and "DEBUG" not in env
    assert redis_client.hget("spawner:images:digests", rc["reference"]) == digest


def test_group_restricted_images_and_sizes_spawn_for_members(
    image_client: FlaskClient,
    registry: RegistryEmulator,
    kube: KubernetesEmulator,
    person: Callable[..., dict[str, str]],
) -> None:
    simple = f"{registry.host}/{SIMPLE_REPOSITORY}:1.0"
    user = person(groups=("staff", "science"))
    pod, env, _ = _spawned(image_client, kube, user, {"image_list": simple, "size": "gpu"})
    digest = registry.digest(SIMPLE_REPOSITORY, "1.0")
    assert pod["spec"]["containers"][0]["image"] == f"{simple}@{digest}"
    assert env["IMAGE_DESCRIPTION"] == HOSTILE_NAME  # the lab's own env: not HTML


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"image": "@w_2099_01"}, "options.image", "unknown image"),
        ({"image_list": "@w_2099_01"}, "options.image_list", "unknown image"),
        (
            {"image_list": "use_image_from_dropdown", "image_dropdown": "@nope"},
            "options.image_dropdown",
            "unknown image",
        ),
        ({"image_list": "use_image_from_dropdown"}, "options.image_dropdown", "required when"),
        ({"image_class": "oldest"}, "options.image_class", "Must be one of"),
        ({"image": "@w_2024_42", "image_class": "recommended"}, "options.image_class", "one way"),
        ({"image": "@w_2024_42", "image_list": "@w_2024_42"}, "options.image_list", "one way"),
        ({"image": ["@w_2024_42", "@w_2024_43"]}, "options.image", "single value"),
        ({"image": []}, "options.image", "single value"),
        ({"image": "@w_2024_42", "debug": ["yes"]}, "options.debug", "true or false"),
        ({"image": "@w_2024_42", "colour": "blue"}, "options.colour", "Unknown field"),
        ({"image": "@w_2024_42", "size": "huge"}, "options.size", "exceeds the quota"),
        ({"image": "@w_2024_42", "size": "gpu"}, "options.size", "only for members of science"),
        ({"image": "@w_2024_42", "size": "gigantic"}, "options.size", "unknown size"),
        ({"image": "@w_2024_42@sha256:" + "0" * 64}, "options.image", "unknown image"),
    ],
)
def test_bad_choices_are_refused_naming_the_field(
    image_client: FlaskClient,
    registry: RegistryEmulator,
    kube: KubernetesEmulator,
    person: Callable[..., dict[str, str]],
    options: dict[str, Any],
    field: str,
    message: str,
) -> None:
    user = person(quota=NotebookQuotaSpec(cpu=8, memory=32))
    body = {"size": "small", **{key: _expand(registry, value) for key, value in options.items()}}
    response = _spawn(image_client, user, body)
    assert response.status_code == 422, response.get_data(as_text=True)
    error = response.get_json()
    assert error["code"] == "invalid_request"
    assert error["field"] == field
    assert message in error["message"]
    assert kube.store.get("namespaces", None, f"nublado-{user['username']}") is None
    missing = image_client.get("/spawner/v1/user-status", headers=_headers(user))
    assert missing.status_code == 404


def test_images_of_a_group_are_refused_to_others(
    image_client: FlaskClient, registry: RegistryEmulator, person: Callable[..., dict[str, str]]
) -> None:
    user = person()
    simple = f"{registry.host}/{SIMPLE_REPOSITORY}:1.0"
    response = _spawn(image_client, user, {"image": simple, "size": "small"})
    assert response.status_code == 422
    assert response.get_json()["field"] == "options.image"
    assert "only for members of staff" in response.get_json()["message"]


def test_spawn_waits_for_a_source_never_listed(
    image_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    registry: RegistryEmulator,
    person: Callable[..., dict[str, str]],
) -> None:
    registry.fail_with(503)
    try:
        app = make_app(parse_config(image_raw_config))
        _refresh(app)
        client = app.test_client()
        user = person()
        response = _spawn(client, user, {"image": _ref(registry, "w_2024_42"), "size": "small"})
        assert response.status_code == 503
        assert "not been read from its registry yet" in response.get_json()["message"]
        text = _form(client, user)
        assert "never read yet" in text
    finally:
        registry.fail_with(None)


def test_not_ready_until_every_image_list_was_read_once(
    image_raw_config: dict[str, Any],
    registry: RegistryEmulator,
    make_app: Callable[[Config], Flask],
) -> None:
    """Right after start, a spawn could be refused for want of an image list: the service
    is not ready until the refresher has tried every list once. A failed read counts as
    tried (its error is what the form and a spawn then report)."""
    registry.fail_with(503)
    try:
        client = make_app(parse_config(image_raw_config)).test_client()
        first = client.get("/readyz")
        assert first.status_code == 503
        images = first.get_json()["checks"]["images"]
        assert images.startswith("unread: ") and "jupyter" in images
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=30)
    finally:
        registry.fail_with(None)
