"""Run a WSGI application on a loopback port in a background thread."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

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


class StartStop(ABC):
    """``with`` support for the emulators: ``start()`` on entry, ``stop()`` on exit."""

    @abstractmethod
    def start(self) -> Self:
        """Start serving; returns self so it can be chained."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ServedEmulator(StartStop):
    """Base of the small emulators: serve ``wsgi_app`` on loopback, start and stop.

    Subclasses set ``self._port`` and ``self._server = None`` and implement ``wsgi_app``;
    their state survives ``stop``, so a test can take one down and bring it back.
    """

    _port: int
    _server: ServerThread | None
    _label = "emulator"

    @abstractmethod
    def wsgi_app(self, environ: dict[str, Any], start_response: Any) -> Any:
        """The emulator's WSGI application."""

    def start(self) -> Self:
        """Start serving on loopback; returns self so it can be chained."""
        self._server = ServerThread(self.wsgi_app, port=self._port).start()
        return self

    def stop(self) -> None:
        """Stop serving; the emulator's state is kept and it can be started again."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def url(self) -> str:
        """Base URL, ``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError(f"{self._label} not started")
        return self._server.url
