"""The local stack's speed settings: ``make run`` and the benchmarks set the emulator's API
latency and the kubelet's start time, and a call through the real client pays the latency."""

from __future__ import annotations

import time
from pathlib import Path

from kubernetes import client as k8s

from devstack.__main__ import parse_options
from devstack.stack import LocalStack, StackOptions


def test_make_run_takes_the_speed_from_the_environment() -> None:
    options = parse_options([], {"DEVSTACK_API_LATENCY_MS": "5", "DEVSTACK_START_SECONDS": "2"})
    assert options.api_latency == 0.005
    assert options.start_seconds == 2.0
    # The command line wins over the environment; nothing set means an instant cluster.
    options = parse_options(["--api-latency-ms", "20"], {"DEVSTACK_API_LATENCY_MS": "5"})
    assert options.api_latency == 0.02
    assert (parse_options([], {}).api_latency, parse_options([], {}).start_seconds) == (0, 0)


def test_the_stack_builds_its_emulator_with_them(tmp_path: Path) -> None:
    stack = LocalStack(StackOptions(state_dir=tmp_path, api_latency=0.05, start_seconds=1.5))
    assert stack.kube.api_latency == 0.05
    assert stack.kube.cluster.settings.start_seconds == 1.5
    with stack.kube:
        api = k8s.ApiClient(stack.kube.client_configuration())
        try:
            core = k8s.CoreV1Api(api)
            started = time.monotonic()
            core.list_namespace()
            # A lower bound only: the call waited at least the configured latency.
            assert time.monotonic() - started >= 0.05
        finally:
            api.close()
