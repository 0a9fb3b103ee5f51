"""A Kubernetes API emulator: the real ``kubernetes`` client talks to it unchanged.

``devstack.kube.store`` holds the objects, the HTTP layer (``server``, ``handlers``,
``validation``, ``watches``...) behaves like kube-apiserver, and ``devstack.kube.cluster``
simulates the cluster behind it (controllers, scheduler, kubelet).

The facade is imported lazily so that ``devstack.kube.cluster`` can import the store without
a cycle through this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devstack.kube.emulator import KubernetesEmulator

__all__ = ["KubernetesEmulator"]


def __getattr__(name: str) -> Any:
    if name == "KubernetesEmulator":
        from devstack.kube.emulator import KubernetesEmulator

        return KubernetesEmulator
    raise AttributeError(name)
