"""nublado's names for the create and form routes, and the manners a lab created there keeps:
its events' JSON data, its DELETE answered once it is gone, and errors in nublado's body."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.config import parse_config
from devstack.kube import KubernetesEmulator
from tests.conftest import bearer
from tests.labs.conftest import IMAGE, LabUser, read_events, spawn_body


def _create(client: FlaskClient, user: LabUser, body: dict[str, Any]) -> Any:
    return client.post(f"/spawner/v1/labs/{user.username}/create", json=body, headers=user.headers)


def _running_lab(client: FlaskClient, user: LabUser) -> None:
    """The user's lab created as nublado's spawner asks for it, followed until it runs."""
    assert _create(client, user, _form_body(image_list=IMAGE, size="small")).status_code == 201
    assert read_events(client, user.username, user.headers)[-1].type == "complete"


def _form_body(**options: Any) -> dict[str, Any]:
    """A body as nublado's spawner sends it: JupyterHub's form fields, each a list of one."""
    return {
        "options": {key: [value] for key, value in options.items()},
        "env": {"JUPYTERHUB_SERVICE_PREFIX": "/nb/user/x/"},
    }


def _nublado_data(data: str) -> dict[str, Any]:
    """The event's data as nublado's spawner reads it: JSON holding a message and perhaps a
    percentage from 1 to 100, nothing else."""
    parsed = json.loads(data)
    assert set(parsed) <= {"message", "progress"} and "message" in parsed, parsed
    if "progress" in parsed:
        assert isinstance(parsed["progress"], int) and 1 <= parsed["progress"] <= 100
    return parsed


def test_create_answers_201_and_its_events_speak_nublados_json(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    response = _create(lab_client, user, _form_body(image_list=IMAGE, size="Small"))
    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.headers["Location"].endswith(f"/spawner/v1/labs/{user.username}")

    events = read_events(lab_client, user.username, user.headers)
    assert [e.type for e in events if e.type not in ("info", "error")] == ["complete"]
    data = [_nublado_data(e.data) for e in events]
    assert data[0] == {"message": "Lab creation requested"}
    bar = [d["progress"] for d in data if "progress" in d]
    assert len(set(bar)) >= 3 and bar == sorted(bar), bar  # the bar moves, forward only
    assert data[-1]["message"]  # complete says something too

    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    body = status.get_json()
    assert (body["status"], body["api"]) == ("running", "nublado")
    assert body["options"]["size"] == "small"  # nublado's title-cased size, matched

    # Resumed after an event, the stream goes on with the bar where it stood there.
    middle = len(events) // 2
    resumed = read_events(lab_client, user.username, user.headers, last_id=events[middle].id)
    assert [e.id for e in resumed] == [e.id for e in events[middle + 1 :]]
    stood = max((d["progress"] for d in data[: middle + 1] if "progress" in d), default=None)
    first = _nublado_data(resumed[0].data)
    assert first.get("progress", stood) >= (stood or 0)
    if stood is not None:
        assert "progress" in first

    # DMTN-222's stream of a lab spawned there is unchanged.
    other = new_user()
    url = f"/spawner/v1/labs/{other.username}/spawn"
    assert lab_client.post(url, json=spawn_body(), headers=other.headers).status_code == 303
    plain = read_events(lab_client, other.username, other.headers)
    assert "progress" in [e.type for e in plain]
    assert plain[0].data == "Lab creation requested" and plain[-1].data == ""


def test_the_lab_form_names_its_switch_as_nublado_does_and_create_takes_it(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    form = lab_client.get(f"/spawner/v1/lab-form/{user.username}", headers=user.headers)
    assert form.status_code == 200 and form.mimetype == "text/html"
    html = form.get_data(as_text=True)
    assert 'name="enable_debug"' in html and 'name="debug"' not in html
    assert 'name="image_list"' in html and 'name="size"' in html
    image = re.search(r'name="image_list" id="image-1" value="([^"]+)"', html)
    assert image is not None
    dmtn = lab_client.get(f"/spawner/v1/spawn-form/{user.username}", headers=user.headers)
    assert 'name="debug"' in dmtn.get_data(as_text=True)

    body = _form_body(image_list=image.group(1), size="small", enable_debug="true")
    assert _create(lab_client, user, body).status_code == 201
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"
    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert status.get_json()["options"]["debug"] is True


def test_image_tag_chooses_an_offered_image(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    assert _create(lab_client, user, _form_body(image_tag="w_2024_42", size="small")).status_code
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"
    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert status.get_json()["options"]["image"] == IMAGE


@pytest.mark.parametrize(
    ("body", "status", "kind", "loc"),
    [
        (_form_body(image_list=IMAGE, size="colossal"), 422, "invalid_lab_size", "options.size"),
        (
            _form_body(image_list="registry.test/nope:1", size="small"),
            422,
            "unknown_image",
            "options.image_list",
        ),
        (
            _form_body(image_tag="w_1999_01", size="small"),
            422,
            "unknown_image",
            "options.image_tag",
        ),
        (_form_body(size="small"), 422, "unknown_image", "options.image"),
        (_form_body(image_list=IMAGE, size="small", colour="blue"), 422, "value_error", None),
        (
            {"options": {"image_list": [IMAGE, IMAGE], "size": ["small"]}, "env": {}},
            422,
            "unknown_image",
            "options.image_list",
        ),
        ({"options": {"image_list": IMAGE, "size": "small"}, "env": {"1X": "y"}}, 422, None, None),
    ],
)
def test_create_refuses_in_nublados_error_body(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    body: dict[str, Any],
    status: int,
    kind: str | None,
    loc: str | None,
) -> None:
    user = new_user()
    response = _create(lab_client, user, body)
    assert response.status_code == status
    (detail,) = response.get_json()["detail"]
    assert detail["msg"]
    if kind is not None:
        assert detail["type"] == kind
    assert detail["loc"][0] == "body"
    if loc is not None:
        assert detail["loc"][1:] == loc.split(".")
    url = f"/spawner/v1/labs/{user.username}"
    assert lab_client.get(url, headers=admin_headers).status_code == 404


def test_create_refuses_callers_and_a_second_lab_as_nublado_does(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], tokens: dict[str, str]
) -> None:
    owner, other = new_user(), new_user()
    url = f"/spawner/v1/labs/{owner.username}/create"
    body = _form_body(image_list=IMAGE, size="small")
    anonymous = lab_client.post(url, json=body)
    assert anonymous.status_code == 401
    assert anonymous.get_json()["detail"][0]["type"] == "invalid_token"
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    stranger = lab_client.post(url, json=body, headers=other.headers)
    assert stranger.status_code == 403
    assert stranger.get_json()["detail"][0]["type"] == "permission_denied"
    hub = lab_client.post(url, json=body, headers=bearer(tokens["admin"]))
    assert hub.status_code == 403
    form = lab_client.get(f"/spawner/v1/lab-form/{owner.username}", headers=other.headers)
    assert form.status_code == 403 and form.get_json()["detail"][0]["type"] == "permission_denied"

    _running_lab(lab_client, owner)
    again = _create(lab_client, owner, body)
    assert again.status_code == 409
    assert again.get_json()["detail"][0]["type"] == "lab_exists"
    # DMTN-222's route keeps the service's own body for the same refusal.
    spawn = lab_client.post(
        f"/spawner/v1/labs/{owner.username}/spawn", json=spawn_body(), headers=owner.headers
    )
    assert spawn.status_code == 409 and spawn.get_json()["code"] == "conflict"


def test_delete_of_a_nublado_lab_answers_once_it_is_gone(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    _running_lab(lab_client, user)
    url = f"/spawner/v1/labs/{user.username}"
    response = lab_client.delete(url, headers=admin_headers)
    assert response.status_code == 204 and response.get_data() == b""
    # Gone when answered, as nublado's spawner expects before it creates again.
    assert lab_client.get(url, headers=admin_headers).status_code == 404
    assert kube.store.get("namespaces", None, f"nublado-{user.username}") is None
    assert lab_client.delete(url, headers=admin_headers).status_code == 404
    _running_lab(lab_client, user)

    # A lab spawned through DMTN-222's route is still answered at once.
    other = new_user()
    spawn = f"/spawner/v1/labs/{other.username}/spawn"
    assert lab_client.post(spawn, json=spawn_body(), headers=other.headers).status_code == 303
    assert read_events(lab_client, other.username, other.headers)[-1].type == "complete"
    answer = lab_client.delete(f"/spawner/v1/labs/{other.username}", headers=admin_headers)
    assert answer.status_code == 202
    assert answer.get_json() == {"username": other.username, "status": "terminating"}


def test_a_nublado_labs_delete_that_fails_answers_with_why(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    _running_lab(lab_client, user)
    kube.faults.fail(verb="delete", resource="namespaces", code=403)
    try:
        response = lab_client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    finally:
        kube.faults.clear()
    assert response.status_code == 500
    error = response.get_json()
    assert error["code"] == "delete_failed" and user.username in error["message"]
    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert status.get_json()["status"] == "failed"


def test_a_nublado_stream_keeps_alive_with_ping_events(
    lab_raw_config: dict[str, Any],
    slow_image: Callable[[float], str],
    make_app: Callable[..., Any],
    new_user: Callable[..., LabUser],
) -> None:
    """While nothing happens, nublado's stream sends ``ping`` events, which its spawner
    skips; never a comment, which its SSE parser turns into an empty message event once an
    event with an id went before."""
    image = slow_image(2.0)
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    assert _create(client, user, _form_body(image_list=image, size="small")).status_code == 201
    response = client.get(
        f"/spawner/v1/labs/{user.username}/events", headers=user.headers, buffered=False
    )
    try:
        text = b"".join(response.response).decode()  # type: ignore[arg-type]
    finally:
        response.close()
    blocks = [b for b in text.split("\n\n") if b]
    assert blocks[0].startswith(":")  # the opening comment, before any id
    assert all(not b.startswith(":") for b in blocks[1:]), blocks
    pings = [b for b in blocks if b.startswith("event: ping")]
    assert pings and all(b == "event: ping\ndata: " for b in pings)
    assert blocks[-1].split("\n")[1] == "event: complete"
