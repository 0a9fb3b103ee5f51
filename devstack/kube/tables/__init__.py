"""Tables: the rows and columns ``kubectl get`` prints, rendered by the server.

A client that wants a table says so in ``Accept``
(``application/json;as=Table;v=v1;g=meta.k8s.io``, as kubectl does before plain JSON); the
server then answers a get, a list or each watch event with a ``meta.k8s.io`` ``Table``: the
kind's columns and, per object, its cells and the object itself, by default only its
metadata (``includeObject=None|Object|PartialObjectMetadata``). Without that header nothing
changes. The columns and cells of each kind are in ``builtin``, ``pods`` and ``custom``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from devstack.kube import errors
from devstack.kube.resources import ResourceType

from .builtin import BUILT_IN, DEFAULT
from .columns import JsonObject, Printer
from .custom import custom_printer

GROUP = "meta.k8s.io"
VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("None", "Object", "PartialObjectMetadata")
_JSON_TYPES = ("application/json", "application/*", "*/*")


def printer_for(resource: ResourceType) -> Printer:
    if resource.custom:
        return custom_printer(resource)
    return BUILT_IN.get(resource.plural, DEFAULT)


def requested(accept: str, query: Mapping[str, str]) -> TableRequest | None:
    """The table a request asks for, or None when it wants objects: the first media type of
    ``Accept`` the server can answer decides (q-values are not weighed)."""
    for entry in accept.split(","):
        media, *parameters = (part.strip() for part in entry.split(";"))
        if media.lower() not in _JSON_TYPES:
            continue
        options = dict(p.split("=", 1) for p in parameters if "=" in p)
        wanted = options.get("as")
        if wanted is None:
            return None
        if wanted == "Table" and options.get("g") == GROUP and options.get("v") in VERSIONS:
            include = query.get("includeObject") or "PartialObjectMetadata"
            if include not in INCLUDE_OBJECT:
                raise errors.bad_request(f'unrecognized includeObject value: "{include}"')
            return TableRequest(options["v"], include)
    return None


@dataclass(frozen=True)
class TableRequest:
    """A table in ``meta.k8s.io/<version>``, whose rows carry ``include`` of each object."""

    version: str
    include: str

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    def of_list(self, resource: ResourceType, listing: JsonObject) -> JsonObject:
        """The table of a list response, with its resourceVersion and continue token."""
        metadata = {
            key: value
            for key, value in (listing.get("metadata") or {}).items()
            if key in ("resourceVersion", "continue", "remainingItemCount")
        }
        return self._table(resource, listing.get("items") or [], metadata, headers=True)

    def of_object(
        self, resource: ResourceType, obj: JsonObject, *, headers: bool = True
    ) -> JsonObject:
        """A one-row table; ``headers`` False leaves the columns out, as in watch events
        after the first."""
        version = (obj.get("metadata") or {}).get("resourceVersion")
        metadata = {"resourceVersion": version} if version else {}
        return self._table(resource, [obj], metadata, headers=headers)

    def events(self, resource: ResourceType, lines: Iterable[str]) -> Iterator[str]:
        """A watch stream with each event's object a one-row table (the columns only in the
        first); ``ERROR`` events pass unchanged."""
        headers = True
        for line in lines:
            event = json.loads(line)
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                event["object"] = self.of_object(resource, event["object"], headers=headers)
                headers = False
                line = json.dumps(event, separators=(",", ":")) + "\n"
            yield line

    def _table(
        self,
        resource: ResourceType,
        objects: Iterable[JsonObject],
        metadata: JsonObject,
        *,
        headers: bool,
    ) -> JsonObject:
        printer = printer_for(resource)
        now = time.time()
        rows = []
        for obj in objects:
            row: JsonObject = {"cells": printer.cells(obj, now), "object": self._object(obj)}
            conditions = printer.conditions(obj) if printer.conditions else []
            if conditions:
                row["conditions"] = conditions
            rows.append(row)
        return {
            "kind": "Table",
            "apiVersion": self.api_version,
            "metadata": metadata,
            "columnDefinitions": [c.definition() for c in printer.columns] if headers else [],
            "rows": rows,
        }

    def _object(self, obj: JsonObject) -> Any:
        if self.include == "Object":
            return obj
        if self.include == "None":
            return None
        return {
            "kind": "PartialObjectMetadata",
            "apiVersion": self.api_version,
            "metadata": obj.get("metadata") or {},
        }
