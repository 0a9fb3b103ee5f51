"""Each kind of cluster's adapter against its operator's CRD and simulated operator: the object
it builds is accepted as is, says what was asked, gets its head and workers, is found by the
adapter's head selector, and scales and takes hardware tiers through the adapter's patches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from app.workloads.cluster.adapters import (
    ADAPTERS,
    GPU_RESOURCE,
    OWNER_LABEL,
    TIER_LABEL,
    ClusterAdapter,
    ClusterShape,
    PodShape,
    resolve,
)
from devstack.kube import KubernetesEmulator
from devstack.kube.crds import DASK_CRDS, OPERATOR_CRDS, crd
from tests.labs.conftest import wait_for
from tests.support.dask_operator import dask_operator_for

NAMESPACE = "nublado-rachel"
GIB = 2**30


@pytest.fixture(scope="module")
def cluster_api(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[kubernetes.client.CustomObjectsApi, kubernetes.client.CoreV1Api]]:
    with KubernetesEmulator() as kube, dask_operator_for(kube, tmp_path_factory.mktemp("op")):
        kube.cluster.add_node("node-1")
        for plural in set(OPERATOR_CRDS) - set(DASK_CRDS):  # the operator's fixture has those
            kube.store.create("customresourcedefinitions", crd(plural))
        wait_for(lambda: all(kube.served.by_plural(p) for p in OPERATOR_CRDS))
        kube.store.create("namespaces", {"metadata": {"name": NAMESPACE}})
        client = kube.api_client()
        yield kubernetes.client.CustomObjectsApi(client), kubernetes.client.CoreV1Api(client)
        client.close()


def _shape(name: str) -> ClusterShape:
    return ClusterShape(
        name=name,
        namespace=NAMESPACE,
        owner="rachel",
        uid=1101,
        gid=1101,
        image="registry.test/lsstsqre/sciplat-lab:w_2024_42",
        workers=2,
        max_workers=5,
        worker=PodShape(cpu_request=1, cpu_limit=2, memory=4 * GIB, tier_id="small"),
        head=PodShape(cpu_request=0.5, cpu_limit=1, memory=2 * GIB, tier_id="small"),
    )


def _pods(core: kubernetes.client.CoreV1Api, selector: dict[str, str]) -> list[Any]:
    text = ",".join(f"{k}={v}" for k, v in selector.items())
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=text).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=list(ADAPTERS))
def test_a_built_cluster_runs_scales_and_takes_a_tier(
    adapter: ClusterAdapter,
    cluster_api: tuple[kubernetes.client.CustomObjectsApi, kubernetes.client.CoreV1Api],
) -> None:
    objects, core = cluster_api
    name = f"{adapter.route_name[:4]}-one"
    args = (adapter.group, adapter.version, NAMESPACE, adapter.plural)
    created = objects.create_namespaced_custom_object(*args, adapter.build(_shape(name)))
    assert (adapter.workers(created), adapter.max_workers(created)) == (2, 5)
    assert created["metadata"]["labels"][OWNER_LABEL] == "rachel"
    owned = {OWNER_LABEL: "rachel"}

    # The operator made the head the adapter finds, and the workers, all the owner's.
    wait_for(lambda: len(_pods(core, adapter.head_selector(name))) == 1)
    wait_for(lambda: len([p for p in _pods(core, owned) if name in p.metadata.name]) == 3)
    (head,) = _pods(core, adapter.head_selector(name))
    assert head.spec.security_context.run_as_user == 1101
    assert head.spec.containers[0].resources.limits["memory"] == str(2 * GIB)

    # A scale sets the count and nothing else; the operator follows.
    scaled = objects.patch_namespaced_custom_object(
        *args, name, adapter.scale_patch(4), _content_type="application/json-patch+json"
    )
    assert (adapter.workers(scaled), adapter.max_workers(scaled)) == (4, 5)
    wait_for(lambda: len([p for p in _pods(core, owned) if name in p.metadata.name]) == 5)

    # A tier reaches the workers' template: resources, GPUs, node pool and the tier's label.
    gpu = PodShape(
        cpu_request=4,
        cpu_limit=8,
        memory=32 * GIB,
        gpus=1,
        node_selector={"pool": "gpu"},
        tier_id="gpu",
    )
    tiered = objects.patch_namespaced_custom_object(
        *args,
        name,
        adapter.tier_patch(scaled, adapter.worker_template_path, gpu),
        _content_type="application/json-patch+json",
    )
    template = resolve(tiered, adapter.worker_template_path)
    container = template["spec"]["containers"][0]
    assert container["resources"]["limits"][GPU_RESOURCE] == "1"
    assert container["resources"]["requests"]["cpu"] == "4"
    assert template["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert template["metadata"]["labels"][TIER_LABEL] == "gpu"
    assert template["metadata"]["labels"][OWNER_LABEL] == "rachel"
    assert adapter.workers(tiered) == 4
    head_template = resolve(tiered, adapter.head_template_path)
    assert head_template["metadata"]["labels"][TIER_LABEL] == "small", "the head keeps its tier"


def test_each_adapter_says_where_clients_reach_its_cluster() -> None:
    assert ADAPTERS["daskclusters"].addresses("dk", "ns") == (
        "tcp://dk-scheduler.ns:8786",
        "http://dk-scheduler.ns:8787/status",
    )
    assert ADAPTERS["rayclusters"].addresses("rc", "ns")[0] == "ray://rc-head-svc.ns:10001"
    spark = ADAPTERS["sparkclusters"]
    assert (
        spark.plural == "sparkconnects"
        and spark.addresses("sc", "ns")[0] == "sc://sc-server.ns:15002"
    )


def test_resolve_follows_json_pointers_and_misses_softly() -> None:
    obj = {"spec": {"groups": [{"replicas": 3}], "a/b": {"~": 1}}}
    assert resolve(obj, "/spec/groups/0/replicas") == 3
    assert resolve(obj, "/spec/a~1b/~0") == 1
    assert resolve(obj, "/spec/groups/1/replicas") is None
    assert resolve(obj, "/spec/missing") is None


def test_a_clusters_usage_counts_its_workers_and_its_head() -> None:
    usage = _shape("u").usage()
    assert (usage.clusters, usage.workers, usage.gpus) == (1, 2, 0)
    assert usage.cpu == 2 * 1 + 0.5
    assert usage.memory == 2 * 4 * GIB + 2 * GIB
