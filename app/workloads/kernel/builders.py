"""A remote kernel's objects: its Secret, its pod, and the policy that lets only its lab in.

Decisions, and why:

- **The key is in the Secret only.** ``KERNEL_KEY`` reaches the container through a
  ``secretKeyRef``; the pod spec, the ConfigMaps, the records and the answers never hold
  it. The kernel's start-up (``labspawner.kernels.launch``) writes it to a file only the user
  can read and starts ipykernel without it in its environment.
- **Fixed ports on the pod's own address** (``KERNEL_PORTS`` in the kernel's models): each
  kernel has a pod and so an address of its own; ``POD_IP`` comes from the downward API. The
  container is ready once the heartbeat port accepts connections, as a lab is once its
  server listens.
- ``restartPolicy: Never``: a kernel's state is its process's memory, so a kernel that
  ended is reported as exited (with its exit code) and the Jupyter server decides to start
  another, as it does for a local kernel; Kubernetes restarting it would hand the notebook a
  different kernel behind its back.
- **Everything else is the lab's**: the user's uid, gid and groups, the same security
  context, the lab's environment ConfigMap, the configured volumes and the user's
  ``/etc/passwd`` and ``/etc/group`` (not the lab's Secret: a kernel gets only its key), the
  pull Secret, the lab's node selector and tolerations (and the tier's node pool).
- **Only the lab may connect.** The NetworkPolicy ``nb-<user>-kernels`` admits connections
  to the user's kernel pods from pods of the lab's own namespace only.
"""

from __future__ import annotations

import base64
from typing import Any

from app.builders import names
from app.builders.metadata import lab_object, object_meta
from app.builders.pod import (
    PULL_POLICY,
    toleration_json,
    user_pod_spec,
    user_security_context,
)
from app.builders.resource_quota import pod_resources
from app.builders.volumes import SECRET_VOLUME, lab_mounts, lab_volumes
from app.models.config import Config
from app.workloads.kernel.models import KERNEL_PORTS, KernelSpec

KERNEL_CONTAINER = "kernel"
KEY_ENV = "KERNEL_KEY"
KEY_SECRET_KEY = "key"  # noqa: S105 - a key name
COMMAND = ["python", "-m", "labspawner.kernels.launch"]
"""The kernel's start-up, from the lab image's installed client package."""
RESTART_POLICY = "Never"
SERVICE_ENV_PREFIX = "KERNEL_"
SERVICE_ENV = frozenset({"POD_IP"})
"""Variables the service sets on every kernel pod (besides the lab's platform ones): a
request's values for them are overridden."""


def _meta(spec: KernelSpec, namespace: str, name: str) -> dict[str, Any]:
    meta = object_meta(name, spec.username, namespace=namespace, component=names.KERNEL_COMPONENT)
    meta["labels"][names.KERNEL_LABEL] = spec.kernel_id
    return meta


def build_kernel_secret(spec: KernelSpec, namespace: str, *, key: str) -> dict[str, Any]:
    """Secret ``kernel-<id>``: the connection key, and nothing else."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(spec, namespace, names.kernel_name(spec.kernel_id)),
        "type": "Opaque",
        "data": {KEY_SECRET_KEY: base64.b64encode(key.encode()).decode()},
    }


def _env(spec: KernelSpec) -> list[dict[str, Any]]:
    secret = names.kernel_name(spec.kernel_id)
    env: list[dict[str, Any]] = [
        {"name": name, "value": value} for name, value in sorted(spec.env.items())
    ]
    env.append({"name": "KERNEL_ID", "value": spec.kernel_id})
    env.extend(
        {"name": f"KERNEL_{port.upper()}_PORT", "value": str(number)}
        for port, number in KERNEL_PORTS.items()
    )
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env.append(
        {"name": KEY_ENV, "valueFrom": {"secretKeyRef": {"name": secret, "key": KEY_SECRET_KEY}}}
    )
    return env


def build_kernel_pod(spec: KernelSpec, config: Config, namespace: str) -> dict[str, Any]:
    """Pod ``kernel-<id>``."""
    container = {
        "name": KERNEL_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": PULL_POLICY,
        "command": COMMAND,
        "envFrom": [{"configMapRef": {"name": names.object_name(spec.username, names.ENV_SUFFIX)}}],
        "env": _env(spec),
        "ports": [
            {"containerPort": number, "name": port, "protocol": "TCP"}
            for port, number in KERNEL_PORTS.items()
        ],
        "readinessProbe": {"tcpSocket": {"port": "hb"}, "periodSeconds": 1, "timeoutSeconds": 1},
        "resources": pod_resources(spec.size),
        "securityContext": user_security_context(),
        "volumeMounts": [m for m in lab_mounts(config) if m["name"] != SECRET_VOLUME],
    }
    pod_spec = user_pod_spec(spec.user, RESTART_POLICY)
    pod_spec.update(
        {
            "containers": [container],
            "volumes": [
                v for v in lab_volumes(config, spec.username) if v["name"] != SECRET_VOLUME
            ],
        }
    )
    if config.lab.pull_secret is not None:
        pull = names.object_name(spec.username, names.PULL_SECRET_SUFFIX)
        pod_spec["imagePullSecrets"] = [{"name": pull}]
    selector = {**config.lab.node_selector, **spec.size.node_selector}
    if selector:
        pod_spec["nodeSelector"] = dict(sorted(selector.items()))
    if config.lab.tolerations:
        pod_spec["tolerations"] = [toleration_json(t) for t in config.lab.tolerations]
    metadata = _meta(spec, namespace, names.kernel_name(spec.kernel_id))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def build_kernels_network_policy(
    username: str, config: Config, namespace: str
) -> dict[str, Any] | None:
    """NetworkPolicy ``nb-<user>-kernels``: only pods of the lab's namespace reach its
    kernels; None when ``lab.networkPolicy.enabled`` is false."""
    if not config.lab.network_policy.enabled:
        return None
    return {
        **lab_object(
            "NetworkPolicy",
            username,
            names.KERNELS_SUFFIX,
            namespace=namespace,
            api_version="networking.k8s.io/v1",
            component=names.KERNEL_COMPONENT,
        ),
        "spec": {
            "podSelector": {"matchLabels": {names.COMPONENT_LABEL: names.KERNEL_COMPONENT}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
    }
