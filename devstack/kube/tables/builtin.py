"""The columns kube-apiserver prints for the built-in kinds the emulator serves.

Each printer gives the columns in the server's order, and cells as the server renders them:
ages from ``ages``, ``<none>`` where a real server writes it, integers where its column holds
numbers. A kind without a printer of its own gets the server's default, a name and a creation
time.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from .ages import age, human_duration, parse_time
from .columns import (
    AGE,
    CONTAINERS,
    IMAGES,
    NAME,
    SELECTOR,
    Column,
    JsonObject,
    Printer,
    field,
    format_labels,
    format_selector,
    format_selector_or_none,
    items,
    mapping,
    number,
    template_containers,
    text,
)
from .pods import PODS

_ROLE_PREFIX = "node-role.kubernetes.io/"
_ROLE_LABEL = "kubernetes.io/role"


def _name(obj: JsonObject) -> str:
    return text(obj, "metadata", "name")


def _age(obj: JsonObject, now: float) -> str:
    return age(field(obj, "metadata", "creationTimestamp"), now)


# -- nodes ----------------------------------------------------------------------------------


def _node_cells(node: JsonObject, now: float) -> list[Any]:
    conditions = {c.get("type"): c for c in items(node, "status", "conditions")}
    ready = conditions.get("Ready")
    states = [
        "Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"
    ]
    if field(node, "spec", "unschedulable") is True:
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in mapping(node, "metadata", "labels").items():
        if key.startswith(_ROLE_PREFIX) and len(key) > len(_ROLE_PREFIX):
            roles.add(key[len(_ROLE_PREFIX) :])
        elif key == _ROLE_LABEL and value:
            roles.add(str(value))
    info = mapping(node, "status", "nodeInfo")
    return [
        _name(node),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        text(info, "kubeletVersion"),
        _node_address(node, "InternalIP"),
        _node_address(node, "ExternalIP"),
        text(info, "osImage") or "<unknown>",
        text(info, "kernelVersion") or "<unknown>",
        text(info, "containerRuntimeVersion") or "<unknown>",
    ]


def _node_address(node: JsonObject, kind: str) -> str:
    for address in items(node, "status", "addresses"):
        if address.get("type") == kind:
            return text(address, "address")
    return "<none>"


NODES = Printer(
    (
        NAME,
        Column("Status", description="Whether the node is ready, and cordoned."),
        Column("Roles", description="The roles its node-role labels give it."),
        AGE,
        Column("Version", description="The kubelet's version."),
        Column("Internal-IP", priority=1, description="Its first internal address."),
        Column("External-IP", priority=1, description="Its first external address."),
        Column("OS-Image", priority=1, description="The operating system the kubelet reports."),
        Column("Kernel-Version", priority=1, description="The kernel the kubelet reports."),
        Column("Container-Runtime", priority=1, description="The container runtime and version."),
    ),
    _node_cells,
)

# -- namespaces -----------------------------------------------------------------------------

NAMESPACES = Printer(
    (NAME, Column("Status", description="Active, or Terminating."), AGE),
    lambda ns, now: [_name(ns), text(ns, "status", "phase"), _age(ns, now)],
)

# -- services -------------------------------------------------------------------------------


def _service_cells(service: JsonObject, now: float) -> list[Any]:
    spec = mapping(service, "spec")
    cluster_ips = items(spec, "clusterIPs") or (
        [spec["clusterIP"]] if spec.get("clusterIP") else []
    )
    ports = []
    for port in items(spec, "ports"):
        protocol = text(port, "protocol") or "TCP"
        node_port = number(port, "nodePort")
        middle = f":{node_port}" if node_port > 0 else ""
        ports.append(f"{number(port, 'port')}{middle}/{protocol}")
    return [
        _name(service),
        text(spec, "type"),
        str(cluster_ips[0]) if cluster_ips else "<none>",
        _external_address(service),
        ",".join(ports) or "<none>",
        _age(service, now),
        format_labels(mapping(spec, "selector")),
    ]


def _external_address(service: JsonObject) -> str:
    kind = text(service, "spec", "type")
    external = [str(a) for a in items(service, "spec", "externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        balancers = {
            text(entry, "ip") or text(entry, "hostname")
            for entry in items(service, "status", "loadBalancer", "ingress")
        }
        found = sorted(b for b in balancers if b) + external
        return ",".join(found) or "<pending>"
    if kind == "ExternalName":
        return text(service, "spec", "externalName")
    return "<unknown>"


SERVICES = Printer(
    (
        NAME,
        Column("Type", description="ClusterIP, NodePort, LoadBalancer or ExternalName."),
        Column("Cluster-IP", description="Its address in the cluster."),
        Column("External-IP", description="Where it is reached from outside the cluster."),
        Column("Port(s)", description="Its ports and protocols."),
        AGE,
        Column("Selector", priority=1, description="The labels of the pods it sends to."),
    ),
    _service_cells,
)

# -- events ---------------------------------------------------------------------------------


def _event_cells(event: JsonObject, now: float) -> list[Any]:
    first = (
        age(event["firstTimestamp"], now)
        if parse_time(event.get("firstTimestamp"))
        else age(event.get("eventTime"), now)
    )
    last = age(event["lastTimestamp"], now) if parse_time(event.get("lastTimestamp")) else first
    count = number(event, "count")
    series = event.get("series")
    if isinstance(series, dict):
        last = age(series.get("lastObservedTime"), now)
        count = number(series, "count")
    elif count == 0:
        count = 1  # an event recorded once has no count in events.k8s.io
    involved = mapping(event, "involvedObject")
    kind = text(involved, "kind").lower()
    target = f"{kind}/{text(involved, 'name')}" if text(involved, "name") else kind
    component = text(event, "source", "component") or text(event, "reportingComponent")
    host = text(event, "source", "host") or text(event, "reportingInstance")
    return [
        last,
        text(event, "type"),
        text(event, "reason"),
        target,
        text(involved, "fieldPath"),
        f"{component}, {host}" if host else component,
        text(event, "message").strip(),
        first,
        count,
        _name(event),
    ]


EVENTS = Printer(
    (
        Column("Last Seen", description="How long ago it was last seen."),
        Column("Type", description="Normal or Warning."),
        Column("Reason", description="Why it happened, in one word."),
        Column("Object", description="The object it is about."),
        Column("Subobject", priority=1, description="The part of that object, if any."),
        Column("Source", priority=1, description="The component that reported it."),
        Column("Message", description="What happened."),
        Column("First Seen", priority=1, description="How long ago it was first seen."),
        Column("Count", priority=1, description="How many times it was seen."),
        Column("Name", format="name", priority=1, description="The Event's own name."),
    ),
    _event_cells,
)

# -- workloads ------------------------------------------------------------------------------


def _deployment_cells(deployment: JsonObject, now: float) -> list[Any]:
    desired = number(deployment, "spec", "replicas", default=1)
    return [
        _name(deployment),
        f"{number(deployment, 'status', 'readyReplicas')}/{desired}",
        number(deployment, "status", "updatedReplicas"),
        number(deployment, "status", "availableReplicas"),
        _age(deployment, now),
        *template_containers(deployment),
        format_selector(field(deployment, "spec", "selector")),
    ]


DEPLOYMENTS = Printer(
    (
        NAME,
        Column("Ready", description="Ready pods out of those wanted."),
        Column("Up-to-date", description="Pods of the current template."),
        Column("Available", description="Pods available to serve."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ),
    _deployment_cells,
)


def _replica_set_cells(replica_set: JsonObject, now: float) -> list[Any]:
    return [
        _name(replica_set),
        number(replica_set, "spec", "replicas", default=1),
        number(replica_set, "status", "replicas"),
        number(replica_set, "status", "readyReplicas"),
        _age(replica_set, now),
        *template_containers(replica_set),
        format_selector_or_none(field(replica_set, "spec", "selector")),
    ]


REPLICA_SETS = Printer(
    (
        NAME,
        Column("Desired", "integer", "Pods wanted."),
        Column("Current", "integer", "Pods it has."),
        Column("Ready", "integer", "Pods ready."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ),
    _replica_set_cells,
)


def _daemon_set_cells(daemon_set: JsonObject, now: float) -> list[Any]:
    counts = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
    return [
        _name(daemon_set),
        *(number(daemon_set, "status", key) for key in counts),
        number(daemon_set, "status", "updatedNumberScheduled"),
        number(daemon_set, "status", "numberAvailable"),
        format_labels(mapping(daemon_set, "spec", "template", "spec", "nodeSelector")),
        _age(daemon_set, now),
        *template_containers(daemon_set),
        format_selector_or_none(field(daemon_set, "spec", "selector")),
    ]


DAEMON_SETS = Printer(
    (
        NAME,
        Column("Desired", "integer", "Nodes that should run its pod."),
        Column("Current", "integer", "Nodes that run it."),
        Column("Ready", "integer", "Nodes where it is ready."),
        Column("Up-to-date", "integer", "Nodes that run the current template."),
        Column("Available", "integer", "Nodes where it is available."),
        Column("Node Selector", description="The labels of the nodes it runs on."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ),
    _daemon_set_cells,
)


def _job_condition(job: JsonObject, kind: str) -> bool:
    found = next((c for c in items(job, "status", "conditions") if c.get("type") == kind), None)
    return found is not None and found.get("status") == "True"


def _job_cells(job: JsonObject, now: float) -> list[Any]:
    succeeded = number(job, "status", "succeeded")
    completions = field(job, "spec", "completions")
    parallelism = number(job, "spec", "parallelism")
    if isinstance(completions, int):
        done = f"{succeeded}/{completions}"
    elif parallelism > 1:
        done = f"{succeeded}/1 of {parallelism}"
    else:
        done = f"{succeeded}/1"
    started = parse_time(field(job, "status", "startTime"))
    finished = parse_time(field(job, "status", "completionTime"))
    duration = ""
    if started is not None:
        end = finished.timestamp() if finished is not None else now
        duration = human_duration(end - started.timestamp())
    if _job_condition(job, "Complete"):
        state = "Complete"
    elif _job_condition(job, "Failed"):
        state = "Failed"
    elif field(job, "metadata", "deletionTimestamp") is not None:
        state = "Terminating"
    elif _job_condition(job, "Suspended"):
        state = "Suspended"
    elif _job_condition(job, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    return [
        _name(job),
        state,
        done,
        duration,
        _age(job, now),
        *template_containers(job),
        format_selector_or_none(field(job, "spec", "selector")),
    ]


JOBS = Printer(
    (
        NAME,
        Column("Status", description="Running, Complete, Failed, Suspended or Terminating."),
        Column("Completions", description="Pods succeeded out of those needed."),
        Column("Duration", description="How long it ran, or has been running."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ),
    _job_cells,
)

# -- configuration --------------------------------------------------------------------------

CONFIG_MAPS = Printer(
    (NAME, Column("Data", description="How many keys it holds."), AGE),
    lambda cm, now: [
        _name(cm),
        len(mapping(cm, "data")) + len(mapping(cm, "binaryData")),
        _age(cm, now),
    ],
)

SECRETS = Printer(
    (
        NAME,
        Column("Type", description="The kind of secret it holds."),
        Column("Data", description="How many keys it holds."),
        AGE,
    ),
    lambda secret, now: [
        _name(secret),
        text(secret, "type"),
        len(mapping(secret, "data")),
        _age(secret, now),
    ],
)

SERVICE_ACCOUNTS = Printer(
    (NAME, Column("Secrets", description="How many Secrets it lists."), AGE),
    lambda account, now: [_name(account), len(items(account, "secrets")), _age(account, now)],
)

# -- everything else ------------------------------------------------------------------------


def _created_at(obj: JsonObject) -> str:
    """The creation time in UTC; a zero time (the year 1) without one, as the server has."""
    created = parse_time(field(obj, "metadata", "creationTimestamp"))
    if created is None:
        return "0001-01-01T00:00:00Z"
    return created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


DEFAULT = Printer(
    (NAME, Column("Created At", "date", "When the object was created.")),
    lambda obj, now: [_name(obj), _created_at(obj)],
)
"""The server's table for a kind without a printer of its own."""

BUILT_IN: dict[str, Printer] = {
    "pods": PODS,
    "nodes": NODES,
    "namespaces": NAMESPACES,
    "services": SERVICES,
    "events": EVENTS,
    "deployments": DEPLOYMENTS,
    "replicasets": REPLICA_SETS,
    "daemonsets": DAEMON_SETS,
    "jobs": JOBS,
    "configmaps": CONFIG_MAPS,
    "secrets": SECRETS,
    "serviceaccounts": SERVICE_ACCOUNTS,
}
"""Printers by plural; the other built-in kinds get :data:`DEFAULT`."""
