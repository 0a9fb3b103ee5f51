"""A workload's event stream for the caller of a route: the one way every kind's
``GET .../events`` opens it (``app.web.event_stream`` says what a stream is on the wire)."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response

from app.extensions import limits_ext
from app.storage.event_hub import Following
from app.web.event_stream import STREAM_RETRY_SECONDS, last_event_id, stream_response
from blueprints.support.auth import current_caller


def workload_events(follow: Callable[[str], Following], *, noun: str) -> Response:
    """A workload's event stream for the caller: ``follow`` opens it after the request's
    ``Last-Event-ID``, holding one of the caller's stream slots, given back at once if
    following fails (a 404, a bad id), else when the stream ends."""
    after = last_event_id()
    release = limits_ext.limits.stream(current_caller(), retry_after=STREAM_RETRY_SECONDS)
    try:
        following = follow(after)
    except BaseException:
        release()
        raise
    return stream_response(following, release, noun=noun)
