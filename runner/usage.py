"""CPU time and resident memory of a job's whole process tree, sampled from /proc.

This is the fallback where the job has no `cpuacct` cgroup (whose `cpuacct.usage` is exact).
`RLIMIT_CPU` is per process, and a parent's `cutime`/`cstime` only grows when it *waits* for a
child: a submission that ignores SIGCHLD has its children reaped by the kernel, and their time
would vanish with them. So a `TreeUsage` remembers every process it has seen, keyed by
(pid, start time) so a recycled pid is a new process, keeps the largest CPU time seen for each,
and sums over all of them, alive or gone. A burner therefore counts up to the last sample before
it exited; only what a process burns between its last sample and its exit (or the whole life of
one that lived less than a sampling interval and was never waited for) can escape.

A parent that waits for a child we saw absorbs the child's time into its own `cutime`: that part
is credited against the child, so a waited child is not counted twice. What a parent's `cutime`
holds beyond its seen children (children too short-lived to be sampled) still counts. The credit
goes to the nearest ancestor still alive, which cannot tell whether it waited for the child: a
parent that lets the kernel reap some children and waits for others too short-lived to be seen
can hide up to as much time as the reaped ones burnt (at most half of the total). cgroups have no
such blind spot.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# Fields of /proc/PID/stat after the ")" that ends the command name (field 3 is index 0).
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME, _START, _RSS = 1, 11, 12, 13, 14, 19, 21

Key = tuple[int, int]  # (pid, start time in clock ticks since boot)


@dataclass
class _Proc:
    own: int = 0  # largest utime+stime seen (ticks): all its threads, live and exited
    children: int = 0  # largest cutime+cstime seen: children it waited for
    credited: int = 0  # what its seen, since-vanished children took into `children`
    parent: Key | None = None  # the parent it was last seen under (None for the root)
    alive: bool = True


class TreeUsage:
    """Samples a process tree rooted at a host pid: `sample()` returns (rss_bytes, cpu_seconds).

    `rss_bytes` is the resident memory of the live processes now (pages shared with the zygote
    count in every process, as in /proc). `cpu_seconds` is the CPU time the tree has used so far,
    every process ever seen included; it never decreases.
    """

    def __init__(self, pid: int, *, max_processes: int = 512, proc: str = "/proc") -> None:
        self.pid = pid
        self.max_processes = max_processes
        self.proc = proc
        self.procs: dict[Key, _Proc] = {}
        self.rss_bytes = 0
        self.cpu_seconds = 0.0
        self._tick = os.sysconf("SC_CLK_TCK")
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._scan_children = False  # kernels without CONFIG_PROC_CHILDREN: scan /proc for ppids

    # ---------------------------------------------------------------- reading /proc
    def _stat(self, pid: int) -> list[str] | None:
        try:
            with open(f"{self.proc}/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            return None
        return fields if len(fields) > _RSS else None

    def _children(self, pid: int, by_ppid: dict[int, list[int]] | None) -> list[int]:
        if by_ppid is not None:
            return by_ppid.get(pid, [])
        out: list[int] = []
        try:
            tasks = os.listdir(f"{self.proc}/{pid}/task")
        except OSError:
            return out
        for task in tasks:
            try:
                with open(f"{self.proc}/{pid}/task/{task}/children") as f:
                    out.extend(int(c) for c in f.read().split())
            except FileNotFoundError:
                if os.path.isdir(f"{self.proc}/{pid}/task/{task}"):
                    self._scan_children = True  # no `children` files on this kernel
            except (OSError, ValueError):
                continue
        return out

    def _ppid_map(self) -> dict[int, list[int]]:
        by_ppid: dict[int, list[int]] = {}
        try:
            names = os.listdir(self.proc)
        except OSError:
            return by_ppid
        for name in names:
            if name.isdigit():
                fields = self._stat(int(name))
                if fields is not None:
                    by_ppid.setdefault(int(fields[_PPID]), []).append(int(name))
        return by_ppid

    # ---------------------------------------------------------------- sampling
    def sample(self) -> tuple[int, float]:
        by_ppid = self._ppid_map() if self._scan_children else None
        seen_now: set[Key] = set()
        rss = 0
        stack: list[tuple[int, Key | None]] = [(self.pid, None)]
        visited: set[int] = set()
        while stack and len(visited) < self.max_processes:
            pid, parent = stack.pop()
            if pid in visited:
                continue
            visited.add(pid)
            fields = self._stat(pid)
            if fields is None:
                continue
            try:
                key = (pid, int(fields[_START]))
                own = int(fields[_UTIME]) + int(fields[_STIME])
                children = int(fields[_CUTIME]) + int(fields[_CSTIME])
                rss += int(fields[_RSS]) * self._page
            except ValueError:
                continue
            p = self.procs.get(key)
            if p is None:
                p = self.procs[key] = _Proc()
            p.own = max(p.own, own)
            p.children = max(p.children, children)
            p.parent = parent
            p.alive = True
            seen_now.add(key)
            stack.extend((c, key) for c in self._children(pid, by_ppid))
        if self._scan_children and by_ppid is None and len(visited) <= 1:
            return self.sample()  # learnt just now that this kernel needs the /proc scan
        self._retire(seen_now)
        self.rss_bytes = rss
        self.cpu_seconds = max(self.cpu_seconds, self._total_ticks() / self._tick)
        return self.rss_bytes, self.cpu_seconds

    def _retire(self, seen_now: set[Key]) -> None:
        """Processes gone since the last sample: their time stays counted, and the process that may
        have waited for them is credited so that its `cutime` does not count them a second time.
        That is the nearest ancestor still alive: the parent, or where the parent died too, the
        one that reaped it (orphans move up the tree) or that reaped the parent (whose `cutime`
        then held this one)."""
        for key, p in self.procs.items():
            if not p.alive or key in seen_now:
                continue
            p.alive = False
            up = p.parent
            hops = 0
            while up is not None and up not in seen_now and up in self.procs and hops < self.max_processes:
                up, hops = self.procs[up].parent, hops + 1
            if up is not None and up in seen_now:
                self.procs[up].credited += p.own + p.children

    def _total_ticks(self) -> int:
        return sum(p.own + max(0, p.children - p.credited) for p in self.procs.values())
