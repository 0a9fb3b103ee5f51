"""How many cores this process may keep busy: the fewer of the CPUs it may be scheduled on
and the CPU time its cgroup allows it per period.

``os.cpu_count()`` counts the machine's CPUs, which in a container are the node's, often many
more than the pod may use. Two things narrow them, and both are read here:

- the affinity mask (``os.sched_getaffinity``), the CPUs the scheduler may run the process on.
  A cpuset (the cgroup's ``cpuset.cpus``, Kubernetes' static CPU manager, ``taskset``) shows
  here, so it needs no reading of its own;
- the CPU bandwidth quota: cgroup v2's ``cpu.max`` (``"<quota> <period>"``, or ``"max
  <period>"`` for none), cgroup v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (a quota
  of -1 for none). A Kubernetes CPU limit becomes this quota: ``limits.cpu: 1500m`` is 150000
  µs of CPU time per 100000 µs period, 1.5 cores. A quota hides no CPU from the affinity mask:
  a pod limited to 2 cores on a 64-CPU node sees 64 CPUs, and once its threads have used 2
  cores' worth in a period all of them wait for the next one (they are throttled).

Which cgroup: in a container, the cgroup namespace (the default of container runtimes under
cgroup v2) makes ``/sys/fs/cgroup`` the container's own cgroup, and under cgroup v1 runtimes
mount the container's own directory at ``/sys/fs/cgroup/cpu``; reading the mount's top is then
enough. Outside a namespace (a systemd service with ``CPUQuota=``, a container sharing the
host's cgroup namespace) the process's cgroup is a directory below the top, which
``/proc/self/cgroup`` names. So every directory from that one up to the top is read and the
tightest quota wins, a parent's quota bounding all its children. A directory named there that
does not exist under the mount (a cgroup v1 container sees its host path in
``/proc/self/cgroup`` while its own directory is the mount's top) is passed over.

A file missing, unreadable or holding anything else counts as no quota, so the answer falls
back to the affinity mask: a process that cannot tell its limit assumes the CPUs it sees, and
``SPAWNER_WORKERS`` is there for an operator who knows better.

Both paths are arguments so that tests point them at directories of their own; the standard
library only, as the rest of ``app.runtime``.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where cgroups are mounted: cgroup v2's single hierarchy, or cgroup v1's controller dirs."""
PROC_CGROUP = Path("/proc/self/cgroup")
"""The process's own cgroups, one ``hierarchy:controllers:path`` line per hierarchy."""
V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct")
"""Under cgroup v1, the CPU controller's hierarchy under the root, by the names it goes by."""


def usable_cores(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float:
    """The cores this process may use: its affinity mask, narrowed by its cgroup's CPU quota.

    A float, since a quota may be a fraction of a core; how many processes to run on it is
    the caller's rule (``app.runtime.defaults``)."""
    cpus = float(affinity_cpus())
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    return cpus if quota is None else min(cpus, quota)


def affinity_cpus() -> int:
    """The CPUs the scheduler may run this process on (all of the machine's where the
    platform has no affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cgroup_cpu_quota(
    cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
) -> float | None:
    """The cores' worth of CPU time this process's cgroups allow per period, the tightest of
    them; None where none sets a quota or none can be read."""
    v2_path, v1_path = _own_cgroup_paths(proc_cgroup)
    quotas = [_v2_quota(d) for d in _up_to_mount(cgroup_root, v2_path)]
    for mount in V1_CPU_MOUNTS:
        quotas += [_v1_quota(d) for d in _up_to_mount(cgroup_root / mount, v1_path)]
    return min((q for q in quotas if q is not None), default=None)


def _own_cgroup_paths(proc_cgroup: Path) -> tuple[PurePosixPath, PurePosixPath]:
    """The process's cgroup in the v2 hierarchy and in v1's CPU hierarchy, relative to
    their mounts (the mount's top where the file does not say)."""
    top = PurePosixPath()
    v2, v1 = top, top
    try:
        lines = proc_cgroup.read_text().splitlines()
    except (OSError, ValueError):
        return v2, v1
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, separator, path = rest.partition(":")
        if not separator:
            continue
        relative = _relative(path)
        if hierarchy == "0" and not controllers:
            v2 = relative
        elif "cpu" in controllers.split(","):
            v1 = relative
    return v2, v1


def _relative(path: str) -> PurePosixPath:
    """``path`` below the mount; the mount's top for a path outside the process's namespace
    (shown with ``..``) or anything that is not an absolute path."""
    posix = PurePosixPath(path)
    if not posix.is_absolute() or ".." in posix.parts:
        return PurePosixPath()
    return posix.relative_to("/")


def _up_to_mount(mount: Path, own: PurePosixPath) -> list[Path]:
    """The existing directories from the process's cgroup under ``mount`` up to ``mount``."""
    directories = [mount / own, *(mount / parent for parent in own.parents)]
    return [d for d in directories if d.is_dir()]


def _v2_quota(directory: Path) -> float | None:
    """Cores' worth of ``cpu.max`` in ``directory``; None for ``max``, no file or nonsense."""
    try:
        fields = (directory / "cpu.max").read_text().split()
        if len(fields) != 2 or fields[0] == "max":
            return None
        return _cores(int(fields[0]), int(fields[1]))
    except (OSError, ValueError):
        return None


def _v1_quota(directory: Path) -> float | None:
    """Cores' worth of ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` in ``directory``;
    None for a quota of -1, no files or nonsense."""
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return _cores(quota, period)


def _cores(quota: int, period: int) -> float | None:
    """A quota in cores; None unless both numbers are positive (v1 writes -1 for none)."""
    if quota <= 0 or period <= 0:
        return None
    return quota / period
