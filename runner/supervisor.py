"""Watching one sandboxed process from the outside: its pid, clock, output, memory and CPU.

The supervisor is the trusted half of a job's life: it never reads what the job says about
itself except its frame and progress marks, and it reads the job's exit status and own elapsed
time from the zygote's forked supervisor (which runs no player code). What it records in
`RawRun` is everything `judge` needs to decide a verdict from the outside.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import signal
import struct
import time
from dataclasses import dataclass
from typing import Any

from .cgroups import JobGroup
from .config import Limits
from .pool import JobProcess, unread_bytes
from .usage import TreeUsage
from .wire import MAGIC, WireError, split_progress

log = logging.getLogger("runner")


@dataclass
class RawRun:
    """What the engine saw of one sandboxed process, from the outside."""

    frame: bytes | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    output_bytes: int = 0
    status: int | None = None
    cpu_s: float = 0.0
    timed_out: bool = False
    cpu_exceeded: bool = False  # the whole process tree, seen from the outside
    output_exceeded: bool = False
    result_exceeded: bool = False
    memory_exceeded: bool = False
    fatal: str = ""
    wall_ms: float = 0.0
    cpu_limit: float = 0.0
    wall_limit: float = 0.0
    elapsed_s: float = 0.0  # the job's own elapsed time, from its fork to its reaping
    running_case: int | None = None  # the last case the job started, from its progress marks
    marks: int = 0  # how many progress marks it wrote (one per case it started)
    queue_ms: float = 0.0
    trace: dict[str, float] | None = None  # the benchmark's timestamps (runner/trace.py), when asked
    answered_early: bool = False  # a complete frame, every channel closed: judged before the exit

    @property
    def signal(self) -> int | None:
        if self.status is not None and os.WIFSIGNALED(self.status):
            return os.WTERMSIG(self.status)
        return None



class Supervisor:
    """Watches one sandboxed process from the outside: pid, time, output, memory.

    `run()` returns as soon as the verdict's facts are in: the job's status, or, sooner, a
    complete result frame with every channel closed (the job has nothing more to say; its exit,
    which frees its copy of the zygote's memory, is still under way). In that case it returns
    True and `finish()` must be awaited: it reaps the job (killing it at its deadline should it
    linger) and removes its cgroups; the engine holds the job's slot until then."""

    def __init__(self, raw: RawRun, proc: JobProcess, limits: Limits, max_result: int,
                 executor: concurrent.futures.Executor | None = None,
                 feed: asyncio.Future[None] | None = None) -> None:
        self.raw, self.limits, self.proc = raw, limits, proc
        self.go_fd: int | None = proc.go_w
        proc.go_w = None  # ours to write and close now
        group = proc.group
        # The job's cgroups, or a future of them (being made in a thread while the job forks)
        self.group: JobGroup | None = group if isinstance(group, JobGroup) else None
        self.group_fut = group if isinstance(group, asyncio.Future) else None
        self.executor = executor  # for the cgroup writes, which can wait for an RCU grace period
        self.attach: asyncio.Task[None] | None = None
        self.feed = feed  # writing the payload into its pipe
        self.ctl, self.res, self.out, self.err = proc.read_ends
        self.max_result = max_result + (1 << 20)
        self.max_output = int(limits.output_kb) << 10
        # a pooled process: its pid known, already in its cgroups and let go (its clock starts now)
        self.pidfd: int | None = proc.pidfd
        self.pid: int | None = proc.pid
        self.tree: TreeUsage | None = None
        self.done = asyncio.Event()
        self.wake = asyncio.Event()  # the status, or the last channel closing
        self.loop = asyncio.get_running_loop()
        self.bufs: dict[int, bytearray] = {self.res: bytearray(), self.out: bytearray(), self.err: bytearray()}
        self.ctl_buf = proc.ctl_buf
        self.open_fds = {self.ctl, self.res, self.out, self.err}
        self.deadline: float | None = None
        self.last_tick = 0.0
        self.killed = False

    def kill(self) -> None:
        self.killed = True
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                # The job leads its own process group: in a sandbox its PID namespace dies with
                # it anyway; unsandboxed (local play) this still takes its ordinary children along.
                os.killpg(self.pid, signal.SIGKILL)  # type: ignore[arg-type]
            except OSError:
                pass

    def _close(self, fd: int) -> None:
        if fd in self.open_fds:
            self.loop.remove_reader(fd)
            os.close(fd)
            self.open_fds.discard(fd)
            if self.open_fds <= {self.ctl}:
                self._stamp("channels")
                self.wake.set()

    def _set_done(self) -> None:
        self.done.set()
        self.wake.set()

    def _on_data(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(fd)
            if fd == self.ctl:
                self._set_done()
            return
        if fd == self.ctl:
            self.ctl_buf += chunk
            self._on_data_lines()
            return
        raw = self.raw
        if fd == self.res:
            buf = self.bufs[fd]
            if len(buf) + len(chunk) > self.max_result:
                raw.result_exceeded = True
                self.kill()
                self._close(fd)
                return
            buf += chunk
            return
        raw.output_bytes += len(chunk)
        buf = self.bufs[fd]
        room = max(0, self.max_output - len(buf))
        buf += chunk[:room]
        if raw.output_bytes > self.max_output:
            raw.output_exceeded = True
            self.kill()
            self._close(fd)

    def _on_data_lines(self) -> None:
        while b"\n" in self.ctl_buf:
            line, _, rest = bytes(self.ctl_buf).partition(b"\n")
            self.ctl_buf = bytearray(rest)
            self._on_ctl(json.loads(line))

    def _drain_ctl(self) -> None:
        """Read whatever the control channel holds now (a status that arrived while we were busy)."""
        for _ in range(64):
            if self.ctl not in self.open_fds or self.done.is_set():
                return
            seen = len(self.ctl_buf), self.pid, self.raw.status
            self._on_data(self.ctl)
            if (len(self.ctl_buf), self.pid, self.raw.status) == seen and self.ctl in self.open_fds:
                return  # nothing more to read now

    def _stamp(self, name: str) -> None:
        if self.raw.trace is not None:
            self.raw.trace[name] = time.monotonic()

    def _on_ctl(self, msg: dict[str, Any]) -> None:
        if "pid" in msg:
            if self.pid is not None:
                return  # one job per channel
            self._stamp("pid")
            self.pid = int(msg["pid"])
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except OSError:
                self.pidfd = None
            if self.group is None and self.group_fut is None:
                self._release_go(b"G")
            else:
                # Off the event loop: a write to cgroup.procs can wait for an RCU grace period.
                self.attach = self.loop.create_task(self._attach(self.pid))
        elif "status" in msg:
            self._stamp("status")
            if not self._payload_taken():
                # It ended before it read its job: whatever killed it, it ran none of the player's code.
                self.raw.fatal = "the job process ended before it took its job"
            self.raw.status = int(msg["status"])
            self.raw.cpu_s = float(msg.get("cpu_s", 0.0))
            self.raw.elapsed_s = float(msg.get("elapsed_s", 0.0))
            self._set_done()
        elif "fatal" in msg:
            self.raw.fatal = f"sandbox setup failed: {msg['fatal']}"
            self._set_done()

    def _payload_taken(self) -> bool:
        """Whether the job read its whole payload (nothing left to write, the pipe empty)."""
        if self.feed is not None and not self.feed.done():
            return False
        return self.proc.pay_w < 0 or unread_bytes(self.proc.pay_w) == 0

    async def _attach(self, pid: int) -> None:
        """Move the job into its cgroups (made meanwhile in a thread), then let it go."""
        try:
            if self.group_fut is not None:
                try:
                    self.group = await asyncio.shield(self.group_fut)
                except Exception as e:  # noqa: BLE001 - as if the runner had no cgroups
                    log.warning("could not create a job cgroup: %s", e)
                    self.group = None
                self.group_fut = None
            if self.group is not None:
                try:
                    await self.loop.run_in_executor(self.executor, self.group.add, pid)
                except OSError as e:
                    log.warning("could not move job %s into its cgroup: %s", pid, e)
            self._stamp("attached")
            self._release_go(b"G")
            self._stamp("go")
        finally:
            self.wake.set()

    def _release_go(self, byte: bytes) -> None:
        if self.go_fd is not None:
            try:
                os.write(self.go_fd, byte)
            except OSError:
                pass
            os.close(self.go_fd)
            self.go_fd = None

    def _usage(self) -> tuple[int, float]:
        """Resident memory and CPU seconds of the job's whole process tree. CPU comes from the
        job's cpuacct cgroup where it has one (exact: every task, reaped or not), else from
        `TreeUsage`, which keeps every task's time after the kernel reaps it."""
        if self.pid is None:
            return 0, 0.0
        if self.tree is None:
            self.tree = TreeUsage(self.pid)
        rss, cpu = self.tree.sample()
        exact = self.group.cpu_seconds() if self.group is not None else None
        return rss, max(cpu, exact) if exact is not None else cpu

    def _answerable(self) -> bool:
        """Every channel closed after a complete frame, and nothing the outside decided (a kill)
        pending: the job can say no more, so its verdict need not wait for its exit."""
        if self.pid is None or self.go_fd is not None or self.killed or self.raw.fatal or self.done.is_set():
            return False
        if self.open_fds - {self.ctl}:
            return False
        return frame_complete(bytes(self.bufs[self.res]))

    def _tick(self) -> float | None:
        """Advance the job's clock; the time left before its deadline (None: not started)."""
        now = self.loop.time()
        if now - self.last_tick > 0.5 and self.deadline is not None:
            # Our event loop was held up: the job may have waited on us (a full result
            # pipe) meanwhile. It does not pay for our delay.
            self.deadline += now - self.last_tick
        self.last_tick = now
        if self.deadline is None and self.pid is not None:
            self.deadline = now + float(self.limits.wall_s)
        return None if self.deadline is None else self.deadline - now

    async def run(self) -> bool:
        """Watch the job until its verdict's facts are in. True: it answered early and
        `finish()` still has to reap it."""
        for fd in list(self.open_fds):
            self.loop.add_reader(fd, self._on_data, fd)
        if self.ctl_buf:  # read with the pid (a pooled process)
            self._on_data_lines()
        # Until the job exists, waiting is the runner's doing: a supervisor that never forks it is
        # a runner fault, not the player's time.
        start_by = self.loop.time() + float(self.limits.wall_s) + 30
        # Baseline RSS of a forked worker is shared with the zygote; count what the job adds.
        mem_limit = (int(self.limits.memory_mb) << 20)
        baseline: int | None = None
        self.last_tick = self.loop.time()
        early = False
        try:
            while not self.done.is_set():
                if self._answerable():
                    early = True
                    break
                left = self._tick()
                if left is None and self.loop.time() > start_by:
                    self.raw.fatal = "the sandbox did not start the job"
                    break
                remaining = left if left is not None else start_by - self.loop.time()
                if remaining <= 0:
                    self._drain_ctl()  # it may have finished while we were busy
                    if self.done.is_set():
                        break
                    self.raw.timed_out = True
                    self.kill()
                    break
                self.wake.clear()
                if self._answerable():
                    early = True
                    break
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=min(0.1, remaining))
                except TimeoutError:
                    pass
                if self.group is not None and self.group.hit_memory_limit():
                    self.raw.memory_exceeded = True  # the kernel killed one of the job's processes
                    self.kill()
                elif self.pid is not None and not self.done.is_set() and not self._answerable():
                    rss, cpu = self._usage()
                    if cpu > self.raw.cpu_limit:
                        self.raw.cpu_exceeded = True
                        self.kill()
                    elif baseline is None:
                        baseline = rss
                    elif rss - baseline > mem_limit:
                        self.raw.memory_exceeded = True
                        self.kill()
            if early:
                self._final_checks()
            else:
                if self.raw.timed_out:
                    try:
                        await asyncio.wait_for(self.done.wait(), timeout=5)
                    except TimeoutError:
                        self.raw.fatal = "the job could not be stopped"
                # The job's PID namespace is gone once PID 1 exits, so the pipes reach EOF promptly.
                end = self.loop.time() + 2
                while self.open_fds - {self.ctl} and self.loop.time() < end:
                    await asyncio.sleep(0.005)
        finally:
            if not early:
                await self._cleanup(final=True)
        if self.raw.status is None and not self.raw.fatal and not early:
            # The control channel closed without the job's status: the zygote or the supervisor
            # died (a runner restart, a crash). Whatever the job did, that is not its verdict.
            self.raw.fatal = "the sandbox's worker died before the job's status was known"
        raw = self.raw
        raw.answered_early = early
        data = bytes(self.bufs[self.res])
        try:
            raw.running_case, raw.frame = split_progress(data)
            raw.marks = (len(data) - len(raw.frame or b"")) // 8
        except WireError:  # forged marks: left whole, so the frame fails to decode (the player's error)
            raw.running_case, raw.frame = None, data
        raw.stdout = bytes(self.bufs[self.out])
        raw.stderr = bytes(self.bufs[self.err])
        self._stamp("answer")
        return early

    def _final_checks(self) -> None:
        """At an early answer: what the limits say now (an OOM kill in the group, the CPU time of
        every process the job ran), as the end of the job would have told."""
        group = self.group
        if group is not None and group.hit_memory_limit():
            self.raw.memory_exceeded = True
        spent = group.cpu_seconds() if group is not None else None
        if spent is None:
            spent = self._usage()[1]
        if spent > self.raw.cpu_limit:
            self.raw.cpu_exceeded = True

    async def finish(self) -> None:
        """After an early answer: reap the job, which is exiting (one that lingers after saying
        all it had to say is killed: nothing it does now is graded), then remove its cgroups.
        Nothing here changes the answer."""
        try:
            try:
                await asyncio.wait_for(self.done.wait(), timeout=2)
            except TimeoutError:
                self.kill()
                try:
                    await asyncio.wait_for(self.done.wait(), timeout=5)
                except TimeoutError:
                    log.warning("job %s could not be stopped after its answer", self.pid)
        finally:
            if not self.done.is_set():
                self.kill()
            await self._cleanup(final=False)

    async def _cleanup(self, *, final: bool) -> None:
        self._release_go(b"")
        for fd in list(self.open_fds):
            self._close(fd)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self.proc.pidfd = None
        if self.proc.pay_w >= 0:
            os.close(self.proc.pay_w)
            self.proc.pay_w = -1
        if self.attach is not None and not self.attach.done():
            try:
                await asyncio.shield(self.attach)
            except BaseException:  # noqa: BLE001 - cancelled meanwhile: the thread still finishes
                pass
        if self.group_fut is not None:  # made, never attached (no pid): remove it all the same
            try:
                self.group = await asyncio.shield(self.group_fut)
            except BaseException:  # noqa: BLE001
                self.group = None
            self.group_fut = None
        group = self.group
        if group is None:
            return
        if final:
            if group.hit_memory_limit():
                self.raw.memory_exceeded = True
            spent = group.cpu_seconds()  # a burst just before the exit counts too
            if spent is not None and spent > self.raw.cpu_limit and not self.raw.fatal:
                self.raw.cpu_exceeded = True
        try:
            self.loop.run_in_executor(self.executor, group.remove)
        except RuntimeError:  # the engine is closing: its executor takes no more work
            group.remove()


def frame_complete(data: bytes, max_header: int = 1 << 16) -> bool:
    """Whether the result channel holds progress marks and then exactly one whole frame: its
    header and every blob its table names, no byte missing or left over. False when unsure (a
    header over `max_header`, which is not parsed here, on the event loop)."""
    try:
        _case, frame = split_progress(data)
    except WireError:
        return False
    if frame is None or len(frame) < 8 or frame[:4] != MAGIC:
        return False
    (n,) = struct.unpack_from("<I", frame, 4)
    if n > max_header or 8 + n > len(frame):
        return False
    try:
        header = json.loads(frame[8:8 + n])
        blobs = header["blobs"] if isinstance(header, dict) else None
        if not isinstance(blobs, list):
            return False
        total = sum(int(entry[1]) for entry in blobs)
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return False
    return 8 + n + total == len(frame)


async def _feed_pipe(fd: int, data: bytes) -> None:
    """Write `data` into a pipe without blocking the loop. The pipe stays open: the supervisor
    asks it, at the job's end, whether the job read everything (see `_payload_taken`)."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    os.set_blocking(fd, False)
    try:
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                ready: asyncio.Future[None] = loop.create_future()

                def wake(fut: asyncio.Future[None] = ready) -> None:
                    if not fut.done():
                        fut.set_result(None)
                loop.add_writer(fd, wake)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
    except OSError:
        pass  # the job died before reading it; the ctl channel says what happened


