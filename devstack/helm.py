"""Render a Helm chart with Helm's own template engine, from Python.

``make setup`` compiles ``devstack/helmrender`` (Go's text/template and sprig, from Debian's
packages, plus the objects and functions Helm adds) into ``.venv/bin/helm-render``. This module
runs it the way ``helm template`` would be run and parses the manifests it prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

RENDERER = Path(sys.executable).parent / "helm-render"
"""The renderer ``make setup`` builds, next to the virtualenv's Python."""


class HelmRenderError(Exception):
    """The chart did not render: a template error, ``required`` or ``fail``, invalid output.

    The message is the renderer's, as ``helm template`` would print it (``Error: ...``).
    """


def render_text(
    chart: Path,
    *,
    release: str = "lab-spawner",
    namespace: str = "nublado",
    values: dict[str, Any] | None = None,
    kube_version: str = "1.30",
) -> str:
    """Render ``chart`` (a chart directory) to the text ``helm template`` prints.

    ``values`` are given as a values file (``helm template -f``): they are merged over the
    chart's ``values.yaml``, maps key by key, and a ``None`` deletes the chart's default.
    ``kube_version`` is the cluster's Kubernetes version (``.Capabilities.KubeVersion``).
    Raises `HelmRenderError` when the chart does not render.
    """
    if not RENDERER.exists():
        raise HelmRenderError(f"{RENDERER} is missing: run `make setup`")
    with tempfile.TemporaryDirectory(prefix="helm-render-") as tmp:
        values_file = Path(tmp) / "values.yaml"
        values_file.write_text(
            json.dumps(values or {}, ensure_ascii=False), encoding="utf-8"
        )  # JSON is YAML
        command = [
            str(RENDERER),
            "--chart",
            str(chart),
            "--release",
            release,
            "--namespace",
            namespace,
            "--kube-version",
            kube_version,
            "--values",
            str(values_file),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        message = result.stderr.strip() or f"helm-render exited with status {result.returncode}"
        raise HelmRenderError(message)
    return result.stdout


def render_chart(
    chart: Path,
    *,
    release: str = "lab-spawner",
    namespace: str = "nublado",
    values: dict[str, Any] | None = None,
    kube_version: str = "1.30",
) -> list[dict[str, Any]]:
    """Render ``chart`` as `render_text` does and return its objects, in Helm's install order.

    Empty documents are dropped.
    """
    text = render_text(
        chart, release=release, namespace=namespace, values=values, kube_version=kube_version
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]
