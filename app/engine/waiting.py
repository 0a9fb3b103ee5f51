"""Wait, by watching, for Kubernetes objects to disappear within an operation's time."""

from __future__ import annotations

from app.engine.reporter import Reporter
from app.storage.kubernetes import KubernetesStorage, WatchExpired


def wait_pod_gone(kube: KubernetesStorage, reporter: Reporter, namespace: str, name: str) -> None:
    while True:
        reporter.check()
        pod = kube.read_pod(namespace, name)
        if pod is None:
            return
        version = pod["metadata"]["resourceVersion"]
        try:
            for kind, _ in kube.watch_pod(namespace, name, version, _watch_seconds(reporter)):
                if kind == "DELETED":
                    return
        except WatchExpired:
            continue


def wait_namespace_gone(kube: KubernetesStorage, reporter: Reporter, name: str) -> None:
    while True:
        reporter.check()
        namespace = kube.read_namespace(name)
        if namespace is None:
            return
        version = namespace["metadata"]["resourceVersion"]
        try:
            for kind, _ in kube.watch_namespace(name, version, _watch_seconds(reporter)):
                if kind == "DELETED":
                    return
        except WatchExpired:
            continue


def _watch_seconds(reporter: Reporter) -> int:
    """Short watches: each return is a chance to notice a superseded operation or the
    deadline (``reporter.check``)."""
    return max(1, min(2, int(reporter.remaining())))
