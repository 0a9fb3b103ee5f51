"""The verbs of the Kubernetes API over the store: create, get, list, update, patch, delete.

This is where the API server's semantics live, independent of HTTP: admission (namespace
existence and termination), defaulting, validation, optimistic concurrency, the status
subresource split, graceful deletion of pods and namespaces. The WSGI layer only parses and
serializes.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from devstack.kube import custom, errors, selectors
from devstack.kube.defaults import Defaulter
from devstack.kube.patching import MERGE_PATCH, STRATEGIC_MERGE_PATCH, apply_patch
from devstack.kube.quota import admit_pod
from devstack.kube.resources import ResourceType
from devstack.kube.routing import RequestInfo
from devstack.kube.store import Store, clone, new_uid, now_timestamp
from devstack.kube.validation import Validator

_WRITE_ATTEMPTS = 8
"""Unconditional writes retry internally on a concurrent change, as kube-apiserver does."""

_DEFAULT_POD_GRACE_SECONDS = 30
_DEPENDENTS_FIRST = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}
"""The finalizer the API server gives an object deleted with a propagation policy under which
the garbage collector must see to its dependents before the object goes."""
_ORPHANING_BY_DEFAULT = frozenset({"jobs"})
"""Kinds whose deletion follows ``propagationPolicy`` (the Job controller plays the garbage
collector) and orphans their pods when it is not given, as batch/v1 does for compatibility.
The dependents of other kinds always follow in the background."""
_OWN_FINALIZATION = frozenset({"pods", "namespaces"})
"""Kinds whose deletion the cluster completes itself (the kubelet, the namespace controller);
every other kind with finalizers waits for their removal by the API."""
_IMMUTABLE_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")

JsonObject = dict[str, Any]


class Handlers:
    """Implements each verb; one instance per emulator."""

    def __init__(self, store: Store, validator: Validator, defaulter: Defaulter) -> None:
        self._store = store
        self._validator = validator
        self._defaulter = defaulter

    # -- reads -----------------------------------------------------------------------------

    def get(self, info: RequestInfo) -> JsonObject:
        return self._current(info.resource, info.namespace, info.name or "")

    def list(self, info: RequestInfo, query: dict[str, str]) -> JsonObject:
        resource = info.resource
        predicate = self.predicate(query)
        items, version = self._store.snapshot(resource.plural, info.namespace, predicate)
        selected = sorted(
            items,
            key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]),
        )
        metadata: JsonObject = {"resourceVersion": str(version)}
        start = _decode_continue(query.get("continue"))
        if start is not None:
            selected = [
                o
                for o in selected
                if (o["metadata"].get("namespace") or "", o["metadata"]["name"]) > start
            ]
        limit = _int_param(query, "limit")
        if limit and len(selected) > limit:
            last = selected[limit - 1]["metadata"]
            metadata["continue"] = _encode_continue(last.get("namespace") or "", last["name"])
            metadata["remainingItemCount"] = len(selected) - limit
            selected = selected[:limit]
        for item in selected:
            _stamp(resource, item)
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": metadata,
            "items": selected,
        }

    @staticmethod
    def predicate(query: dict[str, str], name: str | None = None) -> selectors.Predicate:
        fields = query.get("fieldSelector")
        if name:
            fields = f"metadata.name={name}" + (f",{fields}" if fields else "")
        return selectors.combine(
            selectors.parse_label_selector(query.get("labelSelector")),
            selectors.parse_field_selector(fields),
        )

    # -- writes ----------------------------------------------------------------------------

    def create(self, info: RequestInfo, body: Any, query: dict[str, str]) -> JsonObject:
        resource = info.resource
        if resource.namespaced and info.namespace is None:
            raise errors.method_not_allowed(
                f"create is not supported on {resource.plural} without a namespace"
            )
        obj = self._prepare(info, body)
        meta = obj["metadata"]
        if info.namespace is not None:
            self._admit_namespace(resource, info.namespace, meta.get("name", ""))
        for key in ("resourceVersion", "creationTimestamp", "generation"):
            meta.pop(key, None)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta["uid"] = new_uid()  # before the defaults: a Job's generated selector names it
        if "status" in resource.subresources and resource.plural != "nodes":
            obj.pop("status", None)
        self._defaulter.on_create(resource.plural, obj)
        _shape_custom(resource, obj, strict=_strict(query))
        self._validator.check(resource, obj, strict=_strict(query))
        if resource.plural == "pods" and info.namespace is not None:
            admit_pod(self._store, info.namespace, obj)
        if _dry_run(query):
            return obj
        return self._store.create(resource.plural, obj)

    def update(self, info: RequestInfo, body: Any, query: dict[str, str]) -> JsonObject:
        resource = info.resource
        obj = self._prepare(info, body)
        if obj["metadata"].get("name") != info.name:
            raise errors.bad_request(
                f"the name of the object ({obj['metadata'].get('name')}) does not match the "
                f"name on the URL ({info.name})"
            )
        precondition = obj["metadata"].get("resourceVersion") or None
        for _ in range(_WRITE_ATTEMPTS):
            current = self._current(resource, info.namespace, info.name or "")
            new = _split_status(resource, info.subresource, current, clone(obj))
            self._defaulter.on_update(resource.plural, new, current)
            _shape_custom(resource, new, strict=_strict(query))
            self._validator.check(resource, new, strict=_strict(query))
            self._validator.check_update(resource, new, current)
            _check_finalizers(resource, new, current)
            if _dry_run(query):
                return new
            expected = precondition or current["metadata"]["resourceVersion"]
            try:
                updated = self._store.update(resource.plural, new, expected_version=expected)
            except errors.ApiError as exc:
                if exc.code != 409 or precondition is not None:
                    raise _qualify(exc, resource) from exc
            else:
                return self._finalized(resource, updated)
        raise errors.conflict(resource.plural, info.name or "", resource.group)

    def patch(
        self, info: RequestInfo, body: Any, content_type: str, query: dict[str, str]
    ) -> JsonObject:
        resource = info.resource
        for _ in range(_WRITE_ATTEMPTS):
            current = self._current(resource, info.namespace, info.name or "")
            version = current["metadata"]["resourceVersion"]
            if resource.custom and content_type.startswith(STRATEGIC_MERGE_PATCH):
                # Custom resources have no patch strategies: a strategic patch merges.
                content_type = MERGE_PATCH
            patched = apply_patch(content_type, current, body)
            if not isinstance(patched.get("metadata"), dict):
                raise errors.bad_request("metadata must be an object")
            requested = patched["metadata"].get("resourceVersion")
            if requested and requested != version:
                raise errors.conflict(resource.plural, info.name or "", resource.group)
            for key in ("name", "namespace", "resourceVersion"):
                if key in current["metadata"]:
                    patched["metadata"][key] = current["metadata"][key]
            new = _split_status(resource, info.subresource, current, patched)
            new["kind"], new["apiVersion"] = resource.kind, resource.group_version
            self._defaulter.on_update(resource.plural, new, current)
            _shape_custom(resource, new, strict=_strict(query))
            self._validator.check(resource, new, strict=_strict(query))
            self._validator.check_update(resource, new, current)
            _check_finalizers(resource, new, current)
            if _dry_run(query):
                return new
            try:
                updated = self._store.update(resource.plural, new, expected_version=version)
            except errors.ApiError as exc:
                if exc.code != 409:
                    raise _qualify(exc, resource) from exc
            else:
                return self._finalized(resource, updated)
        raise errors.conflict(resource.plural, info.name or "", resource.group)

    def delete(self, info: RequestInfo, body: Any, query: dict[str, str]) -> JsonObject:
        options = body if isinstance(body, dict) else {}
        grace = _grace_period(query, options)
        policy = _propagation(query, options)
        name = info.name or ""
        return self._delete_one(info.resource, info.namespace, name, grace, options, policy)

    def delete_collection(self, info: RequestInfo, body: Any, query: dict[str, str]) -> JsonObject:
        options = body if isinstance(body, dict) else {}
        grace = _grace_period(query, options)
        policy = _propagation(query, options)
        predicate = self.predicate(query)
        resource = info.resource
        listed, version = self._store.snapshot(resource.plural, info.namespace, predicate)
        for obj in listed:
            meta = obj["metadata"]
            try:
                namespace, name = meta.get("namespace"), meta["name"]
                self._delete_one(resource, namespace, name, grace, {}, policy)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        # As kube-apiserver's generic store answers: the list it deleted, as it listed it.
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": str(version)},
            "items": [_stamp(resource, obj) for obj in listed],
        }

    # -- helpers ---------------------------------------------------------------------------

    def _current(self, resource: ResourceType, namespace: str | None, name: str) -> JsonObject:
        found = self._store.get(resource.plural, namespace, name)
        if found is None:
            raise errors.not_found(resource.plural, name, resource.group)
        return _stamp(resource, found)

    def _prepare(self, info: RequestInfo, body: Any) -> JsonObject:
        """Check the body names the right kind and namespace, and fill both in."""
        resource = info.resource
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        obj = body
        for key, expected in (("kind", resource.kind), ("apiVersion", resource.group_version)):
            given = obj.get(key)
            if given not in (None, "", expected):
                raise errors.bad_request(
                    f"the API version or kind in the request ({obj.get('apiVersion')}, "
                    f"{obj.get('kind')}) does not match the endpoint "
                    f"({resource.group_version}, {resource.kind})"
                )
            obj[key] = expected
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if resource.namespaced:
            given_ns = meta.get("namespace")
            if given_ns and info.namespace and given_ns != info.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = info.namespace
        else:
            meta.pop("namespace", None)
        return obj

    def _admit_namespace(self, resource: ResourceType, namespace: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin: no content in absent or dying namespaces."""
        ns = self._store.get("namespaces", None, namespace)
        if ns is None:
            raise errors.not_found("namespaces", namespace)
        terminating = (ns.get("status") or {}).get("phase") == "Terminating"
        if terminating or ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                resource.plural,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
                resource.group,
                causes=[
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            )

    def _delete_one(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        grace: int | None,
        options: JsonObject,
        propagation: str | None,
    ) -> JsonObject:
        current = self._current(resource, namespace, name)
        _check_preconditions(resource, current, options.get("preconditions"))
        if resource.plural == "namespaces":
            return self._terminate_namespace(resource, name, current)
        if resource.plural in _ORPHANING_BY_DEFAULT:
            finalizer = _DEPENDENTS_FIRST.get(propagation or "Orphan")
            if finalizer is not None:
                return self._delete_after_dependents(resource, namespace, name, finalizer)
        if resource.plural not in _OWN_FINALIZATION and current["metadata"].get("finalizers"):
            return self._delete_after_dependents(resource, namespace, name, None)
        if resource.plural == "pods":
            spec, status = current.get("spec") or {}, current.get("status") or {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", _DEFAULT_POD_GRACE_SECONDS)
            if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
                grace = 0  # Nothing runs it, so nothing needs time to stop: gone at once.
            if grace and grace > 0:
                return self._terminate_pod(resource, namespace, name, current, grace)
        deleted = self._store.delete(resource.plural, namespace, name)
        if deleted is None:
            raise errors.not_found(resource.plural, name, resource.group)
        if resource.returns_deleted_object:
            return _stamp(resource, deleted)
        return _success(
            {
                "name": name,
                "kind": resource.plural,
                "group": resource.group,
                "uid": deleted["metadata"]["uid"],
            }
        )

    def _terminate_namespace(
        self, resource: ResourceType, name: str, current: JsonObject
    ) -> JsonObject:
        """Mark the namespace Terminating; the cluster's namespace controller empties and
        removes it, as on a real cluster."""
        if current["metadata"].get("deletionTimestamp"):
            return current

        def mark(ns: JsonObject) -> None:
            ns["metadata"].setdefault("deletionTimestamp", now_timestamp())
            ns.setdefault("status", {})["phase"] = "Terminating"

        return _stamp(resource, self._store.mutate("namespaces", None, name, mark))

    def _delete_after_dependents(
        self, resource: ResourceType, namespace: str | None, name: str, finalizer: str | None
    ) -> JsonObject:
        """Mark the object deleted and hold it with ``finalizer`` (the cluster orphans or
        deletes its dependents, then removes it), or with the finalizers it has: whoever set
        them removes them when done, and the last one's removal deletes it."""

        def mark(obj: JsonObject) -> None:
            meta = obj["metadata"]
            meta.setdefault("deletionTimestamp", now_timestamp())
            meta.setdefault("deletionGracePeriodSeconds", 0)
            finalizers = meta.setdefault("finalizers", [])
            if finalizer is not None and finalizer not in finalizers:
                finalizers.append(finalizer)

        return _stamp(resource, self._store.mutate(resource.plural, namespace, name, mark))

    def _finalized(self, resource: ResourceType, obj: JsonObject) -> JsonObject:
        """An object being deleted goes once a write leaves it without finalizers."""
        meta = obj["metadata"]
        if (
            resource.plural in _OWN_FINALIZATION
            or not meta.get("deletionTimestamp")
            or meta.get("finalizers")
        ):
            return obj
        self._store.delete(resource.plural, meta.get("namespace"), meta["name"])
        return obj

    def _terminate_pod(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        current: JsonObject,
        grace: int,
    ) -> JsonObject:
        """Start graceful deletion; the cluster's kubelet stops the pod and removes it."""
        if current["metadata"].get("deletionTimestamp"):
            return current
        deadline = (datetime.now(UTC) + timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")

        def mark(pod: JsonObject) -> None:
            if not pod["metadata"].get("deletionTimestamp"):
                pod["metadata"]["deletionTimestamp"] = deadline
                pod["metadata"]["deletionGracePeriodSeconds"] = grace

        return _stamp(resource, self._store.mutate("pods", namespace, name, mark))


def _split_status(
    resource: ResourceType, subresource: str, current: JsonObject, new: JsonObject
) -> JsonObject:
    """Apply the status-subresource rule: the main resource cannot change status, the
    status subresource can change nothing else. Server-owned metadata always survives."""
    if subresource == "status":
        merged = clone(current)
        merged["status"] = new.get("status") or {}
        new = merged
    elif "status" in resource.subresources and resource.plural != "nodes":
        if "status" in current:
            new["status"] = clone(current["status"])
        else:
            new.pop("status", None)
    for key in _IMMUTABLE_META:
        if key in current["metadata"]:
            new["metadata"][key] = current["metadata"][key]
        else:
            new["metadata"].pop(key, None)
    return new


def _check_finalizers(resource: ResourceType, new: JsonObject, current: JsonObject) -> None:
    """No finalizer may be added to an object being deleted."""
    if not current["metadata"].get("deletionTimestamp"):
        return
    before = set(current["metadata"].get("finalizers") or [])
    added = [f for f in new["metadata"].get("finalizers") or [] if f not in before]
    if added:
        message = (
            "Forbidden: no new finalizers can be added if the object is being deleted, found "
            f"new finalizers {json.dumps(added)}"
        )
        causes = [
            {"reason": "FieldValueForbidden", "message": message, "field": "metadata.finalizers"}
        ]
        raise errors.invalid(resource.kind, new["metadata"]["name"], causes, resource.group)


def _check_preconditions(resource: ResourceType, current: JsonObject, preconditions: Any) -> None:
    if not isinstance(preconditions, dict):
        return
    meta = current["metadata"]
    for key in ("uid", "resourceVersion"):
        wanted = preconditions.get(key)
        if wanted and wanted != meta.get(key):
            raise errors.ApiError(
                409,
                "Conflict",
                f"Precondition failed: {key}: {wanted}, object's {key}: {meta.get(key)}",
                details={"name": meta["name"], "kind": resource.plural},
            )


def _qualify(exc: errors.ApiError, resource: ResourceType) -> errors.ApiError:
    """Store errors name the plural only; add the group as kube-apiserver does."""
    if resource.group and exc.details and "name" in exc.details and "group" not in exc.details:
        name = exc.details["name"]
        if exc.code == 404:
            return errors.not_found(resource.plural, name, resource.group)
        if exc.reason == "Conflict":
            return errors.conflict(resource.plural, name, resource.group)
    return exc


def _stamp(resource: ResourceType, obj: JsonObject) -> JsonObject:
    """Objects written by the cluster simulation may lack ``kind``; responses never do."""
    obj.setdefault("kind", resource.kind)
    obj.setdefault("apiVersion", resource.group_version)
    return obj


def _success(details: JsonObject) -> JsonObject:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {k: v for k, v in details.items() if v},
    }


def _int_param(query: dict[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}") from None


def _grace_period(query: dict[str, str], options: JsonObject) -> int | None:
    """``gracePeriodSeconds`` from the query, else from the DeleteOptions body."""
    grace = _int_param(query, "gracePeriodSeconds")
    if grace is None and isinstance(options.get("gracePeriodSeconds"), int):
        grace = options["gracePeriodSeconds"]
    return grace


def _propagation(query: dict[str, str], options: JsonObject) -> str | None:
    """The deletion's ``propagationPolicy`` from the query or the DeleteOptions body, or from
    the older ``orphanDependents``; None when neither says."""
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    if policy:
        return str(policy)
    orphan = query.get("orphanDependents", options.get("orphanDependents"))
    if orphan is None or orphan == "":
        return None
    return "Orphan" if str(orphan).lower() == "true" else "Background"


def _shape_custom(resource: ResourceType, obj: JsonObject, *, strict: bool) -> None:
    """What a custom resource's schema does before validation: unknown fields pruned (or,
    with strict field validation, refused) and defaults filled in."""
    if resource.schema is None:
        return
    removed = custom.prune(obj, resource.schema, root=True)
    if removed and strict:
        meta = obj.get("metadata") or {}
        causes = [
            {"reason": "FieldValueInvalid", "message": f'unknown field "{path}"', "field": path}
            for path in removed
        ]
        raise errors.invalid(resource.kind, str(meta.get("name") or ""), causes, resource.group)
    custom.apply_defaults(obj, resource.schema)


def _strict(query: dict[str, str]) -> bool:
    return query.get("fieldValidation", "") == "Strict"


def _dry_run(query: dict[str, str]) -> bool:
    return query.get("dryRun", "") == "All"


def _encode_continue(namespace: str, name: str) -> str:
    raw = json.dumps([namespace, name]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str | None) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        namespace, name = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid") from None
    return str(namespace), str(name)
