"""The cells of ``kubectl get`` tables, as kube-apiserver renders them, without a server: ages,
a pod's READY, STATUS and RESTARTS, nodes, services, events, jobs, selectors and the columns of
custom resources."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.kube.resources import PrinterColumn, ResourceType
from devstack.kube.tables import printer_for
from devstack.kube.tables.ages import human_duration
from devstack.kube.tables.builtin import EVENTS, JOBS, NODES, SERVICES
from devstack.kube.tables.columns import format_selector
from devstack.kube.tables.custom import custom_printer
from devstack.kube.tables.pods import PODS

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cells(printer: Any, obj: dict[str, Any]) -> list[Any]:
    row: list[Any] = printer.cells(obj, NOW.timestamp())
    return row


MINUTE, HOUR, DAY = 60, 3600, 86400


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (5 * MINUTE + 3, "5m3s"),
        (9 * MINUTE + 59, "9m59s"),
        (10 * MINUTE + 30, "10m"),
        (45 * MINUTE, "45m"),
        (3 * HOUR - 1, "179m"),
        (3 * HOUR + 5 * MINUTE, "3h5m"),
        (4 * HOUR, "4h"),
        (8 * HOUR + 59 * MINUTE, "8h"),
        (47 * HOUR, "47h"),
        (2 * DAY + 3 * HOUR, "2d3h"),
        (3 * DAY, "3d"),
        (7 * DAY + 23 * HOUR, "7d23h"),
        (8 * DAY, "8d"),
        (30 * DAY, "30d"),
        (729 * DAY, "729d"),
        (730 * DAY + 30 * DAY, "2y30d"),
        (3 * 365 * DAY, "3y"),
        (9 * 365 * DAY + 100 * DAY, "9y"),
        (-1.5, "0s"),  # a clock a little ahead counts as now
        (-2.5, "<invalid>"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


# -- pods -----------------------------------------------------------------------------------


def container(name: str = "lab", **status: Any) -> dict[str, Any]:
    return {"name": name, "image": f"{name}:1", "ready": False, "restartCount": 0, **status}


def running(name: str = "lab", ready: bool = True, **status: Any) -> dict[str, Any]:
    state = {"running": {"startedAt": ago(60)}}
    return container(name, ready=ready, started=True, state=state, **status)


def waiting(reason: str, name: str = "lab", **status: Any) -> dict[str, Any]:
    return container(name, state={"waiting": {"reason": reason}}, **status)


def terminated(name: str = "lab", **fields: Any) -> dict[str, Any]:
    return container(name, state={"terminated": {"finishedAt": ago(5), **fields}})


def pod(
    statuses: list[dict[str, Any]],
    *,
    phase: str = "Running",
    init: list[dict[str, Any]] | None = None,
    init_specs: list[dict[str, Any]] | None = None,
    containers: int | None = None,
    **status: Any,
) -> dict[str, Any]:
    count = containers if containers is not None else max(len(statuses), 1)
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}"} for i in range(count)]}
    if init_specs is not None:
        spec["initContainers"] = init_specs
    body: dict[str, Any] = {"phase": phase, "containerStatuses": statuses, **status}
    if init is not None:
        body["initContainerStatuses"] = init
    return {
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": ago(90)},
        "spec": spec,
        "status": body,
    }


def ready_status_restarts(obj: dict[str, Any]) -> tuple[str, str, str]:
    row = cells(PODS, obj)
    assert row[0] == "p"
    assert row[4] == "90s"
    return row[1], row[2], row[3]


INITIALIZED = {"type": "Initialized", "status": "True"}
READY = {"type": "Ready", "status": "True"}
TWO_INITS = [{"name": "first"}, {"name": "second"}]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod([running()]), ("1/1", "Running", "0")),
        (pod([], phase="Pending"), ("0/1", "Pending", "0")),
        (pod([waiting("ContainerCreating")], phase="Pending"), ("0/1", "ContainerCreating", "0")),
        (pod([waiting("ErrImagePull")], phase="Pending"), ("0/1", "ErrImagePull", "0")),
        (pod([running(), running("b", ready=False)]), ("1/2", "Running", "0")),
        (
            pod(
                [
                    waiting(
                        "CrashLoopBackOff",
                        restartCount=3,
                        lastState={"terminated": {"exitCode": 1, "finishedAt": ago(125)}},
                    )
                ]
            ),
            ("0/1", "CrashLoopBackOff", "3 (2m5s ago)"),
        ),
        # The latest end among all containers dates the restarts.
        (
            pod(
                [
                    running(restartCount=1, lastState={"terminated": {"finishedAt": ago(600)}}),
                    running("b", restartCount=2, lastState={"terminated": {"finishedAt": ago(30)}}),
                ]
            ),
            ("2/2", "Running", "3 (30s ago)"),
        ),
        (pod([running(restartCount=2)]), ("1/1", "Running", "2")),
        (
            pod([terminated(exitCode=0, reason="Completed")], phase="Succeeded"),
            ("0/1", "Completed", "0"),
        ),
        (pod([terminated(exitCode=1, reason="Error")], phase="Failed"), ("0/1", "Error", "0")),
        (pod([terminated(exitCode=3)], phase="Failed"), ("0/1", "ExitCode:3", "0")),
        (pod([terminated(exitCode=137, signal=9)], phase="Failed"), ("0/1", "Signal:9", "0")),
        (pod([], phase="Failed", reason="Evicted"), ("0/1", "Evicted", "0")),
        # One container done, another still running: the pod is running, or not ready.
        (
            pod([terminated(reason="Completed"), running("b")], conditions=[READY]),
            ("1/2", "Running", "0"),
        ),
        (pod([terminated(reason="Completed"), running("b")]), ("1/2", "NotReady", "0")),
        # Init containers: done ones are skipped, the first that is not decides.
        (
            pod(
                [waiting("PodInitializing")],
                phase="Pending",
                init_specs=TWO_INITS,
                init=[terminated("first", exitCode=0), running("second", ready=False)],
            ),
            ("0/1", "Init:1/2", "0"),
        ),
        (
            pod(
                [],
                phase="Pending",
                init_specs=TWO_INITS,
                init=[waiting("PodInitializing", "first"), waiting("PodInitializing", "second")],
            ),
            ("0/1", "Init:0/2", "0"),
        ),
        (
            pod(
                [],
                phase="Pending",
                init_specs=TWO_INITS[:1],
                init=[waiting("ImagePullBackOff", "first")],
            ),
            ("0/1", "Init:ImagePullBackOff", "0"),
        ),
        (
            pod(
                [],
                phase="Pending",
                init_specs=TWO_INITS[:1],
                init=[waiting("CrashLoopBackOff", "first", restartCount=4)],
            ),
            ("0/1", "Init:CrashLoopBackOff", "4"),
        ),
        (
            pod(
                [],
                phase="Failed",
                init_specs=TWO_INITS[:1],
                init=[terminated("first", exitCode=1, reason="Error")],
            ),
            ("0/1", "Init:Error", "0"),
        ),
        (
            pod(
                [],
                phase="Failed",
                init_specs=TWO_INITS[:1],
                init=[terminated("first", exitCode=2)],
            ),
            ("0/1", "Init:ExitCode:2", "0"),
        ),
        # A sidecar (an init container that always restarts) counts as a container once
        # started; its restarts are counted, the finished init containers' are not.
        (
            pod(
                [running()],
                init_specs=[{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always"}],
                init=[
                    terminated("setup", exitCode=0, reason="Completed"),
                    running("proxy", restartCount=1),
                ],
                conditions=[INITIALIZED, READY],
            ),
            ("2/2", "Running", "1"),
        ),
        (
            pod(
                [],
                phase="Pending",
                conditions=[
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
                ],
            ),
            ("0/1", "SchedulingGated", "0"),
        ),
    ],
)
def test_pod_ready_status_and_restarts(obj: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert ready_status_restarts(obj) == expected


def test_a_pod_being_deleted_is_terminating_unless_it_finished_or_its_node_was_lost() -> None:
    deleting = pod([running()])
    deleting["metadata"]["deletionTimestamp"] = ago(1)
    assert ready_status_restarts(deleting)[1] == "Terminating"

    finished = pod([terminated(exitCode=0, reason="Completed")], phase="Succeeded")
    finished["metadata"]["deletionTimestamp"] = ago(1)
    assert ready_status_restarts(finished)[1] == "Completed"

    lost = pod([running()], reason="NodeLost")
    lost["metadata"]["deletionTimestamp"] = ago(1)
    assert ready_status_restarts(lost)[1] == "Unknown"


def test_pod_wide_cells_and_row_conditions() -> None:
    obj = pod(
        [running()],
        podIP="10.244.0.5",
        podIPs=[{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
        nominatedNodeName="node-2",
        conditions=[{"type": "example.com/gate", "status": "True"}, READY],
    )
    obj["spec"]["nodeName"] = "node-1"
    obj["spec"]["readinessGates"] = [
        {"conditionType": "example.com/gate"},
        {"conditionType": "example.com/other"},
    ]
    assert cells(PODS, obj)[5:] == ["10.244.0.5", "node-1", "node-2", "1/2"]
    assert cells(PODS, pod([], phase="Pending"))[5:] == ["<none>", "<none>", "<none>", "<none>"]

    assert PODS.conditions is not None
    assert PODS.conditions(obj) == []
    done = pod([terminated(exitCode=0, reason="Completed")], phase="Succeeded")
    assert [(c["type"], c["status"], c["reason"]) for c in PODS.conditions(done)] == [
        ("Completed", "True", "Succeeded")
    ]


# -- other kinds ----------------------------------------------------------------------------


def node(conditions: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "node-1",
            "creationTimestamp": ago(3 * DAY + 2 * HOUR),
            "labels": {
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/": "",
                "kubernetes.io/role": "worker",
                "kubernetes.io/hostname": "node-1",
            },
        },
        "spec": spec,
        "status": {
            "conditions": conditions,
            "addresses": [
                {"type": "Hostname", "address": "node-1"},
                {"type": "InternalIP", "address": "10.0.0.1"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian"},
        },
    }


def test_node_cells() -> None:
    ready = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
    assert cells(NODES, node(ready)) == [
        "node-1",
        "Ready",
        "control-plane,worker",
        "3d2h",
        "v1.33.0",
        "10.0.0.1",
        "<none>",
        "Debian",
        "<unknown>",
        "<unknown>",
    ]
    cordoned = node([{"type": "Ready", "status": "False"}], unschedulable=True)
    assert cells(NODES, cordoned)[1] == "NotReady,SchedulingDisabled"
    assert cells(NODES, node([]))[1] == "Unknown"


def service(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "svc", "creationTimestamp": ago(45)},
        "spec": {"type": kind, **spec},
        "status": {"loadBalancer": {}},
    }


def test_service_cells() -> None:
    cluster_ip = service(
        "ClusterIP",
        clusterIPs=["10.96.0.10"],
        ports=[{"port": 8786, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        selector={"tier": "web", "app": "x"},
    )
    assert cells(SERVICES, cluster_ip) == [
        "svc",
        "ClusterIP",
        "10.96.0.10",
        "<none>",
        "8786/TCP,53/UDP",
        "45s",
        "app=x,tier=web",
    ]
    node_port = service("NodePort", ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}])
    assert cells(SERVICES, node_port)[2:5] == ["<none>", "<none>", "80:30080/TCP"]
    balancer = service("LoadBalancer", clusterIPs=["10.96.0.11"])
    assert cells(SERVICES, balancer)[3:5] == ["<pending>", "<none>"]
    balancer["status"]["loadBalancer"]["ingress"] = [{"ip": "192.0.2.9"}, {"hostname": "lb.x"}]
    assert cells(SERVICES, balancer)[3] == "192.0.2.9,lb.x"
    external = service("ExternalName", externalName="db.example.com")
    assert cells(SERVICES, external)[2:4] == ["<none>", "db.example.com"]
    assert cells(SERVICES, external)[6] == "<none>"


def test_event_cells() -> None:
    event = {
        "metadata": {"name": "lab.1a2b"},
        "involvedObject": {"kind": "Pod", "name": "lab", "fieldPath": "spec.containers{lab}"},
        "type": "Normal",
        "reason": "Pulled",
        "message": "Successfully pulled image\n",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": ago(300),
        "lastTimestamp": ago(20),
        "count": 4,
    }
    assert cells(EVENTS, event) == [
        "20s",
        "Normal",
        "Pulled",
        "pod/lab",
        "spec.containers{lab}",
        "kubelet, node-1",
        "Successfully pulled image",
        "5m",
        4,
        "lab.1a2b",
    ]
    # An events.k8s.io-style event: eventTime, a series, the reporting controller.
    recorded = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Namespace"},
        "eventTime": (NOW - timedelta(seconds=70)).isoformat(),
        "series": {"count": 7, "lastObservedTime": ago(3)},
        "reportingComponent": "kopf",
    }
    row = cells(EVENTS, recorded)
    assert (row[0], row[3], row[5], row[7], row[8]) == ("3s", "namespace", "kopf", "70s", 7)
    assert cells(EVENTS, {"metadata": {"name": "x"}, "involvedObject": {}})[0] == "<unknown>"
    assert cells(EVENTS, {"metadata": {"name": "x"}, "involvedObject": {}})[8] == 1


def job(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "run", "image": "job:1"}]}}
    return {
        "metadata": {"name": "j", "creationTimestamp": ago(400)},
        "spec": {"template": template, **spec},
        "status": status,
    }


def test_job_cells() -> None:
    started = {"startTime": ago(200)}
    assert cells(JOBS, job({"completions": 3}, {"succeeded": 1, **started})) == [
        "j",
        "Running",
        "1/3",
        "3m20s",
        "6m40s",
        "run",
        "job:1",
        "<none>",
    ]
    finished = {
        "succeeded": 1,
        "startTime": ago(200),
        "completionTime": ago(150),
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ],
    }
    assert cells(JOBS, job({}, finished))[1:4] == ["Complete", "1/1", "50s"]
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert cells(JOBS, job({"parallelism": 4}, failed))[1:4] == ["Failed", "0/1 of 4", ""]


def test_label_selectors_are_written_in_selector_syntax_by_key() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["db", "cache"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "Exists"},
        ],
    }
    assert format_selector(selector) == "app=web,!canary,env notin (dev),tier in (cache,db),zone"
    assert format_selector({}) == format_selector(None) == ""


# -- custom resources and the default ---------------------------------------------------------


def test_custom_resource_columns_render_by_type() -> None:
    resource = ResourceType(
        "widgets",
        "Widget",
        "example.com",
        "v1",
        namespaced=True,
        schema={"type": "object"},
        printer_columns=(
            PrinterColumn("Replicas", "integer", ".spec.replicas"),
            PrinterColumn("Ratio", "number", ".spec.ratio"),
            PrinterColumn("Paused", "boolean", ".spec.paused"),
            PrinterColumn("Phase", "string", ".status.phase", "Where it is."),
            PrinterColumn("Ports", "string", ".spec.ports"),
            PrinterColumn("First", "string", ".spec.ports[0].name", priority=1),
            PrinterColumn("Owner", "string", ".metadata.annotations['example.com/owner']"),
            PrinterColumn("Started", "date", ".status.startedAt"),
            PrinterColumn("Missing", "string", ".status.nothing.here"),
        ),
    )
    printer = printer_for(resource)
    definitions = [c.definition() for c in printer.columns]
    assert [d["name"] for d in definitions][:2] == ["Name", "Replicas"]
    assert definitions[0]["format"] == "name"
    assert definitions[4]["description"] == "Where it is."
    assert [d["priority"] for d in definitions][5:7] == [0, 1]
    obj = {
        "metadata": {"name": "w", "annotations": {"example.com/owner": "rachel"}},
        "spec": {
            "replicas": 3.0,
            "ratio": 2,
            "paused": False,
            "ports": [{"name": "http", "port": 80}],
        },
        "status": {"phase": "Ready", "startedAt": ago(65)},
    }
    assert cells(printer, obj) == [
        "w",
        3,
        2.0,
        False,
        "Ready",
        '[{"name":"http","port":80}]',
        "http",
        "rachel",
        "65s",
        None,
    ]
    # A value of another type than the column's is an empty cell; a string column writes
    # numbers out.
    odd = {"metadata": {"name": "w"}, "spec": {"replicas": "3", "paused": "no"}, "status": {}}
    odd["status"]["phase"] = 1.5
    odd["status"]["startedAt"] = "yesterday"
    row = cells(printer, odd)
    assert (row[1], row[3], row[4], row[8]) == (None, None, "1.5", "<invalid>")


def test_custom_resource_without_columns_shows_its_age_and_other_kinds_when_created() -> None:
    bare = ResourceType("gizmos", "Gizmo", "example.com", "v1", namespaced=True, schema={})
    printer = custom_printer(bare)
    assert [(c.name, c.type) for c in printer.columns] == [("Name", "string"), ("Age", "date")]
    created = {"metadata": {"name": "g", "creationTimestamp": ago(7 * HOUR)}}
    assert cells(printer, created) == ["g", "7h"]

    quota = ResourceType("resourcequotas", "ResourceQuota", "", "v1", namespaced=True)
    default = printer_for(quota)
    assert [(c.name, c.type) for c in default.columns] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    stamped = {"metadata": {"name": "q", "creationTimestamp": "2026-02-03T04:05:06+01:00"}}
    assert cells(default, stamped) == ["q", "2026-02-03T03:05:06Z"]
    assert cells(default, {"metadata": {"name": "q"}}) == ["q", "0001-01-01T00:00:00Z"]
