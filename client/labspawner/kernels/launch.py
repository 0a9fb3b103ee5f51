"""A remote kernel pod's start-up: ``python -m labspawner.kernels.launch``.

The service starts a kernel pod with its connection settings in the environment: the key
from a Secret (``KERNEL_KEY``; never in the pod spec, a ConfigMap, a log or an answer), the
fixed ports, the transport and the signature scheme, and the pod's own address. ipykernel
takes its address from its connection file, not from the command line, and the pod's
address is known only once it runs; so this writes the connection file (readable by the user
only) and replaces itself with ``python -m ipykernel_launcher -f <file>``, without
``KERNEL_KEY`` in the kernel's environment, so the code a user runs does not inherit it.

Lab images that offer remote kernels install this package, as they do for the client.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PORT_NAMES = ("shell", "iopub", "stdin", "control", "hb")
DEFAULT_PORTS = {"shell": 50001, "iopub": 50002, "stdin": 50003, "control": 50004, "hb": 50005}
"""The kernel's ports on its pod's own address, unless ``KERNEL_<NAME>_PORT`` says otherwise."""
KEY_ENV = "KERNEL_KEY"
SIGNATURE_SCHEMES = frozenset({"hmac-sha256"})
KEY_PATTERN = re.compile(r"^[0-9a-f]{32,128}$")
"""A key as the service accepts it: 16 to 64 random bytes, in lowercase hex."""


class LaunchError(Exception):
    """The environment does not hold a usable connection; the message names the variable."""


def connection_info(env: Mapping[str, str]) -> dict[str, Any]:
    """The connection file's content, from the pod's environment."""
    key = env.get(KEY_ENV, "")
    if not KEY_PATTERN.match(key):
        raise LaunchError(f"{KEY_ENV} must be 32 to 128 lowercase hex digits")
    ip = env.get("KERNEL_IP") or env.get("POD_IP") or ""
    if not ip:
        raise LaunchError("KERNEL_IP or POD_IP must give the address to listen on")
    transport = env.get("KERNEL_TRANSPORT", "tcp")
    if transport != "tcp":
        raise LaunchError("KERNEL_TRANSPORT must be tcp")
    scheme = env.get("KERNEL_SIGNATURE_SCHEME", "hmac-sha256")
    if scheme not in SIGNATURE_SCHEMES:
        raise LaunchError(f"KERNEL_SIGNATURE_SCHEME must be one of {sorted(SIGNATURE_SCHEMES)}")
    info: dict[str, Any] = {
        "ip": ip,
        "transport": transport,
        "signature_scheme": scheme,
        "key": key,
        "kernel_name": "",
    }
    for name in PORT_NAMES:
        variable = f"KERNEL_{name.upper()}_PORT"
        text = env.get(variable, str(DEFAULT_PORTS[name]))
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise LaunchError(f"{variable} must be a port number")
        info[f"{name}_port"] = int(text)
    return info


def write_connection_file(info: Mapping[str, Any], directory: Path) -> Path:
    """Write ``info`` where only this user may read it; the file's path."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix="kernel-", suffix=".json", dir=directory)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    return Path(name)


def main(env: Mapping[str, str] | None = None) -> None:
    env = dict(os.environ if env is None else env)
    try:
        info = connection_info(env)
    except LaunchError as exc:
        print(f"labspawner.kernels.launch: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    directory = Path(env.get("KERNEL_RUNTIME_DIR") or tempfile.gettempdir()) / "labspawner-kernel"
    path = write_connection_file(info, directory)
    env.pop(KEY_ENV, None)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", str(path)]
    os.execve(sys.executable, argv, env)  # noqa: S606 (the kernel, as the module says)


if __name__ == "__main__":
    main()
