"""The lab Pod ``nb-<user>-lab``.

Decisions, and why:

- ``restartPolicy: OnFailure`` (as JupyterHub's KubeSpawner does). A user who shuts the lab down
  from its menu makes the server exit 0: the pod then ends as Succeeded and JupyterHub sees the
  lab stopped, where ``Always`` would start it again behind the user's back. A crash (non-zero
  exit, OOM kill of the server) restarts the container in the same pod, with the same image,
  environment, volumes and ``/tmp``, so the restarted lab is in the state the user left; if it
  keeps failing the pod shows CrashLoopBackOff and the service reports it. ``Never`` would end a
  lab on any transient crash.
- The image is pinned as ``<reference>@<digest>`` when the digest is known, keeping the tag
  (``repo:tag@sha256:…``, which Kubernetes and the runtimes accept): the digest decides what
  runs, the tag tells a human which image it was. ``imagePullPolicy: IfNotPresent`` so prepulled
  images are used.
- Every container (lab and init) runs non-root with no privilege escalation, all capabilities
  dropped, and the runtime's default seccomp profile; no service account token; no service links.
- Provisioning init containers run only on a user's first spawn (``provision=True``), before the
  lab, in the configured order. One configured ``privileged: true`` runs as root (uid and gid 0,
  ``runAsNonRoot: false``) with the runtime's default capabilities, which is what creating and
  chowning a home directory needs; it is still not a Kubernetes ``privileged`` container (no host
  devices, no full capability set) and cannot escalate further. Others run as the user, locked
  down like the lab. Each gets the lab's resources, because the namespace's ResourceQuota makes
  Kubernetes reject containers without them, and an init container as large as the lab leaves
  the pod's effective size (and so the quota it needs) unchanged.
- The lab container is ready once its server accepts connections on the lab port (a TCP
  readiness probe, every second). "Running" then means JupyterHub can reach the lab, the Service
  sends nothing to a server not yet listening, and a server that dies before it ever listens
  is seen crash-looping, so the spawn fails fast with the reason instead of handing JupyterHub
  a URL that never answers. TCP rather than HTTP: the lab's paths depend on JupyterHub's base
  URL, which the service does not know.
- Environment: the lab container's comes from the env ConfigMap through ``envFrom``; ``env``
  holds only Secret references (``ACCESS_TOKEN`` and the configured copied secrets). Init
  containers get an allow-list and nothing else: ``USER``, ``UID``, ``GID`` and ``HOME``, which
  provisioning scripts take as arguments, and the variables their configuration names. They
  never read the env ConfigMap, which holds what the spawn request sent: a root container
  with the user's home mounted must not start under a request's ``GCONV_PATH`` or
  ``LD_PRELOAD``.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.env import init_container_env
from app.builders.metadata import object_meta
from app.builders.nss import require_ids
from app.builders.record import spec_annotation
from app.builders.resource_quota import container_resources
from app.builders.secret import secret_env
from app.builders.volumes import lab_mounts, lab_volumes, volume_mount
from app.models.config import Config, InitContainer, Toleration
from app.models.identity import UserInfo
from app.models.images import LabImage
from app.models.lab import LabSpec

RESTART_POLICY = "OnFailure"
PULL_POLICY = "IfNotPresent"
LAB_PORT_NAME = "lab"
READINESS_PROBE = {"tcpSocket": {"port": LAB_PORT_NAME}, "periodSeconds": 1, "timeoutSeconds": 1}
"""Ready once the server listens on the lab port (see above)."""


def image_reference(image: LabImage) -> str:
    """The image to run: ``<reference>@<digest>`` when the digest is known."""
    if image.digest is None or "@" in image.reference:
        return image.reference
    return f"{image.reference}@{image.digest}"


def supplemental_groups(user: UserInfo) -> list[int]:
    """Sorted gids of the user's groups, without the primary gid and groups lacking a gid."""
    _, gid = require_ids(user)
    return sorted({g.id for g in user.groups if g.id is not None and g.id != gid})


def user_pod_spec(user: UserInfo, restart_policy: str) -> dict[str, Any]:
    """The start of the spec of a pod that runs as ``user`` (a lab, a remote kernel): no
    service account token, no service links, the user's ids and groups, non-root, and the
    runtime's default seccomp profile."""
    uid, gid = require_ids(user)
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": restart_policy,
        "securityContext": {
            "runAsUser": uid,
            "runAsGroup": gid,
            "runAsNonRoot": True,
            "supplementalGroups": supplemental_groups(user),
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def user_security_context() -> dict[str, Any]:
    """The container securityContext of anything that runs as the user."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }


def root_security_context() -> dict[str, Any]:
    """The container securityContext of a ``privileged`` provisioning container (see above)."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
    }


def _env_from(spec: LabSpec) -> list[dict[str, Any]]:
    return [{"configMapRef": {"name": names.object_name(spec.username, names.ENV_SUFFIX)}}]


def _command(command: tuple[str, ...], args: tuple[str, ...]) -> dict[str, list[str]]:
    """``command``/``args`` only when configured, so the image's own entrypoint applies else."""
    result: dict[str, list[str]] = {}
    if command:
        result["command"] = list(command)
    if args:
        result["args"] = list(args)
    return result


def lab_container(spec: LabSpec, config: Config) -> dict[str, Any]:
    """The ``notebook`` container."""
    secret = names.object_name(spec.username)
    return {
        "name": names.LAB_CONTAINER,
        "image": image_reference(spec.image),
        "imagePullPolicy": PULL_POLICY,
        **_command(config.lab.command, config.lab.args),
        "envFrom": _env_from(spec),
        "env": [
            {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
            for variable, key in secret_env(spec, config)
        ],
        "ports": [{"containerPort": config.lab.port, "name": LAB_PORT_NAME, "protocol": "TCP"}],
        "readinessProbe": READINESS_PROBE,
        "resources": container_resources(spec.size),
        "securityContext": user_security_context(),
        "volumeMounts": lab_mounts(config),
    }


def init_container(container: InitContainer, spec: LabSpec, config: Config) -> dict[str, Any]:
    """A provisioning container, told whom to provision through its environment, and given
    nothing else of the lab's (see ``init_container_env``)."""
    env = init_container_env(container, spec)
    security = root_security_context() if container.privileged else user_security_context()
    return {
        "name": container.name,
        "image": container.image,
        "imagePullPolicy": PULL_POLICY,
        **_command(container.command, container.args),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": container_resources(spec.size),
        "securityContext": security,
        "volumeMounts": [volume_mount(m, config) for m in container.volume_mounts],
    }


def toleration_json(toleration: Toleration) -> dict[str, Any]:
    fields = {
        "key": toleration.key,
        "operator": toleration.operator,
        "value": toleration.value,
        "effect": toleration.effect,
        "tolerationSeconds": toleration.toleration_seconds,
    }
    return {k: v for k, v in fields.items() if v is not None}


def build_pod(spec: LabSpec, config: Config, namespace: str, *, provision: bool) -> dict[str, Any]:
    """Pod ``nb-<user>-lab``; init containers only when ``provision`` is true."""
    pod_spec = user_pod_spec(spec.user, RESTART_POLICY)
    if provision and config.lab.init_containers:
        pod_spec["initContainers"] = [
            init_container(c, spec, config) for c in config.lab.init_containers
        ]
    pod_spec["containers"] = [lab_container(spec, config)]
    pod_spec["volumes"] = lab_volumes(config, spec.username)
    if config.lab.pull_secret is not None:
        pull = names.object_name(spec.username, names.PULL_SECRET_SUFFIX)
        pod_spec["imagePullSecrets"] = [{"name": pull}]
    if config.lab.node_selector:
        pod_spec["nodeSelector"] = dict(sorted(config.lab.node_selector.items()))
    if config.lab.tolerations:
        pod_spec["tolerations"] = [toleration_json(t) for t in config.lab.tolerations]
    # object_meta's default component label ("lab") is what the Service selects on.
    metadata = object_meta(
        names.object_name(spec.username, names.LAB_SUFFIX),
        spec.username,
        namespace=namespace,
        annotations={names.SPEC_ANNOTATION: spec_annotation(spec)},
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
