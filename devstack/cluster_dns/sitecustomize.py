"""Cluster DNS for the processes of the local stack: Service names resolve to cluster IPs.

In a cluster, a pod reaches a Service by name (``<service>.<namespace>``,
``<service>.<namespace>.svc`` or ``<service>.<namespace>.svc.cluster.local``) through the
cluster's DNS server. The local stack has no DNS server of its own, and the machine's resolver
is not the stack's to change, so the processes it starts (pods run as processes, the Dask
operator) put this folder on ``PYTHONPATH``: Python imports this module at start-up, and name
lookups first consult the hosts file the emulated cluster writes (``DEVSTACK_CLUSTER_HOSTS``,
one ``<ip> <name> <name>...`` line per Service with a loopback cluster IP). Every other name goes
to the system's resolver unchanged.

Resolvers that bypass ``getaddrinfo`` would not see these names: aiohttp prefers c-ares (the
``aiodns`` package, here because JupyterHub requires it) when it can import it, and c-ares asks
the machine's DNS server directly. So ``aiodns`` is made unimportable in these processes, and
aiohttp falls back to its threaded resolver, which calls ``getaddrinfo``, as it does wherever
``aiodns`` is not installed.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

_HOSTS_FILE = os.environ.get("DEVSTACK_CLUSTER_HOSTS", "")
_system_getaddrinfo = socket.getaddrinfo
_cache: dict[str, Any] = {"stamp": None, "names": {}}


def _names() -> dict[str, str]:
    """The hosts file's names, read again whenever it changes."""
    try:
        stat = os.stat(_HOSTS_FILE)
    except OSError:
        return {}
    stamp = (stat.st_mtime_ns, stat.st_size)
    if _cache["stamp"] != stamp:
        names: dict[str, str] = {}
        with open(_HOSTS_FILE, encoding="utf-8") as hosts:
            for line in hosts:
                ip, *aliases = line.split()
                names.update(dict.fromkeys(aliases, ip))
        _cache["stamp"], _cache["names"] = stamp, names
    names_now: dict[str, str] = _cache["names"]
    return names_now


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if isinstance(host, str):
        host = _names().get(host.rstrip(".").lower(), host)
    return _system_getaddrinfo(host, *args, **kwargs)


if _HOSTS_FILE:
    socket.getaddrinfo = _getaddrinfo
    sys.modules.setdefault("aiodns", None)  # type: ignore[arg-type]
