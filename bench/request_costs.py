"""The CPU a status request spends in its two fixed costs, measured in this process.

``python -m bench.request_costs`` (about 20 seconds) times, in CPU microseconds a call:

- the access line: gunicorn's stock logger with its default format (the yardstick), and the
  service's ``AccessLogger`` in text and in JSON, each writing to a file, for a status
  request's environ as gevent's WSGI server fills it;
- the status read: ``WorkloadStore.stored_record`` (the one round trip of a status request)
  on the service's Redis client, against a private ``redis-server``, beside the same
  ``MGET`` sent on a bare socket (the floor: the server's answer and the reply's parsing).

The end-to-end figure, worker CPU per status request under gunicorn and load, is the
``status`` benchmark's (``cpu_ms_per_request``); this one says where a share of it goes,
without the noise of a load generator sharing the cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import logging
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REQUESTS = 20_000
"""Calls per measurement; the median of ``ROUNDS`` is reported."""
ROUNDS = 5


def _cpu_us_per_call(call: Callable[[], object], count: int, rounds: int = ROUNDS) -> float:
    """Median CPU microseconds of one ``call`` over ``rounds`` runs of ``count`` calls."""
    samples = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(count):
            call()
        samples.append((time.process_time() - started) * 1e6 / count)
    samples.sort()
    return round(samples[len(samples) // 2], 2)


class _Response:
    """What gunicorn hands its access logger: status, bytes sent and headers."""

    status = "200 OK"
    sent = 431
    headers = (("Content-Type", "application/json"), ("Content-Length", "431"))


class _Request:
    headers = (
        ("HOST", "127.0.0.1:8080"),
        ("AUTHORIZATION", "Bearer gt-" + "A" * 22 + "." + "B" * 22),
        ("USER-AGENT", "JupyterHub"),
        ("ACCEPT", "*/*"),
    )


def status_environ() -> dict[str, Any]:
    """A status request's WSGI environ after the app served it (gevent's keys and ours)."""
    return {
        "GATEWAY_INTERFACE": "CGI/1.1",
        "SERVER_SOFTWARE": "gevent/26 Python/3",
        "SCRIPT_NAME": "",
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.url_scheme": "http",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "8080",
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/spawner/v1/labs/status-0500",
        "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "51234",
        "RAW_URI": "/spawner/v1/labs/status-0500",
        "HTTP_HOST": "127.0.0.1:8080",
        "HTTP_AUTHORIZATION": "Bearer gt-" + "A" * 22 + "." + "B" * 22,
        "HTTP_USER_AGENT": "JupyterHub",
        "HTTP_ACCEPT": "*/*",
        "spawner.request_id": "0f8b2c1d9e7a4b3c8d6e5f4a3b2c1d0e",
        "spawner.user": "bench-admin",
        "spawner.route": "/spawner/v1/labs/<username>",
    }


def access_costs(directory: Path, count: int) -> dict[str, float]:
    """CPU microseconds of one access line: stock gunicorn, ours in text and in JSON."""
    from gunicorn.config import Config
    from gunicorn.glogging import Logger

    from app.log import configure_logging
    from app.web.access_log import AccessLogger

    def logger(cls: type[Logger], name: str) -> Logger:
        cfg = Config()
        cfg.set("accesslog", str(directory / name))
        return cls(cfg)

    response, request, environ = _Response(), _Request(), status_environ()
    elapsed = dt.timedelta(microseconds=1800)
    costs: dict[str, float] = {}
    stock = logger(Logger, "stock.log")
    costs["stock_gunicorn"] = _cpu_us_per_call(
        lambda: stock.access(response, request, environ, elapsed), count
    )
    for log_format in ("text", "json"):
        configure_logging("INFO", log_format)
        ours = logger(AccessLogger, f"{log_format}.log")
        costs[f"ours_{log_format}"] = _cpu_us_per_call(
            functools.partial(ours.access, response, request, environ, elapsed), count
        )
        for handler in logging.getLogger("gunicorn.access").handlers:
            handler.flush()
    # The lines must be there, or the figures measured nothing.
    for name in ("stock.log", "text.log", "json.log"):
        assert (directory / name).stat().st_size > 0, name
    return costs


def read_costs(directory: Path, count: int) -> dict[str, float]:
    """CPU microseconds of one status read: the service's client, and a bare socket."""
    from app.extensions.redis import build_redis
    from app.models.config import RedisConfig
    from app.models.workload import WorkloadRef
    from app.storage.workloads import WorkloadStore
    from devstack.redis_process import RedisProcess

    server = RedisProcess(directory).start()
    try:
        config = RedisConfig(
            url=server.url,
            sentinel=None,
            key_prefix="bench:",
            socket_timeout=5.0,
            socket_connect_timeout=1.0,
            max_connections=64,
            password=None,
        )
        client = build_redis(config)
        store = WorkloadStore(client, config.key_prefix)
        ref = WorkloadRef("lab", "status-0500")
        record = json.dumps({"username": ref.name, "status": "running", "pad": "x" * 380})
        client.set(store.record_key(ref), record)
        client.set(store.complete_key, "1")
        assert store.stored_record(ref).record == record
        costs = {"service_client": _cpu_us_per_call(lambda: store.stored_record(ref), count)}

        host, _, port = server.url.removeprefix("redis://").partition(":")
        keys = [store.record_key(ref).encode(), store.complete_key.encode()]
        command = b"*3\r\n$4\r\nMGET\r\n" + b"".join(
            b"$%d\r\n%s\r\n" % (len(key), key) for key in keys
        )
        with socket.create_connection((host, int(port.split("/")[0]))) as sock:
            reader = sock.makefile("rb")

            def bare() -> None:
                sock.sendall(command)
                reader.readline()  # *2
                for _ in keys:
                    size = int(reader.readline()[1:])
                    if size >= 0:
                        reader.read(size + 2)

            costs["bare_socket"] = _cpu_us_per_call(bare, count)
        client.close()
        return costs
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS, help="calls per round")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="request-costs-") as tmp:
        directory = Path(tmp)
        result = {
            "cpu_us_per_access_line": access_costs(directory, args.requests),
            "cpu_us_per_status_read": read_costs(directory, args.requests),
        }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
