"""helm-render: Helm's engine (text/template, sprig, Helm's own functions) on a small chart."""

from __future__ import annotations

import pytest
import yaml

from devstack.helm import HelmRenderError, render_chart, render_text
from devstack.stack import REPO_ROOT

DEMO = REPO_ROOT / "tests" / "chart" / "fixtures" / "demo"


def test_builtin_objects_functions_and_skipped_output() -> None:
    text = render_text(DEMO, release="r1", namespace="space", kube_version="1.31")
    assert text.startswith("---\n# Source: demo/templates/configmap.yaml\n")
    assert "optional.yaml" not in text  # rendered to nothing, so left out
    (config_map,) = render_chart(DEMO, release="r1", namespace="space", kube_version="1.31")
    assert config_map["metadata"] == {
        "name": "r1",
        "namespace": "space",
        "labels": {"chart": "demo-1.2.3", "app": "4.5"},
    }
    assert config_map["data"]["greeting"] == "HELLO"
    assert config_map["data"]["tpl"] == "hello from tpl"
    assert config_map["data"]["minor"] == "31"
    assert config_map["data"]["missing"] == ""  # Helm renders a missing value as empty
    assert config_map["data"]["lookup"] == "0"  # as `helm template`: nothing to look up
    assert config_map["data"]["template"] == "demo/templates/configmap.yaml"
    assert yaml.safe_load(config_map["data"]["nested"]) == {"list": ["a", "b"], "map": {"x": 1}}


def test_values_override_deeply() -> None:
    (config_map,) = render_chart(DEMO, values={"greeting": "bye", "nested": {"map": {"y": 2}}})
    assert config_map["data"]["greeting"] == "BYE"
    assert yaml.safe_load(config_map["data"]["nested"]) == {
        "list": ["a", "b"],
        "map": {"x": 1, "y": 2},
    }


def test_required_fails_with_its_message() -> None:
    with pytest.raises(HelmRenderError, match="secretName is required when render is false"):
        render_chart(DEMO, values={"render": False})
    documents = render_chart(DEMO, values={"render": False, "secretName": "s"})
    assert [d["kind"] for d in documents] == ["ConfigMap", "Secret"]
