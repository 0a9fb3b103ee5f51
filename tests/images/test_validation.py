"""No image reaches users before it is validated, on a stack whose pods are real processes.

Three sources each list one image of the demo registry and validate it with a command run
in a pod of that image: one command exits 0, one exits 1, and one image cannot be pulled.
The first is validated and then offered and prepulled; the other two are rejected with the
reason (and the failing command's output), never offered; a trusted source's image is
offered as soon as it is listed. No validation pod is left behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack.stack import LocalStack, StackOptions
from tests.images.stacks import admin_get
from tests.labs.conftest import wait_for

REGISTRY = "127.0.0.1:8192/lsstsqre/simple-lab"


def source(name: str, tag: str, command: list[str] | None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "name": name,
        "type": "simple",
        "images": [{"url": f"{REGISTRY}:{tag}", "name": f"Simple {tag}"}],
    }
    if command is not None:
        block["validation"] = {"command": command, "timeoutSeconds": 60}
    return block


PREPULL = [
    source("good", "2.0", ["python", "-c", "print('imports fine')"]),
    source("broken", "1.1", ["python", "-c", "import sys; print('missing module'); sys.exit(1)"]),
    source("unpullable", "1.0", ["python", "-c", "print('never runs')"]),
    {
        "name": "weeklies",
        "type": "rubin",
        "registry": "127.0.0.1:8192",
        "docker": {"repository": "lsstsqre/sciplat-lab"},
        "numReleases": 0,
        "numWeeklies": 3,
        "numDailies": 0,
        "validation": {"command": ["python", "-c", "print('ok')"], "timeoutSeconds": 60},
        "retention": 2,
    },
    {
        "name": "trusted",
        "type": "rubin",
        "registry": "127.0.0.1:8192",
        "docker": {"repository": "lsstsqre/sciplat-lab"},
        "recommendedTag": "recommended",
        "numReleases": 1,
        "numWeeklies": 0,
        "numDailies": 0,
    },
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("validation"),
        real_labs=True,
        pull_seconds=0.1,
        config_overrides={"prepull": PREPULL, "images": {"refreshSeconds": 1}},
    )
    local = LocalStack(options)
    # The validation pod runs the build pinned by digest: that build cannot be pulled.
    unpullable = local.registry.digest_for_reference("lsstsqre/simple-lab:1.0")
    assert unpullable is not None
    local.kube.cluster.faults.set("image_pull", f"*@{unpullable}", "manifest unknown")
    local.start()
    yield local
    local.stop()


def admin_post(local: LocalStack, path: str, body: Any = None) -> requests.Response:
    token = local.state()["tokens"]["admin-user"]["token"]
    return requests.post(
        f"{local.spawner_url}/spawner/v1{path}",
        headers={"Authorization": f"Bearer {token}"},
        json=body,
        timeout=10,
    )


def records(local: LocalStack) -> dict[str, dict[str, Any]]:
    return {r["source"]: r for r in admin_get(local, "/images/records")}


def offered(local: LocalStack) -> dict[str, list[str]]:
    """Each source's offered images (every kind), and ``<source>:prepull`` its prepull set."""
    result: dict[str, list[str]] = {}
    for config in admin_get(local, "/images")["configs"]:
        result[config["name"]] = [
            i["reference"] for kind in config["images"].values() for i in kind
        ]
        result[f"{config['name']}:prepull"] = [i["reference"] for i in config["prepull"]]
    return result


@pytest.mark.slow
def test_only_validated_images_are_offered(stack: LocalStack, tmp_path: Path) -> None:
    def settled() -> dict[str, dict[str, Any]] | None:
        found = records(stack)
        states = {name: found.get(name, {}).get("state") for name in ("good", "broken")}
        unpullable = found.get("unpullable", {}).get("state")
        done = {"validated", "rejected"}
        return found if set(states.values()) <= done and unpullable in done else None

    found = wait_for(settled, timeout=90, interval=0.2)
    good, broken, unpullable = found["good"], found["broken"], found["unpullable"]
    assert good["state"] == "validated"
    assert [t["state"] for t in good["history"]][:4] == [
        "discovered",
        "pulling",
        "validating",
        "validated",
    ]
    assert good["validation"]["passed"] is True

    assert broken["state"] == "rejected"
    assert "exited with 1" in broken["validation"]["reason"]
    assert "missing module" in broken["validation"]["log_tail"]

    assert unpullable["state"] == "rejected"
    assert "cannot pull image" in unpullable["validation"]["reason"]

    lists = wait_for(lambda: (o := offered(stack))["good"] and o, timeout=30)
    good_image = f"{stack.registry.host}/lsstsqre/simple-lab:2.0"
    assert lists["good"] == lists["good:prepull"] == [good_image]
    assert lists["broken"] == lists["broken:prepull"] == []
    withheld = {c["name"]: c["withheld"] for c in admin_get(stack, "/images")["configs"]}
    assert [(i["tag"], i["state"]) for i in withheld["broken"]] == [("1.1", "rejected")]
    assert lists["unpullable"] == lists["unpullable:prepull"] == []
    assert lists["trusted"], "a trusted source's images are offered at once"
    assert any(r["state"] == "validated" for r in admin_get(stack, "/images/records"))
    # Naming a rejected image directly: refused, saying why.
    refused = requests.post(
        f"{stack.spawner_url}/spawner/v1/labs/rachel/spawn",
        headers={"Authorization": f"Bearer {stack.state()['tokens']['rachel']['token']}"},
        json={
            "options": {
                "image_list": f"{stack.registry.host}/lsstsqre/simple-lab:1.1",
                "size": "small",
            },
            "env": {},
        },
        allow_redirects=False,
        timeout=10,
    )
    assert refused.status_code == 422, refused.text
    assert "not validated (it was rejected: the command exited with 1" in refused.json()["message"]
    # No validation pod is left.
    assert not [
        p
        for p in stack.kube.store.list("pods")
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "image-validation"
    ]


@pytest.mark.slow
def test_an_administrator_approves_rejects_and_revalidates_by_hand(stack: LocalStack) -> None:
    found = wait_for(
        lambda: (
            (r := records(stack)).get("broken", {}).get("state") == "rejected"
            and r.get("good", {}).get("state") == "validated"
            and r
        ),
        timeout=90,
        interval=0.2,
    )
    broken, good = found["broken"]["digest"], found["good"]["digest"]
    base = "/images/records"
    assert admin_post(stack, f"{base}/{broken}/approve", {}).status_code == 422
    approved = admin_post(stack, f"{base}/{broken}/approve", {"reason": "the module is optional"})
    assert approved.status_code == 200, approved.text
    last = approved.json()["history"][-1]
    assert (last["state"], last["by"]) == ("validated", "admin-user")
    assert "the module is optional" in last["why"]
    wait_for(lambda: offered(stack)["broken"], timeout=10)

    rejected = admin_post(stack, f"{base}/{good}/reject", {"reason": "a known bad build"})
    assert rejected.status_code == 200, rejected.text
    wait_for(lambda: offered(stack)["good"] == [], timeout=10)

    again = admin_post(stack, f"{base}/{broken}/revalidate")
    assert again.status_code == 202, again.text
    assert again.json()["state"] == "discovered"
    # Tried again, it fails again, and is no longer offered.
    record = wait_for(
        lambda: (r := admin_get(stack, f"{base}/{broken}"))["state"] == "rejected" and r,
        timeout=60,
        interval=0.2,
    )
    states = [t["state"] for t in record["history"]]
    assert states[-4:] == ["discovered", "pulling", "validating", "rejected"]
    assert offered(stack)["broken"] == []
    assert admin_post(stack, f"{base}/sha256:{'0' * 64}/revalidate").status_code == 404
    # As the other test of this stack expects it.
    assert admin_post(stack, f"{base}/{good}/approve", {"reason": "tried again"}).ok


@pytest.mark.slow
def test_retention_keeps_the_newest_validated_builds_of_each_class(stack: LocalStack) -> None:
    def weeklies() -> list[dict[str, Any]] | None:
        mine = [r for r in admin_get(stack, "/images/records") if r["source"] == "weeklies"]
        busy = {"discovered", "pulling", "validating"}
        return mine if mine and not any(r["state"] in busy for r in mine) else None

    found = wait_for(weeklies, timeout=120, interval=0.3)
    weekly = [r for r in found if any(":w_" in ref for ref in r["references"])]
    kept = [r for r in weekly if r["state"] == "validated"]
    retired = [r for r in weekly if r["state"] == "retired"]
    assert len(kept) == 2 and retired, [(r["references"], r["state"]) for r in weekly]
    assert all(r["history"][-1]["by"] == "retention" for r in retired)
    newest = sorted(ref.rpartition(":")[2] for r in weekly for ref in r["references"])[-2:]
    shown = wait_for(
        lambda: (
            [ref.rpartition(":")[2] for ref in offered(stack)["weeklies"] if ":w_" in ref] or None
        ),
        timeout=10,
    )
    assert sorted(shown) == newest
    # A build its source no longer lists (its tag deleted) loses its record.
    gone = retired[0]
    for reference in gone["references"]:
        stack.registry.remove_tag("lsstsqre/sciplat-lab", reference.rpartition(":")[2])
    token = stack.state()["tokens"]["admin"]["token"]
    wait_for(
        lambda: (
            requests.get(
                f"{stack.spawner_url}/spawner/v1/images/records/{gone['digest']}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            ).status_code
            == 404
        ),
        timeout=30,
        interval=0.2,
    )


@pytest.fixture(scope="module")
def moving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack whose one source validates every build for a second, its recommended tag
    about to move."""
    block = {
        "name": "lab",
        "type": "rubin",
        "registry": "127.0.0.1:8192",
        "docker": {"repository": "lsstsqre/sciplat-lab"},
        "recommendedTag": "recommended",
        "numReleases": 0,
        "numWeeklies": 1,
        "numDailies": 0,
        "validation": {
            "command": ["python", "-c", "import time; time.sleep(1)"],
            "timeoutSeconds": 60,
        },
    }
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("moving"),
        real_labs=True,
        pull_seconds=0.1,
        config_overrides={"prepull": [block], "images": {"refreshSeconds": 1}},
    )
    local = LocalStack(options).start()
    yield local
    local.stop()


def catalog(local: LocalStack) -> dict[str, Any]:
    config: dict[str, Any] = admin_get(local, "/images")["configs"][0]
    return config


@pytest.mark.slow
def test_the_recommended_build_stays_until_its_successor_passes(moving: LocalStack) -> None:
    repository = "lsstsqre/sciplat-lab"
    old = f"{moving.registry.host}/{repository}:w_2024_42"
    first = wait_for(
        lambda: (c := catalog(moving))["recommended"] and c["recommended"]["reference"] == old,
        timeout=60,
        interval=0.2,
    )
    assert first
    # A new weekly is pushed and recommended: its digest is new, and not validated yet.
    moving.registry.add_tag(repository, "w_2024_50", f"{repository}:w_2024_50")
    moving.registry.add_tag(repository, "recommended", f"{repository}:w_2024_50")
    new = f"{moving.registry.host}/{repository}:w_2024_50"

    def pending() -> dict[str, Any] | None:
        config = catalog(moving)
        waiting = config["recommended_pending"]
        return config if waiting and waiting["reference"] == new else None

    during = wait_for(pending, timeout=30, interval=0.1)
    assert during["recommended"]["reference"] == old
    digest = during["recommended_pending"]["digest"]
    record = admin_get(moving, f"/images/records/{digest}")
    assert record["state"] in ("discovered", "pulling", "validating")
    # Once it passed, it is the recommended build.
    after = wait_for(
        lambda: (c := catalog(moving))["recommended"]["reference"] == new and c,
        timeout=60,
        interval=0.2,
    )
    assert after["recommended_pending"] is None
    assert admin_get(moving, f"/images/records/{digest}")["state"] == "validated"


@pytest.mark.slow
def test_an_administrator_may_run_an_image_that_is_not_validated(stack: LocalStack) -> None:
    wait_for(lambda: records(stack).get("broken", {}).get("state") == "rejected", timeout=90)
    rejected = f"{stack.registry.host}/lsstsqre/simple-lab:1.1"
    body = {
        "options": {"image": rejected, "size": "small", "unvalidated_image": True},
        "env": {},
    }
    url = f"{stack.spawner_url}/spawner/v1/labs/rachel/spawn"

    def spawn(token: str) -> requests.Response:
        return requests.post(
            url,
            headers={"Authorization": f"Bearer {token}"},
            json=body,
            allow_redirects=False,
            timeout=10,
        )

    refused = spawn(stack.state()["tokens"]["rachel"]["token"])
    assert refused.status_code == 403, refused.text
    assert "only administrators" in refused.json()["message"]
    admin_token = stack.gafaelfawr.issue_token(
        "rachel", ["exec:notebook", "admin:notebook"], token_type="notebook"
    )
    assert spawn(admin_token).status_code == 303
    lab = admin_get(stack, "/labs/rachel")
    assert lab["options"]["image"] == rejected
    assert lab["options"]["unvalidated_image"] is True
    deleted = requests.delete(
        f"{stack.spawner_url}/spawner/v1/labs/rachel",
        headers={"Authorization": f"Bearer {stack.state()['tokens']['admin']['token']}"},
        timeout=10,
    )
    assert deleted.status_code == 202
    wait_for(lambda: stack.kube.store.get("namespaces", None, "nublado-rachel") is None, 60)
