"""Each kind's record is declared twice, as a dataclass (what the code passes around) and as
a schema (what Redis keeps, the routes serve and the OpenAPI document shows): the two have
the same fields, a record comes back from its text whole, and a record stored before the
schema was its text reads and is written again as the very same text (the engine's idle
writes and expectations compare texts)."""

from __future__ import annotations

import dataclasses
import json
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from marshmallow import Schema, fields

from app.models.usage import Usage
from app.models.workload import WorkloadStatus
from app.schemas.records import RecordText, UsageSchema
from app.workloads.app.models import AppPhase, AppRecord, AppScope
from app.workloads.app.records import APP_TEXT, CHOICES_TEXT
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import CLUSTER_TEXT
from app.workloads.image.models import ImageRecord, ImageState, Transition, ValidationResult
from app.workloads.image.records import IMAGE_TEXT
from app.workloads.kernel.models import KERNEL_PORTS, KernelRecord
from app.workloads.kernel.records import KERNEL_TEXT
from app.workloads.kernel.schemas import PortsSchema

CLUSTER = ClusterRecord(
    kind="daskclusters",
    name="dask-1a2b3c",
    namespace="nublado-rachel",
    owner="rachel",
    status=WorkloadStatus.RUNNING,
    workers=2,
    max_workers=4,
    worker_tier="small",
    head_tier="small",
    image="registry.test/lab:w_2024_40",
    usage={"clusters": 1, "workers": 2, "kernels": 0, "cpu": 3.0, "memory": 3 << 30, "gpus": 0},
    scheduler_address="tcp://10.0.0.1:8786",
    dashboard_url="http://10.0.0.1:8787",
)
KERNEL = KernelRecord(
    kernel_id="0b6c6a1e",
    owner="rachel",
    namespace="nublado-rachel",
    status=WorkloadStatus.EXITED,
    size="small",
    image="registry.test/lab:w_2024_40",
    created="2026-11-27T10:00:00Z",
    usage={"clusters": 0, "workers": 0, "kernels": 1, "cpu": 0.5, "memory": 1 << 30, "gpus": 0},
    ip="10.0.0.2",
    exit_code=137,
    error="OOMKilled",
)
APP = AppRecord(
    id="mlflow-x7k2p",
    group="g-science",
    template="mlflow",
    template_version="2.1.1",
    name="Our experiments",
    scope=AppScope.GROUP,
    size="small",
    env={"ARTIFACT_BUCKET": "s3://science"},
    stopped=False,
    created="2026-11-27T10:00:00Z",
    creator="rachel",
    phase=AppPhase.ERROR,
    message="cannot pull",
)
IMAGE = ImageRecord(
    digest="sha256:" + "0" * 64,
    source="main",
    references=["registry.test/lab:w_2024_40"],
    state=ImageState.REJECTED,
    history=[
        Transition(ImageState.DISCOVERED, "2026-11-27T10:00:00Z", "image refresher", "listed"),
        Transition(ImageState.REJECTED, "2026-11-27T10:01:00Z", "validation", "exit 1"),
    ],
    validation=ValidationResult(
        passed=False, nodes=["node-1"], seconds=12.5, reason="exit 1", exit_code=1, log_tail=["no"]
    ),
    status=WorkloadStatus.TERMINATING,
)

# Each record's text as the service stored it before its schema was its text: with
# ``dataclasses.asdict`` and ``json.dumps(sort_keys=True)``, compact for clusters and
# kernels, with JSON's default separators for apps and images.
STORED = {
    "cluster": (
        CLUSTER_TEXT,
        CLUSTER,
        '{"dashboard_url":"http://10.0.0.1:8787","error":null,"head_tier":"small",'
        '"image":"registry.test/lab:w_2024_40","kind":"daskclusters","max_workers":4,'
        '"name":"dask-1a2b3c","namespace":"nublado-rachel","owner":"rachel",'
        '"scheduler_address":"tcp://10.0.0.1:8786","status":"running","usage":{"clusters":1,'
        '"cpu":3.0,"gpus":0,"kernels":0,"memory":3221225472,"workers":2},'
        '"worker_tier":"small","workers":2}',
    ),
    "kernel": (
        KERNEL_TEXT,
        KERNEL,
        '{"created":"2026-11-27T10:00:00Z","error":"OOMKilled","exit_code":137,'
        '"image":"registry.test/lab:w_2024_40","ip":"10.0.0.2","kernel_id":"0b6c6a1e",'
        '"namespace":"nublado-rachel","owner":"rachel","ports":{"control":50004,"hb":50005,'
        '"iopub":50002,"shell":50001,"stdin":50003},"size":"small","status":"exited",'
        '"usage":{"clusters":0,"cpu":0.5,"gpus":0,"kernels":1,"memory":1073741824,"workers":0}}',
    ),
    "app": (
        APP_TEXT,
        APP,
        '{"created": "2026-11-27T10:00:00Z", "creator": "rachel", "env": {"ARTIFACT_BUCKET": '
        '"s3://science"}, "group": "g-science", "id": "mlflow-x7k2p", "message": "cannot pull", '
        '"name": "Our experiments", "phase": "Error", "scope": "group", "size": "small", '
        '"status": "running", "stopped": false, "template": "mlflow", "template_version": '
        '"2.1.1"}',
    ),
    "image": (
        IMAGE_TEXT,
        IMAGE,
        '{"digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000", '
        '"history": [{"at": "2026-11-27T10:00:00Z", "by": "image refresher", "state": '
        '"discovered", "why": "listed"}, {"at": "2026-11-27T10:01:00Z", "by": "validation", '
        '"state": "rejected", "why": "exit 1"}], "references": ["registry.test/lab:w_2024_40"], '
        '"source": "main", "state": "rejected", "status": "terminating", "validation": '
        '{"exit_code": 1, "log_tail": ["no"], "nodes": ["node-1"], "passed": false, "reason": '
        '"exit 1", "seconds": 12.5}}',
    ),
}


@pytest.mark.parametrize("kind", sorted(STORED))
def test_a_record_comes_back_from_its_text_whole(kind: str) -> None:
    text, record, _ = STORED[kind]
    assert text.parse(text.dump(record)) == record


@pytest.mark.parametrize("kind", sorted(STORED))
def test_a_record_stored_before_reads_and_is_written_as_the_same_text(kind: str) -> None:
    text, record, stored = STORED[kind]
    assert text.parse(stored) == record
    assert text.dump(text.parse(stored)) == stored


@pytest.mark.parametrize("kind", sorted(STORED))
def test_keys_the_schema_does_not_name_are_ignored(kind: str) -> None:
    text, record, stored = STORED[kind]
    assert text.parse(json.dumps({**json.loads(stored), "added_later": 1})) == record


@pytest.mark.parametrize("kind", sorted(STORED))
def test_a_text_that_is_not_a_record_is_a_value_error(kind: str) -> None:
    text, _, stored = STORED[kind]
    with pytest.raises(ValueError, match="status"):
        text.parse(json.dumps({**json.loads(stored), "status": "dreaming"}))
    with pytest.raises(ValueError):
        text.parse("not json")


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field's type holds (itself, in a list or optional), if any."""
    if get_origin(hint) in (list, Union, types.UnionType):
        found = [_dataclass_of(arg) for arg in get_args(hint)]
        return next((cls for cls in found if cls is not None), None)
    return hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None


def _nested_schema(field: fields.Field) -> Schema | None:
    inner = field.inner if isinstance(field, fields.List) else field
    return inner.schema if isinstance(inner, fields.Nested) else None


def _pairs(schema: Schema, record: type) -> list[tuple[Schema, type]]:
    """``schema`` and ``record``, and each nested schema with the dataclass its field holds."""
    hints = get_type_hints(record)
    pairs = [(schema, record)]
    for name, field in schema.fields.items():
        nested, inner = _nested_schema(field), _dataclass_of(hints.get(name))
        if nested is not None and inner is not None:
            pairs.extend(_pairs(nested, inner))
    return pairs


def _names(schema: Schema) -> set[str]:
    return {field.data_key or name for name, field in schema.fields.items()}


@pytest.mark.parametrize("text", [CLUSTER_TEXT, KERNEL_TEXT, APP_TEXT, IMAGE_TEXT])
def test_a_schema_has_exactly_its_records_fields(text: RecordText[Any]) -> None:
    for schema, record in _pairs(text.schema(), text.record):
        assert _names(schema) == {f.name for f in dataclasses.fields(record)}, record.__name__


def test_nested_records_are_checked_with_theirs() -> None:
    found = {record for _, record in _pairs(IMAGE_TEXT.schema(), ImageRecord)}
    assert found == {ImageRecord, Transition, ValidationResult}


def test_what_a_record_holds_and_a_kernels_ports_are_their_schemas_fields() -> None:
    assert _names(UsageSchema()) == {f.name for f in dataclasses.fields(Usage)}
    assert _names(PortsSchema()) == set(KERNEL_PORTS)


def test_an_apps_choices_leave_out_what_is_observed() -> None:
    terminating = dataclasses.replace(APP, status=WorkloadStatus.TERMINATING)
    chosen = json.loads(CHOICES_TEXT.dump(terminating))
    assert set(chosen) == {f.name for f in dataclasses.fields(AppRecord)} - {
        "phase",
        "message",
        "status",
    }
    assert chosen["scope"] == "group"
    tampered = json.dumps({**chosen, "status": "terminating", "phase": "Error"})
    assert CHOICES_TEXT.parse(tampered) == dataclasses.replace(
        APP, phase=AppPhase.STARTING, message=""
    )
