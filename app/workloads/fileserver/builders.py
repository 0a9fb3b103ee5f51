"""The objects of a user's file server, all in the file servers' namespace and named
``<user>-fs``: a Job running the server as the user, its Service, the GafaelfawrIngress
that admits that user alone, and a NetworkPolicy that admits the ingress alone.

A Job, not a Deployment: the server exits when idle, and its pod's exit is the Job's end,
which the service sees and answers by removing the rest.
"""

from __future__ import annotations

import json
from typing import Any

from app.builders import names
from app.builders.ingress import GAFAELFAWR_API, rule_host
from app.builders.metadata import object_meta
from app.builders.network_policy import NAMESPACE_NAME_LABEL
from app.builders.pod import toleration_json
from app.builders.volumes import configured_volumes, volume_mount
from app.models.config import Config
from app.quantities import format_cpu, format_memory
from app.workloads.fileserver.config import FileserverConfig, fileserver_config, mount_name
from app.workloads.fileserver.models import RunAs

COMPONENT = "fileserver"
CONTAINER = "fileserver"
NAME_SUFFIX = "-fs"
FINISHED_TTL_SECONDS = 300
"""How long Kubernetes keeps a finished Job if the service has not removed it by then."""
SELECTOR = (
    f"{names.COMPONENT_LABEL}={COMPONENT},{names.USER_LABEL},"
    f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY}"
)
"""Every file server's objects, and nothing else."""


def object_name(username: str) -> str:
    return f"{username}{NAME_SUFFIX}"


def selector(username: str) -> dict[str, str]:
    """The labels that pick out the user's file-server pod."""
    return {names.COMPONENT_LABEL: COMPONENT, names.USER_LABEL: username}


def server_path(config: FileserverConfig, username: str) -> str:
    """The server's path on the platform, without a trailing slash (what it answers under)."""
    return f"{config.path_prefix}/{username}"


def server_url(config: FileserverConfig, username: str) -> str:
    """The server's WebDAV URL, with its trailing slash."""
    return f"{config.base_url}{server_path(config, username)}/"


def served_mounts(config: Config) -> list[dict[str, Any]]:
    """The mounts as the server reads them (``FILESERVER_MOUNTS``): each at its lab path,
    read-only where the mount or its lab volume is."""
    section = fileserver_config(config)
    return [
        {
            "name": mount_name(m),
            "path": m.mount_path,
            "readOnly": bool(volume_mount(m, config).get("readOnly")),
        }
        for m in section.volume_mounts
    ]


def _meta(config: FileserverConfig, username: str) -> dict[str, Any]:
    return object_meta(
        object_name(username), username, namespace=config.namespace, component=COMPONENT
    )


def _volumes(config: Config, section: FileserverConfig) -> list[dict[str, Any]]:
    """The lab volumes the mounts name, and nothing else."""
    named = {m.volume_name for m in section.volume_mounts}
    return [v for v in configured_volumes(config) if v["name"] in named]


def build_job(config: Config, username: str, run_as: RunAs) -> dict[str, Any]:
    section = fileserver_config(config)
    resources = section.resources
    container = {
        "name": CONTAINER,
        "image": section.image,
        "imagePullPolicy": section.pull_policy,
        "env": [
            {"name": "FILESERVER_USER", "value": username},
            {"name": "FILESERVER_MOUNTS", "value": json.dumps(served_mounts(config))},
            {"name": "FILESERVER_URL_PREFIX", "value": server_path(section, username)},
            {"name": "FILESERVER_PORT", "value": str(section.port)},
            {"name": "FILESERVER_IDLE_TIMEOUT", "value": f"{section.idle_timeout:g}"},
        ],
        "ports": [{"name": "http", "containerPort": section.port, "protocol": "TCP"}],
        # A TCP probe: an HTTP one would be a request, and keep an idle server alive.
        "readinessProbe": {
            "tcpSocket": {"port": section.port},
            "periodSeconds": 1,
            "failureThreshold": 3,
        },
        "resources": {
            "requests": {
                "cpu": format_cpu(resources.cpu_request),
                "memory": format_memory(resources.memory_request),
            },
            "limits": {
                "cpu": format_cpu(resources.cpu_limit),
                "memory": format_memory(resources.memory_limit),
            },
        },
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [volume_mount(m, config) for m in section.volume_mounts],
    }
    pod_security: dict[str, Any] = {"runAsUser": run_as.uid, "runAsGroup": run_as.gid}
    if run_as.groups:
        pod_security["supplementalGroups"] = list(run_as.groups)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security,
        "containers": [container],
        "volumes": _volumes(config, section),
    }
    if section.node_selector:
        pod_spec["nodeSelector"] = dict(section.node_selector)
    if section.tolerations:
        pod_spec["tolerations"] = [toleration_json(t) for t in section.tolerations]
    meta = _meta(section, username)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
            "template": {
                "metadata": {"labels": dict(meta["labels"])},
                "spec": pod_spec,
            },
        },
    }


def build_service(section: FileserverConfig, username: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(section, username),
        "spec": {
            "selector": selector(username),
            "ports": [
                {"name": "http", "port": section.port, "targetPort": "http", "protocol": "TCP"}
            ],
        },
    }


def build_network_policy(section: FileserverConfig, username: str) -> dict[str, Any]:
    """Connections to the server only from the ingress controller's namespaces."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(section, username),
        "spec": {
            "podSelector": {"matchLabels": selector(username)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}
                        for name in section.ingress_namespaces
                    ],
                    "ports": [{"protocol": "TCP", "port": section.port}],
                }
            ],
        },
    }


def build_ingress(section: FileserverConfig, username: str) -> dict[str, Any]:
    """The GafaelfawrIngress: only ``username``, with the scope, and with HTTP Basic
    challenges (WebDAV clients send the token as a Basic password); no token is passed on
    to the server, which needs none. Its URL is the rule's host, not ``config.baseUrl``,
    which Gafaelfawr no longer reads (and whose schema takes only ``https`` URLs)."""
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": server_path(section, username),
                    "pathType": "Prefix",
                    "backend": {
                        "service": {
                            "name": object_name(username),
                            "port": {"number": section.port},
                        }
                    },
                }
            ]
        }
    }
    host = rule_host(section.base_url)
    if host:
        rule["host"] = host
    meta = _meta(section, username)
    return {
        "apiVersion": GAFAELFAWR_API,
        "kind": "GafaelfawrIngress",
        "metadata": meta,
        "config": {
            "scopes": {"all": [section.scope]},
            "username": username,
            "authType": "basic",
            "loginRedirect": False,
            # WebDAV clients begin with a plain OPTIONS, which Gafaelfawr refuses otherwise.
            "allowOptions": True,
        },
        "template": {
            "metadata": {"name": object_name(username), "labels": dict(meta["labels"])},
            "spec": {"rules": [rule]},
        },
    }
