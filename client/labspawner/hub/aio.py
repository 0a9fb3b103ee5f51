"""The few calls the JupyterHub spawner makes, on ``aiohttp``, JupyterHub's own HTTP client.

The spawner runs in JupyterHub's event loop and may follow hundreds of labs' event streams at
once; native coroutines do that without a thread per stream. Errors, retries and stream parsing
match the synchronous client (:mod:`labspawner.client`): the same exceptions, retries only where
a repeat is harmless, and resuming a dropped stream with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp

from labspawner.client import API_PREFIX, RETRY_STATUSES
from labspawner.errors import NotFoundError, ServiceUnavailableError, error_for
from labspawner.events import EventStreamParser, LabEvent

Send = Callable[..., Awaitable[aiohttp.ClientResponse]]


class AsyncLabSpawnerAPI:
    """Calls to the service; each passes the token it acts with (the user's or the hub's)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        stream_timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        send: Send | None = None,
    ) -> None:
        """``send(url, method=..., **kwargs)`` makes one request and returns the response;
        JupyterHub's spawner passes the hub's shared HTTP client, so every lab shares its
        connection pool and the hub closes it at shutdown."""
        self.base_url = base_url.rstrip("/").removesuffix(API_PREFIX)
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.retries = retries
        self.backoff = backoff
        self._send = send or self._own_send
        self._session: aiohttp.ClientSession | None = None

    async def _own_send(self, url: str, *, method: str, **kwargs: Any) -> aiohttp.ClientResponse:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return await self._session.request(method, url, **kwargs)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # Calls ----------------------------------------------------------------------------

    async def spawn_form(self, username: str, token: str) -> str:
        _, text = await self._call("GET", f"/spawn-form/{username}", token)
        return text

    async def spawn(
        self, username: str, token: str, options: dict[str, Any], env: dict[str, str]
    ) -> None:
        await self._call(
            "POST", f"/labs/{username}/spawn", token, json={"options": options, "env": env}
        )

    async def lab_status(self, username: str, token: str) -> dict[str, Any] | None:
        """The lab's status, or ``None`` when it has none."""
        try:
            _, text = await self._call("GET", f"/labs/{username}", token)
        except NotFoundError:
            return None
        data: dict[str, Any] = json.loads(text)
        return data

    async def delete(self, username: str, token: str) -> bool:
        """Start deleting the lab; ``False`` when there was none."""
        try:
            await self._call("DELETE", f"/labs/{username}", token)
        except NotFoundError:
            return False
        return True

    async def events(
        self, username: str, token: str, *, reconnects: int = 5
    ) -> AsyncIterator[LabEvent]:
        """The current operation's events until it completes or fails, resuming after drops."""
        last_event_id: str | None = None
        failures = 0
        url = f"{self.base_url}{API_PREFIX}/labs/{username}/events"
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_read=self.stream_timeout
        )
        while True:
            headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
            if last_event_id:
                headers["Last-Event-ID"] = last_event_id
            parser = EventStreamParser()
            try:
                response = await self._send(
                    url, method="GET", headers=headers, timeout=timeout, allow_redirects=False
                )
                async with response:
                    if response.status >= 400:
                        raise error_for(response.status, await _json_or_none(response))
                    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                    pending = ""
                    async for chunk in response.content.iter_any():
                        pending += decoder.decode(chunk)
                        *lines, pending = pending.split("\n")
                        for line in lines:
                            event = parser.feed(line)
                            if event is None:
                                continue
                            failures = 0
                            last_event_id = parser.last_event_id
                            yield event
                            if event.final:
                                return
            except (TimeoutError, aiohttp.ClientError):
                failures += 1  # dropped, or silent past the read timeout
            else:
                failures += 1  # closed before a final event (the service is stopping)
            if failures > reconnects:
                raise ServiceUnavailableError(
                    f"the event stream of {username}'s lab was lost", code="stream_lost"
                )
            await asyncio.sleep(min(self.backoff * 2 ** (failures - 1), 10.0))

    # Transport ------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, token: str, *, json: Any = None
    ) -> tuple[int, str]:
        """One call, retried on connection failure, and for GET/DELETE on lost answers and
        502/503/504; an error answer becomes the matching exception."""
        url = f"{self.base_url}{API_PREFIX}{path}"
        headers = {"Authorization": f"Bearer {token}"}
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        idempotent = method in ("GET", "DELETE")
        attempt = 0
        while True:
            attempt += 1
            retry = attempt <= self.retries
            try:
                response = await self._send(
                    url,
                    method=method,
                    headers=headers,
                    json=json,
                    timeout=timeout,
                    allow_redirects=False,
                )
                async with response:
                    text = await response.text()
                    retryable = response.status in RETRY_STATUSES and idempotent and retry
                    if not retryable and response.status >= 400:
                        raise error_for(response.status, _parse(text), response.reason or "")
                    if not retryable:
                        return response.status, text
            except aiohttp.ClientConnectorError as exc:
                if not retry:
                    raise ServiceUnavailableError(
                        f"{method} {path}: the service could not be reached ({exc.strerror})",
                        code="unavailable",
                    ) from None
            except (TimeoutError, aiohttp.ClientError) as exc:
                if not (idempotent and retry):
                    raise ServiceUnavailableError(
                        f"{method} {path}: no answer from the service ({type(exc).__name__})",
                        code="unavailable",
                    ) from None
            await asyncio.sleep(self.backoff * 2 ** (attempt - 1))


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


async def _json_or_none(response: aiohttp.ClientResponse) -> Any:
    return _parse(await response.text())
