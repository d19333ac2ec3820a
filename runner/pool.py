"""Job processes asked of the zygote, fresh or made ahead in a small pool.

A job process is made in two steps. Its *making* (the zygote forks a supervisor, which enters
new user/PID/mount/network/IPC/UTS/cgroup namespaces and forks the job as PID 1; the job mounts
its private /proc, scratch, /tmp and /dev/shm; the engine moves it into fresh cgroups and writes
its go byte) needs nothing from the job to be graded, so the pool does it ahead, in the
background. Its *payload* (the job itself) is written when a grading takes it; only then does it
set its rlimits, drop its capabilities, install seccomp (with or without exec, as the job says)
and run the harness. Each process serves one job and is never reused: its namespaces, mounts and
cgroups die with it.

The pool holds at most `pool` ready processes, refills one at a time after each grading takes
one, and lets them all go after `pool_idle_s` without a grading (a process let go sees its payload
pipe close and exits). Processes of a zygote that died or was replaced are never handed out.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import fcntl
import json
import logging
import os
import signal
import struct
import termios
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .cgroups import JobCgroups, JobGroup
from .config import Limits
from .trace import Page as TracePage

if TYPE_CHECKING:
    from .engine import Zygote

log = logging.getLogger("runner")


def message(obj: dict[str, Any]) -> bytes:
    """One length-prefixed JSON message for a job's payload pipe (see runner/zygote.py)."""
    data = json.dumps(obj).encode()
    return struct.pack("<Q", len(data)) + data


def unread_bytes(fd: int) -> int:
    """Bytes still in a pipe (asked on its write end)."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError:
        return 0


@dataclass
class JobProcess:
    """The engine's side of one job process: its pipes, and once known its pid and cgroups."""

    zygote: Zygote
    ctl: int
    res: int
    out: int
    err: int
    go_w: int | None
    pay_w: int
    page: TracePage | None
    scratch_mb: int
    shm_mb: int
    # its cgroups: made (JobGroup), being made in a thread (a future), or none
    group: JobGroup | None | asyncio.Future[JobGroup | None] = None
    memory_bytes: int = 0
    processes: int = 0
    pid: int | None = None
    pidfd: int | None = None
    ctl_buf: bytearray = field(default_factory=bytearray)
    pooled: bool = False
    dead: bool = False

    @property
    def read_ends(self) -> list[int]:
        return [self.ctl, self.res, self.out, self.err]

    def renew(self, limits: Limits) -> None:
        """A pooled process taken for a job: its cgroups get the job's caps, and the CPU its
        making used is not the job's."""
        group = self.group
        if not isinstance(group, JobGroup):
            return
        memory, processes = int(limits.memory_mb) << 20, int(limits.processes)
        try:
            if (memory, processes) != (self.memory_bytes, self.processes):
                group.set_limits(memory, processes)
                self.memory_bytes, self.processes = memory, processes
            group.reset_cpu()
        except OSError as e:
            log.warning("could not renew a pooled job's cgroup: %s", e)

    def close_fds(self) -> None:
        for fd in (self.ctl, self.res, self.out, self.err, self.go_w, self.pay_w, self.pidfd):
            if fd is not None and fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.ctl = self.res = self.out = self.err = self.pay_w = -1
        self.go_w = self.pidfd = None
        if self.page is not None:
            self.page.close()
            self.page = None


async def spawn(zygote: Zygote, *, prep: dict[str, Any], limits: Limits, cgroups: JobCgroups | None,
                cpu_share: float, executor: concurrent.futures.Executor, trace: bool) -> JobProcess:
    """Ask the zygote for a job process and send it its `prep` (how to make its mounts). Its
    cgroups are made meanwhile in a thread; the caller moves it in once its pid is known.
    Raises OSError when the zygote cannot be reached."""
    page = TracePage.create() if trace else None
    pipes = [os.pipe() for _ in range(4)]  # ctl, result, stdout, stderr
    for r, _w in pipes:
        os.set_blocking(r, False)
    go_r, go_w = os.pipe()
    pay_r, pay_w = os.pipe()
    write_ends = [w for _r, w in pipes] + [go_r, pay_r] + ([page.fd] if page and page.fd is not None else [])
    ctl, res, out, err = (r for r, _w in pipes)
    proc = JobProcess(zygote, ctl, res, out, err, go_w, pay_w, page, int(prep["scratch_mb"]), int(prep["shm_mb"]),
                      memory_bytes=int(limits.memory_mb) << 20, processes=int(limits.processes))
    loop = asyncio.get_running_loop()
    if cgroups is not None:
        proc.group = loop.run_in_executor(executor, cgroups.create, proc.memory_bytes, proc.processes, cpu_share)
    try:
        await zygote.submit(write_ends)
    except BaseException:
        for fd in write_ends:
            if page is None or fd != page.fd:
                os.close(fd)
        await _drop_group(proc)
        proc.close_fds()
        raise
    for fd in write_ends:
        if page is not None and fd == page.fd:
            page.fd = None  # the zygote has its own copy; ours goes with the mapping
        os.close(fd)
    os.write(pay_w, message(prep))  # small: the empty pipe takes it at once
    return proc


async def _drop_group(proc: JobProcess) -> None:
    group = proc.group
    if isinstance(group, asyncio.Future):
        try:
            group = await group
        except Exception:  # noqa: BLE001
            group = None
    proc.group = None
    if group is not None:
        group.remove()


class JobPool:
    """Job processes made ahead (see the module's docstring)."""

    def __init__(self, size: int, idle_s: float, make: Any) -> None:
        self.size = max(0, size)
        self.idle_s = idle_s
        self.make = make  # async (zygote) -> ready JobProcess, or None
        self.ready: collections.deque[JobProcess] = collections.deque()
        self.loop = asyncio.get_running_loop()
        self.last_used = self.loop.time()
        self.filler: asyncio.Task[None] | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        self.letting_go: set[asyncio.Task[None]] = set()
        self.closed = False
        self.making = False  # a process is being made now
        self.waiters: collections.deque[asyncio.Future[JobProcess | None]] = collections.deque()
        self.zygote: Zygote | None = None
        self.made = 0  # counters for /metrics
        self.taken = 0

    def fill(self, zygote: Zygote) -> None:
        """Make processes in the background, one at a time, until `size` are ready."""
        if self.closed or self.size == 0:
            return
        if zygote is not self.zygote:  # a new zygote: what the old one made is never handed out
            self.zygote = zygote
            while self.ready:
                self._let_go(self.ready.popleft())
        if self.filler is None or self.filler.done():
            self.filler = self.loop.create_task(self._fill(zygote))

    async def _fill(self, zygote: Zygote) -> None:
        failures = 0
        try:
            while (not self.closed and len(self.ready) < self.size + len(self.waiters)
                   and zygote is self.zygote and zygote.alive()):
                self.making = True
                try:
                    proc = await self.make(zygote)
                except Exception as e:  # noqa: BLE001 - the pool is an optimisation: fresh processes still work
                    log.warning("could not make a pooled job process: %s", e)
                    proc = None
                finally:
                    self.making = False
                if proc is None:
                    failures += 1
                    self._wake_waiters()  # they make fresh ones rather than wait on a failing pool
                    if failures >= 3:
                        return
                    await asyncio.sleep(0.5 * failures)
                    continue
                failures = 0
                if self.closed or zygote is not self.zygote:
                    self._let_go(proc)
                    return
                proc.pooled = True
                self.made += 1
                while self.waiters:  # a grading waiting for this one
                    fut = self.waiters.popleft()
                    if not fut.done():
                        self.taken += 1
                        fut.set_result(proc)
                        break
                else:
                    self._watch(proc)
                    self.ready.append(proc)
                    self._arm_idle()
        finally:
            self.making = False
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def take(self, zygote: Zygote) -> JobProcess | None:
        """A ready process of this zygote; else the one being made now, when no other grading
        waits for it (it is further along than a fresh one would be); else None, and the caller
        makes a fresh one. The pool refills behind it."""
        self.last_used = self.loop.time()
        got = None
        while self.ready:
            proc = self.ready.popleft()
            self._unwatch(proc)
            if proc.zygote is zygote and not proc.dead and zygote.alive() and not _readable(proc.ctl):
                got = proc
                break
            self._let_go(proc)
        if got is not None:
            self.taken += 1
            self.fill(zygote)
            return got
        if self.making and not self.waiters and zygote is self.zygote:
            fut: asyncio.Future[JobProcess | None] = self.loop.create_future()
            self.waiters.append(fut)
            try:
                got = await fut
            except asyncio.CancelledError:
                handed = fut.result() if fut.done() and not fut.cancelled() else None
                if handed is not None:
                    self._let_go(handed)  # handed over just as this grading was cancelled
                raise
            finally:
                if fut in self.waiters:
                    self.waiters.remove(fut)
            if got is not None and (got.dead or _readable(got.ctl)):
                self._let_go(got)
                got = None
        self.fill(zygote)
        return got

    # ---------------------------------------------------------------- while a process waits
    def _watch(self, proc: JobProcess) -> None:
        """Anything on a pooled process's control channel (its status, EOF) means it is gone."""
        def gone() -> None:
            proc.dead = True
            self._unwatch(proc)
            if proc in self.ready:
                self.ready.remove(proc)
                self._let_go(proc)
        self.loop.add_reader(proc.ctl, gone)

    def _unwatch(self, proc: JobProcess) -> None:
        if proc.ctl >= 0:
            self.loop.remove_reader(proc.ctl)

    def _arm_idle(self) -> None:
        if self.idle_timer is None and self.idle_s > 0:
            self.idle_timer = self.loop.call_later(self.idle_s, self._check_idle)

    def _check_idle(self) -> None:
        self.idle_timer = None
        idle = self.loop.time() - self.last_used
        if idle >= self.idle_s:
            if self.ready:
                log.info("no grading for %.0f s: letting %d pooled job processes go", idle, len(self.ready))
            while self.ready:
                self._let_go(self.ready.popleft())
        elif self.ready:
            self.idle_timer = self.loop.call_later(self.idle_s - idle, self._check_idle)

    def _let_go(self, proc: JobProcess) -> None:
        task = self.loop.create_task(let_go(proc))
        self.letting_go.add(task)
        task.add_done_callback(self.letting_go.discard)

    async def close(self) -> None:
        self.closed = True
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.filler is not None:
            self.filler.cancel()
            await asyncio.gather(self.filler, return_exceptions=True)
        self._wake_waiters()
        while self.ready:
            proc = self.ready.popleft()
            self._unwatch(proc)
            self._let_go(proc)
        await asyncio.gather(*self.letting_go, return_exceptions=True)


def _readable(fd: int) -> bool:
    import select

    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


async def let_go(proc: JobProcess) -> None:
    """A pooled process no grading will take: close its payload pipe (it exits on its own), wait
    for its status a moment (then kill it), close the rest and remove its cgroups."""
    try:
        os.close(proc.pay_w)
    except OSError:
        pass
    proc.pay_w = -1
    loop = asyncio.get_running_loop()
    end = loop.time() + 5
    try:
        while loop.time() < end and not _ctl_closed(proc):
            await asyncio.sleep(0.05)
        if not _ctl_closed(proc) and proc.pidfd is not None:
            signal.pidfd_send_signal(proc.pidfd, signal.SIGKILL)
            await asyncio.sleep(0.1)
    except OSError:
        pass
    finally:
        proc.close_fds()
        await _drop_group(proc)


def _ctl_closed(proc: JobProcess) -> bool:
    """Drain the control channel; True at its EOF (the supervisor reported and exited)."""
    while True:
        try:
            chunk = os.read(proc.ctl, 4096)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not chunk:
            return True
