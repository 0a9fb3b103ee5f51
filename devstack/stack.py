"""The whole local stack: Redis, the emulators, the labs and the service.

Used by ``make run`` (through ``python -m devstack``), by the tests that run the real gunicorn,
and by the benchmarks. The emulators run as threads of this process; the service runs in
processes of its own talking to them over HTTP, as it would in a cluster. Each replica runs
two, as the chart's pod runs two containers: the web role's gunicorn on the replica's port,
and the runner (``runner.py``), which runs the operations, on a port of its own
(``app.models.process_role``), started again whenever it exits, as the kubelet would. With
``replicas`` above one, each replica has its own ports, behind a load balancer
(``devstack.balancer``) at ``spawner_url`` that sends each request to the next replica in
turn, as a Kubernetes Service spreads requests over the service's pods.

Group apps are reached as in a cluster: through the ingress (``devstack.ingress``, at
``ingress_url``), which asks the Gafaelfawr emulator about every request to an Ingress made from
a GafaelfawrIngress, and whose Gafaelfawr grants each demo group's members ``app:<group>``
(``StackOptions.group_mapping``).

Labs come in two forms. With ``real_labs`` (``make run``'s default) each lab pod runs a real
JupyterHub single-user server as a process on its own loopback address, and JupyterHub reaches
it through its Service's cluster IP (``lab.internalUrl: http://{cluster_ip}:{port}``), which
the emulator forwards to the pod. Without it, lab pods are emulated and one lab stand-in
answers at every lab's ``internal_url``: what tests and benchmarks that need a lab that does
nothing use.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.models.process_role import ROLE_ENV, ProcessRole
from app.runtime.defaults import default_workers
from devstack.balancer import Backend, LoadBalancer
from devstack.dask_operator import DaskOperatorProcess
from devstack.demo import (
    demo_group_mapping,
    demo_registry_repositories,
    demo_tokens,
    demo_users,
)
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.homes import provision_homes
from devstack.images import DEFAULT_PROGRAMS, load_programs
from devstack.ingress import IngressProxy
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.kube.crds import OPERATOR_CRDS, crd
from devstack.lab_standin import LabStandIn
from devstack.launch import launched
from devstack.readiness import await_url
from devstack.redis_process import RedisProcess, free_port
from devstack.registry import RegistryEmulator
from devstack.restarted import RestartedProcess
from devstack.sentinel import SentinelGroup
from devstack.tls import authority_for
from devstack.virtualenvs import REPO_ROOT, service_python

WEB_COMMAND = [service_python(), "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
"""The web container's command, as the chart runs it, with the image's packages."""
RUNNER_COMMAND = [service_python(), "runner.py"]
"""The runner container's command, as the chart runs it, with the image's packages."""
DEMO_CONFIG = REPO_ROOT / "app" / "config" / "demo.yaml"
SERVICE_NAMESPACE = "nublado"
DEMO_SECRETS = {"butler-credentials": "ZGVtby1jcmVkZW50aWFscw=="}
"""The Secret the demo configuration copies into every lab (base64 of a fake credential)."""
FILESERVER_NAMESPACE = "fileservers"
"""Where users' file servers run when the configuration names no other (the chart makes it)."""
REAL_LAB_URL = "http://{cluster_ip}:{port}"
"""``lab.internalUrl`` for real labs: the Service's loopback address, forwarded to the pod."""


@dataclass
class StackOptions:
    """What to start and where."""

    state_dir: Path = field(default_factory=lambda: REPO_ROOT / ".devstack")
    redis_url: str | None = None
    redis_sentinel: bool = False
    """Run Redis as a primary, a replica and three sentinels (``devstack.sentinel``), and
    have the service find the primary through the sentinels; ``redis_url`` is then ignored."""
    spawner_port: int = 0
    workers: int = field(default_factory=default_workers)
    """Web workers per replica."""
    replicas: int = 1
    """Replicas of the service, each its web gunicorn and its runner process; above one,
    behind a balancer."""
    balancer: bool | None = None
    """Whether the balancer stands in front of the replicas: None for "when more than one"
    (a benchmark comparing one replica with several puts it in front of one too)."""
    nodes: int = 3
    pull_seconds: float = 0.5
    start_seconds: float = 0.0
    """How long the kubelet takes to start a pod's containers once its image is there."""
    api_latency: float = 0.0
    """Seconds each Kubernetes API request waits before it is handled."""
    extra_env: dict[str, str] = field(default_factory=dict)
    config_overrides: dict[str, Any] = field(default_factory=dict)
    """Merged into the service configuration, section by section."""
    log_path: Path | None = None
    """Where each replica's gunicorn output (the service's log, and the access log unless
    ``SPAWNER_ACCESS_LOG`` names a file) is appended; None for this process's own."""
    real_labs: bool = False
    """Run each lab as a real Jupyter server (``devstack.images``) instead of the stand-in."""
    programs: Path = DEFAULT_PROGRAMS
    """With ``real_labs``, which images run as processes and what they run."""
    group_mapping: dict[str, list[str]] | None = None
    """Gafaelfawr's ``groupMapping``: each scope to the groups whose members get it; None for
    the demo mapping (``app:<group>`` for every demo group)."""


class LocalStack:
    """Starts everything in dependency order and stops it in reverse."""

    def __init__(self, options: StackOptions | None = None) -> None:
        self.options = options or StackOptions()
        self.redis: RedisProcess | None = None
        self.sentinel: SentinelGroup | None = None
        self.redis_url = "" if self.options.redis_sentinel else self.options.redis_url or ""
        self.authority = authority_for(self.options.state_dir)
        """The CA the stack's HTTPS servers (the Kubernetes API, the registry) are signed by."""
        self.registry = RegistryEmulator(
            repositories=demo_registry_repositories(), authority=self.authority
        )
        self.kube = KubernetesEmulator(
            settings=ClusterSettings(
                pull_seconds=self.options.pull_seconds,
                start_seconds=self.options.start_seconds,
                image_digest_resolver=self.registry.digest_for_reference,
                programs=load_programs(self.options.programs) if self.options.real_labs else {},
                node_files=self.node_files,
            ),
            api_latency=self.options.api_latency,
            authority=self.authority,
        )
        mapping = self.options.group_mapping
        self.gafaelfawr = GafaelfawrEmulator(
            users=demo_users(),
            tokens=list(demo_tokens().values()),
            group_mapping=demo_group_mapping() if mapping is None else mapping,
        )
        self.ingress = IngressProxy(self.kube.store)
        """The ingress controller: Ingresses (GafaelfawrIngresses' among them) served here."""
        self.lab_standin: LabStandIn | None = None
        if not self.options.real_labs:
            self.lab_standin = LabStandIn(self.kube.store, self._namespace_prefix())
        self.dask_operator: DaskOperatorProcess | None = None
        """The real dask-kubernetes operator, against this stack's API."""
        self.replicas: list[SpawnerReplica] = []
        self.balancer: LoadBalancer | None = None
        self.spawner_port = 0
        self.spawner_url = ""

    # Start-up ------------------------------------------------------------------------

    def start(self, *, spawner: bool = True) -> LocalStack:
        state_dir = self.options.state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        if self.options.redis_sentinel:
            self.sentinel = SentinelGroup(state_dir / "redis-sentinel").start()
            # The primary at start-up, for tools that read Redis directly; the service
            # itself asks the sentinels (``sentinel.primary_client()`` follows failovers).
            host, port = self.sentinel.primary_address()
            self.redis_url = f"redis://{host}:{port}/0"
        elif not self.redis_url:
            self.redis = RedisProcess(state_dir / "redis").start()
            self.redis_url = self.redis.url
        self.registry.start()
        self.gafaelfawr.start()
        # The Ingresses Gafaelfawr's operator makes send their auth subrequests here.
        self.kube.cluster.settings.gafaelfawr_url = self.gafaelfawr.url
        self.kube.start()
        if self.kube.cluster.settings.programs:
            # The loopback block its pods and Services take their addresses from, claimed
            # now so that the state file names it (another stack has another).
            self.kube.cluster.addresses.block()
        for index in range(self.options.nodes):
            self.kube.cluster.add_node(f"node-{index + 1}")
        install_platform(self.kube)
        self.ingress.start()
        if self.lab_standin is not None:
            self.lab_standin.start()
        self.spawner_port = self.options.spawner_port or free_port()
        self.spawner_url = f"http://127.0.0.1:{self.spawner_port}"
        balanced = self.options.balancer
        if balanced or (balanced is None and self.options.replicas > 1):
            self.replicas = [
                SpawnerReplica(f"spawner-{index + 1}", free_port())
                for index in range(self.options.replicas)
            ]
            self.balancer = LoadBalancer(
                state_dir / "balancer",
                self.spawner_port,
                [Backend(replica.name, replica.port) for replica in self.replicas],
            )
        else:
            self.replicas = [SpawnerReplica("spawner-1", self.spawner_port)]
        self._prepare_for_the_configuration()
        self._write_kubeconfig()
        # The operator and the service start side by side: neither needs the other to be up.
        self.dask_operator = DaskOperatorProcess(
            self.kubeconfig_path,
            self.options.state_dir / "dask-operator.log",
            self.kube.cluster.dns.environment(),
        ).launch()
        self._write_config()
        if spawner:
            self._start_spawner()
        self.dask_operator.await_ready()
        self._write_state()
        return self

    def _namespace_prefix(self) -> str:
        """The service's ``namespacePrefix`` in this stack, where the stand-in finds labs."""
        override = self.options.config_overrides.get("namespacePrefix")
        if override:
            return str(override)
        raw: dict[str, Any] = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
        return str(raw["namespacePrefix"])

    @property
    def node_files(self) -> Path:
        """The file system the emulated nodes share: where ``hostPath`` volumes are (the
        demo's home volume ``/srv/home`` at ``node-files/srv/home``), kept between runs."""
        return self.options.state_dir / "node-files"

    def _prepare_for_the_configuration(self) -> None:
        """What the service's configuration expects of the platform: each demo user's home
        directory, as the lab's provisioning init container would make it
        (``devstack.homes``), and, with file servers enabled, their namespace, which the chart
        creates on a cluster."""
        config = self.service_config()
        people = [user.username for user in demo_users() if user.uid is not None]
        provision_homes(config["lab"], people, self.kube.cluster.processes.host_path)
        fileserver = config.get("fileserver")
        if isinstance(fileserver, dict) and fileserver.get("enabled"):
            namespace = str(fileserver.get("namespace") or FILESERVER_NAMESPACE)
            if self.kube.store.get("namespaces", None, namespace) is None:
                self.kube.store.create("namespaces", _namespace(namespace))

    @property
    def kubeconfig_path(self) -> Path:
        return self.options.state_dir / "kubeconfig"

    @property
    def config_path(self) -> Path:
        return self.options.state_dir / "config.yaml"

    def _write_kubeconfig(self) -> None:
        """What ``kubectl`` and the service's ``kubeconfig`` mode read to reach the API."""
        self.kubeconfig_path.write_text(yaml.safe_dump(self.kube.kubeconfig()), encoding="utf-8")

    def service_config(self) -> dict[str, Any]:
        """The service's configuration for this stack (as the YAML document).

        Starts from the service's bundled demo configuration and points it at the
        addresses actually started; image references name this registry and carry the
        digests it serves. A lab's ``internal_url`` is its Service's cluster IP when labs are
        real, else the lab stand-in (one port for all: JupyterHub adds ``/user/<name>/``
        itself).
        """
        raw: dict[str, Any] = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
        raw["gafaelfawr"]["url"] = self.gafaelfawr.url
        # Plain lines for a terminal; a test or a benchmark may override it.
        raw["logFormat"] = "text"
        raw["redis"] = (
            self.sentinel.service_config() if self.sentinel is not None else {"url": self.redis_url}
        )
        raw["kubernetes"] = {
            "mode": "kubeconfig",
            "kubeconfig": str(self.kubeconfig_path),
            "requestTimeout": 10,
            "serviceNamespace": SERVICE_NAMESPACE,
        }
        raw["lab"]["env"]["EXTERNAL_INSTANCE_URL"] = self.spawner_url or "http://127.0.0.1"
        # Where the Python client in a lab finds the service (it reads LAB_SPAWNER_URL).
        raw["lab"]["env"]["LAB_SPAWNER_URL"] = self.spawner_url or "http://127.0.0.1"
        raw["lab"]["internalUrl"] = (
            self.lab_standin.url if self.lab_standin is not None else REAL_LAB_URL
        )
        # A notebook on the machine is outside the stack's cluster DNS (only the processes the
        # stack starts have it): clusters' addresses name their head Service by its cluster IP.
        raw["clusters"]["reachBy"] = "clusterIP"
        for container in raw["lab"].get("initContainers", []):
            container["image"] = self._local_reference(container["image"])
        admin_pod = raw.get("admin", {}).get("pod", {})
        if admin_pod.get("image"):
            admin_pod["image"] = self._local_reference(admin_pod["image"])
        for key, value in self.options.config_overrides.items():
            if isinstance(value, dict) and isinstance(raw.get(key), dict):
                raw[key] = {**raw[key], **value}
            else:
                raw[key] = value
        if self.lab_standin is not None and "prepull" not in self.options.config_overrides:
            # Emulated pods cannot run a validation command: the sources that validate
            # their builds are real labs' (make run's) only.
            raw["prepull"] = [block for block in raw["prepull"] if "validation" not in block]
        # Image sources name the registry at its default port, overridden ones too.
        for block in raw["prepull"]:
            if "registry" in block:
                block["registry"] = self.registry.host
            for image in block.get("images", []):
                image["url"] = self._local_reference(image["url"])
        # The registry is HTTPS, signed by the stack's CA, which the service trusts through
        # REQUESTS_CA_BUNDLE (``start_replica``), as a private registry's CA is trusted.
        raw["images"].pop("insecureRegistries", None)
        if isinstance(raw.get("apps"), dict):
            self._local_apps(raw["apps"])
        if isinstance(raw.get("fileserver"), dict):
            self._local_fileserver(raw["fileserver"])
        return raw

    def _local_apps(self, apps: dict[str, Any]) -> None:
        """Apps are served by this stack's ingress, and their templates' images come from
        its registry."""
        apps["baseUrl"] = self.ingress.url
        for template in apps.get("templates") or []:
            pod = template.get("podTemplate") or {}
            for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                if container.get("image"):
                    container["image"] = self._local_reference(container["image"])

    def _local_fileserver(self, fileserver: dict[str, Any]) -> None:
        """Users' file servers are served by this stack's ingress, from its registry's image.
        (A test shortens their idle timeout with ``config_overrides={"fileserver":
        {"idleTimeout": 5}}``.)"""
        fileserver["baseUrl"] = self.ingress.url
        if fileserver.get("image"):
            fileserver["image"] = self._local_reference(fileserver["image"])

    @property
    def demo_image(self) -> str:
        """A demo image every spawn may use at once: the first image of a fixed list, known
        without waiting for the first registry refresh."""
        for block in self.service_config()["prepull"]:
            for image in block.get("images", []):
                return str(image["url"])
        raise LookupError("the configuration lists no fixed image")

    def _local_reference(self, reference: str) -> str:
        """The demo config names the registry at its default port; use the real one."""
        _, _, path = reference.partition("/")
        return f"{self.registry.host}/{path}"

    def _write_config(self) -> None:
        text = yaml.safe_dump(self.service_config(), sort_keys=False)
        self.config_path.write_text(text, encoding="utf-8")

    @property
    def spawner_process(self) -> subprocess.Popen[bytes] | None:
        """The first replica's web gunicorn master (the only one, unless ``replicas`` is set)."""
        return self.replicas[0].process if self.replicas else None

    @property
    def runner_process(self) -> RestartedProcess | None:
        """The first replica's runner process."""
        return self.replicas[0].runner if self.replicas else None

    def _start_spawner(self, timeout: float = 60.0) -> None:
        for replica in self.replicas:
            self.start_replica(replica, wait=False)
        for replica in self.replicas:
            self._await_ready(replica, timeout)
        if self.balancer is not None:
            self.balancer.start()
            await_url(f"{self.spawner_url}/readyz", timeout, None, "gunicorn")

    def start_replica(self, replica: SpawnerReplica, *, wait: bool = True) -> None:
        """Start ``replica``'s runner process and web gunicorn on their ports (again, after
        they stopped). The runner is started again whenever it exits, as the kubelet restarts
        a pod's container (``devstack.restarted``)."""
        runner_env = self.service_env(replica, ProcessRole.RUNNER, replica.runner_port)
        replica.runner = RestartedProcess(lambda: self._start_process(RUNNER_COMMAND, runner_env))
        replica.process = self._start_process(
            WEB_COMMAND, self.service_env(replica, ProcessRole.WEB, replica.port)
        )
        if wait:
            self._await_ready(replica, 60.0)

    def service_env(self, replica: SpawnerReplica, role: ProcessRole, port: int) -> dict[str, str]:
        """The environment of ``replica``'s process of ``role``: this process's, with what
        the service needs to find the stack (the benchmarks start it with this too)."""
        env = dict(os.environ)
        if role is not ProcessRole.RUNNER:
            env["SPAWNER_WORKERS"] = str(self.options.workers)
        env.update(
            {
                ROLE_ENV: role.value,
                "SPAWNER_BIND": f"127.0.0.1:{port}",
                "SPAWNER_CONFIG_PATH": str(self.config_path),
                "SPAWNER_REDIS_URL": self.redis_url,
                "SPAWNER_REPLICA_NAME": replica.name,
                "SPAWNER_REPLICA_URL": replica.url,
                "PYTHONUNBUFFERED": "1",
                # The public CAs and the stack's: how the service trusts the registry.
                "REQUESTS_CA_BUNDLE": str(self.authority.bundle_path),
            }
        )
        if self.sentinel is not None:
            del env["SPAWNER_REDIS_URL"]  # it would replace the sentinels in the config
        env.update(self.options.extra_env)
        return env

    def _start_process(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        if self.options.log_path is None:
            return subprocess.Popen(launched(command), cwd=REPO_ROOT, env=env)
        with self.options.log_path.open("ab") as log:
            return subprocess.Popen(
                launched(command), cwd=REPO_ROOT, env=env, stdout=log, stderr=log
            )

    def _await_ready(self, replica: SpawnerReplica, timeout: float) -> None:
        await_url(f"{replica.url}/readyz", timeout, replica.process, "gunicorn")
        # Its first run: one that ends at start-up (a bad configuration) fails the start.
        runner = replica.runner.process if replica.runner is not None else None
        await_url(f"{replica.runner_url}/readyz", timeout, runner, "the runner")

    def replica_named(self, name: str) -> SpawnerReplica:
        return next(replica for replica in self.replicas if replica.name == name)

    def kill_replica(self, replica: SpawnerReplica) -> None:
        """SIGKILL ``replica``'s runner, web workers and web master, as when the machine under
        it is lost: nothing a process was doing is finished or handed over."""
        if replica.runner is not None:
            replica.runner.kill()
            replica.runner.wait()
        process = replica.process
        if process is not None and process.poll() is None:
            for pid in _children(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.kill()
            process.wait()
        replica.process = replica.runner = None

    def stop_replica(self, replica: SpawnerReplica, timeout: float = 30.0) -> int | None:
        """SIGTERM ``replica``'s web master and runner at once, as Kubernetes stops a pod's
        containers, and wait for their graceful shutdown; the web master's exit code."""
        processes: list[subprocess.Popen[bytes] | RestartedProcess] = [
            p for p in (replica.process, replica.runner) if p is not None
        ]
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        web = replica.process
        replica.process = replica.runner = None
        return web.returncode if web is not None else None

    def state(self) -> dict[str, Any]:
        """What ``.devstack/stack.json`` holds: addresses, the demo tokens (with the scopes
        Gafaelfawr reports for them, group-mapped ones included) and the group mapping."""
        tokens = {
            name: {
                "token": spec.token,
                "username": spec.username,
                "scopes": list(self.gafaelfawr.effective_scopes(spec)),
            }
            for name, spec in demo_tokens().items()
        }
        return {
            "spawner_url": self.spawner_url,
            "replicas": [
                {
                    "name": replica.name,
                    "url": replica.url,
                    "pid": replica.pid,
                    "runner_url": replica.runner_url,
                    "runner_pid": replica.runner.pid if replica.runner is not None else None,
                }
                for replica in self.replicas
            ],
            "kubernetes_url": self.kube.url,
            "ca_certificate": str(self.authority.ca_path),
            "gafaelfawr_url": self.gafaelfawr.url,
            "registry_url": self.registry.url,
            "ingress_url": self.ingress.url,
            "node_files": str(self.node_files),
            **({"lab_url": self.lab_standin.url} if self.lab_standin is not None else {}),
            **(
                {"addresses": block.describe()}
                if (block := self.kube.cluster.addresses.claimed())
                else {}
            ),
            "redis_url": self.redis_url,
            **(
                {"redis_sentinel": self.sentinel.service_config()["sentinel"]}
                if self.sentinel is not None
                else {}
            ),
            "tokens": tokens,
            "group_mapping": self.gafaelfawr.group_mapping,
        }

    def _write_state(self) -> None:
        path = self.options.state_dir / "stack.json"
        path.write_text(json.dumps(self.state(), indent=2) + "\n", encoding="utf-8")

    # Shutdown ------------------------------------------------------------------------

    def stop_spawner(self, timeout: float = 30.0) -> int | None:
        """SIGTERM every replica and wait for their graceful shutdown, then stop the
        balancer; returns the first replica's exit code."""
        codes = [self.stop_replica(replica, timeout) for replica in self.replicas]
        if self.balancer is not None:
            self.balancer.stop()
        return codes[0] if codes else None

    def restart_spawner(self, *, kill: bool = True) -> None:
        """Stop every replica and start them again on their ports. With ``kill``, their
        workers and then their masters get SIGKILL, as when the machines under them are
        lost: nothing a worker was doing is finished or handed over."""
        for replica in self.replicas:
            if kill:
                self.kill_replica(replica)
            else:
                self.stop_replica(replica)
        for replica in self.replicas:
            self.start_replica(replica, wait=False)
        for replica in self.replicas:
            self._await_ready(replica, 60.0)

    def stop(self) -> None:
        self.stop_spawner()
        if self.lab_standin is not None:
            self.lab_standin.stop()
        self.ingress.stop()
        self.gafaelfawr.stop()
        if self.dask_operator is not None:
            self.dask_operator.stop()
        self.kube.stop()
        self.registry.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.sentinel is not None:
            self.sentinel.stop()


def install_platform(kube: KubernetesEmulator) -> None:
    """What the cluster holds before the service runs: the service's namespace with the
    Secret the demo configuration copies into labs, and the custom resources of the
    operators a platform runs beside the service (Dask, Ray, Spark clusters, and Gafaelfawr,
    whose GafaelfawrIngresses become Ingresses)."""
    kube.store.create("namespaces", _namespace(SERVICE_NAMESPACE))
    for plural in OPERATOR_CRDS:
        kube.store.create("customresourcedefinitions", crd(plural))
    kube.store.create(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "lab-secrets", "namespace": SERVICE_NAMESPACE},
            "data": DEMO_SECRETS,
        },
    )


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@dataclass
class SpawnerReplica:
    """One replica of the service: its web role's gunicorn master (``process``) on the
    replica's port, and its runner process (``runner``) on a port of its own."""

    name: str
    port: int
    runner_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    runner: RestartedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def runner_url(self) -> str:
        """Where the runner's probes and metrics answer."""
        return f"http://127.0.0.1:{self.runner_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def worker_pids(self) -> list[int]:
        """The pids of its web workers."""
        return _children(self.process.pid) if self.process is not None else []

    def runner_pids(self) -> list[int]:
        """The pid of its runner, which runs the operations and elected loops, while it runs."""
        if self.runner is None or self.runner.process.poll() is not None:
            return []
        return [self.runner.pid]


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's ``/proc``; none where it is missing)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(child) for child in text.split()]
