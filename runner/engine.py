"""The trusted side of grading: start the jailed zygote, run sandboxed processes, cache the
reference, keep metrics.

The engine turns a job into sandboxed runs (`supervisor`) and hands what it saw to the verdict
ladder (`judge`), which it runs off the event loop: decoding a hostile frame must never hold up
the other jobs in flight.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hashlib
import json
import logging
import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from . import __version__, judge, sandbox
from .cgroups import JobCgroups
from .config import Limits, RunnerConfig
from .judge import Judged
from .pool import JobPool, JobProcess, let_go, message, spawn
from .protocol import MAX_MISTAKES, Capabilities, Job, JobError, Result, Verdict
from .supervisor import RawRun, Supervisor, _feed_pipe
from .zygote import READY_MARK

log = logging.getLogger("runner")

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)

__all__ = ["Engine", "JobError", "Zygote", "validate_job"]


def validate_job(job: Any) -> str:
    """Check the job's shape (`JobError`, HTTP 400); returns its kind."""
    return Job.from_json(job).kind


class Zygote:
    """One jailed warm interpreter and the socket to it."""

    def __init__(self, plan: sandbox.JailPlan | None, *, inductor: bool = False, clone: bool = True) -> None:
        self.plan = plan
        self.inductor = inductor  # warm torch.compile's Inductor backend at start-up
        self.clone = clone  # jobs cloned straight into their namespaces where that works
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None
        self.lock = asyncio.Lock()
        self.one_clone = False

    async def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        args = [sys.executable, "-m", "runner.zygote", "--fd", str(child.fileno())]
        if self.inductor:
            args.append("--inductor")
        if not self.clone:
            args.append("--two-forks")
        if self.plan is None:
            args.append("--unsandboxed")
            argv = args
            env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, OMP_NUM_THREADS="1")
            env.pop("RUNNER_TOKEN", None)
        else:
            if self.plan.drop_to_uid is not None:
                args += ["--uid", str(self.plan.drop_to_uid)]
            argv = self.plan.argv_prefix + args
            env = None
        self.proc = await asyncio.create_subprocess_exec(
            *argv, pass_fds=[child.fileno()], env=env, cwd="/",
            stdin=asyncio.subprocess.DEVNULL)
        child.close()
        parent.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            # warming Inductor compiles the CPU-feature probe and a graph: minutes on a busy host
            ready = await asyncio.wait_for(loop.sock_recv(parent, 1), timeout=600 if self.inductor else 120)
        except TimeoutError:
            ready = b""
        if ready not in (b"R", b"C"):
            parent.close()
            await self.stop()
            raise sandbox.SandboxError("the warm worker did not start (see the log above)")
        self.one_clone = ready == b"C"  # jobs cloned straight into their namespaces (runner/clone.py)
        parent.setblocking(True)
        self.sock = parent

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self.sock is not None

    async def submit(self, fds: list[int]) -> None:
        """Ask for one process. Only the fds go to the zygote: the payload travels in its own
        pipe, straight to the job (see `runner.zygote`)."""
        assert self.sock is not None
        sock = self.sock
        msg = struct.pack("<Q", 0)  # reserved
        async with self.lock:
            try:  # 8 bytes and the fds: almost always sent at once, without a thread
                sent = socket.send_fds(sock, [msg], fds, socket.MSG_DONTWAIT)
            except BlockingIOError:
                sent = 0
            if sent == len(msg):
                return

            def send() -> None:
                if sent == 0:
                    socket.send_fds(sock, [msg], fds)
                else:  # the fds went with the first byte
                    sock.sendall(msg[sent:])
            await asyncio.get_running_loop().run_in_executor(None, send)

    async def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()



class Engine:
    """Grades jobs. `async with Engine(config) as engine: await engine.grade(job)`."""

    def __init__(self, config: RunnerConfig | None = None) -> None:
        self.config = config or RunnerConfig()
        self.zygote: Zygote | None = None
        self.plan: sandbox.JailPlan | None = None
        self.cgroups: JobCgroups | None = None
        self.features: list[str] = []
        self.sandboxed = False
        self.caps: dict[str, Any] = {"torch": None, "cuda": None}
        self.slots = asyncio.Semaphore(self.config.workers)
        self.busy = 0
        self.restart_lock = asyncio.Lock()
        self.ref_cache: collections.OrderedDict[str, Judged] = collections.OrderedDict()
        self.ref_inflight: dict[str, asyncio.Future[tuple[Judged | None, str]]] = {}
        # what each item's known wrong answers do (None: nothing comparable), by trusted hash
        self.known_cache: collections.OrderedDict[str, Judged | None] = collections.OrderedDict()
        self.known_inflight: dict[str, asyncio.Future[Judged | None]] = {}
        # decoding and comparing frames, off the event loop (bounded work, see judge)
        self.judges = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="judge")
        # cgroup writes (mkdir, limits, cgroup.procs, rmdir), off the event loop: moving a task
        # waits for an RCU grace period, several ms after an idle spell
        self.cgroup_io = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="cgroup")
        self.reaping: set[asyncio.Future[None]] = set()  # jobs answered, not yet reaped (slots held)
        self.pool: JobPool | None = None  # job processes made ahead (runner/pool.py)
        self.metrics: collections.Counter[str] = collections.Counter()
        self.latency_ms: collections.deque[float] = collections.deque(maxlen=2048)

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ life cycle
    def _plan(self) -> sandbox.JailPlan | None:
        gpu = any(Path("/dev").glob("nvidia[0-9]*"))
        try:
            plan = sandbox.bwrap_argv(PACKAGE_ROOT, gpu=gpu)
            sandbox.probe_jail(plan)
        except sandbox.SandboxError as e:
            if not self.config.allow_unsandboxed:
                raise sandbox.SandboxError(
                    f"{e}. Refusing to run untrusted code without a sandbox; set "
                    "`allow_unsandboxed: true` only for local play on your own machine.") from None
            log.warning("!" * 70)
            log.warning("RUNNING UNSANDBOXED (%s): submitted code can do anything you can.", e)
            log.warning("!" * 70)
            self.features = ["UNSANDBOXED"]
            self.sandboxed = False
            return None
        self.features = plan.features + ["pidns-per-job", "userns-per-job", "netns-per-job",
                                         "private-proc", "scratch-tmpfs", "rlimits", "no-caps"]
        if sandbox.seccomp_supported():
            self.features.append("seccomp")
        self.sandboxed = True
        self.cgroups = JobCgroups.detect() if self.config.cgroups else None
        self.features.append(self.cgroups.feature if self.cgroups else "rss-watchdog")
        return plan

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # The parent decodes tensors; import torch now rather than during the first grading.
        await loop.run_in_executor(None, __import__, "torch")
        plan = await asyncio.get_running_loop().run_in_executor(None, self._plan)
        self.plan = plan
        self.zygote = Zygote(plan, inductor=self.config.inductor, clone=self.config.clone)
        await self.zygote.start()
        if self.zygote.one_clone:
            self.features.append("clone-from-zygote")
        raw = await self._run({"kind": "capabilities"}, self.config.defaults)
        try:
            judged = judge.decode_frame(raw.frame, expected_cases=0)
        except judge.WireError:
            judged = None
        if judged is None or judged.status != "ok":
            raise sandbox.SandboxError(f"the sandbox could not run torch: {raw.fatal or raw.stderr[-500:]!r}")
        self.caps = judged.extra.get("caps", self.caps)
        if self.config.pool > 0 and not self.config.cold_start:
            self.pool = JobPool(self.config.pool, self.config.pool_idle_s, self._make_pooled)
            self.pool.fill(self.zygote)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        for task in list(self.reaping):
            task.cancel()
        await asyncio.gather(*self.reaping, return_exceptions=True)
        if self.zygote is not None:
            await self.zygote.stop()
        self.cgroup_io.shutdown(wait=True)
        if self.cgroups is not None:
            self.cgroups.close()
        self.judges.shutdown(wait=False, cancel_futures=True)

    async def _ensure_zygote(self) -> Zygote:
        async with self.restart_lock:
            if self.zygote is None or not self.zygote.alive():
                self.metrics["zygote_restarts"] += 1
                log.warning("warm worker gone; restarting it")
                if self.zygote is not None:
                    await self.zygote.stop()
                self.zygote = Zygote(self.plan, inductor=self.config.inductor, clone=self.config.clone)
                await self.zygote.start()
                if self.pool is not None:
                    self.pool.fill(self.zygote)  # lets go of what the old one made
            return self.zygote

    def capabilities(self) -> Capabilities:
        """What this runner can grade: its device, ranks and optional features (from the
        sandbox's own start-up probe, so a package the jail cannot import is not claimed)."""
        found = set(self.caps.get("features") or ())
        if not self.config.inductor:
            found.discard("inductor")
        return Capabilities(torch=self.caps.get("torch"), cuda=self.caps.get("cuda") or None,
                            sandbox=tuple(self.features), ranks=max(1, self.config.max_ranks),
                            features=frozenset(found))

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.zygote is not None and self.zygote.alive() else "degraded",
            "version": __version__,
            "torch": self.caps.get("torch"),
            "cuda": self.caps.get("cuda"),
            "workers": self.config.workers,
            "free_workers": self.config.workers - self.busy,
            "sandbox": self.features,
            "sandboxed": self.sandboxed,
            "capabilities": self.capabilities().to_json(),
            "limits": {"defaults": self.config.defaults.as_dict(), "maxima": self.config.maxima.as_dict()},
        }

    # ------------------------------------------------------------------ one sandboxed process
    async def _run(self, payload: dict[str, Any], limits: Limits,
                   trace: dict[str, float] | None = None) -> RawRun:
        """One sandboxed process in one of the `workers` slots. The result may come back before
        the process is reaped (a complete frame, every channel closed): the slot stays taken
        until the reaping, done in the background, is over."""
        queued = time.monotonic()
        await self.slots.acquire()
        self.busy += 1
        tail: Supervisor | None = None
        try:
            if trace is not None:
                trace["slot"] = time.monotonic()
            raw, tail = await self._run_unlocked(payload, limits, trace)
            raw.queue_ms = (time.monotonic() - queued) * 1000 - raw.wall_ms
            return raw
        finally:
            if tail is None:
                self._free_slot()
            else:
                task = asyncio.ensure_future(tail.finish())
                self.reaping.add(task)
                task.add_done_callback(self._reaped)

    def _free_slot(self) -> None:
        self.busy -= 1
        self.slots.release()

    def _reaped(self, task: asyncio.Future[None]) -> None:
        self.reaping.discard(task)
        self._free_slot()
        if not task.cancelled() and task.exception() is not None:
            log.error("reaping a job failed: %r", task.exception())

    async def _run_unlocked(self, payload: dict[str, Any], limits: Limits,
                            trace: dict[str, float] | None = None) -> tuple[RawRun, Supervisor | None]:
        if self.config.cold_start and payload.get("kind") != "capabilities":
            # Benchmark baseline: a fresh jailed interpreter (and `import torch`) per process.
            cold = Zygote(self.plan, inductor=self.config.inductor, clone=self.config.clone)
            await cold.start()
            try:
                raw, tail = await self._run_in(cold, payload, limits, trace)
                if tail is not None:
                    await tail.finish()
                return raw, None
            finally:
                await cold.stop()
        return await self._run_in(await self._ensure_zygote(), payload, limits, trace)

    def _prep(self, limits: Limits, *, pooled: bool = False) -> dict[str, Any]:
        """How a job process makes its private mounts (the first message on its payload pipe)."""
        return {"scratch_mb": int(limits.scratch_mb), "shm_mb": int(limits.shm_mb),
                "tmp_is_scratch": self.plan.tmp_is_scratch if self.plan else False, "pooled": pooled}

    async def _spawn(self, zygote: Zygote, limits: Limits, *, pooled: bool = False) -> JobProcess:
        return await spawn(zygote, prep=self._prep(limits, pooled=pooled), limits=limits, cgroups=self.cgroups,
                           cpu_share=float(self.config.threads_per_job), executor=self.cgroup_io,
                           trace=self.config.trace)

    async def _make_pooled(self, zygote: Zygote) -> JobProcess | None:
        """A job process made ahead with the default limits: forked, in its namespaces, its
        mounts made, moved into its cgroups and let go, warmed up; it waits for its payload."""
        proc = await self._spawn(zygote, self.config.defaults, pooled=True)
        loop = asyncio.get_running_loop()
        try:
            end = loop.time() + 60
            buf = bytearray()
            while b"\n" not in buf:
                buf += await _read_some(proc.ctl, end, "the supervisor ended before the job started")
            line, _, rest = bytes(buf).partition(b"\n")
            proc.ctl_buf = bytearray(rest)
            msg = json.loads(line)
            if "pid" not in msg:
                raise OSError(f"the job did not start: {msg}")
            proc.pid = int(msg["pid"])
            proc.pidfd = os.pidfd_open(proc.pid)
            if isinstance(proc.group, asyncio.Future):
                proc.group = await proc.group
            if proc.group is not None:
                await loop.run_in_executor(self.cgroup_io, proc.group.add, proc.pid)
            assert proc.go_w is not None
            os.write(proc.go_w, b"G")  # in its cgroups: it may run once its payload comes
            os.close(proc.go_w)
            proc.go_w = None
            mark = bytearray()
            while len(mark) < len(READY_MARK):  # warmed up; nothing else is on its result pipe yet
                mark += await _read_some(proc.res, end, "the job ended before it was ready", len(READY_MARK) - len(mark))
            if mark != READY_MARK:
                raise OSError("the job's ready mark was wrong")
        except BaseException as e:
            await let_go(proc)
            if isinstance(e, Exception):
                log.warning("a pooled job process failed: %s", e)
                return None
            raise
        return proc

    async def _run_in(self, zygote: Zygote, payload: dict[str, Any], limits: Limits,
                      trace: dict[str, float] | None = None) -> tuple[RawRun, Supervisor | None]:
        payload = dict(payload, limits=limits.as_dict(), threads=self.config.threads_per_job,
                       gpu_memory_fraction=self.config.gpu_memory_fraction,
                       max_observation_bytes=self.config.max_observation_mb << 20)
        raw = RawRun(cpu_limit=float(limits.cpu_s), wall_limit=float(limits.wall_s), trace=trace)
        if trace is not None:
            trace["submit"] = time.monotonic()
        started = time.monotonic()
        proc = await self.pool.take(zygote) if self.pool is not None and zygote is self.zygote else None
        data = message(payload)
        if proc is not None:
            proc.renew(limits)
            self.metrics["pooled_jobs"] += 1
        else:
            try:
                proc = await self._spawn(zygote, limits)
            except OSError as e:
                raw.fatal = f"could not reach the warm worker: {e}"
                if zygote.proc is not None and zygote.proc.returncode is None:
                    zygote.proc.kill()
                return raw, None
        if trace is not None:
            trace["submitted"] = time.monotonic()
        feed = asyncio.ensure_future(_feed_pipe(proc.pay_w, data))
        sup = Supervisor(raw, proc, limits, self.config.max_observation_mb << 20,
                         executor=self.cgroup_io, feed=feed)
        try:
            early = await sup.run()
        finally:
            feed.cancel()  # a no-op once it is written
            await asyncio.gather(feed, return_exceptions=True)
            if proc.page is not None:
                if trace is not None:
                    trace.update(proc.page.read())
                proc.page.close()
                proc.page = None
        raw.wall_ms = (time.monotonic() - started) * 1000
        return raw, sup if early else None

    # ------------------------------------------------------------------ decoding and judging
    # ------------------------------------------------------------------ grading
    async def grade(self, job: dict[str, Any] | Job) -> dict[str, Any]:
        """Grade one job; always returns a result (JSON); raises JobError only for malformed jobs."""
        return (await self.grade_job(job if isinstance(job, Job) else Job.from_json(job))).to_json()

    async def grade_job(self, job: Job) -> Result:
        received = time.monotonic()
        trace: dict[str, float] | None = {"recv": received} if self.config.trace else None
        limits = self.config.defaults.clamp(job.limits, self.config.maxima)
        missing = self.capabilities().missing(job.requires, job.features, job.ranks)
        if missing:
            result = Result(Verdict.UNSUPPORTED, missing)
        elif job.kind == "output":
            raw = await self._run({"kind": "output", "role": "snippet", "code": job.snippet,
                                   "seed": job.seed, "requires": job.requires,
                                   "allow_exec": job.allow_exec}, limits, trace)
            result = await self._off_loop(judge.judge_output, raw)
            result.timings = {"queue_ms": round(raw.queue_ms, 1), "run_ms": round(raw.wall_ms, 1)}
        else:
            result = await self._grade_code(job, limits, trace)
        result.job_id = job.job_id
        end = time.monotonic()
        total = (end - received) * 1000
        result.timings = dict(result.timings, total_ms=round(total, 1))
        if trace is not None:
            trace.setdefault("judged", end)
            trace["end"] = end
            result.timings.update({f"t_{k}": round((v - received) * 1000, 3) for k, v in trace.items()})
        result.runner = {"version": __version__, "torch": self.caps.get("torch"),
                         "cuda": (self.caps.get("cuda") or {}).get("name"),
                         "sandbox": "+".join(self.features)}
        self.metrics[f"verdict_{result.verdict.value}"] += 1
        self.metrics["jobs"] += 1
        self.latency_ms.append(total)
        return result

    async def _off_loop(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Decoding and comparing are CPU work bounded by the frame's size: keep them off the
        event loop so pipes are drained and other jobs' clocks run true meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(
            self.judges, lambda: fn(*args, **kwargs))

    @staticmethod
    def _trusted_key(job: Job, code: str) -> str:
        """What decides a trusted run's observations: the item's parts and the code run."""
        return hashlib.sha256(json.dumps(
            [job.setup, code, job.probe, job.entrypoint, job.seed, job.requires,
             job.allow_exec, job.ranks, list(job.features)]).encode()).hexdigest()

    async def _reference(self, job: Job, limits: Limits) -> tuple[Judged | None, str]:
        """Reference observations, cached by the hash of the trusted parts of the job."""
        key = self._trusted_key(job, job.reference)
        if key in self.ref_cache:
            self.ref_cache.move_to_end(key)
            self.metrics["reference_cache_hits"] += 1
            return self.ref_cache[key], ""
        if key in self.ref_inflight:
            return await asyncio.shield(self.ref_inflight[key])
        fut: asyncio.Future[tuple[Judged | None, str]] = asyncio.get_running_loop().create_future()
        self.ref_inflight[key] = fut
        try:
            raw = await self._run(_code_payload(job, "reference", job.reference), limits)
            judged, problem = await self._off_loop(_decode_reference, raw)
            if judged is not None:
                self.ref_cache[key] = judged
                while len(self.ref_cache) > self.config.reference_cache:
                    self.ref_cache.popitem(last=False)
            fut.set_result((judged, problem))
            return judged, problem
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # mark retrieved
            raise
        finally:
            self.ref_inflight.pop(key, None)

    async def _grade_code(self, job: Job, limits: Limits, trace: dict[str, float] | None = None) -> Result:
        (ref, problem), raw = await asyncio.gather(
            self._reference(job, limits),
            self._run(_code_payload(job, "submission", job.submission), limits, trace))
        if ref is None:
            return judge.reference_failed(problem or "no result")
        tol = job.tolerances
        rtol, atol = float(tol.get("rtol", 1e-5)), float(tol.get("atol", 1e-8))
        res: Result = await self._off_loop(judge.judge_submission, ref, raw, rtol=rtol, atol=atol)
        if trace is not None:
            trace["judged"] = time.monotonic()
        res.timings = {"queue_ms": round(raw.queue_ms, 1), "run_ms": round(raw.wall_ms, 1)}
        if job.mistakes and res.verdict in (Verdict.FAILED, Verdict.ERROR):
            res.mistake = await self._recognise(job, limits, raw, len(ref.cases), rtol=rtol, atol=atol)
        return res

    async def _recognise(self, job: Job, limits: Limits, raw: RawRun, n: int, *,
                         rtol: float, atol: float) -> int | None:
        """The first known wrong answer this failing submission behaves like on every case.
        Each wrong answer runs once per item, when first needed, and is cached like the
        reference; a submission that is a wrong answer verbatim gives its behaviour for free."""
        sub = await self._off_loop(_behaviour, raw, n)
        if sub is None:
            return None
        keys = [self._trusted_key(job, code) for code in job.mistakes]
        own = self._trusted_key(job, job.submission)
        if own in keys and own not in self.known_cache:
            self._keep_known(own, sub)
        for i, (code, key) in enumerate(zip(job.mistakes, keys, strict=True)):
            # in order, so a likeness to an early answer spares running the later ones
            behaviour = await self._known(job, limits, code, key, n)
            if await self._off_loop(judge.behaves_like, behaviour, sub, rtol=rtol, atol=atol):
                return i
        return None

    def _keep_known(self, key: str, behaviour: Judged | None) -> None:
        self.known_cache[key] = behaviour
        while len(self.known_cache) > self.config.reference_cache * MAX_MISTAKES:
            self.known_cache.popitem(last=False)

    async def _known(self, job: Job, limits: Limits, code: str, key: str, n: int) -> Judged | None:
        """What one known wrong answer does, run once and cached; concurrent askers share a run."""
        if key in self.known_cache:
            self.known_cache.move_to_end(key)
            return self.known_cache[key]
        if key in self.known_inflight:
            return await asyncio.shield(self.known_inflight[key])
        fut: asyncio.Future[Judged | None] = asyncio.get_running_loop().create_future()
        self.known_inflight[key] = fut
        try:
            self.metrics["mistake_runs"] += 1
            raw = await self._run(_code_payload(job, "mistake", code), limits)
            behaviour = await self._off_loop(_behaviour, raw, n)
            if not raw.fatal:  # a runner fault is tried again next time; anything else is what it does
                self._keep_known(key, behaviour)
            fut.set_result(behaviour)
            return behaviour
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()
            raise
        finally:
            self.known_inflight.pop(key, None)

    def metrics_text(self) -> str:
        lines = ["# TYPE runner_jobs_total counter", f"runner_jobs_total {self.metrics['jobs']}"]
        lines.append("# TYPE runner_verdicts_total counter")
        for k, v in sorted(self.metrics.items()):
            if k.startswith("verdict_"):
                lines.append(f'runner_verdicts_total{{verdict="{k[8:]}"}} {v}')
        for name in ("reference_cache_hits", "mistake_runs", "zygote_restarts", "rejected_busy", "rejected_auth",
                     "pooled_jobs"):
            lines.append(f"# TYPE runner_{name}_total counter")
            lines.append(f"runner_{name}_total {self.metrics[name]}")
        lines += ["# TYPE runner_workers gauge", f"runner_workers {self.config.workers}",
                  "# TYPE runner_busy_workers gauge", f"runner_busy_workers {self.busy}"]
        if self.latency_ms:
            data = sorted(self.latency_ms)
            for q in (0.5, 0.95, 0.99):
                lines.append(f'runner_latency_ms{{quantile="{q}"}} {data[min(len(data) - 1, int(q * len(data)))]:.1f}')
        return "\n".join(lines) + "\n"


async def _read_some(fd: int, end: float, eof: str, most: int = 4096) -> bytes:
    """What a non-blocking pipe has (waiting for it until the loop time `end`); OSError at EOF."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            chunk = os.read(fd, most)
        except BlockingIOError:
            ready: asyncio.Future[None] = loop.create_future()

            def wake(f: asyncio.Future[None] = ready) -> None:
                if not f.done():
                    f.set_result(None)
            loop.add_reader(fd, wake)
            try:
                await asyncio.wait_for(ready, timeout=max(0.0, end - loop.time()))
            finally:
                loop.remove_reader(fd)
            continue
        if not chunk:
            raise OSError(eof)
        return chunk


def _decode_reference(raw: RawRun) -> tuple[Judged | None, str]:
    """The reference's observations, each case labelled with its kind of evidence; or why not."""
    try:
        judged = judge.decode_frame(raw.frame)
    except judge.WireError as e:
        return None, str(e)
    problem = judge.reference_problem(raw, judged)
    if problem or judged is None:
        return None, problem or "no result"
    for case in judged.cases:
        case["evidence"] = judge.evidence(case["obs"])
    return judged, ""


def _behaviour(raw: RawRun, n: int) -> Judged | None:
    """A run's per-case behaviour when it ran to the end inside its limits, else None."""
    judged, _corrupted = judge.decode_submission(raw, n)
    if judged is None or judge.outside_verdict(raw, judged)[0] is not None:
        return None
    return judged


def _code_payload(job: Job, role: str, code: str) -> dict[str, Any]:
    return {"kind": "code", "role": role, "code": code, "setup": job.setup, "probe": job.probe,
            "entrypoint": job.entrypoint, "seed": job.seed, "requires": job.requires,
            # Inductor on CPU runs a C++ compiler: a job that asks for it may exec
            "allow_exec": job.allow_exec or "inductor" in job.features, "ranks": job.ranks}
