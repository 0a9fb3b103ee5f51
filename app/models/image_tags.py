"""Parse lab image tags into kinds, versions and human-readable names (SQR-059).

The spawn form lists images by name, grouped by kind and newest first, and the prepuller picks
"the latest N releases, weeklies and dailies" (DMTN-222).  Both need the meaning that the tag
conventions of SQR-059 put into a tag string, so this module turns a tag into a `ParsedTag`.
It runs over every tag in a registry repository (thousands), so it is pure, never raises and
uses precompiled regular expressions.

Grammar of a recognised tag (``N`` is a decimal number without leading zeros)::

    primary [_rcN] [_rspN] [_c<digits>[.<digits>]] [_<extra>] [-<architecture>]

    primary  r<major>_<minor>_<patch>   release, e.g. r26_0_0
             r<MM><m>                   release before r18, e.g. r170 is 17.0.0
             w_<YYYY>_<WW>              weekly, week 01-53
             d_<YYYY>_<MM>_<DD>         daily, a real calendar date
    _rcN                                release candidate (releases only), e.g. r26_0_0_rc1
    _rspN                               RSP image build counter
    _c0040 / _c0040.001                 SAL cycle, and the build within that cycle
    _<extra>                            any other text (letters, digits, ``_ . -``)
    -amd64, -arm64, ...                 the architecture of a single-architecture image

``exp_<rest>`` is an experimental; ``<rest>`` is parsed again (one level only: ``exp_exp_x``
is an experimental whose rest is the unknown ``exp_x``).  Tags named in ``alias_tags`` are
aliases whatever they look like.  Everything else is `TagKind.UNKNOWN` and keeps its text.

Display names (built from the tag's own digits, so two tags rarely share a name):

* ``r26_0_0`` -> ``Release r26.0.0``; ``r170`` -> ``Release r17.0.0``
* ``r26_0_0_rc1`` -> ``Release Candidate r26.0.0-rc1``
* ``w_2024_42`` -> ``Weekly 2024_42``; ``d_2024_11_05`` -> ``Daily 2024_11_05``
* suffixes append, in tag order: `` (RSP Build 9)``, `` (SAL Cycle 0040)`` or
  `` (SAL Cycle 0040, Build 001)``, `` [extra]`` and `` (amd64)``.  Free text is bracketed
  as in SQR-059; the architecture is parenthesised so that ``w_2024_44_amd64`` (free text)
  and ``w_2024_44-amd64`` (an architecture) do not read the same.
* ``exp_w_2024_44_nosudo`` -> ``Experimental Weekly 2024_44 [nosudo]``;
  ``exp_foo`` -> ``Experimental foo``
* an alias: underscores become spaces and each word gets a capital first letter
  (``latest_weekly`` -> ``Latest Weekly``)
* an unknown tag: the tag itself.

Sort order (`newest_first`): aliases, releases, weeklies, dailies, release candidates,
experimentals, unknowns (`KIND_ORDER`).  Within a kind, the highest version comes first; for
equal versions a tag with an RSP build comes before one without (higher build first), then
the highest cycle and cycle build, then the plain tag before ones with free text (free text in
descending order, so date stamps read newest first), then the multi-architecture tag before
single-architecture ones.  Experimentals built from a recognised tag come first, ordered as
their rest would be; other experimentals, aliases and unknowns are in tag order (SQR-059: they
carry no temporal information).  The tag text breaks every remaining tie, so the order is total
and does not depend on the input order.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

__all__ = [
    "ARCHITECTURES",
    "KIND_ORDER",
    "MAX_TAG_LENGTH",
    "ParsedTag",
    "SortKey",
    "TagKind",
    "newest_first",
    "parse_tag",
]


class TagKind(StrEnum):
    """The SQR-059 category of a tag; decides grouping in the form and what gets prepulled."""

    RELEASE = "release"
    RELEASE_CANDIDATE = "release_candidate"
    WEEKLY = "weekly"
    DAILY = "daily"
    EXPERIMENTAL = "experimental"
    ALIAS = "alias"
    UNKNOWN = "unknown"


KIND_ORDER: tuple[TagKind, ...] = (
    TagKind.ALIAS,
    TagKind.RELEASE,
    TagKind.WEEKLY,
    TagKind.DAILY,
    TagKind.RELEASE_CANDIDATE,
    TagKind.EXPERIMENTAL,
    TagKind.UNKNOWN,
)
"""The order of kinds in a sorted list: the most trustworthy images first."""

ARCHITECTURES: tuple[str, ...] = ("amd64", "arm64", "ppc64le", "s390x", "riscv64")
"""Architecture suffixes recognised after a ``-``; a fixed set so free text with a hyphen
(``exp_foo-bar``) is not mistaken for one."""

MAX_TAG_LENGTH = 128
"""Docker's limit on a tag's length; anything longer cannot be a real tag, so it is not
matched at all (which also bounds the parser's work on hostile input)."""

SortKey = tuple[int, int, tuple[Any, ...], str]
"""(kind rank, group within the kind, version part, tag): every key has this shape, so keys of
any two tags compare without a type error."""

_KIND_RANK = {kind: rank for rank, kind in enumerate(KIND_ORDER)}
_VERSIONED = frozenset({TagKind.RELEASE, TagKind.RELEASE_CANDIDATE, TagKind.WEEKLY, TagKind.DAILY})

# A number as written in a tag: no leading zeros, so each number has one spelling (and one
# display name), and few enough digits that int() is cheap and cannot hit its length limit.
_N = r"(?:0|[1-9][0-9]{0,8})"
_TAG_RE = re.compile(
    rf"""
    (?:
        r(?P<major>{_N})_(?P<minor>{_N})_(?P<patch>{_N})(?:_rc(?P<rc>{_N}))?
      | r(?P<old_major>[0-9]{{2}})(?P<old_minor>[0-9])(?:_rc(?P<old_rc>{_N}))?
      | w_(?P<week_year>[0-9]{{4}})_(?P<week>[0-9]{{2}})
      | d_(?P<day_year>[0-9]{{4}})_(?P<month>[0-9]{{2}})_(?P<day>[0-9]{{2}})
    )
    (?:_rsp(?P<rsp>{_N}))?
    (?:_c(?P<cycle>[0-9]{{1,9}})(?:\.(?P<cycle_build>[0-9]{{1,9}}))?)?
    (?:_(?P<extra>[A-Za-z0-9_.-]+?))?
    (?:-(?P<arch>{"|".join(ARCHITECTURES)}))?
    """,
    re.VERBOSE | re.ASCII,
)
_DOCKER_TEXT_RE = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_EXPERIMENTAL_PREFIX = "exp_"


@dataclass(frozen=True)
class ParsedTag:
    """What a tag means under SQR-059.

    ``version`` sorts newer-is-larger within one kind only: releases (major, minor, patch),
    release candidates (major, minor, patch, rc), weeklies (year, week), dailies (year, month,
    day); an experimental has its rest's version; aliases and unknowns have ``()``.  The
    component fields of an experimental mirror its recognised rest, so a cycle filter or an
    architecture check works on ``exp_w_2024_44_c0040.001`` as on ``w_2024_44_c0040.001``.
    """

    tag: str
    kind: TagKind
    display_name: str
    version: tuple[int, ...] = ()
    cycle: int | None = None
    cycle_build: str | None = None
    """The build within the cycle as written (``"001"``): leading zeros are part of the name."""
    rc: int | None = None
    rsp_build: int | None = None
    extra: str | None = None
    """Trailing free text of a recognised tag (often a date stamp)."""
    architecture: str | None = None
    rest: ParsedTag | None = None
    """For an experimental, the parsed text after ``exp_``; otherwise None."""

    @property
    def is_versioned(self) -> bool:
        """True for the kinds with a comparable version (what "the latest N" counts)."""
        return self.kind in _VERSIONED

    @cached_property
    def sort_key(self) -> SortKey:
        """A key whose ascending order is the listing order described in the module docstring.

        Cached because sorting thousands of tags asks for it O(n log n) times.
        """
        rank = _KIND_RANK[self.kind]
        if self.kind in _VERSIONED:
            return (rank, 0, self._version_part(), self.tag)
        if self.kind is TagKind.EXPERIMENTAL and self.rest is not None and self.rest.is_versioned:
            return (rank, 0, self.rest.sort_key, self.tag)
        if self.kind is TagKind.EXPERIMENTAL:
            return (rank, 1, (), self.tag)
        return (rank, 0, (), self.tag)

    def _version_part(self) -> tuple[Any, ...]:
        """Newest first: negate numbers, and put "absent" after "present" where SQR-059 says."""
        version = tuple(-number for number in self.version)
        rsp = (1, 0) if self.rsp_build is None else (0, -self.rsp_build)
        if self.cycle is None:
            cycle: tuple[int, ...] = (1, 0, 0, 0)
        elif self.cycle_build is None:
            cycle = (0, -self.cycle, 1, 0)
        else:
            cycle = (0, -self.cycle, 0, -int(self.cycle_build))
        extra = (0,) if self.extra is None else (1, _descending(self.extra))
        architecture = (
            (0, 0) if self.architecture is None else (1, ARCHITECTURES.index(self.architecture))
        )
        return (version, rsp, cycle, extra, architecture)


def _descending(text: str) -> tuple[int, ...]:
    """A key that sorts strings in reverse order (``"b"`` before ``"ab"`` before ``"a"``).

    Negated code points reverse the order of differing characters; the final 1, larger than
    any negated code point, makes a string sort before its own prefixes.
    """
    return (*(-ord(char) for char in text), 1)


def newest_first(tags: Iterable[ParsedTag]) -> list[ParsedTag]:
    """The tags in listing order: grouped by `KIND_ORDER`, newest first within a kind."""
    return sorted(tags, key=_sort_key)


def _sort_key(parsed: ParsedTag) -> SortKey:
    return parsed.sort_key


def parse_tag(tag: str, *, alias_tags: Collection[str] = ()) -> ParsedTag:
    """Parse one tag; never raises, and anything unrecognised is `TagKind.UNKNOWN`.

    ``alias_tags`` are matched exactly and win over every other reading (SQR-059: an alias is
    whatever the configuration says it is).  Pass a set when there are many.
    """
    if tag in alias_tags:
        return ParsedTag(tag=tag, kind=TagKind.ALIAS, display_name=_alias_name(tag))
    if tag.startswith(_EXPERIMENTAL_PREFIX):
        return _parse_experimental(tag)
    return _parse_plain(tag)


def _alias_name(tag: str) -> str:
    """``latest_weekly`` -> ``Latest Weekly``; only first letters change (``RSP`` stays)."""
    words = (word[:1].upper() + word[1:] for word in tag.split("_"))
    return " ".join(word for word in words if word) or tag


def _unknown(tag: str) -> ParsedTag:
    return ParsedTag(tag=tag, kind=TagKind.UNKNOWN, display_name=tag)


def _parse_experimental(tag: str) -> ParsedTag:
    remainder = tag[len(_EXPERIMENTAL_PREFIX) :]
    if len(tag) > MAX_TAG_LENGTH or not _DOCKER_TEXT_RE.fullmatch(remainder):
        return _unknown(tag)
    rest = _parse_plain(remainder)
    if not rest.is_versioned:
        return ParsedTag(
            tag=tag, kind=TagKind.EXPERIMENTAL, display_name=f"Experimental {remainder}", rest=rest
        )
    return replace(
        rest,
        tag=tag,
        kind=TagKind.EXPERIMENTAL,
        display_name=f"Experimental {rest.display_name}",
        rest=rest,
    )


def _parse_plain(tag: str) -> ParsedTag:
    """Parse a release, release candidate, weekly or daily; anything else is unknown."""
    match = _TAG_RE.fullmatch(tag) if len(tag) <= MAX_TAG_LENGTH else None
    if match is None:
        return _unknown(tag)
    groups = match.groupdict()
    kind: TagKind
    version: tuple[int, ...]
    rc: int | None = None
    if groups["major"] is not None or groups["old_major"] is not None:
        if groups["major"] is not None:
            version = (int(groups["major"]), int(groups["minor"]), int(groups["patch"]))
            rc_text = groups["rc"]
        else:
            version = (int(groups["old_major"]), int(groups["old_minor"]), 0)
            rc_text = groups["old_rc"]
        number = "r" + ".".join(str(part) for part in version)
        if rc_text is None:
            kind, name = TagKind.RELEASE, f"Release {number}"
        else:
            rc = int(rc_text)
            version = (*version, rc)
            kind, name = TagKind.RELEASE_CANDIDATE, f"Release Candidate {number}-rc{rc}"
    elif groups["week_year"] is not None:
        year, week = groups["week_year"], groups["week"]
        if not 1 <= int(week) <= 53:
            return _unknown(tag)
        version = (int(year), int(week))
        kind, name = TagKind.WEEKLY, f"Weekly {year}_{week}"
    else:
        year, month, day = groups["day_year"], groups["month"], groups["day"]
        version = (int(year), int(month), int(day))
        try:
            datetime.date(*version)
        except ValueError:
            return _unknown(tag)
        kind, name = TagKind.DAILY, f"Daily {year}_{month}_{day}"

    rsp_build = None if groups["rsp"] is None else int(groups["rsp"])
    cycle_text, cycle_build, extra, architecture = (
        groups["cycle"],
        groups["cycle_build"],
        groups["extra"],
        groups["arch"],
    )
    parts = [name]
    if rsp_build is not None:
        parts.append(f"(RSP Build {rsp_build})")
    if cycle_text is not None:
        build = "" if cycle_build is None else f", Build {cycle_build}"
        parts.append(f"(SAL Cycle {cycle_text}{build})")
    if extra is not None:
        parts.append(f"[{extra}]")
    if architecture is not None:
        parts.append(f"({architecture})")
    return ParsedTag(
        tag=tag,
        kind=kind,
        display_name=" ".join(parts),
        version=version,
        cycle=None if cycle_text is None else int(cycle_text),
        cycle_build=cycle_build,
        rc=rc,
        rsp_build=rsp_build,
        extra=extra,
        architecture=architecture,
    )
