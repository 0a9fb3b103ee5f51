"""The kernel provisioner that runs Jupyter kernels in pods the service starts.

A kernelspec written by ``python -m labspawner.kernels install`` names this provisioner
(``lab-spawner``) with its ``config``: the ``size`` and perhaps the ``image``. Jupyter's
``KernelManager`` then asks this provisioner, instead of a local process, for the kernel:

- ``pre_launch`` chooses a fresh connection key for the kernel and gives it to the manager's
  session; nothing starts yet.
- ``launch_kernel`` asks the service for the kernel (under the manager's kernel id, with the
  key and only the environment the kernelspec and the caller asked for), waits until the
  service says it runs and its ports answer, and returns its address and ports, so the
  manager connects to the pod as it would to a local kernel.
- ``poll``, ``wait``, ``terminate``, ``kill`` and ``cleanup`` read and delete the service's
  record of it; deleting the record deletes the pod and its Secret.
- Interrupts go as ``interrupt_request`` messages on the control channel (the kernelspec's
  ``interrupt_mode`` is ``message``): no signal reaches another pod.
- ``get_provisioner_info`` and ``load_provisioner_info`` let a new manager (a restarted
  server) take the kernel over.

The service's calls are synchronous (``requests``); they run in a worker thread so that the
Jupyter server's event loop goes on serving while a kernel starts. The key and the token are
never logged nor put in an exception's message.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning import KernelProvisionerBase
from traitlets import Float, Integer, Unicode

from labspawner.client import LabSpawnerClient
from labspawner.errors import (
    ConflictError,
    KernelFailedError,
    LabSpawnerError,
    NotFoundError,
    ServiceUnavailableError,
)
from labspawner.kernels.client import SIGNATURE_SCHEME, TRANSPORT, started
from labspawner.kernels.launch import DEFAULT_PORTS, PORT_NAMES
from labspawner.models import Kernel

KERNEL_ID_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
"""Kernel ids the service accepts (a uuid4, as Jupyter makes them, is one)."""
RESERVED_ENV = re.compile(r"^(KERNEL_.*|POD_IP|PYTHONEXECUTABLE)$")
"""Variables the kernel pod's start-up reads (or must not inherit): the service sets them."""
START_POLL_SECONDS = 0.25
"""Between reads of a starting kernel's record."""
WAIT_POLL_SECONDS = 0.2
"""Between polls while waiting for a kernel to end."""
CONNECT_TIMEOUT = 2.0
"""Seconds for one TCP connection attempt to a kernel port."""

T = TypeVar("T")


class LabKernelProvisioner(KernelProvisionerBase):
    """Provisions each kernel as a pod through the lab spawner service.

    Configured by the kernelspec's ``metadata.kernel_provisioner.config`` (``size``, and
    optionally ``image``, ``username``, ``service_url``, ``token``), or like any traitlets
    class (``c.LabKernelProvisioner.launch_timeout = 600``). Inside a lab the service's URL,
    and the token come from the lab's environment (``LAB_SPAWNER_URL``, ``LAB_SPAWNER_TOKEN`` or
    ``ACCESS_TOKEN``), and the user is the token's, as the service knows it.
    """

    size = Unicode("", config=True, help="The lab size or hardware tier the kernel gets.")
    image = Unicode(
        None, allow_none=True, config=True, help="The kernel's image (default: the lab's)."
    )
    username = Unicode(
        None,
        allow_none=True,
        config=True,
        help="Whose kernel it is (default: the token's user, as the service knows it).",
    )
    service_url = Unicode(
        None, allow_none=True, config=True, help="The service's URL (default: $LAB_SPAWNER_URL)."
    )
    token = Unicode(
        None,
        allow_none=True,
        config=True,
        help="The token to call the service with (default: $LAB_SPAWNER_TOKEN or $ACCESS_TOKEN).",
    )
    launch_timeout = Float(
        300.0,
        config=True,
        help="Seconds a kernel may take to run and answer on its ports (its image may be pulled).",
    )
    terminate_grace = Integer(
        5, config=True, help="Seconds a terminated kernel gets to end before it is killed."
    )
    delete_timeout = Float(
        120.0,
        config=True,
        help="Seconds to wait for a deleted kernel's pod to go before the kernel restarts.",
    )
    min_shutdown_wait_time = Float(
        20.0,
        config=True,
        help="The least time a kernel's shutdown is given: a pod ends slower than a process.",
    )
    poll_interval = Float(
        0.2,
        config=True,
        help=(
            "Seconds a poll's answer is reused: a shutdown polls every 0.1 s, and each poll "
            "is a call to the service."
        ),
    )

    # State of the current kernel. Class-level defaults, like LocalProvisioner's, so that a
    # provisioner made only to load persisted information starts empty.
    _service: LabSpawnerClient | None = None
    _service_url: str | None = None
    """The service's URL from persisted information, when no configuration gives one."""
    _owner: str | None = None
    _key: str | None = None
    _launched: bool = False
    _asked_grace: int | None = None
    """The shortest grace the service was asked to delete the kernel with; None before."""
    _gone: bool = False
    """The service no longer has the kernel."""
    _exit_code: int | None = None
    _polled_at: float = 0.0

    @property
    def has_process(self) -> bool:
        """A kernel was launched (or taken over) and not yet cleaned up."""
        return self._launched

    # Start ------------------------------------------------------------------------------

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Check the configuration, choose the kernel's key and give it to the manager's
        session, and narrow the environment to what is sent to the pod. Starts nothing."""
        owner = self._owner or self.username or await self._whose_token()
        if not self.size:
            raise ValueError(
                "the kernelspec's kernel_provisioner config must give a size "
                "(python -m labspawner.kernels install --size ...)"
            )
        self._remote_id()
        self._client()
        asked = _asked_env(kwargs.get("env"))
        kwargs = await super().pre_launch(**kwargs)
        kwargs["env"] = self._remote_env(asked, kwargs["env"])
        kwargs.pop("extra_arguments", None)
        kwargs["cmd"] = list(self.kernel_spec.argv) if self.kernel_spec else []
        # A fresh key for every pod: the previous pod's Secret, and its key, go with it.
        self._key = secrets.token_hex(32)
        self._set_manager_session(self._key)
        self._owner = owner
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        """Ask the service for the kernel and return its connection once it answers.

        Raises the service's error when it refuses (a size or image the user may not have,
        no running lab, past the budget), and :class:`KernelFailedError` when the kernel
        fails to come up (the service's reason in the message) or does not in
        ``launch_timeout`` seconds; a kernel that did not come up is deleted.
        """
        if self._key is None:
            raise RuntimeError("launch_kernel needs pre_launch first")
        kernel_id = self._remote_id()
        deadline = time.monotonic() + self.launch_timeout
        self._forget_state()
        self.log.info(
            "Kernel %s: asking the service for a %s kernel for %s",
            kernel_id,
            self.size,
            self._owner,
        )
        await self._create(kernel_id, dict(kwargs.get("env") or {}), deadline)
        self._launched = True
        try:
            kernel = await self._until_running(kernel_id, deadline)
            await _until_reachable(kernel, deadline)
        except BaseException:
            await self._discard(kernel_id)
            raise
        self.connection_info = self._connection(kernel)
        self.log.info("Kernel %s: running at %s", kernel_id, kernel.ip)
        return self.connection_info

    async def _create(self, kernel_id: str, env: dict[str, str], deadline: float) -> Kernel:
        """POST the kernel. If its id is still held by this kernel's previous pod (a restart
        whose delete had not finished), wait for that pod to go and ask once more."""
        try:
            return await self._post(kernel_id, env)
        except ConflictError as exc:
            if exc.code != "conflict" or not await self._leaving(kernel_id):
                raise
        await self._until_gone(kernel_id, deadline)
        return await self._post(kernel_id, env)

    async def _post(self, kernel_id: str, env: dict[str, str]) -> Kernel:
        key, owner, image = self._key or "", self._owner_name(), self.image or None
        return await self._call(
            lambda s: s.kernels.create(
                owner, self.size, key=key, image=image, env=env, kernel_id=kernel_id, wait=False
            )
        )

    async def _leaving(self, kernel_id: str) -> bool:
        """Whether the service has a kernel of this id that is being deleted."""
        try:
            kernel = await self._call(lambda s: s.kernels.get(self._owner_name(), kernel_id))
        except NotFoundError:
            return False
        return kernel.terminating

    async def _until_running(self, kernel_id: str, deadline: float) -> Kernel:
        while True:
            try:
                kernel = await self._call(lambda s: s.kernels.get(self._owner_name(), kernel_id))
            except NotFoundError:
                raise KernelFailedError(
                    f"kernel {kernel_id} was deleted while it started", code="gone"
                ) from None
            if started(kernel):
                if not kernel.ip:
                    raise KernelFailedError(
                        f"kernel {kernel_id} runs but the service gives no address",
                        code="no_address",
                    )
                return kernel
            if time.monotonic() > deadline:
                raise KernelFailedError(
                    f"kernel {kernel_id} did not start in {self.launch_timeout:g} s "
                    f"(still {kernel.status})",
                    code="timeout",
                )
            await asyncio.sleep(START_POLL_SECONDS)

    def _connection(self, kernel: Kernel) -> KernelConnectionInfo:
        """What the manager connects with: the pod's address and ports, and the key as bytes,
        as the manager's own session holds it (it compares the two)."""
        assert self._key is not None and kernel.ip
        info: dict[str, Any] = {
            "transport": TRANSPORT,
            "ip": kernel.ip,
            "signature_scheme": SIGNATURE_SCHEME,
            "key": self._key.encode("ascii"),
            "kernel_name": getattr(self.parent, "kernel_name", "") or "",
        }
        for name in PORT_NAMES:
            info[f"{name}_port"] = int(kernel.ports.get(name, DEFAULT_PORTS[name]))
        # Typed with a str key, but jupyter_client compares it with its session's bytes.
        return cast(KernelConnectionInfo, info)

    # Process control --------------------------------------------------------------------

    async def poll(self) -> int | None:
        """``None`` while the kernel starts, runs or is being deleted; else its exit code:
        the kernel's own, 1 if it failed, 0 once a kernel this provisioner deleted is gone
        (1 for one that went otherwise).

        The answer is reused for ``poll_interval`` seconds, since the restarter and waits
        poll several times a second and each poll is a call to the service. A service that
        does not answer leaves the kernel presumed alive.
        """
        if not self._launched:
            return 0
        if self._exit_code is not None:
            return self._exit_code
        now = time.monotonic()
        if now - self._polled_at < self.poll_interval:
            return None
        kernel_id = self._remote_id()
        try:
            kernel = await self._call(lambda s: s.kernels.get(self._owner_name(), kernel_id))
        except NotFoundError:
            self._gone = True
            self._exit_code = 0 if self._asked_grace is not None else 1
            if self._asked_grace is None:
                self.log.warning("Kernel %s: the service no longer has it", kernel_id)
            return self._exit_code
        except ServiceUnavailableError as exc:
            self.log.warning("Kernel %s: cannot read its state: %s", kernel_id, exc)
            return None
        finally:
            self._polled_at = time.monotonic()
        if kernel.failed:
            self.log.warning("Kernel %s failed: %s", kernel_id, kernel.error)
            self._exit_code = kernel.exit_code if kernel.exit_code not in (None, 0) else 1
        elif kernel.exited:
            self._exit_code = kernel.exit_code if kernel.exit_code is not None else 0
        return self._exit_code

    async def wait(self) -> int | None:
        """Poll until the kernel has ended (or, once deleted, is gone); its exit code."""
        while (code := await self.poll()) is None:
            await asyncio.sleep(WAIT_POLL_SECONDS)
        return code

    async def send_signal(self, signum: int) -> None:
        """``SIGTERM`` terminates and ``SIGKILL`` kills the kernel (by deleting it); ``0``
        does nothing. Other signals cannot reach a pod: an interrupt goes as a message on the
        control channel, which the manager sends itself with ``interrupt_mode`` ``message``
        (as the kernelspecs this package writes say)."""
        if signum == signal.SIGKILL:
            await self.kill()
        elif signum == signal.SIGTERM:
            await self.terminate()
        elif signum == signal.SIGINT:
            self.log.warning(
                "Kernel %s: a remote kernel is interrupted by a message, not a signal; set its "
                "kernelspec's interrupt_mode to 'message'",
                self.kernel_id,
            )
        elif signum != 0:
            self.log.warning(
                "Kernel %s: signal %s cannot be sent to a remote kernel", self.kernel_id, signum
            )

    async def kill(self, restart: bool = False) -> None:
        """Delete the kernel at once (no grace)."""
        await self._delete(0)

    async def terminate(self, restart: bool = False) -> None:
        """Delete the kernel, giving its process ``terminate_grace`` seconds to end."""
        await self._delete(self.terminate_grace)

    async def cleanup(self, restart: bool = False) -> None:
        """Delete the kernel if the service still has it, and forget it. Before a restart,
        wait for its pod to go: the new kernel is asked for under the same id."""
        kernel_id = self.kernel_id
        if self._launched and kernel_id:
            try:
                await self._delete(0 if self._exit_code is not None else self.terminate_grace)
                if restart and not self._gone:
                    await self._until_gone(kernel_id, time.monotonic() + self.delete_timeout)
            except LabSpawnerError as exc:
                # Nothing more can be done here; the message names the kernel to delete.
                self.log.warning("Kernel %s: could not delete it: %s", kernel_id, exc)
        self._launched = False
        self._forget_state()
        self._key = None
        self.connection_info = {}
        if not restart and self._service is not None:
            self._service.close()
            self._service = None

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        """At least ``min_shutdown_wait_time``: half of it is the kernel's to exit after its
        shutdown request, the other half its pod's to end after it is terminated."""
        return max(recommended, self.min_shutdown_wait_time)

    # Persistence ------------------------------------------------------------------------

    async def get_provisioner_info(self) -> dict[str, Any]:
        """What a new manager needs to take the kernel over: its id and owner, where it
        listens and with which key (so persist this where only the user can read it), the
        service's URL and the kernel's size and image. The token is not part of it."""
        info = await super().get_provisioner_info()
        connection = dict(info.get("connection_info") or {})
        key = connection.get("key")
        if isinstance(key, bytes):
            # Persisted as JSON, which has no bytes.
            connection["key"] = key.decode("ascii")
        info.update(
            {
                "connection_info": connection,
                "owner": self._owner,
                "launched": self._launched,
                "ip": connection.get("ip"),
                "ports": {name: connection.get(f"{name}_port") for name in PORT_NAMES},
                "service_url": self._service.base_url if self._service else self._service_url,
                "size": self.size,
                "image": self.image,
            }
        )
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        """Take over the kernel ``provisioner_info`` describes (from
        :meth:`get_provisioner_info`): afterwards ``poll``, ``kill`` and ``cleanup`` act on
        it, and the manager this provisioner belongs to (if any) connects to it."""
        await super().load_provisioner_info(provisioner_info)
        connection = dict(self.connection_info or {})
        key = connection.get("key")
        if isinstance(key, str):
            connection["key"] = key.encode("ascii")
            self._key = key
        elif isinstance(key, bytes):
            self._key = key.decode("ascii")
        self.connection_info = cast(KernelConnectionInfo, connection)
        self._owner = provisioner_info["owner"]
        self._service_url = provisioner_info.get("service_url")
        self.size = self.size or provisioner_info.get("size") or ""
        self.image = self.image or provisioner_info.get("image")
        self._launched = bool(provisioner_info.get("launched", True))
        self._forget_state()
        self._client()
        self._load_into_manager(connection)

    def _load_into_manager(self, connection: Mapping[str, Any]) -> None:
        """Give the manager the kernel's id, address, ports and key, so that its clients and
        its shutdown request reach the kernel, as after a launch."""
        manager = self.parent
        if manager is None or not hasattr(manager, "load_connection_info") or not connection:
            return
        if not getattr(manager, "kernel_id", None):
            manager.kernel_id = self.kernel_id
        manager.load_connection_info(dict(connection))

    # Helpers ----------------------------------------------------------------------------

    def _owner_name(self) -> str:
        name = self._owner or self.username
        if not name:
            raise RuntimeError("the kernel's owner is known once pre_launch has run")
        return name

    async def _whose_token(self) -> str:
        """The user the service says the token is of: the owner of the lab it answers the
        token's own status with. A lab is the service's whether JupyterHub or a plain API
        call spawned it, so nothing of JupyterHub's environment (``JUPYTERHUB_USER``) is
        needed, and a terminal with a user's token works the same."""
        try:
            status = await self._call(lambda s: s.user_status())
        except NotFoundError:
            raise NotFoundError(
                "the token's user has no lab: a remote kernel runs beside a running lab "
                "(or set the kernelspec's config username)",
                code="not_found",
                status=404,
            ) from None
        return status.username

    def _remote_id(self) -> str:
        kernel_id = self.kernel_id or ""
        if not KERNEL_ID_PATTERN.match(kernel_id):
            raise ValueError(
                f"kernel id {kernel_id!r}: the service takes lowercase letters, digits and '-' "
                "(not first or last), at most 63"
            )
        return kernel_id

    def _client(self) -> LabSpawnerClient:
        """The service's client, made once: the URL and token from the configuration, else
        (for the URL) the persisted information, else the lab's environment."""
        if self._service is None:
            url = self.service_url or self._service_url or None
            self._service = LabSpawnerClient(url, self.token or None)
        return self._service

    async def _call(self, call: Callable[[LabSpawnerClient], T]) -> T:
        """Run a service call in a worker thread, off the event loop."""
        service = self._client()
        return await asyncio.to_thread(call, service)

    def _remote_env(self, asked: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
        """The kernel pod's extra environment: what the caller added to this process's own
        environment, and the kernelspec's ``env`` stanza (as the base class substituted it),
        without what the pod's start-up sets itself. Not the whole local environment: the
        lab's tokens and settings stay in the lab."""
        remote = dict(asked)
        if self.kernel_spec is not None:
            remote.update({name: env[name] for name in self.kernel_spec.env if name in env})
        dropped = sorted(name for name in remote if RESERVED_ENV.match(name))
        if dropped:
            self.log.warning("Kernel %s: not sending %s", self.kernel_id, ", ".join(dropped))
        return {name: str(value) for name, value in remote.items() if name not in dropped}

    def _set_manager_session(self, key: str) -> None:
        """The manager signs its messages with the kernel's key over tcp."""
        manager = self.parent
        if manager is None or not hasattr(manager, "session"):
            return
        manager.transport = TRANSPORT
        manager.session.signature_scheme = SIGNATURE_SCHEME
        manager.session.key = key.encode("ascii")

    async def _delete(self, grace_seconds: int) -> None:
        """Ask the service to delete the kernel, unless it is gone or was already asked with
        no more grace: each delete counts against the user's mutations a minute."""
        if not self._launched or self._gone or not self.kernel_id:
            return
        if self._asked_grace is not None and grace_seconds >= self._asked_grace:
            return
        kernel_id = self.kernel_id
        try:
            await self._call(
                lambda s: s.kernels.delete(
                    self._owner_name(), kernel_id, grace_seconds=grace_seconds
                )
            )
        except NotFoundError:
            self._gone = True
        self._asked_grace = grace_seconds
        # The next poll asks the service again.
        self._polled_at = 0.0

    def _forget_state(self) -> None:
        """What is known of the current kernel's end, before a new one (or a take-over)."""
        self._asked_grace = None
        self._gone = False
        self._exit_code = None
        self._polled_at = 0.0

    async def _discard(self, kernel_id: str) -> None:
        """Delete a kernel that did not come up, so that no pod is left behind; the launch's
        own error is what the caller sees."""
        try:
            await self._delete(0)
        except Exception as exc:  # the launch's own error matters more
            self.log.warning("Kernel %s: could not delete it: %s", kernel_id, exc)
        self._launched = False

    async def _until_gone(self, kernel_id: str, deadline: float) -> None:
        while True:
            try:
                await self._call(lambda s: s.kernels.get(self._owner_name(), kernel_id))
            except NotFoundError:
                return
            if time.monotonic() > deadline:
                raise LabSpawnerError(
                    f"kernel {kernel_id}'s pod did not go in time", code="timeout"
                )
            await asyncio.sleep(START_POLL_SECONDS)


def _asked_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables a caller added to (or changed in) this process's environment: Jupyter
    servers pass their whole environment plus a few of their own (``JPY_SESSION_NAME``)."""
    if not env:
        return {}
    return {name: value for name, value in env.items() if os.environ.get(name) != value}


async def _until_reachable(kernel: Kernel, deadline: float) -> None:
    """Return once the kernel's heartbeat and shell ports accept a TCP connection from here
    (the service saw them from its side; this is where the manager connects from)."""
    assert kernel.ip
    for name in ("hb", "shell"):
        port = int(kernel.ports.get(name, DEFAULT_PORTS[name]))
        while not await _accepts(kernel.ip, port):
            if time.monotonic() > deadline:
                raise KernelFailedError(
                    f"kernel {kernel.kernel_id} runs but its {name} port "
                    f"{kernel.ip}:{port} does not answer",
                    code="unreachable",
                )
            await asyncio.sleep(START_POLL_SECONDS)


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
    except (TimeoutError, OSError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
