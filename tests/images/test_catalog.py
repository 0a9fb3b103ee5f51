"""Building image lists from a prepull configuration, tags and digests (DMTN-222, SQR-059)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.models.config import PrepullConfig, SimpleImage, SourceType
from app.models.image_tags import TagKind
from app.models.images import ImageSet, KnownImage
from app.workloads.image import catalog
from app.workloads.image.catalog import (
    DIGEST_MARGIN,
    build_image_set,
    build_simple_set,
    digest_candidates,
)

REGISTRY = "registry.hub.docker.com"
REPOSITORY = "lsstsqre/sciplat-lab"
SOURCE = f"{REGISTRY}/{REPOSITORY}"
NOW = 1_730_000_000.0

# What a DMTN-222 repository looks like: aliases, releases and their candidates, weeklies and
# dailies with single-architecture and free-text variants, experimentals and junk.
TAGS = [
    "recommended",
    "latest",
    "latest_weekly",
    "latest_daily",
    "r26_0_0",
    "r25_0_1",
    "r170",
    "r27_0_0_rc1",
    "r26_0_0_rc2",
    "w_2024_44",
    "w_2024_44-amd64",
    "w_2024_44-arm64",
    "w_2024_43",
    "w_2024_43_20241030",
    "w_2024_42",
    "w_2024_41",
    "w_2024_40",
    "d_2024_11_05",
    "d_2024_11_05-arm64",
    "d_2024_11_04",
    "d_2024_11_03",
    "d_2024_11_02",
    "d_2024_11_01",
    "exp_w_2024_44_nosudo",
    "exp_random",
    "v17_0_1",
    "garbage",
]


def config(**overrides: Any) -> PrepullConfig:
    """The DMTN-222 example configuration, with ``overrides``."""
    values: dict[str, Any] = {
        "name": "lab",
        "type": SourceType.RUBIN,
        "registry": REGISTRY,
        "repository": REPOSITORY,
        "recommended_tag": "recommended",
        "num_releases": 1,
        "num_weeklies": 2,
        "num_dailies": 3,
        "cycle": None,
        "alias_tags": ("latest", "latest_daily", "latest_weekly"),
        "images": (),
        "groups": (),
        "document": {},
        "validation": None,
        "retention": 2,
    }
    values.update(overrides)
    return PrepullConfig(**values)


def digests_for(tags: list[str], **aliases: str) -> dict[str, str]:
    """Each tag its own digest; ``aliases`` maps an alias tag to the tag it shares one with."""
    digests = {tag: f"sha256:{tag}" for tag in tags}
    digests.update({alias: f"sha256:{target}" for alias, target in aliases.items()})
    return digests


def ref(tag: str, source: str = SOURCE) -> str:
    return f"{source}:{tag}"


def by_tag(image_set: ImageSet) -> dict[str, KnownImage]:
    return {image.tag: image for image in image_set.images}


DMTN_222_DIGESTS = digests_for(
    TAGS,
    recommended="w_2024_42",
    latest="w_2024_44",
    latest_weekly="w_2024_44",
    latest_daily="d_2024_11_05",
)


def test_dmtn_222_example_prepulls_the_right_tags() -> None:
    image_set = build_image_set(config(), TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    assert image_set.recommended == ref("w_2024_42")
    assert image_set.prepull == tuple(
        ref(tag)
        for tag in [
            "w_2024_42",
            "r26_0_0",
            "w_2024_44",
            "w_2024_43",
            "d_2024_11_05",
            "d_2024_11_04",
            "d_2024_11_03",
        ]
    )
    assert (image_set.config, image_set.refreshed) == ("lab", NOW)
    assert (image_set.error, image_set.failed) == (None, None)


def test_every_tag_is_listed_newest_first_by_kind() -> None:
    image_set = build_image_set(config(), TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    assert [image.tag for image in image_set.images] == [
        "latest",
        "latest_daily",
        "latest_weekly",
        "recommended",
        "r26_0_0",
        "r25_0_1",
        "r170",
        "w_2024_44",
        "w_2024_44-amd64",
        "w_2024_44-arm64",
        "w_2024_43",
        "w_2024_43_20241030",
        "w_2024_42",
        "w_2024_41",
        "w_2024_40",
        "d_2024_11_05",
        "d_2024_11_05-arm64",
        "d_2024_11_04",
        "d_2024_11_03",
        "d_2024_11_02",
        "d_2024_11_01",
        "r27_0_0_rc1",
        "r26_0_0_rc2",
        "exp_w_2024_44_nosudo",
        "exp_random",
        "garbage",
        "v17_0_1",
    ]
    images = by_tag(image_set)
    assert images["w_2024_44-amd64"] == KnownImage(
        reference=ref("w_2024_44-amd64"),
        tag="w_2024_44-amd64",
        name="Weekly 2024_44 (amd64)",
        kind=TagKind.WEEKLY,
        digest="sha256:w_2024_44-amd64",
    )
    assert images["garbage"].kind is TagKind.UNKNOWN
    assert images["exp_random"].name == "Experimental random"
    assert images["r27_0_0_rc1"].kind is TagKind.RELEASE_CANDIDATE


def test_aliases_are_named_after_their_targets() -> None:
    images = by_tag(build_image_set(config(), TAGS, DMTN_222_DIGESTS, refreshed=NOW))
    assert images["recommended"] == KnownImage(
        reference=ref("recommended"),
        tag="recommended",
        name="Recommended (Weekly 2024_42)",
        kind=TagKind.ALIAS,
        digest="sha256:w_2024_42",
    )
    assert images["latest_weekly"].name == "Latest Weekly (Weekly 2024_44)"
    assert images["latest"].name == "Latest (Weekly 2024_44)"
    assert images["latest_daily"].name == "Latest Daily (Daily 2024_11_05)"
    # Targets list their aliases in configured order: recommended, then aliasTags.
    assert images["w_2024_42"].aliases == ("recommended",)
    assert images["w_2024_44"].aliases == ("latest", "latest_weekly")
    assert images["d_2024_11_05"].aliases == ("latest_daily",)
    assert images["w_2024_44-amd64"].aliases == ()
    assert images["latest"].aliases == ()


def test_recommended_that_is_also_the_latest_weekly_is_not_duplicated() -> None:
    digests = digests_for(TAGS, recommended="w_2024_44", latest_weekly="w_2024_44")
    image_set = build_image_set(config(), TAGS, digests, refreshed=NOW)
    assert image_set.recommended == ref("w_2024_44")
    assert image_set.prepull == tuple(
        ref(tag)
        for tag in [
            "w_2024_44",
            "r26_0_0",
            "w_2024_43",
            "w_2024_42",
            "d_2024_11_05",
            "d_2024_11_04",
            "d_2024_11_03",
        ]
    )
    assert by_tag(image_set)["w_2024_44"].aliases == ("recommended", "latest_weekly")


def test_recommended_tag_also_in_alias_tags_is_listed_once() -> None:
    cfg = config(alias_tags=("latest", "recommended"))
    digests = digests_for(TAGS, recommended="w_2024_44", latest="w_2024_44")
    images = by_tag(build_image_set(cfg, TAGS, digests, refreshed=NOW))
    assert images["w_2024_44"].aliases == ("recommended", "latest")
    assert images["latest_weekly"].kind is TagKind.UNKNOWN


def test_alias_without_digest_keeps_its_own_name() -> None:
    digests = digests_for([t for t in TAGS if t not in ("recommended", "latest")])
    image_set = build_image_set(config(), TAGS, digests, refreshed=NOW)
    images = by_tag(image_set)
    assert images["recommended"].name == "Recommended"
    assert images["recommended"].digest is None
    assert images["latest"].name == "Latest"
    assert all(not image.aliases for image in image_set.images)
    # The recommended tag exists, so it is still recommended and prepulled, by its alias.
    assert image_set.recommended == ref("recommended")
    assert image_set.prepull[:3] == (ref("recommended"), ref("r26_0_0"), ref("w_2024_44"))


def test_alias_whose_digest_matches_no_tag_keeps_its_own_name() -> None:
    digests = {**digests_for(TAGS), "recommended": "sha256:elsewhere"}
    image_set = build_image_set(config(), TAGS, digests, refreshed=NOW)
    assert by_tag(image_set)["recommended"].name == "Recommended"
    assert image_set.recommended == ref("recommended")


def test_alias_never_targets_another_alias() -> None:
    digests = {**digests_for(TAGS), "latest": "sha256:shared", "recommended": "sha256:shared"}
    images = by_tag(build_image_set(config(), TAGS, digests, refreshed=NOW))
    assert (images["latest"].name, images["recommended"].name) == ("Latest", "Recommended")
    assert images["latest"].aliases == images["recommended"].aliases == ()


def test_missing_recommended_tag() -> None:
    tags = [t for t in TAGS if t != "recommended"]
    image_set = build_image_set(config(), tags, DMTN_222_DIGESTS, refreshed=NOW)
    assert image_set.recommended is None
    assert image_set.prepull[0] == ref("r26_0_0")
    assert len(image_set.prepull) == 6
    no_recommended = build_image_set(config(recommended_tag=None), TAGS, {}, refreshed=NOW)
    assert no_recommended.recommended is None
    # Without it configured, "recommended" is just an unknown tag.
    assert by_tag(no_recommended)["recommended"].kind is TagKind.UNKNOWN


def test_alias_target_prefers_a_plain_version_tag() -> None:
    tags = [
        "recommended",
        "latest",
        "latest_weekly",
        "r26_0_0-amd64",
        "w_2024_45_test",
        "w_2024_44",
        "w_2024_40",
        "exp_w_2024_46",
        "r26_0_0",
    ]
    digests = {
        "recommended": "sha256:a",
        "r26_0_0-amd64": "sha256:a",
        "w_2024_45_test": "sha256:a",
        "exp_w_2024_46": "sha256:a",
        "w_2024_44": "sha256:a",
        # A release promoted from a weekly: the release is named, being listed first.
        "latest": "sha256:b",
        "w_2024_40": "sha256:b",
        "r26_0_0": "sha256:b",
        # With no plain version tag, the first in listing order.
        "latest_weekly": "sha256:c",
        "exp_w_2024_47": "sha256:c",
        "w_2024_43-arm64": "sha256:c",
    }
    tags += ["exp_w_2024_47", "w_2024_43-arm64"]
    images = by_tag(build_image_set(config(), tags, digests, refreshed=NOW))
    assert images["recommended"].name == "Recommended (Weekly 2024_44)"
    assert images["latest"].name == "Latest (Release r26.0.0)"
    assert images["latest_weekly"].name == "Latest Weekly (Weekly 2024_43 (arm64))"
    assert images["w_2024_44"].aliases == ("recommended",)
    assert images["r26_0_0"].aliases == ("latest",)


def test_digest_duplicates_are_skipped_without_counting() -> None:
    tags = ["r26_0_0", "w_2024_44", "w_2024_43", "w_2024_42", "w_2024_41", "w_2024_40"]
    digests = digests_for(tags)
    digests["w_2024_43"] = digests["w_2024_44"]  # re-tagged
    digests["w_2024_42"] = digests["r26_0_0"]  # promoted to a release
    image_set = build_image_set(config(num_dailies=0), tags, digests, refreshed=NOW)
    assert image_set.prepull == (ref("r26_0_0"), ref("w_2024_44"), ref("w_2024_41"))


def test_tags_without_digests_are_still_prepulled() -> None:
    tags = ["w_2024_44", "w_2024_43", "w_2024_42"]
    image_set = build_image_set(config(), tags, {}, refreshed=NOW)
    assert image_set.prepull == (ref("w_2024_44"), ref("w_2024_43"))
    assert all(image.digest is None for image in image_set.images)


def test_counts_of_zero_and_fewer_tags_than_asked() -> None:
    cfg = config(num_releases=0, num_weeklies=5, num_dailies=0)
    image_set = build_image_set(cfg, TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    assert image_set.prepull == tuple(
        ref(tag) for tag in ["w_2024_42", "w_2024_44", "w_2024_43", "w_2024_41", "w_2024_40"]
    )
    empty = build_image_set(config(), [], {}, refreshed=NOW)
    assert empty == ImageSet(config="lab", refreshed=NOW)


CYCLE_TAGS = [
    "recommended_c0026",
    "latest",
    "w_2022_40_c0026.003",
    "w_2022_40_c0026.002",
    "w_2022_40_c0027.001",
    "w_2022_40",
    "w_2022_38_c0026.001",
    "w_2022_36_c0026",
    "d_2022_10_04_c0026.001",
    "d_2022_10_05",
    "r24_0_0_c0026.001",
    "r24_0_0",
    "r24_0_0_rc1_c0026.001",
    "w_2022_40_c0026.003-amd64",
    "exp_w_2022_40_c0026.001",
    "exp_foo",
    "garbage",
]


def test_cycle_filter_keeps_only_that_cycle_plus_aliases() -> None:
    cfg = config(recommended_tag="recommended_c0026", alias_tags=("latest",), cycle=26)
    digests = digests_for(CYCLE_TAGS, recommended_c0026="w_2022_38_c0026.001", latest="w_2022_40")
    image_set = build_image_set(cfg, CYCLE_TAGS, digests, refreshed=NOW)
    assert [image.tag for image in image_set.images] == [
        "latest",
        "recommended_c0026",
        "r24_0_0_c0026.001",
        "w_2022_40_c0026.003",
        "w_2022_40_c0026.003-amd64",
        "w_2022_40_c0026.002",
        "w_2022_38_c0026.001",
        "w_2022_36_c0026",
        "d_2022_10_04_c0026.001",
        "r24_0_0_rc1_c0026.001",
        "exp_w_2022_40_c0026.001",
    ]
    images = by_tag(image_set)
    assert images["recommended_c0026"].name == (
        "Recommended C0026 (Weekly 2022_38 (SAL Cycle 0026, Build 001))"
    )
    # Its target (cycle 0) was dropped, so "latest" has nothing to point at.
    assert images["latest"].name == "Latest"
    assert image_set.recommended == ref("w_2022_38_c0026.001")
    assert image_set.prepull == tuple(
        ref(tag)
        for tag in [
            "w_2022_38_c0026.001",
            "r24_0_0_c0026.001",
            "w_2022_40_c0026.003",
            # w_2022_40_c0026.002 is another build of a version already chosen.
            "w_2022_36_c0026",
            "d_2022_10_04_c0026.001",
        ]
    )


def test_without_a_cycle_cycle_builds_are_listed_but_not_prepulled() -> None:
    image_set = build_image_set(config(recommended_tag=None), CYCLE_TAGS, {}, refreshed=NOW)
    assert len(image_set.images) == len(CYCLE_TAGS)
    assert image_set.prepull == tuple(ref(tag) for tag in ["r24_0_0", "w_2022_40", "d_2022_10_05"])


def test_rubin_gar_references() -> None:
    registry, repository = "us-central1-docker.pkg.dev", "proj/repo/image"
    source = f"{registry}/{repository}"
    cfg = config(type=SourceType.RUBIN_GAR, registry=registry, repository=repository)
    image_set = build_image_set(cfg, TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    assert image_set.recommended == f"{source}:w_2024_42"
    assert image_set.prepull[:2] == (f"{source}:w_2024_42", f"{source}:r26_0_0")
    assert all(image.reference == f"{source}:{image.tag}" for image in image_set.images)
    assert image_set.find(f"{source}:latest") is not None


def test_input_order_does_not_change_the_result() -> None:
    expected = build_image_set(config(), TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    rng = random.Random(222)
    for _ in range(20):
        shuffled = list(TAGS)
        rng.shuffle(shuffled)
        assert build_image_set(config(), shuffled, DMTN_222_DIGESTS, refreshed=NOW) == expected
        assert digest_candidates(config(), shuffled) == digest_candidates(config(), TAGS)
    # Repeated tags change nothing either.
    assert build_image_set(config(), TAGS + TAGS, DMTN_222_DIGESTS, refreshed=NOW) == expected


def test_each_tag_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = catalog.parse_tag

    def counting(tag: str, **kwargs: Any) -> Any:
        calls.append(tag)
        return real(tag, **kwargs)

    monkeypatch.setattr(catalog, "parse_tag", counting)
    tags = [
        f"d_{year}_{month:02d}_{day:02d}"
        for year in (2023, 2024)
        for month in range(1, 13)
        for day in range(1, 29)
    ]
    image_set = build_image_set(config(), tags, {}, refreshed=NOW)
    assert len(image_set.images) == len(tags)
    assert sorted(calls) == sorted(tags)


def test_registry_functions_reject_simple_configurations() -> None:
    simple = config(name="fixed", type=SourceType.SIMPLE, registry=None, repository=None)
    with pytest.raises(ValueError, match="fixed"):
        build_image_set(simple, TAGS, {}, refreshed=NOW)
    with pytest.raises(ValueError, match="fixed"):
        digest_candidates(simple, TAGS)
    with pytest.raises(ValueError, match="lab"):
        build_simple_set(config(), {}, refreshed=NOW)


# digest_candidates --------------------------------------------------------------------


def test_digest_candidates_of_the_dmtn_222_example() -> None:
    assert digest_candidates(config(), TAGS) == [
        "recommended",
        "latest",
        "latest_daily",
        "latest_weekly",
        # Releases: all plain ones, fewer than 1 + DIGEST_MARGIN.
        "r26_0_0",
        "r25_0_1",
        "r170",
        # Weeklies: 2 + DIGEST_MARGIN plain ones, newest first.
        "w_2024_44",
        "w_2024_43",
        "w_2024_42",
        "w_2024_41",
        "w_2024_40",
        # Dailies: all plain ones, fewer than 3 + DIGEST_MARGIN.
        "d_2024_11_05",
        "d_2024_11_04",
        "d_2024_11_03",
        "d_2024_11_02",
        "d_2024_11_01",
    ]


def test_digest_candidates_are_capped_and_cycle_filtered() -> None:
    weeklies = [f"w_2024_{week:02d}" for week in range(1, 53)]
    cfg = config(num_weeklies=2, num_releases=0, num_dailies=0)
    assert digest_candidates(cfg, weeklies) == weeklies[::-1][: 2 + DIGEST_MARGIN]
    cycle = config(recommended_tag="recommended_c0026", alias_tags=("latest",), cycle=26)
    assert digest_candidates(cycle, CYCLE_TAGS) == [
        "recommended_c0026",
        "latest",
        "r24_0_0_c0026.001",
        "w_2022_40_c0026.003",
        "w_2022_40_c0026.002",
        "w_2022_38_c0026.001",
        "w_2022_36_c0026",
        "d_2022_10_04_c0026.001",
    ]
    # Absent aliases are not asked for.
    assert digest_candidates(config(), ["w_2024_44"]) == ["w_2024_44"]


def test_candidate_digests_are_enough_for_the_prepull_list() -> None:
    digests = {t: d for t, d in DMTN_222_DIGESTS.items() if t in digest_candidates(config(), TAGS)}
    full = build_image_set(config(), TAGS, DMTN_222_DIGESTS, refreshed=NOW)
    partial = build_image_set(config(), TAGS, digests, refreshed=NOW)
    assert (partial.prepull, partial.recommended) == (full.prepull, full.recommended)


# Simple configurations ----------------------------------------------------------------


def test_simple_set_keeps_configured_order_and_digests() -> None:
    images = (
        SimpleImage(
            url="registry.example.com:5000/lsst/sal-sciplat-lab:w_2024_44",
            name="Weekly 44",
            digest="sha256:configured",
        ),
        SimpleImage(url="ghcr.io/lsst/lab:recommended", name="Recommended lab", digest=None),
        SimpleImage(url="ghcr.io/lsst/lab:r26_0_0", name="Release 26", digest=None),
    )
    cfg = config(
        name="fixed", type=SourceType.SIMPLE, registry=None, repository=None, images=images
    )
    digests = {
        "registry.example.com:5000/lsst/sal-sciplat-lab:w_2024_44": "sha256:ignored",
        "ghcr.io/lsst/lab:recommended": "sha256:learnt",
    }
    image_set = build_simple_set(cfg, digests, refreshed=NOW)
    assert image_set == ImageSet(
        config="fixed",
        images=(
            KnownImage(
                reference="registry.example.com:5000/lsst/sal-sciplat-lab:w_2024_44",
                tag="w_2024_44",
                name="Weekly 44",
                kind=TagKind.WEEKLY,
                digest="sha256:configured",
            ),
            KnownImage(
                reference="ghcr.io/lsst/lab:recommended",
                tag="recommended",
                name="Recommended lab",
                kind=TagKind.UNKNOWN,
                digest="sha256:learnt",
            ),
            KnownImage(
                reference="ghcr.io/lsst/lab:r26_0_0",
                tag="r26_0_0",
                name="Release 26",
                kind=TagKind.RELEASE,
                digest=None,
            ),
        ),
        prepull=(
            "registry.example.com:5000/lsst/sal-sciplat-lab:w_2024_44",
            "ghcr.io/lsst/lab:recommended",
            "ghcr.io/lsst/lab:r26_0_0",
        ),
        recommended=None,
        refreshed=NOW,
    )


def test_simple_set_lists_a_repeated_url_once() -> None:
    images = (
        SimpleImage(url="ghcr.io/lsst/lab:a", name="First", digest=None),
        SimpleImage(url="ghcr.io/lsst/lab:b", name="Second", digest=None),
        SimpleImage(url="ghcr.io/lsst/lab:a", name="Again", digest=None),
    )
    cfg = config(
        name="fixed", type=SourceType.SIMPLE, registry=None, repository=None, images=images
    )
    image_set = build_simple_set(cfg, {}, refreshed=NOW)
    assert [image.name for image in image_set.images] == ["First", "Second"]
    assert image_set.prepull == ("ghcr.io/lsst/lab:a", "ghcr.io/lsst/lab:b")


# Properties -----------------------------------------------------------------------------

ALIAS_TAGS = ("latest", "latest_weekly")
tag_pool = st.sampled_from(
    [
        "recommended",
        *ALIAS_TAGS,
        "r26_0_0",
        "r25_0_0",
        "r24_0_0_c0026.001",
        "r27_0_0_rc1",
        *(f"w_2024_{week:02d}" for week in range(38, 45)),
        "w_2024_44-amd64",
        "w_2024_44_20241105",
        "w_2024_40_c0026.003",
        "w_2024_40_c0026",
        "w_2024_41_rsp2",
        *(f"d_2024_11_{day:02d}" for day in range(1, 6)),
        "d_2024_11_05_c0026.001",
        "exp_w_2024_44",
        "exp_foo",
        "garbage",
    ]
)
TagsAndDigests = tuple[list[str], dict[str, str]]


@st.composite
def tags_and_digests(draw: st.DrawFn) -> TagsAndDigests:
    """Tags with digests from a small pool, so aliases, duplicates and gaps all happen."""
    tags = draw(st.lists(tag_pool, max_size=30))
    digests: dict[str, str] = {}
    for tag in tags:
        digest = draw(st.none() | st.sampled_from(["sha256:1", "sha256:2", "sha256:3"]))
        if digest is not None and draw(st.booleans()):
            digests[tag] = digest
        elif draw(st.booleans()):
            digests[tag] = f"sha256:{tag}"
    return tags, digests


configs = st.builds(
    config,
    recommended_tag=st.sampled_from([None, "recommended", "latest"]),
    num_releases=st.integers(min_value=0, max_value=3),
    num_weeklies=st.integers(min_value=0, max_value=4),
    num_dailies=st.integers(min_value=0, max_value=4),
    cycle=st.sampled_from([None, 26]),
    alias_tags=st.just(ALIAS_TAGS),
)


@settings(max_examples=300)
@given(configs, tags_and_digests(), st.randoms(use_true_random=False))
def test_prepull_properties(cfg: PrepullConfig, case: TagsAndDigests, rng: random.Random) -> None:
    tags, digests = case
    image_set = build_image_set(cfg, tags, digests, refreshed=NOW)
    references = [image.reference for image in image_set.images]
    assert len(references) == len(set(references))
    assert len(image_set.prepull) == len(set(image_set.prepull))
    assert set(image_set.prepull) <= set(references)
    if image_set.recommended is not None:
        assert image_set.prepull[0] == image_set.recommended
        assert cfg.recommended_tag in tags
    else:
        assert cfg.recommended_tag not in tags
    # No two prepulled images share a digest.
    images = {image.reference: image for image in image_set.images}
    chosen = [images[r].digest for r in image_set.prepull if images[r].digest is not None]
    assert len(chosen) == len(set(chosen))
    latest = image_set.prepull[1:] if image_set.recommended is not None else image_set.prepull
    kinds = [images[r].kind for r in latest]
    assert kinds.count(TagKind.RELEASE) <= cfg.num_releases
    assert kinds.count(TagKind.WEEKLY) <= cfg.num_weeklies
    assert kinds.count(TagKind.DAILY) <= cfg.num_dailies
    assert set(kinds) <= {TagKind.RELEASE, TagKind.WEEKLY, TagKind.DAILY}
    # Targets name their aliases, and only aliases present with the same digest.
    for image in image_set.images:
        for alias in image.aliases:
            assert image.digest is not None
            assert images[ref(alias)].digest == image.digest
    shuffled = list(tags)
    rng.shuffle(shuffled)
    assert build_image_set(cfg, shuffled, digests, refreshed=NOW) == image_set
