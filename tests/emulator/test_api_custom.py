"""Custom resources through the real client: a CustomResourceDefinition is established, its
kind is served (discovery, CRUD, selectors, patches, watches, the status subresource) and
checked against its schema, and its objects go with their namespace and with the CRD."""

from __future__ import annotations

import json
import threading
from typing import Any

import kubernetes.client
import pytest
import requests
from kubernetes import watch
from kubernetes.client.rest import ApiException

from devstack.kube import KubernetesEmulator
from devstack.kube.crds import OPERATOR_CRDS, crd
from tests.emulator.conftest import WaitUntil

GROUP, VERSION, PLURAL = "example.test", "v1", "widgets"

WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                "size": {"type": "string", "enum": ["small", "large"], "default": "small"},
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "status": {
            "type": "object",
            "properties": {"ready": {"type": "integer"}, "phase": {"type": "string"}},
        },
    },
}


def _crd(plural: str = PLURAL, kind: str = "Widget", group: str = GROUP) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": ["wd"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": WIDGET_SCHEMA},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def _widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"image": "busybox", **spec},
    }


def _established(extensions: kubernetes.client.ApiextensionsV1Api, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


@pytest.fixture
def widgets(
    extensions: kubernetes.client.ApiextensionsV1Api, wait_until: WaitUntil, namespace: str
) -> str:
    """The Widget CRD, established; the namespace to make widgets in."""
    extensions.create_custom_resource_definition(_crd())
    wait_until(lambda: _established(extensions, f"{PLURAL}.{GROUP}"))
    return namespace


def _create(objects: kubernetes.client.CustomObjectsApi, ns: str, body: dict[str, Any]) -> Any:
    return objects.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def test_an_established_crd_is_served_and_discovered(
    widgets: str, api_client: kubernetes.client.ApiClient, emulator: KubernetesEmulator
) -> None:
    groups = kubernetes.client.ApisApi(api_client).get_api_versions()
    assert GROUP in [g.name for g in groups.groups]
    listed = requests.get(f"{emulator.url}/apis/{GROUP}/{VERSION}", timeout=5).json()
    names = {r["name"]: r for r in listed["resources"]}
    assert names[PLURAL]["kind"] == "Widget" and names[PLURAL]["shortNames"] == ["wd"]
    assert f"{PLURAL}/status" in names


def test_custom_objects_are_pruned_defaulted_and_validated(
    widgets: str, objects: kubernetes.client.CustomObjectsApi
) -> None:
    created = _create(
        objects,
        widgets,
        _widget(
            "w1",
            replicas=2,
            port="http",
            note=None,
            unknown="dropped",
            template={"kept": {"deep": True}},
            labels={"a": "b"},
        ),
    )
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    spec = created["spec"]
    assert "unknown" not in spec, "unknown fields are pruned"
    assert spec["size"] == "small", "defaults are filled in"
    assert spec["template"] == {"kept": {"deep": True}}
    assert spec["port"] == "http" and spec["note"] is None
    for bad, field in (
        (_widget("w2", replicas=-1), "spec.replicas"),
        (_widget("w3", size="huge"), "spec.size"),
        (_widget("w4", labels={"a": 1}), "spec.labels.a"),
        ({**_widget("w5"), "spec": {"replicas": 1}}, "spec"),
    ):
        with pytest.raises(ApiException) as raised:
            _create(objects, widgets, bad)
        assert raised.value.status == 422
        causes = json.loads(raised.value.body)["details"]["causes"]
        assert any(c["field"] == field for c in causes), causes
    strict = requests.post(
        f"{objects.api_client.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{widgets}/{PLURAL}",
        params={"fieldValidation": "Strict"},
        json=_widget("w6", extra=1),
        timeout=5,
    )
    assert strict.status_code == 422 and "spec.extra" in strict.text


def test_custom_objects_list_by_selector_replace_and_patch(
    widgets: str, objects: kubernetes.client.CustomObjectsApi
) -> None:
    _create(objects, widgets, _widget("a", replicas=1))
    other = _widget("b")
    other["metadata"]["labels"] = {"team": "b"}
    _create(objects, widgets, other)
    listed = objects.list_namespaced_custom_object(
        GROUP, VERSION, widgets, PLURAL, label_selector="team=a"
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    assert listed["kind"] == "WidgetList"
    everywhere = objects.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert len(everywhere["items"]) == 2

    current = objects.get_namespaced_custom_object(GROUP, VERSION, widgets, PLURAL, "a")
    current["spec"]["replicas"] = 3
    replaced = objects.replace_namespaced_custom_object(
        GROUP, VERSION, widgets, PLURAL, "a", current
    )
    assert replaced["spec"]["replicas"] == 3
    merged = objects.patch_namespaced_custom_object(
        GROUP, VERSION, widgets, PLURAL, "a", {"spec": {"replicas": 4}}
    )
    assert merged["spec"] == {**replaced["spec"], "replicas": 4}
    jsonpatched = objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        widgets,
        PLURAL,
        "a",
        [{"op": "replace", "path": "/spec/replicas", "value": 5}],
        _content_type="application/json-patch+json",
    )
    assert jsonpatched["spec"]["replicas"] == 5
    strategic = requests.patch(
        f"{objects.api_client.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{widgets}/{PLURAL}/a",
        data=json.dumps({"spec": {"labels": {"x": "y"}}}),
        headers={"Content-Type": "application/strategic-merge-patch+json"},
        timeout=5,
    ).json()
    assert strategic["spec"]["labels"] == {"x": "y"} and strategic["spec"]["replicas"] == 5
    with pytest.raises(ApiException) as invalid:
        objects.patch_namespaced_custom_object(
            GROUP, VERSION, widgets, PLURAL, "a", {"spec": {"replicas": 99}}
        )
    assert invalid.value.status == 422


def test_status_is_written_only_through_its_subresource(
    widgets: str, objects: kubernetes.client.CustomObjectsApi
) -> None:
    created = _create(objects, widgets, {**_widget("s"), "status": {"ready": 9}})
    assert "status" not in created, "status is not set on create"
    patched = objects.patch_namespaced_custom_object(
        GROUP, VERSION, widgets, PLURAL, "s", {"spec": {"replicas": 2}, "status": {"ready": 1}}
    )
    assert patched["spec"]["replicas"] == 2 and "status" not in patched
    status = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, widgets, PLURAL, "s", {"spec": {"replicas": 7}, "status": {"ready": 2}}
    )
    assert status["status"] == {"ready": 2} and status["spec"]["replicas"] == 2
    with pytest.raises(ApiException) as invalid:
        objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, widgets, PLURAL, "s", {"status": {"ready": "many"}}
        )
    assert invalid.value.status == 422


def test_a_watch_sees_custom_objects_change(
    widgets: str, objects: kubernetes.client.CustomObjectsApi, emulator: KubernetesEmulator
) -> None:
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            objects.list_namespaced_custom_object,
            GROUP,
            VERSION,
            widgets,
            PLURAL,
            timeout_seconds=10,
        ):
            seen.append((event["type"], event["object"]["kind"]))
            if event["type"] == "DELETED":
                stream.stop()
        done.set()

    thread = threading.Thread(target=follow)
    thread.start()
    while emulator.open_watches == 0:
        threading.Event().wait(0.01)
    _create(objects, widgets, _widget("watched"))
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, widgets, PLURAL, "watched", {"spec": {"replicas": 1}}
    )
    objects.delete_namespaced_custom_object(GROUP, VERSION, widgets, PLURAL, "watched")
    assert done.wait(10)
    thread.join()
    assert seen == [("ADDED", "Widget"), ("MODIFIED", "Widget"), ("DELETED", "Widget")]


def test_custom_objects_go_with_their_namespace_and_with_the_crd(
    widgets: str,
    objects: kubernetes.client.CustomObjectsApi,
    extensions: kubernetes.client.ApiextensionsV1Api,
    core_v1: kubernetes.client.CoreV1Api,
    emulator: KubernetesEmulator,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespace({"metadata": {"name": "other"}})
    _create(objects, "other", _widget("gone-with-ns"))
    _create(objects, widgets, _widget("gone-with-crd"))
    core_v1.delete_namespace("other")
    wait_until(lambda: emulator.store.get(PLURAL, "other", "gone-with-ns") is None)
    extensions.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    wait_until(lambda: emulator.store.get(PLURAL, widgets, "gone-with-crd") is None)

    def withdrawn() -> bool:
        try:
            objects.list_namespaced_custom_object(GROUP, VERSION, widgets, PLURAL)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(withdrawn)


def test_a_crd_whose_plural_is_taken_is_not_established(
    extensions: kubernetes.client.ApiextensionsV1Api, wait_until: WaitUntil
) -> None:
    extensions.create_custom_resource_definition(_crd(plural="pods", kind="Pod"))

    def refused() -> str | None:
        crd = extensions.read_custom_resource_definition(f"pods.{GROUP}")
        for condition in (crd.status.conditions if crd.status else None) or []:
            if condition.type == "NamesAccepted" and condition.status == "False":
                return str(condition.reason)
        return None

    assert wait_until(refused) == "PluralConflict"
    assert not _established(extensions, f"pods.{GROUP}")


@pytest.mark.parametrize("plural", OPERATOR_CRDS)
def test_the_operators_crds_are_valid_and_established(
    plural: str,
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    wait_until: WaitUntil,
    namespace: str,
) -> None:
    body = crd(plural)
    extensions.create_custom_resource_definition(body)
    wait_until(lambda: _established(extensions, body["metadata"]["name"]))
    group, version = body["spec"]["group"], body["spec"]["versions"][0]["name"]
    listed = objects.list_namespaced_custom_object(group, version, namespace, plural)
    assert listed["items"] == []
