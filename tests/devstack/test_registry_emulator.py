"""The registry emulator speaks the Docker Registry v2 protocol the service relies on."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

import pytest
import requests

from devstack.demo import (
    LAB_REPOSITORY,
    SIMPLE_REPOSITORY,
    demo_registry,
    demo_registry_repositories,
)
from devstack.registry import MANIFEST_MEDIA_TYPE, RegistryEmulator, parse_reference

LAB_TAGS = "/v2/lsstsqre/sciplat-lab/tags/list"
CREDENTIALS = ("puller", "s3cret")
LINK_RE = re.compile(r'^<(?P<path>/v2/[^>]+)>; rel="next"$')


def manifest_path(repo: str, reference: str) -> str:
    return f"/v2/{repo}/manifests/{reference}"


@pytest.fixture(scope="module")
def open_server() -> Iterator[RegistryEmulator]:
    """One server per module and mode: stopping a werkzeug server costs half a second."""
    with demo_registry(page_size=7) as registry:
        yield registry


@pytest.fixture
def registry(open_server: RegistryEmulator) -> RegistryEmulator:
    """An anonymous registry in its demo state."""
    open_server.fail_with(None)
    open_server.reset_requests()
    for repo, tags in demo_registry_repositories().items():
        open_server.set_tags(repo, tags)
    return open_server


@pytest.fixture(scope="module")
def private() -> Iterator[RegistryEmulator]:
    """A registry that requires Basic credentials at its token endpoint."""
    with demo_registry(credentials=CREDENTIALS) as registry:
        yield registry


@pytest.fixture(scope="module")
def hub_like() -> Iterator[RegistryEmulator]:
    """Like Docker Hub's public repositories: bearer tokens needed, handed to anybody."""
    emulator = RegistryEmulator(demo_registry_repositories(), token_auth=True)
    with emulator:
        yield emulator


def fetch_all_tags(
    registry: RegistryEmulator,
    repo: str,
    n: int | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[list[str], int]:
    """Follow Link headers to the end; returns the tags and the number of pages."""
    path: str | None = f"/v2/{repo}/tags/list" + (f"?n={n}" if n is not None else "")
    tags: list[str] = []
    pages = 0
    while path is not None:
        response = requests.get(registry.url + path, headers=headers, timeout=5)
        assert response.status_code == 200
        body = response.json()
        assert body["name"] == repo
        tags.extend(body["tags"])
        pages += 1
        link = response.headers.get("Link")
        if link is None:
            path = None
        else:
            match = LINK_RE.match(link)
            assert match is not None, link
            path = match.group("path")
    return tags, pages


def parse_challenge(header: str) -> dict[str, str]:
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def test_v2_probe_anonymous(registry: RegistryEmulator) -> None:
    response = requests.get(registry.url + "/v2/", timeout=5)
    assert response.status_code == 200
    assert response.json() == {}
    assert response.headers["Docker-Distribution-API-Version"] == "registry/2.0"


def test_pagination_follows_links_to_the_exact_tag_set(registry: RegistryEmulator) -> None:
    expected = sorted(demo_registry_repositories()[LAB_REPOSITORY])
    assert 20 <= len(expected) <= 30
    tags, pages = fetch_all_tags(registry, LAB_REPOSITORY)
    assert tags == expected
    assert pages == -(-len(expected) // 7)
    assert registry.requests["tags"] == pages


def test_page_size_caps_client_n(registry: RegistryEmulator) -> None:
    response = requests.get(registry.url + LAB_TAGS + "?n=1000", timeout=5)
    assert len(response.json()["tags"]) == 7
    assert "n=7&" in response.headers["Link"]
    tags, pages = fetch_all_tags(registry, LAB_REPOSITORY, n=3)
    assert tags == sorted(demo_registry_repositories()[LAB_REPOSITORY])
    assert pages == -(-len(tags) // 3)


def test_last_and_n(registry: RegistryEmulator) -> None:
    response = requests.get(
        registry.url + LAB_TAGS, params={"n": "2", "last": "r26_0_0"}, timeout=5
    )
    assert response.json()["tags"] == ["r26_0_0_rc1", "r26_0_0_rc2"]
    assert response.headers["Link"] == (
        '</v2/lsstsqre/sciplat-lab/tags/list?n=2&last=r26_0_0_rc2>; rel="next"'
    )
    final = requests.get(registry.url + LAB_TAGS, params={"last": "w_2024_44_c0040.001"}, timeout=5)
    assert final.json()["tags"] == []
    assert "Link" not in final.headers
    empty = requests.get(registry.url + LAB_TAGS, params={"n": "0"}, timeout=5)
    assert empty.json()["tags"] == []
    assert "Link" not in empty.headers


@pytest.mark.parametrize("n", ["-1", "ten"])
def test_invalid_n(registry: RegistryEmulator, n: str) -> None:
    response = requests.get(registry.url + LAB_TAGS, params={"n": n}, timeout=5)
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "PAGINATION_NUMBER_INVALID"


def test_alias_tags_share_digests(registry: RegistryEmulator) -> None:
    digest = registry.digest
    assert digest(LAB_REPOSITORY, "recommended") == digest(LAB_REPOSITORY, "w_2024_42")
    assert digest(LAB_REPOSITORY, "latest_weekly") == digest(LAB_REPOSITORY, "w_2024_44")
    assert digest(LAB_REPOSITORY, "latest") == digest(LAB_REPOSITORY, "w_2024_44")
    assert digest(LAB_REPOSITORY, "latest_daily") == digest(LAB_REPOSITORY, "d_2024_11_05")
    assert digest(LAB_REPOSITORY, "latest_release") == digest(LAB_REPOSITORY, "r26_0_0")
    assert digest(SIMPLE_REPOSITORY, "latest") == digest(SIMPLE_REPOSITORY, "2.0")
    distinct = {
        digest(LAB_REPOSITORY, tag)
        for tag in ("w_2024_42", "w_2024_43", "w_2024_44", "w_2024_44-amd64", "w_2024_44-arm64")
    }
    assert len(distinct) == 5


def test_manifest_digest_is_sha256_of_body(registry: RegistryEmulator) -> None:
    response = requests.get(registry.url + manifest_path(LAB_REPOSITORY, "recommended"), timeout=5)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == MANIFEST_MEDIA_TYPE
    assert int(response.headers["Content-Length"]) == len(response.content)
    digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
    assert response.headers["Docker-Content-Digest"] == digest
    assert digest == registry.digest(LAB_REPOSITORY, "w_2024_42")
    manifest = response.json()
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == MANIFEST_MEDIA_TYPE
    assert manifest["config"]["digest"].startswith("sha256:")
    assert len(manifest["layers"]) == 3
    assert all(
        re.fullmatch(r"sha256:[0-9a-f]{64}", layer["digest"]) for layer in manifest["layers"]
    )


def test_manifest_by_digest(registry: RegistryEmulator) -> None:
    digest = registry.digest(LAB_REPOSITORY, "w_2024_40")
    response = requests.get(registry.url + manifest_path(LAB_REPOSITORY, digest), timeout=5)
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] == digest
    unknown = "sha256:" + "0" * 64
    missing = requests.get(registry.url + manifest_path(LAB_REPOSITORY, unknown), timeout=5)
    assert missing.status_code == 404
    assert missing.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"


def test_head_matches_get_without_body(registry: RegistryEmulator) -> None:
    url = registry.url + manifest_path(LAB_REPOSITORY, "w_2024_44")
    head = requests.head(url, timeout=5)
    get = requests.get(url, timeout=5)
    assert head.status_code == 200
    assert head.content == b""
    for header in ("Docker-Content-Digest", "Content-Type", "Content-Length"):
        assert head.headers[header] == get.headers[header]
    assert registry.requests["manifests.head"] == 1
    assert registry.requests["manifests.get"] == 1
    assert registry.requests["manifests"] == 2
    missing = requests.head(registry.url + manifest_path(LAB_REPOSITORY, "nope"), timeout=5)
    assert missing.status_code == 404


def test_unknown_repository_and_tag(registry: RegistryEmulator) -> None:
    for path in ("/v2/lsstsqre/nothing/tags/list", manifest_path("lsstsqre/nothing", "w_2024_44")):
        response = requests.get(registry.url + path, timeout=5)
        assert response.status_code == 404
        error = response.json()["errors"][0]
        assert error["code"] == "NAME_UNKNOWN"
        assert error["detail"] == {"name": "lsstsqre/nothing"}
    response = requests.get(registry.url + manifest_path(LAB_REPOSITORY, "w_1999_01"), timeout=5)
    assert response.status_code == 404
    assert response.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    invalid = requests.get(registry.url + "/v2/Upper/Case/tags/list", timeout=5)
    assert invalid.status_code == 400
    assert invalid.json()["errors"][0]["code"] == "NAME_INVALID"


def test_set_and_add_tags_move_digests(registry: RegistryEmulator) -> None:
    before = registry.digest(LAB_REPOSITORY, "recommended")
    registry.add_tag(LAB_REPOSITORY, "recommended", f"{LAB_REPOSITORY}:w_2024_43")
    assert registry.digest(LAB_REPOSITORY, "recommended") != before
    assert registry.digest(LAB_REPOSITORY, "recommended") == registry.digest(
        LAB_REPOSITORY, "w_2024_43"
    )
    registry.add_tag("lsstsqre/new-repo", "w_2024_45", "img-45")
    tags, _ = fetch_all_tags(registry, "lsstsqre/new-repo")
    assert tags == ["w_2024_45"]
    registry.remove_tag("lsstsqre/new-repo", "w_2024_45")
    assert fetch_all_tags(registry, "lsstsqre/new-repo")[0] == []
    with pytest.raises(ValueError, match="invalid tag"):
        registry.set_tags(LAB_REPOSITORY, {"bad tag": "x"})
    with pytest.raises(KeyError):
        registry.digest(LAB_REPOSITORY, "bad")


def test_digest_for_reference(registry: RegistryEmulator) -> None:
    digest = registry.digest(LAB_REPOSITORY, "w_2024_42")
    host = registry.host
    assert host == registry.url.removeprefix("https://")
    lookup = registry.digest_for_reference
    assert lookup(f"{host}/{LAB_REPOSITORY}:w_2024_42") == digest
    assert lookup(f"{host}/{LAB_REPOSITORY}:recommended") == digest
    assert lookup(f"{host}/{LAB_REPOSITORY}@{digest}") == digest
    assert lookup(f"{host}/{LAB_REPOSITORY}:recommended@{digest}") == digest
    assert lookup(f"{LAB_REPOSITORY}:w_2024_42") == digest
    assert lookup(f"{host}/{SIMPLE_REPOSITORY}") == registry.digest(SIMPLE_REPOSITORY, "latest")
    assert lookup(f"{host}/{LAB_REPOSITORY}:w_1999_01") is None
    assert lookup(f"{host}/{LAB_REPOSITORY}@sha256:{'0' * 64}") is None
    assert lookup(f"{host}/lsstsqre/nothing:w_2024_42") is None
    assert lookup(f"localhost:{registry.url.rsplit(':', 1)[1]}/{LAB_REPOSITORY}:latest") == (
        registry.digest(LAB_REPOSITORY, "w_2024_44")
    )
    assert lookup(f"docker.io/{LAB_REPOSITORY}:w_2024_42") is None
    assert lookup(f"127.0.0.1:1/{LAB_REPOSITORY}:w_2024_42") is None
    assert lookup("not a reference") is None


def test_parse_reference() -> None:
    ref = parse_reference("127.0.0.1:5000/lsstsqre/sciplat-lab:w_2022_37")
    assert ref is not None
    assert (ref.host, ref.repository, ref.tag, ref.digest) == (
        "127.0.0.1:5000",
        "lsstsqre/sciplat-lab",
        "w_2022_37",
        None,
    )
    bare = parse_reference("lsstsqre/sciplat-lab")
    assert bare is not None
    assert (bare.host, bare.tag) == (None, "latest")
    assert parse_reference("localhost/x@sha256:abc") is None


def test_fail_with(registry: RegistryEmulator) -> None:
    registry.fail_with(503)
    for path in ("/v2/", LAB_TAGS, manifest_path(LAB_REPOSITORY, "latest"), "/token"):
        response = requests.get(registry.url + path, timeout=5)
        assert response.status_code == 503
        assert response.json()["errors"][0]["code"] == "UNAVAILABLE"
    registry.fail_with(None)
    assert requests.get(registry.url + LAB_TAGS, timeout=5).status_code == 200


def test_control_endpoints(registry: RegistryEmulator) -> None:
    put = requests.put(
        registry.url + "/_emulator/tags/lsstsqre/sciplat-lab",
        json={"w_2024_45": "img-45", "recommended": "img-45"},
        timeout=5,
    )
    assert put.status_code == 200
    assert put.json() == {"name": LAB_REPOSITORY, "tags": ["recommended", "w_2024_45"]}
    tags, _ = fetch_all_tags(registry, LAB_REPOSITORY)
    assert tags == ["recommended", "w_2024_45"]
    assert registry.digest(LAB_REPOSITORY, "recommended") == registry.digest(
        LAB_REPOSITORY, "w_2024_45"
    )
    bad = requests.put(registry.url + "/_emulator/tags/lsstsqre/x", json={"a b": "c"}, timeout=5)
    assert bad.status_code == 400

    fail = requests.put(registry.url + "/_emulator/fail", json={"status": 500}, timeout=5)
    assert fail.status_code == 200
    assert requests.get(registry.url + "/v2/", timeout=5).status_code == 500
    counts = requests.get(registry.url + "/_emulator/requests", timeout=5).json()
    assert counts["v2"] == 1
    requests.put(registry.url + "/_emulator/fail", json={"status": None}, timeout=5)
    assert requests.get(registry.url + "/v2/", timeout=5).status_code == 200


def test_private_registry_challenge_flow(private: RegistryEmulator) -> None:
    probe = requests.get(private.url + "/v2/", timeout=5)
    assert probe.status_code == 401
    challenge = parse_challenge(probe.headers["WWW-Authenticate"])
    assert challenge == {"realm": private.url + "/token", "service": private.service}

    listing = requests.get(private.url + LAB_TAGS, timeout=5)
    assert listing.status_code == 401
    challenge = parse_challenge(listing.headers["WWW-Authenticate"])
    assert challenge["scope"] == f"repository:{LAB_REPOSITORY}:pull"
    assert listing.json()["errors"][0]["code"] == "UNAUTHORIZED"

    params = {"service": challenge["service"], "scope": challenge["scope"]}
    denied = requests.get(challenge["realm"], params=params, timeout=5)
    assert denied.status_code == 401
    wrong = requests.get(challenge["realm"], params=params, auth=("puller", "nope"), timeout=5)
    assert wrong.status_code == 401

    grant = requests.get(challenge["realm"], params=params, auth=CREDENTIALS, timeout=5)
    assert grant.status_code == 200
    body = grant.json()
    assert body["token"] == body["access_token"]
    assert body["expires_in"] == 300
    assert body["issued_at"].endswith("Z")

    bearer = {"Authorization": f"Bearer {body['token']}"}
    tags, _ = fetch_all_tags(private, LAB_REPOSITORY, headers=bearer)
    assert tags == sorted(demo_registry_repositories()[LAB_REPOSITORY])
    head = requests.head(
        private.url + manifest_path(LAB_REPOSITORY, "latest"), headers=bearer, timeout=5
    )
    assert head.headers["Docker-Content-Digest"] == private.digest(LAB_REPOSITORY, "w_2024_44")
    assert requests.get(private.url + "/v2/", headers=bearer, timeout=5).status_code == 200

    other = requests.get(
        private.url + f"/v2/{SIMPLE_REPOSITORY}/tags/list", headers=bearer, timeout=5
    )
    assert other.status_code == 401
    other_challenge = parse_challenge(other.headers["WWW-Authenticate"])
    assert other_challenge["scope"] == f"repository:{SIMPLE_REPOSITORY}:pull"
    assert other_challenge["error"] == "insufficient_scope"

    forged = {"Authorization": "Bearer made-up"}
    assert requests.get(private.url + LAB_TAGS, headers=forged, timeout=5).status_code == 401


def test_token_endpoint_rejects_bad_requests(private: RegistryEmulator) -> None:
    url = private.url + "/token"
    bad_scope = requests.get(url, params={"scope": "registry:catalog"}, auth=CREDENTIALS, timeout=5)
    assert bad_scope.status_code == 400
    bad_service = requests.get(url, params={"service": "elsewhere"}, auth=CREDENTIALS, timeout=5)
    assert bad_service.status_code == 400


def test_anonymous_tokens_like_docker_hub(hub_like: RegistryEmulator) -> None:
    listing = requests.get(hub_like.url + LAB_TAGS, timeout=5)
    assert listing.status_code == 401
    challenge = parse_challenge(listing.headers["WWW-Authenticate"])
    grant = requests.get(
        challenge["realm"],
        params={"service": challenge["service"], "scope": challenge["scope"]},
        timeout=5,
    )
    assert grant.status_code == 200
    bearer = {"Authorization": f"Bearer {grant.json()['token']}"}
    assert requests.get(hub_like.url + LAB_TAGS, headers=bearer, timeout=5).status_code == 200
    assert hub_like.requests["token"] == 1


def test_credentials_require_token_auth() -> None:
    with pytest.raises(ValueError, match="token authentication"):
        RegistryEmulator(credentials=CREDENTIALS, token_auth=False)
