"""kubectl beyond ``get`` against the emulator, with the machine's kubectl: ``explain`` and a
client-side ``apply`` (both read the OpenAPI v3 the emulator publishes), ``describe`` (with
the object's events), ``logs`` (followed too) and ``auth can-i``.
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.emulator.conftest import Kubectl, WaitUntil, available_web_deployment, served_crd

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PROGRAMS = {"registry.test/proc": ImageProgram(entrypoint=(sys.executable, "-c"))}
"""Pods of this image run their args as a Python program, a real process."""


def _manifest(*objects: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objects)


def test_explain_a_built_in_kind_from_the_published_schemas(kubectl: Kubectl) -> None:
    output = kubectl("explain", "pod.spec.containers")
    assert output.startswith("KIND:       Pod\nVERSION:    v1\n")
    assert "FIELD: containers <[]Container>" in output
    assert "A single application container that you want to run within a pod." in output
    fields = {
        line.split("\t")[0].strip(): line.split("\t")[1]
        for line in output.splitlines()
        if "\t" in line
    }
    assert fields["name"] == "<string> -required-"
    assert fields["image"] == "<string>"
    assert fields["ports"] == "<[]ContainerPort>"
    assert fields["resources"] == "<ResourceRequirements>"

    output = kubectl("explain", "deployments.spec.strategy.rollingUpdate.maxSurge")
    assert output.startswith("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n")
    assert "FIELD: maxSurge <IntOrString>" in output


def test_explain_a_custom_resource_from_its_crd(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    extensions: kubernetes.client.ApiextensionsV1Api,
    wait_until: WaitUntil,
) -> None:
    result = kubectl.run("explain", "daskclusters")
    assert result.returncode != 0
    assert 'doesn\'t have a resource type "daskclusters"' in result.stderr

    served_crd(emulator, extensions, wait_until, "daskclusters")
    output = kubectl("explain", "daskclusters.spec.worker")
    assert output.startswith("GROUP:      kubernetes.dask.org\nKIND:       DaskCluster\n")
    assert "  replicas\t<integer>\n" in output
    assert "  spec\t<Object> -required-\n" in output
    # The fields every object has, described as for any kind.
    output = kubectl("explain", "daskclusters.metadata.name")
    assert "FIELD: name <string>" in output


def test_apply_creates_then_patches_what_changed(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "data": {"mode": "fast", "level": "2"},
    }
    labels = {"app": "web"}
    containers = [
        {
            "name": "web",
            "image": "nginx:1.27",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        },
        {"name": "sidecar", "image": "busybox:1.37"},
    ]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
        },
    }
    output = kubectl("apply", "-f", "-", stdin=_manifest(config, deployment))
    assert output.splitlines() == ["configmap/settings created", "deployment.apps/web created"]
    created = core_v1.read_namespaced_config_map("settings", namespace)
    assert json.loads(created.metadata.annotations[LAST_APPLIED])["data"] == config["data"]

    # A field another writer set survives: the patch carries only what the file changed.
    core_v1.patch_namespaced_config_map("settings", namespace, {"data": {"owner": "ops"}})
    config["data"] = {"mode": "safe"}
    containers[0] = {"name": "web", "image": "nginx:1.28", "env": [{"name": "A", "value": "1"}]}
    del containers[1]
    emulator.audit.clear()
    output = kubectl("apply", "-f", "-", stdin=_manifest(config, deployment))
    assert output.splitlines() == [
        "configmap/settings configured",
        "deployment.apps/web configured",
    ]
    assert [e.resource for e in emulator.audit.entries(verb="patch")] == [
        "configmaps",
        "deployments",
    ]
    assert core_v1.read_namespaced_config_map("settings", namespace).data == {
        "mode": "safe",
        "owner": "ops",
    }
    spec = apps_v1.read_namespaced_deployment("web", namespace).spec.template.spec
    assert [(c.name, c.image, [e.name for e in c.env]) for c in spec.containers] == [
        ("web", "nginx:1.28", ["A"])
    ]

    output = kubectl("apply", "-f", "-", stdin=_manifest(config, deployment))
    assert output.splitlines() == ["configmap/settings unchanged", "deployment.apps/web unchanged"]


def test_apply_refuses_an_unknown_field(kubectl: Kubectl, namespace: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "dta": {"mode": "fast"},
    }
    result = kubectl.run("apply", "-f", "-", stdin=_manifest(config))
    assert result.returncode != 0
    assert "dta" in result.stderr


def test_apply_a_custom_resource(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    served_crd(emulator, extensions, wait_until, "daskclusters")
    pod = {"containers": [{"name": "dask", "image": "ghcr.io/dask/dask:2026.8.0"}]}
    cluster = {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": {"name": "analysis", "namespace": namespace},
        "spec": {
            "worker": {"replicas": 1, "spec": pod},
            "scheduler": {"spec": pod, "service": {"ports": [{"name": "comm", "port": 8786}]}},
        },
    }
    assert kubectl("apply", "-f", "-", stdin=_manifest(cluster)).strip() == (
        "daskcluster.kubernetes.dask.org/analysis created"
    )
    cluster["spec"]["worker"]["replicas"] = 3
    assert kubectl("apply", "-f", "-", stdin=_manifest(cluster)).strip() == (
        "daskcluster.kubernetes.dask.org/analysis configured"
    )
    found = objects.get_namespaced_custom_object(
        "kubernetes.dask.org", "v1", namespace, "daskclusters", "analysis"
    )
    assert found["spec"]["worker"]["replicas"] == 3


@pytest.fixture
def node(emulator: KubernetesEmulator) -> str:
    emulator.cluster.add_node("node-1")
    return "node-1"


def _ready(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    statuses = core_v1.read_namespaced_pod(name, namespace).status.container_statuses or []
    return bool(statuses) and all(s.ready for s in statuses)


def _events(output: str) -> list[tuple[str, str, str, str]]:
    """The rows under ``Events:`` in describe's output as type, reason, source and message
    (their age left out)."""
    lines = output.split("Events:", 1)[1].strip().splitlines()[2:]
    rows = [line.split(maxsplit=4) for line in lines]
    return [(kind, reason, source, message) for kind, reason, _, source, message in rows]


def test_describe_shows_the_objects_own_events(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    for name in ("lab", "other"):
        pod = {
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "lab", "image": "lab:1"}]},
        }
        core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _ready(core_v1, namespace, "lab") and _ready(core_v1, namespace, "other"))

    output = kubectl("describe", "pod", "lab", "-n", namespace)
    assert "Status:       Running" in output
    events = _events(output)
    # describe asks for the events of this object alone (a field selector on involvedObject).
    assert events[0] == (
        "Normal",
        "Scheduled",
        "default-scheduler",
        f"Successfully assigned {namespace}/lab to {node}",
    )
    assert [reason for _, reason, _, _ in events] == [
        "Scheduled",
        "Pulling",
        "Pulled",
        "Created",
        "Started",
    ]
    assert not any("other" in message for _, _, _, message in events)

    available_web_deployment(apps_v1, namespace, wait_until, replicas=1)
    output = kubectl("describe", "deployment", "web", "-n", namespace)
    ((kind, reason, source, message),) = _events(output)
    assert (kind, reason, source) == ("Normal", "ScalingReplicaSet", "deployment-controller")
    assert message.startswith("Scaled up replica set web-") and message.endswith("from 0 to 1")

    output = kubectl("describe", "namespace", namespace)
    assert f"Name:         {namespace}\n" in output and "Status:       Active\n" in output


def _readline(stream: Any, timeout: float = 10.0) -> str:
    """One line of a running process's output, failing the test if none comes in time."""
    readable, _, _ = select.select([stream], [], [], timeout)
    assert readable, f"no output within {timeout} s"
    line: str = stream.readline()
    return line


@pytest.mark.cluster_settings(programs=PROGRAMS)
def test_logs_follow_a_running_container_until_it_ends(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
    tmp_path: Path,
) -> None:
    # The program prints, waits for the test to write to a pipe, prints again and ends.
    release = tmp_path / "release"
    os.mkfifo(release)
    code = (
        "import os\n"
        "print('started', flush=True)\n"
        "open(os.environ['RELEASE']).read()\n"
        "print('done', flush=True)\n"
    )
    container = {
        "name": "main",
        "image": "registry.test/proc:1",
        "args": [code],
        "env": [{"name": "RELEASE", "value": str(release)}],
    }
    pod = {
        "metadata": {"name": "job"},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _ready(core_v1, namespace, "job"), timeout=15)
    wait_until(lambda: kubectl("logs", "job", "-n", namespace) == "started\n", timeout=15)

    follower = kubectl.popen("logs", "-f", "job", "-n", namespace)
    try:
        assert _readline(follower.stdout) == "started\n"
        assert follower.poll() is None  # still following the running container
        with release.open("w") as pipe:
            pipe.write("go")
        rest, errors = follower.communicate(timeout=15)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert (rest, errors, follower.returncode) == ("done\n", "", 0)
    state = core_v1.read_namespaced_pod("job", namespace).status.container_statuses[0].state
    assert state.terminated is not None and state.terminated.exit_code == 0

    assert kubectl("logs", "job", "-n", namespace, "-c", "main", "--tail", "1") == "done\n"
    assert kubectl("logs", "pod/job", "-n", namespace, "--limit-bytes", "3") == "sta"
    previous = kubectl.run("logs", "job", "-n", namespace, "--previous")
    assert previous.returncode != 0
    assert 'previous terminated container "main" in pod "job" not found' in previous.stderr
    # The output is kept as written, with no time per line to select or print by.
    for flag in ("--since=1m", "--timestamps"):
        untimed = kubectl.run("logs", "job", "-n", namespace, flag)
        assert untimed.returncode != 0 and "keeps no time for each line" in untimed.stderr


def _reader(
    core_v1: kubernetes.client.CoreV1Api, api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    """A ServiceAccount ``reader`` that a Role lets read pods and their logs, and no more."""
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods", "pods/log"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "reader-reads-pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-reader",
            },
        },
    )


def test_auth_can_i_answers_from_the_rbac_the_api_enforces(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    api_client: kubernetes.client.ApiClient,
    namespace: str,
) -> None:
    core_v1.create_namespace({"metadata": {"name": "elsewhere"}})
    _reader(core_v1, api_client, namespace)
    # The admin kubeconfig may do anything.
    assert kubectl("auth", "can-i", "create", "pods", "-n", namespace) == "yes\n"
    assert kubectl("auth", "can-i", "delete", "nodes") == "yes\n"

    token = kubectl("create", "token", "reader", "-n", namespace).strip()
    reader = kubectl.with_token(token)
    assert reader("auth", "can-i", "list", "pods", "-n", namespace) == "yes\n"
    assert (
        reader("auth", "can-i", "get", "pods", "--subresource", "log", "-n", namespace) == "yes\n"
    )
    for asked in (
        ("create", "pods", "-n", namespace),
        ("list", "pods", "-n", "elsewhere"),
        ("list", "secrets", "-n", namespace),
    ):
        answer = reader.run("auth", "can-i", *asked)
        assert (answer.stdout, answer.returncode) == ("no\n", 1), asked
    assert [e.code for e in emulator.audit.entries(resource="selfsubjectaccessreviews")] == [
        201
    ] * 7

    # What it said is what the API does with the same token.
    assert reader("get", "pods", "-n", namespace) == ""  # none yet, and no error
    denied = reader.run("get", "pods", "-n", "elsewhere")
    assert denied.returncode != 0
    assert (
        'pods is forbidden: User "system:serviceaccount:test:reader" cannot list resource "pods" '
        'in API group "" in the namespace "elsewhere"'
    ) in denied.stderr
    created = reader.run("run", "lab", "--image", "lab:1", "-n", namespace)
    assert created.returncode != 0 and "cannot create resource" in created.stderr

    rules = reader("auth", "can-i", "--list", "-n", namespace).splitlines()
    assert any(line.split()[:1] == ["pods"] and line.endswith("[get list watch]") for line in rules)
    assert not any(line.startswith("secrets") for line in rules)

    # A token the API did not issue, or whose ServiceAccount is gone, is refused.
    forged = kubectl.with_token(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    refused = "error: You must be logged in to the server"
    assert refused in forged.run("get", "pods", "-n", namespace).stderr
    core_v1.delete_namespaced_service_account("reader", namespace)
    assert refused in reader.run("auth", "can-i", "list", "pods", "-n", namespace).stderr
