"""Which images run as real processes on the local stack, and what each image would hold.

A container image carries a default command (``ENTRYPOINT`` and ``CMD``), environment and
working directory; here an image repository is mapped to those defaults, and the programs
they name are found on the stack's own ``PATH``. A pod whose image matches a mapping runs its
containers as child processes; every other pod stays emulated. Which repositories are mapped
is configuration (``ClusterSettings.programs``), never code.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ImageProgram:
    """What a mapped image would hold: its default command and environment.

    ``entrypoint`` and ``cmd`` follow the container runtime's rules: a container's
    ``command`` replaces ``entrypoint`` (and drops ``cmd``), its ``args`` replace ``cmd``.
    Both may use ``$(VAR)`` references, expanded from the container's environment, which
    always holds ``POD_IP`` (the pod's own loopback address) and ``POD_NAME``.
    """

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = ""

    def argv(self, container: Mapping[str, Any]) -> list[str]:
        """The command line before ``$(VAR)`` expansion, as a container runtime builds it."""
        return [arg for arg, _ in self.argv_sources(container)]

    def argv_sources(self, container: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """Each argument of :meth:`argv`, and whether the pod gave it (else the image did)."""
        command = container.get("command")
        args = container.get("args")
        if command:
            return [(str(a), True) for a in [*command, *(args or ())]]
        tail = [(str(a), True) for a in args] if args is not None else self._image(self.cmd)
        return self._image(self.entrypoint) + tail

    @staticmethod
    def _image(items: tuple[str, ...]) -> list[tuple[str, bool]]:
        return [(item, False) for item in items]


def repository(image: str) -> str:
    """The image reference without its tag or digest."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


def program_for(programs: Mapping[str, ImageProgram], image: str) -> ImageProgram | None:
    """The program of the first pattern matching ``image``'s repository, if any."""
    repo = repository(image)
    for pattern, program in programs.items():
        if fnmatch.fnmatchcase(repo, pattern):
            return program
    return None
