"""The local stack and gunicorn processes under the benchmarks' control.

The stack (Redis, the Kubernetes, Gafaelfawr and registry emulators) comes from
``devstack.stack.LocalStack``. gunicorn is started here rather than by the stack so that a
benchmark chooses the worker count and connection limit, sends the access log to a file
instead of the terminal, and can start a second gunicorn (the bare route) with exactly the
same settings file. The service itself runs as a replica does (``start_service``): a web
gunicorn and a runner process, with the environment the stack gives its own replicas.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import resource
import signal
import socket
import subprocess
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
import requests

from app.models.process_role import ProcessRole
from app.runtime.defaults import default_workers
from devstack.demo import add_load_users
from devstack.gafaelfawr import GroupSpec
from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT, RUNNER_COMMAND, LocalStack, SpawnerReplica, StackOptions
from devstack.virtualenvs import service_python

REPO_ROOT_TEXT = str(REPO_ROOT)
"""Where ``python -m bench...`` child processes run (the repository root)."""
RECONCILE_OUT_OF_THE_WAY = {"watcher": {"reconcileSeconds": 3600}}
"""For benchmarks whose lab records have no pods behind them: the periodic reconcile would
(rightly) mark them failed in the middle of the measurement, so it runs only at start-up."""
UNCAPPED = {"limits": {"mutationsPerMinute": 1_000_000, "streamsPerWorker": 1_000_000}}
"""Benchmarks spawn and delete one user's lab far more often than a person could; the
per-lab cap on spawns and deletes a minute would otherwise answer most of them 429. The
streams benchmark measures how many streams one worker holds, past the default cap on them
(``worker_connections`` is raised there too)."""
SERVICE_SOURCES = ("wsgi.py", "runner.py", "gunicorn.conf.py", "app", "blueprints")
"""What the service's image compiles to bytecode as it is built (the ``Dockerfile``)."""
BENCH_GROUP = GroupSpec("bench-users", 3000)
FIRST_UID = 20000


def compile_service_bytecode() -> None:
    """Compile the service's modules, as its image is built: a benchmark that times a start
    then measures the image's start, whether or not this environment writes bytecode itself
    (``PYTHONDONTWRITEBYTECODE``)."""
    for name in SERVICE_SOURCES:
        path = REPO_ROOT / name
        compiled = (
            compileall.compile_dir(path, quiet=1)
            if path.is_dir()
            else compileall.compile_file(path, quiet=1)
        )
        if not compiled:
            raise RuntimeError(f"{name} did not compile")


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (gunicorn's workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _proc_kib(path: str, field: str) -> int | None:
    """The kibibytes of ``field`` (``VmRSS:``, ``Pss:``) in a ``/proc`` file, if there."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_kib(pid: int) -> int | None:
    """Resident set size of a process, from ``/proc/<pid>/status``."""
    return _proc_kib(f"/proc/{pid}/status", "VmRSS:")


def pss_kib(pid: int) -> int | None:
    """Proportional set size: each page shared with other processes counted as its share,
    so the sum over processes is the memory they take together (what a container's memory
    accounting charges), unlike a sum of RSS, which counts shared pages once per process."""
    return _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


PAGE_BYTES = resource.getpagesize()
_PAGE_PRESENT = 1 << 63
_FRAME_BITS = (1 << 55) - 1


class FramesHidden(Exception):
    """``/proc/<pid>/pagemap`` gives page frame numbers only to a privileged reader."""


def _resident_frames(pid: int) -> set[int]:
    """The page frames resident in process ``pid``: those read before it ended, if it ends
    while being read."""
    frames: set[int] = set()
    with contextlib.suppress(OSError, ValueError):
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split()
                if fields[-1] == "[vsyscall]":
                    continue
                start, end = (int(address, 16) for address in fields[0].split("-"))
                pagemap.seek(start // PAGE_BYTES * 8)
                for entry in array("Q", pagemap.read((end - start) // PAGE_BYTES * 8)):
                    if entry & _PAGE_PRESENT:
                        if not entry & _FRAME_BITS:
                            raise FramesHidden(pid)
                        frames.add(entry & _FRAME_BITS)
    return frames


def distinct_resident_kib(pids: Iterable[int]) -> int | None:
    """The pages resident in any of ``pids``, each counted once: for a service of several
    processes, what one process's RSS is. A sum of RSS counts a page that forked workers
    share with their master in each of them, and a sum of PSS credits the processes with
    only a share of what they share with the rest of the machine (the interpreter, the C
    libraries), which a lone process's RSS counts whole.

    Read from ``/proc/<pid>/pagemap``, which gives page frame numbers only to a privileged
    reader (CAP_SYS_ADMIN); None when they are hidden. It takes a few tens of milliseconds
    for the service's processes, so samplers read it less often than RSS.
    """
    frames: set[int] = set()
    try:
        for pid in pids:
            frames |= _resident_frames(pid)
    except FramesHidden:
        return None
    return len(frames) * PAGE_BYTES // 1024


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time a process has used."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def run_queue_seconds(pid: int) -> float | None:
    """Seconds the threads of a process have spent runnable but waiting for a core
    (``/proc/<pid>/task/*/schedstat``, its second field); None where the kernel does not
    keep it."""
    waited = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            waited += int((task / "schedstat").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return waited / 1e9


@dataclass
class Gunicorn:
    """One gunicorn arbiter started by a benchmark, with its log file."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path
    stop_seconds: float | None = None

    def worker_pids(self) -> list[int]:
        return children(self.process.pid)

    def worker_rss_kib(self) -> dict[int, int]:
        return {pid: kib for pid in self.worker_pids() if (kib := rss_kib(pid)) is not None}

    def pids(self) -> list[int]:
        """The arbiter and its workers: the whole service."""
        return [self.process.pid, *self.worker_pids()]

    def total_memory_kib(self) -> dict[str, int]:
        """RSS and PSS summed over the arbiter and its workers."""
        pids = self.pids()
        return {
            "rss": sum(rss_kib(pid) or 0 for pid in pids),
            "pss": sum(pss_kib(pid) or 0 for pid in pids),
        }

    def stop(self, graceful: float = 10.0) -> float:
        """SIGTERM, then quick shutdown and SIGKILL if it outlasts ``graceful`` seconds.

        Returns how long the graceful part took (recorded as a finding when it is slow).
        """
        process = self.process
        started = time.monotonic()
        if process.poll() is None:
            workers = self.worker_pids()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=graceful)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                for pid in workers:
                    if Path(f"/proc/{pid}").exists():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
        self.stop_seconds = time.monotonic() - started
        return self.stop_seconds


def start_gunicorn(
    target: str,
    *,
    port: int,
    workers: int,
    log_path: Path,
    env: dict[str, str],
    ready_path: str | None,
    worker_connections: int | None = None,
    timeout: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> Gunicorn:
    """Run ``gunicorn -c gunicorn.conf.py <target>`` from the repository root, and wait
    until ``ready_path`` answers 200 and every worker has booted (with None, return at once).

    The settings file is the service's own, so the service and the bare route run with
    the same worker class, connection limit, keepalive and access log.
    """
    full_env = dict(os.environ)
    full_env.update(env)
    full_env.update(
        {
            "SPAWNER_BIND": f"127.0.0.1:{port}",
            "SPAWNER_WORKERS": str(workers),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if worker_connections is not None:
        full_env["SPAWNER_WORKER_CONNECTIONS"] = str(worker_connections)
    command = [
        service_python(),
        "-m",
        "gunicorn",
        "-c",
        "gunicorn.conf.py",
        "--no-control-socket",
        *extra_args,
        target,
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    server = Gunicorn(process, url, log_path)
    if ready_path is not None:
        await_ready(server, ready_path, workers=workers, timeout=timeout, name=target)
    return server


def await_ready(
    server: Gunicorn, ready_path: str, *, workers: int, timeout: float, name: str
) -> None:
    """Until ``ready_path`` answers 200 and every one of ``workers`` has booted."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn {name} exited at start-up; see its log")
        with contextlib.suppress(requests.RequestException):
            if requests.get(server.url + ready_path, timeout=1).status_code == 200:
                break
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"gunicorn {name} did not become ready in time")
        time.sleep(0.1)
    # Every worker must have booted, not just the first to answer.
    while len(server.worker_pids()) < workers and time.monotonic() < deadline:
        time.sleep(0.05)


@dataclass
class RunnerProcess(Gunicorn):
    """The runner (``runner.py``) started by a benchmark: one process, no workers under it,
    so it is its own one worker."""

    def worker_pids(self) -> list[int]:
        return [self.process.pid] if self.process.poll() is None else []

    def pids(self) -> list[int]:
        return self.worker_pids()

    def total_memory_kib(self) -> dict[str, int]:
        pid = self.process.pid
        return {"rss": rss_kib(pid) or 0, "pss": pss_kib(pid) or 0}


@dataclass
class Service:
    """The service as one replica runs it: the web role's gunicorn, which answers, and the
    runner process, which runs the operations (``app.models.process_role``)."""

    web: Gunicorn
    runner: RunnerProcess

    @property
    def url(self) -> str:
        return self.web.url

    @property
    def stop_seconds(self) -> float | None:
        return self.web.stop_seconds

    def web_worker_pids(self) -> list[int]:
        return self.web.worker_pids()

    def worker_pids(self) -> list[int]:
        """Every process that serves or runs: the web workers and the runner."""
        return [*self.web.worker_pids(), *self.runner.worker_pids()]

    def worker_rss_kib(self) -> dict[int, int]:
        return {**self.web.worker_rss_kib(), **self.runner.worker_rss_kib()}

    def pids(self) -> list[int]:
        """The web master, its workers and the runner: the whole service."""
        return [*self.web.pids(), *self.runner.pids()]

    def total_memory_kib(self) -> dict[str, int]:
        """RSS and PSS summed over the web master, its workers and the runner."""
        web, runner = self.web.total_memory_kib(), self.runner.total_memory_kib()
        return {name: web[name] + runner[name] for name in web}

    def stop(self, graceful: float = 10.0) -> float:
        """Both stopped, as Kubernetes stops a pod's containers; the web's time."""
        self.runner.process.send_signal(signal.SIGTERM)
        seconds = self.web.stop(graceful)
        self.runner.stop(graceful)
        return seconds


def start_service(
    stack: LocalStack,
    *,
    port: int,
    log_path: Path,
    workers: int | None = None,
    worker_connections: int | None = None,
    ready_path: str | None = "/readyz",
    timeout: float = 60.0,
    config_path: Path | None = None,
) -> Service:
    """The service on ``stack`` as a replica runs it: a runner on a port of its own and a
    web gunicorn on ``port``, both with the environment the stack gives its own replicas
    (``LocalStack.service_env``) and the output in ``log_path``; ``config_path`` replaces
    the stack's configuration file."""
    replica = SpawnerReplica("spawner-1", port)
    web_workers = default_workers() if workers is None else workers
    config = {"SPAWNER_CONFIG_PATH": str(config_path)} if config_path else {}
    # Both at once, as Kubernetes starts a pod's containers; then both awaited.
    runner_env = {
        **stack.service_env(replica, ProcessRole.RUNNER, replica.runner_port),
        **config,
        "PYTHONUNBUFFERED": "1",
    }
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            RUNNER_COMMAND, cwd=REPO_ROOT, env=runner_env, stdout=log, stderr=subprocess.STDOUT
        )
    runner = RunnerProcess(process, replica.runner_url, log_path)
    web = start_gunicorn(
        "wsgi:app",
        port=port,
        workers=web_workers,
        log_path=log_path,
        env={**stack.service_env(replica, ProcessRole.WEB, port), **config},
        ready_path=None,
        worker_connections=worker_connections,
        timeout=timeout,
    )
    if ready_path is not None:
        await_ready(runner, ready_path, workers=1, timeout=timeout, name="runner")
        await_ready(web, ready_path, workers=web_workers, timeout=timeout, name="web")
    return Service(web=web, runner=runner)


@dataclass
class StackSettings:
    """What a benchmark needs from the stack."""

    workers: int = field(default_factory=default_workers)
    worker_connections: int | None = None
    nodes: int = 3
    pull_seconds: float = 0.0
    start_seconds: float = 0.0
    """The kubelet's time to start a lab's containers."""
    api_latency: float = 0.0
    """Seconds each Kubernetes API request waits (0: the emulator's own speed)."""
    cache_images: bool = True
    config_overrides: dict[str, Any] = field(default_factory=dict)


class BenchStack:
    """The local stack plus the service under gunicorn; a context manager."""

    def __init__(self, workdir: Path, settings: StackSettings) -> None:
        self.workdir = workdir
        self.settings = settings
        options = StackOptions(
            state_dir=workdir / "stack",
            workers=settings.workers,
            nodes=0,
            pull_seconds=settings.pull_seconds,
            start_seconds=settings.start_seconds,
            api_latency=settings.api_latency,
            config_overrides={**UNCAPPED, **settings.config_overrides},
        )
        self.stack = LocalStack(options)
        self.service: Service | None = None
        self._next_uid = FIRST_UID
        self.service_log = workdir / "service.log"

    def __enter__(self) -> BenchStack:
        stack = self.stack.start(spawner=False)
        images = self.images_to_cache() if self.settings.cache_images else []
        for index in range(self.settings.nodes):
            stack.kube.cluster.add_node(f"node-{index + 1}", images=images)
        self.service = self.start_service()
        return self

    def start_service(self, *, ready_path: str | None = "/readyz") -> Service:
        """The service, web and runner; waits for ``ready_path`` to answer 200 unless None."""
        return start_service(
            self.stack,
            port=self.stack.spawner_port,
            workers=self.settings.workers,
            worker_connections=self.settings.worker_connections,
            log_path=self.service_log,
            ready_path=ready_path,
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.service is not None:
            self.service.stop()
        self.stack.stop()

    # Facts about the running stack ---------------------------------------------------

    @property
    def url(self) -> str:
        return self.stack.spawner_url

    @property
    def config(self) -> dict[str, Any]:
        return self.stack.service_config()

    @property
    def image(self) -> str:
        """The first configured image reference: what every benchmark spawns."""
        return self.stack.demo_image

    @property
    def key_prefix(self) -> str:
        return str(self.config["redis"].get("keyPrefix", "spawner:"))

    @property
    def namespace_prefix(self) -> str:
        return str(self.config.get("namespacePrefix", "nublado"))

    def images_to_cache(self) -> list[str]:
        lab = self.config["lab"]
        images = [self.stack.demo_image]
        images += [str(c["image"]) for c in lab.get("initContainers", [])]
        return images

    def token(self, name: str) -> str:
        return str(self.stack.state()["tokens"][name]["token"])

    @property
    def admin_token(self) -> str:
        return self.token("admin")

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.stack.redis_url, decode_responses=True)

    def add_users(self, names: list[str]) -> dict[str, str]:
        """Register users with a UID, a primary group and one more group; their tokens."""
        tokens = add_load_users(
            self.stack.gafaelfawr, names, first_uid=self._next_uid, group=BENCH_GROUP
        )
        self._next_uid += len(names)
        return tokens

    def lab_namespaces(self) -> list[str]:
        """Namespaces of labs in the emulated cluster (by the service's prefix)."""
        prefix = f"{self.namespace_prefix}-"
        return sorted(
            ns["metadata"]["name"]
            for ns in self.stack.kube.store.list("namespaces")
            if ns["metadata"]["name"].startswith(prefix)
        )

    def lab_pods(self) -> list[tuple[str, str]]:
        prefix = f"{self.namespace_prefix}-"
        return sorted(
            (pod["metadata"]["namespace"], pod["metadata"]["name"])
            for pod in self.stack.kube.store.list("pods")
            if pod["metadata"]["namespace"].startswith(prefix)
        )


def free_ports(count: int) -> list[int]:
    return [free_port() for _ in range(count)]


def log_findings(path: Path, limit: int = 8) -> dict[str, Any]:
    """Warnings, errors and tracebacks in a gunicorn log (the service's own complaints)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {"warnings": 0, "errors": 0, "tracebacks": 0, "samples": []}
    warnings = [line for line in lines if " WARNING " in line or "[WARNING]" in line]
    errors = [
        line for line in lines if " ERROR " in line or "[ERROR]" in line or "CRITICAL" in line
    ]
    tracebacks = sum(1 for line in lines if line.startswith("Traceback"))
    samples = []
    for line in errors + warnings:
        # Keep the message, not the timestamp or pid.
        text = line.split("] ", 2)[-1] if line.startswith("[") else line
        text = text.replace(str(REPO_ROOT), "<repo>").replace(socket.gethostname(), "<host>")
        text = text[:240]
        if text not in samples:
            samples.append(text)
        if len(samples) >= limit:
            break
    return {
        "warnings": len(warnings),
        "errors": len(errors),
        "tracebacks": tracebacks,
        "samples": samples,
    }
