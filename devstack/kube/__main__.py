"""Run the Kubernetes emulator as its own process.

    python -m devstack.kube --port 0 --nodes 3 --state-file PATH [--api-latency-ms 5]

Prints the URL on stdout and, with ``--state-file``, writes ``{"url": ..., "pid": ..., "ca": ...}``
there (``ca``: the file of the CA its HTTPS certificate is signed by)
once it is serving, so a parent process can wait for the file instead of parsing output.
Stops cleanly on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from devstack.kube.cluster import ClusterSettings
from devstack.kube.emulator import KubernetesEmulator


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devstack.kube", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--nodes", type=int, default=1, help="simulated nodes to register")
    parser.add_argument(
        "--state-file", type=Path, help="write the URL, pid and CA file here as JSON"
    )
    parser.add_argument("--watch-history", type=int, default=10000, help="changes kept for watches")
    parser.add_argument(
        "--api-latency-ms",
        type=float,
        default=0.0,
        help="milliseconds each API request waits, as on a real control plane",
    )
    parser.add_argument(
        "--start-seconds",
        type=float,
        default=0.0,
        help="seconds the kubelet takes to start a pod's containers",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    emulator = KubernetesEmulator(
        port=args.port,
        watch_history=args.watch_history,
        settings=ClusterSettings(start_seconds=args.start_seconds),
        api_latency=args.api_latency_ms / 1000,
    ).start()
    try:
        for index in range(args.nodes):
            emulator.cluster.add_node(f"node-{index + 1}")
        if args.state_file is not None:
            # Write then rename, so a reader never sees a half-written file.
            partial = args.state_file.with_name(args.state_file.name + ".tmp")
            ca = str(emulator.authority.ca_path)
            partial.write_text(json.dumps({"url": emulator.url, "pid": os.getpid(), "ca": ca}))
            partial.replace(args.state_file)
        print(emulator.url, flush=True)
        while not stopping.wait(0.5):
            pass
    finally:
        emulator.stop()
        if args.state_file is not None:
            args.state_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
