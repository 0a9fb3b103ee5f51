"""``python -m devstack``: run the service on the local stack until interrupted."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from app.runtime.defaults import default_workers
from devstack.images import DEFAULT_PROGRAMS
from devstack.stack import REPO_ROOT, LocalStack, StackOptions


def parse_options(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> StackOptions:
    """The stack's options from the command line, with defaults from the environment
    (``make run`` passes no arguments: ``SPAWNER_PORT``, ``SPAWNER_REPLICAS``,
    ``SPAWNER_REDIS_URL``, ``SPAWNER_REDIS_SENTINEL``, ``DEVSTACK_API_LATENCY_MS``,
    ``DEVSTACK_START_SECONDS``, ``DEVSTACK_LAB_STANDIN`` and ``DEVSTACK_PROGRAMS`` set it
    up)."""
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    parser.add_argument("--port", type=int, default=int(env.get("SPAWNER_PORT", 8080)))
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="web workers of each replica (default: the service's own, one per usable core)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=int(env.get("SPAWNER_REPLICAS") or 1),
        help="replicas of the service (each a web gunicorn and a runner) behind a load balancer",
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--state-dir", type=Path, default=REPO_ROOT / ".devstack")
    parser.add_argument(
        "--api-latency-ms",
        type=float,
        default=float(env.get("DEVSTACK_API_LATENCY_MS") or 0),
        help="milliseconds each Kubernetes API call waits, as on a real control plane",
    )
    parser.add_argument(
        "--start-seconds",
        type=float,
        default=float(env.get("DEVSTACK_START_SECONDS") or 0),
        help="seconds the emulated kubelet takes to start a lab's containers",
    )
    parser.add_argument(
        "--redis-sentinel",
        action="store_true",
        default=env.get("SPAWNER_REDIS_SENTINEL", "") not in ("", "0"),
        help="run Redis as a primary, a replica and three sentinels, and reach it through them",
    )
    parser.add_argument(
        "--lab-standin",
        action="store_true",
        default=bool(env.get("DEVSTACK_LAB_STANDIN")),
        help="emulate lab pods and answer for them with one stand-in, instead of running "
        "a real Jupyter server per lab",
    )
    parser.add_argument(
        "--programs",
        type=Path,
        default=Path(env.get("DEVSTACK_PROGRAMS") or DEFAULT_PROGRAMS),
        help="which images run as real processes, and what they run (a YAML file)",
    )
    args = parser.parse_args(argv)
    return StackOptions(
        state_dir=args.state_dir,
        redis_url=env.get("SPAWNER_REDIS_URL") or None,
        redis_sentinel=args.redis_sentinel,
        spawner_port=args.port,
        workers=args.workers,
        replicas=max(1, args.replicas),
        nodes=args.nodes,
        api_latency=args.api_latency_ms / 1000,
        start_seconds=args.start_seconds,
        real_labs=not args.lab_standin,
        programs=args.programs,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    stack = LocalStack(options)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start()
        state = stack.state()
        print("\nThe lab spawner is running on the local stack:", flush=True)
        addresses = ("spawner_url", "kubernetes_url", "gafaelfawr_url", "registry_url")
        for key in (*addresses, "ingress_url", "lab_url", "node_files"):
            if key in state:
                print(f"  {key:15} {state[key]}")
        print(f"  {'redis_url':15} {state['redis_url']}")
        if "redis_sentinel" in state:
            sentinels = ", ".join(state["redis_sentinel"]["addresses"])
            print(f"  {'redis_sentinel':15} {sentinels} (primary at start: redis_url)")
        if len(state["replicas"]) > 1:
            for replica in state["replicas"]:
                print(
                    f"  {replica['name']:15} {replica['url']} "
                    f"(web pid {replica['pid']}, runner pid {replica['runner_pid']})"
                )
        print("Demo tokens:")
        print(json.dumps(state["tokens"], indent=2))
        print(f"Written to {options.state_dir / 'stack.json'}. Ctrl-C stops everything.")
        sys.stdout.flush()
        down: set[str] = set()
        while not stopping.wait(0.5):
            for replica in stack.replicas:
                # Its web master ending ends the replica; a runner that exits is started again.
                process = replica.process
                if replica.name in down or process is None or process.poll() is None:
                    continue
                down.add(replica.name)
                how = _ended(process.returncode)
                # As a lost pod: its runner goes with it, and is not started again.
                stack.kill_replica(replica)
                if stack.balancer is None or len(down) == len(stack.replicas):
                    print(
                        f"{replica.name} {how}; no replica is left: stopping the stack",
                        file=sys.stderr,
                    )
                    return 1
                # As a lost pod behind a Service: the others go on, and take over its work.
                print(
                    f"{replica.name} {how}; it stays down, and the balancer sends its requests "
                    "to the other replicas, which take over its elected loops and operations",
                    file=sys.stderr,
                    flush=True,
                )
        return 0
    finally:
        stack.stop()


def _ended(code: int) -> str:
    """How a process ended, in words: its exit code, or the signal that killed it."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


if __name__ == "__main__":
    sys.exit(main())
