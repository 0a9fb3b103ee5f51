"""Start a program so that it dies with the stack: ``python launch.py PROGRAM [ARG...]``
(standard library only: it runs by path, from any directory).

Every process the local stack starts goes through here: Redis and gunicorn, started by the
stack's main thread, and containers, started by the kubelet's one long-lived thread. Linux
delivers ``PR_SET_PDEATHSIG``'s signal to a process when the thread that started it ends,
and the setting survives ``exec``, so a stack that is killed outright takes all of them with
it (gunicorn's workers leave when they see their arbiter gone). Where the call is not
available the program is run all the same.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1

LAUNCHER = os.path.abspath(__file__)


def launched(argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` through this launcher."""
    return [sys.executable, LAUNCHER, *argv]


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: launch PROGRAM [ARG...]")
    with contextlib.suppress(OSError, AttributeError):  # no prctl: run it all the same
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        raise SystemExit(1)  # the stack died before the setting took hold
    os.execvp(argv[0], argv)  # noqa: S606 (the command line, as given)


if __name__ == "__main__":
    main(sys.argv[1:])
