"""The warm process: imports torch once, then forks one sandboxed job process per request.

Protocol on the control socket (a Unix stream socket from the engine): each request is 8
reserved bytes sent together with six file descriptors (ctl, result, stdout, stderr write ends,
the read end of a "go" pipe and the read end of a "payload" pipe), and a seventh, a page for the
benchmark's timestamps, when it asks for them. The zygote forks a *supervisor*, which enters
fresh namespaces and forks the job as PID 1 of its own PID namespace, then reports the job's host
pid and, later, its exit status on `ctl`.

The payload pipe carries two length-prefixed JSON messages, read by the job itself: how to make
its private mounts (`prep`), then the job (`payload`). A job from the engine's pool has done
everything up to its mounts when its payload is written, maybe much later; it exits quietly when
its payload pipe closes first (a pool shrinking, the engine gone).

Neither the zygote nor a supervisor ever reads a payload: every job is forked from their memory,
so a job's code (a reference solution, another player's submission) left in their heap, even
freed, could be read by every later job.

CUDA is never initialised here: a CUDA context does not survive fork.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from . import clone, sandbox, trace

NFDS = 6


MAX_MESSAGE = 64 << 20
READY_MARK = b"QZR1\0\0\0\0"  # a pooled job, warmed up and waiting for its payload (on its result pipe)


def _recv_request(sock: socket.socket) -> tuple[int, list[int]] | None:
    """The request's fds (and its 8 reserved bytes); the payload itself is left in its pipe."""
    msg, fds, _flags, _addr = socket.recv_fds(sock, 8, NFDS + 1)
    if not msg:
        for fd in fds:
            os.close(fd)
        return None
    while len(msg) < 8:
        more = sock.recv(8 - len(msg))
        if not more:
            return None
        msg += more
    (n,) = struct.unpack("<Q", msg)
    return n, list(fds)


def _read_exact(fd: int, n: int) -> bytes | None:
    """n bytes from a pipe; None at EOF before the first byte."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(1 << 20, n - len(buf)))
        if not chunk:
            if not buf:
                return None
            raise EOFError(f"payload cut short ({len(buf)} of {n} bytes)")
        buf += chunk
    return bytes(buf)


def _read_message(fd: int) -> dict[str, Any] | None:
    """In the job: one length-prefixed JSON message from its payload pipe; None when the pipe
    closed before it (a pooled job let go)."""
    head = _read_exact(fd, 8)
    if head is None:
        return None
    (n,) = struct.unpack("<Q", head)
    if n > MAX_MESSAGE:
        raise ValueError("payload too large")
    data = _read_exact(fd, n)
    if data is None:
        raise EOFError("payload cut short")
    msg = json.loads(data)
    if not isinstance(msg, dict):
        raise ValueError("payload is not an object")
    return msg


def _write_line(fd: int, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj) + "\n").encode()
    try:
        os.write(fd, data)
    except OSError:
        pass


def _baseline_vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def supervise(fds: list[int], ctl_sock_fd: int, sandboxed: bool) -> None:
    """Runs in the forked supervisor; never returns. It reads nothing of the job."""
    ctl, res, out, err, go, pay = fds[:NFDS]
    # the benchmark's page for timestamps (runner/trace.py), sent as a seventh fd when it asks
    page = trace.Page.attach(fds[NFDS]) if len(fds) > NFDS else None
    stamp = page.stamp if page is not None else trace.NOOP
    stamp("sup_start")
    code = 70
    try:
        os.close(ctl_sock_fd)
        sandbox.die_with_parent()
        work = None
        if sandboxed:
            sandbox.enter_job_namespaces()
        else:  # no private tmpfs: a temporary directory, removed when the job is over
            import tempfile
            work = tempfile.mkdtemp(prefix="quiz-job-")
        forked = time.monotonic()
        stamp("sup_ns")
        pid = os.fork()
        if pid == 0:
            _job_main(pay, ctl, res, out, err, go, sandboxed, work, stamp)
        for fd in (res, out, err, go, pay):
            os.close(fd)
        _write_line(ctl, {"pid": pid})
        _, status, usage = os.wait4(pid, 0)
        stamp("reaped")
        if work is not None:
            import shutil
            shutil.rmtree(work, ignore_errors=True)
        # The job's own elapsed time, measured here next to it: a parent whose event loop was
        # busy must not read its own delay as this job's slowness.
        elapsed = time.monotonic() - forked
        _write_line(ctl, {"status": status, "cpu_s": usage.ru_utime + usage.ru_stime,
                          "maxrss_kb": usage.ru_maxrss, "elapsed_s": elapsed})
        code = 0
    except BaseException as e:  # noqa: BLE001 - report and die, the engine answers `internal`
        _write_line(ctl, {"fatal": f"{type(e).__name__}: {e}"})
    os._exit(code)


def _job_main(pay: int, ctl: int, res: int, out: int, err: int, go: int, sandboxed: bool,
              work: str | None, stamp: Callable[[str], None] = trace.NOOP, cloned: bool = False) -> None:
    """The job's PID 1: its mounts, then (maybe much later, a pooled job) its payload; limit,
    lock down, then hand over to the harness."""
    if not cloned:  # cloned straight from the zygote, it stamped its start already
        stamp("job_start")
    try:
        os.close(ctl)
        # Own session and process group: kill(0, …) or killpg from the job reaches only the job,
        # never the zygote whose group it was forked in.
        os.setsid()
        prep = _read_message(pay)
        if prep is None:
            os._exit(0)  # let go before it was made
        scratch_mb, shm_mb = int(prep["scratch_mb"]), int(prep["shm_mb"])
        if sandboxed:
            work = sandbox.setup_job_mounts(scratch_mb, bool(prep["tmp_is_scratch"]), shm_mb)
        stamp("job_mounted")
        if prep.get("pooled"):
            # Made ahead, with time on its hands: one small grading of our own (as the zygote
            # did) copies now, off the clock, the zygote's pages a grading writes to (reference
            # counts), which the job would otherwise copy in its own time. Then it says it is
            # ready, ahead of anything the job will write on that channel.
            from . import harness

            harness.warm_up()
            os.write(res, READY_MARK)
        payload = _read_message(pay)
        if payload is None:
            os._exit(0)  # a pooled job let go
        stamp("job_payload")
        os.close(pay)
        limits = payload["limits"]
        if sandboxed and (int(limits["scratch_mb"]), int(limits["shm_mb"])) != (scratch_mb, shm_mb):
            sandbox.resize_job_mounts(int(limits["scratch_mb"]), int(limits["shm_mb"]))
        assert work is not None
        os.chdir(work)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # Keep stdin/stdout/stderr, the result pipe (3) and the go pipe (4); nothing else leaks in.
        res_hi, go_hi = fcntl.fcntl(res, fcntl.F_DUPFD, 1000), fcntl.fcntl(go, fcntl.F_DUPFD, 1000)
        os.dup2(res_hi, 3)
        os.dup2(go_hi, 4)
        os.closerange(5, 65536)
        res, go = 3, 4
        os.environ.clear()
        os.environ.update({"HOME": work, "TMPDIR": work, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                           "OMP_NUM_THREADS": str(payload.get("threads", 1)), "MPLBACKEND": "Agg",
                           # multi-rank jobs: gloo and TCPStore over the job's own loopback
                           "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"})
        mem = int(limits["memory_mb"]) << 20
        sandbox.set_limits(
            cpu_s=int(limits["cpu_s"]),
            memory_bytes=None if payload.get("requires") == "cuda" else _baseline_vm_bytes() + mem,
            processes=int(limits["processes"]),
            open_files=int(limits["open_files"]),
            # a shared-memory segment is a file in /dev/shm: the larger of the two sizes applies
            # (both tmpfs are size-limited on their own)
            file_size_bytes=int(max(limits["file_size_mb"], limits.get("shm_mb", 0))) << 20,
        )
        if sandboxed:
            # exec only where the job asks for it (a trusted field the engine sets, never the player)
            sandbox.lock_down(allow_exec=bool(payload.get("allow_exec", False)))
        stamp("job_ready")
        # Wait until the engine has put us in our cgroups (if any) before untrusted code runs.
        if os.read(go, 1) != b"G":
            os._exit(72)
        stamp("job_go")
        os.close(go)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        from . import harness

        harness.run(payload, res, stamp)
    except BaseException as e:  # noqa: BLE001
        try:
            os.write(2, f"runner: job setup failed: {type(e).__name__}: {e}\n".encode())
        finally:
            os._exit(71)
    os._exit(0)


def _warm_inductor() -> None:
    """For runners that offer `inductor`: pay Inductor's one-time costs here, once, rather than in
    every job's wall limit. Its imports, the CPU-feature probe (which compiles test programs; the
    answer is cached in memory and inherited by every fork) and one small graph; one compile
    thread, so a job's compile does not start a worker pool."""
    import torch
    import torch._inductor.config as config
    from torch._inductor import cpu_vec_isa

    config.compile_threads = 1
    config.cpp_cache_precompile_headers = False  # a precompiled header is tens of MiB per job's scratch
    cpu_vec_isa.pick_vec_isa()
    torch.compile(lambda t: t.sin() + 1)(torch.randn(4))
    torch._dynamo.reset()


def _warm_dynamo() -> None:
    """`torch.compile`'s first call imports and builds much more than `import torch._dynamo` does
    (the frame converter, FX passes, sympy for dynamic shapes, AOTAutograd): 3-4 s of a job's
    wall limit, measured, and 0.5 s once done here, for every job to inherit. The backends every
    runner offers (eager, aot_eager, a player's own), static and dynamic shapes, `explain`; the
    caches are reset after, so no job finds a graph of ours."""
    import torch
    import torch._dynamo

    def body(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * 2).sum(-1)

    x = torch.randn(3, 4, requires_grad=True)
    torch.compile(body, backend="eager", dynamic=True, fullgraph=True)(x)
    torch.compile(body, backend="aot_eager")(x).sum().backward()
    torch._dynamo.explain(body)(x.detach())
    torch._dynamo.reset()


def _warm_up() -> None:
    """What every job would otherwise pay for itself: one small grading of our own (see
    `harness.warm_up`), both seccomp programs built, and every object made so far frozen out of
    the garbage collector's reach, so a job's collections never walk (and write to, copying the
    pages of) the zygote's millions of objects."""
    import gc

    from . import harness

    harness.warm_up()
    sandbox.prebuild_seccomp()
    gc.collect()
    gc.freeze()


def main() -> None:
    ctl_fd = int(sys.argv[sys.argv.index("--fd") + 1])
    drop = sys.argv[sys.argv.index("--uid") + 1] if "--uid" in sys.argv else "none"
    sandboxed = "--unsandboxed" not in sys.argv
    if sandboxed:
        sandbox.die_with_parent()
        sandbox.drop_privileges(None if drop == "none" else int(drop))
    # Warm everything a job is likely to touch, without running any parallel torch work.
    import torch

    # Optimizers, torch.func and anything that touches torch._dynamo import it lazily, which
    # costs a job 1.5-3.5 s of its wall limit; import it once here, for every job to inherit.
    import torch._dynamo  # noqa: F401
    import torch.autograd  # noqa: F401
    import torch.func  # noqa: F401
    import torch.nn  # noqa: F401
    import torch.nn.functional  # noqa: F401
    import torch.optim  # noqa: F401
    import torch.testing  # noqa: F401
    import torch.utils.data  # noqa: F401

    from . import (
        harness,  # noqa: F401
        wire,  # noqa: F401
    )
    torch.set_num_threads(1)
    _warm_dynamo()
    if "--inductor" in sys.argv:
        _warm_inductor()
    _warm_up()
    uid, gid = os.geteuid(), os.getegid()
    one_clone = sandboxed and "--two-forks" not in sys.argv and clone.usable(
        sandbox.NS_FLAGS, child_setup=lambda: sandbox.become_job_root(uid, gid))
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    sock = socket.socket(fileno=ctl_fd)
    sock.sendall(b"R" if not one_clone else b"C")  # ready (C: jobs are cloned straight from here)
    while True:
        try:
            req = _recv_request(sock)
        except InterruptedError:
            continue
        except (ConnectionError, OSError):
            break
        if req is None:
            break
        _reserved, fds = req
        if len(fds) not in (NFDS, NFDS + 1):
            for fd in fds:
                os.close(fd)
            continue
        if one_clone:
            _clone_job(fds, sock.fileno(), uid, gid)
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            supervise(fds, sock.fileno(), sandboxed)
        for fd in fds:
            os.close(fd)
    os._exit(0)


# Jobs cloned straight from here (`runner/clone.py`), until reaped: pid -> (ctl fd, clone time,
# trace page). Statuses of children reaped before they were entered here wait in `_unclaimed`.
_jobs: dict[int, tuple[int, float, trace.Page | None]] = {}
_unclaimed: dict[int, tuple[int, Any]] = {}


def _clone_job(fds: list[int], ctl_sock_fd: int, uid: int, gid: int) -> None:
    """One clone into the job's new namespaces; the zygote itself is its supervisor: it reports
    its pid now and its status when it reaps it (`_reap`)."""
    ctl, res, out, err, go, pay = fds[:NFDS]
    page = trace.Page.attach(fds[NFDS]) if len(fds) > NFDS else None
    stamp = page.stamp if page is not None else trace.NOOP
    forked = time.monotonic()
    try:
        pid = clone.clone(sandbox.NS_FLAGS)
    except OSError as e:
        _write_line(ctl, {"fatal": f"{type(e).__name__}: {e}"})
        for fd in fds[:NFDS]:
            os.close(fd)
        if page is not None:
            page.close()
        return
    if pid == 0:  # the job: PID 1 of its new namespaces
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        stamp("job_start")
        try:
            # what the zygote holds for other jobs (their control channels, their trace pages)
            for other_ctl, _t, other_page in _jobs.values():
                os.close(other_ctl)
                if other_page is not None:
                    other_page.page.close()
            _jobs.clear()
            _unclaimed.clear()
            os.close(ctl_sock_fd)
            sandbox.die_with_parent()
            sandbox.become_job_root(uid, gid)
        except BaseException as e:  # noqa: BLE001 - its status tells the engine; this says why
            _write_line(ctl, {"fatal": f"{type(e).__name__}: {e}"})
            os._exit(70)
        stamp("job_ns")
        _job_main(pay, ctl, res, out, err, go, True, None, stamp, cloned=True)
    for fd in (res, out, err, go, pay):
        os.close(fd)
    _write_line(ctl, {"pid": pid})
    _jobs[pid] = (ctl, forked, page)
    early = _unclaimed.pop(pid, None)  # it died before it was entered
    _unclaimed.clear()  # anything else there is no job's (pids are reused)
    if early is not None:
        _report(pid, *early)


def _report(pid: int, status: int, usage: Any) -> None:
    ctl, forked, page = _jobs.pop(pid)
    if page is not None:
        page.stamp("reaped")
        page.close()
    _write_line(ctl, {"status": status, "cpu_s": usage.ru_utime + usage.ru_stime,
                      "maxrss_kb": usage.ru_maxrss, "elapsed_s": time.monotonic() - forked})
    os.close(ctl)


def _reap() -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in _jobs:
            _report(pid, status, usage)
        else:
            _unclaimed[pid] = (status, usage)  # a job cloned but not entered yet, or a supervisor
            if len(_unclaimed) > 64:
                _unclaimed.pop(next(iter(_unclaimed)))


if __name__ == "__main__":
    main()
