"""The pods that try an image before anyone gets it.

One pod per node the validation needs, in the service's namespace, pinned to its node with
``nodeName`` (a node that has the image already when there is one), running the source's
validation command in the image under test. The image is pinned by digest, so that the build
tried is the build put into service, and pulled from its registry whatever the node holds.
The pod never restarts, and Kubernetes ends it at the validation's timeout
(``activeDeadlineSeconds``). It runs as nobody, with the size's resources.
"""

from __future__ import annotations

import math
from typing import Any

from app.builders import names
from app.builders.pod import toleration_json
from app.builders.resource_quota import pod_resources
from app.models.config import Config, ImageValidation
from app.models.sizes import PodSize

VALIDATION_COMPONENT = "image-validation"
VALIDATION_SELECTOR = (
    f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY},{names.COMPONENT_LABEL}={VALIDATION_COMPONENT}"
)
DIGEST_ANNOTATION = "lab-spawner.jupyter.org/image-digest"
OPERATION_ANNOTATION = "lab-spawner.jupyter.org/operation"
CONTAINER = "validate"
NOBODY = 65534


def digest_hex(digest: str) -> str:
    return digest.partition(":")[2] or digest


def validation_pod_name(digest: str, index: int) -> str:
    """``validate-<12 hex digits of the digest>-<index>``: fixed by the digest, so a resumed
    validation finds its pods, and two validations of one digest cannot both make one."""
    return f"validate-{digest_hex(digest)[:12]}-{index}"


def pinned(reference: str, digest: str) -> str:
    """``registry/repository@digest``: the build under test, whatever its tag points at now."""
    repository = reference.split("@", 1)[0]
    slash, colon = repository.rfind("/"), repository.rfind(":")
    if colon > slash:
        repository = repository[:colon]
    return f"{repository}@{digest}"


def build_validation_pod(
    config: Config,
    *,
    reference: str,
    digest: str,
    validation: ImageValidation,
    size: PodSize,
    node: str,
    index: int,
    operation_id: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "activeDeadlineSeconds": max(1, math.ceil(validation.timeout)),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY},
        "containers": [
            {
                "name": CONTAINER,
                "image": pinned(reference, digest),
                # From its registry even where a node has it: what is tried is that the
                # build can be pulled, as every node without it will, and then run.
                "imagePullPolicy": "Always",
                "command": list(validation.command),
                "resources": pod_resources(size),
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if config.lab.tolerations:
        spec["tolerations"] = [toleration_json(t) for t in config.lab.tolerations]
    if config.lab.pull_secret:
        spec["imagePullSecrets"] = [{"name": config.lab.pull_secret}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": validation_pod_name(digest, index),
            "namespace": config.kubernetes.service_namespace,
            "labels": {
                names.MANAGED_BY_LABEL: names.MANAGED_BY,
                names.COMPONENT_LABEL: VALIDATION_COMPONENT,
            },
            "annotations": {DIGEST_ANNOTATION: digest, OPERATION_ANNOTATION: operation_id},
        },
        "spec": spec,
    }
