"""A service process that scales a cluster and stops for good once the scale is applied,
before its end is recorded, for the test that kills it (``test_changes``). The
configuration comes as JSON on stdin; the owner's token, the cluster and the workers wanted
as arguments."""

from __future__ import annotations

import sys
import threading

from flask import Flask

from app.engine.kind import Finished, Run
from app.workloads.cluster.changes import is_change
from app.workloads.cluster.kind import ClusterKind
from app.workloads.kinds import KINDS
from tests.support.held_service import hold


class HeldClusterKind(ClusterKind):
    """Clusters whose changes never end: the worker running one is killed here."""

    def spawn(self, run: Run) -> Finished:
        finished = super().spawn(run)
        if is_change(run.operation.spec):
            threading.Event().wait()
        return finished


def main() -> None:
    token, name, replicas = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def begin(app: Flask) -> None:
        app.test_client().patch(
            f"/ddl_cluster_scaler/scale/daskclusters/{name}",
            json={"replicas": replicas},
            headers={"Authorization": f"Bearer {token}"},
        )

    hold([HeldClusterKind if kind is ClusterKind else kind for kind in KINDS], begin)


if __name__ == "__main__":
    main()
