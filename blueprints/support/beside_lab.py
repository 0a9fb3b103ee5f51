"""The read routes every kind a user holds beside their lab answers alike: its list, one of
them and its event stream, under ``/labs/<username>/<plural>``, for the owner and
administrators. A kind's blueprint adds them with one call and keeps its own creation and
deletion, which differ."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flask import Response

from app.errors import NotFoundError, RebuildingError
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from app.web.event_stream import documented_stream, stream_description, stream_example
from app.workloads.beside_lab import BesideLabService
from blueprints.support.auth import requires
from blueprints.support.events import workload_events


@dataclass(frozen=True)
class BesideLabReads:
    """How a kind's records are read for these routes, and how the routes are named and
    described."""

    plural: str
    """The path's segment and the list view's name (``list_<plural>``): ``clusters``."""
    noun: str
    """One of them, the read view's name and the events view's (``<noun>_events``)."""
    key: str
    """The path parameter naming one: ``name``, ``kernel_id``."""
    schema: Any
    """The record's response schema."""
    service: Callable[[], BesideLabService[Any]]
    """The kind's service, for this request."""
    listed_doc: str
    """The list route's summary (its order, say)."""
    operations: str
    """What its streams follow: ``creation or deletion``."""
    first_event: str
    """The first event of the stream's example."""


def add_beside_lab_reads(blueprint: ApiBlueprint, reads: BesideLabReads) -> None:
    """Register the list, one and events routes of ``reads``'s kind on ``blueprint``."""
    path = f"/labs/<username>/{reads.plural}"
    one_path = f"{path}/<{reads.key}>"

    def listed(username: str) -> Sequence[Any]:
        return reads.service().of_owner(username)

    def one(username: str, **key: str) -> Any:
        return reads.service().one(username, key[reads.key])

    def events(username: str, **key: str) -> Response:
        return workload_events(
            lambda after: reads.service().events(username, key[reads.key], after=after),
            noun=reads.noun,
        )

    _name(listed, f"list_{reads.plural}", reads.listed_doc)
    _name(one, reads.noun, f"One of the user's {reads.plural}.")
    _name(
        events,
        f"{reads.noun}_events",
        f"Server-sent events of the {reads.noun}'s current operation: replay, then follow "
        "until it ends.",
    )
    blueprint.get(path)(
        blueprint.response(200, reads.schema(many=True))(
            raises(RebuildingError)(requires(OWNER, ADMIN)(listed))
        )
    )
    blueprint.get(one_path)(
        blueprint.response(200, reads.schema)(
            raises(NotFoundError, RebuildingError)(requires(OWNER, ADMIN)(one))
        )
    )
    stream = documented_stream(
        blueprint,
        description=stream_description(reads.noun, reads.operations),
        example=stream_example(reads.noun, reads.first_event),
    )
    blueprint.get(f"{one_path}/events")(stream(requires(OWNER, ADMIN)(events)))


def _name(view: Callable[..., Any], name: str, doc: str) -> None:
    """Name a view as its endpoint and give it the summary the API document shows."""
    view.__name__ = view.__qualname__ = name
    view.__doc__ = doc
