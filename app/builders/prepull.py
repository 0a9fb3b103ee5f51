"""The pod that pulls one image onto one node for the prepuller.

One short-lived pod per (image, node), pinned with ``nodeName``, rather than a DaemonSet per
image: a pod goes only to the nodes that lack the image, its failure names the node and the
reason, the number of pulls at once per node and in total is the prepuller's to bound, and
nothing is left running once the image is there. ``nodeName`` bypasses the scheduler, so a
pull does not wait behind labs for room; its requests are tiny. The container runs
``/bin/true``: the pull is the point, and any lab image has it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from app.builders import names
from app.builders.pod import toleration_json
from app.config.models import Config

PREPULL_COMPONENT = "prepull"
PREPULL_SELECTOR = (
    f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY},{names.COMPONENT_LABEL}={PREPULL_COMPONENT}"
)
IMAGE_ANNOTATION = "lab-spawner.jupyter.org/prepull-image"
NODE_ANNOTATION = "lab-spawner.jupyter.org/prepull-node"
NOBODY = 65534


def pull_pod_name(image: str, node: str) -> str:
    """A name fixed by (image, node), so two leaders can never start the same pull twice
    (the second create is a 409) and a new leader recognises its predecessor's pulls."""
    digest = hashlib.sha256(f"{image}\n{node}".encode()).hexdigest()[:20]
    return f"prepull-{digest}"


def build_pull_pod(image: str, node: str, config: Config) -> dict[str, Any]:
    """The pod pulling ``image`` (a reference, pinned by digest when known) onto ``node``."""
    pod_spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY},
        "containers": [
            {
                "name": "prepull",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/true"],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if config.lab.tolerations:
        pod_spec["tolerations"] = [toleration_json(t) for t in config.lab.tolerations]
    if config.lab.pull_secret:
        # The pull secret lives in the service's namespace, where these pods run.
        pod_spec["imagePullSecrets"] = [{"name": config.lab.pull_secret}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pull_pod_name(image, node),
            "namespace": config.kubernetes.service_namespace,
            "labels": {
                names.MANAGED_BY_LABEL: names.MANAGED_BY,
                names.COMPONENT_LABEL: PREPULL_COMPONENT,
            },
            "annotations": {IMAGE_ANNOTATION: image, NODE_ANNOTATION: node},
        },
        "spec": pod_spec,
    }
