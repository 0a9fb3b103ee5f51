"""Containers as real child processes: the local stack's container runtime.

A container of a mapped image (see ``programs``) runs as a process of the stack's own user,
in a directory of its pod, with its own loopback address (from the stack's block, see
``addresses``). What a real runtime would give it is
given here where a process can have it:

- the command line from the image's defaults and the container's ``command``/``args``, with
  ``$(VAR)`` references expanded as Kubernetes does;
- the environment from ``env`` (values, ``fieldRef``, ConfigMap and Secret keys) and
  ``envFrom``, plus ``POD_IP`` and ``POD_NAME``;
- ConfigMap and Secret volumes written out as files, ``emptyDir`` volumes as directories of
  the pod's own; ``hostPath`` volumes as directories of one file system that every emulated
  node shares (``ClusterSettings.node_files``: the volume's path under it, made when missing),
  as nodes mounting one NFS export at the same place do, so two pods mounting the same host
  path (a lab and its user's file server) see the same files; NFS and claim volumes, which a
  process cannot have, as empty directories of the pod's own;
- any path under a mount in what the pod gives (its ``command``, ``args``, ``env`` and
  ``workingDir``) rewritten to that directory, as the process cannot see the pod's mount
  namespace: a value that starts with a mount path, and, in an ``env`` value that is a JSON
  object or array, each string in it that does (the document is written out again, compact;
  keys are left alone), as a program configured by a JSON list of paths gets them; what the
  image gives (its entrypoint, cmd, env and working directory: the stack's own files) is left
  as it is, wherever the stack happens to live;
- ``HOME`` as a container runtime sets it: the container's own, else the home directory of
  the user it runs as (``runAsUser``) in the ``/etc/passwd`` the pod mounts, if it mounts one;
  a home under a mount is that mount's directory (a lab's home on its home volume), any other
  is the pod's own directory;
- its output in a log file per container and restart (what ``pods/<name>/log`` serves).

Each process leads its own session and process group, so stopping it (SIGTERM, then SIGKILL
after the grace period) reaches whatever it started. As a container's processes all end with
its first one, whatever is left of its session when that process ends is killed: a child that
moved to a process group of its own (as Ray's workers do) goes too. And it is started through
``launch``, which asks the kernel to kill it if the stack dies, so no child outlives the stack.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import posixpath
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.launch import launched

from .addresses import LoopbackAddresses
from .dns import ClusterDns
from .programs import ImageProgram
from .settings import ClusterSettings

Lookup = Callable[[str, str, str], dict[str, Any] | None]
"""Reads an object of the cluster: (resource, namespace, name) to the object, or None."""

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

PROCESS_EXIT_SECONDS = 5.0
"""The longest the runtime waits for a killed pod's processes to exit."""


class ContainerConfigError(Exception):
    """The container cannot be run as a process (the kubelet's ``CreateContainerConfigError``)."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined name is replaced, ``$$`` is a literal ``$``,
    anything else stays as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(replace, text)


@dataclass
class RunningContainer:
    """A container's process, and where its output goes."""

    process: subprocess.Popen[bytes]
    log_path: Path
    group: int


class ProcessRuntime:
    """Starts and stops the processes of every process-run pod of the cluster."""

    def __init__(
        self,
        lookup: Lookup,
        addresses: LoopbackAddresses | None = None,
        settings: ClusterSettings | None = None,
        dns: ClusterDns | None = None,
    ) -> None:
        self._root_dir: Path | None = None
        self._dns = dns
        self._lookup = lookup
        self._settings = settings if settings is not None else ClusterSettings()
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], RunningContainer] = {}
        self.addresses = addresses if addresses is not None else LoopbackAddresses()
        """The pods' addresses, from the stack's own block (``addresses``)."""

    # ---- paths --------------------------------------------------------------------------

    @property
    def _root(self) -> Path:
        """The pods' directories, made when first needed (by the kubelet starting a pod, or
        by a reader of a log, on their own threads: one of them makes it)."""
        with self._lock:
            if self._root_dir is None:
                self._root_dir = Path(tempfile.mkdtemp(prefix="devstack-pods-"))
            return self._root_dir

    def pod_dir(self, uid: str) -> Path:
        return self._root / uid

    def log_path(self, uid: str, container: str, restart: int) -> Path:
        return self.pod_dir(uid) / "logs" / container / f"{restart}.log"

    @property
    def node_files(self) -> Path:
        """The nodes' shared file system: the configured one (read when a volume needs it), or
        one beside the pods' directories."""
        configured = self._settings.node_files
        return configured if configured is not None else self._root / "node-files"

    def host_path(self, path: str) -> Path:
        """Where a ``hostPath`` volume's ``path`` is on the nodes' shared file system (``..``
        never leads out of it)."""
        return self.node_files / posixpath.normpath("/" + path).lstrip("/")

    # ---- start --------------------------------------------------------------------------

    def start(
        self,
        pod: dict[str, Any],
        container: dict[str, Any],
        program: ImageProgram,
        restart: int,
        on_exit: Callable[[int], None],
    ) -> None:
        """Start the container's process; ``on_exit(code)`` is called (from another thread)
        when it ends. Raises ``ContainerConfigError`` when it cannot be run."""
        meta = pod["metadata"]
        uid, name = str(meta.get("uid")), str(container.get("name"))
        mounts = self._prepare_volumes(pod, container)
        env = self._environment(pod, container, program)
        argv = [
            _rewrite(expand(arg, env), mounts) if from_pod else expand(arg, env)
            for arg, from_pod in program.argv_sources(container)
        ]
        if not argv:
            raise ContainerConfigError(f"container {name} has no command and its image none")
        home = self.pod_dir(uid) / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            k: v if program.env.get(k) == v else _rewrite_env_value(v, mounts)
            for k, v in env.items()
        }
        given = env.get("HOME") or _rewrite(_passwd_home(pod, container, mounts), mounts)
        env["HOME"] = given if _under_any(given, mounts) else str(home)
        env["PATH"] = stack_path()
        if self._dns is not None:
            env.update(self._dns.environment(env.get("PYTHONPATH", "")))
        working = container.get("workingDir")
        cwd = Path(_rewrite(str(working), mounts)) if working else home
        if not working and program.working_dir:
            cwd = Path(program.working_dir)
        if not cwd.is_dir():
            raise ContainerConfigError(f"working directory {working} does not exist here")
        if shutil.which(argv[0], path=env["PATH"]) is None and not Path(argv[0]).is_file():
            raise ContainerConfigError(f'executable "{argv[0]}" not found on the stack\'s PATH')
        log_path = self.log_path(uid, name, restart)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                launched(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        running = RunningContainer(process, log_path, process.pid)
        with self._lock:
            self._running[(uid, name)] = running

        def wait() -> None:
            code = process.wait()
            _kill_session(running.group)
            with self._lock:
                if self._running.get((uid, name)) is running:
                    del self._running[(uid, name)]
            # A process killed by a signal reports 128 + the signal, as a runtime does.
            on_exit(code if code >= 0 else 128 - code)

        threading.Thread(target=wait, name=f"pod-{name}-wait", daemon=True).start()

    # ---- stop ---------------------------------------------------------------------------

    def stop_pod(self, uid: str, grace_seconds: float) -> None:
        """SIGTERM to every process group of the pod; SIGKILL to any left after the grace
        period. Returns at once; the waiters report each exit."""
        with self._lock:
            groups = [r for (u, _), r in self._running.items() if u == uid]
        for running in groups:
            _signal_group(running.group, signal.SIGTERM)
        if groups:
            timer = threading.Timer(max(0.0, grace_seconds), _kill_all_alive, args=(groups,))
            timer.daemon = True
            timer.start()

    def kill_pod(self, uid: str, timeout: float = PROCESS_EXIT_SECONDS) -> None:
        """SIGKILL every process of the pod (a pod deleted with no grace period), and return
        once none is alive, within ``timeout``: its address is handed out again only then,
        never to a pod whose port a dying process still holds."""
        with self._lock:
            groups = [r for (u, _), r in self._running.items() if u == uid]
        for running in groups:
            _kill_session(running.group)
        pids = [pid for r in groups for pid in (r.process.pid, *session_members(r.group))]
        await_exits(pids, timeout)

    def forget_pod(self, uid: str) -> None:
        """Remove the pod's directory once its processes are gone."""
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)

    def stop_all(self) -> None:
        """Kill every process at once (the stack is stopping) and wait for them."""
        with self._lock:
            everything = list(self._running.values())
            self._running.clear()
        for running in everything:
            _kill_session(running.group)
        for running in everything:
            with contextlib.suppress(subprocess.TimeoutExpired):
                running.process.wait(timeout=PROCESS_EXIT_SECONDS)
        # A container's other processes outlive its first by the moment SIGKILL takes; the
        # stack gives its address block up only once nothing of its pods listens there.
        await_exits(
            [pid for running in everything for pid in session_members(running.group)],
            PROCESS_EXIT_SECONDS,
        )
        with self._lock:
            root, self._root_dir = self._root_dir, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def is_running(self, uid: str, container: str) -> bool:
        """Whether the container's process is running now."""
        with self._lock:
            return (uid, container) in self._running

    def running(self, uid: str) -> list[int]:
        """The process ids of the pod's running containers."""
        with self._lock:
            return [r.process.pid for (u, _), r in self._running.items() if u == uid]

    # ---- what the process gets ----------------------------------------------------------

    def _environment(
        self, pod: dict[str, Any], container: dict[str, Any], program: ImageProgram
    ) -> dict[str, str]:
        meta = pod["metadata"]
        namespace = str(meta.get("namespace") or "")
        status = pod.get("status") or {}
        env: dict[str, str] = dict(program.env)
        env["POD_NAME"] = str(meta.get("name"))
        env["POD_IP"] = str(status.get("podIP") or "")
        for source in container.get("envFrom") or []:
            prefix = str(source.get("prefix") or "")
            for key, value in self._source_data(namespace, source).items():
                env[prefix + key] = value
        for item in container.get("env") or []:
            name = str(item.get("name"))
            if "valueFrom" in item:
                found = self._value_from(pod, item["valueFrom"])
                if found is not None:
                    env[name] = found
            else:
                env[name] = expand(str(item.get("value") or ""), env)
        return env

    def _source_data(self, namespace: str, source: dict[str, Any]) -> dict[str, str]:
        for key, resource in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            ref = source.get(key)
            if ref is None:
                continue
            obj = self._lookup(resource, namespace, str(ref.get("name")))
            if obj is None:
                if ref.get("optional"):
                    return {}
                raise ContainerConfigError(f'{resource[:-1]} "{ref.get("name")}" not found')
            return _data_of(obj, secret=resource == "secrets")
        return {}

    def _value_from(self, pod: dict[str, Any], value_from: dict[str, Any]) -> str | None:
        if "fieldRef" in value_from:
            return _field(pod, str(value_from["fieldRef"].get("fieldPath")))
        namespace = str(pod["metadata"].get("namespace") or "")
        for key, resource in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
            ref = value_from.get(key)
            if ref is None:
                continue
            obj = self._lookup(resource, namespace, str(ref.get("name")))
            data = _data_of(obj, secret=resource == "secrets") if obj is not None else None
            if data is None or str(ref.get("key")) not in data:
                if ref.get("optional"):
                    return None
                raise ContainerConfigError(
                    f'couldn\'t find key {ref.get("key")} in {resource[:-1]} "{ref.get("name")}"'
                )
            return data[str(ref.get("key"))]
        raise ContainerConfigError("an env valueFrom of a kind the local stack does not run")

    def _prepare_volumes(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Path]:
        """Write the pod's volumes out once; the container's mount paths to their directories."""
        meta = pod["metadata"]
        uid, namespace = str(meta.get("uid")), str(meta.get("namespace") or "")
        volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(str(mount.get("name")))
            if volume is None:
                raise ContainerConfigError(f'volume "{mount.get("name")}" is not in the pod')
            if "hostPath" in volume:
                directory = self.host_path(str(volume["hostPath"].get("path") or "/"))
                directory.mkdir(parents=True, exist_ok=True)
            else:
                directory = self.pod_dir(uid) / "volumes" / str(volume["name"])
                if not directory.exists():
                    directory.mkdir(parents=True)
                    self._fill(volume, namespace, directory)
            target = directory / str(mount.get("subPath") or "")
            mounts[str(mount.get("mountPath")).rstrip("/") or "/"] = target
        return mounts

    def _fill(self, volume: dict[str, Any], namespace: str, directory: Path) -> None:
        for key, resource, name_key in (
            ("configMap", "configmaps", "name"),
            ("secret", "secrets", "secretName"),
        ):
            source = volume.get(key)
            if source is None:
                continue
            obj = self._lookup(resource, namespace, str(source.get(name_key)))
            if obj is None:
                if source.get("optional"):
                    return
                raise ContainerConfigError(f'{resource[:-1]} "{source.get(name_key)}" not found')
            data = _data_of(obj, secret=resource == "secrets")
            items = source.get("items")
            paths = (
                {str(i["key"]): str(i["path"]) for i in items} if items else {k: k for k in data}
            )
            for data_key, path in paths.items():
                if data_key in data:
                    file = directory / path
                    file.parent.mkdir(parents=True, exist_ok=True)
                    file.write_text(data[data_key])
            return
        # emptyDir, and volumes a process cannot have (NFS, PVCs): an empty directory of the
        # pod's own.


def stack_path() -> str:
    """Where containers' programs are found: the scripts beside the stack's own Python (its
    virtual environment's ``bin``, whether or not it is activated), then the stack's ``PATH``."""
    scripts = str(Path(sys.executable).parent)
    rest = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != scripts]
    return os.pathsep.join([scripts, *rest])


def _data_of(obj: dict[str, Any], *, secret: bool) -> dict[str, str]:
    """A ConfigMap's or Secret's data as text (a Secret's values are base64)."""
    data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    if secret:
        data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
    return data


def _field(pod: dict[str, Any], path: str) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    fields = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in fields:
        return str(fields[path] or "")
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2)) or "")
    raise ContainerConfigError(f"fieldRef {path} is not one the local stack provides")


def _rewrite(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with a leading mount path replaced by that mount's directory."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        if value == mount_path or value.startswith(mount_path + "/"):
            return str(mounts[mount_path]) + value[len(mount_path) :]
    return value


def _rewrite_env_value(value: str, mounts: Mapping[str, Path]) -> str:
    """An ``env`` value rewritten: as a whole (:func:`_rewrite`), or, when it is a JSON object
    or array, string by string inside it, the document then written out again."""
    if value.lstrip()[:1] in ("{", "["):
        try:
            document = json.loads(value)
        except ValueError:
            return _rewrite(value, mounts)
        rewritten = _rewrite_strings(document, mounts)
        return value if rewritten == document else json.dumps(rewritten, separators=(",", ":"))
    return _rewrite(value, mounts)


def _rewrite_strings(node: Any, mounts: Mapping[str, Path]) -> Any:
    """A JSON value with every string in it (not the keys) rewritten."""
    if isinstance(node, str):
        return _rewrite(node, mounts)
    if isinstance(node, list):
        return [_rewrite_strings(item, mounts) for item in node]
    if isinstance(node, dict):
        return {key: _rewrite_strings(item, mounts) for key, item in node.items()}
    return node


def _passwd_home(pod: dict[str, Any], container: dict[str, Any], mounts: Mapping[str, Path]) -> str:
    """The home directory of the user the container runs as, from the ``/etc/passwd`` the pod
    mounts (as a runtime reads it inside the container); "" when there is none to read."""
    uid = (container.get("securityContext") or {}).get("runAsUser")
    if uid is None:
        uid = ((pod.get("spec") or {}).get("securityContext") or {}).get("runAsUser")
    passwd = mounts.get("/etc/passwd")
    if uid is None or passwd is None or not passwd.is_file():
        return ""
    for line in passwd.read_text(errors="replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and fields[2] == str(uid):
            return fields[5]
    return ""


def _under_any(value: str, mounts: Mapping[str, Path]) -> bool:
    return any(value.startswith(str(path)) for path in mounts.values()) if value else False


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _kill_all_alive(groups: list[RunningContainer]) -> None:
    for running in groups:
        if running.process.poll() is None:
            _kill_session(running.group)


def _kill_session(session: int) -> None:
    """SIGKILL to every process of ``session`` (a container's: its first process's id), in
    its group or not; its group alone where ``/proc`` cannot say who is in the session."""
    _signal_group(session, signal.SIGKILL)
    for pid in session_members(session):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def await_exits(pids: Iterable[int], timeout: float) -> set[int]:
    """Wait, within ``timeout``, for every process of ``pids`` to exit (a zombie has: it
    holds no socket); the ones still running then. Each is awaited on a pidfd, which becomes
    readable as its process exits."""
    deadline = time.monotonic() + timeout
    running = set()
    for pid in pids:
        try:
            descriptor = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # gone already
        try:
            remaining = max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([descriptor], [], [], remaining)
            if not readable:
                running.add(pid)
        finally:
            os.close(descriptor)
    return running


def session_members(session: int) -> list[int]:
    """The live (not yet exited) processes of ``session``, from ``/proc`` (none without it)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            # After the command's closing parenthesis: state, ppid, pgrp, session, ...
            fields = stat.rpartition(")")[2].split()
            if len(fields) > 3 and fields[3] == str(session) and fields[0] != "Z":
                found.append(int(entry.name))
    return found
