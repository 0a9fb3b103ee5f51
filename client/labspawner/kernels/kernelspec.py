"""Kernelspecs of remote kernels: ``python -m labspawner.kernels install``.

A kernelspec names its provisioner in ``metadata.kernel_provisioner`` (Jupyter's kernel
provisioning), with the provisioner's ``config``: here the size (and image) the service is
asked for. Jupyter lists it beside the local kernels; choosing it starts the kernel in a pod
through the service instead of as a local process. Files go where ``jupyter kernelspec
install`` puts them: ``<prefix>/share/jupyter/kernels/<name>/`` with ``--prefix``, else the
user's Jupyter data directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PROVISIONER_NAME = "lab-spawner"
"""The provisioner's name in the ``jupyter_client.kernel_provisioners`` entry point group."""
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
"""Kernelspec directory names Jupyter accepts, kept to lowercase."""


def kernelspec(
    *, size: str, image: str | None = None, display_name: str | None = None
) -> dict[str, Any]:
    """``kernel.json`` of a remote Python kernel of ``size`` (and ``image``: the lab's by
    default). ``argv`` is what the kernel pod runs; interrupts go as messages on the control
    channel, since no signal reaches another pod."""
    config: dict[str, Any] = {"size": size}
    if image:
        config["image"] = image
    return {
        "argv": ["python", "-m", "labspawner.kernels.launch"],
        "display_name": display_name or f"Python 3 (remote, {size})",
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {
            "kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": config}
        },
    }


def kernels_dir(prefix: Path | None) -> Path:
    """Where kernelspecs go: under ``prefix`` as ``jupyter kernelspec install --prefix`` puts
    them, else in the user's Jupyter data directory."""
    if prefix is not None:
        return prefix / "share" / "jupyter" / "kernels"
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "kernels"


def install(
    name: str,
    *,
    size: str,
    image: str | None = None,
    display_name: str | None = None,
    prefix: Path | None = None,
) -> Path:
    """Write the kernelspec ``name``; its directory."""
    if not NAME_PATTERN.match(name):
        raise ValueError(
            f"kernel name {name!r}: lowercase letters, digits, '.', '_' and '-', at most 64"
        )
    directory = kernels_dir(prefix) / name
    directory.mkdir(parents=True, exist_ok=True)
    spec = kernelspec(size=size, image=image, display_name=display_name)
    (directory / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return directory
