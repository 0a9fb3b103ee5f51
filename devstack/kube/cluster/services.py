"""Services that carry traffic: a user-space proxy per Service port, as kube-proxy once was.

On a stack that runs pods as processes, Services get their ClusterIP from the loopback block
the stack claimed (``addresses``), as its pods do. For each port of such a Service a listener
is bound on ``clusterIP:port``; every connection it accepts goes to one of the Service's
endpoints (a pod of its namespace that its selector matches, that is Ready and runs as
processes), taken in turn, at the pod's address and the port's ``targetPort`` (a number, or
the name of a container port). With no ready endpoint the connection is closed at once, as a
client of a Service without endpoints sees its connection refused.

Bytes are copied both ways by two threads per connection until both sides have closed: the
local stack carries a few browsers' and clients' connections, not a cluster's traffic.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .addresses import LoopbackAddresses
from .cache import Obj
from .containers import port_number

_log = logging.getLogger(__name__)

_CHUNK = 64 * 1024

Endpoints = Callable[[str, dict[str, str]], list[Obj]]
"""The ready process-run pods of a namespace that a selector matches."""


@dataclass
class _Listener:
    """One bound Service port and the thread accepting on it."""

    key: tuple[str, str, int]
    sock: socket.socket
    spec: dict[str, Any]
    """The Service port (``port``, ``targetPort``, ``protocol``)."""
    selector: dict[str, str]


class ServiceProxies:
    """Binds, rebinds and closes the listeners of every loopback Service."""

    def __init__(self, endpoints: Endpoints, addresses: LoopbackAddresses) -> None:
        self._endpoints = endpoints
        self._addresses = addresses
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, str, int], _Listener] = {}
        self._turns = itertools.count()

    def on_service(self, event_type: str, service: Obj) -> None:
        """Keep the listeners equal to the Service's ClusterIP and ports."""
        meta, spec = service["metadata"], service.get("spec") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        ip = str(spec.get("clusterIP") or "")
        wanted: dict[int, dict[str, Any]] = {}
        if event_type != "DELETED" and self._addresses.is_service_address(ip):
            for port in spec.get("ports") or []:
                if (port.get("protocol") or "TCP") == "TCP":
                    wanted[int(port["port"])] = dict(port)
        selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
        with self._lock:
            mine = {k: v for k, v in self._listeners.items() if k[:2] == (namespace, name)}
        for key, listener in mine.items():
            if key[2] not in wanted or listener.sock.getsockname()[0] != ip:
                self._close(key)
            else:
                listener.spec, listener.selector = wanted.pop(key[2]), selector
        for port, port_spec in wanted.items():
            self._open((namespace, name, port), ip, port_spec, selector)

    def stop(self) -> None:
        with self._lock:
            keys = list(self._listeners)
        for key in keys:
            self._close(key)

    def _open(
        self, key: tuple[str, str, int], ip: str, spec: dict[str, Any], selector: dict[str, str]
    ) -> None:
        try:
            sock = socket.create_server((ip, key[2]))
        except OSError as exc:
            _log.warning("cannot bind service %s/%s on %s:%d: %s", key[0], key[1], ip, key[2], exc)
            return
        listener = _Listener(key, sock, spec, selector)
        with self._lock:
            self._listeners[key] = listener
        threading.Thread(
            target=self._accept, args=(listener,), name=f"svc-{key[1]}-{key[2]}", daemon=True
        ).start()

    def _close(self, key: tuple[str, str, int]) -> None:
        with self._lock:
            listener = self._listeners.pop(key, None)
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.sock.shutdown(socket.SHUT_RDWR)
            listener.sock.close()

    def _accept(self, listener: _Listener) -> None:
        while True:
            try:
                client, _ = listener.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._connect, args=(listener, client), name="svc-conn", daemon=True
            ).start()

    def _connect(self, listener: _Listener, client: socket.socket) -> None:
        namespace = listener.key[0]
        pods = self._endpoints(namespace, listener.selector) if listener.selector else []
        targets = [t for t in (_target(p, listener.spec) for p in pods) if t is not None]
        if not targets:
            client.close()
            return
        address = targets[next(self._turns) % len(targets)]
        try:
            upstream = socket.create_connection(address, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()


def _target(pod: Obj, port: dict[str, Any]) -> tuple[str, int] | None:
    """Where a Service port reaches this pod: its address and the resolved target port."""
    ip = str((pod.get("status") or {}).get("podIP") or "")
    target = port.get("targetPort", port.get("port"))
    number = port_number(target, (pod.get("spec") or {}).get("containers") or [])
    return (ip, number) if ip and number is not None else None


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then pass the end on (a half-close); on an error, end
    both directions so that the other copy stops too."""
    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
    except OSError:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
