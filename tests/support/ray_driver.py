"""A Ray driver as a lab runs one: a process of its own that connects to a cluster with the Ray
client, waits for the cluster's nodes, and runs one task on each; and the processes a Ray
cluster's pods leave running."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from devstack.kube.cluster.processes import session_members

DRIVER = """
import json, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(sys.argv[1])
deadline = time.monotonic() + int(sys.argv[2])
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    assert time.monotonic() < deadline, ray.nodes()
    time.sleep(0.2)

@ray.remote
def square_where(x):
    return x * x, ray.util.get_node_ip_address()

nodes = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
calls = [
    square_where.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    ).remote(i)
    for i, node_id in enumerate(sorted(nodes), start=2)
]
print(json.dumps({"nodes": sorted(nodes.values()), "results": ray.get(calls)}))
"""


def run_tasks(address: str, *, wait_seconds: int = 120) -> dict[str, Any]:
    """Connect to ``address`` (``ray://host:port``), wait up to ``wait_seconds`` for two live
    nodes, run a task pinned to each; the nodes' addresses and each task's (square, node
    address), as the driver printed them."""
    driver = subprocess.run(
        [sys.executable, "-c", DRIVER, address, str(wait_seconds)],
        capture_output=True,
        text=True,
        timeout=wait_seconds + 60,
    )
    assert driver.returncode == 0, driver.stderr[-3000:]
    answer: dict[str, Any] = json.loads(driver.stdout.strip().splitlines()[-1])
    return answer


def assert_a_task_ran_on_each(answer: dict[str, Any], pod_ips: list[str]) -> None:
    """The driver saw exactly these pods as nodes and ran one task on each."""
    assert answer["nodes"] == sorted(pod_ips)
    assert sorted(square for square, _ in answer["results"]) == [4, 9]
    assert sorted(ip for _, ip in answer["results"]) == sorted(pod_ips)


def left_running(sessions: list[int]) -> list[int]:
    """The processes still running in these containers' sessions (``processes``)."""
    return [pid for session in sessions for pid in session_members(session)]
