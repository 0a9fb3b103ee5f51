"""The local stack's group app image: a small web server, run as the app container's process.

A group's app is served under its own path behind Gafaelfawr (``APP_BASE_URL``, such as
``/apps/<id>/``), so it answers there and nowhere else, as an app configured with its base URL
does: ``GET <base>`` is a JSON document of what the app was given (its ``APP_ID``,
``APP_BASE_URL``, ``GROUP`` and, if set, ``GREETING`` environment variables) and who is asking
(the ``X-Auth-Request-User`` header the ingress set from Gafaelfawr's answer); ``GET
<base>healthz`` is for probes; ``<base>`` without its slash redirects to it. Every request is
logged as a line on standard output, which the pod's log serves.

It listens on the pod's own address (``POD_IP``, as the lab program does: pods of the local
stack share the machine's network) at ``PORT`` (8080 by default). Run by path with the stack's
Python; it needs nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import urlsplit

DEFAULT_PORT = 8080
REPORTED_ENV = ("APP_ID", "APP_BASE_URL", "GROUP", "GREETING")
USER_HEADER = "X-Auth-Request-User"


def base_path(env: dict[str, str]) -> str:
    """The app's base path, always ending in a slash."""
    base = env.get("APP_BASE_URL") or "/"
    base = urlsplit(base).path or "/"
    return base if base.endswith("/") else base + "/"


def describe(env: dict[str, str], user: str | None) -> dict[str, Any]:
    """What ``GET <base>`` answers."""
    return {
        "env": {name: env[name] for name in REPORTED_ENV if name in env},
        "user": user,
    }


class AppHandler(BaseHTTPRequestHandler):
    """Answers under the base path; logs one line per request to standard output."""

    server_version = "demo-app/1.0"
    protocol_version = "HTTP/1.1"
    env: ClassVar[dict[str, str]] = {}
    """The process's environment, given to each server's handler class."""

    def do_GET(self) -> None:
        base = base_path(self.env)
        path = urlsplit(self.path).path
        if path == base:
            self._send(200, describe(self.env, self.headers.get(USER_HEADER)))
        elif path == base + "healthz":
            self._send(200, {"status": "ok"})
        elif path == base.rstrip("/") and base != "/":
            self.send_response(308)
            self.send_header("Location", base)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, {"detail": f"{path} is not under {base}"})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        user = self.headers.get(USER_HEADER) or "-"
        print(f"{self.command} {self.path} {code} user={user}", flush=True)

    def log_message(self, format: str, *args: Any) -> None:
        print(format % args, file=sys.stderr, flush=True)


def main() -> None:
    env = dict(os.environ)
    address = env.get("POD_IP") or "127.0.0.1"
    port = int(env.get("PORT") or DEFAULT_PORT)
    handler = type("Handler", (AppHandler,), {"env": env})
    server = ThreadingHTTPServer((address, port), handler)
    print(f"serving {base_path(env)} on http://{address}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
