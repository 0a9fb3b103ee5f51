"""The benchmarks' measure of a service of several processes: its pages, each counted once."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

from bench.services import PAGE_BYTES, distinct_resident_kib, rss_kib

MIB = 1024


def _frames_visible() -> bool:
    """Whether this process may read page frame numbers (a privileged reader): the top page
    of its own stack, resident while this runs, shows one or shows zero."""
    stack = next(
        line for line in Path("/proc/self/maps").read_text().splitlines() if "[stack]" in line
    )
    top = int(stack.split()[0].split("-")[1], 16) - PAGE_BYTES
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(top // PAGE_BYTES * 8)
        entry = array("Q", pagemap.read(8))[0]
    return bool(entry & ((1 << 55) - 1))


def test_pages_a_forked_child_shares_are_counted_once() -> None:
    shared = bytearray(os.urandom(16 * MIB * 1024))  # resident in the parent, then shared
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only waits to be measured
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        parent_rss, child_rss = rss_kib(os.getpid()), rss_kib(child)
        assert parent_rss is not None and child_rss is not None
        distinct = distinct_resident_kib([os.getpid(), child])
        if not _frames_visible():
            assert distinct is None
            return
        assert distinct is not None
        # Everything the parent holds, once; the buffer the child shares, not again.
        assert distinct >= parent_rss * 0.95
        assert distinct <= parent_rss + child_rss - 12 * MIB
    finally:
        os.write(write, b"x")
        os.waitpid(child, 0)
        del shared
