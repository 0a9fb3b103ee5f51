"""``python -m labspawner.kernels install --name N --size S [--image I] [--prefix DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labspawner.kernels.kernelspec import install


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labspawner.kernels")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("install", help="write a kernelspec of a remote kernel")
    add.add_argument("--name", required=True, help="the kernelspec's directory name")
    add.add_argument("--size", required=True, help="the lab size the kernel gets")
    add.add_argument("--image", help="the kernel's image (default: the lab's)")
    add.add_argument("--display-name", help="the name Jupyter shows")
    add.add_argument("--prefix", type=Path, help="install under PREFIX/share/jupyter/kernels")
    options = parser.parse_args(argv)
    try:
        directory = install(
            options.name,
            size=options.size,
            image=options.image,
            display_name=options.display_name,
            prefix=options.prefix,
        )
    except ValueError as exc:
        parser.error(str(exc))
    print(f"Installed kernelspec {options.name} in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
