"""A platform's worth of running labs, put straight into the emulator's store.

Scale questions (how long a reconcile of 10,000 labs takes, what a rebuild after Redis loss
costs) need a cluster holding what 10,000 spawns leave behind, but spawning them through the
API and letting the kubelet start each pod would take longer than the measurement and need
the cluster this machine does not have. So a population is *built*: for each user exactly the
objects a spawn creates, built by the service's own builders
(``app.workloads.lab.builders.build_lab``, as ``app.workloads.lab.spawn`` calls it), given the
defaults the API server would give them, with the pod already bound to a node, ``Running`` and
ready, and the Events the scheduler and kubelet would have written. Nothing runs: the kubelet
leaves a pod alone that is past ``Pending``, so the pods are records, not processes.

Objects go in through ``Store.load`` (one lock and no extra copies per batch, every change
still announced), so the simulated cluster and any open watch know them as if they had
been created, and a pod deleted later terminates as any other would.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.builders.pod import image_reference
from app.models.config import Config
from app.models.identity import Group, UserInfo
from app.models.images import LabImage
from app.models.lab import LabOptions, LabSpec
from app.workloads.lab.builders import LabObjects, build_lab
from app.workloads.lab.spawn import OPERATION_ANNOTATION
from devstack.kube.cluster import containers
from devstack.kube.cluster.images import image_id
from devstack.kube.cluster.nodes import internal_ip
from devstack.kube.cluster.podstatus import set_condition
from devstack.kube.cluster.serviceaccounts import default_service_account, root_ca_config_map

if TYPE_CHECKING:
    from devstack.kube.emulator import KubernetesEmulator

BATCH_LABS = 500
"""Labs stored per ``Store.load`` call: bounds the changes queued for announcement at once."""
SHARED_GROUP = Group("platform-users", 2999)
"""A group every user belongs to besides their own, as on a real platform."""
FIRST_SPAWN_EVERY = 10
"""One lab in this many is its user's first, so its pod carries the provisioning init
containers a first spawn gets (when the configuration has any)."""


@dataclass(frozen=True)
class Population:
    """What to build: ``labs`` users' running labs spread evenly over ``nodes`` nodes.

    ``images`` are the images labs run (taken in turn) and that nodes have cached: every
    node has all of them except one node in ``uncached_every``, which lacks the last one, so
    a prepuller finds a little to do, as it does on a live platform.
    """

    labs: int
    nodes: int = 500
    images: tuple[LabImage, ...] = ()
    username_format: str = "user{index:05d}"
    first_uid: int = 100_000
    uncached_every: int = 20
    node_prefix: str = "node-"
    size: str | None = None
    """The lab size every lab uses; None for the first configured size."""

    def username(self, index: int) -> str:
        return self.username_format.format(index=index)


@dataclass(frozen=True)
class PopulationReport:
    """What was stored and how long it took."""

    labs: int
    nodes: int
    objects: dict[str, int]
    seconds: float


def populate(kube: KubernetesEmulator, config: Config, population: Population) -> PopulationReport:
    """Store ``population`` in ``kube`` (started or not), with ``config`` as the service's
    configuration: the namespaces, names, labels, annotations and specs are the ones the
    service would make with it."""
    if not population.images:
        raise ValueError("a population needs at least one image for its labs to run")
    started = time.monotonic()
    counts: Counter[str] = Counter()
    nodes = _add_nodes(kube, population)
    counts["nodes"] = len(nodes)
    size = population.size or config.lab.sizes[0].name
    for first in range(0, population.labs, BATCH_LABS):
        batch: dict[str, list[dict[str, Any]]] = {}
        for index in range(first, min(first + BATCH_LABS, population.labs)):
            node, host_ip = nodes[index % len(nodes)]
            found = lab_objects(
                config, population, index, size, node, host_ip, kube.defaulter.on_create
            )
            for resource, obj in found:
                batch.setdefault(resource, []).append(obj)
        # A namespace's contents before the namespace: the namespace controller, told of a
        # new namespace, then finds its ServiceAccount there and adds nothing. Pods before
        # their Events.
        for resource in sorted(batch, key=_load_order):
            counts[resource] += kube.store.load(resource, batch[resource])
    return PopulationReport(
        labs=population.labs,
        nodes=len(nodes),
        objects=dict(counts),
        seconds=time.monotonic() - started,
    )


def _load_order(resource: str) -> int:
    order = ("namespaces", "pods", "events")
    return order.index(resource) + 1 if resource in order else 0


def _add_nodes(kube: KubernetesEmulator, population: Population) -> list[tuple[str, str]]:
    """Register the nodes as their kubelets would, with the population's images cached;
    each node's name and address."""
    references = [image_reference(image) for image in population.images]
    added = []
    for index in range(population.nodes):
        name = f"{population.node_prefix}{index:03d}"
        lacking = population.uncached_every > 0 and index % population.uncached_every == (
            population.uncached_every - 1
        )
        cached = references[:-1] if lacking and len(references) > 1 else references
        node = kube.cluster.add_node(name, images=cached)
        added.append((name, internal_ip(node)))
    return added


def lab_spec(config: Config, population: Population, index: int, size: str) -> LabSpec:
    """The spec of user ``index``'s lab, as a spawn request through JupyterHub gives it."""
    username = population.username(index)
    uid = population.first_uid + index
    image = population.images[index % len(population.images)]
    lab_size = config.lab.size(size)
    if lab_size is None:
        raise ValueError(f"size {size} is not configured")
    user = UserInfo(
        username=username,
        name=f"User {index}",
        email=f"{username}@example.org",
        uid=uid,
        gid=uid,
        groups=(Group(username, uid), SHARED_GROUP),
        notebook_quota=None,
    )
    prefix = f"/user/{username}/"
    env = {
        "JUPYTERHUB_API_TOKEN": _token(username),
        "JUPYTERHUB_CLIENT_ID": f"jupyterhub-user-{username}",
        "JUPYTERHUB_API_URL": "http://hub.nublado:8081/nb/hub/api",
        "JUPYTERHUB_ACTIVITY_URL": f"http://hub.nublado:8081/nb/hub/api/users/{username}/activity",
        "JUPYTERHUB_USER": username,
        "JUPYTERHUB_SERVER_NAME": "",
        "JUPYTERHUB_BASE_URL": "/nb/",
        "JUPYTERHUB_SERVICE_PREFIX": prefix,
        "JUPYTERHUB_SERVICE_URL": f"http://0.0.0.0:8888{prefix}",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": f"{prefix}oauth_callback",
        "JUPYTERHUB_OAUTH_SCOPES": f'["access:servers!server={username}/"]',
    }
    return LabSpec(
        user=user,
        options=LabOptions(image=image.reference, size=size),
        image=image,
        size=lab_size,
        env=env,
    )


def lab_objects(
    config: Config,
    population: Population,
    index: int,
    size: str,
    node: str,
    host_ip: str,
    defaults: Callable[[str, dict[str, Any]], None],
) -> list[tuple[str, dict[str, Any]]]:
    """``(resource, object)`` for everything user ``index``'s running lab consists of: what
    the spawn creates, what the namespace controller adds, and the Events of the pod's start.

    ``defaults`` fills in what the API server would on each create (before the pod is given
    its running status, as the kubelet writes it over the defaulted one).
    """
    spec = lab_spec(config, population, index, size)
    copied = {
        entry.secret_key: base64.b64encode(f"{entry.secret_key}-value".encode()).decode()
        for entry in config.lab.secrets
    }
    pull = {".dockerconfigjson": base64.b64encode(b'{"auths":{}}').decode()}
    objects = build_lab(
        spec,
        config,
        token=_token(spec.username),
        copied_secrets=copied,
        pull_secret_data=pull if config.lab.pull_secret else None,
        provision=bool(config.lab.init_containers) and index % FIRST_SPAWN_EVERY == 0,
    )
    namespace = objects.namespace["metadata"]["name"]
    objects.pod["metadata"].setdefault("annotations", {})[OPERATION_ANNOTATION] = str(
        uuid.UUID(int=index)
    )
    found = [(resource, body) for resource, body in objects.in_creation_order()]
    found.append(("serviceaccounts", default_service_account(namespace)))
    found.append(("configmaps", root_ca_config_map(namespace)))
    for resource, body in found:
        defaults(resource, body)
    _run(objects, node, host_ip, index)
    found.extend(("events", event) for event in _start_events(objects, node))
    return found


def _token(username: str) -> str:
    """A stand-in delegated token, stable per user."""
    return "gt-" + hashlib.sha256(username.encode()).hexdigest()[:40]


def _run(objects: LabObjects, node: str, host_ip: str, index: int) -> None:
    """Bind the pod to ``node`` and give it the status a kubelet writes once it is ready."""
    pod = objects.pod
    spec = pod.setdefault("spec", {})
    spec["nodeName"] = node
    pod_ip = f"10.{128 + index // 65536}.{index // 256 % 256}.{index % 256}"
    status: dict[str, Any] = {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": _now(),
        "qosClass": (pod.get("status") or {}).get("qosClass", "Burstable"),
    }
    inits = []
    for container in spec.get("initContainers") or []:
        state = containers.initial_status(container, "PodInitializing")
        state["imageID"] = _image_id(container)
        containers.set_running(state, containers.new_container_id(), ready=False)
        containers.set_terminated(state, 0)
        inits.append(state)
    if inits:
        status["initContainerStatuses"] = inits
    mains = []
    for container in spec.get("containers") or []:
        state = containers.initial_status(container, "ContainerCreating")
        state["imageID"] = _image_id(container)
        containers.set_running(state, containers.new_container_id(), ready=True)
        mains.append(state)
    status["containerStatuses"] = mains
    for condition in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
        set_condition(status, condition, True)
    set_condition(status, "PodScheduled", True)
    pod["status"] = status


def _image_id(container: dict[str, Any]) -> str:
    reference = str(container.get("image") or "")
    digest = reference.split("@", 1)[1] if "@" in reference else None
    return image_id(reference, digest)


def _start_events(objects: LabObjects, node: str) -> list[dict[str, Any]]:
    """The Events of the pod's start: scheduled, then each container's image found, created
    and started, from the scheduler and the node's kubelet."""
    pod = objects.pod
    spec = pod["spec"]
    base = time.time_ns()
    found = [_event(pod, "default-scheduler", "", "Scheduled", _scheduled(pod, node), "", base)]
    sequence = base + 1
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            path = f"spec.{kind}{{{container['name']}}}"
            image = container.get("image")
            for reason, message in (
                ("Pulled", f'Container image "{image}" already present on machine'),
                ("Created", f"Created container {container['name']}"),
                ("Started", f"Started container {container['name']}"),
            ):
                found.append(_event(pod, "kubelet", node, reason, message, path, sequence))
                sequence += 1
    return found


def _scheduled(pod: dict[str, Any], node: str) -> str:
    meta = pod["metadata"]
    return f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"


def _event(
    pod: dict[str, Any],
    component: str,
    host: str,
    reason: str,
    message: str,
    field_path: str,
    sequence: int,
) -> dict[str, Any]:
    """An Event about ``pod`` shaped as the emulator's recorder writes one; ``sequence``
    makes its name, unique in the namespace."""
    meta = pod["metadata"]
    now = _now()
    involved: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": meta["namespace"],
        "name": meta["name"],
    }
    if field_path:
        involved["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{sequence:x}",
            "namespace": meta["namespace"],
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": component, **({"host": host} if host else {})},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
