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


def admin_get(local: LocalStack, path: str) -> Any:
    token = local.state()["tokens"]["admin"]["token"]
    response = requests.get(
        f"{local.spawner_url}/spawner/v1{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


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
    assert [t["state"] for t in good["history"]] == [
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
    assert lists["unpullable"] == lists["unpullable:prepull"] == []
    assert lists["trusted"], "a trusted source's images are offered at once"
    assert any(r["state"] == "validated" for r in admin_get(stack, "/images/records"))
    # No validation pod is left.
    assert not [
        p
        for p in stack.kube.store.list("pods")
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "image-validation"
    ]
