"""Label and field selectors on lists (watches use the same predicates)."""

from __future__ import annotations

from decimal import Decimal

import kubernetes.client
import pytest
from kubernetes.client import CoreV1Api

from devstack.kube import selectors
from devstack.kube.quantities import QuantityError, parse_quantity

OBJECTS = {
    "a": {"env": "prod", "tier": "web"},
    "b": {"env": "dev", "tier": "web"},
    "c": {"env": "test"},
    "d": {},
}


@pytest.fixture
def labelled(core_v1: CoreV1Api, namespace: str) -> str:
    for name, labels in OBJECTS.items():
        core_v1.create_namespaced_config_map(
            namespace, {"metadata": {"name": name, "labels": {"sel": "1", **labels}}}
        )
    return namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a"]),
        ("env==prod", ["a"]),
        ("env!=prod", ["b", "c", "d"]),
        ("env in (prod, dev)", ["a", "b"]),
        ("env notin (prod,dev)", ["c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("tier=web,env=dev", ["b"]),
        ("env in (prod,test),!tier", ["c"]),
        ("", ["a", "b", "c", "d"]),
    ],
)
def test_label_selectors(
    core_v1: CoreV1Api, labelled: str, selector: str, expected: list[str]
) -> None:
    full = f"sel=1,{selector}" if selector else "sel=1"
    items = core_v1.list_namespaced_config_map(labelled, label_selector=full).items
    assert [i.metadata.name for i in items] == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", ["b"]),
        ("metadata.name==b", ["b"]),
        ("metadata.name!=b", ["a", "c", "d"]),
        ("metadata.namespace=test", ["a", "b", "c", "d"]),
        ("metadata.namespace=other", []),
        ("metadata.name!=a,metadata.name!=d", ["b", "c"]),
    ],
)
def test_field_selectors(
    core_v1: CoreV1Api, labelled: str, selector: str, expected: list[str]
) -> None:
    items = core_v1.list_namespaced_config_map(
        labelled, label_selector="sel=1", field_selector=selector
    ).items
    assert [i.metadata.name for i in items] == expected


def test_pod_field_selectors(core_v1: CoreV1Api, namespace: str) -> None:
    for name, node in (("on-n1", "n1"), ("on-n2", "n2")):
        body = {
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        }
        core_v1.create_namespaced_pod(namespace, body)
    core_v1.patch_namespaced_pod_status("on-n2", namespace, {"status": {"phase": "Failed"}})
    on_n1 = core_v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items
    assert [p.metadata.name for p in on_n1] == ["on-n1"]
    failed = core_v1.list_namespaced_pod(namespace, field_selector="status.phase=Failed").items
    assert [p.metadata.name for p in failed] == ["on-n2"]
    not_failed = core_v1.list_namespaced_pod(namespace, field_selector="status.phase!=Failed").items
    assert [p.metadata.name for p in not_failed] == ["on-n1"]


def test_malformed_selectors_are_400(core_v1: CoreV1Api, namespace: str) -> None:
    for kwargs in (
        {"label_selector": "a in b"},
        {"label_selector": "!a in (b)"},
        {"field_selector": "justaname"},
    ):
        with pytest.raises(kubernetes.client.ApiException) as caught:
            core_v1.list_namespaced_config_map(namespace, **kwargs)
        assert caught.value.status == 400


def test_selector_predicates_unit() -> None:
    obj = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"unschedulable": True}}
    assert selectors.parse_label_selector("a in (1,2)")(obj)
    assert not selectors.parse_label_selector("a notin (1)")(obj)
    assert selectors.parse_field_selector("spec.unschedulable=true")(obj)
    assert selectors.parse_field_selector("spec.nodeName=")(obj)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1Gi", Decimal(2**30)),
        ("2e3", Decimal(2000)),
        ("1.5", Decimal("1.5")),
        ("500Mi", Decimal(500 * 2**20)),
        ("3k", Decimal(3000)),
        ("1E", Decimal(10**18)),
        ("1E2", Decimal(100)),
        (".5", Decimal("0.5")),
    ],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "1 Gi", "1gi", "1KiB", "abc"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)
