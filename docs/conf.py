"""Sphinx configuration of the lab spawner's documentation (``make docs``)."""

from __future__ import annotations

project = "Lab spawner"
author = "The lab spawner's authors"
copyright = "2026, the lab spawner's authors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "Lab spawner"
html_static_path: list[str] = []
