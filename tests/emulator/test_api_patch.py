"""PATCH in its three flavours, and optimistic concurrency on replace."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest
from kubernetes.client import CoreV1Api

from devstack.kube import patching


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "lab", "tier": "user"}},
        "spec": {
            "containers": [
                {
                    "name": "lab",
                    "image": "lab:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 8888}],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "volumes": [{"name": "home", "emptyDir": {}}],
        },
    }


def test_json_patch(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("jp"))
    patched = core_v1.patch_namespaced_pod(
        "jp",
        namespace,
        [
            {"op": "replace", "path": "/metadata/labels/app", "value": "other"},
            {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
            {"op": "remove", "path": "/metadata/labels/tier"},
        ],
    )
    assert patched.metadata.labels == {"app": "other"}
    assert patched.metadata.annotations == {"k": "v"}


def test_json_patch_failed_test_op_is_rejected(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("jt"))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.patch_namespaced_pod(
            "jt", namespace, [{"op": "test", "path": "/metadata/labels/app", "value": "nope"}]
        )
    assert caught.value.status == 422


def test_merge_patch(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("mp"))
    patched = core_v1.patch_namespaced_pod(
        "mp",
        namespace,
        {
            "metadata": {"labels": {"tier": None, "new": "x"}},
            "spec": {"containers": [{"name": "only", "image": "o:1"}]},
        },
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.labels == {"app": "lab", "new": "x"}
    # merge patch replaces lists whole
    assert [c.name for c in patched.spec.containers] == ["only"]


def test_strategic_merge_patch_merges_named_lists(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("smp"))
    patched = core_v1.patch_namespaced_pod(
        "smp",
        namespace,
        {
            "metadata": {"labels": {"extra": "1"}},
            "spec": {
                "containers": [
                    {
                        "name": "lab",
                        "image": "lab:2",
                        "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                    },
                    {"name": "sidecar", "$patch": "delete"},
                ],
                "volumes": [{"name": "scratch", "emptyDir": {}}],
            },
        },
        _content_type="application/strategic-merge-patch+json",
    )
    assert patched.metadata.labels == {"app": "lab", "tier": "user", "extra": "1"}
    assert [c.name for c in patched.spec.containers] == ["lab"]
    lab = patched.spec.containers[0]
    assert lab.image == "lab:2"
    assert [(e.name, e.value) for e in lab.env] == [("A", "1"), ("B", "20"), ("C", "3")]
    assert lab.ports[0].container_port == 8888
    assert [v.name for v in patched.spec.volumes] == ["home", "scratch"]


def test_client_default_patch_type_for_dicts_is_strategic(
    core_v1: CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("default"))
    patched = core_v1.patch_namespaced_pod(
        "default", namespace, {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("lab", "lab:1"),
        ("sidecar", "side:2"),
    ]


def test_patch_result_is_validated(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("pv"))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.patch_namespaced_pod("pv", namespace, {"metadata": {"labels": {"bad key!": "x"}}})
    assert caught.value.status == 422


def test_patch_with_stale_resource_version_conflicts(core_v1: CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "rv"}})
    core_v1.patch_namespaced_config_map("rv", namespace, {"data": {"a": "1"}})
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.patch_namespaced_config_map(
            "rv",
            namespace,
            {
                "metadata": {"resourceVersion": created.metadata.resource_version},
                "data": {"a": "2"},
            },
            _content_type="application/merge-patch+json",
        )
    assert caught.value.status == 409


def test_replace_with_stale_resource_version_conflicts(core_v1: CoreV1Api, namespace: str) -> None:
    original = core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "cas"}, "data": {"v": "0"}}
    )
    fresh = core_v1.read_namespaced_config_map("cas", namespace)
    fresh.data = {"v": "1"}
    core_v1.replace_namespaced_config_map("cas", namespace, fresh)
    original.data = {"v": "2"}
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.replace_namespaced_config_map("cas", namespace, original)
    assert caught.value.status == 409
    status = caught.value.body
    assert '"reason":"Conflict"' in status
    assert core_v1.read_namespaced_config_map("cas", namespace).data == {"v": "1"}


def test_replace_without_resource_version_is_unconditional(
    core_v1: CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "force"}, "data": {"v": "0"}}
    )
    core_v1.patch_namespaced_config_map("force", namespace, {"data": {"v": "1"}})
    replaced = core_v1.replace_namespaced_config_map(
        "force", namespace, {"metadata": {"name": "force"}, "data": {"v": "2"}}
    )
    assert replaced.data == {"v": "2"}


def test_replace_name_mismatch_is_bad_request(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}})
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.replace_namespaced_config_map("one", namespace, {"metadata": {"name": "two"}})
    assert caught.value.status == 400


def test_strategic_merge_directives_unit() -> None:
    target = {
        "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]},
        "keep": {"a": 1, "b": 2},
    }
    patch = {
        "spec": {"ports": [{"port": 443, "$patch": "delete"}, {"port": 8080, "name": "alt"}]},
        "keep": {"$patch": "replace", "c": 3},
    }
    result = patching.apply_patch(patching.STRATEGIC_MERGE_PATCH, target, patch)
    assert result == {
        "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 8080, "name": "alt"}]},
        "keep": {"c": 3},
    }
    assert target["keep"] == {"a": 1, "b": 2}  # the input is not modified


def test_unknown_patch_type_is_415(emulator: Any, namespace: str, core_v1: CoreV1Api) -> None:
    import requests

    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "u"}})
    response = requests.patch(
        f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps/u",
        data="{}",
        headers={"Content-Type": "application/x-unknown"},
        timeout=5,
    )
    assert response.status_code == 415
