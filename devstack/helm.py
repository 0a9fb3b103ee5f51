"""Render the Helm chart with Helm's own template engine, from Python.

``make setup`` compiles ``devstack/helmrender`` (Go's text/template plus sprig, from Debian's
packages, and the functions Helm adds) into ``.venv/bin/helm-render``; this runs it, as
``helm template`` would run, and parses the manifests.
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


class HelmRenderError(Exception):
    """The chart did not render (a template error, ``required`` or ``fail``)."""


def render_text(
    chart: Path,
    *,
    release: str = "lab-spawner",
    namespace: str = "nublado",
    values: dict[str, Any] | None = None,
    kube_version: str = "1.30",
) -> str:
    """The manifests as ``helm template`` prints them."""
    if not RENDERER.exists():
        raise HelmRenderError(f"{RENDERER} is missing: run `make setup`")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as values_file:
        json.dump(values or {}, values_file)  # JSON is YAML
        values_file.flush()
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
            values_file.name,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise HelmRenderError(result.stderr.strip())
    return result.stdout


def render_chart(
    chart: Path,
    *,
    release: str = "lab-spawner",
    namespace: str = "nublado",
    values: dict[str, Any] | None = None,
    kube_version: str = "1.30",
) -> list[dict[str, Any]]:
    """The rendered objects, parsed."""
    text = render_text(
        chart, release=release, namespace=namespace, values=values, kube_version=kube_version
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]
