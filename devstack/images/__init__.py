"""The images the local stack runs as real processes, and what each runs.

Which image repositories run as processes is configuration: ``programs.yaml`` here by default,
another file of the same shape if the stack is given one. The emulated kubelet runs a container
whose image matches one of its patterns as a child process (``devstack.kube.cluster.programs``);
every other container stays emulated.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from devstack.kube.cluster.programs import ImageProgram

IMAGES_DIR = Path(__file__).resolve().parent
DEFAULT_PROGRAMS = IMAGES_DIR / "programs.yaml"

_FIELDS = {"repositories", "entrypoint", "cmd", "env", "workingDir"}


class ProgramsError(ValueError):
    """A programs file that cannot be used, with what is wrong and where."""


def load_programs(path: Path = DEFAULT_PROGRAMS) -> dict[str, ImageProgram]:
    """Repository patterns to the program their images run, from a programs file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ProgramsError(f"{path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ProgramsError(f"{path}: expected a mapping of names to programs")
    programs: dict[str, ImageProgram] = {}
    for name, entry in raw.items():
        where = f"{path}: {name}"
        if not isinstance(entry, dict):
            raise ProgramsError(f"{where}: expected a mapping")
        unknown = sorted(set(entry) - _FIELDS)
        if unknown:
            raise ProgramsError(f"{where}: unknown keys {unknown}; known are {sorted(_FIELDS)}")
        repositories = _strings(entry.get("repositories"), f"{where}.repositories")
        if not repositories:
            raise ProgramsError(f"{where}.repositories: name at least one repository pattern")
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise ProgramsError(f"{where}.env: expected a mapping of names to values")
        program = ImageProgram(
            entrypoint=tuple(_filled(a) for a in _strings(entry.get("entrypoint"), where)),
            cmd=tuple(_filled(a) for a in _strings(entry.get("cmd"), where)),
            env={str(k): _filled(str(v)) for k, v in env.items()},
            working_dir=_filled(str(entry.get("workingDir") or "")),
        )
        for pattern in repositories:
            programs[pattern] = program
    return programs


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProgramsError(f"{where}: expected a list of strings")
    return list(value)


def _filled(text: str) -> str:
    """``{python}`` and ``{images}`` replaced: the stack's Python, this folder."""
    return text.replace("{python}", sys.executable).replace("{images}", str(IMAGES_DIR))
