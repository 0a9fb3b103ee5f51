"""The few request bodies kubectl only sends as Kubernetes protobuf, read as JSON objects.

kubectl's typed clients write protobuf (``application/vnd.kubernetes.protobuf``) and accept
JSON answers: ``kubectl auth can-i`` posts a SelfSubjectAccessReview (or, with ``--list``, a
SelfSubjectRulesReview) and ``kubectl create token`` a TokenRequest that way. The body is the
magic ``k8s\\0`` and a ``runtime.Unknown`` message (its type meta, then the object's own
message); the fields kept here are those the emulator answers from, by their numbers in the
API's ``generated.proto``. Any other kind is a 415, as a server that reads no protobuf says.
"""

from __future__ import annotations

from typing import Any

from devstack.kube import errors

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

Field = str | tuple[str, str]
"""A string field's JSON name, or a message field's name and message type; a name ending in
``[]`` is repeated, ``#`` an integer."""

_MESSAGES: dict[str, dict[int, Field]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: "raw"},
    "TypeMeta": {1: "apiVersion", 2: "kind"},
    "SelfSubjectAccessReview": {2: ("spec", "SelfSubjectAccessReviewSpec")},
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: "namespace",
        2: "verb",
        3: "group",
        4: "version",
        5: "resource",
        6: "subresource",
        7: "name",
    },
    "NonResourceAttributes": {1: "path", 2: "verb"},
    "SelfSubjectRulesReview": {2: ("spec", "SelfSubjectRulesReviewSpec")},
    "SelfSubjectRulesReviewSpec": {1: "namespace"},
    "TokenRequest": {2: ("spec", "TokenRequestSpec")},
    "TokenRequestSpec": {1: "audiences[]", 4: "expirationSeconds#"},
}


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == CONTENT_TYPE


def decode(body: bytes) -> dict[str, Any]:
    """The object a protobuf request body holds, as the JSON the client would have sent."""
    if not body.startswith(_MAGIC):
        raise errors.bad_request("the protobuf body does not start with the Kubernetes magic")
    envelope = _message(body[len(_MAGIC) :], "Unknown", raw=True)
    meta = envelope.get("typeMeta") or {}
    kind = meta.get("kind", "")
    if kind not in _MESSAGES or kind == "Unknown":
        raise errors.unsupported_media_type(f"{CONTENT_TYPE} (a {kind or 'body'} of no kind read)")
    return {**meta, **_message(envelope.get("raw", b""), kind)}


def _message(data: bytes, name: str, *, raw: bool = False) -> dict[str, Any]:
    fields = _MESSAGES[name]
    result: dict[str, Any] = {}
    position = 0
    try:
        while position < len(data):
            key, position = _varint(data, position)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value: Any
                value, position = _varint(data, position)
            elif wire == 2:
                length, position = _varint(data, position)
                value, position = data[position : position + length], position + length
            elif wire in (1, 5):
                position += 8 if wire == 1 else 4
                continue
            else:
                raise ValueError(f"wire type {wire}")
            field = fields.get(number)
            if isinstance(field, tuple):
                result[field[0]] = _message(value, field[1])
            elif field is not None and field.endswith("[]"):
                result.setdefault(field[:-2], []).append(value.decode())
            elif field is not None and field.endswith("#"):
                result[field[:-1]] = value
            elif field is not None:
                result[field] = value if raw and field == "raw" else value.decode()
    except (ValueError, IndexError, UnicodeDecodeError, AttributeError) as exc:
        raise errors.bad_request(f"the protobuf body cannot be read: {exc}") from None
    return result


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
