"""The API server's own rules for Deployments, ReplicaSets and Jobs, beyond what the schemas
check.

A client that builds a Deployment whose selector misses its template's labels, or that later
changes the selector, gets a 422 from a real API server; the controllers could not tell their
pods apart otherwise. A Job's pods must not restart forever, and its selector is the one the
API server generated unless the Job asks to choose its own. These checks return causes in the
shape ``validation.py`` reports them, with the field paths and messages kube-apiserver uses.
"""

from __future__ import annotations

import json
import re
from typing import Any

from devstack.kube.defaults import CONTROLLER_UID_LABELS, JOB_NAME_LABELS
from devstack.kube.selectors import label_selector_matches

Cause = dict[str, str]

_PERCENT_RE = re.compile(r"^[0-9]+%$")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_JOB_COUNTS = (
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "ttlSecondsAfterFinished",
)


def _cause(field: str, reason: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


def _go_map(values: dict[str, Any] | None) -> str:
    """A label map the way the API server prints one in a message."""
    if values is None:
        return "map[string]string(nil)"
    inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(values.items()))
    return f"map[string]string{{{inner}}}"


def _go_selector(selector: dict[str, Any]) -> str:
    """A LabelSelector the way the API server prints one in a message."""
    expressions = selector.get("matchExpressions") or []
    if expressions:
        rendered = ", ".join(_go_requirement(e) for e in expressions)
        requirements = f"[]v1.LabelSelectorRequirement{{{rendered}}}"
    else:
        requirements = "[]v1.LabelSelectorRequirement(nil)"
    labels = _go_map(selector.get("matchLabels"))
    return f"v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{requirements}}}"


def _go_requirement(expression: dict[str, Any]) -> str:
    values = ", ".join(json.dumps(str(v)) for v in expression.get("values") or [])
    return (
        f'v1.LabelSelectorRequirement{{Key:"{expression.get("key")}", '
        f'Operator:"{expression.get("operator")}", Values:[]string{{{values}}}}}'
    )


def spec_causes(kind: str, spec: dict[str, Any]) -> list[Cause]:
    """What is wrong with a Deployment's or ReplicaSet's ``spec`` (empty when nothing)."""
    causes: list[Cause] = []
    causes.extend(_selector_causes(kind, spec))
    causes.extend(_count_causes(spec))
    template = spec.get("template") or {}
    template_spec = template.get("spec") or {}
    policy = template_spec.get("restartPolicy") or "Always"
    if policy != "Always":
        causes.append(
            _cause(
                "spec.template.spec.restartPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Always"',
            )
        )
    if template_spec.get("activeDeadlineSeconds") is not None:
        causes.append(
            _cause(
                "spec.template.spec.activeDeadlineSeconds",
                "FieldValueForbidden",
                f"Forbidden: activeDeadlineSeconds in {kind} is not Supported",
            )
        )
    if kind == "Deployment":
        causes.extend(_strategy_causes(spec.get("strategy") or {}))
    return causes


def job_causes(job: dict[str, Any]) -> list[Cause]:
    """What is wrong with a Job's ``spec`` (empty when nothing): a negative count, a template
    whose pods would restart forever, a selector missing its template's labels and, unless
    ``manualSelector`` is set, generated labels or a selector changed by hand."""
    spec = job.get("spec") or {}
    causes = _non_negative_causes(spec, _JOB_COUNTS)
    policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") or "Always"
    supported = '"OnFailure", "Never"'
    where = "spec.template.spec.restartPolicy"
    if policy == "Always":
        causes.append(
            _cause(where, "FieldValueRequired", f"Required value: valid values: {supported}")
        )
    elif policy not in ("OnFailure", "Never"):
        message = f'Unsupported value: "{policy}": supported values: {supported}'
        causes.append(_cause(where, "FieldValueNotSupported", message))
    if not spec.get("manualSelector"):
        causes.extend(_generated_selector_causes(job.get("metadata") or {}, spec))
    causes.extend(_selector_causes("Job", spec))
    return causes


def _generated_selector_causes(meta: dict[str, Any], spec: dict[str, Any]) -> list[Cause]:
    """The template must carry the labels the API server generated, with the Job's name and
    uid, and the selector must select them."""
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    expected = {key: str(meta.get("uid") or "") for key in CONTROLLER_UID_LABELS}
    expected.update({key: str(meta.get("name") or "") for key in JOB_NAME_LABELS})
    causes = []
    pairs = zip(CONTROLLER_UID_LABELS, JOB_NAME_LABELS, strict=True)  # unprefixed ones first
    for key in [key for pair in pairs for key in pair]:
        where = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            causes.append(_cause(where, "FieldValueRequired", f"Required value: {expected[key]}"))
        elif labels[key] != expected[key]:
            message = f"Invalid value: {_go_map(labels)}: must be '{expected[key]}'"
            causes.append(_cause(where, "FieldValueInvalid", message))
    selector = spec.get("selector") or {}
    if not label_selector_matches(selector, expected):
        message = f"Invalid value: {_go_selector(selector)}: `selector` not auto-generated"
        causes.append(_cause("spec.selector", "FieldValueInvalid", message))
    return causes


def update_causes(kind: str, new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """What an update may not change: a workload's selector, and a Job's pod template."""
    if kind not in ("Deployment", "ReplicaSet", "Job"):
        return []
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes = []
    selector = new_spec.get("selector") or {}
    if selector != (old_spec.get("selector") or {}):
        message = f"Invalid value: {_go_selector(selector)}: field is immutable"
        causes.append(_cause("spec.selector", "FieldValueInvalid", message))
    template = new_spec.get("template")
    if kind == "Job" and template != old_spec.get("template"):
        shown = json.dumps(template, sort_keys=True, separators=(",", ":"))
        message = f"Invalid value: {shown}: field is immutable"
        causes.append(_cause("spec.template", "FieldValueInvalid", message))
    return causes


def _selector_causes(kind: str, spec: dict[str, Any]) -> list[Cause]:
    selector = spec.get("selector") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        if kind != "Deployment":
            return [_cause("spec.selector", "FieldValueRequired", "Required value")]
        message = (
            f"Invalid value: {_go_selector(selector)}: empty selector is invalid for deployment"
        )
        return [_cause("spec.selector", "FieldValueInvalid", message)]
    causes = []
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        where = f"spec.selector.matchExpressions[{index}]"
        operator = expression.get("operator")
        values = expression.get("values") or []
        if operator not in _OPERATORS:
            causes.append(
                _cause(
                    f"{where}.operator",
                    "FieldValueInvalid",
                    f'Invalid value: "{operator}": not a valid selector operator',
                )
            )
        elif operator in ("In", "NotIn") and not values:
            causes.append(
                _cause(
                    f"{where}.values",
                    "FieldValueRequired",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
        elif operator in ("Exists", "DoesNotExist") and values:
            causes.append(
                _cause(
                    f"{where}.values",
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    if causes:
        return causes
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if not label_selector_matches(selector, labels or {}):
        causes.append(
            _cause(
                "spec.template.metadata.labels",
                "FieldValueInvalid",
                f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`",
            )
        )
    return causes


def _non_negative_causes(spec: dict[str, Any], fields: tuple[str, ...]) -> list[Cause]:
    causes = []
    for field in fields:
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            causes.append(
                _cause(
                    f"spec.{field}",
                    "FieldValueInvalid",
                    f"Invalid value: {value}: must be greater than or equal to 0",
                )
            )
    return causes


def _count_causes(spec: dict[str, Any]) -> list[Cause]:
    causes = _non_negative_causes(spec, ("replicas", "minReadySeconds", "revisionHistoryLimit"))
    deadline = spec.get("progressDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= int(spec.get("minReadySeconds") or 0):
        causes.append(
            _cause(
                "spec.progressDeadlineSeconds",
                "FieldValueInvalid",
                f"Invalid value: {deadline}: must be greater than minReadySeconds",
            )
        )
    return causes


def _strategy_causes(strategy: dict[str, Any]) -> list[Cause]:
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [
                _cause(
                    "spec.strategy.rollingUpdate",
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                )
            ]
        return []
    if kind != "RollingUpdate":
        return [
            _cause(
                "spec.strategy.type",
                "FieldValueNotSupported",
                f'Unsupported value: "{kind}": supported values: "Recreate", "RollingUpdate"',
            )
        ]
    rolling = rolling or {}
    causes = []
    for name in ("maxSurge", "maxUnavailable"):
        causes.extend(
            _int_or_percent_causes(rolling.get(name), f"spec.strategy.rollingUpdate.{name}")
        )
    if causes:
        return causes
    unavailable = rolling.get("maxUnavailable")
    if isinstance(unavailable, str) and int(unavailable[:-1]) > 100:
        causes.append(
            _cause(
                "spec.strategy.rollingUpdate.maxUnavailable",
                "FieldValueInvalid",
                f'Invalid value: "{unavailable}": must not be greater than 100%',
            )
        )
    if _amount(unavailable) == 0 and _amount(rolling.get("maxSurge")) == 0:
        causes.append(
            _cause(
                "spec.strategy.rollingUpdate.maxUnavailable",
                "FieldValueInvalid",
                f"Invalid value: {_show(unavailable)}: may not be 0 when `maxSurge` is 0",
            )
        )
    return causes


def _int_or_percent_causes(value: Any, field: str) -> list[Cause]:
    if value is None:
        return []
    if isinstance(value, str):
        if _PERCENT_RE.match(value):
            return []
        message = (
            f'Invalid value: "{value}": a valid percent string must be a numeric string '
            "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
            "'[0-9]+%')"
        )
        return [_cause(field, "FieldValueInvalid", message)]
    if value < 0:
        message = f"Invalid value: {value}: must be greater than or equal to 0"
        return [_cause(field, "FieldValueInvalid", message)]
    return []


def _amount(value: Any) -> int:
    """The number in an int-or-percent (0 when unset), for the both-zero rule."""
    if value is None:
        return 0
    if isinstance(value, str):
        return int(value.rstrip("%") or 0)
    return int(value)


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
