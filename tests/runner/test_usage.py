"""The /proc fallback for a job's CPU time and memory (`runner.usage.TreeUsage`) and the per-job
`cpuacct` group (`runner.cgroups`): time spent by processes that are gone still counts."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from runner.cgroups import JobCgroups
from runner.usage import TreeUsage

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- a fake /proc, step by step

class FakeProc:
    """Writes /proc/PID/stat and /proc/PID/task/PID/children for a tree we script."""

    def __init__(self, root: Path, children_files: bool = True) -> None:
        self.root = root
        self.children_files = children_files
        self.procs: dict[int, dict[str, int]] = {}

    def set(self, pid: int, *, ppid: int, start: int = 1, own: int = 0, children: int = 0, rss: int = 0) -> None:
        self.procs[pid] = {"ppid": ppid, "start": start, "own": own, "children": children, "rss": rss}
        self.write()

    def drop(self, *pids: int) -> None:
        for pid in pids:
            del self.procs[pid]
        self.write()

    def write(self) -> None:
        for d in self.root.iterdir():
            for f in sorted(d.rglob("*"), reverse=True):
                f.rmdir() if f.is_dir() else f.unlink()
            d.rmdir()
        for pid, p in self.procs.items():
            fields = ["0"] * 50  # fields 3.. of /proc/PID/stat
            fields[0] = "S"
            fields[1] = str(p["ppid"])
            fields[11] = str(p["own"])  # utime (stime stays 0)
            fields[13] = str(p["children"])  # cutime
            fields[19] = str(p["start"])
            fields[21] = str(p["rss"])
            d = self.root / str(pid)
            (d / "task" / str(pid)).mkdir(parents=True)
            (d / "stat").write_text(f"{pid} (py thon) " + " ".join(fields) + "\n")
            if self.children_files:
                kids = [str(c) for c, q in self.procs.items() if q["ppid"] == pid]
                (d / "task" / str(pid) / "children").write_text(" ".join(kids) + (" " if kids else ""))


@pytest.fixture(params=[True, False], ids=["children-files", "ppid-scan"])
def fake(tmp_path: Path, request: pytest.FixtureRequest) -> FakeProc:
    return FakeProc(tmp_path, children_files=request.param)


def _cpu(t: TreeUsage) -> int:
    """CPU seconds back to ticks, for exact comparisons."""
    return round(t.sample()[1] * TICK)


def test_auto_reaped_children_keep_their_time(fake: FakeProc) -> None:
    fake.set(10, ppid=1, own=5)
    fake.set(11, ppid=10, own=100)
    fake.set(12, ppid=10, own=200)
    t = TreeUsage(10, proc=str(fake.root))
    assert _cpu(t) == 305
    fake.set(11, ppid=10, own=150)
    assert _cpu(t) == 355
    fake.drop(11, 12)  # the kernel reaped them: the parent's cutime did not grow
    assert _cpu(t) == 355
    assert _cpu(t) == 355


def test_a_waited_child_is_not_counted_twice(fake: FakeProc) -> None:
    fake.set(10, ppid=1, own=5)
    fake.set(11, ppid=10, own=100)
    t = TreeUsage(10, proc=str(fake.root))
    assert _cpu(t) == 105
    fake.drop(11)
    fake.set(10, ppid=1, own=5, children=130)  # it waited: 30 ticks more burnt after the last sample
    assert _cpu(t) == 135
    # children too short-lived to be sampled, but waited for, still count through cutime
    fake.set(10, ppid=1, own=5, children=180)
    assert _cpu(t) == 185


def test_a_grandchild_whose_parent_died_first_is_credited_to_the_reaper(fake: FakeProc) -> None:
    fake.set(10, ppid=1, own=5)
    fake.set(11, ppid=10, own=10)
    fake.set(12, ppid=11, own=100)
    t = TreeUsage(10, proc=str(fake.root))
    assert _cpu(t) == 115
    # 11 exits (waited by 10), 12 is reparented to the job's PID 1 and waited by it as well
    fake.drop(11, 12)
    fake.set(10, ppid=1, own=5, children=110)
    assert _cpu(t) == 115


def test_a_recycled_pid_is_a_new_process(fake: FakeProc) -> None:
    fake.set(10, ppid=1, own=5)
    fake.set(11, ppid=10, start=50, own=100)
    t = TreeUsage(10, proc=str(fake.root))
    assert _cpu(t) == 105
    fake.set(11, ppid=10, start=90, own=40)  # pid 11 reaped by the kernel and reused
    assert _cpu(t) == 145


def test_memory_is_the_live_processes_only_and_cpu_never_decreases(fake: FakeProc) -> None:
    fake.set(10, ppid=1, own=5, rss=100)
    fake.set(11, ppid=10, own=7, rss=50)
    fake.set(99, ppid=1, own=1000, rss=10_000)  # not in the tree
    t = TreeUsage(10, proc=str(fake.root))
    rss, cpu = t.sample()
    assert rss == 150 * PAGE and round(cpu * TICK) == 12
    fake.drop(11)
    rss, cpu = t.sample()
    assert rss == 100 * PAGE and round(cpu * TICK) == 12
    fake.drop(10)  # the job is over
    assert t.sample() == (0, cpu)


# ---------------------------------------------------------------- real processes

_BURN = """
import os, signal, sys, time
def burn(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
if sys.argv[1] == 'ignore':
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        burn(0.3)
        os._exit(0)
    kids.append(pid)
if sys.argv[1] == 'wait':
    for k in kids:
        os.waitpid(k, 0)
else:
    try:
        os.waitpid(-1, 0)  # with SIGCHLD ignored: returns once every child is gone
    except ChildProcessError:
        pass
time.sleep(0.3)
"""


def _watch(mode: str) -> tuple[float, float]:
    """(TreeUsage's CPU seconds, the root's own utime+stime+cutime+cstime) for the burner script."""
    pid = os.spawnv(os.P_NOWAIT, sys.executable, [sys.executable, "-c", _BURN, mode])
    t = TreeUsage(pid)
    naive = 0.0
    while True:
        t.sample()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            if fields[0] != "Z":
                naive = sum(int(v) for v in fields[11:15]) / TICK
        except OSError:
            pass
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return t.cpu_seconds, naive
        time.sleep(0.05)


def test_burners_the_kernel_reaped_still_count() -> None:
    cpu, naive = _watch("ignore")
    assert naive < 0.3, "the children's time was in the parent's cutime: this proves nothing"
    assert cpu >= 0.65, cpu  # 3 x 0.3 s burnt; each may lose what it burnt after its last sample


def test_waited_burners_count_once() -> None:
    cpu, naive = _watch("wait")
    assert naive >= 0.8
    assert 0.8 <= cpu <= 1.3, cpu


# ---------------------------------------------------------------- the cpuacct group

def test_cpuacct_group_counts_reaped_processes_and_the_cpu_quota_is_set() -> None:
    cgroups = JobCgroups.detect()
    if cgroups is None or "cpuacct" not in cgroups.parents:
        pytest.skip("no writable cgroup v1 cpuacct hierarchy here")
    try:
        group = cgroups.create(256 << 20, 16, cpu_share=1.5)
        assert group is not None and group.cpuacct_dir is not None
        assert "cpuacct" in cgroups.feature
        if "cpu" in cgroups.parents:
            cpu_dir = cgroups.parents["cpu"] / group.cpuacct_dir.name
            assert (cpu_dir / "cpu.cfs_quota_us").read_text().strip() == "150000"
            assert (cpu_dir / "cpu.cfs_period_us").read_text().strip() == "100000"
        assert group.cpu_seconds() == 0.0
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # wait until moved in, then run the burner script (children auto-reaped)
            os.close(w)
            os.read(r, 1)
            os.execv(sys.executable, [sys.executable, "-c", _BURN, "ignore"])
        os.close(r)
        group.add(pid)
        os.write(w, b"G")
        os.close(w)
        os.waitpid(pid, 0)
        used = group.cpu_seconds()
        assert used is not None and used >= 0.85, used
        group.remove()
        uncapped = cgroups.create(1 << 30, 16, cpu_share=None)
        assert uncapped is not None
        if "cpu" in cgroups.parents:
            d = cgroups.parents["cpu"] / uncapped.dirs[0].name
            assert (d / "cpu.cfs_quota_us").read_text().strip() == "-1"
        uncapped.remove()
    finally:
        cgroups.close()


def test_a_job_group_without_cpuacct_has_no_cpu_reading(tmp_path: Path) -> None:
    cgroups = JobCgroups({"pids": tmp_path / "pids"})
    (tmp_path / "pids").mkdir()
    # a plain directory stands in for the hierarchy: pids.max is just a file here
    group = cgroups.create(1 << 20, 8)
    assert group is not None and group.cpu_seconds() is None
    assert cgroups.feature == "cgroup-v1(pids)"



def test_a_refused_cpu_quota_keeps_the_other_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A quota above the one the runner runs under is EINVAL in cgroup v1: the job still gets
    its groups, accounting and other caps, only uncapped in CPU share."""
    for ctrl in ("pids", "cpu", "cpuacct"):
        (tmp_path / ctrl).mkdir()
    cgroups = JobCgroups({c: tmp_path / c for c in ("pids", "cpu", "cpuacct")})
    group = cgroups.create(1 << 20, 8, cpu_share=2.0)
    assert group is not None
    assert (tmp_path / "cpu" / "job-0" / "cpu.cfs_quota_us").read_text() == "200000"
    assert (tmp_path / "pids" / "job-0" / "pids.max").read_text() == "8"
    write = Path.write_text

    def refuse_quota(self: Path, data: str, *a: object, **k: object) -> int:
        if self.name == "cpu.cfs_quota_us":
            raise OSError(22, "Invalid argument")
        return write(self, data, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", refuse_quota)
    group = cgroups.create(1 << 20, 8, cpu_share=64.0)
    assert group is not None and group.cpuacct_dir == tmp_path / "cpuacct" / "job-1"
    assert (tmp_path / "pids" / "job-1" / "pids.max").read_text() == "8"
    assert cgroups.feature == "cgroup-v1(cpu,cpuacct,pids)"
