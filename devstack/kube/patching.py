"""The three PATCH flavours a Kubernetes API server accepts.

* JSON patch (RFC 6902), via the ``jsonpatch`` package.
* JSON merge patch (RFC 7386): maps merge, ``null`` deletes, lists replace.
* Strategic merge patch: like merge patch, except lists that Kubernetes declares with a
  ``patchMergeKey`` (containers, volumes, env, ports...) merge item by item on that key, and
  ``$patch: delete`` / ``$patch: replace`` directives are honoured. The emulator knows the
  merge keys by field name, which covers the kinds it serves.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from devstack.kube import errors
from devstack.kube.store import clone

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Field name -> merge key candidates, first one present in the items wins. ``ports`` is
# keyed by ``containerPort`` in containers and by ``port`` in services.
_MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "ports": ("containerPort", "port"),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
    "addresses": ("type",),
    "images": ("names",),
    "taints": ("key",),
}

_DIRECTIVE = "$patch"


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The object ``target`` becomes after ``patch``; ``target`` itself is left untouched."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == JSON_PATCH:
        return _json_patch(target, patch)
    if not isinstance(patch, dict):
        raise errors.bad_request("the patch body must be a JSON object")
    if media == MERGE_PATCH:
        return _merge(clone(target), patch)
    if media == STRATEGIC_MERGE_PATCH:
        return _strategic(clone(target), patch, None)
    raise errors.unsupported_media_type(content_type)


def _json_patch(target: dict[str, Any], patch: Any) -> dict[str, Any]:
    if not isinstance(patch, list):
        raise errors.bad_request("a JSON patch must be a list of operations")
    try:
        result = jsonpatch.JsonPatch(patch).apply(target, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise errors.ApiError(422, "Invalid", f"the server rejected our request: {exc}") from exc
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise errors.ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise errors.bad_request("a JSON patch must leave an object")
    return result


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge."""
    if not isinstance(patch, dict):
        return clone(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _strategic(target: Any, patch: Any, field: str | None) -> Any:
    if isinstance(patch, dict):
        if patch.get(_DIRECTIVE) == "replace":
            return {k: clone(v) for k, v in patch.items() if k != _DIRECTIVE}
        if not isinstance(target, dict):
            target = {}
        for key, value in patch.items():
            if key.startswith("$"):
                # $setElementOrder, $retainKeys, $deleteFromPrimitiveList: ordering and
                # bookkeeping directives that change nothing the emulator stores.
                continue
            if value is None:
                target.pop(key, None)
            else:
                target[key] = _strategic(target.get(key), value, key)
        return target
    if isinstance(patch, list):
        keys = _MERGE_KEYS.get(field or "")
        if keys and isinstance(target, list):
            return _merge_list(target, patch, keys)
        return [
            clone(item) for item in patch if not (isinstance(item, dict) and _DIRECTIVE in item)
        ]
    return patch


def _merge_key(items: list[Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if all(isinstance(i, dict) and key in i for i in items if i.get(_DIRECTIVE) != "replace"):
            return key
    return None


def _merge_list(target: list[Any], patch: list[Any], keys: tuple[str, ...]) -> list[Any]:
    if any(isinstance(i, dict) and i.get(_DIRECTIVE) == "replace" for i in patch):
        return [clone(i) for i in patch if not (isinstance(i, dict) and _DIRECTIVE in i)]
    key = _merge_key([i for i in patch if isinstance(i, dict)] + target, keys)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [clone(i) for i in patch]
    result = [clone(i) for i in target]
    for item in patch:
        position = next(
            (n for n, existing in enumerate(result) if existing.get(key) == item.get(key)), None
        )
        if item.get(_DIRECTIVE) == "delete":
            if position is not None:
                del result[position]
        elif position is None:
            result.append(_strategic({}, item, None))
        else:
            result[position] = _strategic(result[position], item, None)
    return result
