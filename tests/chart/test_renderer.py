"""helm-render: Helm's engine (text/template, sprig, Helm's objects and functions) and the output
of `helm template`, on a small fixture chart (tests/chart/fixtures/demo) and on charts written
by the tests themselves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devstack.helm import HelmRenderError, render_chart, render_text
from devstack.stack import REPO_ROOT

DEMO = REPO_ROOT / "tests" / "chart" / "fixtures" / "demo"
LABELS = {
    "app.kubernetes.io/name": "demo",
    "app.kubernetes.io/version": "4.5",
    "helm.sh/chart": "demo-1.2.3",
}


def _sources(text: str) -> list[str]:
    return re.findall(r"^# Source: (.+)$", text, flags=re.MULTILINE)


def _config_map(documents: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [d for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name]
    return found


def _chart(tmp_path: Path, templates: dict[str, str], values: str = "") -> Path:
    """A chart named "bad" with these templates."""
    chart = tmp_path / "bad"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: bad\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(values)
    for name, text in templates.items():
        (chart / "templates" / name).write_text(text)
    return chart


def test_output_is_helm_templates() -> None:
    text = render_text(DEMO, release="r1", namespace="space", kube_version="1.31.2")
    # One "# Source" per document, in Helm's install order (ServiceAccount, then ConfigMaps,
    # then the rest), files in path order within a kind, hooks last.
    assert _sources(text) == [
        "demo/templates/sub/files.yaml",
        "demo/templates/configmap.yaml",
        "demo/templates/sub/files.yaml",
        "demo/templates/hook.yaml",
    ]
    assert text.startswith(
        "---\n# Source: demo/templates/sub/files.yaml\n"
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: r1-demo\n---\n"
    )
    assert text.endswith('stringData:\n  generated: "82f3e9c6"\n')
    # secret.yaml rendered only whitespace; NOTES.txt is rendered but is not a manifest.
    assert "secret.yaml" not in text
    assert "Thank you" not in text
    # toYaml writes as Helm's (sigs.k8s.io/yaml): keys sorted, lists not indented under their key.
    assert "  nested: |\n    list:\n    - a\n    - b\n    map:\n      x: 1\n---\n" in text


def test_objects_builtins_and_functions() -> None:
    documents = render_chart(DEMO, release="r1", namespace="space", kube_version="1.31.2")
    assert documents == [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "r1-demo"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "r1-demo", "namespace": "space", "labels": LABELS},
            "data": {
                "greeting": "HELLO",
                "tpl": "hello from r1",
                "defaulted": "fallback",
                "missing": "",  # a missing value renders as nothing, not "<no value>"
                "kube": "1/31/v1.31.2",
                "hasAppsV1": "true",
                "hasDeploymentKind": "false",  # as helm template: group/versions only
                "lookup": "0",  # as helm template: no cluster, nothing found
                "template": "demo/templates/configmap.yaml",
                "replicas": "1e+06",  # Helm reads values' numbers as float64
                "motd": "welcome",
                "nested": "list:\n- a\n- b\nmap:\n  x: 1\n",
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "r1-demo-files"},
            # .Files.Glob "files/*.txt": not data.json, not ignored.txt (.helmignore)
            "data": {"motd.txt": "welcome\n", "other.txt": "second\n"},
        },
        # A hook (a Secret, which would come second were it not one), after the manifests.
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "r1-demo-init", "annotations": {"helm.sh/hook": "pre-install"}},
            "stringData": {"generated": "82f3e9c6"},  # "r1" | sha256sum | trunc 8
        },
    ]


def test_defaults() -> None:
    documents = render_chart(DEMO)
    config_map = _config_map(documents, "lab-spawner-demo")
    assert config_map["metadata"]["namespace"] == "nublado"
    assert config_map["data"]["kube"] == "1/30/v1.30.0"
    assert config_map["data"]["tpl"] == "hello from lab-spawner"


def test_values_override_deeply_and_null_deletes_a_default() -> None:
    values = {
        "greeting": "bye",
        "template": "{{ .Chart.Name }} {{ .Values.greeting }}",
        "nested": {"map": {"y": 2}, "list": None},
    }
    data = _config_map(render_chart(DEMO, values=values), "lab-spawner-demo")["data"]
    assert data["greeting"] == "BYE"
    assert data["tpl"] == "demo bye"
    # yaml.v2 (so Helm) quotes "y", a boolean in YAML 1.1.
    assert data["nested"] == 'map:\n  x: 1\n  "y": 2\n'


def test_required_fails_with_its_message() -> None:
    message = (
        "Error: execution error at (demo/templates/secret.yaml:5:11): "
        "secret.name is required when secret.create is true"
    )
    with pytest.raises(HelmRenderError, match=f"^{re.escape(message)}$"):
        render_chart(DEMO, values={"secret": {"create": True}})
    documents = render_chart(DEMO, values={"secret": {"create": True, "name": "s"}})
    assert [d["kind"] for d in documents] == [
        "ServiceAccount",
        "Secret",
        "ConfigMap",
        "ConfigMap",
        "Secret",
    ]
    assert documents[1] == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "labels": LABELS},
        "stringData": {"token": "bm9uZQ=="},  # "none" | b64enc
    }


def test_notes_are_rendered_so_their_errors_count() -> None:
    with pytest.raises(
        HelmRenderError,
        match=re.escape(
            "execution error at (demo/templates/NOTES.txt:1:34): NOTES.txt is rendered too"
        ),
    ):
        render_chart(DEMO, values={"notesMustFail": True})


def test_chart_kube_version_constraint() -> None:
    message = "chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.0"
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        render_chart(DEMO, kube_version="1.24")
    assert render_chart(DEMO, kube_version="1.25")


def test_release_name_is_validated() -> None:
    with pytest.raises(HelmRenderError, match='release name "Lab_Spawner": invalid release name'):
        render_chart(DEMO, release="Lab_Spawner")


def test_to_yaml_is_helms(tmp_path: Path) -> None:
    chart = _chart(tmp_path, {"cm.yaml": "{{ toYaml .Values }}\n"})
    values = {
        "kind": "ConfigMap",
        "z": [1, 2.5, "yes", None],
        "a": {"nothing": None, "sentence": "word " * 19 + "end", "empty": {}},
    }
    text = render_text(chart, values=values)
    assert text == (
        "---\n"
        "# Source: bad/templates/cm.yaml\n"
        "a:\n"
        "  empty: {}\n"
        "  nothing: null\n"
        # yaml.v2, under sigs.k8s.io/yaml, folds long strings at 80 columns.
        "  sentence: word word word word word word word word word word word word word word\n"
        "    word word word word word end\n"
        "kind: ConfigMap\n"
        "z:\n"
        "- 1\n"
        "- 2.5\n"
        '- "yes"\n'
        "- null\n"
    )


def test_template_errors(tmp_path: Path) -> None:
    chart = _chart(tmp_path / "parse", {"cm.yaml": "data: {{ .Values.x | nosuchfunc }}\n"})
    message = 'parse error at (bad/templates/cm.yaml:1): function "nosuchfunc" not defined'
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        render_text(chart)

    chart = _chart(tmp_path / "yaml", {"cm.yaml": "kind: ConfigMap\nmetadata: [unclosed\n"})
    with pytest.raises(
        HelmRenderError, match=re.escape("YAML parse error on bad/templates/cm.yaml")
    ):
        render_text(chart)

    templates = {
        "_helpers.tpl": '{{ define "bad.boom" }}{{ fail "boom in a partial" }}{{ end }}',
        "cm.yaml": 'kind: ConfigMap\nname: {{ include "bad.boom" . }}\n',
    }
    chart = _chart(tmp_path / "fail", templates)
    message = "execution error at (bad/templates/cm.yaml:2:9): boom in a partial"
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        render_text(chart)


def test_tpl_sees_defines_and_lookup_is_empty(tmp_path: Path) -> None:
    templates = {
        "_helpers.tpl": '{{ define "bad.name" }}named-{{ .Release.Name }}{{ end }}',
        "cm.yaml": (
            "kind: ConfigMap\n"
            "data:\n"
            "  fromTpl: {{ tpl .Values.text . | quote }}\n"
            '  found: {{ (lookup "v1" "ConfigMap" "ns" "x") | toJson | quote }}\n'
        ),
    }
    values = 'text: "{{ include \\"bad.name\\" . }}/{{ .Values.missing }}/{{ .Template.Name }}"\n'
    (document,) = render_chart(_chart(tmp_path, templates, values), release="r")
    assert document["data"] == {"fromTpl": "named-r//bad/templates/cm.yaml", "found": "{}"}
