"""Lab events and a parser for the server-sent events stream that carries them.

The parser is fed decoded lines and knows nothing about transports, so the synchronous client
(``requests``) and the JupyterHub spawner (``aiohttp``) read the stream the same way. It follows
the HTML specification's event-stream rules: ``data`` lines are joined with newlines, a line
starting with ``:`` is a comment (the service's keepalives), an empty line dispatches the event,
and the last ``id`` seen is remembered for resuming with ``Last-Event-ID``.
"""

from __future__ import annotations

from dataclasses import dataclass

INFO = "info"
PROGRESS = "progress"
ERROR = "error"
COMPLETE = "complete"
FAILED = "failed"
FINAL_TYPES = frozenset({COMPLETE, FAILED})
"""After one of these the service closes the stream: the operation is over."""


@dataclass(frozen=True)
class LabEvent:
    """One event of a spawn or delete.

    ``data`` is a message for ``info``, ``error`` and ``failed``, a percentage for ``progress``
    and empty for ``complete``.
    """

    type: str
    data: str
    id: str | None = None

    @property
    def final(self) -> bool:
        return self.type in FINAL_TYPES

    @property
    def percent(self) -> int | None:
        """The percentage of a ``progress`` event, else ``None``."""
        if self.type != PROGRESS:
            return None
        try:
            return int(float(self.data))
        except ValueError:
            return None


class EventStreamParser:
    """Turns the lines of a ``text/event-stream`` into :class:`LabEvent` objects."""

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self._type = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> LabEvent | None:
        """Take one line (without its line ending); return an event when one is complete."""
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> LabEvent | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data and not self._type:
            self._id = None
            return None
        event = LabEvent(type=self._type or "message", data="\n".join(self._data), id=self._id)
        self._type, self._data, self._id = "", [], None
        return event
