"""The SQR-059 tag parser: kinds, components, display names and listing order."""

from __future__ import annotations

import datetime
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.models.image_tags import (
    ARCHITECTURES,
    KIND_ORDER,
    MAX_TAG_LENGTH,
    ParsedTag,
    TagKind,
    newest_first,
    parse_tag,
)

ALIASES = frozenset({"recommended", "latest", "latest_weekly", "recommended_c0026"})

# tag, kind, display name
DISPLAY_CASES = [
    ("r26_0_0", TagKind.RELEASE, "Release r26.0.0"),
    ("r22_0_1", TagKind.RELEASE, "Release r22.0.1"),
    ("r17_0_1", TagKind.RELEASE, "Release r17.0.1"),
    ("r170", TagKind.RELEASE, "Release r17.0.0"),
    ("r0_10_100", TagKind.RELEASE, "Release r0.10.100"),
    ("r26_0_0_rc1", TagKind.RELEASE_CANDIDATE, "Release Candidate r26.0.0-rc1"),
    ("r22_0_0_rc12", TagKind.RELEASE_CANDIDATE, "Release Candidate r22.0.0-rc12"),
    ("w_2024_42", TagKind.WEEKLY, "Weekly 2024_42"),
    ("w_2024_01", TagKind.WEEKLY, "Weekly 2024_01"),
    ("d_2024_11_05", TagKind.DAILY, "Daily 2024_11_05"),
    ("d_2024_02_29", TagKind.DAILY, "Daily 2024_02_29"),
    ("w_2024_44_c0040", TagKind.WEEKLY, "Weekly 2024_44 (SAL Cycle 0040)"),
    ("w_2024_44_c0040.001", TagKind.WEEKLY, "Weekly 2024_44 (SAL Cycle 0040, Build 001)"),
    ("d_2024_11_05_c0040.002", TagKind.DAILY, "Daily 2024_11_05 (SAL Cycle 0040, Build 002)"),
    ("w_2024_44-amd64", TagKind.WEEKLY, "Weekly 2024_44 (amd64)"),
    ("w_2024_44-arm64", TagKind.WEEKLY, "Weekly 2024_44 (arm64)"),
    ("w_2024_44_amd64", TagKind.WEEKLY, "Weekly 2024_44 [amd64]"),
    ("w_2021_19_20210513", TagKind.WEEKLY, "Weekly 2021_19 [20210513]"),
    (
        "w_2021_19_c0019.001_20210513",
        TagKind.WEEKLY,
        "Weekly 2021_19 (SAL Cycle 0019, Build 001) [20210513]",
    ),
    ("w_2024_44_foo-bar", TagKind.WEEKLY, "Weekly 2024_44 [foo-bar]"),
    ("w_2024_44_foo_bar-arm64", TagKind.WEEKLY, "Weekly 2024_44 [foo_bar] (arm64)"),
    ("w_2024_44_c0040x", TagKind.WEEKLY, "Weekly 2024_44 [c0040x]"),
    ("w_2024_44_rc1", TagKind.WEEKLY, "Weekly 2024_44 [rc1]"),
    ("r21_0_1_rsp9", TagKind.RELEASE, "Release r21.0.1 (RSP Build 9)"),
    (
        "r21_0_1_rsp9_c0020.002_20210703",
        TagKind.RELEASE,
        "Release r21.0.1 (RSP Build 9) (SAL Cycle 0020, Build 002) [20210703]",
    ),
    (
        "r28_0_0_rc2_c0040.001-amd64",
        TagKind.RELEASE_CANDIDATE,
        "Release Candidate r28.0.0-rc2 (SAL Cycle 0040, Build 001) (amd64)",
    ),
    ("exp_w_2024_44_nosudo", TagKind.EXPERIMENTAL, "Experimental Weekly 2024_44 [nosudo]"),
    ("exp_w_2021_13", TagKind.EXPERIMENTAL, "Experimental Weekly 2021_13"),
    (
        "exp_r22_0_0_rc1_c0020.003_20210609",
        TagKind.EXPERIMENTAL,
        "Experimental Release Candidate r22.0.0-rc1 (SAL Cycle 0020, Build 003) [20210609]",
    ),
    ("exp_foo", TagKind.EXPERIMENTAL, "Experimental foo"),
    ("exp_ajt_test", TagKind.EXPERIMENTAL, "Experimental ajt_test"),
    ("exp_foo-amd64", TagKind.EXPERIMENTAL, "Experimental foo-amd64"),
    ("exp_exp_w_2024_44", TagKind.EXPERIMENTAL, "Experimental exp_w_2024_44"),
    ("exp_recommended", TagKind.EXPERIMENTAL, "Experimental recommended"),
    ("recommended", TagKind.ALIAS, "Recommended"),
    ("latest", TagKind.ALIAS, "Latest"),
    ("latest_weekly", TagKind.ALIAS, "Latest Weekly"),
    ("recommended_c0026", TagKind.ALIAS, "Recommended C0026"),
    # Not SQR-059 forms, or not valid ones: unknown, kept, shown as they are.
    ("latest_daily", TagKind.UNKNOWN, "latest_daily"),
    ("v17_0_1", TagKind.UNKNOWN, "v17_0_1"),
    ("r_21_0_1", TagKind.UNKNOWN, "r_21_0_1"),
    ("r21_00_1", TagKind.UNKNOWN, "r21_00_1"),
    ("r1700", TagKind.UNKNOWN, "r1700"),
    ("r26_0", TagKind.UNKNOWN, "r26_0"),
    ("w_2024_00", TagKind.UNKNOWN, "w_2024_00"),
    ("w_2024_54", TagKind.UNKNOWN, "w_2024_54"),
    ("w_2024_4", TagKind.UNKNOWN, "w_2024_4"),
    ("w_24_42", TagKind.UNKNOWN, "w_24_42"),
    ("d_2023_02_29", TagKind.UNKNOWN, "d_2023_02_29"),
    ("d_2024_13_01", TagKind.UNKNOWN, "d_2024_13_01"),
    ("d_2024_11_5", TagKind.UNKNOWN, "d_2024_11_5"),
    ("w_2024_42_", TagKind.UNKNOWN, "w_2024_42_"),
    ("w_2024_42-x86", TagKind.UNKNOWN, "w_2024_42-x86"),
    ("w_2024_42\n", TagKind.UNKNOWN, "w_2024_42\n"),
    ("w_2024_42_a b", TagKind.UNKNOWN, "w_2024_42_a b"),
    ("W_2024_42", TagKind.UNKNOWN, "W_2024_42"),
    ("w_\u0662\u0660\u0662\u0664_42", TagKind.UNKNOWN, "w_\u0662\u0660\u0662\u0664_42"),
    ("exp_", TagKind.UNKNOWN, "exp_"),
    ("exp_foo bar", TagKind.UNKNOWN, "exp_foo bar"),
    ("", TagKind.UNKNOWN, ""),
]


@pytest.mark.parametrize(("tag", "kind", "display_name"), DISPLAY_CASES)
def test_kind_and_display_name(tag: str, kind: TagKind, display_name: str) -> None:
    parsed = parse_tag(tag, alias_tags=ALIASES)
    assert (parsed.tag, parsed.kind, parsed.display_name) == (tag, kind, display_name)


# tag, version, cycle, cycle_build, rc, rsp_build, extra, architecture
COMPONENT_CASES = [
    ("r26_0_0", (26, 0, 0), None, None, None, None, None, None),
    ("r170", (17, 0, 0), None, None, None, None, None, None),
    ("r26_0_0_rc1", (26, 0, 0, 1), None, None, 1, None, None, None),
    ("w_2024_42", (2024, 42), None, None, None, None, None, None),
    ("d_2024_11_05", (2024, 11, 5), None, None, None, None, None, None),
    ("w_2024_44_c0040", (2024, 44), 40, None, None, None, None, None),
    ("w_2024_44_c0040.001", (2024, 44), 40, "001", None, None, None, None),
    ("w_2024_44_c0040.001_nosudo-arm64", (2024, 44), 40, "001", None, None, "nosudo", "arm64"),
    ("r21_0_1_rsp9_c0020.002_20210703", (21, 0, 1), 20, "002", None, 9, "20210703", None),
    ("exp_w_2024_44_c0040.001-amd64", (2024, 44), 40, "001", None, None, None, "amd64"),
    ("exp_foo", (), None, None, None, None, None, None),
    ("latest", (), None, None, None, None, None, None),
    ("w_2024_00_c0040", (), None, None, None, None, None, None),
]


@pytest.mark.parametrize(
    ("tag", "version", "cycle", "cycle_build", "rc", "rsp_build", "extra", "architecture"),
    COMPONENT_CASES,
)
def test_components(
    tag: str,
    version: tuple[int, ...],
    cycle: int | None,
    cycle_build: str | None,
    rc: int | None,
    rsp_build: int | None,
    extra: str | None,
    architecture: str | None,
) -> None:
    parsed = parse_tag(tag, alias_tags=ALIASES)
    assert parsed.version == version
    assert (parsed.cycle, parsed.cycle_build, parsed.rc) == (cycle, cycle_build, rc)
    assert (parsed.rsp_build, parsed.extra, parsed.architecture) == (
        rsp_build,
        extra,
        architecture,
    )


def test_alias_list_wins_over_the_tag_form() -> None:
    assert parse_tag("w_2024_42", alias_tags=["w_2024_42"]).kind is TagKind.ALIAS
    assert parse_tag("w_2024_42", alias_tags=["w_2024_43"]).kind is TagKind.WEEKLY
    assert parse_tag("recommended").kind is TagKind.UNKNOWN
    alias = parse_tag("latest", alias_tags=ALIASES)
    assert (alias.version, alias.rest, alias.is_versioned) == ((), None, False)


def test_experimental_rest_is_the_parsed_remainder() -> None:
    parsed = parse_tag("exp_w_2024_44_nosudo")
    assert parsed.rest == parse_tag("w_2024_44_nosudo")
    assert parsed.rest is not None and parsed.rest.kind is TagKind.WEEKLY
    assert not parsed.is_versioned
    plain = parse_tag("exp_foo")
    assert plain.rest == ParsedTag(tag="foo", kind=TagKind.UNKNOWN, display_name="foo")
    # One level only: the rest of exp_exp_x is unknown, not another experimental.
    nested = parse_tag("exp_exp_w_2024_44")
    assert nested.rest is not None and nested.rest.kind is TagKind.UNKNOWN
    assert parse_tag("w_2024_44").rest is None


def test_overlong_tags_are_unknown() -> None:
    long_extra = "w_2024_44_" + "x" * (MAX_TAG_LENGTH - len("w_2024_44_"))
    assert len(long_extra) == MAX_TAG_LENGTH
    assert parse_tag(long_extra).kind is TagKind.WEEKLY
    assert parse_tag(long_extra + "x").kind is TagKind.UNKNOWN
    assert parse_tag("exp_" + long_extra[4:] + "x").kind is TagKind.UNKNOWN
    huge = "r" + "1" * 10_000 + "_0_0"
    assert parse_tag(huge).kind is TagKind.UNKNOWN


def _order(tags: list[str]) -> list[str]:
    shuffled = list(tags)
    random.Random(42).shuffle(shuffled)
    return [p.tag for p in newest_first(parse_tag(t, alias_tags=ALIASES) for t in shuffled)]


def test_kinds_are_grouped_in_kind_order() -> None:
    expected = [
        "latest",
        "recommended",
        "r26_0_0",
        "r22_0_1",
        "r170",
        "w_2024_44",
        "w_2024_42",
        "d_2024_11_05",
        "d_2024_11_04",
        "r27_0_0_rc2",
        "r27_0_0_rc1",
        "exp_w_2024_44",
        "exp_foo",
        "garbage",
        "v17_0_1",
    ]
    assert _order(expected) == expected
    assert [parse_tag(t, alias_tags=ALIASES).kind for t in expected[::2]] == [
        TagKind.ALIAS,
        TagKind.RELEASE,
        TagKind.RELEASE,
        TagKind.WEEKLY,
        TagKind.DAILY,
        TagKind.RELEASE_CANDIDATE,
        TagKind.EXPERIMENTAL,
        TagKind.UNKNOWN,
    ]
    assert KIND_ORDER[0] is TagKind.ALIAS and KIND_ORDER[-1] is TagKind.UNKNOWN
    assert set(KIND_ORDER) == set(TagKind)


def test_newest_first_compares_numbers_not_text() -> None:
    expected = ["r100_0_0", "r26_10_0", "r26_9_0", "r26_0_10", "r26_0_2", "r170", "r9_0_0"]
    assert _order(expected) == expected
    assert _order(["r26_0_0_rc10", "r26_0_0_rc9", "r25_0_0_rc11"]) == [
        "r26_0_0_rc10",
        "r26_0_0_rc9",
        "r25_0_0_rc11",
    ]
    assert _order(["d_2024_12_01", "d_2024_11_30", "d_2023_12_31"]) == [
        "d_2024_12_01",
        "d_2024_11_30",
        "d_2023_12_31",
    ]


def test_same_version_variants_order() -> None:
    expected = [
        "w_2024_44_rsp10",
        "w_2024_44_rsp9",
        "w_2024_44_c0041",
        "w_2024_44_c0040.002",
        "w_2024_44_c0040.001",
        "w_2024_44_c0040",
        "w_2024_44",
        "w_2024_44-amd64",
        "w_2024_44-arm64",
        "w_2024_44_20241105",
        "w_2024_44_20241101",
        "w_2024_44_2024",
        "w_2024_43_rsp99",
    ]
    assert _order(expected) == expected


def test_experimentals_follow_their_rest_then_tag_order() -> None:
    expected = [
        "exp_r26_0_0",
        "exp_w_2024_44_nosudo",
        "exp_w_2024_42",
        "exp_d_2024_11_05",
        "exp_r27_0_0_rc1",
        "exp_aaa",
        "exp_w_2024_99",
        "exp_zzz",
    ]
    assert _order(expected) == expected


# Hypothesis strategies for valid components.
Components = dict[str, object]
numbers = st.integers(min_value=0, max_value=999_999_999)
years = st.integers(min_value=1000, max_value=9999)
cycles = st.integers(min_value=0, max_value=9999).map(lambda n: f"{n:04d}")
cycle_builds = st.none() | st.integers(min_value=0, max_value=999).map(lambda n: f"{n:03d}")
# Free text that cannot be read as an rc, rsp or cycle suffix nor end in an architecture.
extras = st.none() | st.from_regex(r"[0-9abd-qs-z][a-z0-9]{0,11}", fullmatch=True)
architectures = st.none() | st.sampled_from(ARCHITECTURES)


@st.composite
def suffixes(draw: st.DrawFn) -> tuple[str, Components, list[str]]:
    """A valid suffix chain, the components it should parse into and its display fragments."""
    rsp = draw(st.none() | numbers)
    cycle = draw(st.none() | cycles)
    build = draw(cycle_builds) if cycle is not None else None
    extra = draw(extras)
    arch = draw(architectures)
    text, fragments = "", []
    if rsp is not None:
        text += f"_rsp{rsp}"
        fragments.append(f"(RSP Build {rsp})")
    if cycle is not None:
        text += f"_c{cycle}" + ("" if build is None else f".{build}")
        fragments.append(f"(SAL Cycle {cycle}" + ("" if build is None else f", Build {build}"))
    if extra is not None:
        text += f"_{extra}"
        fragments.append(f"[{extra}]")
    if arch is not None:
        text += f"-{arch}"
        fragments.append(f"({arch})")
    expected: Components = {
        "rsp_build": rsp,
        "cycle": None if cycle is None else int(cycle),
        "cycle_build": build,
        "extra": extra,
        "architecture": arch,
    }
    return text, expected, fragments


ValidTag = tuple[str, TagKind, tuple[int, ...], list[str], Components]


@st.composite
def valid_tags(draw: st.DrawFn) -> ValidTag:
    """A valid non-experimental tag, its kind, version, display fragments and components."""
    kind = draw(
        st.sampled_from([TagKind.RELEASE, TagKind.RELEASE_CANDIDATE, TagKind.WEEKLY, TagKind.DAILY])
    )
    rc = None
    version: tuple[int, ...]
    if kind is TagKind.WEEKLY:
        year, week = draw(years), draw(st.integers(min_value=1, max_value=53))
        primary, version = f"w_{year}_{week:02d}", (year, week)
        name = f"Weekly {year}_{week:02d}"
    elif kind is TagKind.DAILY:
        day = draw(st.dates(min_value=datetime.date(1000, 1, 1)))
        primary = f"d_{day.year}_{day.month:02d}_{day.day:02d}"
        version = (day.year, day.month, day.day)
        name = f"Daily {day.year}_{day.month:02d}_{day.day:02d}"
    else:
        major, minor, patch = draw(numbers), draw(numbers), draw(numbers)
        primary, version = f"r{major}_{minor}_{patch}", (major, minor, patch)
        name = f"Release r{major}.{minor}.{patch}"
        if kind is TagKind.RELEASE_CANDIDATE:
            rc = draw(numbers)
            primary, version = f"{primary}_rc{rc}", (*version, rc)
            name = f"Release Candidate r{major}.{minor}.{patch}-rc{rc}"
    suffix, components, fragments = draw(suffixes())
    components["rc"] = rc
    return primary + suffix, kind, version, [name, *fragments], components


@given(valid_tags())
def test_valid_tags_round_trip(
    case: ValidTag,
) -> None:
    tag, kind, version, fragments, components = case
    parsed = parse_tag(tag)
    assert (parsed.tag, parsed.kind, parsed.version) == (tag, kind, version)
    assert parsed.is_versioned
    for name, value in components.items():
        assert getattr(parsed, name) == value, name
    assert parsed.display_name.startswith(fragments[0])
    position = 0
    for fragment in fragments:
        found = parsed.display_name.find(fragment, position)
        assert found >= position, (fragment, parsed.display_name)
        position = found + len(fragment)


@given(valid_tags())
def test_experimental_of_a_valid_tag_parses_its_rest(
    case: ValidTag,
) -> None:
    tag = case[0]
    inner = parse_tag(tag)
    parsed = parse_tag("exp_" + tag)
    assert parsed.kind is TagKind.EXPERIMENTAL
    assert parsed.rest == inner
    assert parsed.display_name == f"Experimental {inner.display_name}"
    assert (parsed.version, parsed.cycle, parsed.architecture) == (
        inner.version,
        inner.cycle,
        inner.architecture,
    )


tag_like = st.from_regex(r"(exp_)?[rwdc0-9_.a-z-]{0,30}", fullmatch=True)


@settings(max_examples=300)
@given(st.text() | tag_like, st.frozensets(st.text(max_size=5), max_size=3))
def test_any_text_parses_without_raising(tag: str, aliases: frozenset[str]) -> None:
    parsed = parse_tag(tag, alias_tags=aliases)
    assert parsed.tag == tag
    assert parsed.kind in KIND_ORDER
    assert isinstance(parsed.display_name, str)
    if tag in aliases:
        assert parsed.kind is TagKind.ALIAS
    elif parsed.kind is TagKind.UNKNOWN:
        assert parsed.display_name == tag
        assert parsed.version == ()
    else:
        assert parsed.display_name
    # The key must compare with keys of well-formed tags without a type error.
    newest_first([parsed, parse_tag("w_2024_42"), parse_tag("exp_w_2024_42"), parse_tag("x")])


@given(
    st.sets(
        st.tuples(years, st.integers(min_value=1, max_value=53)),
        min_size=2,
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_generated_weeklies_sort_newest_first(
    weeks: set[tuple[int, int]], rnd: random.Random
) -> None:
    tags = [parse_tag(f"w_{year}_{week:02d}") for year, week in weeks]
    rnd.shuffle(tags)
    ordered = newest_first(tags)
    assert [p.version for p in ordered] == sorted(weeks, reverse=True)


@settings(max_examples=50)
@given(st.lists(valid_tags().map(lambda case: case[0]), min_size=2, max_size=12, unique=True))
def test_generated_mixed_sets_sort_by_kind_then_newest(tags: list[str]) -> None:
    parsed = [parse_tag(tag) for tag in tags]
    ordered = newest_first(parsed)
    assert newest_first(reversed(parsed)) == ordered  # independent of the input order
    ranks = [KIND_ORDER.index(p.kind) for p in ordered]
    assert ranks == sorted(ranks)
    for before, after in itertools.pairwise(ordered):
        if before.kind is after.kind:
            assert before.version >= after.version, (before.tag, after.tag)
