"""An app built once and forked, as gunicorn's master builds it for its workers
(``preload_app``): building connects to nothing, and each process is a lease holder of its
own, not a copy of the master's."""

from __future__ import annotations

import json
import os
from typing import Any

import redis

from app import create_app
from app.extensions.labs import machinery_of
from app.models.config import Config


def _names(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
    """The lease holders' names of one built app, in this process and in a forked child."""
    machinery = machinery_of(create_app(config))

    def names() -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "runner": machinery.engine.runner.owner,
            "loops": [election.owner for election in machinery.elections()],
        }

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which only reports and exits
        os.close(read)
        os.write(write, json.dumps(names()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reported = json.loads(pipe.read())
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return names(), reported


def test_building_the_app_opens_no_connection(config: Config, redis_client: redis.Redis) -> None:
    before = len(redis_client.client_list())
    create_app(config)
    assert len(redis_client.client_list()) == before


def test_each_forked_process_holds_leases_under_its_own_name(config: Config) -> None:
    parent, child = _names(config)
    assert child["pid"] != parent["pid"]
    for names in (parent, child):
        owners = [names["runner"], *names["loops"]]
        assert all(f":{names['pid']}:" in owner for owner in owners), owners
    assert child["runner"] != parent["runner"]
    assert set(child["loops"]).isdisjoint(parent["loops"])
