"""The Gafaelfawr emulator speaks the real API's shapes, errors and token format."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from devstack.demo import (
    DEMO_CREATED,
    DEMO_SEED,
    demo_gafaelfawr,
    demo_tokens,
    demo_users,
)
from devstack.gafaelfawr import (
    GafaelfawrEmulator,
    GroupSpec,
    UserSpec,
    derive_token,
    parse_token,
)

TOKEN_INFO = "/auth/api/v1/token-info"
USER_INFO = "/auth/api/v1/user-info"
TOKEN_FORMAT = re.compile(r"^gt-[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22}$")


class FakeClock:
    """A settable clock so expiry is tested without sleeping."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


START = 1_800_000_000.0


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture(scope="module")
def server(clock: FakeClock) -> Iterator[GafaelfawrEmulator]:
    """One server per module: stopping a werkzeug server costs half a second."""
    with GafaelfawrEmulator(users=demo_users(), tokens=demo_tokens(), clock=clock) as emulator:
        yield emulator


@pytest.fixture
def gafaelfawr(server: GafaelfawrEmulator, clock: FakeClock) -> GafaelfawrEmulator:
    """The shared server, put back into its demo state before each test."""
    clock.now = START
    server.fail_with(None)
    server.set_latency(0)
    server.reset_requests()
    for user in demo_users():
        server.add_user(user)
    for spec in demo_tokens().values():
        server.add_token(spec)
    return server


def get(emulator: GafaelfawrEmulator, path: str, token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return requests.get(emulator.url + path, headers=headers, timeout=5)


def assert_invalid_token(response: requests.Response, description: str) -> None:
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="')
    assert 'error="invalid_token"' in challenge
    assert f'error_description="{description}"' in challenge
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"detail": [{"msg": description, "type": "invalid_token"}]}


def test_token_info_reports_key_not_secret(gafaelfawr: GafaelfawrEmulator) -> None:
    token = demo_tokens()["rachel"].token
    response = get(gafaelfawr, TOKEN_INFO, token)
    assert response.status_code == 200
    body = response.json()
    key, secret = token.removeprefix("gt-").split(".")
    assert body == {
        "token": key,
        "username": "rachel",
        "token_type": "notebook",
        "scopes": ["exec:notebook", "read:image", "write:files"],
        "created": DEMO_CREATED,
        "expires": None,
    }
    assert secret not in response.text


def test_admin_token_is_the_hub_service_token(gafaelfawr: GafaelfawrEmulator) -> None:
    body = get(gafaelfawr, TOKEN_INFO, demo_tokens()["admin"].token).json()
    assert (body["username"], body["token_type"], body["scopes"]) == (
        "jupyterhub",
        "service",
        ["admin:notebook"],
    )


def test_user_info_full_shape(gafaelfawr: GafaelfawrEmulator) -> None:
    response = get(gafaelfawr, USER_INFO, demo_tokens()["rachel"].token)
    assert response.status_code == 200
    assert response.json() == {
        "username": "rachel",
        "name": "Rachel Example",
        "email": "rachel@example.com",
        "uid": 1101,
        "gid": 1101,
        "groups": [
            {"name": "rachel", "id": 1101},
            {"name": "lsst-data", "id": 2001},
            {"name": "g-no-gid"},
        ],
        "quota": {"api": {}, "notebook": {"cpu": 8.0, "memory": 32.0, "spawn": True}},
    }


def test_user_info_omits_absent_fields(gafaelfawr: GafaelfawrEmulator) -> None:
    wile = get(gafaelfawr, USER_INFO, demo_tokens()["wile"].token).json()
    assert wile["gid"] == 1500
    assert "quota" not in wile
    assert "email" not in wile
    assert wile["groups"] == [
        {"name": "staff", "id": 1500},
        {"name": "science", "id": 2002},
        {"name": "cloud-users"},
    ]
    admin = get(gafaelfawr, USER_INFO, demo_tokens()["admin-user"].token).json()
    assert admin["uid"] == 1103
    assert not {"gid", "quota", "name", "email"} & admin.keys()
    hub = get(gafaelfawr, USER_INFO, demo_tokens()["admin"].token).json()
    assert hub == {"username": "jupyterhub", "groups": []}


def test_user_info_for_a_user_without_metadata(gafaelfawr: GafaelfawrEmulator) -> None:
    token = gafaelfawr.issue_token("nobody", ["read:image"])
    assert get(gafaelfawr, USER_INFO, token).json() == {"username": "nobody", "groups": []}


def test_add_user_replaces_metadata(gafaelfawr: GafaelfawrEmulator) -> None:
    token = demo_tokens()["wile"].token
    gafaelfawr.add_user(UserSpec("wile", uid=4242, gid=4242, groups=(GroupSpec("wile", 4242),)))
    body = get(gafaelfawr, USER_INFO, token).json()
    assert (body["uid"], body["gid"], body["groups"]) == (
        4242,
        4242,
        [{"name": "wile", "id": 4242}],
    )


@pytest.mark.parametrize(
    ("header", "description"),
    [
        (None, "Authentication required"),
        ("Basic dXNlcjpwYXNz", "Unknown Authorization type"),
        ("Bearer not-a-token", "Token is malformed"),
        ("Bearer gt-short.short", "Token is malformed"),
        ("Bearer " + derive_token("other-seed", "rachel"), "Token is not valid"),
    ],
)
@pytest.mark.parametrize("path", [TOKEN_INFO, USER_INFO])
def test_rejected_credentials(
    gafaelfawr: GafaelfawrEmulator, path: str, header: str | None, description: str
) -> None:
    headers = {"Authorization": header} if header is not None else {}
    response = requests.get(gafaelfawr.url + path, headers=headers, timeout=5)
    assert_invalid_token(response, description)


def test_right_key_wrong_secret_is_rejected(gafaelfawr: GafaelfawrEmulator) -> None:
    key, _ = parse_token(demo_tokens()["rachel"].token) or ("", "")
    forged = f"gt-{key}.{'A' * 22}"
    assert_invalid_token(get(gafaelfawr, TOKEN_INFO, forged), "Token is not valid")


def test_issued_tokens_are_random_and_well_formed(gafaelfawr: GafaelfawrEmulator) -> None:
    first = gafaelfawr.issue_token("wile", ["exec:notebook"], token_type="notebook")
    second = gafaelfawr.issue_token("wile", ["exec:notebook"], token_type="notebook")
    assert TOKEN_FORMAT.match(first)
    assert TOKEN_FORMAT.match(second)
    assert first != second
    body = get(gafaelfawr, TOKEN_INFO, first).json()
    assert body["token_type"] == "notebook"
    assert body["created"] == 1_800_000_000


def test_expired_token(gafaelfawr: GafaelfawrEmulator, clock: FakeClock) -> None:
    token = gafaelfawr.issue_token("rachel", ["exec:notebook"], expires=1_800_000_060)
    response = get(gafaelfawr, TOKEN_INFO, token)
    assert response.status_code == 200
    assert response.json()["expires"] == 1_800_000_060
    clock.now = 1_800_000_060
    assert_invalid_token(get(gafaelfawr, TOKEN_INFO, token), "Token has expired")
    assert_invalid_token(get(gafaelfawr, USER_INFO, token), "Token has expired")


def test_revoke(gafaelfawr: GafaelfawrEmulator) -> None:
    token = gafaelfawr.issue_token("rachel", ["read:image"])
    other = demo_tokens()["rachel"].token
    assert get(gafaelfawr, TOKEN_INFO, token).status_code == 200
    gafaelfawr.revoke(token)
    gafaelfawr.revoke("gt-garbage")
    assert_invalid_token(get(gafaelfawr, TOKEN_INFO, token), "Token is not valid")
    assert get(gafaelfawr, TOKEN_INFO, other).status_code == 200


def test_request_counters(gafaelfawr: GafaelfawrEmulator) -> None:
    token = demo_tokens()["rachel"].token
    for _ in range(3):
        get(gafaelfawr, TOKEN_INFO, token)
    get(gafaelfawr, USER_INFO, None)
    assert gafaelfawr.requests["token-info"] == 3
    assert gafaelfawr.requests["user-info"] == 1
    remote = requests.get(gafaelfawr.url + "/_emulator/requests", timeout=5).json()
    assert remote == {"token-info": 3, "user-info": 1}
    gafaelfawr.reset_requests()
    assert gafaelfawr.requests["token-info"] == 0


def test_fail_with(gafaelfawr: GafaelfawrEmulator) -> None:
    token = demo_tokens()["rachel"].token
    gafaelfawr.fail_with(503)
    for path in (TOKEN_INFO, USER_INFO):
        response = get(gafaelfawr, path, token)
        assert response.status_code == 503
        assert response.json()["detail"][0]["type"] == "emulated_failure"
    assert gafaelfawr.requests["token-info"] == 1
    gafaelfawr.fail_with(None)
    assert get(gafaelfawr, TOKEN_INFO, token).status_code == 200
    with pytest.raises(ValueError, match="error status"):
        gafaelfawr.fail_with(200)


def test_control_endpoints(gafaelfawr: GafaelfawrEmulator) -> None:
    response = requests.post(
        gafaelfawr.url + "/_emulator/tokens",
        json={"username": "wile", "scopes": ["exec:notebook"], "token_type": "notebook"},
        timeout=5,
    )
    assert response.status_code == 201
    token = response.json()["token"]
    assert TOKEN_FORMAT.match(token)
    info = get(gafaelfawr, TOKEN_INFO, token).json()
    assert (info["username"], info["scopes"], info["token_type"]) == (
        "wile",
        ["exec:notebook"],
        "notebook",
    )

    fail = requests.put(gafaelfawr.url + "/_emulator/fail", json={"status": 502}, timeout=5)
    assert fail.status_code == 200
    assert get(gafaelfawr, USER_INFO, token).status_code == 502
    restore = requests.put(gafaelfawr.url + "/_emulator/fail", json={"status": None}, timeout=5)
    assert restore.status_code == 200
    assert get(gafaelfawr, USER_INFO, token).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"scopes": ["read:image"]},
        {"username": "wile", "scopes": "read:image"},
        {"username": "wile", "token_type": "bogus"},
        ["not", "an", "object"],
    ],
)
def test_control_token_rejects_bad_requests(gafaelfawr: GafaelfawrEmulator, body: object) -> None:
    response = requests.post(gafaelfawr.url + "/_emulator/tokens", json=body, timeout=5)
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "bad_request"


def test_control_fail_rejects_non_error_status(gafaelfawr: GafaelfawrEmulator) -> None:
    response = requests.put(gafaelfawr.url + "/_emulator/fail", json={"status": 200}, timeout=5)
    assert response.status_code == 400
    assert get(gafaelfawr, TOKEN_INFO, demo_tokens()["wile"].token).status_code == 200


def test_unknown_route_and_method(gafaelfawr: GafaelfawrEmulator) -> None:
    assert requests.get(gafaelfawr.url + "/auth/api/v1/nope", timeout=5).status_code == 404
    response = requests.post(gafaelfawr.url + TOKEN_INFO, timeout=5)
    assert response.status_code == 405
    assert "GET" in response.headers["Allow"]


def test_demo_tokens_are_stable_and_well_formed() -> None:
    first, second = demo_tokens(), demo_tokens()
    assert {name: spec.token for name, spec in first.items()} == {
        name: spec.token for name, spec in second.items()
    }
    assert first["rachel"].token == derive_token(DEMO_SEED, "rachel")
    assert len({spec.token for spec in first.values()}) == len(first)
    assert all(TOKEN_FORMAT.match(spec.token) for spec in first.values())
    # The people's tokens may use their file servers; rachel-readonly is the one that may not.
    assert first["rachel-readonly"].scopes == ("read:image",)
    assert first["wile"].scopes == ("exec:notebook", "read:image", "write:files")
    assert {name for name, spec in first.items() if "write:files" in spec.scopes} == {
        "rachel",
        "wile",
        "admin-user",
    }


def test_demo_tokens_survive_a_restart() -> None:
    token = demo_tokens()["wile"].token
    for _ in range(2):
        with demo_gafaelfawr() as emulator:
            assert get(emulator, TOKEN_INFO, token).json()["username"] == "wile"


def test_restart_keeps_state(gafaelfawr: GafaelfawrEmulator) -> None:
    token = gafaelfawr.issue_token("rachel", ["read:image"])
    gafaelfawr.stop()
    with pytest.raises(RuntimeError):
        _ = gafaelfawr.url
    gafaelfawr.start()
    assert get(gafaelfawr, TOKEN_INFO, token).status_code == 200


def test_token_spec_validation() -> None:
    with pytest.raises(ValueError, match="not a Gafaelfawr token"):
        GafaelfawrEmulator(tokens=[type(demo_tokens()["admin"])("nope", "x", ())])


def test_concurrent_issue_and_verify(gafaelfawr: GafaelfawrEmulator) -> None:
    """Many threads issuing and checking tokens at once all see consistent answers."""

    def issue_and_check(i: int) -> str:
        token = gafaelfawr.issue_token(f"user{i}", ["exec:notebook"])
        response = get(gafaelfawr, TOKEN_INFO, token)
        return str(response.json()["username"])

    with ThreadPoolExecutor(max_workers=16) as pool:
        usernames = list(pool.map(issue_and_check, range(64)))
    assert usernames == [f"user{i}" for i in range(64)]
    assert gafaelfawr.requests["token-info"] == 64
