"""The verdict ladder: what came out of a sandboxed process, as seen from the outside, to a Result.

Pure and sandbox-free, so every rung can be tested with hand-made `RawRun`s and frames. It
never believes the sandbox: a frame is decoded strictly (`wire.Decoder`), case by case against
the reference's case count, and anything missing, extra or undecodable is the player's
`error` ("interfered with the grading harness"), never a pass and never a free retry. Only what
the runner itself caused (its worker died, a reference that fails) is `internal`.
"""
from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from .compare import compare
from .protocol import CaseResult, ErrorInfo, Result, Verdict, clean_text
from .supervisor import RawRun
from .wire import Decoder, OpaqueObject, TensorMeta, WireError, split_frame

log = logging.getLogger("runner")

DISPLAY_OUTPUT_BYTES = 4096
MEMORY_ERRORS = ("MemoryError", "OutOfMemoryError")
MEMORY_MARKERS = ("can't allocate memory", "DefaultCPUAllocator", "out of memory", "Cannot allocate memory")
INTERFERED = "your code interfered with the grading harness"
STATUSES = ("ok", "invalid", "error", "harness")
CASE_KEYS = frozenset({"name", "example", "obs", "error"})


@dataclass
class Judged:
    """A decoded frame: the harness's status, per-case observations or errors, tampering seen."""

    status: str
    error: ErrorInfo | None
    cases: list[dict[str, Any]] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- text
def clean_error(err: Any) -> ErrorInfo:
    if not isinstance(err, dict):
        return ErrorInfo("Error")
    return ErrorInfo(type=clean_text(err.get("type", "Error"), 100) or "Error",
                     message=clean_text(err.get("message", ""), 500),
                     traceback=clean_text(err.get("traceback", ""), 2000),
                     in_probe=err.get("in_probe") is True)


def display(data: bytes) -> str:
    text = clean_text(data[:DISPLAY_OUTPUT_BYTES].decode("utf-8", "replace"), DISPLAY_OUTPUT_BYTES)
    if len(data) > DISPLAY_OUTPUT_BYTES:
        text += f"\n… [output cut: {len(data)} bytes]"
    return text


def attach_output(res: Result, raw: RawRun) -> Result:
    res.stdout = display(raw.stdout)
    res.stderr = display(raw.stderr)
    res.output_truncated = (len(raw.stdout) > DISPLAY_OUTPUT_BYTES or len(raw.stderr) > DISPLAY_OUTPUT_BYTES
                            or raw.output_bytes > len(raw.stdout) + len(raw.stderr))
    return res


# ------------------------------------------------------------------------------------ decoding
def decode_frame(frame: bytes | None, *, expected_cases: int | None = None) -> Judged | None:
    """Decode a result frame strictly; None when there is none. `expected_cases` (the
    reference's count) is checked before any observation is decoded."""
    if frame is None:
        return None
    try:
        header, blobs = split_frame(frame)
        if header.keys() - {"status", "error", "cases", "tampered", "caps", "blobs"}:
            raise WireError("unexpected header fields")
        status = header.get("status")
        if status not in STATUSES:
            raise WireError("bad status")
        raw_cases = header.get("cases")
        tampered = header.get("tampered")
        if not isinstance(raw_cases, list) or not isinstance(tampered, list):
            raise WireError("bad header")
        if expected_cases is not None and status != "harness" and len(raw_cases) != expected_cases:
            raise WireError("wrong number of cases")
        dec = Decoder(header, blobs)
        cases = []
        for c in raw_cases:
            if not isinstance(c, dict) or c.keys() != CASE_KEYS:
                raise WireError("bad case")
            obs, err = c["obs"], c["error"]
            if status == "ok" and (obs is None) == (err is None):
                raise WireError("a case needs exactly one of an observation and an error")
            cases.append({
                "name": clean_text(c["name"], 100) if isinstance(c["name"], str) else "",
                "example": c["example"] is True,
                "obs": dec.decode(obs) if obs is not None else None,
                "error": clean_error(err) if err is not None else None,
            })
        dec.finish()
        error = clean_error(header["error"]) if header.get("error") else None
        extra = {"caps": header["caps"]} if isinstance(header.get("caps"), dict) else {}
        return Judged(status=status, error=error, cases=cases,
                      tampered=[clean_text(t, 100) for t in tampered][:20], extra=extra)
    except (WireError, KeyError, TypeError, ValueError, ArithmeticError, RuntimeError, MemoryError):
        # RuntimeError: a header nested past the recursion limit, a tensor shape torch rejects
        raise WireError("the result channel was corrupted") from None


def evidence(obs: Any) -> str:
    """"values" when an observation holds something only a solver could produce (a tensor's
    values, a float), else "flags" (booleans, ints, strings: guessable)."""
    stack, seen = [obs], 0
    while stack and seen < 100_000:
        v = stack.pop()
        seen += 1
        if isinstance(v, TensorMeta):
            if v.data is not None and v.data.numel() > 0:
                return "values"
        elif isinstance(v, (float, complex)) and not isinstance(v, bool):
            return "values"
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return "flags"


# ------------------------------------------------------------------------------------ verdicts
def outside_verdict(raw: RawRun, judged: Judged | None) -> tuple[Verdict | None, str, ErrorInfo | None]:
    """Verdicts decided from the outside: runner faults, limits, crashes, early exits."""
    if raw.fatal:
        return Verdict.INTERNAL, raw.fatal, None
    if raw.timed_out:
        # the cases run one after another in one process: the limit is for all of them
        return Verdict.TIMEOUT, f"time limit exceeded: all cases together ran past {raw.wall_limit:g} s", None
    sig = raw.signal
    if raw.cpu_exceeded or sig == signal.SIGXCPU or (sig == signal.SIGKILL and raw.cpu_s >= 0.95 * raw.cpu_limit):
        return (Verdict.TIMEOUT,
                f"CPU time limit exceeded: all cases together used over {raw.cpu_limit:g} s of CPU", None)
    if raw.memory_exceeded:
        return Verdict.MEMORY, "memory limit exceeded", None
    if raw.output_exceeded:
        return Verdict.OUTPUT_LIMIT, "too much output (stdout/stderr)", None
    if raw.result_exceeded:
        return Verdict.OUTPUT_LIMIT, "the result is too large", None
    if sig == signal.SIGXFSZ:
        return Verdict.OUTPUT_LIMIT, "file size limit exceeded", None
    if judged is None:
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            what = " (segmentation fault)" if sig == signal.SIGSEGV else ""
            return Verdict.ERROR, f"your code crashed: killed by {name}{what}", ErrorInfo(
                name, f"process killed by {name}{what}")
        code = os.waitstatus_to_exitcode(raw.status) if raw.status is not None else None
        return Verdict.ERROR, f"your code exited (status {code}) before the cases were checked", ErrorInfo(
            "EarlyExit", f"exited with status {code} before the cases were checked")
    return None, "", None


def reference_problem(raw: RawRun, judged: Judged | None) -> str:
    """Why a reference run cannot serve as the expected observations ("" when it can). For the
    runner's log and the bank's checker: never shown in a channel (see `reference_failed`)."""
    verdict, message, _ = outside_verdict(raw, judged)
    if verdict is not None:
        return message
    if judged is None:
        return "the reference produced no result"
    if judged.status != "ok":
        err = judged.error or ErrorInfo("Error")
        return f"{judged.status}: {err.type}: {err.message} {err.traceback}"
    bad = [c for c in judged.cases if c["error"]]
    if bad:
        err = bad[0]["error"]
        return f"case {bad[0]['name']!r} raised {err.type}: {err.message}"
    if not judged.cases:
        return "make_cases() returned no cases"
    opaque = [c["name"] for c in judged.cases if _has_opaque(c["obs"])]
    if opaque:
        return f"case {opaque[0]!r}: the probe returns an object the wire cannot carry (it would never match)"
    return ""


def _has_opaque(obs: Any) -> bool:
    stack = [obs]
    while stack:
        v = stack.pop()
        if isinstance(v, OpaqueObject):
            return True
        if isinstance(v, TensorMeta) and v.data is None and v.device != "meta":
            return True
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def reference_failed(problem: str) -> Result:
    """The item is broken, not the player: `internal`. Its message, which the bot may show in a
    channel, says only that; the detail (it can quote the reference's code) is in `error`, for
    the runner's log and the bank's checker."""
    log.warning("reference failed: %s", problem[:2000])
    res = Result(Verdict.INTERNAL, "the item's reference solution failed on this runner")
    res.error = ErrorInfo("ReferenceFailed", clean_text(problem, 2000))
    return res


def _is_memory_error(err: ErrorInfo) -> bool:
    return err.type in MEMORY_ERRORS or any(m in err.message for m in MEMORY_MARKERS)


def _not_run(ref: Judged) -> list[CaseResult]:
    return [CaseResult(i, rc["name"], rc["example"], passed=False, ran=False, message="not run",
                       evidence=rc.get("evidence")) for i, rc in enumerate(ref.cases)]


def judge_output(raw: RawRun) -> Result:
    """An `output` job: the snippet's stdout, and whether it ran cleanly."""
    try:
        judged = decode_frame(raw.frame, expected_cases=0)
    except WireError as e:
        return Result(Verdict.INTERNAL, str(e))
    verdict, message, error = outside_verdict(raw, judged)
    result = Result(verdict or Verdict.PASSED, message or "ran cleanly")
    result.error = error or (judged.error if judged else None)
    if judged and judged.status in ("invalid", "error") and verdict is None:
        result.verdict = Verdict(judged.status)
        result.message = judged.error.message if judged.error else ""
    elif judged and judged.status == "harness" and verdict is None:
        result.verdict, result.message = Verdict.INTERNAL, "the harness failed while running the snippet"
    result.stdout = clean_text(raw.stdout.decode("utf-8", "replace"), len(raw.stdout) + 1)
    result.stderr = display(raw.stderr)
    result.output_truncated = raw.output_bytes > len(raw.stdout) + len(raw.stderr)
    return result


def decode_submission(raw: RawRun, n: int) -> tuple[Judged | None, bool]:
    """The submission's frame, and whether it was there but would not decode (corrupted)."""
    try:
        if raw.marks > n + 1:
            raise WireError("more progress marks than cases")
        return decode_frame(raw.frame, expected_cases=n), False
    except WireError:
        return None, True


def behaves_like(known: Judged | None, sub: Judged | None, *, rtol: float, atol: float) -> bool:
    """Whether a submission did what a known wrong answer does on every case: the same
    observations (within tolerance), or the same error (type and message). Anything either
    side lacks (no frame, a harness fault, tampering, another number of cases) is no match,
    so the worst a confusion can do is withhold a hint."""
    if known is None or sub is None or known.status != "ok" or sub.status != "ok" or sub.tampered:
        return False
    if not known.cases or len(known.cases) != len(sub.cases):
        return False
    for kc, sc in zip(known.cases, sub.cases, strict=True):
        ke, se = kc["error"], sc["error"]
        if ke is not None or se is not None:
            if ke is None or se is None or (ke.type, ke.message, ke.in_probe) != (se.type, se.message, se.in_probe):
                return False
        elif compare(kc["obs"], sc["obs"], rtol=rtol, atol=atol, path=""):
            return False
    return True


def judge_submission(ref: Judged, raw: RawRun, *, rtol: float, atol: float) -> Result:
    """Decode the submission's frame and climb the ladder. CPU-bound: the engine runs it off its
    event loop, and every step is bounded by the frame's size."""
    n = len(ref.cases)
    sub, corrupted = decode_submission(raw, n)
    verdict, message, error = outside_verdict(raw, sub)
    # A limit (or the runner's own fault) explains a cut frame: that is the verdict. Otherwise a
    # frame that is there but does not decode was written or altered by the player's code.
    if corrupted and verdict in (None, Verdict.ERROR):
        res = Result(Verdict.ERROR, INTERFERED)
        res.cases = _not_run(ref)
        res.total_cases = n
        return attach_output(res, raw)
    if verdict in (Verdict.TIMEOUT, Verdict.MEMORY) and raw.running_case is not None and raw.running_case < n:
        # killed mid-way: the player learns which case was too big or too slow
        k = raw.running_case
        message += f"; it was running case {k + 1} of {n} ({ref.cases[k]['name']})"
    cases: list[CaseResult] = []
    passed = 0
    if sub is not None and sub.status == "ok" and verdict is None:
        first_error: ErrorInfo | None = None
        memory_hit = output_hit = False
        for i, (rc, sc) in enumerate(zip(ref.cases, sub.cases, strict=True)):
            err = sc["error"]
            if err is not None:
                memory_hit = memory_hit or _is_memory_error(err)
                output_hit = output_hit or err.type == "OutputLimit"
                first_error = first_error or err
                msg = (err.message if err.in_probe or err.type in ("OutputLimit", "BadResult")
                       else f"raised {err.type}: {err.message}")
                ok = False
            else:
                msg = compare(rc["obs"], sc["obs"], rtol=rtol, atol=atol, path="").lstrip(": ")
                ok = not msg
            passed += ok
            cases.append(CaseResult(i, rc["name"], rc["example"], passed=ok, ran=True,
                                    message=clean_text(msg, 300), evidence=rc.get("evidence")))
        if sub.tampered:
            verdict = Verdict.FAILED
            message = ("your code modified torch, builtins or the grading harness ("
                       + ", ".join(sub.tampered[:3]) + "); grading needs them intact")
            passed = 0
            for c in cases:
                c.passed = False
        elif memory_hit:
            verdict, message = Verdict.MEMORY, "memory limit exceeded"
        elif output_hit:
            verdict, message = Verdict.OUTPUT_LIMIT, "the result is too large to check"
        elif first_error is not None:
            verdict, message, error = Verdict.ERROR, f"{first_error.type}: {first_error.message}", first_error
        elif passed < len(cases):
            verdict, message = Verdict.FAILED, f"{passed} of {len(cases)} cases passed"
        else:
            verdict, message = Verdict.PASSED, f"all {len(cases)} cases passed"
    elif sub is not None and verdict is None:
        if sub.status == "harness":
            verdict, message = Verdict.ERROR, "the grading harness failed while running your code"
        else:
            verdict, error = Verdict(sub.status), sub.error
            message = sub.error.message if sub.error else ""
            if verdict is Verdict.ERROR and error and _is_memory_error(error):
                verdict, message = Verdict.MEMORY, "memory limit exceeded"
    assert verdict is not None
    res = Result(verdict, message, error=error)
    res.cases = cases or _not_run(ref)
    res.passed_cases = passed
    res.total_cases = n
    if verdict is Verdict.INTERNAL:
        res.passed_cases, res.cases = 0, _not_run(ref)
    return attach_output(res, raw)
