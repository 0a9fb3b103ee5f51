"""The administrators' maintenance pod ("fsadmin") and its namespace.

An administrator repairs users' files with it (ownership, permissions, a full home) without
``kubectl`` access to nodes, so it is what no lab may be:

- **Root and privileged.** ``runAsUser: 0``, ``runAsNonRoot: false`` and a ``privileged``
  container: repairs must ignore every user's ownership and permissions. Its namespace carries
  ``pod-security.kubernetes.io/enforce: privileged`` so that a cluster enforcing Pod Security
  admits it there and nowhere else.
- **Every file system whole.** Each selected volume of ``lab.volumes`` (all of them unless
  ``admin.pod.volumes`` names some) is mounted at ``<mountPrefix>/<volume name>`` without a
  ``subPath``, writable unless the volume itself is read-only. The sources are the labs' own
  (``volumes.configured_volumes``), so the pod sees exactly what labs see. No NSS files, no
  Secret: the pod acts for nobody.
- **One run, not a service.** ``restartPolicy: Never``: a shell that exits is finished; starting
  it again is the administrator's decision, which replaces the finished pod.
- **Never taken for a lab.** Its labels carry the managed-by label (it is ours, and the chart's
  RBAC covers it) with component ``admin-pod`` and no user label: the lab watcher selects
  component ``lab`` pods, and the reconcile counts a namespace as a lab's only through its user
  label, so neither touches it.
- **Its mounts told to it.** ``MOUNT_PREFIX`` and one ``ADMIN_MOUNT_<VOLUME>`` per mount in the
  environment, so the image's start-up can list what it holds without parsing the pod (and the
  local stack, which runs the container as a process, can rewrite each path to its directory).
"""

from __future__ import annotations

import re
from typing import Any

from app.builders import names
from app.builders.pod import toleration_json
from app.builders.volumes import configured_volumes
from app.models.config import AdminPodConfig, Config, LabVolume
from app.quantities import format_cpu, format_memory

MOUNT_PREFIX_ENV = "MOUNT_PREFIX"
MOUNT_ENV_PREFIX = "ADMIN_MOUNT_"


def admin_labels() -> dict[str, str]:
    """Labels of the maintenance pod and its namespace."""
    return {
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.COMPONENT_LABEL: names.ADMIN_POD_COMPONENT,
    }


def selected_volumes(config: Config) -> list[LabVolume]:
    """The lab volumes the pod mounts, in ``lab.volumes`` order (the schema checked that every
    name in ``admin.pod.volumes`` is one of them)."""
    wanted = set(config.admin.pod.volumes)
    return [v for v in config.lab.volumes if not wanted or v.name in wanted]


def mount_path(pod: AdminPodConfig, volume_name: str) -> str:
    """Where a volume appears in the pod: ``<mountPrefix>/<volume name>``."""
    return f"{pod.mount_prefix.rstrip('/')}/{volume_name}"


def mount_env_name(volume_name: str) -> str:
    """``ADMIN_MOUNT_<NAME>``: the volume's name as an environment variable's name."""
    return MOUNT_ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", volume_name.upper())


def build_admin_namespace(config: Config) -> dict[str, Any]:
    """The namespace the pod runs in; the service creates it when missing and keeps it."""
    labels = {
        **admin_labels(),
        names.POD_SECURITY_LABEL: names.POD_SECURITY_PRIVILEGED,
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": config.admin.pod.namespace, "labels": labels},
    }


def build_admin_pod(config: Config) -> dict[str, Any]:
    """The maintenance pod; ``config.admin.pod.image`` must be set."""
    pod = config.admin.pod
    if not pod.image:
        raise ValueError("admin.pod.image is not set")
    volumes = selected_volumes(config)
    wanted = {v.name for v in volumes}
    resources = {"cpu": format_cpu(pod.cpu), "memory": format_memory(pod.memory)}
    env = [{"name": MOUNT_PREFIX_ENV, "value": pod.mount_prefix}]
    env.extend({"name": mount_env_name(v.name), "value": mount_path(pod, v.name)} for v in volumes)
    container: dict[str, Any] = {
        "name": names.ADMIN_POD_CONTAINER,
        "image": pod.image,
        "imagePullPolicy": "IfNotPresent",
        "env": env,
        "resources": {"limits": dict(resources), "requests": dict(resources)},
        "securityContext": {
            "privileged": True,
            "allowPrivilegeEscalation": True,
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
        },
        "volumeMounts": [
            {
                "name": v.name,
                "mountPath": mount_path(pod, v.name),
                **({"readOnly": True} if v.read_only else {}),
            }
            for v in volumes
        ],
    }
    if pod.command:
        container["command"] = list(pod.command)
    if pod.args:
        container["args"] = list(pod.args)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False},
        "containers": [container],
        "volumes": [v for v in configured_volumes(config) if v["name"] in wanted],
    }
    if pod.node_selector:
        spec["nodeSelector"] = dict(sorted(pod.node_selector.items()))
    if pod.tolerations:
        spec["tolerations"] = [toleration_json(t) for t in pod.tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": admin_labels()},
        "spec": spec,
    }
