"""Per-job memory, process and CPU caps in cgroup v1 hierarchies, where the host lets us write them.

A job is placed in its own `memory`, `pids`, `cpuacct` and `cpu` cgroups (those that are
writable) before its code runs (the job waits for a go byte), so the caps cover every process
it forks and every page it touches, CUDA jobs included. `cpuacct.usage` counts the CPU time of
every task that ever ran in the group, children the kernel reaped on its own included, and a
CFS quota on the `cpu` group keeps one job to its share of cores. Where no writable hierarchy
exists (a typical unprivileged container with a read-only cgroup v2 mount) the runner falls back
to RLIMIT_AS plus its RSS watchdog and `runner/usage.py`, and `/v1/health` says which is in use.
"""
from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("runner.cgroups")

CONTROLLERS = ("memory", "pids", "cpuacct", "cpu")
CFS_PERIOD_US = 100_000
CFS_MIN_QUOTA_US = 1_000  # the kernel refuses less


def _v1_dirs() -> dict[str, Path]:
    """controller -> this process's cgroup directory, for the v1 controllers we use."""
    mounts: dict[str, Path] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = right.split()
                if len(fields) < 3 or fields[0] != "cgroup":
                    continue
                opts = set(fields[2].split(","))
                for ctrl in CONTROLLERS:
                    if ctrl in opts:
                        mounts[ctrl] = Path(left.split()[4])
        own: dict[str, str] = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for ctrl in ctrls.split(","):
                    own[ctrl] = path
    except OSError:
        return {}
    return {c: mounts[c] / own[c].lstrip("/") for c in mounts if c in own}


def _set_quota(d: Path, cpu_share: float) -> None:
    """A CFS quota of `cpu_share` cores. Not fatal when refused (a quota above the one the runner
    itself runs under is EINVAL): the job then keeps its accounting and its other caps."""
    quota = max(CFS_MIN_QUOTA_US, int(cpu_share * CFS_PERIOD_US))
    try:
        (d / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (d / "cpu.cfs_quota_us").write_text(str(quota))
    except OSError as e:
        log.debug("no CPU quota for %s: %s", d, e)


@dataclass
class JobGroup:
    dirs: list[Path]
    memory_dir: Path | None
    cpuacct_dir: Path | None = None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) of every task that has been in the group, exited ones
        included; None without a `cpuacct` group or when it cannot be read."""
        if self.cpuacct_dir is None:
            return None
        try:
            return int((self.cpuacct_dir / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def set_limits(self, memory_bytes: int, processes: int) -> None:
        """New memory and process caps (a pooled job's, once its payload says them)."""
        for d in self.dirs:
            if (d / "memory.limit_in_bytes").exists():
                swap = d / "memory.memsw.limit_in_bytes"
                # memsw may never be below the memory limit: raise it first when raising
                if swap.exists() and memory_bytes > int((d / "memory.limit_in_bytes").read_text()):
                    swap.write_text(str(memory_bytes))
                (d / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if swap.exists():
                    swap.write_text(str(memory_bytes))
            if (d / "pids.max").exists():
                (d / "pids.max").write_text(str(processes))

    def reset_cpu(self) -> None:
        """Start the job's CPU count from zero (a pooled job's making is not its time)."""
        if self.cpuacct_dir is not None:
            (self.cpuacct_dir / "cpuacct.usage").write_text("0")

    def add(self, pid: int) -> None:
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(pid))

    def hit_memory_limit(self) -> bool:
        if self.memory_dir is None:
            return False
        try:
            text = (self.memory_dir / "memory.oom_control").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return value.strip().isdigit() and int(value) > 0
        return False

    def remove(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass  # still emptying; the parent group is swept at start-up


class JobCgroups:
    """Creates one child group per job under a parent group owned by this runner."""

    def __init__(self, parents: dict[str, Path]) -> None:
        self.parents = parents
        self.counter = itertools.count()

    @property
    def feature(self) -> str:
        return "cgroup-v1(" + ",".join(sorted(self.parents)) + ")"

    @classmethod
    def detect(cls) -> JobCgroups | None:
        parents: dict[str, Path] = {}
        for ctrl, base in _v1_dirs().items():
            parent = base / f"quiz-runner-{os.getpid()}"
            try:
                parent.mkdir(exist_ok=True)
                probe = parent / "probe"
                probe.mkdir(exist_ok=True)
                probe.rmdir()
            except OSError:
                continue
            needs = {"cpu": "cpu.cfs_quota_us", "cpuacct": "cpuacct.usage"}.get(ctrl)
            if needs and not (parent / needs).exists():  # e.g. a kernel without CFS bandwidth
                if not any(parent == p for p in parents.values()):
                    try:
                        parent.rmdir()
                    except OSError:
                        pass
                continue
            parents[ctrl] = parent
        if not parents:
            return None
        return cls(parents)

    def create(self, memory_bytes: int, processes: int, cpu_share: float | None = 1.0) -> JobGroup | None:
        """A job's groups. `cpu_share`: how many cores' worth of CPU time the job may use per
        period (CFS quota), e.g. its torch threads; None or <= 0 leaves it uncapped."""
        n = next(self.counter)
        dirs: list[Path] = []
        memory_dir = cpuacct_dir = None
        try:
            for ctrl, parent in self.parents.items():
                d = parent / f"job-{n}"
                if d not in dirs:  # co-mounted controllers (cpu,cpuacct) share one directory
                    d.mkdir()
                    dirs.append(d)
                if ctrl == "cpuacct":
                    cpuacct_dir = d
                elif ctrl == "cpu" and cpu_share is not None and cpu_share > 0:
                    _set_quota(d, cpu_share)
                elif ctrl == "memory":
                    (d / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    swap = d / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(memory_bytes))
                    memory_dir = d
                elif ctrl == "pids":
                    (d / "pids.max").write_text(str(processes))
        except OSError as e:
            log.warning("could not create a job cgroup: %s", e)
            JobGroup(dirs, None).remove()
            return None
        return JobGroup(dirs, memory_dir, cpuacct_dir)

    def close(self) -> None:
        for parent in self.parents.values():
            for child in parent.glob("job-*"):
                try:
                    child.rmdir()
                except OSError:
                    pass
            try:
                parent.rmdir()
            except OSError:
                pass
