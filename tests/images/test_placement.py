"""Which nodes may run labs, and which prepull images each of them still lacks."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.models.config import Toleration
from app.models.image_tags import TagKind
from app.models.images import KnownImage
from app.workloads.image.placement import (
    NodeImages,
    Placement,
    has_image,
    is_cordoned,
    is_ready,
    place,
    pull_reference,
    read_node,
    tolerates,
)

REPOSITORY = "registry.example.org:5000/lsstsqre/sciplat-lab"
OTHER = "registry.example.org:5000/lsstsqre/other-lab"
SELECTOR = {"node-role": "lab"}


def digest(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


D1, D2, D3 = digest("one"), digest("two"), digest("three")


def toleration(
    key: str | None = None,
    operator: str = "Equal",
    value: str | None = None,
    effect: str | None = None,
    seconds: int | None = None,
) -> Toleration:
    return Toleration(
        key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds
    )


def taint(key: str, effect: str = "NoSchedule", value: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        result["value"] = value
    return result


def node(
    name: str = "node-1",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    images: list[list[str]] | None = None,
    ready: bool | None = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node object as the API returns it; ``ready=None`` leaves out the Ready condition."""
    conditions: list[dict[str, Any]] = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **SELECTOR, **(labels or {})},
        },
        "spec": spec,
        "status": {
            "conditions": conditions,
            "images": [{"names": names, "sizeBytes": 1000} for names in images or []],
        },
    }


def image(tag: str, image_digest: str | None = None, repository: str = REPOSITORY) -> KnownImage:
    return KnownImage(
        reference=f"{repository}:{tag}",
        tag=tag,
        name=tag,
        kind=TagKind.WEEKLY,
        digest=image_digest,
    )


def read(obj: dict[str, Any], tolerations: tuple[Toleration, ...] = ()) -> NodeImages:
    return read_node(obj, SELECTOR, tolerations)


# Eligibility ----------------------------------------------------------------------------


def test_ready_node_matching_everything_is_eligible() -> None:
    result = read(node())
    assert result.name == "node-1"
    assert result.eligible
    assert result.comment is None


def test_readiness() -> None:
    assert is_ready(node(ready=True))
    assert not is_ready(node(ready=False))
    assert not is_ready(node(ready=None))
    assert not is_ready({})
    unknown = node()
    unknown["status"]["conditions"][-1]["status"] = "Unknown"
    assert not is_ready(unknown)

    assert read(node(ready=False)).comment == "not ready"
    assert read(node(ready=None)).comment == "not ready"
    assert not read(node(ready=None)).eligible


def test_not_ready_taint_is_not_reported_twice() -> None:
    obj = node(ready=False, taints=[taint("node.kubernetes.io/not-ready")])
    assert read(obj).comment == "not ready"
    # On a node that says it is ready, a left-over taint still counts.
    obj = node(ready=True, taints=[taint("node.kubernetes.io/not-ready")])
    assert read(obj).comment == "taint node.kubernetes.io/not-ready:NoSchedule is not tolerated"


def test_cordoned_node() -> None:
    assert is_cordoned(node(unschedulable=True))
    assert not is_cordoned(node())
    obj = node(unschedulable=True, taints=[taint("node.kubernetes.io/unschedulable")])
    result = read(obj)
    assert not result.eligible
    assert result.comment == "cordoned"


def test_node_selector() -> None:
    selector = {"node-role": "lab", "zone": "a"}
    assert read_node(node(labels={"zone": "a"}), selector, ()).eligible
    assert read_node(node(), {}, ()).eligible
    result = read_node(node(labels={"zone": "b"}), selector, ())
    assert not result.eligible
    assert result.comment == "no label zone=a"
    bare = node()
    bare["metadata"]["labels"] = {}
    # Reported by key, whatever order the selector was configured in.
    result = read_node(bare, {"zone": "a", "node-role": "lab"}, ())
    assert result.comment == "no label node-role=lab; no label zone=a"


def test_untolerated_taints_exclude_the_node() -> None:
    for effect in ("NoSchedule", "NoExecute"):
        result = read(node(taints=[taint("dedicated", effect, "gpu")]))
        assert not result.eligible
        assert result.comment == f"taint dedicated=gpu:{effect} is not tolerated"
    result = read(node(taints=[taint("maintenance")]))
    assert result.comment == "taint maintenance:NoSchedule is not tolerated"


def test_prefer_no_schedule_never_excludes() -> None:
    assert read(node(taints=[taint("dedicated", "PreferNoSchedule", "gpu")])).eligible


def test_tolerated_taints() -> None:
    gpu = node(taints=[taint("dedicated", "NoSchedule", "gpu")])
    assert read(gpu, (toleration("dedicated", "Equal", "gpu", "NoSchedule"),)).eligible
    assert read(gpu, (toleration("dedicated", "Exists", effect="NoSchedule"),)).eligible
    assert read(gpu, (toleration(None, "Exists"),)).eligible
    assert read(gpu, (toleration("", "Exists"),)).eligible
    # No effect in the toleration: it matches every effect.
    assert read(gpu, (toleration("dedicated", "Equal", "gpu"),)).eligible
    noexec = node(taints=[taint("dedicated", "NoExecute", "gpu")])
    assert read(noexec, (toleration("dedicated", "Equal", "gpu", seconds=60),)).eligible

    # Near misses.
    assert not read(gpu, (toleration("dedicated", "Equal", "cpu", "NoSchedule"),)).eligible
    assert not read(gpu, (toleration("dedicated", "Equal", "gpu", "NoExecute"),)).eligible
    assert not read(gpu, (toleration("other", "Exists"),)).eligible
    assert not read(gpu, (toleration(None, "Exists", effect="NoExecute"),)).eligible


def test_tolerates_matching_rules() -> None:
    valueless = taint("maintenance")
    assert tolerates([toleration("maintenance", "Equal")], valueless)
    assert tolerates([toleration("maintenance", "Equal", "")], valueless)
    assert tolerates([toleration("maintenance", "")], valueless)  # empty operator is Equal
    assert not tolerates([toleration("maintenance", "Equal", "yes")], valueless)
    assert tolerates([toleration("maintenance", "Exists", effect="NoSchedule")], valueless)
    assert not tolerates([toleration("maintenance", "Bogus")], valueless)
    assert not tolerates([], valueless)
    # Any one toleration is enough.
    assert tolerates([toleration("a", "Exists"), toleration("maintenance", "Exists")], valueless)


def test_several_reasons_are_joined() -> None:
    obj = node(
        ready=False,
        unschedulable=True,
        taints=[
            taint("dedicated", "NoSchedule", "gpu"),
            taint("dedicated", "NoSchedule", "gpu"),
            taint("soft", "PreferNoSchedule"),
            taint("evict", "NoExecute"),
        ],
    )
    obj["metadata"]["labels"].pop("node-role")
    assert read(obj).comment == (
        "cordoned; not ready; no label node-role=lab; "
        "taint dedicated=gpu:NoSchedule is not tolerated; "
        "taint evict:NoExecute is not tolerated"
    )


def test_an_empty_object_is_read_without_errors() -> None:
    result = read_node({}, {}, ())
    assert result == NodeImages(
        name="", eligible=False, comment="not ready", cached=(), digests=frozenset()
    )


# What a node holds ----------------------------------------------------------------------


def test_cached_names_and_digests() -> None:
    obj = node(
        images=[
            [f"{REPOSITORY}@{D1}", f"{REPOSITORY}:w_2024_44", f"{REPOSITORY}:recommended"],
            [f"{OTHER}:w_2024_40@{D2}"],
            [f"{REPOSITORY}:w_2024_44"],  # a duplicate name in another entry
            [],
            ["localhost/built:dev", "weird@notadigest"],
        ]
    )
    result = read(obj)
    assert result.cached == tuple(
        sorted(
            {
                f"{REPOSITORY}@{D1}",
                f"{REPOSITORY}:w_2024_44",
                f"{REPOSITORY}:recommended",
                f"{OTHER}:w_2024_40@{D2}",
                "localhost/built:dev",
                "weird@notadigest",
            }
        )
    )
    assert result.digests == frozenset({D1, D2})
    assert read(node(images=[])).cached == ()
    assert read(node(images=[])).digests == frozenset()


def test_entries_do_not_depend_on_listing_order() -> None:
    names = [[f"{REPOSITORY}:a", f"{REPOSITORY}@{D1}"], [f"{REPOSITORY}:b"]]
    shuffled = [list(reversed(n)) for n in reversed(names)]
    assert read(node(images=names)) == read(node(images=shuffled))


def test_has_image_by_digest() -> None:
    held = read(node(images=[[f"{REPOSITORY}@{D1}", f"{REPOSITORY}:recommended"]]))
    # The tag was never pulled under this name, but the content is there.
    assert has_image(held, image("w_2024_44", D1))
    assert not has_image(held, image("w_2024_44", D2))
    assert not has_image(held, image("w_2024_44"))


def test_has_image_by_reference_at_digest_name() -> None:
    held = read(node(images=[[f"{REPOSITORY}:w_2024_44@{D1}"]]))
    assert has_image(held, image("w_2024_44", D1))
    assert has_image(held, image("w_2024_44"))
    assert has_image(held, image("w_2024_43", D1))
    # The tag with another digest: it moved.
    assert not has_image(held, image("w_2024_44", D2))


def test_has_image_by_name() -> None:
    undigested = read(node(images=[[f"{REPOSITORY}:w_2024_44"]]))
    assert has_image(undigested, image("w_2024_44"))
    # No digest info for the name on the node: the name is all there is to go by.
    assert has_image(undigested, image("w_2024_44", D1))
    assert not has_image(undigested, image("w_2024_43"))
    assert not has_image(undigested, image("w_2024_44", repository=OTHER))

    digested = read(node(images=[[f"{REPOSITORY}@{D1}", f"{REPOSITORY}:w_2024_44"]]))
    assert has_image(digested, image("w_2024_44"))
    assert has_image(digested, image("w_2024_44", D1))


def test_a_moved_tag_is_not_held() -> None:
    held = read(node(images=[[f"{REPOSITORY}@{D1}", f"{REPOSITORY}:recommended"]]))
    assert not has_image(held, image("recommended", D2))
    # Once the new image is pulled, it is held, whatever became of the old one.
    both = read(
        node(
            images=[
                [f"{REPOSITORY}@{D1}"],
                [f"{REPOSITORY}@{D2}", f"{REPOSITORY}:recommended"],
            ]
        )
    )
    assert has_image(both, image("recommended", D2))


def test_digests_of_other_tags_do_not_make_a_tag_moved() -> None:
    # Another tag of the repository has a digest; this one has none on the node.
    held = read(
        node(
            images=[[f"{REPOSITORY}@{D1}", f"{REPOSITORY}:w_2024_40"], [f"{REPOSITORY}:w_2024_44"]]
        )
    )
    assert has_image(held, image("w_2024_44", D2))


def test_a_digest_of_another_repository_does_not_match() -> None:
    held = read(node(images=[[f"{OTHER}@{D1}", f"{OTHER}:w_2024_44"]]))
    assert D1 in held.digests
    assert not has_image(held, image("w_2024_44", D1))
    assert has_image(held, image("w_2024_44", D1, repository=OTHER))


def test_registry_port_is_not_a_tag() -> None:
    # ``registry.example.org:5000/lsstsqre/sciplat-lab`` has a colon before its last slash.
    held = read(node(images=[[f"{REPOSITORY}@{D1}"]]))
    assert has_image(held, image("anything", D1))
    prefix = read(node(images=[["registry.example.org@" + D1]]))
    assert not has_image(prefix, image("anything", D1))


def test_hand_built_node_without_entries_is_read_conservatively() -> None:
    # Without the grouping, any digest of the repository counts as info for every tag.
    bare = NodeImages(
        name="n",
        eligible=True,
        comment=None,
        cached=(f"{REPOSITORY}:w_2024_44",),
        digests=frozenset(),
    )
    assert has_image(bare, image("w_2024_44", D1))
    moved = NodeImages(
        name="n",
        eligible=True,
        comment=None,
        cached=(f"{REPOSITORY}:w_2024_44", f"{REPOSITORY}@{D2}"),
        digests=frozenset({D2}),
    )
    assert not has_image(moved, image("w_2024_44", D1))
    assert has_image(moved, image("w_2024_44", D2))


# Placement ------------------------------------------------------------------------------


def test_place_keeps_image_order_and_sorts_nodes() -> None:
    weekly, daily, release = image("w_2024_44", D1), image("d_2024_11_05", D2), image("r26", D3)
    nodes = [
        read(node("node-c", images=[[f"{REPOSITORY}@{D1}", f"{REPOSITORY}:w_2024_44"]])),
        read(node("node-a", images=[[f"{REPOSITORY}:d_2024_11_05@{D2}"]])),
        read(node("node-b", images=[[f"{REPOSITORY}@{D1}"], [f"{REPOSITORY}@{D2}"]])),
        read(node("node-x", ready=False, images=[[f"{REPOSITORY}@{D3}"]])),
        read(node("node-y", taints=[taint("dedicated", value="gpu")])),
    ]
    assert place([release, weekly, daily], nodes) == [
        Placement(image=release, nodes=(), missing=("node-a", "node-b", "node-c")),
        Placement(image=weekly, nodes=("node-b", "node-c"), missing=("node-a",)),
        Placement(image=daily, nodes=("node-a", "node-b"), missing=("node-c",)),
    ]
    assert place([], nodes) == []
    assert place([weekly], []) == [Placement(image=weekly, nodes=(), missing=())]


def test_pull_reference() -> None:
    assert pull_reference(image("w_2024_44", D1)) == f"{REPOSITORY}:w_2024_44@{D1}"
    assert pull_reference(image("w_2024_44")) == f"{REPOSITORY}:w_2024_44"


def test_a_pulled_reference_is_then_held() -> None:
    # What the runtime reports after running `pull_reference`: the name as pulled, or the
    # reference and ``repository@digest`` as containerd splits them.
    for wanted in (image("w_2024_44", D1), image("w_2024_44")):
        pulled = pull_reference(wanted)
        assert has_image(read(node(images=[[pulled]])), wanted)
    split = [f"{REPOSITORY}:w_2024_44", f"{REPOSITORY}@{D1}"]
    assert has_image(read(node(images=[split])), image("w_2024_44", D1))


# Properties -----------------------------------------------------------------------------

TAGS = ("recommended", "w_2024_44", "w_2024_43", "d_2024_11_05")
DIGESTS = (D1, D2, D3)


@st.composite
def image_names(draw: st.DrawFn) -> list[str]:
    """The names of one cached image: tags and a digest name of one repository, from small
    pools so that matches, moved tags and other repositories' digests all happen."""
    repository = draw(st.sampled_from([REPOSITORY, OTHER]))
    names = [f"{repository}:{tag}" for tag in draw(st.sets(st.sampled_from(TAGS), max_size=2))]
    found = draw(st.none() | st.sampled_from(DIGESTS))
    if found is not None:
        names.append(f"{repository}@{found}")
    return names


@st.composite
def node_objects(draw: st.DrawFn, name: str) -> dict[str, Any]:
    return node(
        name,
        ready=draw(st.sampled_from([True, True, True, True, False, None])),
        unschedulable=draw(st.sampled_from([False, False, False, True])),
        labels=draw(st.sampled_from([{}, {}, {}, {"node-role": "other"}])),
        taints=draw(
            st.lists(
                st.builds(
                    taint,
                    st.sampled_from(["dedicated", "evict"]),
                    st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
                    st.sampled_from([None, "gpu"]),
                ),
                max_size=1,
            )
        ),
        images=draw(st.lists(image_names(), max_size=4)),
    )


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from([f"node-{i}" for i in range(8)]), unique=True))
    return [draw(node_objects(name)) for name in names]


known_images = st.builds(
    image,
    st.sampled_from(TAGS),
    st.none() | st.sampled_from(DIGESTS),
    st.sampled_from([REPOSITORY, OTHER]),
)
tolerations = st.lists(
    st.builds(
        toleration,
        st.sampled_from([None, "dedicated", "evict"]),
        st.sampled_from(["Equal", "Exists"]),
        st.sampled_from([None, "gpu"]),
        st.sampled_from([None, "NoSchedule", "NoExecute"]),
    ),
    max_size=2,
).map(tuple)


@settings(max_examples=300)
@given(clusters(), st.lists(known_images, max_size=5), tolerations)
def test_every_eligible_node_is_placed_once(
    objects: list[dict[str, Any]], images: list[KnownImage], tols: tuple[Toleration, ...]
) -> None:
    nodes = [read(obj, tols) for obj in objects]
    eligible = {n.name for n in nodes if n.eligible}
    placements = place(images, nodes)
    assert [p.image for p in placements] == images
    for placement in placements:
        assert set(placement.nodes).isdisjoint(placement.missing)
        assert set(placement.nodes) | set(placement.missing) == eligible
        assert list(placement.nodes) == sorted(placement.nodes)
        assert list(placement.missing) == sorted(placement.missing)
        by_name = {n.name: n for n in nodes}
        for name in placement.nodes:
            assert has_image(by_name[name], placement.image)
    for n in nodes:
        assert n.eligible == (n.comment is None)
    assert place(images, list(reversed(nodes))) == placements
