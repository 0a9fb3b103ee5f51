"""The spawner's asynchronous calls (aiohttp) against the real service, through a faulty proxy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from labspawner import LabSpawnerClient, ServiceUnavailableError
from labspawner.hub.aio import AsyncLabSpawnerAPI

from devstack.stack import LocalStack
from tests.clients.conftest import delete_lab
from tests.support.proxy import FaultProxy

USER = "wile"


@pytest.fixture(autouse=True)
def _no_lab_left(admin: LabSpawnerClient) -> Iterator[None]:
    yield
    delete_lab(admin, USER)


def test_calls_retries_and_a_resumed_stream(
    stack: LocalStack,
    stack_tokens: dict[str, str],
    proxy: FaultProxy,
    lab_options: dict[str, str],
    admin: LabSpawnerClient,
) -> None:
    async def scenario() -> dict[str, object]:
        api = AsyncLabSpawnerAPI(proxy.url, backoff=0.01)
        out: dict[str, object] = {}
        try:
            out["missing"] = await api.lab_status(USER, stack_tokens["admin"])
            proxy.heads.clear()
            proxy.fail_next(1, status=503)
            fresh = AsyncLabSpawnerAPI(proxy.url, backoff=0.01)  # no pooled connection
            with pytest.raises(ServiceUnavailableError):
                await fresh.spawn(USER, stack_tokens[USER], lab_options, {})
            await fresh.close()
            out["post_attempts"] = len(proxy.heads)
            await api.spawn(USER, stack_tokens[USER], lab_options, {})
            events = []
            async for event in api.events(USER, stack_tokens[USER]):
                events.append(event)
                if len(events) == 1:
                    proxy.cut()
            out["events"] = events
            replay = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
            out["replay"] = list(replay.events(USER))  # one uninterrupted read, for comparison
            proxy.heads.clear()
            proxy.fail_next(2, status=503)
            fresh = AsyncLabSpawnerAPI(proxy.url, backoff=0.01)
            status = await fresh.lab_status(USER, stack_tokens["admin"])
            await fresh.close()
            out["status"] = status
            out["get_attempts"] = len(proxy.heads)
            out["form"] = await api.spawn_form(USER, stack_tokens[USER])
            out["deleted"] = await api.delete(USER, stack_tokens["admin"])
            async for event in api.events(USER, stack_tokens["admin"]):
                out["delete_end"] = event.type
            out["deleted_again"] = await api.delete(USER, stack_tokens["admin"])
        finally:
            await api.close()
        return out

    out = asyncio.run(scenario())
    assert out["missing"] is None
    assert out["post_attempts"] == 1  # a spawn is never repeated
    events = out["events"]
    assert isinstance(events, list) and events[-1].type == "complete"
    # Resumed after the cut: the same events as one uninterrupted replay, nothing twice.
    assert events == out["replay"]
    status = out["status"]
    assert isinstance(status, dict) and status["status"] == "running"
    assert out["get_attempts"] == 3  # two 503s retried
    assert 'name="size"' in str(out["form"])
    assert out["deleted"] is True and out["delete_end"] == "complete"
    assert out["deleted_again"] is False
