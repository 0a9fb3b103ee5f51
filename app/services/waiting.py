"""Wait, by watching, for Kubernetes objects to disappear."""

from __future__ import annotations

from app.services.context import LabContext
from app.services.reporter import Reporter
from app.storage.kubernetes import WatchExpired


def wait_pod_gone(ctx: LabContext, reporter: Reporter, namespace: str, name: str) -> None:
    while True:
        reporter.check()
        pod = ctx.kube.read_pod(namespace, name)
        if pod is None:
            return
        version = pod["metadata"]["resourceVersion"]
        timeout = max(1, min(2, int(reporter.remaining())))
        try:
            for kind, _ in ctx.kube.watch_pod(namespace, name, version, timeout):
                if kind == "DELETED":
                    return
        except WatchExpired:
            continue


def wait_namespace_gone(ctx: LabContext, reporter: Reporter, name: str) -> None:
    while True:
        reporter.check()
        namespace = ctx.kube.read_namespace(name)
        if namespace is None:
            return
        version = namespace["metadata"]["resourceVersion"]
        timeout = max(1, min(2, int(reporter.remaining())))
        try:
            for kind, _ in ctx.kube.watch_namespace(name, version, timeout):
                if kind == "DELETED":
                    return
        except WatchExpired:
            continue
