"""Run a WSGI application on a loopback port in a background thread."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, Self, cast

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler
from werkzeug.wsgi import LimitedStream


class KeepAliveHandler(WSGIRequestHandler):
    """werkzeug's request handler with HTTP/1.1 keep-alive, as real API servers have.

    werkzeug answers one request per connection: after each response it reads whatever
    else the socket holds, so a second request on the connection would be swallowed. A
    client that must open (and, under gevent, resolve in a thread pool) a new connection
    for every call pays a cost no cluster charges, so this handler writes responses
    itself: a request's body is bounded by its ``Content-Length`` and drained after the
    application answers, a response without a length is sent chunked, and the connection
    stays open unless the client asked to close it, the request body was chunked, or the
    application failed after its headers were sent.
    """

    def setup(self) -> None:
        super().setup()
        # Watch events are small writes that must leave at once.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.environ = environ = self.make_environ()
        body: LimitedStream | None = None
        if not environ.get("wsgi.input_terminated"):
            body = LimitedStream(cast(IO[bytes], self.rfile), _content_length(environ))
            environ["wsgi.input"] = body
        response = _ResponseWriter(self)
        try:
            iterable = self.server.app(environ, response.start)
            try:
                for data in iterable:
                    response.write(data)
                response.finish()
            finally:
                close = getattr(iterable, "close", None)
                if close is not None:
                    close()
        except (ConnectionError, TimeoutError, ssl.SSLEOFError) as exc:
            # The peer went away: over TLS, as a watch it stopped reading, mid-record.
            self.close_connection = True
            self.connection_dropped(exc, environ)
            return
        except Exception:
            self.close_connection = True
            if response.started:
                self.log_error("error after the response started:\n%s", traceback.format_exc())
                return
            self.log_error("error in the application:\n%s", traceback.format_exc())
            response.fail()
            return
        if body is None:
            self.close_connection = True
        elif not self.close_connection:
            try:
                body.exhaust()
            except (OSError, ValueError):
                self.close_connection = True


def _content_length(environ: dict[str, Any]) -> int:
    try:
        return max(0, int(environ.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


class _ResponseWriter:
    """One response: status and headers on the first write, chunked when unsized."""

    def __init__(self, handler: KeepAliveHandler) -> None:
        self._handler = handler
        self._status: str | None = None
        self._headers: list[tuple[str, str]] = []
        self.started = False
        self._chunked = False

    def start(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None and self.started:
            raise exc_info[1].with_traceback(exc_info[2])
        self._status, self._headers = status, list(headers)
        return self.write

    def write(self, data: bytes) -> None:
        head = b"" if self.started else self._head()
        if self._chunked and data:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        if head or data:
            # Head and first data in one segment: a lone small write waits on the peer's
            # delayed ACK under Nagle's algorithm.
            self._handler.wfile.write(head + data)

    def finish(self) -> None:
        self.write(b"")
        if self._chunked:
            self._handler.wfile.write(b"0\r\n\r\n")

    def fail(self) -> None:
        payload = b"Internal Server Error"
        self._status = "500 INTERNAL SERVER ERROR"
        self._headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(payload)))]
        self.write(payload)

    def _head(self) -> bytes:
        handler = self._handler
        assert self._status is not None, "write() before start_response()"
        code_text, _, reason = self._status.partition(" ")
        code = int(code_text)
        handler.log_request(code)
        lines = [
            f"{handler.protocol_version} {code} {reason}",
            f"Server: {handler.version_string()}",
            f"Date: {handler.date_time_string()}",
        ]
        names = set()
        for name, value in self._headers:
            lines.append(f"{name}: {value}")
            names.add(name.lower())
        bodiless = code in (204, 304) or code < 200 or handler.command == "HEAD"
        if "content-length" not in names and not bodiless:
            if handler.request_version == "HTTP/1.1":
                self._chunked = True
                lines.append("Transfer-Encoding: chunked")
            else:
                handler.close_connection = True
        if handler.close_connection:
            lines.append("Connection: close")
        self.started = True
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Server(ThreadedWSGIServer):
    """Remembers its open connections, so stopping it also ends kept-alive ones (a stopped
    emulator must look unreachable, not keep answering on old connections).

    With ``tls``, each connection's TLS handshake happens in that connection's own thread,
    not in the thread that accepts (werkzeug's own wrapping shakes hands as it accepts, so
    one client that connects and says nothing would hold every other one back)."""

    def __init__(self, *args: Any, tls: ssl.SSLContext | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._tls = tls
        # What werkzeug reads to call the requests https.
        self.ssl_context = tls

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self._tls.wrap_socket(request, server_side=True)
        except OSError:
            return  # a client that did not finish its handshake: nothing to serve
        with self._open_lock:
            self._open.add(wrapped)
        try:
            super().finish_request(wrapped, client_address)
        finally:
            with self._open_lock:
                self._open.discard(wrapped)
            with contextlib.suppress(OSError):
                wrapped.shutdown(socket.SHUT_RDWR)
            wrapped.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class ServerThread:
    """A threaded werkzeug server bound to ``127.0.0.1`` on a free (or given) port.

    Each request gets its own thread, so long-lived responses such as watches or event
    streams never block other clients.
    """

    def __init__(
        self,
        app: Any,
        port: int = 0,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._tls = tls
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return self._server.server_port

    @property
    def url(self) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{self._host}:{self.port}"

    def start(self) -> ServerThread:
        self._server = _Server(
            self._host, self._port, self._app, handler=KeepAliveHandler, tls=self._tls
        )
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
            self._server.close_connections()
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
    _tls: ssl.SSLContext | None = None
    """Set by an emulator served over HTTPS (as what it stands for is, in production)."""

    @abstractmethod
    def wsgi_app(self, environ: dict[str, Any], start_response: Any) -> Any:
        """The emulator's WSGI application."""

    def start(self) -> Self:
        """Start serving on loopback; returns self so it can be chained."""
        self._server = ServerThread(self.wsgi_app, port=self._port, tls=self._tls).start()
        return self

    def stop(self) -> None:
        """Stop serving; the emulator's state is kept and it can be started again."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def url(self) -> str:
        """Base URL, ``http://127.0.0.1:<port>`` (``https`` when served over TLS)."""
        if self._server is None:
            raise RuntimeError(f"{self._label} not started")
        return self._server.url
