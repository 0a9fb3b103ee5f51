"""The event-stream parser and the JupyterHub progress conversion (pure, no network)."""

from __future__ import annotations

import asyncio

from labspawner import EventStreamParser, LabEvent
from labspawner.hub.progress import ProgressTracker


def _parse(text: str) -> tuple[list[LabEvent], EventStreamParser]:
    parser = EventStreamParser()
    events = [e for line in text.split("\n") if (e := parser.feed(line)) is not None]
    return events, parser


def test_parser_joins_data_skips_comments_and_remembers_ids() -> None:
    events, parser = _parse(
        ": stream of lab events\n\n"
        "id: 1-0\nevent: info\ndata: first line\ndata: second line\n\n"
        ": keepalive\n\n"
        "id: 2-0\r\nevent: progress\r\ndata:40\r\n\r\n"
        "id: 3-0\nevent: complete\ndata: \n\n"
    )
    assert events == [
        LabEvent("info", "first line\nsecond line", "1-0"),
        LabEvent("progress", "40", "2-0"),
        LabEvent("complete", "", "3-0"),
    ]
    assert events[1].percent == 40 and events[0].percent is None
    assert events[2].final and not events[0].final
    assert parser.last_event_id == "3-0"


def test_parser_defaults_and_odd_fields() -> None:
    events, parser = _parse("data: plain\n\nretry: 100\nunknown: x\n\nid: 9-9\n\n")
    assert events == [LabEvent("message", "plain", None)]
    assert parser.last_event_id == "9-9"  # an id alone still moves the resume point
    assert LabEvent("progress", "not a number").percent is None


def test_conversion_follows_dmtn_222() -> None:
    tracker = ProgressTracker()
    assert tracker.convert(LabEvent("progress", "30")) is None
    assert tracker.convert(LabEvent("info", "pulling image")) == {
        "progress": 30,
        "message": "pulling image",
    }
    assert tracker.convert(LabEvent("progress", "20")) is None  # never goes back
    assert tracker.convert(LabEvent("error", "crash")) == {
        "progress": 30,
        "message": "Error: crash",
    }
    assert tracker.convert(LabEvent("failed", "image missing")) == {
        "progress": 100,
        "message": "Lab failed: image missing",
        "failed": True,
    }
    assert tracker.complete and tracker.failed and tracker.message == "image missing"


def test_every_waiter_sees_every_event_and_ends_with_the_operation() -> None:
    async def scenario() -> tuple[list[list[dict[str, object]]], dict[str, object]]:
        tracker = ProgressTracker()
        await tracker.reset()
        await tracker.record(LabEvent("info", "created objects"))

        async def watch() -> list[dict[str, object]]:
            return [event async for event in tracker.follow()]

        early = asyncio.create_task(watch())
        await asyncio.sleep(0)
        await tracker.record(LabEvent("progress", "60"))
        await tracker.record(LabEvent("info", "started"))
        late = asyncio.create_task(watch())
        await tracker.record(LabEvent("complete", ""))
        seen = await asyncio.gather(early, late, watch())
        return list(seen), tracker.to_state()

    seen, state = asyncio.run(scenario())
    expected = [
        {"progress": 0, "message": "created objects"},
        {"progress": 60, "message": "started"},
        {"progress": 100, "message": "Lab operation complete"},
    ]
    assert seen == [expected, expected, expected]
    assert state == {"events": expected, "progress": 100, "complete": True, "failed": False}

    restored = ProgressTracker()
    restored.load(state)
    assert restored.to_state() == state


def test_finish_ends_waiters_without_a_service_event() -> None:
    async def scenario() -> list[dict[str, object]]:
        tracker = ProgressTracker()
        waiter = asyncio.create_task(_collect(tracker))
        await asyncio.sleep(0)
        await tracker.finish("Lab failed: no token", failed=True)
        await tracker.finish("ignored: already finished", failed=False)
        return await waiter

    assert asyncio.run(scenario()) == [
        {"progress": 100, "message": "Lab failed: no token", "failed": True}
    ]


async def _collect(tracker: ProgressTracker) -> list[dict[str, object]]:
    return [event async for event in tracker.follow()]


def test_form_submissions_become_service_options() -> None:
    from labspawner.hub import options_from_form

    assert options_from_form(
        {
            "image_list": ["use_image_from_dropdown"],
            "image_dropdown": ["registry/lab:w_2024_44"],
            "size": ["small"],
            "debug": ["true"],
            "reset_user_env": ["false"],
            "several": ["a", "b"],
        }
    ) == {
        "image_list": "use_image_from_dropdown",
        "image_dropdown": "registry/lab:w_2024_44",
        "size": "small",
        "debug": True,
        "reset_user_env": False,
        "several": ["a", "b"],  # left for the service to reject, naming the field
    }
