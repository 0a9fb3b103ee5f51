"""``LabSpawner``: JupyterHub's spawner for labs run by the lab spawner service.

JupyterHub holds no Kubernetes permissions: every method is a call to the service. Spawns and
the spawn form act as the user, with the delegated token the authenticator put into the user's
auth state (key ``token`` by default); status, delete and stop act with the hub's own token,
which has ``admin:notebook``.

The service decides everything about the lab, so JupyterHub's ``mem_limit``, ``cpu_limit``,
their guarantees, ``cmd`` and ``args`` are ignored. As DMTN-222 says, the spawn's ``env`` is
``get_env()``, not overridden: the service replaces the variables of those limits with the
lab's real ones and drops what the hub's ``env_keep`` forwards that would break the lab (its
``PATH``, ``PYTHONPATH``), saying so in the spawn's events.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from jupyterhub.httpclient import JupyterHubHTTPClient
from jupyterhub.spawner import Spawner, SpawnException
from traitlets import Float, Integer, Unicode, default

from labspawner.errors import (
    ConflictError,
    InvalidRequestError,
    LabFailedError,
    LabSpawnerError,
    NotFoundError,
    ServiceUnavailableError,
)
from labspawner.hub.aio import AsyncLabSpawnerAPI
from labspawner.hub.progress import ProgressTracker

ACTIVE = frozenset({"starting", "running", "terminating"})


def options_from_form(form_data: dict[str, list[str]]) -> dict[str, Any]:
    """The spawn form's submission as the service's ``options``.

    A form arrives as lists of strings; each field must hold exactly one value, and the strings
    ``true`` and ``false`` become booleans. A field with several values is kept as a list so the
    service rejects it with a message naming the field, rather than the hub guessing.
    """
    options: dict[str, Any] = {}
    for key, values in form_data.items():
        if isinstance(values, list) and len(values) == 1:
            value: Any = values[0]
        else:
            value = values
        if value == "true":
            value = True
        elif value == "false":
            value = False
        options[key] = value
    return options


async def _hub_send(url: str, *, method: str, **kwargs: Any) -> Any:
    """One request through JupyterHub's shared HTTP client (its pool, closed by the hub)."""
    client = JupyterHubHTTPClient.loop_instance()
    return await client.fetch(url, method=method, raise_for_status=False, **kwargs)


def _spawn_exception(error: LabSpawnerError) -> SpawnException:
    """JupyterHub's form of a failed start: the message shown to the user, a reason label
    for its metrics, and no traceback in its log (these are not hub bugs)."""
    if isinstance(error, LabFailedError):
        reason, status = "lab_failed", 500
    elif isinstance(error, InvalidRequestError):
        reason, status = "invalid_options", 400
    elif isinstance(error, ServiceUnavailableError):
        reason, status = "service_unavailable", 503
    else:
        reason, status = error.code or "error", error.status or 500
    exception = SpawnException(error.message, reason=reason, status_code=status)
    # What JupyterHub's progress stream and spawn page show: the reason, without the class.
    exception.jupyterhub_message = error.message
    return exception


def _options_go_to_the_service(spawner: Spawner, user_options: dict[str, Any]) -> None:
    """The user's options are not applied to the spawner's traits: ``start`` sends them whole
    to the service, which validates them and answers a 422 naming any bad field."""


class LabSpawner(Spawner):
    """Starts, stops and watches a user's lab through the lab spawner service."""

    spawner_url = Unicode(
        help="Base URL of the lab spawner service (default: $LAB_SPAWNER_URL).",
    ).tag(config=True)

    admin_token = Unicode(
        help="The hub's token, with admin:notebook (default: $LAB_SPAWNER_ADMIN_TOKEN).",
    ).tag(config=True)

    auth_state_token_key = Unicode(
        "token", help="Key of the user's delegated token in the authenticator's auth state."
    ).tag(config=True)

    request_timeout = Float(30.0, help="Seconds each call to the service may take.").tag(
        config=True
    )

    stream_timeout = Float(
        60.0, help="Seconds of silence after which an event stream is reopened."
    ).tag(config=True)

    lab_port = Integer(8888, help="Port the lab's server listens on (the service's lab.port).").tag(
        config=True
    )

    @default("spawner_url")
    def _default_spawner_url(self) -> str:
        return os.environ.get("LAB_SPAWNER_URL", "")

    @default("admin_token")
    def _default_admin_token(self) -> str:
        return os.environ.get("LAB_SPAWNER_ADMIN_TOKEN", "")

    @default("options_form")
    def _default_options_form(self) -> Any:
        return LabSpawner._fetch_options_form

    @default("options_from_form")
    def _default_options_from_form(self) -> Any:
        return options_from_form

    @default("apply_user_options")
    def _default_apply_user_options(self) -> Any:
        return _options_go_to_the_service

    @default("ip")
    def _default_ip(self) -> str:
        return "0.0.0.0"

    @default("port")
    def _default_port(self) -> int:
        return int(self.lab_port)

    @default("start_timeout")
    def _default_start_timeout(self) -> int:
        # The service enforces its own spawn deadline and reports failures within seconds;
        # this only guards against a service that stopped answering.
        return 600

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracker = ProgressTracker()
        self.internal_url: str | None = None
        self._api: AsyncLabSpawnerAPI | None = None

    # Plumbing -------------------------------------------------------------------------

    @property
    def api(self) -> AsyncLabSpawnerAPI:
        if self._api is None:
            if not self.spawner_url:
                raise LabSpawnerError("LabSpawner.spawner_url is not set", code="misconfigured")
            self._api = AsyncLabSpawnerAPI(
                self.spawner_url,
                timeout=self.request_timeout,
                stream_timeout=self.stream_timeout,
                send=_hub_send,
            )
        return self._api

    @property
    def username(self) -> str:
        return str(self.user.name)

    def _admin(self) -> str:
        if not self.admin_token:
            raise LabSpawnerError("LabSpawner.admin_token is not set", code="misconfigured")
        return str(self.admin_token)

    async def _user_token(self) -> str:
        auth_state = await self.user.get_auth_state()
        token = (auth_state or {}).get(self.auth_state_token_key)
        if not token:
            raise LabSpawnerError(
                f"no delegated token in {self.username}'s auth state "
                f"(key {self.auth_state_token_key!r}); log in again",
                code="no_token",
            )
        return str(token)

    # The form -------------------------------------------------------------------------

    async def _fetch_options_form(self) -> str:
        """The service's spawn form for this user, fetched with the user's own token."""
        return await self.api.spawn_form(self.username, await self._user_token())

    # Lifecycle ------------------------------------------------------------------------

    async def start(self) -> str:
        """Spawn the lab, follow its events to the end, and return its ``internal_url``.

        A 409 means a lab already exists, for instance after the hub restarted mid-spawn: a
        starting or running lab is reattached to, a terminating one is waited out and then
        spawned again. (A failed lab never causes a 409: the service replaces it.)
        """
        await self.tracker.reset()
        self.internal_url = None
        try:
            return await self._start()
        except LabSpawnerError as exc:
            await self.tracker.finish(f"Lab failed: {exc.message}", failed=True)
            raise _spawn_exception(exc) from exc

    async def _start(self) -> str:
        token = await self._user_token()
        await self._spawn_or_reattach(token)
        await self._follow(token)
        if self.tracker.failed:
            raise LabFailedError(self.tracker.message or "the lab failed to start", code="failed")
        status = await self.api.lab_status(self.username, self._admin())
        url = (status or {}).get("internal_url")
        if not status or status.get("status") != "running" or not url:
            state = (status or {}).get("status", "missing")
            raise LabFailedError(f"the lab is {state} after its spawn completed", code="failed")
        self.internal_url = str(url)
        return self.internal_url

    async def _spawn_or_reattach(self, token: str) -> None:
        options = dict(self.user_options or {})
        env = self.get_env()
        for _ in range(3):
            try:
                await self.api.spawn(self.username, token, options, env)
                return
            except ConflictError:
                status = await self.api.lab_status(self.username, self._admin())
            state = (status or {}).get("status")
            if state in ("starting", "running"):
                self.log.info("Reattaching to %s's %s lab", self.username, state)
                return
            if state == "terminating":
                self.log.info("Waiting for %s's lab to finish terminating", self.username)
                async for event in self.api.events(self.username, self._admin()):
                    if event.final:
                        break
            # Gone or failed by now: spawn again.
        raise ConflictError(
            f"{self.username}'s lab kept changing state; try again", code="conflict"
        )

    async def _follow(self, token: str) -> None:
        try:
            async for event in self.api.events(self.username, token):
                await self.tracker.record(event)
        except NotFoundError:
            # Reattached to a lab whose spawn events have expired: its status says the rest.
            await self.tracker.finish("Lab running", failed=False)

    async def stop(self, now: bool = False) -> None:
        """Delete the lab and wait until it is gone."""
        await self.tracker.reset()
        admin = self._admin()
        if await self.api.delete(self.username, admin):
            async for event in self.api.events(self.username, admin):
                await self.tracker.record(event)
        self.internal_url = None

    async def poll(self) -> int | None:
        """``None`` while the lab is starting, running or terminating; ``0`` when it failed
        or does not exist.

        When the service cannot say (503: its state is being rebuilt after Redis came back
        empty, or a dependency is down; or it cannot be reached), the answer is unknown,
        and unknown is never "stopped": JupyterHub stops, and so deletes, a server whose
        poll says so when it starts. ``None`` keeps the server, and the next poll asks again.
        """
        try:
            status = await self.api.lab_status(self.username, self._admin())
        except ServiceUnavailableError as exc:
            self.log.warning(
                "Lab of %s: state unknown (%s); polling again later", self.username, exc
            )
            return None
        if status is not None and status.get("status") in ACTIVE:
            return None
        return 0

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        async for event in self.tracker.follow():
            yield event

    # State ------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        state.update(self.tracker.to_state())
        if self.internal_url:
            state["internal_url"] = self.internal_url
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.tracker.load(state)
        self.internal_url = state.get("internal_url")

    def clear_state(self) -> None:
        super().clear_state()
        self.tracker = ProgressTracker()
        self.internal_url = None
