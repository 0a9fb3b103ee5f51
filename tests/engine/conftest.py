"""A kind of workload declared in a test package (``tests.engine.notes``), run by the real
engine against Redis and the emulated cluster."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

from app.config import parse_config
from app.extensions import api_ext
from app.workloads.kinds import KINDS
from devstack.kube import KubernetesEmulator
from tests.engine.notes.kind import NAMESPACE, NoteKind
from tests.engine.notes.routes import notes
from tests.labs.conftest import admin_headers, lab_raw_config, new_user
from tests.support.rbac import RECORDER

__all__ = ["admin_headers", "lab_raw_config", "new_user"]

MakeNotesApp = Callable[..., Flask]


@pytest.fixture(autouse=True)
def not_the_services_calls() -> Iterator[None]:
    """The notes' calls (their ConfigMaps, listed and watched) are the test kind's, not
    the service's: the chart's grants are proven against the service's own."""
    RECORDER.uninstall()
    yield
    RECORDER.install()


@pytest.fixture
def notes_namespace(kube: KubernetesEmulator) -> str:
    if kube.store.get("namespaces", None, NAMESPACE) is None:
        kube.store.create("namespaces", {"metadata": {"name": NAMESPACE}})
    return NAMESPACE


@pytest.fixture
def notes_config(lab_raw_config: dict[str, Any], notes_namespace: str) -> dict[str, Any]:
    raw = copy.deepcopy(lab_raw_config)
    raw["watcher"] = {"leaseSeconds": 1, "watchSeconds": 2}
    return raw


@pytest.fixture
def notes_app(notes_config: dict[str, Any], make_app: Callable[..., Flask]) -> Callable[[], Flask]:
    """Build an app that runs the notes beside every kind of the service: one registration
    line for the kind, one for its routes."""

    def make() -> Flask:
        app = make_app(parse_config(notes_config), [*KINDS, NoteKind])
        api_ext.register_blueprint(app, notes)
        return app

    return make
