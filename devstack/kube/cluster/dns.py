"""The names of the stack's Services, for its processes' resolver (``devstack.cluster_dns``).

Each Service with a cluster IP of the stack's loopback block gets the names cluster DNS gives
it (``<service>.<namespace>``, ``.svc`` and ``.svc.cluster.local``), written to a hosts file
of this cluster's own, replaced whole on every change so that a reader never sees half of it.
Services of other cluster IPs carry no traffic here and get no names: a client finds them
unresolvable, as it would find an address nothing answers at.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from .addresses import LoopbackAddresses
from .cache import Obj

RESOLVER = Path(__file__).resolve().parents[2] / "cluster_dns"
"""The folder whose ``sitecustomize`` makes a Python process read the hosts file."""


class ClusterDns:
    """Keeps the hosts file equal to the Services with loopback cluster IPs."""

    def __init__(self, addresses: LoopbackAddresses) -> None:
        self._addresses = addresses
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str], str] = {}
        self._dir: Path | None = None

    @property
    def hosts_file(self) -> Path:
        """The hosts file (made, empty, on first use; in a folder of this cluster's own)."""
        with self._lock:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix="devstack-dns-"))
                (self._dir / "hosts").write_text("", encoding="utf-8")
            return self._dir / "hosts"

    def environment(self, pythonpath: str = "") -> dict[str, str]:
        """What a process needs to resolve Service names: the resolver first on its
        ``PYTHONPATH`` (then ``pythonpath``), and the hosts file."""
        path = os.pathsep.join(p for p in (str(RESOLVER), pythonpath) if p)
        return {"PYTHONPATH": path, "DEVSTACK_CLUSTER_HOSTS": str(self.hosts_file)}

    def stop(self) -> None:
        """Remove the hosts file and its folder."""
        with self._lock:
            folder, self._dir = self._dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def on_service(self, event_type: str, service: Obj) -> None:
        meta, spec = service["metadata"], service.get("spec") or {}
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        ip = str(spec.get("clusterIP") or "")
        with self._lock:
            before = self._records.get(key)
            if event_type != "DELETED" and self._addresses.is_service_address(ip):
                self._records[key] = ip
            else:
                self._records.pop(key, None)
            changed = self._records.get(key) != before
        if changed:
            self._write()

    def _write(self) -> None:
        path = self.hosts_file
        with self._lock:
            lines = [
                f"{ip} {name}.{ns} {name}.{ns}.svc {name}.{ns}.svc.cluster.local\n"
                for (ns, name), ip in sorted(self._records.items())
            ]
        temporary = path.with_suffix(".new")
        temporary.write_text("".join(lines), encoding="utf-8")
        temporary.replace(path)
