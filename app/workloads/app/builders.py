"""The Kubernetes objects of a group's app, from its template and the group's choices.

In the group's namespace (``<prefix>-apps-<group>``, with the ResourceQuota ``apps-quota``
holding the group's quota), each app has, all named ``app-<id>``:

- a **Deployment** of one pod (none while stopped) from the template's pod spec, of which
  only the first container is kept. Its environment starts with the preset variables
  (``APP_ID``, ``APP_ROOT``, ``APP_BASE_URL``, ``PLATFORM_URL``, ``GROUP``), so that the
  template's and the group's values after them may refer to them as ``$(APP_ROOT)``; its
  resources are the chosen size's; the group's volume is mounted and the app's directory
  in it made by an init container (without a group volume, an emptyDir holds the app's
  data). A rolling update keeps the old pod serving until the new one is ready (the
  Updating phase);
- a **Service** with the template's ports;
- a **NetworkPolicy** admitting connections only from the ingress controller's namespaces
  and from the group's own pods;
- a **GafaelfawrIngress** at ``<path prefix>/<id>/`` whose access follows the app's scope:
  anonymous, any token with one of the platform scopes, or the group's scope, which
  Gafaelfawr grants the group's members. Gafaelfawr alone decides who reaches an app.
"""

from __future__ import annotations

import copy
from typing import Any

from app.builders import names
from app.builders.ingress import GAFAELFAWR_API, rule_host
from app.builders.metadata import common_annotations
from app.builders.network_policy import NAMESPACE_NAME_LABEL
from app.builders.resource_quota import GPU_RESOURCE, pod_resources
from app.models.config import AppQuota, AppsConfig, AppTemplate, Config
from app.models.identity import is_group_name
from app.models.sizes import PodSize
from app.quantities import format_cpu, format_memory
from app.workloads.app.models import AppRecord, AppScope
from app.workloads.app.records import choices_json

GROUP_VOLUME = "group"
APP_ROOT_VOLUME = "app-root"
APP_ROOT_INIT = "app-root"
EMPTY_ROOT = "/app-data"
"""Where an app without a group volume keeps its data: ``/app-data/<id>``, an emptyDir (not
under ``/apps``, which is where its pages are: a path should not mean both)."""
SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
"""The old pod serves until its replacement is ready."""
INGRESS_SERVICE = "apps"
"""The name Gafaelfawr's metrics give every app's ingress."""


def app_labels(record: AppRecord) -> dict[str, str]:
    """Labels of every object of the app and of its pods."""
    return {
        names.ARGOCD_INSTANCE_LABEL: names.ARGOCD_INSTANCE,
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.COMPONENT_LABEL: names.APP_COMPONENT,
        names.APP_LABEL: record.id,
        names.GROUP_LABEL: names.group_label_value(record.group),
    }


def app_selector(app_id: str) -> dict[str, str]:
    return {names.APP_LABEL: app_id}


def app_root(config: AppsConfig, app_id: str) -> str:
    volume = config.group_volume
    if volume is None:
        return f"{EMPTY_ROOT}/{app_id}"
    return f"{volume.mount_path.rstrip('/')}/apps/{app_id}"


def base_path(config: AppsConfig, app_id: str) -> str:
    """The app's path on the platform's domain, with its trailing slash."""
    return f"{config.path_prefix}/{app_id}/"


def app_url(config: AppsConfig, app_id: str) -> str:
    return f"{config.base_url}{base_path(config, app_id)}"


def preset_env(config: AppsConfig, record: AppRecord) -> list[dict[str, str]]:
    """The variables every app starts with, in this order."""
    return [
        {"name": "APP_ID", "value": record.id},
        {"name": "APP_ROOT", "value": app_root(config, record.id)},
        {"name": "APP_BASE_URL", "value": base_path(config, record.id)},
        {"name": "PLATFORM_URL", "value": config.base_url},
        {"name": "GROUP", "value": record.group},
    ]


def chosen_env(template: AppTemplate, env: dict[str, str]) -> list[dict[str, str]]:
    """The template's variables, each with the group's value or its default (an optional one
    without either is left out), then the group's other variables, sorted by name."""
    chosen: list[dict[str, str]] = []
    for variable in template.variables:
        value = env.get(variable.name, variable.default)
        if value is None:
            continue
        chosen.append({"name": variable.name, "value": value})
    extra = sorted(name for name in env if template.variable(name) is None)
    chosen.extend({"name": name, "value": env[name]} for name in extra)
    return chosen


def missing_variables(template: AppTemplate, env: dict[str, str]) -> list[str]:
    """The template's required variables that have neither a value nor a default."""
    return [
        v.name for v in template.variables if not v.optional and not (env.get(v.name) or v.default)
    ]


def _meta(record: AppRecord, namespace: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": names.app_name(record.id),
        "namespace": namespace,
        "labels": app_labels(record),
        "annotations": common_annotations(),
        **extra,
    }


def _volumes(config: AppsConfig, record: AppRecord) -> tuple[list[Any], list[Any], list[Any]]:
    """The pod's volumes, the app container's mounts, and the init containers."""
    volume = config.group_volume
    if volume is None:
        return (
            [{"name": APP_ROOT_VOLUME, "emptyDir": {}}],
            [{"name": APP_ROOT_VOLUME, "mountPath": app_root(config, record.id)}],
            [],
        )
    group = record.group
    if not is_group_name(group):
        # Checked where it entered; never a path from a name that was not.
        raise ValueError(f"not a group's name: {group!r}")
    if volume.type == "nfs":
        source: dict[str, Any] = {
            "nfs": {"server": volume.server, "path": (volume.path or "").format(group=group)}
        }
    elif volume.type == "hostPath":
        source = {
            "hostPath": {"path": (volume.path or "").format(group=group), "type": "Directory"}
        }
    else:
        claim = (volume.claim_name or "").format(group=names.group_label_value(group))
        source = {"persistentVolumeClaim": {"claimName": claim}}
    mount = {"name": GROUP_VOLUME, "mountPath": volume.mount_path}
    return [{"name": GROUP_VOLUME, **source}], [mount], [mount]


def build_deployment(
    config: Config, template: AppTemplate, record: AppRecord, size: PodSize, namespace: str
) -> dict[str, Any]:
    """The app's Deployment: one pod, or none while the app is stopped."""
    apps = config.apps
    pod_spec = copy.deepcopy(template.pod_spec)
    container = dict(pod_spec["containers"][0])
    volumes, mounts, init_mounts = _volumes(apps, record)
    container["env"] = [
        *preset_env(apps, record),
        *(container.get("env") or []),
        *chosen_env(template, record.env),
    ]
    container["resources"] = pod_resources(size)
    container["volumeMounts"] = [*(container.get("volumeMounts") or []), *mounts]
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = [*(pod_spec.get("volumes") or []), *volumes]
    if size.node_selector:
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **size.node_selector}
    pod_spec.setdefault("automountServiceAccountToken", False)
    pod_spec.setdefault("enableServiceLinks", False)
    if init_mounts:
        # The group volume is the group's: the app's directory in it is made as root, which
        # is what a fresh directory on a shared volume needs (the apps design's init step).
        pod_spec["initContainers"] = [
            {
                "name": APP_ROOT_INIT,
                "image": container["image"],
                "command": ["sh", "-c", 'mkdir -p "$APP_ROOT"'],
                "env": [{"name": "APP_ROOT", "value": app_root(apps, record.id)}],
                "volumeMounts": init_mounts,
                "securityContext": {
                    "runAsUser": 0,
                    "runAsNonRoot": False,
                    "allowPrivilegeEscalation": False,
                },
                "resources": pod_resources(size),
            }
        ]
    labels = app_labels(record)
    meta = _meta(record, namespace)
    meta["annotations"] = {**meta["annotations"], names.APP_ANNOTATION: choices_json(record)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 0 if record.stopped else 1,
            "selector": {"matchLabels": app_selector(record.id)},
            "strategy": SURGE,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def build_service(template: AppTemplate, record: AppRecord, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(record, namespace),
        "spec": {
            "selector": app_selector(record.id),
            "ports": [
                {"name": p.name, "port": p.port, "targetPort": p.target_port, "protocol": "TCP"}
                for p in template.service_ports
            ],
        },
    }


def build_network_policy(config: AppsConfig, record: AppRecord, namespace: str) -> dict[str, Any]:
    """Connections to the app only from its group's namespace and the ingress controller's."""
    peers: list[dict[str, Any]] = [{"podSelector": {}}]
    peers.extend(
        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}
        for name in config.ingress_namespaces
    )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(record, namespace),
        "spec": {
            "podSelector": {"matchLabels": app_selector(record.id)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers}],
        },
    }


def ingress_scopes(config: AppsConfig, record: AppRecord) -> dict[str, Any]:
    """The GafaelfawrIngress ``scopes`` of the app's scope."""
    if record.scope == AppScope.PUBLIC:
        return {"anonymous": True}
    if record.scope == AppScope.PLATFORM:
        return {"any": list(config.platform_scopes)}
    return {"all": [group_scope(config, record.group)]}


def group_scope(config: AppsConfig, group: str) -> str:
    return config.group_scope.format(group=group)


def build_ingress(
    config: AppsConfig, template: AppTemplate, record: AppRecord, namespace: str
) -> dict[str, Any]:
    """The GafaelfawrIngress: Gafaelfawr makes the Ingress from it, with its auth rules."""
    ingress_config: dict[str, Any] = {
        "service": INGRESS_SERVICE,
        "scopes": ingress_scopes(config, record),
    }
    if record.scope != AppScope.PUBLIC:
        ingress_config["loginRedirect"] = True
    host = rule_host(config.base_url)
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": base_path(config, record.id),
                    "pathType": "Prefix",
                    "backend": {
                        "service": {
                            "name": names.app_name(record.id),
                            "port": {"number": template.http_port},
                        }
                    },
                }
            ]
        }
    }
    if host:
        rule["host"] = host
    return {
        "apiVersion": GAFAELFAWR_API,
        "kind": "GafaelfawrIngress",
        "metadata": _meta(record, namespace),
        "config": ingress_config,
        "template": {
            "metadata": {"name": names.app_name(record.id), "labels": app_labels(record)},
            "spec": {"rules": [rule]},
        },
    }


def namespace_labels(group: str) -> dict[str, str]:
    return {
        names.ARGOCD_INSTANCE_LABEL: names.ARGOCD_INSTANCE,
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.COMPONENT_LABEL: names.APP_COMPONENT,
        names.GROUP_LABEL: names.group_label_value(group),
    }


def build_group_namespace(group: str, namespace: str) -> dict[str, Any]:
    """The group's namespace; it stays while the group has apps."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": namespace_labels(group),
            "annotations": common_annotations(),
        },
    }


def build_group_quota(
    group: str, namespace: str, quota: AppQuota, surge: PodSize | None
) -> dict[str, Any]:
    """The ResourceQuota of the group's namespace: the group's quota, plus room for one pod
    of ``surge`` (its largest app), which a rolling update runs beside the old pod for a
    while. The service itself refuses apps past the quota; this is Kubernetes' backstop."""
    cpu = quota.cpu + (surge.cpu_limit if surge else 0.0)
    memory = quota.memory + (surge.memory_limit if surge else 0)
    gpus = quota.gpus + (surge.gpus if surge else 0)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": names.APPS_QUOTA,
            "namespace": namespace,
            "labels": namespace_labels(group),
            "annotations": common_annotations(),
        },
        "spec": {
            "hard": {
                "limits.cpu": format_cpu(cpu),
                "limits.memory": format_memory(memory),
                f"requests.{GPU_RESOURCE}": str(gpus),
            }
        },
    }
