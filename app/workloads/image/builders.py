"""The pod that pulls images onto one node for the prepuller.

One short-lived pod per node and batch of images, pinned with ``nodeName``, rather than a
DaemonSet per image: a pod goes only to a node that lacks images, its failure names the node,
the image and the reason, the number of pulls at once per node and in total is the
prepuller's to bound, and nothing is left running once the images are there. Each image of the
batch is a container (all but the last are init containers), so the kubelet pulls them one
after another, and one create and one delete serve a whole batch. ``nodeName`` bypasses the
scheduler, so a pull does not wait behind labs for room; its requests are tiny. Each container
runs ``/bin/true``: the pull is the point, and any lab image has it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.builders import names
from app.builders.pod import toleration_json
from app.models.config import Config

PREPULL_COMPONENT = "prepull"
PREPULL_SELECTOR = (
    f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY},{names.COMPONENT_LABEL}={PREPULL_COMPONENT}"
)
IMAGES_ANNOTATION = "lab-spawner.jupyter.org/prepull-images"
NODE_ANNOTATION = "lab-spawner.jupyter.org/prepull-node"
NOBODY = 65534


def pull_pod_name(images: list[str], node: str) -> str:
    """A name fixed by (images, node), so two leaders can never start the same pull twice
    (the second create is a 409) and a new leader recognises its predecessor's pulls."""
    digest = hashlib.sha256("\n".join([node, *images]).encode()).hexdigest()[:20]
    return f"prepull-{digest}"


def pull_container_name(index: int) -> str:
    return f"pull-{index}"


def _container(index: int, image: str) -> dict[str, Any]:
    return {
        "name": pull_container_name(index),
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


def build_pull_pod(images: list[str], node: str, config: Config) -> dict[str, Any]:
    """The pod pulling ``images`` (references, pinned by digest when known) onto ``node``,
    in order."""
    if not images:
        raise ValueError("a pull pod needs at least one image")
    containers = [_container(i, image) for i, image in enumerate(images)]
    pod_spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY},
        "containers": containers[-1:],
    }
    if len(containers) > 1:
        pod_spec["initContainers"] = containers[:-1]
    if config.lab.tolerations:
        pod_spec["tolerations"] = [toleration_json(t) for t in config.lab.tolerations]
    if config.lab.pull_secret:
        # The pull secret lives in the service's namespace, where these pods run.
        pod_spec["imagePullSecrets"] = [{"name": config.lab.pull_secret}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pull_pod_name(images, node),
            "namespace": config.kubernetes.service_namespace,
            "labels": {
                names.MANAGED_BY_LABEL: names.MANAGED_BY,
                names.COMPONENT_LABEL: PREPULL_COMPONENT,
            },
            "annotations": {IMAGES_ANNOTATION: json.dumps(images), NODE_ANNOTATION: node},
        },
        "spec": pod_spec,
    }


def pod_images(pod: dict[str, Any]) -> list[str]:
    """The images a pull pod pulls, in order (empty for a pod this code did not make)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        images = json.loads(annotations.get(IMAGES_ANNOTATION) or "[]")
    except ValueError:
        return []
    return [str(i) for i in images] if isinstance(images, list) else []
