"""Job processes made ahead (runner/pool.py): never reused, nothing carried from one job to the
next, refilled in the background, let go when idle."""
from __future__ import annotations

import asyncio
import os

from runner.client import RunnerClient
from tests.runner.jobs import CORRECT, hostile, job, metric

MARK = "qz7-" + os.urandom(16).hex()  # in job A's source only

# Job A leaves what it can: files on every writable tmpfs, a process that would outlive it, its
# mark in its source and in a buffer.
LEAVE = f"""
import ctypes, os, time
keep = ({MARK!r} * 4096).encode()
for d in ('/scratch', '/scratch/work', '/tmp', '/dev/shm'):
    try:
        open(d + '/left-by-a', 'w').write({MARK!r})
    except OSError:  # /tmp is read-only in the jail when the checkout itself lies under /tmp
        assert d == '/tmp', d
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(15, b'qz7-left-by-a', 0, 0, 0)
    time.sleep(60)
    os._exit(0)
"""

# Job B looks for all of it, and for any file descriptor it did not make (another job's
# channels). It knows the mark only by its hash, so its own memory holds the prefix and never
# the mark itself.
LOOK = f"""
import ctypes, hashlib, os
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable, so /proc/self/mem is its own to read
target = {__import__('hashlib').sha256(MARK.encode()).hexdigest()!r}
for d in ('/scratch', '/scratch/work', '/tmp', '/dev/shm'):
    assert not os.path.exists(d + '/left-by-a'), 'file left by a: ' + d
pids = [p for p in os.listdir('/proc') if p.isdigit()]
assert pids == ['1'], 'processes: ' + repr(pids)
fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
assert fds == [0, 1, 2, 3, 4], 'open fds beyond its own (4 is the listing): ' + repr(fds)
prefix = b'qz7' + b'-'
found = 0
with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', buffering=0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        if not perms.startswith('r'):
            continue
        lo, hi = (int(x, 16) for x in span.split('-'))
        pos = lo
        while pos < hi:
            n = min(hi - pos, 1 << 22)
            try:  # 36 bytes more, so a mark across two chunks is seen
                chunk = os.pread(mem.fileno(), min(n + 36, hi - pos), pos)
            except OSError:
                break
            i = chunk.find(prefix)
            while i >= 0:
                if hashlib.sha256(chunk[i:i + 36]).hexdigest() == target:
                    found += 1
                i = chunk.find(prefix, i + 1)
            pos += n
assert found == 0, 'the mark of job a is in memory'
"""


async def test_consecutive_jobs_share_no_files_processes_or_memory(runner_client: RunnerClient) -> None:
    """Job B, right after job A (and with a pool, in a process made before or while A ran),
    finds none of A's files, processes or code."""
    pooled = await metric(runner_client, "runner_pooled_jobs_total")
    for _ in range(3):  # the module's code runs once, when the job loads it
        a = await runner_client.grade(job(LEAVE + CORRECT, limits={"wall_s": 10}))
        assert a["verdict"] == "passed", a
        b = await runner_client.grade(job(LOOK + CORRECT, limits={"wall_s": 30, "cpu_s": 30}))
        assert b["verdict"] == "passed", b
    assert await metric(runner_client, "runner_pooled_jobs_total") > pooled  # the pool took part


async def _until(cond, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.05)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


async def test_the_pool_refills_in_the_background_and_lets_go_when_idle() -> None:
    from runner.config import RunnerConfig
    from runner.engine import Engine

    async with Engine(RunnerConfig(pool=2, pool_idle_s=3.0)) as engine:
        pool = engine.pool
        assert pool is not None and engine.zygote is not None and engine.zygote.proc is not None
        await _until(lambda: len(pool.ready) == 2)
        made = pool.made
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"
        assert engine.metrics["pooled_jobs"] == 2  # the reference and the submission
        await _until(lambda: len(pool.ready) == 2 and pool.made == made + 2)  # refilled, fresh ones
        # idle: every pooled process is let go, and exits (the zygote has no children left)
        await _until(lambda: not pool.ready, timeout=20)
        bwrap = engine.zygote.proc.pid  # the jail; its child is the zygote, whose children are supervisors
        await _until(lambda: not [s for z in _children(bwrap) for s in _children(z)], timeout=20)
        # the next grading still works (a fresh process), and the pool fills again behind it
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"
        await _until(lambda: len(pool.ready) == 2)


async def test_a_pooled_process_takes_the_jobs_own_limits() -> None:
    """Made ahead with the default sizes, a pooled process gets the job's scratch, /dev/shm,
    memory and process caps once its payload says them."""
    from runner.config import RunnerConfig
    from runner.engine import Engine

    async with Engine(RunnerConfig(pool=2)) as engine:
        pool = engine.pool
        assert pool is not None
        await _until(lambda: len(pool.ready) == 2)
        body = ("import shutil\n"
                "assert shutil.disk_usage('/scratch').total <= 8 << 20, shutil.disk_usage('/scratch')\n"
                "assert shutil.disk_usage('/dev/shm').total <= 4 << 20, shutil.disk_usage('/dev/shm')\n")
        r = await engine.grade(hostile(body, limits={"scratch_mb": 8, "shm_mb": 4}))
        assert r["verdict"] == "passed", r
        assert engine.metrics["pooled_jobs"] >= 1
        await _until(lambda: len(pool.ready) == 2)
        bomb = "b = bytearray(600 << 20)\nb[::4096] = b'x' * len(b[::4096])"
        r = await engine.grade(hostile(bomb, limits={"memory_mb": 256}))
        assert r["verdict"] == "memory", r


async def test_the_two_fork_way_grades_and_isolates_the_same() -> None:
    """Where one clone from the zygote cannot be used (`clone: false` here), a supervisor
    unshares and forks each job, pooled or not: the same verdicts, nothing carried over."""
    from runner.config import RunnerConfig
    from runner.engine import Engine

    async with Engine(RunnerConfig(clone=False, pool=1)) as engine:
        assert "clone-from-zygote" not in engine.health()["sandbox"]
        assert engine.zygote is not None and not engine.zygote.one_clone
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"
        a = await engine.grade(job(LEAVE + CORRECT, limits={"wall_s": 10}))
        assert a["verdict"] == "passed", a
        b = await engine.grade(job(LOOK + CORRECT, limits={"wall_s": 30, "cpu_s": 30}))
        assert b["verdict"] == "passed", b
        r = await engine.grade(hostile("while True:\n    pass", limits={"wall_s": 2, "cpu_s": 10}))
        assert r["verdict"] == "timeout", r
        assert engine.metrics["pooled_jobs"] >= 1
