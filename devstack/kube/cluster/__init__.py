"""The cluster half of the Kubernetes emulator: what the control plane and kubelets do.

``Cluster`` reacts to objects written to the emulator's store: it schedules pods, "runs" them
on simulated nodes (image pulls, init containers, crash loops, deletion), runs DaemonSets,
provisions and finalizes namespaces, and records Events, so a service driving the emulator
sees what it would see on a real cluster.
"""

from .cluster import Cluster
from .faults import PodFaults
from .settings import ClusterSettings

__all__ = ["Cluster", "ClusterSettings", "PodFaults"]
