"""The Lua scripts behind the storage contracts, loaded once per process from ``lua/``.

Each script's file starts with a comment naming its KEYS, ARGV and reply; the storage
function that runs it takes keyword arguments and returns a dataclass or a plain value, so
no caller assembles an argument list. Libraries (``add_events.lua``, ``record_changed.lua``)
go in front of the scripts that use them: Redis has no ``require``, and one definition
beats several copies.
"""

from __future__ import annotations

import functools
from importlib import resources

import redis
from redis.commands.core import Script

_LIBRARIES: dict[str, tuple[str, ...]] = {
    "append_events": ("add_events",),
    "append_events_if_current": ("add_events",),
    "queue_spawn": ("add_events", "record_changed", "admission"),
    "admit": ("add_events", "admission"),
    "queue_delete": ("add_events", "record_changed"),
    "finish_operation": ("add_events", "record_changed"),
    "put_if_idle": ("fence", "record_changed"),
    "mark_complete": ("fence",),
    "put_if_current": ("record_changed",),
}
"""The libraries (files defining functions for other scripts) each script uses."""


def _read(name: str) -> str:
    return resources.files("app.storage").joinpath("lua", f"{name}.lua").read_text()


@functools.cache
def script_text(name: str) -> str:
    """The text Redis runs for script ``name``: its libraries, then the file itself."""
    return "\n".join([*(_read(library) for library in _LIBRARIES.get(name, ())), _read(name)])


def load(client: redis.Redis, name: str) -> Script:
    """Script ``name`` registered with ``client``: sent by SHA, and by its text only when
    Redis does not know it yet."""
    return client.register_script(script_text(name))
