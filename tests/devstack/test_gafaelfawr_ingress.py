"""The Gafaelfawr emulator's ingress routes answer NGINX's auth subrequest as Gafaelfawr does,
its group mapping grants scopes by membership, and its login page sets the session cookie."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import requests

from devstack.demo import demo_group_mapping, demo_tokens, demo_users
from devstack.gafaelfawr import GafaelfawrEmulator, UserSpec, parse_token

START = 1_800_000_000.0
ORIGINAL = {"X-Original-URL": "http://apps.test/apps/a1/", "X-Original-Method": "GET"}
REALM = 'Bearer realm="gafaelfawr-emulator"'


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture(scope="module")
def server(clock: FakeClock) -> Iterator[GafaelfawrEmulator]:
    with GafaelfawrEmulator(
        users=demo_users(), tokens=demo_tokens(), clock=clock, group_mapping=demo_group_mapping()
    ) as emulator:
        yield emulator


@pytest.fixture
def gafaelfawr(server: GafaelfawrEmulator, clock: FakeClock) -> GafaelfawrEmulator:
    """The shared server in its demo state."""
    clock.now = START
    server.fail_with(None)
    server.set_group_mapping(demo_group_mapping())
    for user in demo_users():
        server.add_user(user)
    for spec in demo_tokens().values():
        server.add_token(spec)
    return server


def token(name: str) -> str:
    return demo_tokens()[name].token


def auth(
    emulator: GafaelfawrEmulator,
    query: str,
    bearer: str | None = None,
    *,
    path: str = "/ingress/auth",
    **headers: str,
) -> requests.Response:
    sent = dict(ORIGINAL)
    if bearer is not None:
        sent["Authorization"] = f"Bearer {bearer}"
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return requests.get(f"{emulator.url}{path}?{query}", headers=sent, timeout=5)


def test_no_token_is_a_bare_challenge(gafaelfawr: GafaelfawrEmulator) -> None:
    response = auth(gafaelfawr, "scope=exec:notebook")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == REALM
    assert response.json()["detail"]["type"] == "no_authorization"
    assert "X-Auth-Request-User" not in response.headers


@pytest.mark.parametrize(
    ("credential", "description"),
    [
        ("not-a-token", "Token is malformed"),
        ("gt-AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA", "Token is not valid"),
    ],
)
def test_a_bad_token_is_an_invalid_token_challenge(
    gafaelfawr: GafaelfawrEmulator, credential: str, description: str
) -> None:
    response = auth(gafaelfawr, "scope=exec:notebook", credential)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == (
        f'{REALM}, error="invalid_token", error_description="{description}"'
    )


def test_a_scripts_request_is_refused_rather_than_challenged(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    response = auth(gafaelfawr, "scope=exec:notebook", X_Requested_With="XMLHttpRequest")
    assert response.status_code == 403


def test_scopes_decide_with_satisfy_all_by_default(gafaelfawr: GafaelfawrEmulator) -> None:
    both = "scope=exec:notebook&scope=read:image"
    allowed = auth(gafaelfawr, both, token("rachel"))
    assert allowed.status_code == 200
    assert allowed.headers["X-Auth-Request-User"] == "rachel"
    assert allowed.headers["X-Auth-Request-Email"] == "rachel@example.com"
    assert "X-Auth-Request-Token" not in allowed.headers
    refused = auth(gafaelfawr, both, token("rachel-readonly"))
    assert refused.status_code == 403
    assert refused.headers["WWW-Authenticate"] == (
        f'{REALM}, error="insufficient_scope", error_description="Token missing required '
        'scope", scope="exec:notebook read:image"'
    )
    assert refused.headers["X-Error-Status"] == "403"
    assert json.loads(refused.headers["X-Error-Body"])["detail"][0]["type"] == (
        "insufficient_scope"
    )
    assert auth(gafaelfawr, both + "&satisfy=any", token("rachel-readonly")).status_code == 200
    # Without scopes, "all" lets any valid token in and "any" none.
    assert auth(gafaelfawr, "", token("wile")).status_code == 200
    assert auth(gafaelfawr, "satisfy=any", token("wile")).status_code == 403


def test_a_username_restricts_the_ingress_to_one_user(gafaelfawr: GafaelfawrEmulator) -> None:
    query = "scope=exec:notebook&username=rachel"
    assert auth(gafaelfawr, query, token("rachel")).status_code == 200
    refused = auth(gafaelfawr, query, token("wile"))
    assert refused.status_code == 403
    assert (
        'error_description="Access not allowed for this user"'
        in (refused.headers["WWW-Authenticate"])
    )
    # Scopes are checked first: the right user without the scope is refused for the scope.
    readonly = auth(gafaelfawr, query, token("rachel-readonly"))
    assert 'scope="exec:notebook"' in readonly.headers["WWW-Authenticate"]


def test_group_mapping_grants_a_groups_scope_to_its_members(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    """rachel and admin-user share lsst-data; wile, who can log in, is not in it."""
    group = "scope=app:lsst-data"
    assert auth(gafaelfawr, group, token("rachel")).status_code == 200
    assert auth(gafaelfawr, group, token("admin-user")).status_code == 200
    assert auth(gafaelfawr, group, token("wile")).status_code == 403
    assert auth(gafaelfawr, "scope=app:science", token("wile")).status_code == 200
    info = requests.get(
        gafaelfawr.url + "/auth/api/v1/token-info",
        headers={"Authorization": f"Bearer {token('admin-user')}"},
        timeout=5,
    ).json()
    assert info["scopes"] == [
        "admin:lab-pods",
        "admin:notebook",
        "app:g-admins",
        "app:lsst-data",
        "read:image",
        "write:files",
    ]
    # The mapping and the user's groups are read at every check.
    gafaelfawr.set_group_mapping({"app:lsst-data": ["lsst-data", "staff"]})
    assert auth(gafaelfawr, group, token("wile")).status_code == 200
    gafaelfawr.add_user(UserSpec("rachel", groups=()))
    assert auth(gafaelfawr, group, token("rachel")).status_code == 403


def test_the_group_mapping_can_be_set_over_http(gafaelfawr: GafaelfawrEmulator) -> None:
    url = gafaelfawr.url + "/_emulator/group-mapping"
    response = requests.put(url, json={"app:x": ["staff", "cloud-users"]}, timeout=5)
    assert response.json() == {"app:x": ["cloud-users", "staff"]}
    assert gafaelfawr.group_mapping == {"app:x": ["cloud-users", "staff"]}
    assert auth(gafaelfawr, "scope=app:x", token("wile")).status_code == 200
    assert requests.put(url, json={"app:x": "staff"}, timeout=5).status_code == 400


def test_an_emulator_without_a_mapping_grants_nothing_more() -> None:
    with GafaelfawrEmulator(users=demo_users(), tokens=demo_tokens()) as plain:
        assert auth(plain, "scope=app:lsst-data", token("rachel")).status_code == 403


def test_the_cookie_authenticates_and_only_gafaelfawrs_credentials_are_removed(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    cookies = f"theme=dark; gafaelfawr={token('rachel')}; lang=en"
    response = auth(
        gafaelfawr, "scope=exec:notebook", Cookie=cookies, Authorization="Bearer app-own-key"
    )
    assert response.status_code == 200
    assert response.headers["X-Auth-Request-User"] == "rachel"
    assert response.headers["Cookie"] == "theme=dark; lang=en"
    assert response.headers["Authorization"] == "Bearer app-own-key"
    # A Gafaelfawr token in the header is taken out, whichever scheme carries it.
    basic = base64.b64encode(f"{token('wile')}:x-oauth-basic".encode()).decode()
    response = auth(gafaelfawr, "scope=exec:notebook", Authorization=f"Basic {basic}")
    assert response.headers["X-Auth-Request-User"] == "wile"
    assert "Authorization" not in response.headers


def test_anonymous_lets_everyone_in_without_their_gafaelfawr_credentials(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    path = "/ingress/anonymous"
    assert auth(gafaelfawr, "", path=path).status_code == 200
    response = auth(
        gafaelfawr, "", token("rachel"), path=path, Cookie=f"gafaelfawr={token('rachel')}"
    )
    assert response.status_code == 200
    assert "Authorization" not in response.headers
    assert "Cookie" not in response.headers
    assert "X-Auth-Request-User" not in response.headers
    kept = auth(gafaelfawr, "", "app-own-key", path=path, Cookie="a=1")
    assert (kept.headers["Authorization"], kept.headers["Cookie"]) == ("Bearer app-own-key", "a=1")


def _token_info(emulator: GafaelfawrEmulator, value: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {value}"}
    url = emulator.url + "/auth/api/v1/token-info"
    info: dict[str, object] = requests.get(url, headers=headers, timeout=5).json()
    return info


def test_delegated_tokens_are_made_once_and_handed_to_the_backend(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    notebook = auth(gafaelfawr, "scope=exec:notebook&notebook=true", token("rachel"))
    delegated = notebook.headers["X-Auth-Request-Token"]
    assert parse_token(delegated) is not None and delegated != token("rachel")
    info = _token_info(gafaelfawr, delegated)
    assert (info["username"], info["token_type"]) == ("rachel", "notebook")
    again = auth(gafaelfawr, "scope=exec:notebook&notebook=true", token("rachel"))
    assert again.headers["X-Auth-Request-Token"] == delegated

    query = (
        "scope=exec:notebook&delegate_to=portal&delegate_scope=read:image"
        "&delegate_scope=admin:notebook&use_authorization=true"
    )
    internal = auth(gafaelfawr, query, token("wile"))
    delegated = internal.headers["X-Auth-Request-Token"]
    assert internal.headers["Authorization"] == f"Bearer {delegated}"
    info = _token_info(gafaelfawr, delegated)
    assert (info["token_type"], info["service"], info["scopes"]) == (
        "internal",
        "portal",
        ["app:cloud-users", "app:science", "app:staff", "read:image"],
    )
    # A request made with an internal token names its service.
    passed = auth(gafaelfawr, "scope=read:image", delegated)
    assert passed.headers["X-Auth-Request-Service"] == "portal"


def test_a_token_too_close_to_expiry_for_the_minimum_lifetime_is_refused(
    gafaelfawr: GafaelfawrEmulator, clock: FakeClock
) -> None:
    short = gafaelfawr.issue_token("rachel", ["exec:notebook"], expires=int(START) + 60)
    query = "scope=exec:notebook&notebook=true&minimum_lifetime=300"
    refused = auth(gafaelfawr, query, short)
    assert refused.status_code == 401
    assert "Remaining token lifetime too short" in refused.headers["WWW-Authenticate"]
    assert auth(gafaelfawr, "scope=exec:notebook", short).status_code == 200


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("scope=exec:notebook", {"X-Original-URL": ""}),
        ("satisfy=some", {}),
        ("auth_type=digest", {}),
        ("notebook=true&delegate_to=portal", {}),
    ],
)
def test_requests_nginx_would_never_send_are_refused(
    gafaelfawr: GafaelfawrEmulator, query: str, headers: dict[str, str]
) -> None:
    sent = {k: v for k, v in {**ORIGINAL, **headers}.items() if v}
    sent["Authorization"] = f"Bearer {token('rachel')}"
    response = requests.get(f"{gafaelfawr.url}/ingress/auth?{query}", headers=sent, timeout=5)
    assert response.status_code == 422


def test_options_pass_only_as_a_cors_preflight_from_this_machine(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    options = {"X_Original_Method": "OPTIONS"}
    plain = auth(gafaelfawr, "scope=x", **options)
    # NGINX's auth_request knows 401 and 403 only: the real status travels in a header.
    assert (plain.status_code, plain.headers["X-Error-Status"]) == (403, "404")
    preflight = {**options, "Access_Control_Request_Method": "POST"}
    assert auth(gafaelfawr, "scope=x", Origin="http://127.0.0.1:9", **preflight).status_code == 200
    refused = auth(gafaelfawr, "scope=x", Origin="https://evil.example", **preflight)
    assert (refused.status_code, refused.headers["X-Error-Status"]) == (403, "403")


def test_an_ingress_that_allows_options_lets_webdavs_through_without_credentials(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    """WebDAV negotiates with a plain OPTIONS: ``allow_options`` lets it pass, unauthenticated
    and with nothing handed on, while a half-made preflight is still refused."""
    options = {"X_Original_Method": "OPTIONS"}
    query = "allow_options=true&auth_type=basic&scope=write:files&username=rachel"
    passed = auth(gafaelfawr, query, token("rachel"), **options)
    assert passed.status_code == 200
    assert "Authorization" not in passed.headers
    assert "X-Auth-Request-User" not in passed.headers
    assert auth(gafaelfawr, query, **options).status_code == 200
    half = auth(gafaelfawr, query, Origin="http://127.0.0.1:9", **options)
    assert (half.status_code, half.headers["X-Error-Status"]) == (403, "404")
    assert "Malformed CORS request" in half.headers["X-Error-Body"]
    # Other methods are authenticated as ever.
    assert auth(gafaelfawr, query).status_code == 401


def test_a_gafaelfawr_outage_reaches_the_ingress_routes(gafaelfawr: GafaelfawrEmulator) -> None:
    gafaelfawr.fail_with(503)
    assert auth(gafaelfawr, "scope=exec:notebook", token("rachel")).status_code == 503
    gafaelfawr.fail_with(None)
    assert auth(gafaelfawr, "scope=exec:notebook", token("rachel")).status_code == 200


def test_login_sets_the_session_cookie_and_returns_to_the_app(
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    back = "http://127.0.0.1:9000/apps/a1/"
    session = requests.Session()
    form = session.get(gafaelfawr.url + "/login", params={"rd": back}, timeout=5)
    assert form.status_code == 200 and 'name="token"' in form.text
    wrong = session.post(gafaelfawr.url + "/login", data={"token": "nope", "rd": back}, timeout=5)
    assert wrong.status_code == 401 and "gafaelfawr" not in session.cookies
    done = session.post(
        gafaelfawr.url + "/login",
        data={"token": token("wile"), "rd": back},
        allow_redirects=False,
        timeout=5,
    )
    assert (done.status_code, done.headers["Location"]) == (303, back)
    assert session.cookies["gafaelfawr"] == token("wile")
    # Logged in: the login page sends the browser straight back, and the cookie authenticates.
    again = session.get(
        gafaelfawr.url + "/login", params={"rd": back}, allow_redirects=False, timeout=5
    )
    assert again.status_code == 303
    response = session.get(
        gafaelfawr.url + "/ingress/auth?scope=exec:notebook", headers=ORIGINAL, timeout=5
    )
    assert response.headers["X-Auth-Request-User"] == "wile"
    session.get(gafaelfawr.url + "/logout", timeout=5)
    assert "gafaelfawr" not in session.cookies
    elsewhere = {"rd": "https://evil.example/"}
    assert requests.get(gafaelfawr.url + "/login", params=elsewhere, timeout=5).status_code == 422
