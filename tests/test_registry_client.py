"""The registry client against the registry emulator over real HTTP.

Delays are never waited out: clients get a recording ``sleep`` (which can also heal the
emulator between attempts) and a fake ``clock`` for token expiry. The few tests that do
wait for real (a registry that is down or hangs) use tiny backoffs and timeouts.
"""

from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from app.errors import DependencyUnavailableError, InvalidRequestError, NotFoundError
from app.storage.registry import (
    MANIFEST_MEDIA_TYPES,
    RegistryClient,
    RegistryError,
    RegistryNotFound,
)
from devstack.registry import RegistryEmulator
from devstack.serving import ServerThread

CREDENTIALS = ("puller", "pa55-w0rd-xyzzy")
LAB = "lsst/sciplat-lab"
OTHER = "lsst/other-lab"
LAB_TAGS = {
    **{f"w_2025_{week:02d}": f"lab:w_2025_{week:02d}" for week in range(1, 9)},
    "r29_0_0": "lab:r29_0_0",
    "recommended": "lab:r29_0_0",
    "latest_weekly": "lab:w_2025_08",
}
OTHER_TAGS = {"1.0": "other:1.0", "2.0": "other:2.0", "latest": "other:2.0"}
REPOSITORIES = {LAB: LAB_TAGS, OTHER: OTHER_TAGS}
PAGE_SIZE = 3


class Sleeps:
    """A ``sleep`` that records delays instead of waiting, then runs an optional hook."""

    def __init__(self, after: Callable[[int], None] | None = None) -> None:
        self.delays: list[float] = []
        self._after = after

    def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self._after is not None:
            self._after(len(self.delays))


class Clock:
    """A settable clock for token expiry."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def emulator(**kwargs: Any) -> RegistryEmulator:
    return RegistryEmulator(
        {repo: dict(tags) for repo, tags in REPOSITORIES.items()}, page_size=PAGE_SIZE, **kwargs
    )


def reset(registry: RegistryEmulator) -> RegistryEmulator:
    registry.fail_with(None)
    registry.reset_requests()
    for repo, tags in REPOSITORIES.items():
        registry.set_tags(repo, tags)
    return registry


@pytest.fixture(scope="module")
def open_server() -> Iterator[RegistryEmulator]:
    with emulator() as registry:
        yield registry


@pytest.fixture(scope="module")
def private_server() -> Iterator[RegistryEmulator]:
    with emulator(credentials=CREDENTIALS) as registry:
        yield registry


@pytest.fixture
def registry(open_server: RegistryEmulator) -> RegistryEmulator:
    """An open (anonymous) registry in its initial state."""
    return reset(open_server)


@pytest.fixture
def private(private_server: RegistryEmulator) -> RegistryEmulator:
    """A registry whose token endpoint requires :data:`CREDENTIALS`."""
    return reset(private_server)


def client_for(
    registry: RegistryEmulator | str,
    *,
    credentials: tuple[str, str] | None = None,
    sleep: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> RegistryClient:
    """A client with test-sized timeouts and backoff; it records sleeps by default."""
    options: dict[str, Any] = {"timeout": 2.0, "retries": 2, "backoff": 0.01, "max_backoff": 0.05}
    options.update(kwargs)
    url = registry if isinstance(registry, str) else registry.url
    return RegistryClient(url, credentials=credentials, sleep=sleep or Sleeps(), **options)


def recording_session(
    seen: list[requests.Response], edit: Callable[[requests.Response], None] | None = None
) -> requests.Session:
    """A session that records every response and may edit it before the client sees it."""
    session = requests.Session()

    def hook(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
        seen.append(response)
        if edit is not None:
            edit(response)
        return response

    session.hooks["response"].append(hook)
    return session


# Tags -------------------------------------------------------------------------------


def test_list_tags_follows_pagination_to_the_exact_tag_set(registry: RegistryEmulator) -> None:
    seen: list[requests.Response] = []
    client = client_for(registry, session=recording_session(seen))

    tags = client.list_tags(LAB)

    assert sorted(tags) == sorted(LAB_TAGS)
    assert len(tags) == len(set(tags))
    pages = -(-len(LAB_TAGS) // PAGE_SIZE)
    assert registry.requests["tags"] == pages
    assert "n=1000" in str(seen[0].request.url)
    assert client.list_tags(OTHER) == sorted(OTHER_TAGS)


def test_list_tags_of_an_empty_repository(registry: RegistryEmulator) -> None:
    registry.set_tags("lsst/empty", {})
    assert client_for(registry).list_tags("lsst/empty") == []


def test_anonymous_registry_gets_no_credentials(registry: RegistryEmulator) -> None:
    seen: list[requests.Response] = []
    client = client_for(registry, credentials=CREDENTIALS, session=recording_session(seen))

    client.list_tags(LAB)
    client.digest(LAB, "recommended")

    assert registry.requests["token"] == 0
    assert seen
    assert all("Authorization" not in r.request.headers for r in seen)


# Authentication ---------------------------------------------------------------------


def test_bearer_token_is_fetched_once_and_reused(private: RegistryEmulator) -> None:
    client = client_for(private, credentials=CREDENTIALS)

    assert sorted(client.list_tags(LAB)) == sorted(LAB_TAGS)
    assert sorted(client.list_tags(LAB)) == sorted(LAB_TAGS)
    assert client.digest(LAB, "r29_0_0") == private.digest(LAB, "r29_0_0")
    assert client.digest(LAB, "w_2025_01") == private.digest(LAB, "w_2025_01")

    pages = -(-len(LAB_TAGS) // PAGE_SIZE)
    assert private.requests["token"] == 1
    # Only the very first call was sent anonymously and challenged.
    assert private.requests["tags"] == 1 + 2 * pages
    assert private.requests["manifests.head"] == 2


def test_tokens_are_cached_per_repository_scope(private: RegistryEmulator) -> None:
    client = client_for(private, credentials=CREDENTIALS)

    client.list_tags(LAB)
    client.list_tags(OTHER)
    client.digest(OTHER, "latest")
    client.digest(LAB, "latest_weekly")

    assert private.requests["token"] == 2


def test_anonymous_tokens_like_docker_hub() -> None:
    with emulator(token_auth=True) as hub:
        client = client_for(hub)
        assert sorted(client.list_tags(OTHER)) == sorted(OTHER_TAGS)
        assert client.digest(OTHER, "1.0") == hub.digest(OTHER, "1.0")
        assert hub.requests["token"] == 1


def test_token_is_refreshed_shortly_before_it_expires(private: RegistryEmulator) -> None:
    clock = Clock()
    client = client_for(private, credentials=CREDENTIALS, clock=clock)

    client.digest(LAB, "r29_0_0")
    clock.now += 200  # the emulator's tokens live 300 s
    client.digest(LAB, "r29_0_0")
    assert private.requests["token"] == 1

    clock.now += 80
    client.digest(LAB, "r29_0_0")
    assert private.requests["token"] == 2


def test_a_token_the_registry_refuses_is_replaced() -> None:
    server_clock = Clock()
    with emulator(credentials=CREDENTIALS, clock=server_clock) as registry:
        client = client_for(registry, credentials=CREDENTIALS)
        client.digest(LAB, "r29_0_0")
        server_clock.now += 3600  # expired at the server, still cached by the client

        assert client.digest(LAB, "r29_0_0") == registry.digest(LAB, "r29_0_0")
        assert registry.requests["token"] == 2


def test_wrong_credentials_raise_without_revealing_them(
    private: RegistryEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = client_for(private, credentials=(CREDENTIALS[0], "not-the-password-42"))

    with pytest.raises(RegistryError) as raised:
        client.list_tags(LAB)

    message = str(raised.value)
    assert private.url in message
    assert LAB in message
    assert "not-the-password-42" not in message
    assert "not-the-password-42" not in caplog.text
    assert isinstance(raised.value, DependencyUnavailableError)
    assert raised.value.status == 503


def test_missing_credentials_raise(private: RegistryEmulator) -> None:
    with pytest.raises(RegistryError, match="requires credentials"):
        client_for(private).list_tags(LAB)


def test_tokens_never_reach_the_logs(
    private: RegistryEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[requests.Response] = []
    client = client_for(private, credentials=CREDENTIALS, session=recording_session(seen))
    private.fail_with(503)
    with pytest.raises(RegistryError):
        client.list_tags(LAB)
    private.fail_with(None)
    client.list_tags(LAB)

    sent = {r.request.headers.get("Authorization", "") for r in seen}
    tokens = [value.removeprefix("Bearer ") for value in sent if value.startswith("Bearer ")]
    assert tokens
    secrets = [*tokens, CREDENTIALS[1], base64.b64encode(":".join(CREDENTIALS).encode()).decode()]
    assert "retrying" in caplog.text
    assert not any(secret in caplog.text for secret in secrets)


def test_concurrent_callers_share_one_token_fetch(private: RegistryEmulator) -> None:
    client = client_for(private, credentials=CREDENTIALS)
    barrier = threading.Barrier(8)
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait(timeout=5)
            results.append(client.digest(LAB, "recommended"))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert errors == []
    assert results == [private.digest(LAB, "r29_0_0")] * 8
    assert private.requests["token"] == 1


class BasicAuthGate:
    """WSGI middleware that demands HTTP Basic auth before the emulator's own app."""

    def __init__(self, app: Any, credentials: tuple[str, str]) -> None:
        self._app = app
        self._expected = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
        self.challenges = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("HTTP_AUTHORIZATION") != self._expected:
            self.challenges += 1
            start_response(
                "401 Unauthorized",
                [("WWW-Authenticate", 'Basic realm="registry"'), ("Content-Length", "0")],
            )
            return [b""]
        return self._app(environ, start_response)


def test_basic_challenge_is_answered_with_credentials(registry: RegistryEmulator) -> None:
    gate = BasicAuthGate(registry.wsgi_app, CREDENTIALS)
    with ServerThread(gate) as server:
        client = client_for(server.url, credentials=CREDENTIALS)
        assert sorted(client.list_tags(LAB)) == sorted(LAB_TAGS)
        assert client.digest(LAB, "r29_0_0") == registry.digest(LAB, "r29_0_0")
        # Challenged once; afterwards the client authenticates up front.
        assert gate.challenges == 1

        with pytest.raises(RegistryError, match="refused") as raised:
            client_for(server.url, credentials=("puller", "wrong-pw-77")).list_tags(LAB)
        assert "wrong-pw-77" not in str(raised.value)
        with pytest.raises(RegistryError, match="requires credentials"):
            client_for(server.url).list_tags(LAB)


# Digests ----------------------------------------------------------------------------


def test_digest_matches_the_registry_and_aliases_share_it(registry: RegistryEmulator) -> None:
    client = client_for(registry)

    recommended = client.digest(LAB, "recommended")
    assert recommended == registry.digest(LAB, "recommended")
    assert recommended == client.digest(LAB, "r29_0_0")
    assert client.digest(LAB, "latest_weekly") == client.digest(LAB, "w_2025_08")
    assert client.digest(LAB, "w_2025_01") != recommended
    assert client.digest(LAB, recommended) == recommended
    assert registry.requests["manifests.get"] == 0


def test_digest_asks_for_every_manifest_type(registry: RegistryEmulator) -> None:
    seen: list[requests.Response] = []
    client_for(registry, session=recording_session(seen)).digest(OTHER, "latest")

    assert [r.request.method for r in seen] == ["HEAD"]
    accept = seen[0].request.headers["Accept"]
    assert all(media_type in accept for media_type in MANIFEST_MEDIA_TYPES)


def test_digest_hashes_the_manifest_when_the_header_is_missing(
    registry: RegistryEmulator,
) -> None:
    def drop_digest(response: requests.Response) -> None:
        response.headers.pop("Docker-Content-Digest", None)

    client = client_for(registry, session=recording_session([], drop_digest))

    assert client.digest(OTHER, "latest") == registry.digest(OTHER, "2.0")
    assert registry.requests["manifests.head"] == 1
    assert registry.requests["manifests.get"] == 1


def test_unknown_repository_or_tag_is_not_found(
    registry: RegistryEmulator, private: RegistryEmulator
) -> None:
    for server, credentials in ((registry, None), (private, CREDENTIALS)):
        client = client_for(server, credentials=credentials)
        with pytest.raises(RegistryNotFound) as raised:
            client.list_tags("lsst/no-such-lab")
        assert raised.value.repository == "lsst/no-such-lab"
        with pytest.raises(RegistryNotFound):
            client.digest("lsst/no-such-lab", "latest")
        with pytest.raises(RegistryNotFound) as raised:
            client.digest(LAB, "w_1999_01")
        assert raised.value.reference == "w_1999_01"
        assert isinstance(raised.value, NotFoundError)
        assert not isinstance(raised.value, RegistryError)
    assert registry.requests["tags"] + registry.requests["manifests"] == 3


def test_invalid_names_are_refused_before_any_request(registry: RegistryEmulator) -> None:
    client = client_for(registry)
    with pytest.raises(InvalidRequestError):
        client.list_tags("../etc")
    with pytest.raises(InvalidRequestError):
        client.digest(LAB, "bad tag")
    assert sum(registry.requests.values()) == 0


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(ValueError, match="credentials"):
        RegistryClient("https://user:secret@registry.example.org")


# Robustness -------------------------------------------------------------------------


def test_transient_failures_are_retried_until_the_registry_recovers(
    registry: RegistryEmulator,
) -> None:
    registry.fail_with(503)
    sleeps = Sleeps(after=lambda count: registry.fail_with(None) if count == 2 else None)
    client = client_for(registry, retries=3, sleep=sleeps)

    assert client.digest(OTHER, "1.0") == registry.digest(OTHER, "1.0")
    assert registry.requests["manifests"] == 3
    assert len(sleeps.delays) == 2


def test_persistent_failure_raises_after_every_attempt(registry: RegistryEmulator) -> None:
    registry.fail_with(503)
    sleeps = Sleeps()
    client = client_for(registry, retries=3, backoff=0.1, max_backoff=10.0, sleep=sleeps)

    with pytest.raises(RegistryError) as raised:
        client.list_tags(LAB)

    assert registry.requests["tags"] == 4
    assert "503" in str(raised.value)
    assert registry.url in str(raised.value)
    assert LAB in str(raised.value)
    # Exponential backoff, jittered within the upper half of each step.
    assert len(sleeps.delays) == 3
    for attempt, delay in enumerate(sleeps.delays):
        ceiling = 0.1 * 2**attempt
        assert ceiling / 2 <= delay <= ceiling


@pytest.mark.parametrize(("retry_after", "expected"), [("2", 2.0), ("3600", 5.0)])
def test_retry_after_is_respected_up_to_the_cap(
    registry: RegistryEmulator, retry_after: str, expected: float
) -> None:
    def add_retry_after(response: requests.Response) -> None:
        if response.status_code == 429:
            response.headers["Retry-After"] = retry_after

    registry.fail_with(429)
    sleeps = Sleeps()
    client = client_for(
        registry,
        session=recording_session([], add_retry_after),
        max_backoff=5.0,
        sleep=sleeps,
    )
    with pytest.raises(RegistryError, match="429"):
        client.digest(LAB, "recommended")
    assert sleeps.delays == [expected, expected]


@pytest.mark.parametrize("status", [400, 403, 405])
def test_client_errors_are_not_retried(registry: RegistryEmulator, status: int) -> None:
    registry.fail_with(status)
    with pytest.raises(RegistryError, match=str(status)):
        client_for(registry).list_tags(LAB)
    assert registry.requests["tags"] == 1


def test_a_registry_that_is_down_fails_quickly() -> None:
    down = emulator()
    with down:
        url = down.url
    client = client_for(url, retries=2, sleep=time.sleep)

    started = time.monotonic()
    with pytest.raises(RegistryError, match="ConnectionError") as raised:
        client.list_tags(LAB)

    assert time.monotonic() - started < 2.0
    assert "3 attempts" in str(raised.value)


def test_a_registry_that_hangs_times_out() -> None:
    # A listening socket that never accepts: the connection is made, no answer comes.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        client = client_for(f"http://127.0.0.1:{port}", timeout=0.2, retries=1, sleep=time.sleep)

        started = time.monotonic()
        with pytest.raises(RegistryError, match="Timeout"):
            client.digest(LAB, "recommended")
        assert time.monotonic() - started < 2.0
