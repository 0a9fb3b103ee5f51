"""The CustomResourceDefinition controller: serves the resources CRDs define.

As kube-apiserver's ``apiextensions`` controllers do, a new or changed CRD has its names
checked and, once accepted, its storage version served (routes, discovery, watches, validation
against the version's schema, its printer columns in tables); the CRD's status then says
``NamesAccepted`` and ``Established``, which clients wait for before creating objects. A deleted
CRD stops being served and every object of it is removed.

Simplifications: only the storage version is served (no conversion between versions), and a
plural must be unique across everything served, built-in kinds included (a CRD whose plural is
taken is not established, with the reason in its conditions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devstack.kube.resources import PrinterColumn, ResourceRegistry, ResourceType
from devstack.kube.store import now_timestamp

from .cache import Obj
from .writer import StoreWriter

CRDS = "customresourcedefinitions"


def resource_type(crd: Obj) -> ResourceType | None:
    """The resource a CRD defines, at its storage version; None if it names none."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = spec.get("versions") or []
    storage = next((v for v in versions if v.get("storage")), None)
    if storage is None or not names.get("plural") or not names.get("kind"):
        return None
    schema = (storage.get("schema") or {}).get("openAPIV3Schema") or {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    subresources = storage.get("subresources") or {}
    return ResourceType(
        plural=str(names["plural"]),
        kind=str(names["kind"]),
        group=str(spec.get("group") or ""),
        version=str(storage.get("name")),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        subresources=("status",) if "status" in subresources else (),
        returns_deleted_object=True,
        schema=schema,
        categories=tuple(names.get("categories") or ()),
        printer_columns=tuple(
            _printer_column(c)
            for c in storage.get("additionalPrinterColumns") or ()
            if isinstance(c, dict)
        ),
    )


def _printer_column(column: Obj) -> PrinterColumn:
    return PrinterColumn(
        name=str(column.get("name", "")),
        type=str(column.get("type", "")),
        json_path=str(column.get("jsonPath", "")),
        description=str(column.get("description") or ""),
        format=str(column.get("format") or ""),
        priority=int(column.get("priority") or 0),
    )


class CrdController:
    """Serves what CRDs define, and takes it away with them."""

    def __init__(
        self,
        served: ResourceRegistry,
        writer: StoreWriter,
        list_objects: Callable[[str], list[dict[str, Any]]],
    ) -> None:
        self._served = served
        self._writer = writer
        self._list_objects = list_objects

    def on_crd(self, event_type: str, crd: Obj) -> None:
        name = str(crd["metadata"]["name"])
        resource = resource_type(crd)
        if event_type == "DELETED":
            if resource is not None and self._served.by_plural(resource.plural) == resource:
                self._withdraw(resource)
            return
        if resource is None:
            self._set_status(name, crd, None, "NoStorageVersion", "no version is marked storage")
            return
        expected = f"{resource.plural}.{resource.group}"
        if name != expected:
            self._set_status(
                name, crd, None, "InvalidName", f"the name must be {expected}, not {name}"
            )
            return
        if not self._served.serve(resource):
            self._set_status(
                name, crd, None, "PluralConflict", f'"{resource.plural}" is already in use'
            )
            return
        self._set_status(name, crd, resource, "", "")

    def _withdraw(self, resource: ResourceType) -> None:
        self._served.withdraw(resource.plural)
        for obj in self._list_objects(resource.plural):
            meta = obj["metadata"]
            self._writer.delete(resource.plural, meta.get("namespace"), str(meta["name"]))

    def _set_status(
        self, name: str, crd: Obj, resource: ResourceType | None, reason: str, message: str
    ) -> None:
        accepted = resource is not None
        names = (crd.get("spec") or {}).get("names") or {}
        conditions = [
            _condition("NamesAccepted", accepted, reason or "NoConflicts", message),
            _condition("Established", accepted, reason or "InitialNamesAccepted", message),
        ]

        def change(obj: Obj) -> bool:
            status = obj.setdefault("status", {})
            before = [(c.get("type"), c.get("status")) for c in status.get("conditions") or []]
            if before == [(c["type"], c["status"]) for c in conditions]:
                return False
            status["conditions"] = conditions
            status["acceptedNames"] = dict(names) if accepted else {"plural": "", "kind": ""}
            status["storedVersions"] = [resource.version] if resource is not None else []
            return True

        self._writer.mutate(CRDS, None, name, change, uid=str(crd["metadata"].get("uid")))


def _condition(kind: str, true: bool, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True" if true else "False",
        "lastTransitionTime": now_timestamp(),
        "reason": reason,
        "message": message or ("the resource is served" if true else ""),
    }
