"""The cores the server counts (``app.runtime.cpus``) and the workers it starts on them
(``app.runtime.defaults``), read from cgroup files each test writes under a directory of its
own, laid out as cgroup v2 or v1 lays them out under ``/sys/fs/cgroup``.

What the affinity mask is cannot be written to a file: the tests read the real one, and a
quota they expect to win is below one core, so that it wins on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.runtime.cpus import cgroup_cpu_quota, usable_cores
from app.runtime.defaults import default_workers, workers_for_cores

ROOT = Path(__file__).resolve().parent.parent
CPUS = len(os.sched_getaffinity(0))
"""The CPUs this test process may run on, which a quota above them must not raise."""
PERIOD = 100_000
"""The kernel's default period, in microseconds."""


def _write(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text)


def _own_cgroup(tmp_path: Path, *lines: str) -> Path:
    """A ``/proc/self/cgroup`` of these lines."""
    path = tmp_path / "proc-self-cgroup"
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The cgroup mount's stand-in, empty until a test writes into it."""
    path = tmp_path / "cgroup"
    path.mkdir()
    return path


@pytest.fixture
def at_top(tmp_path: Path) -> Path:
    """A ``/proc/self/cgroup`` as in a container's cgroup namespace: the process at the top."""
    return _own_cgroup(tmp_path, "0::/")


def test_cgroup_v2_without_a_quota_leaves_the_affinity_mask(root: Path, at_top: Path) -> None:
    _write(root, "cpu.max", f"max {PERIOD}\n")
    assert cgroup_cpu_quota(root, at_top) is None
    assert usable_cores(root, at_top) == CPUS


def test_cgroup_v2_quota_is_cores_worth_of_time_per_period(root: Path, at_top: Path) -> None:
    _write(root, "cpu.max", f"50000 {PERIOD}\n")
    assert cgroup_cpu_quota(root, at_top) == 0.5
    assert usable_cores(root, at_top) == 0.5


def test_cgroup_v2_quota_counts_its_own_period(root: Path, at_top: Path) -> None:
    _write(root, "cpu.max", "75000 50000\n")
    assert cgroup_cpu_quota(root, at_top) == 1.5


def test_a_quota_above_the_cpus_leaves_the_cpus(root: Path, at_top: Path) -> None:
    _write(root, "cpu.max", f"{(CPUS + 2) * PERIOD} {PERIOD}\n")
    assert cgroup_cpu_quota(root, at_top) == CPUS + 2
    assert usable_cores(root, at_top) == CPUS


def test_cgroup_v1_without_a_quota_leaves_the_affinity_mask(root: Path, tmp_path: Path) -> None:
    _write(root / "cpu", "cpu.cfs_quota_us", "-1\n")
    _write(root / "cpu", "cpu.cfs_period_us", f"{PERIOD}\n")
    own = _own_cgroup(tmp_path, "4:cpu,cpuacct:/", "0::/")
    assert cgroup_cpu_quota(root, own) is None
    assert usable_cores(root, own) == CPUS


@pytest.mark.parametrize("mount", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1_quota_over_its_period(root: Path, tmp_path: Path, mount: str) -> None:
    _write(root / mount, "cpu.cfs_quota_us", "25000\n")
    _write(root / mount, "cpu.cfs_period_us", f"{PERIOD}\n")
    own = _own_cgroup(tmp_path, "4:cpu,cpuacct:/", "0::/")
    assert usable_cores(root, own) == 0.25


def test_no_cgroup_files_leave_the_affinity_mask(root: Path, tmp_path: Path) -> None:
    at_top = _own_cgroup(tmp_path, "0::/")
    assert cgroup_cpu_quota(root, at_top) is None
    assert usable_cores(root, at_top) == CPUS
    missing = tmp_path / "missing"
    assert usable_cores(missing, missing) == CPUS


@pytest.mark.parametrize(
    "content",
    [
        "",
        "max",
        "150000",
        "lots 100000",
        "150000 often",
        "0 100000",
        "-5 100000",
        "150000 0",
        "150000 100000 extra",
    ],
)
def test_a_cgroup_v2_file_of_nonsense_counts_as_no_quota(
    root: Path, at_top: Path, content: str
) -> None:
    _write(root, "cpu.max", content)
    assert cgroup_cpu_quota(root, at_top) is None
    assert usable_cores(root, at_top) == CPUS


def test_cgroup_files_of_nonsense_bytes_count_as_no_quota(root: Path, tmp_path: Path) -> None:
    root.joinpath("cpu.max").write_bytes(b"\xff\xfe 100000")
    (root / "cpu").mkdir()
    root.joinpath("cpu", "cpu.cfs_quota_us").write_bytes(b"\xff\xfe")
    root.joinpath("cpu", "cpu.cfs_period_us").write_text(f"{PERIOD}\n")
    own = _own_cgroup(tmp_path, "0::/", "4:cpu:/")
    assert cgroup_cpu_quota(root, own) is None


def test_a_cgroup_v1_quota_without_its_period_counts_as_none(root: Path, tmp_path: Path) -> None:
    _write(root / "cpu", "cpu.cfs_quota_us", "25000\n")
    assert cgroup_cpu_quota(root, _own_cgroup(tmp_path, "4:cpu:/")) is None


def test_an_unreadable_cgroup_file_counts_as_no_quota(root: Path, at_top: Path) -> None:
    # Reading a directory fails as a file without permission does (an OSError), and does
    # so for root too, which a file's permissions would not.
    (root / "cpu.max").mkdir()
    assert cgroup_cpu_quota(root, at_top) is None
    assert usable_cores(root, at_top) == CPUS


def test_a_nested_cgroup_reads_its_own_quota(root: Path, tmp_path: Path) -> None:
    """Outside a cgroup namespace (a systemd service), the process's cgroup is below the
    mount's top, whose own ``cpu.max`` (the host's) does not exist."""
    _write(root / "system.slice" / "spawner.service", "cpu.max", f"50000 {PERIOD}\n")
    own = _own_cgroup(tmp_path, "0::/system.slice/spawner.service")
    assert usable_cores(root, own) == 0.5
    # The same file, read as the mount's top alone, would say nothing.
    assert cgroup_cpu_quota(root, _own_cgroup(tmp_path, "0::/")) is None


@pytest.mark.parametrize(("parent", "own", "tightest"), [(25000, 50000, 0.25), (75000, 50000, 0.5)])
def test_the_tightest_quota_on_the_way_up_wins(
    root: Path, tmp_path: Path, parent: int, own: int, tightest: float
) -> None:
    _write(root / "system.slice", "cpu.max", f"{parent} {PERIOD}\n")
    _write(root / "system.slice" / "spawner.service", "cpu.max", f"{own} {PERIOD}\n")
    assert usable_cores(root, _own_cgroup(tmp_path, "0::/system.slice/spawner.service")) == (
        tightest
    )


def test_a_cgroup_v1_container_reads_the_mount_it_was_given(root: Path, tmp_path: Path) -> None:
    """Its ``/proc/self/cgroup`` names the host's path, which is not under its mount."""
    _write(root / "cpu,cpuacct", "cpu.cfs_quota_us", "50000\n")
    _write(root / "cpu,cpuacct", "cpu.cfs_period_us", f"{PERIOD}\n")
    own = _own_cgroup(tmp_path, "5:cpu,cpuacct:/kubepods/burstable/pod1/c0ffee", "3:memory:/x")
    assert usable_cores(root, own) == 0.5


def test_a_cgroup_outside_the_namespace_reads_the_mount_top(root: Path, tmp_path: Path) -> None:
    _write(root, "cpu.max", f"50000 {PERIOD}\n")
    _write(root / "elsewhere", "cpu.max", f"10000 {PERIOD}\n")
    assert usable_cores(root, _own_cgroup(tmp_path, "0::/../../elsewhere")) == 0.5


def test_the_affinity_mask_narrows_the_cpus() -> None:
    """In a fresh interpreter, so this one keeps its CPUs."""
    code = """
import os
from pathlib import Path
from app.runtime.cpus import usable_cores
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
print(usable_cores(Path("/nonexistent"), Path("/nonexistent")))
"""
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert float(completed.stdout) == 1.0


@pytest.mark.parametrize(
    ("cores", "workers"),
    [(0.1, 1), (0.5, 1), (1.0, 1), (1.5, 1), (1.99, 1), (2.0, 2), (3.7, 3), (64.0, 64)],
)
def test_one_worker_per_whole_core_and_at_least_one(cores: float, workers: int) -> None:
    assert workers_for_cores(cores) == workers


def test_the_default_workers_follow_the_quota(root: Path, at_top: Path) -> None:
    _write(root, "cpu.max", f"50000 {PERIOD}\n")
    assert default_workers(root, at_top) == 1
    _write(root, "cpu.max", f"max {PERIOD}\n")
    assert default_workers(root, at_top) == CPUS


def test_the_default_is_this_machines_cores() -> None:
    """What the settings file reads is the rule applied to this process."""
    assert default_workers() == workers_for_cores(usable_cores())
    assert default_workers() <= CPUS
