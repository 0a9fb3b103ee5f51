"""Which nodes may run labs, and which prepull images each of them still lacks.

Pure and deterministic (no I/O; input order only matters where documented): the prepuller
lists the nodes and hands each Node object to `read_node`, then asks `place` where every
prepull image is and where it must still be pulled.  Keeping the rules here means they are
tested without a cluster, and every worker decides the same way from the same nodes.

Eligibility follows what kube-scheduler would do with a lab pod, so that images are pulled
exactly where labs can land:

* A cordoned node (``spec.unschedulable``) takes no new pods.
* A node is ready only when its ``Ready`` condition says ``True``; no condition at all means
  a kubelet never reported, which is not ready either.  The ``not-ready`` and
  ``unschedulable`` taints that Kubernetes adds to such nodes are not reported again.
* Every ``nodeSelector`` label must be present with the same value.
* Every ``NoSchedule`` and ``NoExecute`` taint must be tolerated by the lab's tolerations
  (`tolerates`).  ``PreferNoSchedule`` only steers the scheduler, so it never excludes.

Whether a node holds an image is read from ``status.images``, where a kubelet lists each
image it has under all its names: ``<repository>:<tag>`` as pulled and
``<repository>@sha256:...`` when the runtime knows the digest (see `has_image`).  Names are
compared exactly as the runtime reports them, which is how the prepuller pulled them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.models.config import Toleration
from app.models.images import KnownImage

__all__ = [
    "SCHEDULING_EFFECTS",
    "NodeImages",
    "Placement",
    "has_image",
    "is_cordoned",
    "is_ready",
    "place",
    "pull_reference",
    "read_node",
    "tolerates",
]

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod off a node; ``PreferNoSchedule`` is only a preference."""

_NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

_DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
"""An OCI content digest (``algorithm:encoded``), ``sha256:<64 hex>`` in practice."""


@dataclass(frozen=True)
class NodeImages:
    """One node as the prepuller sees it.

    ``comment`` says why the node is not eligible (None when it is), several reasons joined
    with ``"; "``.  ``cached`` holds every name of every image in ``status.images``, sorted
    and deduplicated, and ``digests`` every digest found after an ``@`` in those names.

    ``entries`` keeps the names of each ``status.images`` entry together (each entry sorted,
    entries sorted): only that grouping tells which digest a tag points at on this node, so
    `has_image` can see that a tag moved.  A `NodeImages` built by hand without it is read
    as if all of ``cached`` were one image, which errs towards pulling again.
    """

    name: str
    eligible: bool
    comment: str | None
    cached: tuple[str, ...]
    digests: frozenset[str]
    entries: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where one prepull image is and where it is still needed.

    Both tuples hold eligible nodes only, sorted; each eligible node is in exactly one.
    """

    image: KnownImage
    nodes: tuple[str, ...]
    missing: tuple[str, ...]


# Eligibility ----------------------------------------------------------------------------


def is_ready(node: Mapping[str, Any]) -> bool:
    """True only when the kubelet reports ``Ready=True``: a missing condition means no
    kubelet has spoken for the node, and pulling there would just hang."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def is_cordoned(node: Mapping[str, Any]) -> bool:
    """True when the node is marked unschedulable (``kubectl cordon``, or being drained)."""
    return bool((node.get("spec") or {}).get("unschedulable"))


def tolerates(tolerations: Sequence[Toleration], taint: Mapping[str, Any]) -> bool:
    """True if any toleration matches ``taint``, with Kubernetes' matching rules.

    An empty toleration effect matches every effect.  ``Exists`` matches any value of its
    key, and with an empty key every taint.  ``Equal`` (also the default when the operator
    is empty) needs the same key and value, a missing value reading as empty.  Tolerating a
    ``NoExecute`` taint for ``toleration_seconds`` still lets a pod be scheduled, as in
    Kubernetes, so the limit plays no part here.
    """
    return any(_matches(toleration, taint) for toleration in tolerations)


def _matches(toleration: Toleration, taint: Mapping[str, Any]) -> bool:
    if toleration.effect and toleration.effect != taint.get("effect"):
        return False
    key = toleration.key or ""
    taint_key = taint.get("key") or ""
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return not key or key == taint_key
    if operator == "Equal":
        return key == taint_key and (toleration.value or "") == (taint.get("value") or "")
    return False  # unknown operators match nothing, as the API server would reject them


def read_node(
    node: Mapping[str, Any],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Toleration],
) -> NodeImages:
    """The prepuller's view of one Node object: whether labs may run there and what it holds.

    Every reason a node is not eligible is reported, not just the first, so an operator
    fixes them all in one go.  Order: cordoned, not ready, labels (by key), taints (in the
    node's order, each once).
    """
    metadata = node.get("metadata") or {}
    reasons: list[str] = []
    cordoned = is_cordoned(node)
    ready = is_ready(node)
    if cordoned:
        reasons.append("cordoned")
    if not ready:
        reasons.append("not ready")
    labels = metadata.get("labels") or {}
    for key in sorted(node_selector):
        value = node_selector[key]
        if labels.get(key) != value:
            reasons.append(f"no label {key}={value}")
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in SCHEDULING_EFFECTS or tolerates(tolerations, taint):
            continue
        key = taint.get("key") or ""
        if (key == _NOT_READY_TAINT and not ready) or (key == _UNSCHEDULABLE_TAINT and cordoned):
            continue  # the condition it stands for is already reported
        reason = f"taint {_describe_taint(taint)} is not tolerated"
        if reason not in reasons:
            reasons.append(reason)

    entries = _entries((node.get("status") or {}).get("images") or [])
    cached = tuple(sorted({name for entry in entries for name in entry}))
    digests = frozenset(d for name in cached if (d := _split(name)[2]) is not None)
    return NodeImages(
        name=str(metadata.get("name") or ""),
        eligible=not reasons,
        comment="; ".join(reasons) if reasons else None,
        cached=cached,
        digests=digests,
        entries=entries,
    )


def _describe_taint(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` as ``kubectl taint`` writes it, ``key:Effect`` without a value."""
    key = taint.get("key") or ""
    value = taint.get("value")
    return f"{key}={value}:{taint.get('effect')}" if value else f"{key}:{taint.get('effect')}"


def _entries(images: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, ...], ...]:
    """The names of each ``status.images`` entry, sorted inside and out; empty ones dropped."""
    entries = {tuple(sorted({str(n) for n in entry.get("names") or [] if n})) for entry in images}
    entries.discard(())
    return tuple(sorted(entries))


# Images ---------------------------------------------------------------------------------


def _split(name: str) -> tuple[str, str | None, str | None]:
    """``reg:5000/a/b:tag@sha256:x`` -> (``reg:5000/a/b``, ``tag``, ``sha256:x``).

    A colon counts as a tag separator only after the last slash, so a registry port is not
    taken for a tag.  Something after ``@`` that is not a digest is not returned as one.
    """
    base, at, after = name.partition("@")
    digest = after if at and _DIGEST.match(after) else None
    slash, colon = base.rfind("/"), base.rfind(":")
    if colon > slash:
        return base[:colon], base[colon + 1 :], digest
    return base, None, digest


@dataclass(frozen=True)
class _Index:
    """What a node holds, arranged for lookups: computed once per node by `place`."""

    by_digest: frozenset[tuple[str, str]]
    """(repository, digest) of every name that carries a digest."""
    tag_digests: Mapping[str, frozenset[str]]
    """For every tagged name (without ``@digest``), the digests the node reports for that
    repository alongside it: in the same entry, or after the name itself."""


def _index(node: NodeImages) -> _Index:
    by_digest: set[tuple[str, str]] = set()
    tag_digests: dict[str, set[str]] = {}
    for entry in node.entries or (node.cached,):
        parts = [_split(name) for name in entry]
        for repository, _, digest in parts:
            if digest is not None:
                by_digest.add((repository, digest))
        for repository, tag, _ in parts:
            if tag is None:
                continue
            known = tag_digests.setdefault(f"{repository}:{tag}", set())
            known.update(d for r, _, d in parts if r == repository and d is not None)
    return _Index(
        by_digest=frozenset(by_digest),
        tag_digests={name: frozenset(d) for name, d in tag_digests.items()},
    )


def _has(index: _Index, image: KnownImage) -> bool:
    repository, tag, _ = _split(image.reference)
    if image.digest is not None and (repository, image.digest) in index.by_digest:
        return True
    name = image.reference.partition("@")[0] if tag is not None else None
    if name is None or name not in index.tag_digests:
        return False
    # The digest, if the node knows one for this tag, differs (else it matched above): the
    # tag moved since the node pulled it, and the node lacks the image the tag now names.
    return image.digest is None or not index.tag_digests[name]


def has_image(node: NodeImages, image: KnownImage) -> bool:
    """True when ``node`` already holds ``image``, so no pull is needed there.

    By digest: a name ``<repository>@<digest>`` (or ``<reference>@<digest>``) of the image's
    own repository; the same digest under another repository is a different image as far as
    a pull by reference is concerned.  By name: the reference itself (or
    ``<reference>@<something>``), accepted only when the image's digest is unknown or the node
    reports no digest for that tag.  A node that reports the tag with another digest has the
    tag's previous image: the tag moved, and the new image must be pulled.
    """
    return _has(_index(node), image)


def place(images: Sequence[KnownImage], nodes: Sequence[NodeImages]) -> list[Placement]:
    """For each image, in the order of ``images``: the eligible nodes that hold it and those
    that lack it, names sorted.  Ineligible nodes appear in neither, since no lab can run
    there and pulling would waste their disk.  Node names are expected to be unique."""
    eligible = sorted((node for node in nodes if node.eligible), key=lambda n: n.name)
    indexes = [(node.name, _index(node)) for node in eligible]
    placements = []
    for image in images:
        found = [(name, _has(index, image)) for name, index in indexes]
        placements.append(
            Placement(
                image=image,
                nodes=tuple(name for name, has in found if has),
                missing=tuple(name for name, has in found if not has),
            )
        )
    return placements


def pull_reference(image: KnownImage) -> str:
    """What a pull pod runs: ``<reference>@<digest>`` when the digest is known, so the node
    gets exactly the image labs will be pinned to even if the tag moves meanwhile, and the
    runtime records both the tag and the digest; else the reference alone."""
    return f"{image.reference}@{image.digest}" if image.digest else image.reference
