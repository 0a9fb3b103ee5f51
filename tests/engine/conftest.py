"""A kind of workload declared in a test package (``tests.engine.notes``), run by the real
engine against Redis and the emulated cluster."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.config import parse_config
from app.extensions import api_ext
from app.extensions.labs import start_background, stop_background
from app.workloads.kinds import KINDS
from devstack.kube import KubernetesEmulator
from tests.conftest import await_complete_state
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
def notes_app(notes_config: dict[str, Any]) -> Iterator[MakeNotesApp]:
    """Build an app that runs the notes beside every kind of the service: one registration
    line for the kind, one for its routes."""
    apps: list[Flask] = []

    def make() -> Flask:
        app = create_app(parse_config(notes_config), kinds=[*KINDS, NoteKind])
        api_ext.register_blueprint(app, notes)
        apps.append(app)
        start_background(app)
        await_complete_state(app)
        return app

    yield make
    for app in apps:
        stop_background(app)
