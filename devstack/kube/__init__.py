"""A Kubernetes API emulator: the real ``kubernetes`` client talks to it unchanged.

``devstack.kube.store`` holds the objects, the HTTP layer (``server``, ``handlers``,
``validation``, ``watches``...) behaves like kube-apiserver, and ``devstack.kube.cluster``
simulates the cluster behind it (controllers, scheduler, kubelet).

Speed is configuration, so that code is judged where calls cost what they cost in a cluster
rather than at the emulator's fraction of a millisecond:

- ``KubernetesEmulator(api_latency=seconds)`` delays every API request before it is handled,
  as a real control plane's round trip does (0 by default, for tests; settable while it runs;
  the ``/_emulator`` control API is never delayed, and faults add their latency on top).
- ``ClusterSettings.start_seconds`` is the kubelet's time to start a pod's containers once
  its image is there, and ``pull_seconds`` the time to pull an image.

The local stack (``devstack.stack.StackOptions``: ``api_latency``, ``start_seconds``), ``make
run`` (``DEVSTACK_API_LATENCY_MS``, ``DEVSTACK_START_SECONDS``), ``python -m devstack.kube``
(``--api-latency-ms``, ``--start-seconds``) and the benchmarks (``--api-latency-ms``,
``--slow-start-seconds``) all set them.

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
