"""``GET pods/<name>/log``: a container's output, as the API server relays it from the kubelet.

A process-run container's output is in a file per start (``ProcessRuntime.log_path``); an
emulated container printed nothing, so its log is empty. The query parameters are the API's:
``container`` (needed when the pod has more than one), ``previous`` (the start before the
current one), ``tailLines``, ``limitBytes`` and ``follow`` (keep the answer open while the
container runs, and send what it prints). ``sinceSeconds``, ``sinceTime`` and ``timestamps``
are refused with a 400: the output is kept as the process wrote it, with no time per line to
select or print by.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from devstack.kube import errors

from . import containers as cs
from .processes import Lookup, ProcessRuntime

_UNTIMED = ("sinceSeconds", "sinceTime", "timestamps")
"""Parameters that select or print lines by when they were written: the files keep no time."""

MAX_LOG_BYTES = 8 * 1024 * 1024
"""The most of one log an answer carries: the end of a longer one."""

FOLLOW_POLL_SECONDS = 0.1
"""How often a followed log is read again for new output."""

Alive = Callable[[], bool]
"""Whether the client of a followed log is still connected."""


class PodLogs:
    """Answers log requests from the pods in the store and the runtime's log files."""

    def __init__(self, lookup: Lookup, runtime: ProcessRuntime) -> None:
        self._lookup = lookup
        self._runtime = runtime

    def read(
        self, namespace: str, name: str, query: dict[str, str], alive: Alive | None = None
    ) -> Iterator[bytes]:
        """The log's bytes, in chunks; raises ``ApiError`` for a request the API refuses.

        Everything is checked before the first chunk, so a refusal is an error answer and
        never a broken stream.
        """
        pod = self._lookup("pods", namespace, name)
        if pod is None:
            raise errors.not_found("pods", name)
        asked = [p for p in _UNTIMED if query.get(p, "false").lower() not in ("", "false", "0")]
        if asked:
            raise errors.bad_request(
                f"{', '.join(asked)}: this cluster keeps no time for each line of a log"
            )
        container = _container(pod, query.get("container") or "")
        status = _container_status(pod, container)
        restart = int(status.get("restartCount") or 0)
        previous = _flag(query, "previous")
        if previous:
            restart -= 1
            if restart < 0:
                raise errors.bad_request(
                    f'previous terminated container "{container}" in pod "{name}" not found'
                )
        elif not status.get("containerID") and not cs.is_terminated(status):
            reason = ((status.get("state") or {}).get("waiting") or {}).get("reason") or "waiting"
            raise errors.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {reason}'
            )
        tail = _count(query, "tailLines")
        limit = _count(query, "limitBytes")
        uid = str(pod["metadata"].get("uid"))
        path = self._runtime.log_path(uid, container, restart)
        end, text = _read_end(path)
        text = _tail(text, tail)
        if limit is not None:
            text = text[:limit]
        follow = _flag(query, "follow") and not previous and limit is None
        if not follow:
            return iter([text])
        return self._follow(uid, container, path, text, end, alive)

    def _follow(
        self,
        uid: str,
        container: str,
        path: Path,
        first: bytes,
        offset: int,
        alive: Alive | None,
    ) -> Iterator[bytes]:
        """``first``, then what the file gains after ``offset`` while the container runs."""
        yield first
        while True:
            running = self._runtime.is_running(uid, container)
            more = _read_from(path, offset)
            if more:
                offset += len(more)
                yield more
            if not running or (alive is not None and not alive()):
                return
            time.sleep(FOLLOW_POLL_SECONDS)


def _container(pod: dict[str, Any], asked: str) -> str:
    spec = pod.get("spec") or {}
    mains = [str(c.get("name")) for c in spec.get("containers") or []]
    inits = [str(c.get("name")) for c in spec.get("initContainers") or []]
    name = str(pod["metadata"].get("name"))
    if not asked:
        if len(mains) == 1:
            return mains[0]
        raise errors.bad_request(
            f"a container name must be specified for pod {name}, choose one of: "
            f"[{' '.join(mains)}] or one of the init containers: [{' '.join(inits)}]"
        )
    if asked not in mains + inits:
        raise errors.bad_request(f"container {asked} is not valid for pod {name}")
    return asked


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for entry in status.get(key) or []:
            if entry.get("name") == container:
                return dict(entry)
    return {"name": container, "state": {"waiting": {"reason": "ContainerCreating"}}}


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _count(query: dict[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}") from None
    if value < 0:
        raise errors.bad_request(f"{name} must be non-negative, not {value}")
    return value


def _read_end(path: Path) -> tuple[int, bytes]:
    """The file's last ``MAX_LOG_BYTES`` and the offset just after them (where a follow
    goes on reading); nothing for a file that is not there."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - MAX_LOG_BYTES))
            data = file.read(MAX_LOG_BYTES)
            return file.tell(), data
    except FileNotFoundError:
        return 0, b""


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(MAX_LOG_BYTES)
    except FileNotFoundError:
        return b""


def _tail(text: bytes, lines: int | None) -> bytes:
    if lines is None:
        return text
    if lines == 0:
        return b""
    kept = text.splitlines(keepends=True)[-lines:]
    return b"".join(kept)
