"""The trusted side of grading: start the jailed zygote, run sandboxed processes, judge.

The engine is the only place that turns what came out of a sandbox into a verdict. It never
believes the sandbox: it reads observations through `wire`, compares them with `compare`, and
derives timeouts, memory and output limits from what it saw from the outside.
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, sandbox
from .cgroups import JobCgroups, JobGroup
from .compare import compare
from .config import Limits, RunnerConfig
from .wire import Decoder, WireError, split_frame, split_progress

log = logging.getLogger("runner")

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
DISPLAY_OUTPUT_BYTES = 4096
MEMORY_ERRORS = ("MemoryError", "OutOfMemoryError")
MEMORY_MARKERS = ("can't allocate memory", "DefaultCPUAllocator", "out of memory", "Cannot allocate memory")


class JobError(ValueError):
    """The job JSON itself is wrong (HTTP 400): a client bug, not a verdict."""


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
    running_case: int | None = None  # the last case the job started, from its progress marks
    queue_ms: float = 0.0

    @property
    def signal(self) -> int | None:
        if self.status is not None and os.WIFSIGNALED(self.status):
            return os.WTERMSIG(self.status)
        return None


@dataclass
class Judged:
    """Decoded frame of one process: status, per-case observations or errors."""

    status: str
    error: dict[str, Any] | None
    cases: list[dict[str, Any]] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class Zygote:
    """One jailed warm interpreter and the socket to it."""

    def __init__(self, plan: sandbox.JailPlan | None) -> None:
        self.plan = plan
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        args = [sys.executable, "-m", "runner.zygote", "--fd", str(child.fileno())]
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
            ready = await asyncio.wait_for(loop.sock_recv(parent, 1), timeout=120)
        except asyncio.TimeoutError:
            ready = b""
        if ready != b"R":
            parent.close()
            await self.stop()
            raise sandbox.SandboxError("the warm worker did not start (see the log above)")
        parent.setblocking(True)
        self.sock = parent

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self.sock is not None

    async def submit(self, size: int, fds: list[int]) -> None:
        """Ask for one process. Only the payload's size and the fds go to the zygote: the payload
        itself travels in its own pipe, straight to the forked supervisor (see `runner.zygote`)."""
        assert self.sock is not None
        sock = self.sock
        async with self.lock:
            def send() -> None:
                socket.send_fds(sock, [struct.pack("<Q", size)], fds)
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
        self.ref_inflight: dict[str, asyncio.Future[Judged]] = {}
        self.metrics: collections.Counter[str] = collections.Counter()
        self.latency_ms: collections.deque[float] = collections.deque(maxlen=2048)

    async def __aenter__(self) -> "Engine":
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
        self.zygote = Zygote(plan)
        await self.zygote.start()
        raw = await self._run({"kind": "capabilities"}, self.config.defaults)
        judged = self._decode(raw)
        if judged is None or judged.status != "ok":
            raise sandbox.SandboxError(f"the sandbox could not run torch: {raw.fatal or raw.stderr[-500:]!r}")
        self.caps = judged.extra.get("caps", self.caps)

    async def close(self) -> None:
        if self.zygote is not None:
            await self.zygote.stop()
        if self.cgroups is not None:
            self.cgroups.close()

    async def _ensure_zygote(self) -> Zygote:
        async with self.restart_lock:
            if self.zygote is None or not self.zygote.alive():
                self.metrics["zygote_restarts"] += 1
                log.warning("warm worker gone; restarting it")
                if self.zygote is not None:
                    await self.zygote.stop()
                self.zygote = Zygote(self.plan)
                await self.zygote.start()
            return self.zygote

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
            "limits": {"defaults": self.config.defaults.as_dict(), "maxima": self.config.maxima.as_dict()},
        }

    # ------------------------------------------------------------------ one sandboxed process
    async def _run(self, payload: dict[str, Any], limits: Limits) -> RawRun:
        queued = time.monotonic()
        async with self.slots:
            self.busy += 1
            try:
                raw = await self._run_unlocked(payload, limits)
                raw.queue_ms = (time.monotonic() - queued) * 1000 - raw.wall_ms
                return raw
            finally:
                self.busy -= 1

    async def _run_unlocked(self, payload: dict[str, Any], limits: Limits) -> RawRun:
        if self.config.cold_start and payload.get("kind") != "capabilities":
            # Benchmark baseline: a fresh jailed interpreter (and `import torch`) per process.
            cold = Zygote(self.plan)
            await cold.start()
            try:
                return await self._run_in(cold, payload, limits)
            finally:
                await cold.stop()
        return await self._run_in(await self._ensure_zygote(), payload, limits)

    async def _run_in(self, zygote: Zygote, payload: dict[str, Any], limits: Limits) -> RawRun:
        payload = dict(payload, limits=limits.as_dict(), threads=self.config.threads_per_job,
                       gpu_memory_fraction=self.config.gpu_memory_fraction,
                       max_observation_bytes=self.config.max_observation_mb << 20,
                       tmp_is_scratch=self.plan.tmp_is_scratch if self.plan else False)
        raw = RawRun(cpu_limit=float(limits.cpu_s), wall_limit=float(limits.wall_s))
        pipes = [os.pipe() for _ in range(4)]  # ctl, result, stdout, stderr
        for r, _w in pipes:
            os.set_blocking(r, False)
        go_r, go_w = os.pipe()
        pay_r, pay_w = os.pipe()
        write_ends = [w for _r, w in pipes] + [go_r, pay_r]
        read_ends = [r for r, _w in pipes]
        data = json.dumps(payload).encode()
        started = time.monotonic()
        try:
            await zygote.submit(len(data), write_ends)
        except OSError as e:
            for fd in write_ends + read_ends + [go_w, pay_w]:
                os.close(fd)
            raw.fatal = f"could not reach the warm worker: {e}"
            if zygote.proc is not None and zygote.proc.returncode is None:
                zygote.proc.kill()
            return raw
        for fd in write_ends:
            os.close(fd)
        feed = asyncio.ensure_future(_feed_pipe(pay_w, data))
        try:
            group = self.cgroups.create(int(limits.memory_mb) << 20, int(limits.processes)) if self.cgroups else None
            await Supervisor(raw, read_ends, go_w, group, limits, self.config.max_observation_mb << 20).run()
        finally:
            feed.cancel()  # a no-op once it is written; else it closes the pipe
            await asyncio.gather(feed, return_exceptions=True)
        raw.wall_ms = (time.monotonic() - started) * 1000
        return raw

    # ------------------------------------------------------------------ decoding and judging
    def _decode(self, raw: RawRun) -> Judged | None:
        if raw.frame is None:
            return None
        try:
            header, blobs = split_frame(raw.frame)
            dec = Decoder(header, blobs)
            status = header.get("status")
            if status not in ("ok", "invalid", "error", "harness"):
                raise WireError("bad status")
            cases = []
            for c in header.get("cases", []):
                if not isinstance(c, dict):
                    raise WireError("bad case")
                err = c.get("error")
                cases.append({
                    "name": str(c.get("name", ""))[:100],
                    "example": bool(c.get("example", False)),
                    "obs": dec.decode(c["obs"]) if c.get("obs") is not None else None,
                    "error": _clean_error(err) if err is not None else None,
                })
            tampered = [str(t)[:100] for t in header.get("tampered", [])][:20]
            error = _clean_error(header.get("error")) if header.get("error") else None
            extra = {"caps": header["caps"]} if isinstance(header.get("caps"), dict) else {}
            return Judged(status=status, error=error, cases=cases, tampered=tampered, extra=extra)
        except (WireError, KeyError, TypeError, ValueError, ArithmeticError, RuntimeError):
            # RuntimeError: a header nested past the recursion limit, a tensor shape torch rejects
            raise WireError("the result channel was corrupted") from None

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        """Grade one job; always returns a result dict (raises JobError only for malformed jobs)."""
        received = time.monotonic()
        kind = validate_job(job)
        limits = self.config.defaults.clamp(job.get("limits"), self.config.maxima)
        if job.get("requires", "cpu") == "cuda" and not self.caps.get("cuda"):
            result = _result("internal", "no CUDA device on this runner")
        elif kind == "output":
            result = await self._grade_output(job, limits)
        else:
            result = await self._grade_code(job, limits)
        result["job_id"] = str(job.get("job_id", ""))[:200]
        total = (time.monotonic() - received) * 1000
        result["timings"] = dict(result.get("timings", {}), total_ms=round(total, 1))
        result["runner"] = {"version": __version__, "torch": self.caps.get("torch"),
                            "cuda": (self.caps.get("cuda") or {}).get("name"),
                            "sandbox": "+".join(self.features)}
        self.metrics[f"verdict_{result['verdict']}"] += 1
        self.metrics["jobs"] += 1
        self.latency_ms.append(total)
        return result

    async def _grade_output(self, job: dict[str, Any], limits: Limits) -> dict[str, Any]:
        raw = await self._run({"kind": "output", "role": "snippet", "code": job["snippet"],
                               "seed": int(job.get("seed", 0)), "requires": job.get("requires", "cpu")},
                              limits)
        try:
            judged = self._decode(raw)
        except WireError as e:
            return _result("internal", str(e))
        verdict, message, error = self._process_verdict(raw, judged, trusted=True)
        result = _result(verdict or "passed", message or "ran cleanly")
        result["error"] = error or (judged.error if judged else None)
        if judged and judged.status in ("invalid", "error") and not verdict:
            result["verdict"] = judged.status
            result["message"] = (judged.error or {}).get("message", "")
        result["stdout"] = raw.stdout.decode("utf-8", "replace")
        result["stderr"] = _display(raw.stderr)
        result["output_truncated"] = raw.output_bytes > len(raw.stdout) + len(raw.stderr)
        return result

    async def _reference(self, job: dict[str, Any], limits: Limits) -> tuple[Judged | None, str]:
        """Reference observations, cached by the hash of the trusted parts of the job."""
        key = hashlib.sha256(json.dumps(
            [job["setup"], job["reference"], job.get("probe", ""), job["entrypoint"],
             int(job.get("seed", 0)), job.get("requires", "cpu")]).encode()).hexdigest()
        if key in self.ref_cache:
            self.ref_cache.move_to_end(key)
            self.metrics["reference_cache_hits"] += 1
            return self.ref_cache[key], ""
        if key in self.ref_inflight:
            return await asyncio.shield(self.ref_inflight[key]), ""
        fut: asyncio.Future[Judged] = asyncio.get_running_loop().create_future()
        self.ref_inflight[key] = fut
        try:
            raw = await self._run(_code_payload(job, "reference", job["reference"]), limits)
            try:
                judged = self._decode(raw)
            except WireError as e:
                judged = None
                problem = str(e)
            else:
                verdict, message, _ = self._process_verdict(raw, judged, trusted=True)
                problem = message if verdict else ""
                if judged is None:
                    problem = problem or "the reference produced no result"
                elif judged.status != "ok":
                    err = judged.error or {}
                    problem = f"{judged.status}: {err.get('type', '')}: {err.get('message', '')} {err.get('traceback', '')}"
                else:
                    bad = [c for c in judged.cases if c["error"]]
                    if bad:
                        err = bad[0]["error"]
                        problem = f"case {bad[0]['name']!r} raised {err.get('type')}: {err.get('message')}"
                    elif not judged.cases:
                        problem = "make_cases() returned no cases"
            if problem:
                fut.set_result(None)  # type: ignore[arg-type]
                return None, problem
            assert judged is not None
            self.ref_cache[key] = judged
            while len(self.ref_cache) > self.config.reference_cache:
                self.ref_cache.popitem(last=False)
            fut.set_result(judged)
            return judged, ""
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # mark retrieved
            raise
        finally:
            self.ref_inflight.pop(key, None)

    async def _grade_code(self, job: dict[str, Any], limits: Limits) -> dict[str, Any]:
        (ref, problem), raw = await asyncio.gather(
            self._reference(job, limits),
            self._run(_code_payload(job, "submission", job["submission"]), limits))
        if ref is None:
            return _result("internal", f"the item's reference solution failed: {problem or 'no result'}")
        tol = job.get("tolerances") or {}
        rtol, atol = float(tol.get("rtol", 1e-5)), float(tol.get("atol", 1e-8))
        try:
            sub = self._decode(raw)
        except WireError:
            res = _result("error", "your code interfered with the grading harness")
            _attach_output(res, raw)
            return res
        verdict, message, error = self._process_verdict(raw, sub, trusted=False)
        if verdict in ("timeout", "memory") and raw.running_case is not None and raw.running_case < len(ref.cases):
            # killed mid-way: the player learns which case was too big or too slow
            k = raw.running_case
            message += f"; it was running case {k + 1} of {len(ref.cases)} ({ref.cases[k]['name']})"
        cases: list[dict[str, Any]] = []
        passed = 0
        first_error: dict[str, Any] | None = None
        memory_hit = output_hit = False
        if sub is not None and sub.status == "ok" and not verdict:
            if len(sub.cases) != len(ref.cases):
                verdict, message = "error", "your code interfered with the grading harness"
            else:
                for i, (rc, sc) in enumerate(zip(ref.cases, sub.cases)):
                    if sc["error"] is not None:
                        err = sc["error"]
                        if _is_memory_error(err):
                            memory_hit = True
                        if err["type"] == "OutputLimit":
                            output_hit = True
                        first_error = first_error or err
                        msg = (err["message"] if err.get("in_probe") or err["type"] in ("OutputLimit", "BadResult")
                               else f"raised {err['type']}: {err['message']}")
                        ok = False
                    else:
                        msg = compare(rc["obs"], sc["obs"], rtol=rtol, atol=atol, path="")
                        msg = _tidy_path(msg)
                        ok = not msg
                    passed += ok
                    cases.append({"index": i, "name": rc["name"], "example": rc["example"],
                                  "passed": ok, "ran": True, "message": msg[:300]})
                if sub.tampered:
                    verdict = "failed"
                    message = ("your code modified torch or builtins (" + ", ".join(sub.tampered[:3])
                               + "); grading needs them intact")
                    passed = 0
                    for c in cases:
                        c["passed"] = False
                elif memory_hit:
                    verdict, message = "memory", "memory limit exceeded"
                elif output_hit:
                    verdict, message = "output_limit", "the result is too large to check"
                elif first_error is not None:
                    verdict = "error"
                    message = f"{first_error['type']}: {first_error['message']}"
                    error = first_error
                elif passed < len(cases):
                    verdict, message = "failed", f"{passed} of {len(cases)} cases passed"
                else:
                    verdict, message = "passed", f"all {len(cases)} cases passed"
        elif sub is not None and not verdict:
            if sub.status == "harness":
                verdict, message = "error", "the grading harness failed while running your code"
            else:
                verdict = sub.status
                error = sub.error
                message = (sub.error or {}).get("message", "")
                if verdict == "error" and error and _is_memory_error(error):
                    verdict, message = "memory", "memory limit exceeded"
        if not cases:
            cases = [{"index": i, "name": rc["name"], "example": rc["example"], "passed": False,
                      "ran": False, "message": "not run"} for i, rc in enumerate(ref.cases)]
        res = _result(verdict or "error", message)
        res["error"] = error
        res["cases"] = cases
        res["passed_cases"] = passed
        res["total_cases"] = len(ref.cases)
        res["score"] = round(passed / len(ref.cases), 4) if ref.cases else 0.0
        _attach_output(res, raw)
        res["timings"] = {"queue_ms": round(raw.queue_ms, 1), "run_ms": round(raw.wall_ms, 1)}
        return res

    def _process_verdict(self, raw: RawRun, judged: Judged | None, *, trusted: bool) -> tuple[str, str, dict | None]:
        """Verdicts decided from the outside: limits, crashes, early exits."""
        if raw.fatal:
            return "internal", raw.fatal, None
        if raw.timed_out:
            # the cases run one after another in one process: the limit is for all of them
            return "timeout", f"time limit exceeded: all cases together ran past {raw.wall_limit:g} s", None
        sig = raw.signal
        if raw.cpu_exceeded or sig == signal.SIGXCPU or (sig == signal.SIGKILL and raw.cpu_s >= 0.95 * raw.cpu_limit):
            return "timeout", f"CPU time limit exceeded: all cases together used over {raw.cpu_limit:g} s of CPU", None
        if raw.memory_exceeded:
            return "memory", "memory limit exceeded", None
        if raw.output_exceeded:
            return "output_limit", "too much output (stdout/stderr)", None
        if raw.result_exceeded:
            return "output_limit", "the result is too large", None
        if sig == signal.SIGXFSZ:
            return "output_limit", "file size limit exceeded", None
        if judged is None:
            if sig is not None:
                name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
                what = " (segmentation fault)" if sig == signal.SIGSEGV else ""
                return "error", f"your code crashed: killed by {name}{what}", {
                    "type": name, "message": f"process killed by {name}{what}", "traceback": ""}
            code = os.waitstatus_to_exitcode(raw.status) if raw.status is not None else None
            return "error", f"your code exited (status {code}) before the cases were checked", {
                "type": "EarlyExit", "message": f"exited with status {code} before the cases were checked",
                "traceback": ""}
        return "", "", None

    def metrics_text(self) -> str:
        lines = ["# TYPE runner_jobs_total counter", f"runner_jobs_total {self.metrics['jobs']}"]
        lines.append("# TYPE runner_verdicts_total counter")
        for k, v in sorted(self.metrics.items()):
            if k.startswith("verdict_"):
                lines.append(f'runner_verdicts_total{{verdict="{k[8:]}"}} {v}')
        for name in ("reference_cache_hits", "zygote_restarts", "rejected_busy", "rejected_auth"):
            lines.append(f"# TYPE runner_{name}_total counter")
            lines.append(f"runner_{name}_total {self.metrics[name]}")
        lines += ["# TYPE runner_workers gauge", f"runner_workers {self.config.workers}",
                  "# TYPE runner_busy_workers gauge", f"runner_busy_workers {self.busy}"]
        if self.latency_ms:
            data = sorted(self.latency_ms)
            for q in (0.5, 0.95, 0.99):
                lines.append(f'runner_latency_ms{{quantile="{q}"}} {data[min(len(data) - 1, int(q * len(data)))]:.1f}')
        return "\n".join(lines) + "\n"


class Supervisor:
    """Watches one sandboxed process from the outside: pid, time, output, memory."""

    def __init__(self, raw: RawRun, fds: list[int], go_fd: int, group: JobGroup | None, limits: Limits,
                 max_result: int) -> None:
        self.raw, self.limits = raw, limits
        self.go_fd: int | None = go_fd
        self.group = group
        self.ctl, self.res, self.out, self.err = fds
        self.max_result = max_result + (1 << 20)
        self.max_output = int(limits.output_kb) << 10
        self.pidfd: int | None = None
        self.pid: int | None = None
        self.done = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.bufs: dict[int, bytearray] = {self.res: bytearray(), self.out: bytearray(), self.err: bytearray()}
        self.ctl_buf = bytearray()
        self.open_fds = {self.ctl, self.res, self.out, self.err}

    def kill(self) -> None:
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
                self.done.set()
            return
        if fd == self.ctl:
            self.ctl_buf += chunk
            while b"\n" in self.ctl_buf:
                line, _, rest = bytes(self.ctl_buf).partition(b"\n")
                self.ctl_buf = bytearray(rest)
                self._on_ctl(json.loads(line))
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

    def _on_ctl(self, msg: dict[str, Any]) -> None:
        if "pid" in msg:
            self.pid = int(msg["pid"])
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except OSError:
                self.pidfd = None
            try:
                if self.group is not None:
                    self.group.add(self.pid)
            except OSError as e:
                log.warning("could not move job %s into its cgroup: %s", self.pid, e)
            self._release_go(b"G")
        elif "status" in msg:
            self.raw.status = int(msg["status"])
            self.raw.cpu_s = float(msg.get("cpu_s", 0.0))
            self.done.set()
        elif "fatal" in msg:
            self.raw.fatal = f"sandbox setup failed: {msg['fatal']}"
            self.done.set()

    def _release_go(self, byte: bytes) -> None:
        if self.go_fd is not None:
            try:
                os.write(self.go_fd, byte)
            except OSError:
                pass
            os.close(self.go_fd)
            self.go_fd = None

    def _tree_usage(self) -> tuple[int, float]:
        """Resident memory (covers CUDA jobs, which have no RLIMIT_AS) and CPU seconds of the job's
        whole process tree. RLIMIT_CPU is per process: each child would get the full limit again."""
        if self.pid is None:
            return 0, 0.0
        total, ticks, stack, seen = 0, 0, [self.pid], set()
        page = os.sysconf("SC_PAGE_SIZE")
        while stack and len(seen) < 512:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * page
                with open(f"/proc/{pid}/stat") as f:  # utime, stime, and those of reaped children
                    ticks += sum(int(v) for v in f.read().rpartition(")")[2].split()[11:15])
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        stack.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                continue
        return total, ticks / os.sysconf("SC_CLK_TCK")

    async def run(self) -> None:
        for fd in list(self.open_fds):
            self.loop.add_reader(fd, self._on_data, fd)
        deadline = self.loop.time() + float(self.limits.wall_s)
        # Baseline RSS of a forked worker is shared with the zygote; count what the job adds.
        mem_limit = (int(self.limits.memory_mb) << 20)
        baseline: int | None = None
        try:
            while not self.done.is_set():
                remaining = deadline - self.loop.time()
                if remaining <= 0:
                    self.raw.timed_out = True
                    self.kill()
                    break
                try:
                    await asyncio.wait_for(self.done.wait(), timeout=min(0.1, remaining))
                except asyncio.TimeoutError:
                    pass
                if self.group is not None and self.group.hit_memory_limit():
                    self.raw.memory_exceeded = True  # the kernel killed one of the job's processes
                    self.kill()
                elif self.pid is not None and not self.done.is_set():
                    rss, cpu = self._tree_usage()
                    if cpu > self.raw.cpu_limit:
                        self.raw.cpu_exceeded = True
                        self.kill()
                    elif baseline is None:
                        baseline = rss
                    elif rss - baseline > mem_limit:
                        self.raw.memory_exceeded = True
                        self.kill()
            if self.raw.timed_out:
                try:
                    await asyncio.wait_for(self.done.wait(), timeout=5)
                except asyncio.TimeoutError:
                    self.raw.fatal = "the job could not be stopped"
            # The job's PID namespace is gone once PID 1 exits, so the pipes reach EOF promptly.
            end = self.loop.time() + 2
            while self.open_fds - {self.ctl} and self.loop.time() < end:
                await asyncio.sleep(0.005)
        finally:
            self._release_go(b"")
            for fd in list(self.open_fds):
                self._close(fd)
            if self.pidfd is not None:
                os.close(self.pidfd)
            if self.group is not None:
                if self.group.hit_memory_limit():
                    self.raw.memory_exceeded = True
                self.group.remove()
        raw = self.raw
        raw.running_case, raw.frame = split_progress(bytes(self.bufs[self.res]))
        raw.stdout = bytes(self.bufs[self.out])
        raw.stderr = bytes(self.bufs[self.err])


async def _feed_pipe(fd: int, data: bytes) -> None:
    """Write `data` into a pipe without blocking the loop, then close it."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    os.set_blocking(fd, False)
    try:
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
    except OSError:
        pass  # the supervisor died before reading it; the ctl channel says what happened
    finally:
        os.close(fd)


def _code_payload(job: dict[str, Any], role: str, code: str) -> dict[str, Any]:
    return {"kind": "code", "role": role, "code": code, "setup": job["setup"],
            "probe": job.get("probe") or "", "entrypoint": job["entrypoint"],
            "seed": int(job.get("seed", 0)), "requires": job.get("requires", "cpu")}


def _clean_error(err: Any) -> dict[str, Any]:
    if not isinstance(err, dict):
        return {"type": "Error", "message": "", "traceback": ""}
    out = {"type": str(err.get("type", "Error"))[:100], "message": str(err.get("message", ""))[:500],
           "traceback": str(err.get("traceback", ""))[:2000]}
    if err.get("in_probe"):
        out["in_probe"] = True
    return out


def _is_memory_error(err: dict[str, Any]) -> bool:
    return err.get("type") in MEMORY_ERRORS or any(m in err.get("message", "") for m in MEMORY_MARKERS)


def _tidy_path(msg: str) -> str:
    return msg.lstrip(": ")


def _display(data: bytes) -> str:
    text = data[:DISPLAY_OUTPUT_BYTES].decode("utf-8", "replace")
    if len(data) > DISPLAY_OUTPUT_BYTES:
        text += f"\n… [output cut: {len(data)} bytes]"
    return text


def _attach_output(res: dict[str, Any], raw: RawRun) -> None:
    res["stdout"] = _display(raw.stdout)
    res["stderr"] = _display(raw.stderr)
    res["output_truncated"] = (len(raw.stdout) > DISPLAY_OUTPUT_BYTES or len(raw.stderr) > DISPLAY_OUTPUT_BYTES
                               or raw.output_bytes > len(raw.stdout) + len(raw.stderr))


def _result(verdict: str, message: str) -> dict[str, Any]:
    return {"verdict": verdict, "message": message, "passed_cases": 0, "total_cases": 0, "score": 0.0,
            "cases": [], "error": None, "stdout": "", "stderr": "", "output_truncated": False}


MAX_SOURCE = 256 * 1024


def validate_job(job: Any) -> str:
    """Check the job's shape; the runner answers 400 with this message, never a verdict."""
    if not isinstance(job, dict):
        raise JobError("the job must be a JSON object")
    kind = job.get("kind", "code")
    if kind not in ("code", "output"):
        raise JobError("kind must be 'code' or 'output'")
    required = ("snippet",) if kind == "output" else ("setup", "reference", "entrypoint", "submission")
    for key in required:
        if not isinstance(job.get(key), str):
            raise JobError(f"{key} must be a string")
        if len(job[key]) > MAX_SOURCE:
            raise JobError(f"{key} is longer than {MAX_SOURCE // 1024} KiB")
    if "probe" in job and not isinstance(job["probe"], (str, type(None))):
        raise JobError("probe must be a string")
    if kind == "code" and not job["entrypoint"].isidentifier():
        raise JobError("entrypoint must be a Python identifier")
    if job.get("requires", "cpu") not in ("cpu", "cuda"):
        raise JobError("requires must be 'cpu' or 'cuda'")
    if not isinstance(job.get("limits", {}), dict):
        raise JobError("limits must be an object")
    if not isinstance(job.get("tolerances", {}) or {}, dict):
        raise JobError("tolerances must be an object")
    if not isinstance(job.get("seed", 0), int):
        raise JobError("seed must be an integer")
    return kind
