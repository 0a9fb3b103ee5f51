"""The chart's monitoring: the optional ServiceMonitor and the Grafana dashboard, whose
queries must name only metrics the service exports."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes_validate
import pytest
import redis
from prometheus_client import REGISTRY

from app.metrics import StateCollector
from tests.chart.test_chart import CHART, KUBE_VERSIONS, NAMESPACE, _one, _render

DASHBOARD = CHART / "dashboards" / "lab-spawner.json"
KINDS = ["app", "cluster", "image", "kernel", "lab"]

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def _exported_names(client: redis.Redis) -> set[str]:
    """Every sample name the service can export: the metrics defined in ``app.metrics``
    (imported with the service, so registered in this process) and the gauges read from
    Redis at scrape time (families yielded even when Redis holds nothing)."""
    families = [*REGISTRY.collect(), *StateCollector(client, "spawner:", KINDS).collect()]
    return {
        family.name + suffix
        for family in families
        if family.name.startswith("lab_spawner_")
        for suffix in _SUFFIXES[family.type]
    }


def _expressions(dashboard: dict[str, Any]) -> list[str]:
    return [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def test_off_by_default() -> None:
    documents = _render()
    assert not [d for d in documents if d["kind"] == "ServiceMonitor"]
    assert not [d for d in documents if d["metadata"]["name"].endswith("-dashboard")]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_service_monitor_scrapes_the_servers_port(kube_version: str) -> None:
    documents = _render(
        {
            "metrics": {
                "serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"team": "rsp"}}
            }
        },
        kube_version=kube_version[:4],
    )
    monitor = _one(documents, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["team"] == "rsp"
    # A custom resource: its metadata is checked as any object's, its spec by hand.
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": monitor["metadata"]},
        kube_version,
        strict=True,
    )
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert spec["endpoints"] == [
        {"port": port, "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
        for port in ("http", "runner")
    ]
    # It selects the server's Service, and no other.
    selected = [
        d
        for d in documents
        if d["kind"] == "Service"
        and spec["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()
    ]
    server = _one(documents, "Deployment", "lab-spawner")
    assert [s["metadata"]["name"] for s in selected] == ["lab-spawner"]
    (service,) = selected
    # Both containers' metrics: the web's and the runner's (operations, elected loops).
    assert [p["name"] for p in service["spec"]["ports"]] == ["http", "runner"]
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    ports = [
        [p["name"] for p in c["ports"]] for c in server["spec"]["template"]["spec"]["containers"]
    ]
    assert ports == [["http"], ["runner"]]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_dashboard_ships_as_a_configmap_for_grafanas_sidecar(kube_version: str) -> None:
    documents = _render({"metrics": {"dashboard": {"enabled": True}}}, kube_version[:4])
    configmap = _one(documents, "ConfigMap", "-dashboard")
    kubernetes_validate.validate(configmap, kube_version, strict=True)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(configmap["data"]["lab-spawner.json"])
    assert shipped == json.loads(DASHBOARD.read_text())


def test_dashboard_queries_name_only_exported_metrics(redis_client: redis.Redis) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lab-spawner"
    exported = _exported_names(redis_client)
    expressions = _expressions(dashboard)
    assert len(expressions) >= 20
    named = {name for expr in expressions for name in re.findall(r"\blab_spawner_\w+", expr)}
    assert named <= exported, named - exported
    # Every panel with queries shows something; every metric family appears on the board.
    families = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in exported}
    shown = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in named}
    assert families <= shown, families - shown


def test_every_exported_metric_is_documented(redis_client: redis.Redis) -> None:
    page = (CHART.parent / "docs" / "admin" / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(lab_spawner_\w+)` \|", page, flags=re.MULTILINE))
    families = {re.sub(r"_(bucket|count|sum)$", "", n) for n in _exported_names(redis_client)}
    assert documented == families
