"""The arithmetic of a Deployment rollout, kept apart from the controller that writes it.

Which ReplicaSet is the new one, how many pods each may have during a rolling update, what
the Deployment's status and conditions say: a client reads a lab's phase off these numbers
(``readyReplicas``, ``replicas``, ``updatedReplicas``, the ``Available``, ``Progressing`` and
``ReplicaFailure`` conditions), so they follow the documented behaviour of the real
deployment controller: percentages of ``maxSurge`` round up and of ``maxUnavailable`` down
(and when both come to 0, one pod may be unavailable), only available pods count as serving,
and a template's pods are told apart by its ``pod-template-hash``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

from .cache import Obj
from .workloads import (
    find_condition,
    new_condition,
    parse_time,
    remove_condition,
    set_condition,
)

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
NOT_COPIED_ANNOTATIONS = frozenset(
    {
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "kubectl.kubernetes.io/last-applied-configuration",
    }
)
"""Deployment annotations its ReplicaSets do not inherit (they are about the Deployment)."""
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet of generated names; the hash is written in it so it never spells words."""

# Condition reasons, as the real controller names them.
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
FAILED_RS_CREATE = "ReplicaSetCreateError"


# ---- the spec -----------------------------------------------------------------------------


def desired(obj: Obj) -> int:
    """``spec.replicas`` (1 when unset, the API server's default)."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def is_rolling(deployment: Obj) -> bool:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    return (strategy.get("type") or "RollingUpdate") == "RollingUpdate"


def scaled(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent as a count of ``total`` pods."""
    if isinstance(value, str) and value.endswith("%"):
        percent = int(value[:-1] or 0)
        exact = percent * total
        return -(-exact // 100) if round_up else exact // 100
    return int(value or 0)


def fenceposts(deployment: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts; when both come to 0, one pod may be
    unavailable, or a rollout could never start."""
    rolling = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    total = desired(deployment)
    surge = scaled(rolling.get("maxSurge", "25%"), total, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable", "25%"), total, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(deployment: Obj) -> int:
    return fenceposts(deployment)[0] if is_rolling(deployment) else 0


def max_unavailable(deployment: Obj) -> int:
    if not is_rolling(deployment) or desired(deployment) == 0:
        return 0
    return min(fenceposts(deployment)[1], desired(deployment))


def progress_deadline(deployment: Obj) -> int | None:
    """``spec.progressDeadlineSeconds``, or None when progress is not tracked."""
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    if value is None or int(value) >= 2**31 - 1:
        return None
    return int(value)


def revision_history_limit(deployment: Obj) -> int | None:
    value = (deployment.get("spec") or {}).get("revisionHistoryLimit")
    return None if value is None else int(value)


# ---- templates and revisions --------------------------------------------------------------


def template_hash(template: dict[str, Any], collision_count: int | None = None) -> str:
    """A stable name for a pod template: the same template always gives the same
    ReplicaSet, and ``collisionCount`` moves it off a name another template holds."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    if collision_count:
        text += f"/{collision_count}"
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    return "".join(HASH_ALPHABET[ord(c) % len(HASH_ALPHABET)] for c in str(number))


def without_hash(template: dict[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy(template or {})
    labels = (template.get("metadata") or {}).get("labels")
    if labels is not None:
        labels.pop(HASH_LABEL, None)
        if not labels:
            template["metadata"].pop("labels")
        if not template["metadata"]:
            template.pop("metadata")
    return template


def same_template(deployment: Obj, replicaset: Obj) -> bool:
    """Whether the ReplicaSet runs the Deployment's current template (hash label aside)."""
    ours = (deployment.get("spec") or {}).get("template") or {}
    theirs = (replicaset.get("spec") or {}).get("template") or {}
    return without_hash(ours) == without_hash(theirs)


def created_order(obj: Obj) -> tuple[float, str]:
    meta = obj["metadata"]
    return (parse_time(meta.get("creationTimestamp")) or 0.0, str(meta["name"]))


def revision(obj: Obj) -> int:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0")
    try:
        return int(raw)
    except ValueError:
        return 0


def find_new(deployment: Obj, replicasets: list[Obj]) -> Obj | None:
    """The oldest ReplicaSet running the current template."""
    for replicaset in sorted(replicasets, key=created_order):
        if same_template(deployment, replicaset):
            return replicaset
    return None


def annotations_for(
    deployment: Obj, replicaset: Obj, new_revision: int, *, creating: bool
) -> dict[str, str]:
    """The new ReplicaSet's annotations: the Deployment's own, its revision (an older
    revision it had goes to the history), and on creation the replica counts."""
    annotations = dict((replicaset.get("metadata") or {}).get("annotations") or {})
    source = (deployment.get("metadata") or {}).get("annotations") or {}
    annotations.update({k: v for k, v in source.items() if k not in NOT_COPIED_ANNOTATIONS})
    old = revision(replicaset)
    if old < new_revision:
        if old > 0:
            history = annotations.get(REVISION_HISTORY)
            annotations[REVISION_HISTORY] = f"{history},{old}" if history else str(old)
        annotations[REVISION] = str(new_revision)
    if creating:
        annotations[DESIRED_REPLICAS] = str(desired(deployment))
        annotations[MAX_REPLICAS] = str(desired(deployment) + max_surge(deployment))
    return annotations


def replicas_annotations(deployment: Obj) -> dict[str, str]:
    """What every scaled ReplicaSet records of its Deployment's size at the time."""
    return {
        DESIRED_REPLICAS: str(desired(deployment)),
        MAX_REPLICAS: str(desired(deployment) + max_surge(deployment)),
    }


# ---- counting -----------------------------------------------------------------------------


def active(replicasets: list[Obj]) -> list[Obj]:
    return [r for r in replicasets if desired(r) > 0]


def spec_total(replicasets: list[Obj]) -> int:
    return sum(desired(r) for r in replicasets)


def status_total(replicasets: list[Obj], field: str) -> int:
    return sum(int((r.get("status") or {}).get(field) or 0) for r in replicasets)


def is_scaling_event(deployment: Obj, replicasets: list[Obj]) -> bool:
    """Only ``spec.replicas`` changed: an active ReplicaSet recorded another size."""
    for replicaset in active(replicasets):
        recorded = ((replicaset.get("metadata") or {}).get("annotations") or {}).get(
            DESIRED_REPLICAS
        )
        if recorded is not None and recorded.isdigit() and int(recorded) != desired(deployment):
            return True
    return False


def new_rs_replicas(deployment: Obj, replicasets: list[Obj], new_rs: Obj | None) -> int:
    """How many pods the new ReplicaSet may have now: all of them with Recreate; in a
    rolling update, as many as the surge allows on top of every ReplicaSet's pods."""
    current = desired(new_rs) if new_rs is not None else 0
    if not is_rolling(deployment):
        return desired(deployment)
    total = spec_total(replicasets)
    ceiling = desired(deployment) + max_surge(deployment)
    if total >= ceiling:
        return current
    return current + max(0, min(ceiling - total, desired(deployment) - current))


def active_or_latest(new_rs: Obj | None, old: list[Obj]) -> Obj | None:
    """The one ReplicaSet with pods (or, with none, the newest); None when several have."""
    candidates = [r for r in [new_rs, *old] if r is not None]
    if not candidates:
        return None
    running = active(candidates)
    if len(running) == 1:
        return running[0]
    if running:
        return None
    return new_rs if new_rs is not None else max(old, key=created_order)


def is_saturated(deployment: Obj, replicaset: Obj | None) -> bool:
    """The ReplicaSet has all the Deployment's pods, recorded for its size, available."""
    if replicaset is None:
        return False
    recorded = ((replicaset.get("metadata") or {}).get("annotations") or {}).get(DESIRED_REPLICAS)
    wanted = desired(deployment)
    return (
        desired(replicaset) == wanted
        and recorded == str(wanted)
        and status_total([replicaset], "availableReplicas") == wanted
    )


def proportional_sizes(deployment: Obj, replicasets: list[Obj]) -> dict[str, int]:
    """New sizes of the active ReplicaSets when a Deployment is scaled mid-rollout: each
    gets its share of the change, the largest (newest when adding, oldest when removing)
    takes what rounding leaves."""
    running = active(replicasets)
    wanted = desired(deployment)
    allowed = wanted + max_surge(deployment) if wanted > 0 else 0
    to_add = allowed - spec_total(running)
    # Largest first; among equals, newest first when adding and oldest first when removing.
    running.sort(key=created_order, reverse=to_add > 0)
    running.sort(key=lambda r: -desired(r))
    sizes = {str(r["metadata"]["name"]): desired(r) for r in running}
    added = 0
    if to_add != 0:
        for replicaset in running:
            share = _proportion(deployment, replicaset, to_add, added)
            sizes[str(replicaset["metadata"]["name"])] += share
            added += share
        first = str(running[0]["metadata"]["name"])
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def _proportion(deployment: Obj, replicaset: Obj, to_add: int, added: int) -> int:
    size = desired(replicaset)
    if size == 0 or to_add == added:
        return 0
    wanted = desired(deployment)
    if wanted == 0:
        fraction = -size
    else:
        annotations = (replicaset.get("metadata") or {}).get("annotations") or {}
        recorded = annotations.get(MAX_REPLICAS)
        was = (
            int(recorded)
            if recorded and recorded.isdigit()
            else int((deployment.get("status") or {}).get("replicas") or 0)
        )
        now = wanted + max_surge(deployment)
        fraction = (round_half_away(size * now / was) - size) if was else 0
    left = to_add - added
    return min(fraction, left) if to_add > 0 else max(fraction, left)


def round_half_away(value: float) -> int:
    """Rounding as Go's ``math.Round`` does (halves away from zero)."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


# ---- status -------------------------------------------------------------------------------


def deployment_status(
    deployment: Obj, replicasets: list[Obj], new_rs: Obj | None
) -> dict[str, Any]:
    """The counters and the ``Available`` condition, from the ReplicaSets' statuses; other
    conditions are carried over. Zero counters are left out as the API serializes them,
    except ``terminatingReplicas``."""
    previous = deployment.get("status") or {}
    available = status_total(replicasets, "availableReplicas")
    counters = {
        "observedGeneration": int(deployment["metadata"].get("generation") or 1),
        "replicas": status_total(replicasets, "replicas"),
        "updatedReplicas": status_total([new_rs] if new_rs is not None else [], "replicas"),
        "readyReplicas": status_total(replicasets, "readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": max(0, spec_total(replicasets) - available),
    }
    status: dict[str, Any] = {k: v for k, v in counters.items() if v}
    status["terminatingReplicas"] = status_total(replicasets, "terminatingReplicas")
    if previous.get("collisionCount") is not None:
        status["collisionCount"] = previous["collisionCount"]
    if previous.get("conditions"):
        status["conditions"] = copy.deepcopy(previous["conditions"])
    if available >= desired(deployment) - max_unavailable(deployment):
        condition = new_condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            update_time=True,
        )
    else:
        condition = new_condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            update_time=True,
        )
    set_condition(status, condition)
    return status


def _count(status: dict[str, Any], field: str) -> int:
    return int(status.get(field) or 0)


def is_complete(deployment: Obj, status: dict[str, Any]) -> bool:
    """Every wanted pod runs the current template and is available, and the status is of
    the current generation."""
    wanted = desired(deployment)
    return (
        _count(status, "updatedReplicas") == wanted
        and _count(status, "replicas") == wanted
        and _count(status, "availableReplicas") == wanted
        and _count(status, "observedGeneration")
        >= int(deployment["metadata"].get("generation") or 1)
    )


def made_progress(previous: dict[str, Any], status: dict[str, Any]) -> bool:
    """More pods updated, ready or available, or fewer old ones, than last written."""
    old_before = _count(previous, "replicas") - _count(previous, "updatedReplicas")
    old_now = _count(status, "replicas") - _count(status, "updatedReplicas")
    return (
        _count(status, "updatedReplicas") > _count(previous, "updatedReplicas")
        or old_now < old_before
        or _count(status, "readyReplicas") > _count(previous, "readyReplicas")
        or _count(status, "availableReplicas") > _count(previous, "availableReplicas")
    )


def deadline_at(deployment: Obj, status: dict[str, Any]) -> float | None:
    """When the rollout times out without further progress (seconds since the epoch), or
    None when it cannot (no deadline, complete, or already timed out)."""
    deadline = progress_deadline(deployment)
    condition = find_condition(status, "Progressing")
    if (
        deadline is None
        or condition is None
        or condition.get("reason")
        in (
            NEW_RS_AVAILABLE,
            TIMED_OUT,
        )
    ):
        return None
    since = parse_time(condition.get("lastUpdateTime"))
    return None if since is None else since + deadline


def apply_progress(deployment: Obj, status: dict[str, Any], new_rs: Obj | None, now: float) -> None:
    """Set the ``Progressing`` condition: complete, still progressing (its update time
    moves on), or past its deadline."""
    if progress_deadline(deployment) is None:
        remove_condition(status, "Progressing")
        return
    current = find_condition(deployment.get("status") or {}, "Progressing")
    name = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs is not None else None
    subject = name or f'Deployment "{deployment["metadata"]["name"]}"'
    if (
        _count(status, "replicas") == _count(status, "updatedReplicas")
        and current is not None
        and current.get("reason") == NEW_RS_AVAILABLE
    ):
        return  # the latest rollout finished; nothing to estimate
    if is_complete(deployment, status):
        set_condition(
            status,
            new_condition(
                "Progressing",
                "True",
                NEW_RS_AVAILABLE,
                f"{subject} has successfully progressed.",
                update_time=True,
            ),
        )
    elif made_progress(deployment.get("status") or {}, status):
        condition = new_condition(
            "Progressing", "True", RS_UPDATED, f"{subject} is progressing.", update_time=True
        )
        if current is not None and current.get("status") == "True":
            condition["lastTransitionTime"] = current.get("lastTransitionTime")
        remove_condition(status, "Progressing")
        status["conditions"] = [*(status.get("conditions") or []), condition]
    else:
        when = deadline_at(deployment, status)
        timed_out = current is not None and current.get("reason") == TIMED_OUT
        if timed_out or (when is not None and when < now):
            set_condition(
                status,
                new_condition(
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    f"{subject} has timed out progressing.",
                    update_time=True,
                ),
            )


def replica_failure(new_rs: Obj | None, replicasets: list[Obj]) -> dict[str, Any] | None:
    """The ``ReplicaFailure`` condition a ReplicaSet reports, as a Deployment condition (the
    new ReplicaSet's first)."""
    for candidate in [new_rs, *replicasets]:
        if candidate is None:
            continue
        condition = find_condition(candidate.get("status") or {}, "ReplicaFailure")
        if condition is not None:
            return {
                "type": "ReplicaFailure",
                "status": condition.get("status"),
                "lastUpdateTime": condition.get("lastTransitionTime"),
                "lastTransitionTime": condition.get("lastTransitionTime"),
                "reason": condition.get("reason"),
                "message": condition.get("message"),
            }
    return None
