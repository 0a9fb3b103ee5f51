"""kubectl beyond ``get`` against the emulator, with the machine's kubectl: ``explain`` and a
client-side ``apply`` (both read the OpenAPI v3 the emulator publishes), ``describe`` (with
the object's events), ``logs`` (followed too) and ``auth can-i``.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest
import yaml

from devstack.kube import KubernetesEmulator
from devstack.kube.crds import crd
from tests.emulator.conftest import Kubectl, WaitUntil

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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

    extensions.create_custom_resource_definition(crd("daskclusters"))
    wait_until(lambda: emulator.served.by_plural("daskclusters"))
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
    extensions.create_custom_resource_definition(crd("daskclusters"))
    wait_until(lambda: emulator.served.by_plural("daskclusters"))
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
