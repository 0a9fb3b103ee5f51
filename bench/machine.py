"""What machine the figures come from, described without its hostname or any path."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else "unknown"


def _memory_bytes() -> int | None:
    try:
        text = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def describe() -> dict[str, Any]:
    """CPU model, usable cores, memory, Python and kernel versions."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = _memory_bytes()
    return {
        "cpu_model": _cpu_model(),
        "cores": cores,
        "memory_gib": round(memory / 2**30, 1) if memory else None,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()}",
    }


def tag(machine: dict[str, Any]) -> str:
    """A short, hostname-free name for result files, e.g. ``amd-epyc-2c-24g``."""
    model = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", "", str(machine["cpu_model"]).lower())
    words = re.findall(r"[a-z0-9]+", model)[:3] or ["cpu"]
    memory = machine.get("memory_gib")
    size = f"{round(memory)}g" if memory else "mem"
    return "-".join([*words, f"{machine['cores']}c", size])
