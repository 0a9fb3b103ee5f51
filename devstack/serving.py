"""Run a WSGI application on a loopback port in a background thread."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server


class ServerThread:
    """A threaded werkzeug server bound to ``127.0.0.1`` on a free (or given) port.

    Each request gets its own thread, so long-lived responses such as watches or event
    streams never block other clients.
    """

    def __init__(self, app: Any, port: int = 0, host: str = "127.0.0.1") -> None:
        self._app = app
        self._host = host
        self._port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return self._server.server_port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> ServerThread:
        self._server = make_server(self._host, self._port, self._app, threaded=True)
        # A short poll interval keeps stop() fast; the default half second adds up in tests.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"wsgi-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
