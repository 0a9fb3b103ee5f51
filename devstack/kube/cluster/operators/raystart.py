"""How KubeRay starts Ray in a pod: the Ray container's command, from ``rayStartParams``.

KubeRay does not run a Ray image's own command. It replaces the Ray container's (the pod's
first container's) command with ``/bin/bash -c --`` and its args with one line,
``ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start [--head] --flag=value ...``, the
flags being the group's ``rayStartParams`` in name order (a ``"true"`` value as the bare
``--flag``, a ``"false"`` one left out, except for the flags that take a boolean). Before that
it fills in what the params leave out: ``block``, ``metrics-export-port`` (8080),
``dashboard-agent-listen-port`` (52365), on the head ``dashboard-host=0.0.0.0``, on a worker
``address`` (the head Service's DNS name and the head's GCS port), and from the container's
resources ``num-cpus`` (its CPU limit, else its request, rounded up), ``memory`` (its memory
limit in bytes) and ``num-gpus``. A container whose command or args already say ``ray start``
keeps them; one that has a command of its own runs it first (``cmd && ray start ...``).

The container also gets KubeRay's environment: where the GCS is (``RAY_ADDRESS``, ``RAY_PORT``,
and on a worker ``FQ_RAY_IP``), which cluster, namespace, pod and group it is, and the
generated ``ray start`` line (``KUBERAY_GEN_RAY_START_CMD``). Variables the container sets
itself are kept.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from ..quantities import parse_quantity

HEAD, WORKER = "head", "worker"
DEFAULT_GCS_PORT = 6379
DEFAULT_METRICS_PORT = 8080
DEFAULT_AGENT_PORT = 52365
ULIMIT = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"
GPU_RESOURCE = "nvidia.com/gpu"
BOOLEAN_VALUED = frozenset({"log-color", "include-dashboard", "include-log-monitor"})
"""Flags that take ``true`` or ``false`` as a value rather than being switches."""


def head_port(head_params: Mapping[str, Any]) -> str:
    """The port workers and drivers reach the GCS at: the head's ``port``, else 6379."""
    return str(head_params.get("port", DEFAULT_GCS_PORT))


def complete_params(
    node_type: str, params: Mapping[str, Any], resources: Mapping[str, Any], head_address: str
) -> dict[str, str]:
    """``params`` with what KubeRay fills in; ``head_address`` is a worker's ``host:port``."""
    done = {str(k): str(v) for k, v in params.items()}
    if node_type == WORKER:
        done.setdefault("address", head_address)
    else:
        done.setdefault("dashboard-host", "0.0.0.0")
    done.setdefault("metrics-export-port", str(DEFAULT_METRICS_PORT))
    done["block"] = "true"
    done.setdefault("dashboard-agent-listen-port", str(DEFAULT_AGENT_PORT))
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    cpu = parse_quantity(limits.get("cpu")) or parse_quantity(requests.get("cpu"))
    if cpu and "num-cpus" not in done:
        done["num-cpus"] = str(math.ceil(cpu))
    memory = parse_quantity(limits.get("memory"))
    if memory and "memory" not in done:
        done["memory"] = str(math.ceil(memory))
    gpus = parse_quantity(limits.get(GPU_RESOURCE))
    if gpus and "num-gpus" not in done:
        done["num-gpus"] = str(math.ceil(gpus))
    return done


def start_command(node_type: str, params: Mapping[str, str]) -> str:
    """The ``ray start`` line for ``params`` (completed)."""
    words = ["ray", "start", "--head"] if node_type == HEAD else ["ray", "start"]
    for name in sorted(params):
        value = params[name]
        if value.lower() in ("true", "false") and name not in BOOLEAN_VALUED:
            if value.lower() == "true":
                words.append(f"--{name}")
        else:
            words.append(f"--{name}={value}")
    return " ".join(words)


def ray_env(
    node_type: str, command: str, address: str, port: str, head_host: str
) -> dict[str, dict[str, Any]]:
    """KubeRay's variables for the Ray container, each as an ``env`` entry without its name;
    ``address`` is ``RAY_ADDRESS``, ``head_host`` where a worker finds the head."""

    def field(path: str) -> dict[str, Any]:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    env = {
        "RAY_CLUSTER_NAME": field("metadata.labels['ray.io/cluster']"),
        "RAY_CLUSTER_NAMESPACE": field("metadata.namespace"),
        "RAY_CLOUD_INSTANCE_ID": field("metadata.name"),
        "RAY_NODE_TYPE_NAME": field("metadata.labels['ray.io/group']"),
        "KUBERAY_GEN_RAY_START_CMD": {"value": command},
        "RAY_PORT": {"value": port},
        "RAY_ADDRESS": {"value": address},
        "RAY_USAGE_STATS_KUBERAY_IN_USE": {"value": "1"},
    }
    if node_type == WORKER:
        env["FQ_RAY_IP"] = {"value": head_host}
    return env


def ray_container(
    container: Mapping[str, Any], command: str, env: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``container`` as KubeRay runs it: ``command`` through bash, ``env`` added."""
    built = copy.deepcopy(dict(container))
    given = " ".join(str(w) for w in [*(built.get("command") or []), *(built.get("args") or [])])
    if "ray start" not in given:
        line = f"{ULIMIT}; {command}"
        built["command"] = ["/bin/bash", "-c", "--"]
        built["args"] = [f"{given} && {line}" if given else line]
    present = {str(e.get("name")) for e in built.get("env") or []}
    added = [{"name": k, **v} for k, v in env.items() if k not in present]
    built["env"] = [*(built.get("env") or []), *added]
    return built
