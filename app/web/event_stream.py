"""A workload's events as a server-sent event stream: the one way every kind serves them.

Each kind's route names its workload and opens the following (``WorkloadService``); what a
stream is on the wire (its id check, the per-caller cap, the frames, the keep-alives, the
OpenAPI description) is here, so the lab's stream and a cluster's behave alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from flask import Response, request

from app.errors import EVENT_STREAM_ERRORS, InvalidRequestError
from app.storage.event_hub import Following
from app.storage.events import EventType
from app.web.api import ApiBlueprint, header_parameter, raises
from app.web.event_frames import DmtnFrames, Frames

F = TypeVar("F", bound=Callable[..., Any])

EVENT_ID_PATTERN = r"^\d{1,20}-\d{1,20}$"
_EVENT_ID = re.compile(EVENT_ID_PATTERN)
_MAX_ID_PART = 2**64 - 1
"""Redis stream ids are two unsigned 64-bit numbers."""

STREAM_RETRY_SECONDS = 5
"""Retry-After of a stream refused at the per-caller cap."""

SSE_EVENTS: dict[EventType, str] = {
    EventType.INFO: "A human-readable step of the operation; data is the message.",
    EventType.PROGRESS: "Progress of the operation; data is a percentage from 0 to 100.",
    EventType.ERROR: "A problem worth showing the user; data is the message.",
    EventType.COMPLETE: "The operation succeeded; data is empty. The stream then closes.",
    EventType.FAILED: "The operation failed; data is the reason. The stream then closes.",
}
"""Every event type an event stream can carry (a test checks none is missing)."""

NO_CACHE = {"description": "Always `no-cache`: every stream is live.", "schema": {"type": "string"}}


def stream_description(noun: str, operations: str, *more: str) -> str:
    """The OpenAPI description of a ``noun``'s event stream, whose operations are
    ``operations`` (``spawn or delete``); ``more`` paragraphs follow."""
    return "\n".join(
        [
            f"Server-sent events of the {noun}'s current operation ({operations}). The "
            "stream replays from the start of the operation, then follows it, and closes "
            "after a `complete` or `failed` event. Each event has an `id` to resume from "
            "with the `Last-Event-ID` header. Comment lines keep the connection alive.",
            "",
            "Event types:",
            *(f"- `{kind.value}`: {text}" for kind, text in SSE_EVENTS.items()),
            *(line for paragraph in more for line in ("", paragraph)),
        ]
    )


def stream_example(noun: str, first: str) -> str:
    return (
        f": stream of {noun} events\n\n"
        f"id: 1700000000000-0\nevent: info\ndata: {first}\n\n"
        "id: 1700000000001-0\nevent: progress\ndata: 50\n\n"
        "id: 1700000000002-0\nevent: complete\ndata: \n\n"
    )


def documented_stream(
    blueprint: ApiBlueprint,
    *,
    description: str,
    example: str,
    event_types: Iterable[str] = (),
) -> Callable[[F], F]:
    """The OpenAPI description of an event stream route: its frames, the ``Last-Event-ID``
    header, each event type, and the errors opening a stream can answer. ``event_types``
    names more than the engine's (``ping``)."""
    response = blueprint.response(
        200,
        {
            "type": "object",
            "description": "One server-sent event (the stream is a sequence of them).",
            "required": ["id", "event", "data"],
            "properties": {
                "id": {"type": "string", "pattern": EVENT_ID_PATTERN},
                "event": {
                    "type": "string",
                    "enum": [*(kind.value for kind in SSE_EVENTS), *event_types],
                },
                "data": {"type": "string"},
            },
        },
        content_type="text/event-stream",
        description=description,
        example=example,
        headers={"Cache-Control": NO_CACHE},
    )
    doc = blueprint.doc(
        parameters=[
            header_parameter(
                "Last-Event-ID",
                "Resume after this event id instead of replaying the whole operation.",
                pattern=EVENT_ID_PATTERN,
            )
        ],
        responses={200: {"x-event-types": {kind.value: text for kind, text in SSE_EVENTS.items()}}},
    )

    def decorate(view: F) -> F:
        return response(doc(raises(*EVENT_STREAM_ERRORS)(view)))

    return decorate


def last_event_id() -> str:
    """The request's ``Last-Event-ID`` (``0-0``, the start, without one); 422 for one that
    is not a stream id."""
    after = request.headers.get("Last-Event-ID", "0-0").strip() or "0-0"
    if not _EVENT_ID.match(after) or max(map(int, after.split("-"))) > _MAX_ID_PART:
        raise InvalidRequestError("Last-Event-ID is not an event id", field="Last-Event-ID")
    return after


def stream_response(
    following: Following,
    release: Callable[[], None],
    *,
    noun: str,
    frames: Frames | None = None,
) -> Response:
    """The response streaming ``following``; ``release`` gives back the caller's stream
    slot when it ends."""
    body = EventStreamBody(following, release, frames or DmtnFrames(), noun=noun)
    # Passed straight to the server: no per-chunk encoding and closing wrappers.
    response = Response(body, mimetype="text/event-stream", direct_passthrough=True)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response


class EventStreamBody:
    """The response body of an event stream: bytes, and no request context held (a worker
    serves thousands of these at once, and each event passes through here once per
    stream). The server closes it when the response ends or the client goes, which ends
    the following even if the body was never iterated."""

    def __init__(
        self,
        following: Following,
        release: Callable[[], None],
        frames: Frames,
        *,
        noun: str,
    ) -> None:
        self._following = following
        self._release = release
        self._frames = frames
        self._opening = f": stream of {noun} events\n\n".encode()

    def __iter__(self) -> Iterator[bytes]:
        yield self._opening
        frame, keepalive = self._frames.frame, self._frames.keepalive
        for batch in self._following:
            if batch is None:
                yield keepalive
                continue
            # Never an empty chunk: in a chunked response that is the end of the body. (A
            # batch of nublado's frames is empty when it held only progress.)
            chunk = b"".join(map(frame, batch))
            if chunk:
                yield chunk

    def close(self) -> None:
        try:
            self._following.close()
        finally:
            self._release()
