"""Prepuller benchmark: a 200-node emulated cluster and 10 prepull images.

Measures, with the prepuller's own pass (in process, against the emulator over HTTP and a
private Redis):

- the first pass on a cluster that has nothing: its time and Kubernetes calls (it starts
  one pull per node, ``pullsPerNode`` being 1);
- the time until every node has every image, with a fixed simulated pull time, next to the
  floor of (images x pull time) per node: a node pulls one image at a time, so no schedule
  can beat it (and, apart, the time until the last pull pod is deleted);
- a decision pass once everything is cached (the steady state, every ``intervalSeconds``):
  its time and Kubernetes calls.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import redis

from app.config import parse_config
from app.storage.images import ImageStore
from app.storage.kubernetes import KubernetesStorage
from app.storage.kubernetes_client import DeadlineApiClient, build_configuration
from app.storage.prepull import PrepullStore
from app.workloads.image.prepuller import Prepuller
from app.workloads.image.service import ImageService
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.redis_process import RedisProcess

INTERVAL_SECONDS = 0.05


def _config(kube: KubernetesEmulator, redis_url: str, images: int) -> Any:
    urls = [f"registry.bench/lab/image-{i}:w_2024_{i + 10:02d}" for i in range(images)]
    return parse_config(
        {
            "gafaelfawr": {"url": "http://gafaelfawr.bench"},
            "redis": {"url": redis_url},
            "kubernetes": {
                "mode": "host",
                "host": kube.url,
                "certificateAuthority": str(kube.authority.ca_path),
                "requestTimeout": 30,
            },
            "prepull": [
                {
                    "name": "bench",
                    "type": "simple",
                    "images": [
                        {"url": url, "name": url, "digest": "sha256:" + f"{i:064x}"}
                        for i, url in enumerate(urls)
                    ],
                }
            ],
            "prepuller": {"pullsPerNode": 1, "maxPulls": 10_000, "intervalSeconds": 1},
            "lab": {"sizes": [{"name": "small", "cpu": 1, "memory": "4Gi"}]},
        }
    )


def run(
    work: Path, nodes: int = 200, images: int = 10, pull_seconds: float = 0.5
) -> dict[str, Any]:
    redis_process = RedisProcess(work / "prepull-redis").start()
    kube = KubernetesEmulator(settings=ClusterSettings(pull_seconds=pull_seconds)).start()
    try:
        for index in range(nodes):
            kube.cluster.add_node(f"node-{index:03d}")
        kube.store.create("namespaces", {"metadata": {"name": "nublado"}})
        config = _config(kube, redis_process.url, images)
        client = redis.Redis.from_url(redis_process.url, decode_responses=True)
        kube_storage = KubernetesStorage(
            DeadlineApiClient(build_configuration(config.kubernetes), 30.0)
        )
        image_service = ImageService(config, ImageStore(client, "bench:"))
        prepuller = Prepuller(
            config, image_service, kube_storage, PrepullStore(client, "bench:"), client
        )

        kube.audit.clear()
        begun = time.monotonic()
        first = prepuller.run_pass()
        first_seconds = time.monotonic() - begun
        first_calls = len(kube.audit.entries())

        passes = 1
        filled_seconds: float | None = None
        while True:
            pass_began = time.monotonic()
            report = prepuller.run_pass()
            passes += 1
            if report.missing == 0 and filled_seconds is None:
                # The pass read the nodes at its start: every image was everywhere by then.
                filled_seconds = pass_began - begun
            if report.missing == 0 and report.in_flight == 0 and not report.removed:
                break
            time.sleep(INTERVAL_SECONDS)
        clean_seconds = time.monotonic() - begun
        assert filled_seconds is not None

        steady: list[float] = []
        calls: list[int] = []
        for _ in range(20):
            kube.audit.clear()
            started = time.monotonic()
            prepuller.run_pass()
            steady.append(time.monotonic() - started)
            calls.append(len(kube.audit.entries()))
        floor = images * pull_seconds
        return {
            "nodes": nodes,
            "images": images,
            "pull_seconds": pull_seconds,
            "first_pass": {
                "seconds": round(first_seconds, 3),
                "kubernetes_calls": first_calls,
                "pulls_started": len(first.started),
            },
            "fill": {
                "seconds": round(filled_seconds, 2),
                "floor_seconds": floor,
                "ratio_to_floor": round(filled_seconds / floor, 2),
                "passes": passes,
                "pods_cleaned_up_seconds": round(clean_seconds, 2),
            },
            "steady_pass": {
                "p50_ms": round(statistics.median(steady) * 1000, 1),
                "max_ms": round(max(steady) * 1000, 1),
                "kubernetes_calls": max(calls),
            },
        }
    finally:
        kube.stop()
        redis_process.stop()
