"""Per-job memory and process caps in cgroup v1 hierarchies, where the host lets us write them.

A job is placed in its own `memory` and `pids` cgroup before its code runs (the job waits
for a go byte), so the cap covers every process it forks and every page it touches, CUDA
jobs included. Where no writable hierarchy exists (a typical unprivileged container with a
read-only cgroup v2 mount) the runner falls back to RLIMIT_AS plus its RSS watchdog, and
`/v1/health` says which is in use.
"""
from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("runner.cgroups")


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
                for ctrl in ("memory", "pids"):
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


@dataclass
class JobGroup:
    dirs: list[Path]
    memory_dir: Path | None

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
    def detect(cls) -> "JobCgroups | None":
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
            parents[ctrl] = parent
        if not parents:
            return None
        return cls(parents)

    def create(self, memory_bytes: int, processes: int) -> JobGroup | None:
        n = next(self.counter)
        dirs: list[Path] = []
        memory_dir = None
        try:
            for ctrl, parent in self.parents.items():
                d = parent / f"job-{n}"
                d.mkdir()
                dirs.append(d)
                if ctrl == "memory":
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
        return JobGroup(dirs, memory_dir)

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
