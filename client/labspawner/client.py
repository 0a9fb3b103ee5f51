"""The synchronous client: one method per route of the service, on ``requests``.

Design points:

- **One pooled session** per client, so repeated calls reuse connections.
- **Retries only where they are safe.** A connection that could not be opened never reached the
  service, so any call is retried then. A lost answer or a 502/503/504 is retried only for
  ``GET`` and ``DELETE``, which the service treats idempotently (a repeated delete of a lab
  already terminating changes nothing); a spawn ``POST`` whose answer was lost is not repeated,
  since a second one would meet the first as a 409.
- **Every call has a connect and a read timeout.** The event stream's read timeout is longer
  than the service's keepalive interval, so a silent connection is noticed and resumed.
- **Errors are exceptions carrying the service's code and message** (see :mod:`.errors`).
- Inside a lab nothing needs configuring: the base URL comes from ``LAB_SPAWNER_URL`` and the
  token from ``LAB_SPAWNER_TOKEN`` or, failing that, the lab's own ``ACCESS_TOKEN``.
- **File servers are nublado's routes** (``GET /files``, ``/fileserver/v1/...``), beside the
  API's ``/spawner/v1``, under the same base URL.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from labspawner.apps import Apps
from labspawner.clusters import Clusters
from labspawner.errors import (
    LabSpawnerError,
    NotFoundError,
    ServiceUnavailableError,
    error_for,
)
from labspawner.events import EventStreamParser, LabEvent
from labspawner.kernels.client import Kernels
from labspawner.models import FileServer, FileServerStatus, LabStatus
from labspawner.progressbar import ProgressDisplay

URL_ENV = "LAB_SPAWNER_URL"
TOKEN_ENVS = ("LAB_SPAWNER_TOKEN", "ACCESS_TOKEN")
API_PREFIX = "/spawner/v1"
FILESERVER_PREFIX = "/fileserver/v1"
FILES_PATH = "/files"
"""The route that starts the caller's file server and describes it (nublado's, unprefixed)."""
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "DELETE"})
RETRY_STATUSES = frozenset({502, 503, 504})
FILE_SERVER_POLL_SECONDS = 0.5


def _env_token() -> str | None:
    for name in TOKEN_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


class LabSpawnerClient:
    """A client of the lab spawner service, authenticated with one bearer token.

    ``timeout`` is ``(connect, read)`` seconds for ordinary calls; ``stream_timeout`` the read
    timeout of the event stream, which must exceed the service's keepalive interval.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: tuple[float, float] = (5.0, 30.0),
        stream_timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        session: requests.Session | None = None,
    ) -> None:
        base_url = base_url or os.environ.get(URL_ENV, "").strip()
        if not base_url:
            raise ValueError(f"no service URL: pass base_url or set {URL_ENV}")
        token = token or _env_token()
        if not token:
            raise ValueError(f"no token: pass token or set one of {', '.join(TOKEN_ENVS)}")
        base_url = base_url.rstrip("/")
        if base_url.endswith(API_PREFIX):
            base_url = base_url[: -len(API_PREFIX)]
        self.base_url = base_url
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.backoff = backoff
        self.retries = retries
        self._token = token
        self.session = session or requests.Session()
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            allowed_methods=IDEMPOTENT_METHODS,
            status_forcelist=RETRY_STATUSES,
            backoff_factor=backoff,
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        adapter = HTTPAdapter(max_retries=retry, pool_connections=4, pool_maxsize=16)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.clusters = Clusters(self._request)
        """Compute clusters: create, scale, restart, delete, and Dask clients for them."""
        self.kernels = Kernels(self._request)
        """Remote kernels: start one beside the lab, read it, wait for it, delete it."""
        self.apps = Apps(self._request)
        """Groups' apps: make, read, change, stop, start, read the log of, delete."""

    def __repr__(self) -> str:
        # Never show the token.
        return f"LabSpawnerClient({self.base_url!r})"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> LabSpawnerClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # Routes ---------------------------------------------------------------------------

    def list_labs(self) -> list[str]:
        """Usernames that have a lab (``admin:notebook``)."""
        return list(self._json("GET", "/labs"))

    def lab_status(self, username: str) -> LabStatus:
        """A user's lab (``admin:notebook``); :class:`NotFoundError` if there is none."""
        return LabStatus.from_json(self._json("GET", f"/labs/{username}"))

    def user_status(self) -> LabStatus:
        """The caller's own lab (``exec:notebook``); :class:`NotFoundError` if none."""
        return LabStatus.from_json(self._json("GET", "/user-status"))

    def spawn(
        self,
        username: str,
        options: dict[str, Any],
        env: dict[str, str] | None = None,
        *,
        wait: bool = False,
        progress: bool = True,
        timeout: float | None = None,
    ) -> LabStatus | None:
        """Spawn the caller's lab (the token must be ``username``'s, with ``exec:notebook``).

        Without ``wait`` this returns ``None`` once the service accepted the spawn. With it,
        it follows the lab's events, showing a progress bar unless ``progress`` is false, until
        ``complete`` or ``failed`` (or ``timeout`` seconds), and returns the final status; a
        failed lab's status has ``status == "failed"`` and the reason in ``error``.
        """
        body = {"options": options, "env": env or {}}
        self._request("POST", f"/labs/{username}/spawn", json=body, allow_redirects=False)
        if not wait:
            return None
        self.wait(username, progress=progress, timeout=timeout, title=f"Spawning {username}")
        return self.user_status()

    def delete(
        self, username: str, *, wait: bool = False, timeout: float | None = None
    ) -> LabEvent | None:
        """Delete a user's lab (``admin:notebook``); with ``wait``, return its final event."""
        self._request("DELETE", f"/labs/{username}")
        if not wait:
            return None
        return self.wait(username, progress=False, timeout=timeout)

    def spawn_form(self, username: str) -> str:
        """The HTML spawn form for ``username`` (the caller's own, ``exec:notebook``)."""
        return self._request("GET", f"/spawn-form/{username}").text

    def images(self) -> dict[str, Any]:
        """Every configured source's images, with the prepull set (``admin:notebook``)."""
        return dict(self._json("GET", "/images"))

    def prepulls(self) -> dict[str, Any]:
        """The prepuller's status: images, nodes, pending pulls (``admin:notebook``)."""
        return dict(self._json("GET", "/prepulls"))

    def operations(self) -> list[dict[str, Any]]:
        """Spawns and deletes in progress, with the worker running each (``admin:notebook``)."""
        return list(self._json("GET", "/operations"))

    def leaders(self) -> dict[str, dict[str, Any] | None]:
        """Each elected loop with the replica and worker leading it and its lease's expiry;
        None for a loop nobody leads while an election is due (``admin:notebook``)."""
        return {entry["loop"]: entry["leader"] for entry in self._json("GET", "/leaders")}

    # The caller's file server (the file-server scope, ``write:files`` by default) -------

    def file_server(self) -> FileServerStatus | None:
        """The caller's file server, or None when they have none (or file servers are not
        enabled here). Only asks: unlike :meth:`start_file_server`, it never starts one."""
        try:
            answer = self._request("GET", "/user-status", prefix=FILESERVER_PREFIX).json()
        except NotFoundError:
            return None
        return FileServerStatus.from_json(answer)

    def start_file_server(self, *, timeout: float = 180.0) -> FileServer:
        """Start the caller's file server, or find the one running, and say where it is:
        its URL and each mount's, to mount with a WebDAV client.

        The service answers once the server serves (a new one takes seconds, at most the
        deployment's creation timeout), so the answer is awaited up to ``timeout`` seconds.
        Raises :class:`NotFoundError` where file servers are not enabled and
        :class:`PermissionDeniedError` for a token without the file-server scope.
        """
        response = self._request(
            "GET",
            FILES_PATH,
            prefix="",
            headers={"Accept": "application/json"},
            timeout=(self.timeout[0], timeout),
        )
        if not response.headers.get("Content-Type", "").startswith("application/json"):
            raise LabSpawnerError(
                f"GET {FILES_PATH} answered {response.headers.get('Content-Type')!r}, not JSON",
                code="unexpected_answer",
                status=response.status_code,
            )
        return FileServer.from_json(response.json())

    def stop_file_server(self, *, wait: bool = False, timeout: float = 60.0) -> bool:
        """Stop the caller's file server now, rather than at its idle timeout; whether there
        was one to stop. With ``wait``, return once the service no longer has it.

        Files open on a computer that mounted it are cut off: unmount first.
        """
        status = self.file_server()
        if status is None:
            return False
        username = status.username
        try:
            self._request("DELETE", f"/fileservers/{username}")
        except NotFoundError:
            return False  # it ended between the two calls
        deadline = time.monotonic() + timeout
        while wait and self.file_server() is not None:
            if time.monotonic() > deadline:
                raise LabSpawnerError(
                    f"{username}'s file server was not stopped in time", code="timeout"
                )
            time.sleep(FILE_SERVER_POLL_SECONDS)
        return True

    # Administrators' actions (``admin:notebook``; each one is in the audit log) ---------

    def audit(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` entries of the audit log, newest first."""
        return list(self._request("GET", "/admin/audit", params={"limit": limit}).json())

    def maintenance(self) -> dict[str, Any]:
        """Whether maintenance mode is on, with its message."""
        return dict(self._json("GET", "/admin/maintenance"))

    def start_maintenance(self, message: str) -> dict[str, Any]:
        """Refuse new spawns, clusters, kernels and apps with ``message`` until
        ``end_maintenance``; running workloads are left alone."""
        return dict(self._request("PUT", "/admin/maintenance", json={"message": message}).json())

    def end_maintenance(self) -> dict[str, Any]:
        return dict(self._json("DELETE", "/admin/maintenance"))

    def admin_pod(self) -> dict[str, Any] | None:
        """The privileged maintenance pod's status (``phase``, ``ready``, ``node``,
        ``mounts``...), or None when there is none. Needs ``admin.pod.scope``
        (``admin:lab-pods`` unless the deployment chose another)."""
        try:
            return dict(self._json("GET", "/admin/pod"))
        except NotFoundError:
            return None

    def start_admin_pod(self) -> dict[str, Any]:
        """Start the maintenance pod (a root shell with every user's file system under its
        mount prefix), or get the one already running; answers before it is ready: poll
        ``admin_pod()`` until ``ready``, then ``kubectl exec`` into it."""
        return dict(self._json("POST", "/admin/pod"))

    def delete_admin_pod(self) -> dict[str, Any]:
        """Delete the maintenance pod; :class:`NotFoundError` if there is none."""
        return dict(self._json("DELETE", "/admin/pod"))

    def reconcile(self) -> dict[str, Any]:
        """Reconcile Redis with Kubernetes now; how it ended (``finished`` is None if it did
        not end within the service's wait)."""
        return dict(self._json("POST", "/admin/reconcile"))

    def reset_provisioned(self, username: str) -> dict[str, Any]:
        """Make the user's next spawn run the provisioning init containers again."""
        return dict(self._json("DELETE", f"/admin/labs/{username}/provisioned"))

    def force_delete(self, username: str) -> dict[str, Any]:
        """Delete a lab stuck terminating: its pod is removed without a grace period."""
        return dict(self._json("POST", f"/admin/labs/{username}/force-delete"))

    def failed_labs(self, limit: int = 100) -> list[dict[str, Any]]:
        """Labs whose spawn failed, oldest failure first, each with ``failed_at`` (Unix
        time)."""
        return list(self._request("GET", "/admin/failed-labs", params={"limit": limit}).json())

    def drop_failed_labs(self, older_than_seconds: float | None = None) -> dict[str, Any]:
        """Delete the labs that failed more than ``older_than_seconds`` ago (None: the
        service's configured age); ``dropped`` lists those whose deletion started."""
        params = {} if older_than_seconds is None else {"older_than_seconds": older_than_seconds}
        return dict(self._request("DELETE", "/admin/failed-labs", params=params).json())

    # Events ---------------------------------------------------------------------------

    def events(
        self,
        username: str,
        *,
        last_event_id: str | None = None,
        reconnects: int = 5,
        deadline: float | None = None,
    ) -> Iterator[LabEvent]:
        """The events of ``username``'s current spawn or delete, until it completes or fails.

        The stream replays the operation from its start (or after ``last_event_id``). A dropped
        connection is reopened with ``Last-Event-ID`` set to the last event seen, so nothing is
        missed or repeated; up to ``reconnects`` times in a row without any event in between.
        ``deadline`` is a ``time.monotonic()`` value after which the iteration stops.
        """
        failures = 0
        while True:
            parser = EventStreamParser()
            parser.last_event_id = last_event_id
            headers = {"Accept": "text/event-stream"}
            if last_event_id:
                headers["Last-Event-ID"] = last_event_id
            received = False
            try:
                response = self._request(
                    "GET",
                    f"/labs/{username}/events",
                    headers=headers,
                    stream=True,
                    timeout=(self.timeout[0], self._stream_read_timeout(deadline)),
                )
                with response:
                    for line in _lines(response):
                        event = parser.feed(line)
                        if event is None:
                            if deadline is not None and time.monotonic() > deadline:
                                return
                            continue
                        received = True
                        failures = 0
                        last_event_id = parser.last_event_id
                        yield event
                        if event.final:
                            return
                        if deadline is not None and time.monotonic() > deadline:
                            return
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
            ) as exc:
                if deadline is not None and time.monotonic() > deadline:
                    return
                failures += 1
                if failures > reconnects:
                    raise ServiceUnavailableError(
                        f"event stream lost: {type(exc).__name__}", code="stream_lost"
                    ) from None
            else:
                # The service closed the stream before a final event (it is shutting down).
                if not received:
                    failures += 1
                if failures > reconnects:
                    raise ServiceUnavailableError(
                        "event stream closed before the operation ended", code="stream_lost"
                    )
            time.sleep(min(self.backoff * (2 ** max(failures - 1, 0)), 10.0))

    def wait(
        self,
        username: str,
        *,
        progress: bool = False,
        timeout: float | None = None,
        title: str | None = None,
    ) -> LabEvent:
        """Follow the current operation's events to its end and return the final event.

        Raises :class:`LabSpawnerError` (code ``timeout``) if ``timeout`` passes first.
        """
        deadline = time.monotonic() + timeout if timeout is not None else None
        display = ProgressDisplay(title or f"Lab {username}") if progress else None
        last: LabEvent | None = None
        try:
            for event in self.events(username, deadline=deadline):
                last = event
                if display is not None:
                    display.update(event)
        finally:
            if display is not None:
                display.close()
        if last is None or not last.final:
            raise LabSpawnerError(
                f"the operation on {username}'s lab did not end in time", code="timeout"
            )
        return last

    # Transport ------------------------------------------------------------------------

    def _stream_read_timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.stream_timeout
        return max(0.5, min(self.stream_timeout, deadline - time.monotonic()))

    def _json(self, method: str, path: str) -> Any:
        return self._request(method, path).json()

    def _request(
        self,
        method: str,
        path: str,
        *,
        timeout: tuple[float, float] | None = None,
        prefix: str = API_PREFIX,
        **kwargs: Any,
    ) -> requests.Response:
        url = f"{self.base_url}{prefix}{path}"
        try:
            response = self.session.request(method, url, timeout=timeout or self.timeout, **kwargs)
        except requests.exceptions.RetryError as exc:
            raise ServiceUnavailableError(
                f"{method} {path}: the service kept failing", code="unavailable"
            ) from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            if kwargs.get("stream"):
                raise
            raise ServiceUnavailableError(
                f"{method} {path}: the service did not answer ({type(exc).__name__})",
                code="unavailable",
            ) from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = None
            response.close()
            raise error_for(response.status_code, body, response.reason or "")
        return response


def _lines(response: requests.Response) -> Iterator[str]:
    """The stream's lines as they arrive (``iter_lines`` would wait to fill its chunk)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    for chunk in response.iter_content(chunk_size=None, decode_unicode=False):
        pending += decoder.decode(chunk)
        *lines, pending = pending.split("\n")
        yield from lines
    if pending:
        yield pending
