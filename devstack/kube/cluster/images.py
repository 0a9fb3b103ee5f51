"""A node's image cache: which images it holds, and pulls in progress on it.

A prepuller decides what to pull by reading ``status.images`` of each node, so a pulled image
must show up there under the names a real container runtime reports: the reference as pulled
and ``repository@sha256:...`` when the digest is known.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .cache import Obj


def repository(reference: str) -> str:
    """The reference without tag or digest: ``reg:5000/a/b:tag`` -> ``reg:5000/a/b``."""
    name = reference.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def digest_name(reference: str, digest: str) -> str:
    return f"{repository(reference)}@{digest}"


def image_id(reference: str, digest: str | None) -> str:
    """The ``imageID`` a container status reports; a stable made-up digest when unknown."""
    if digest is None:
        digest = "sha256:" + hashlib.sha256(reference.encode()).hexdigest()
    return digest_name(reference, digest)


def node_has_image(node: Obj, reference: str, digest: str | None) -> bool:
    """True if any name of any cached image is the reference, or carries the same digest."""
    for entry in (node.get("status") or {}).get("images") or []:
        for name in entry.get("names") or []:
            if name == reference or (digest is not None and name.endswith("@" + digest)):
                return True
    return False


def add_image(node: Obj, reference: str, digest: str | None, size: int) -> bool:
    """Record ``reference`` in the node's image list; True if the list changed.

    A new tag of an image already cached by digest joins that entry's names, as one image
    known by several names.
    """
    status = node.setdefault("status", {})
    entries: list[dict[str, Any]] = list(status.get("images") or [])
    wanted = [reference] + ([digest_name(reference, digest)] if digest else [])
    for entry in entries:
        names = list(entry.get("names") or [])
        same = reference in names or (
            digest is not None and any(n.endswith("@" + digest) for n in names)
        )
        if same:
            missing = [n for n in wanted if n not in names]
            if not missing:
                return False
            entry["names"] = names + missing
            status["images"] = entries
            return True
    entries.append({"names": wanted, "sizeBytes": size})
    status["images"] = entries
    return True


@dataclass
class Pull:
    """A pull in progress on one node; pods needing the same image wait for it to finish."""

    node: str
    reference: str
    started: float
    due: float


class PullTracker:
    """Pulls in progress, keyed by node and reference, so a node pulls an image only once."""

    def __init__(self) -> None:
        self._pulls: dict[tuple[str, str], Pull] = {}

    def get(self, node: str, reference: str) -> Pull | None:
        return self._pulls.get((node, reference))

    def begin(self, node: str, reference: str, started: float, due: float) -> Pull:
        pull = Pull(node, reference, started, due)
        self._pulls[(node, reference)] = pull
        return pull

    def finish(self, pull: Pull) -> None:
        if self._pulls.get((pull.node, pull.reference)) is pull:
            del self._pulls[(pull.node, pull.reference)]

    def forget_node(self, node: str) -> None:
        for key in [k for k in self._pulls if k[0] == node]:
            del self._pulls[key]
