"""Turn a prepull configuration plus what a registry holds into the `ImageSet` the form shows.

Pure and deterministic (no I/O; the input order of tags never matters): the refresher does
the registry calls and hands the tags and the digests it learnt to these functions, so the
rules below are tested without a registry and every worker would compute the same list.

Rules for the registry types (``rubin``, ``rubin-gar``), following DMTN-222 and SQR-059:

* Every tag becomes a `KnownImage` with reference ``<registry>/<repository>:<tag>``, listed
  in `newest_first` order.  Alias tags are ``recommendedTag`` plus ``aliasTags``.
* ``cycle`` set: non-alias tags of any other SAL cycle (or of none) are dropped, since labs
  built for another cycle cannot talk to that site's control system.  Aliases stay: the
  operator named them for this site.
* An alias points at the non-alias tag with the same digest, since that is the image it
  really runs.  If several share it, the first in listing order wins, preferring a plain
  version tag (release, weekly, daily or release candidate without free text or
  architecture), so ``recommended`` reads "Recommended (Weekly 2024_42)" and the target
  lists the alias in ``aliases``.  An alias without a digest or a match keeps its own name.
* ``recommended`` is the target's reference (tags never move, so a lab stays on the image it
  started with even after the alias moves); failing a target, the alias's own reference.
* ``prepull`` is the recommended image, then the newest ``numReleases`` releases,
  ``numWeeklies`` weeklies and ``numDailies`` dailies, one tag per version.  Only plain tags
  count (RSP builds are fine; free text and single-architecture tags are variants, not the
  release itself; cycle builds count only when ``cycle`` is configured).  A tag whose digest
  is already chosen is skipped without counting, so nodes do not pull one image twice and N
  still means N distinct images.

Simple configurations list fixed images, all prepulled, in the configured order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.models.config import PrepullConfig, SourceType
from app.models.image_tags import ParsedTag, TagKind, newest_first, parse_tag
from app.models.images import ImageSet, KnownImage

__all__ = [
    "DIGEST_MARGIN",
    "build_image_set",
    "build_simple_set",
    "digest_candidates",
]

DIGEST_MARGIN = 3
"""Extra prepull candidates per kind whose digests are fetched, so that a few candidates
skipped as digest duplicates (a weekly re-tagged as a release, say) can be replaced."""

_PREPULL_KINDS = (TagKind.RELEASE, TagKind.WEEKLY, TagKind.DAILY)


def digest_candidates(config: PrepullConfig, tags: Sequence[str]) -> list[str]:
    """The tags whose digests `build_image_set` needs, so the refresher fetches only these.

    Fetching a digest is one registry request per tag, too many for a repository with
    thousands of tags.  Needed are: every alias present (recommended tag first, then
    ``aliasTags`` in configured order), then the newest plain releases, weeklies and dailies
    (after the cycle filter), ``DIGEST_MARGIN`` more per kind than will be prepulled.

    An alias's target is found only if the target's digest is known too; the newest tags of
    each kind are fetched here, and the caller may know older ones from earlier passes.
    """
    _require_registry_type(config)
    ordered = _kept_tags(config, tags)
    present = {parsed.tag for parsed in ordered}
    wanted = [alias for alias in _alias_order(config) if alias in present]
    plain = _plain_by_kind(config, ordered)
    for kind in _PREPULL_KINDS:
        wanted.extend(parsed.tag for parsed in plain[kind][: _count(config, kind) + DIGEST_MARGIN])
    return wanted


def build_image_set(
    config: PrepullConfig,
    tags: Sequence[str],
    digests: Mapping[str, str],
    *,
    refreshed: float,
) -> ImageSet:
    """The image list of a registry configuration (see the module docstring for the rules).

    ``digests`` maps a tag to its digest and may lack any tag: a tag without one is still
    listed, but cannot be an alias target nor be recognised as a duplicate.  Each tag is
    parsed once and sorted once, since repositories hold thousands of tags.
    """
    source = _require_registry_type(config)
    ordered = _kept_tags(config, tags)

    def reference(tag: str) -> str:
        return f"{source}:{tag}"

    targets = _alias_targets(config, ordered, digests)
    aliases_of: dict[str, list[str]] = {}
    for alias, target in targets.items():  # alias order, so ``aliases`` is in it too
        aliases_of.setdefault(target.tag, []).append(alias)

    images: list[KnownImage] = []
    for parsed in ordered:
        name = parsed.display_name
        alias_target = targets.get(parsed.tag)
        if alias_target is not None:
            name = f"{name} ({alias_target.display_name})"
        images.append(
            KnownImage(
                reference=reference(parsed.tag),
                tag=parsed.tag,
                name=name,
                kind=parsed.kind,
                digest=digests.get(parsed.tag),
                aliases=tuple(aliases_of.get(parsed.tag, ())),
            )
        )

    recommended_tag: str | None = None
    if config.recommended_tag is not None and any(
        parsed.tag == config.recommended_tag for parsed in ordered
    ):
        recommended_target = targets.get(config.recommended_tag)
        recommended_tag = (
            config.recommended_tag if recommended_target is None else recommended_target.tag
        )

    chosen: list[str] = []
    chosen_digests: set[str] = set()

    def choose(tag: str) -> None:
        chosen.append(reference(tag))
        digest = digests.get(tag)
        if digest is not None:
            chosen_digests.add(digest)

    if recommended_tag is not None:
        choose(recommended_tag)
    plain = _plain_by_kind(config, ordered)
    for kind in _PREPULL_KINDS:
        wanted, taken = _count(config, kind), 0
        versions: set[tuple[int, ...]] = set()
        for parsed in plain[kind]:
            if taken >= wanted:
                break
            digest = digests.get(parsed.tag)
            if reference(parsed.tag) in chosen or (digest is not None and digest in chosen_digests):
                continue
            if parsed.version in versions:
                continue  # another build of a version already chosen: N counts versions
            versions.add(parsed.version)
            choose(parsed.tag)
            taken += 1

    return ImageSet(
        config=config.name,
        images=tuple(images),
        prepull=tuple(chosen),
        recommended=None if recommended_tag is None else reference(recommended_tag),
        refreshed=refreshed,
        error=None,
        failed=None,
    )


def build_simple_set(
    config: PrepullConfig, digests: Mapping[str, str], *, refreshed: float
) -> ImageSet:
    """The image list of a ``simple`` configuration: its images, all prepulled, in order.

    A configured digest wins over ``digests`` (keyed by url): the operator pinned it on
    purpose.  An image whose digest is unknown is still offered; the spawn pins it later.
    A url configured twice is listed once (its first entry), since references must be unique
    in an `ImageSet`.  There is no recommended image: DMTN-222 gives simple lists none.
    """
    if config.type is not SourceType.SIMPLE:
        raise ValueError(f"prepull configuration {config.name} is not of type simple")
    images: list[KnownImage] = []
    seen: set[str] = set()
    for image in config.images:
        if image.url in seen:
            continue
        seen.add(image.url)
        tag = image.url.rpartition(":")[2]
        images.append(
            KnownImage(
                reference=image.url,
                tag=tag,
                name=image.name,
                kind=parse_tag(tag).kind,
                digest=image.digest if image.digest is not None else digests.get(image.url),
            )
        )
    return ImageSet(
        config=config.name,
        images=tuple(images),
        prepull=tuple(image.reference for image in images),
        recommended=None,
        refreshed=refreshed,
        error=None,
        failed=None,
    )


def _require_registry_type(config: PrepullConfig) -> str:
    """The configuration's ``<registry>/<repository>``; only registry types have tags."""
    source = config.source
    if config.type is SourceType.SIMPLE or source is None:
        raise ValueError(f"prepull configuration {config.name} has no registry repository")
    return source


def _alias_order(config: PrepullConfig) -> tuple[str, ...]:
    """The alias tags, recommended first, then ``aliasTags`` as configured, each once."""
    first = () if config.recommended_tag is None else (config.recommended_tag,)
    return tuple(dict.fromkeys((*first, *config.alias_tags)))


def _kept_tags(config: PrepullConfig, tags: Iterable[str]) -> list[ParsedTag]:
    """Each distinct tag parsed once, minus those the cycle filter drops, in listing order."""
    aliases = frozenset(_alias_order(config))
    kept = []
    for tag in set(tags):
        parsed = parse_tag(tag, alias_tags=aliases)
        if (
            config.cycle is not None
            and parsed.kind is not TagKind.ALIAS
            and parsed.cycle != config.cycle
        ):
            continue
        kept.append(parsed)
    return newest_first(kept)


def _is_plain(parsed: ParsedTag) -> bool:
    """No free text and no architecture: the image a version tag stands for, not a variant."""
    return parsed.extra is None and parsed.architecture is None


def _plain_by_kind(
    config: PrepullConfig, ordered: Iterable[ParsedTag]
) -> dict[TagKind, list[ParsedTag]]:
    """The plain tags of each prepulled kind, keeping the (newest first) order given.

    Without a configured ``cycle``, cycle builds are left to the dropdown: they are SAL
    variants of a version whose plain tag is the one a general deployment wants cached.
    """
    plain: dict[TagKind, list[ParsedTag]] = {kind: [] for kind in _PREPULL_KINDS}
    for parsed in ordered:
        if config.cycle is None and parsed.cycle is not None:
            continue
        if parsed.kind in plain and _is_plain(parsed):
            plain[parsed.kind].append(parsed)
    return plain


def _count(config: PrepullConfig, kind: TagKind) -> int:
    counts = {
        TagKind.RELEASE: config.num_releases,
        TagKind.WEEKLY: config.num_weeklies,
        TagKind.DAILY: config.num_dailies,
    }
    return max(counts[kind], 0)


def _alias_targets(
    config: PrepullConfig, ordered: Sequence[ParsedTag], digests: Mapping[str, str]
) -> dict[str, ParsedTag]:
    """Each present alias with a digest shared by a kept non-alias tag -> that tag.

    Keys are in alias order.  Per digest the first tag in listing order wins, except that a
    plain version tag beats any other: experimentals and unknowns carry no version to name,
    and variants with free text or an architecture are not what the alias advertises.
    """
    by_digest: dict[str, ParsedTag] = {}
    for parsed in ordered:
        if parsed.kind is TagKind.ALIAS:
            continue
        digest = digests.get(parsed.tag)
        if digest is None:
            continue
        current = by_digest.get(digest)
        if current is None or (_is_preferred_target(parsed) and not _is_preferred_target(current)):
            by_digest[digest] = parsed
    present = {parsed.tag for parsed in ordered if parsed.kind is TagKind.ALIAS}
    targets: dict[str, ParsedTag] = {}
    for alias in _alias_order(config):
        digest = digests.get(alias) if alias in present else None
        target = None if digest is None else by_digest.get(digest)
        if target is not None:
            targets[alias] = target
    return targets


def _is_preferred_target(parsed: ParsedTag) -> bool:
    return parsed.is_versioned and _is_plain(parsed)
