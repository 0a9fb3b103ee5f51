"""Images for tests that need the kubelet to pull (a pull that fails, say)."""

from __future__ import annotations

from labspawner import LabSpawnerClient

from devstack.kube.cluster.images import node_has_image
from devstack.stack import LocalStack
from tests.labs.conftest import wait_for


def unpulled_image(stack: LocalStack, admin: LabSpawnerClient) -> str:
    """An image users are offered that no node holds: in no prepull set (so the prepuller
    never pulls it) and pulled by no pod so far (earlier tests on the same stack may have
    spawned any other), so that a pod of it makes the kubelet pull it."""

    def find() -> str | None:
        nodes = stack.kube.store.list("nodes")
        for config in admin.images()["configs"]:
            prepulled = {image["digest"] for image in config["prepull"]}
            if not prepulled or None in prepulled:
                continue  # digests not resolved yet
            for kind, images in config["images"].items():
                for image in images:
                    if kind in ("alias", "unknown") or image["aliases"]:
                        continue
                    reference, digest = str(image["reference"]), image["digest"]
                    if not digest or digest in prepulled:
                        continue
                    if not any(node_has_image(n, reference, digest) for n in nodes):
                        return reference
        return None

    return str(wait_for(find, timeout=30))
