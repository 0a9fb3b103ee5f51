"""Redis with Sentinel for the local stack: a primary, replicas and three sentinels.

Every server is Debian's ``redis-server`` (``--sentinel`` makes one a sentinel), started
through the launcher so it dies with the stack, on loopback, without persistence. The
sentinels judge the primary down after ``down_after_ms`` of silence and agree on it by a
quorum of two, as a production deployment of three sentinels does.

Every Redis server refuses writes while fewer than ``min_replicas_to_write`` replicas follow
it. With one replica this is what makes a failover lose nothing: the moment the sentinels
promote the replica, the old primary has none left and refuses every write (``NOREPLICAS``)
instead of acknowledging writes the new primary will never see. The price is that a primary
without its replica takes no writes: after the primary is killed, writes resume once the
killed server is back as the new primary's replica (``restart``), as Kubernetes restarts a
pod.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import redis

from devstack.launch import launched
from devstack.redis_process import free_port

SERVICE_NAME = "spawner"
"""The name the sentinels monitor the primary under (the service's ``serviceName``)."""

T = TypeVar("T")


def _wait(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``condition`` until it returns something truthy; Redis errors count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except redis.RedisError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class RedisNode:
    """One ``redis-server`` of the group (a data server, not a sentinel)."""

    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def client(self, timeout: float = 1.0) -> redis.Redis:
        return redis.Redis(
            port=self.port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
        )


class SentinelGroup:
    """Redis servers and the sentinels watching them, with ways to fail the primary over."""

    def __init__(
        self,
        workdir: Path,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        service_name: str = SERVICE_NAME,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 10000,
        min_replicas_to_write: int = 1,
    ) -> None:
        self.workdir = workdir
        self.service_name = service_name
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.min_replicas_to_write = min(min_replicas_to_write, replicas)
        self.nodes = [RedisNode(free_port()) for _ in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self._sentinels: list[subprocess.Popen[bytes]] = []

    # Addresses -----------------------------------------------------------------------

    @property
    def addresses(self) -> list[str]:
        """The sentinels as ``host:port``, as the service's ``redis.sentinel.addresses``."""
        return [f"127.0.0.1:{port}" for port in self.sentinel_ports]

    def service_config(self) -> dict[str, Any]:
        """The service configuration's ``redis`` section for this group."""
        return {"sentinel": {"addresses": self.addresses, "serviceName": self.service_name}}

    def sentinel_client(self, index: int = 0) -> redis.Redis:
        return redis.Redis(
            port=self.sentinel_ports[index],
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            decode_responses=True,
        )

    def primary_address(self) -> tuple[str, int]:
        """Where the sentinels (the first that answers) say the primary is now."""
        for index in range(len(self.sentinel_ports)):
            try:
                answer: Any = self.sentinel_client(index).sentinel_get_master_addr_by_name(
                    self.service_name
                )
            except redis.ConnectionError:
                continue
            if answer:
                host, port = answer
                return str(host), int(port)
        raise redis.ConnectionError("no sentinel names a primary")

    def primary(self) -> RedisNode:
        """The node the sentinels name as the primary."""
        _, port = self.primary_address()
        return next(node for node in self.nodes if node.port == port)

    def primary_client(self) -> redis.Redis:
        """A plain client of the current primary, for tests and tools reading Redis."""
        return self.primary().client()

    # Start-up ------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> SentinelGroup:
        self.workdir.mkdir(parents=True, exist_ok=True)
        primary, *replicas = self.nodes
        self._start_node(primary, replica_of=None)
        for node in replicas:
            self._start_node(node, replica_of=primary.address)
        # Sentinels learn the replicas from the primary's INFO, read at once on connecting and
        # then every ten seconds: started once the replicas are attached, they know them at once.
        _wait(lambda: self._replicas_attached(primary), timeout, "the replicas to attach")
        for index, port in enumerate(self.sentinel_ports):
            self._start_sentinel(index, port, primary.address)
        _wait(self.ready, timeout, "the sentinels to see each other and the replicas")
        return self

    def _start_node(self, node: RedisNode, replica_of: tuple[str, int] | None) -> None:
        args = [_binary(), "--port", str(node.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        args += ["--maxclients", "10000", "--dbfilename", f"dump-{node.port}.rdb"]
        args += ["--min-replicas-to-write", str(self.min_replicas_to_write)]
        args += ["--min-replicas-max-lag", "10"]
        # A replica (re)joining is sent the data at once, not after the default five seconds
        # spent waiting for more replicas to share one transfer: with one replica, the primary
        # takes writes again only once it follows.
        args += ["--repl-diskless-sync-delay", "0"]
        if replica_of is not None:
            args += ["--replicaof", replica_of[0], str(replica_of[1])]
        node.process = subprocess.Popen(
            launched(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = node.client(timeout=0.2)

        def answers() -> bool:
            if not node.running:
                raise RuntimeError(f"redis-server on port {node.port} exited at start-up")
            return bool(client.ping())

        _wait(answers, 10.0, f"redis-server on {node.port}")

    def _start_sentinel(self, index: int, port: int, primary: tuple[str, int]) -> None:
        # A sentinel rewrites its configuration file as it learns: one file each.
        config = self.workdir / f"sentinel-{index}.conf"
        config.write_text(
            "\n".join(
                [
                    f"port {port}",
                    "bind 127.0.0.1",
                    f"dir {self.workdir}",
                    f"sentinel monitor {self.service_name} {primary[0]} {primary[1]} 2",
                    f"sentinel down-after-milliseconds {self.service_name} {self.down_after_ms}",
                    f"sentinel failover-timeout {self.service_name} {self.failover_timeout_ms}",
                    f"sentinel parallel-syncs {self.service_name} 1",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        process = subprocess.Popen(
            launched([_binary(), str(config), "--sentinel"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._sentinels.append(process)
        _wait(lambda: self.sentinel_client(index).ping(), 10.0, f"the sentinel on {port}")

    def _replicas_attached(self, primary: RedisNode) -> bool:
        info = primary.client().info("replication")
        return int(info.get("connected_slaves", 0)) >= len(self.nodes) - 1

    def ready(self) -> bool:
        """Every sentinel sees the others and every replica, linked to the primary: only
        then can it fail over (before, ``SENTINEL FAILOVER`` answers ``NOGOODSLAVE``)."""
        expected_replicas = sum(1 for node in self.nodes if node.running) - 1
        for index in range(len(self.sentinel_ports)):
            client = self.sentinel_client(index)
            master: Any = client.sentinel_master(self.service_name)
            if int(master["num-other-sentinels"]) < len(self.sentinel_ports) - 1:
                return False
            if master.get("is_sdown") or master.get("is_odown"):
                return False
            replicas = client.sentinel_slaves(self.service_name)
            good = [
                r
                for r in replicas
                if not r.get("is_sdown")
                and not r.get("is_disconnected")
                and r.get("master-link-status") == "ok"
            ]
            if len(good) < expected_replicas:
                return False
        return True

    # Failures ------------------------------------------------------------------------

    def failover(self, timeout: float = 30.0) -> tuple[str, int]:
        """Make the sentinels fail the primary over now (``SENTINEL FAILOVER``), as for
        maintenance; returns the old primary's address once another is named.

        The old primary keeps running: it refuses writes from the moment its replica is
        promoted (``min-replicas-to-write``), and the sentinels turn it into the new
        primary's replica about ten seconds later.
        """
        old = self.primary_address()
        _wait(self.ready, timeout, "the sentinels to be ready for a failover")

        def ask() -> bool:
            try:
                return bool(self.sentinel_client(0).sentinel_failover(self.service_name))
            except redis.ResponseError as exc:
                # NOGOODSLAVE: not ready yet, try again; INPROG: a failover is under way.
                return str(exc).startswith("INPROG")

        _wait(ask, timeout, "the sentinels to accept a failover")
        self.wait_for_new_primary(old, timeout)
        return old

    def kill_primary(self) -> RedisNode:
        """SIGKILL the primary, as when its machine is lost; returns the killed node."""
        node = self.primary()
        assert node.process is not None
        node.process.kill()
        node.process.wait()
        return node

    def wait_for_new_primary(self, old: tuple[str, int], timeout: float = 60.0) -> RedisNode:
        """Wait until every sentinel names a primary other than ``old``, and it answers."""

        def elected() -> RedisNode | None:
            named = set()
            for index in range(len(self.sentinel_ports)):
                answer: Any = self.sentinel_client(index).sentinel_get_master_addr_by_name(
                    self.service_name
                )
                if not answer:
                    return None
                named.add((str(answer[0]), int(answer[1])))
            if len(named) != 1 or old in named:
                return None
            node = self.primary()
            return node if node.running and node.client().ping() else None

        return _wait(elected, timeout, "the sentinels to elect a new primary")

    def restart(self, node: RedisNode, timeout: float = 60.0) -> None:
        """Start a killed server again, as the current primary's replica, as a restarted
        pod does: only once the sentinels named another primary, since a server without
        persistence that came back as the primary would bring back an empty Redis."""
        if node.running:
            return
        primary = self.wait_for_new_primary(node.address, timeout)
        self._start_node(node, replica_of=primary.address)
        _wait(lambda: self._replicas_attached(primary), timeout, "the restarted replica")

    # Shutdown ------------------------------------------------------------------------

    def stop(self) -> None:
        for process in [*self._sentinels, *(n.process for n in self.nodes if n.process)]:
            if process.poll() is None:
                process.terminate()
        for process in [*self._sentinels, *(n.process for n in self.nodes if n.process)]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._sentinels = []
        for node in self.nodes:
            node.process = None


def _binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (make setup installs it)")
    return binary
