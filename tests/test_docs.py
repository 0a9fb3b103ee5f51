"""The documentation stays in step with the code: every configuration key has its line in the
reference, the reference's example loads, and the README's links lead to real pages.

(The site itself is built with warnings as errors by ``make docs``, part of ``make test``.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import yaml
from marshmallow import Schema, fields

from app.config import parse_config
from app.config.schema import ConfigSchema

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "docs" / "admin" / "configuration.md"


def _leaf_keys(schema: Schema, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """Each key the configuration accepts that holds a value: its path as the reference
    writes it (``lab.sizes[].cpu``), and the schema class and field it belongs to."""
    for name, field in schema.fields.items():
        key = prefix + (field.data_key or name)
        inner = field.inner if isinstance(field, fields.List) else field
        if isinstance(inner, fields.Nested) and isinstance(inner.schema, Schema):
            separator = "[]." if isinstance(field, fields.List) else "."
            yield from _leaf_keys(inner.schema, key + separator)
        else:
            yield key, type(schema).__name__, name


def test_every_configuration_key_is_in_the_reference() -> None:
    text = REFERENCE.read_text()
    # A schema used in two places (the lab's mounts and an init container's) is described
    # once: a field passes if one of its paths is named.
    paths: dict[tuple[str, str], list[str]] = {}
    for path, schema, field in _leaf_keys(ConfigSchema()):
        paths.setdefault((schema, field), []).append(path)
    missing = [found[0] for found in paths.values() if not any(f"`{p}`" in text for p in found)]
    assert missing == []


def test_the_references_example_loads() -> None:
    text = REFERENCE.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    assert blocks, "the configuration reference has no YAML example"
    for block in blocks:
        config = parse_config(yaml.safe_load(block), "docs/admin/configuration.md")
        assert config.lab.sizes


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"^[a-z]+:", t)]
    assert any(t.startswith("docs/") for t in local)
    assert [t for t in local if not (REPO / t).exists()] == []


def test_every_screened_env_name_is_in_the_user_docs() -> None:
    from app.builders.env import (
        KUBERNETES_ENV_PREFIXES,
        SPAWNER_ENV,
        STARTUP_ENV,
        STARTUP_ENV_PREFIXES,
        TOKEN_ENV,
    )

    text = (REFERENCE.parent.parent / "user" / "labs.md").read_text()
    for name in (*SPAWNER_ENV, *STARTUP_ENV, TOKEN_ENV):
        assert f"`{name}`" in text, name
    for prefix in (*STARTUP_ENV_PREFIXES, *KUBERNETES_ENV_PREFIXES):
        assert f"`{prefix}`" in text, prefix


_TABLE_ROW = re.compile(r"^\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def _markdown_table_rows(text: str) -> int:
    """The rows of a page's Markdown tables as written: every line of a table but its rule
    (header rows included). Lines inside fenced code are not tables."""
    rows, fenced = 0, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and _TABLE_ROW.match(line) and not _TABLE_RULE.match(line):
            rows += 1
    return rows


def test_every_markdown_table_keeps_its_rows_when_rendered() -> None:
    """A blank line or a stray character inside a table ends it: the rows after it render as
    a paragraph of pipes. Each page, rendered as the docs site renders it, has a table row
    for every row its Markdown writes."""
    from docutils.core import publish_string
    from myst_parser.docutils_ import Parser

    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    pages = [p for p in pages if "_build" not in p.parts]
    assert len(pages) > 20
    for page in pages:
        text = page.read_text()
        html = publish_string(
            text,
            parser=Parser(),
            writer_name="html5",
            settings_overrides={"report_level": 5, "myst_heading_anchors": 3},
        ).decode()
        assert html.count("<tr") == _markdown_table_rows(text), page.relative_to(REPO)
