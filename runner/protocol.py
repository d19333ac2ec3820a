"""The runner's contract, shared by the bank (which builds jobs), the engine and the bot.

Torch-free and dependency-free: the bot imports it without torch. Jobs and results travel as
JSON (documented in runner/README.md); these types are what each side holds in between, so a
verdict, a case or a capability is spelled in one place. Parsing is strict where it decides a
grade: a result the bot cannot read is a runner fault (`ProtocolError`), never a verdict.
"""
from __future__ import annotations

import enum
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

MAX_SOURCE = 256 * 1024

JobKind = Literal["code", "output"]
Device = Literal["cpu", "cuda"]
DEVICES: tuple[str, ...] = ("cpu", "cuda")
# What a job may need beyond its device; a runner lists those it has on /v1/health.
#   onnx: onnx, onnxscript and onnxruntime importable in the sandbox (torch.onnx.export + a check)
#   inductor: torch.compile's default backend on CPU (a C++ compiler, exec allowed)
FEATURES: tuple[str, ...] = ("onnx", "inductor")
MAX_RANKS = 16
MAX_MISTAKES = 8  # known wrong answers a job may carry for recognition


def parse_requires(value: Any) -> tuple[Device, tuple[str, ...]]:
    """`requires` as a job or an item spells it: "cpu", "cuda", or a list like [cpu, onnx].
    Returns the device and the sorted features; raises ValueError with a plain sentence."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError("requires must be 'cpu', 'cuda' or a list of them and features")
    unknown = [n for n in names if n not in DEVICES and n not in FEATURES]
    if unknown:
        raise ValueError(f"requires: unknown {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(DEVICES + FEATURES)})")
    devices = [n for n in names if n in DEVICES]
    if len(set(devices)) > 1:
        raise ValueError("requires names both cpu and cuda; a job runs on one device")
    device: Device = "cuda" if "cuda" in devices else "cpu"
    return device, tuple(sorted({n for n in names if n in FEATURES}))


def capability_words(device: str, features: tuple[str, ...] | frozenset[str] = (), ranks: int = 1) -> frozenset[str]:
    """What a job needs, or a runner offers, as words compared by set inclusion: the device, the
    features and `ranks:N` (a runner offering N ranks offers every `ranks:k` up to N)."""
    return frozenset({device, *features} | ({f"ranks:{ranks}"} if ranks > 1 else set()))


def spell_requires(device: str, features: tuple[str, ...]) -> str | list[str]:
    """The inverse of parse_requires: a plain device string when there are no features."""
    return [device, *features] if features else device


def clean_text(value: Any, limit: int) -> str:
    """Text from the sandbox made safe to print, store and send: no lone surrogates (they crash
    UTF-8 encoders), no NUL or other control characters except newline and tab, cut to `limit`."""
    text = str(value)[: limit * 2]
    if not text.isprintable():
        text = "".join(c if c.isprintable() or c in "\n\t" else _replacement(c) for c in text)
    return text[:limit]


def _replacement(c: str) -> str:
    """Separators become a space; the zero-width joiner (emoji sequences) stays; every other
    non-printable character (controls, lone surrogates, bidi overrides) becomes U+FFFD."""
    category = unicodedata.category(c)
    if category in ("Zs", "Zl", "Zp"):
        return " "
    return c if c == "\u200d" else "\ufffd"


def _clean(value: Any) -> str:
    """Clean, never cut: on the bot's side each platform's renderer cuts for its own limits."""
    text = str(value)
    return clean_text(text, len(text))


class ProtocolError(ValueError):
    """A job or a result that does not follow the contract."""


class JobError(ProtocolError):
    """The job JSON itself is wrong (HTTP 400): a client bug, not a verdict."""


class Verdict(str, enum.Enum):
    """Judge-style verdicts, in order of precedence (the first that applies wins)."""

    INTERNAL = "internal"        # the runner's own fault: retried, never the player's
    UNSUPPORTED = "unsupported"  # this runner cannot run the job (no CUDA, ...): route elsewhere
    INVALID = "invalid"          # syntax error, entrypoint missing or not callable
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    ERROR = "error"              # the code raised, or its process died
    FAILED = "failed"            # ran, but some case's observations differ
    PASSED = "passed"

    @property
    def runner_fault(self) -> bool:
        """Not the player's doing: the bot retries (or routes) and never scores it."""
        return self in (Verdict.INTERNAL, Verdict.UNSUPPORTED)

    @property
    def partial(self) -> bool:
        """Verdicts after which some cases may still have passed (partial credit)."""
        return self in (Verdict.ERROR, Verdict.FAILED)


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
# What the player is judged on: every verdict except the runner's own faults.
PLAYER_VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict if not v.runner_fault)


@dataclass(frozen=True)
class Job:
    """One grading (kind `code`) or one snippet run (kind `output`)."""

    kind: JobKind = "code"
    setup: str = ""
    reference: str = ""
    submission: str = ""
    entrypoint: str = ""
    probe: str = ""
    snippet: str = ""
    job_id: str = ""
    requires: Device = "cpu"
    features: tuple[str, ...] = ()  # beyond the device: "onnx", "inductor"
    ranks: int = 1  # > 1: ranks mode, the entrypoint runs in every rank of a gloo group
    seed: int = 0
    tolerances: dict[str, float] = field(default_factory=dict)
    limits: dict[str, float] = field(default_factory=dict)
    # The job may execve (a compiler for torch.compile's inductor): off unless the item needs it,
    # since an exec'd process is dumpable again. Set by the item, never by the player.
    allow_exec: bool = False
    # An item's known wrong answers (trusted, from the bank): a failing submission that behaves
    # like one on every case is told which (`Result.mistake`). Feedback only, never a grade.
    mistakes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "job_id": self.job_id,
                               "requires": spell_requires(self.requires, self.features), "seed": self.seed}
        if self.ranks != 1:
            out["ranks"] = self.ranks
        if self.kind == "code":
            out.update(setup=self.setup, reference=self.reference, submission=self.submission,
                       entrypoint=self.entrypoint)
            if self.probe:
                out["probe"] = self.probe
            if self.tolerances:
                out["tolerances"] = dict(self.tolerances)
            if self.mistakes:
                out["mistakes"] = list(self.mistakes)
        else:
            out["snippet"] = self.snippet
        if self.limits:
            out["limits"] = dict(self.limits)
        if self.allow_exec:
            out["allow_exec"] = True
        return out

    @classmethod
    def from_json(cls, data: Any) -> Job:
        """Validate a job's shape; `JobError` says what is wrong (the runner answers 400)."""
        if not isinstance(data, dict):
            raise JobError("the job must be a JSON object")
        kind = data.get("kind", "code")
        if kind not in ("code", "output"):
            raise JobError("kind must be 'code' or 'output'")
        required = ("snippet",) if kind == "output" else ("setup", "reference", "entrypoint", "submission")
        for key in required:
            if not isinstance(data.get(key), str):
                raise JobError(f"{key} must be a string")
            if len(data[key]) > MAX_SOURCE:
                raise JobError(f"{key} is longer than {MAX_SOURCE // 1024} KiB")
        probe = data.get("probe")
        if probe is not None and not isinstance(probe, str):
            raise JobError("probe must be a string")
        if isinstance(probe, str) and len(probe) > MAX_SOURCE:
            raise JobError(f"probe is longer than {MAX_SOURCE // 1024} KiB")
        if kind == "code" and not data["entrypoint"].isidentifier():
            raise JobError("entrypoint must be a Python identifier")
        try:
            requires, features = parse_requires(data.get("requires", "cpu"))
        except ValueError as e:
            raise JobError(str(e)) from None
        ranks = data.get("ranks", 1)
        if type(ranks) is not int or not 1 <= ranks <= MAX_RANKS:
            raise JobError(f"ranks must be an integer from 1 to {MAX_RANKS}")
        if ranks > 1 and kind != "code":
            raise JobError("ranks applies to code jobs only")
        limits = data.get("limits", {})
        if not isinstance(limits, dict) or not all(
                isinstance(k, str) and type(v) in (int, float) for k, v in limits.items()):
            raise JobError("limits must be an object of numbers")
        tolerances = data.get("tolerances") or {}
        if not isinstance(tolerances, dict) or not all(
                k in ("rtol", "atol") and type(v) in (int, float) and v >= 0 for k, v in tolerances.items()):
            raise JobError("tolerances must be an object with numbers rtol and atol")
        seed = data.get("seed", 0)
        if type(seed) is not int or not 0 <= seed < 2**63:
            raise JobError("seed must be a non-negative integer")
        mistakes = data.get("mistakes") or []
        if (not isinstance(mistakes, list) or len(mistakes) > MAX_MISTAKES
                or not all(isinstance(m, str) and 0 < len(m) <= MAX_SOURCE for m in mistakes)):
            raise JobError(f"mistakes must be a list of at most {MAX_MISTAKES} sources")
        if mistakes and kind != "code":
            raise JobError("mistakes apply to code jobs only")
        job_id = data.get("job_id", "")
        allow_exec = data.get("allow_exec", False)
        if type(allow_exec) is not bool:
            raise JobError("allow_exec must be a boolean")
        return cls(kind=kind, setup=data.get("setup", "") if kind == "code" else "",
                   reference=data.get("reference", "") if kind == "code" else "",
                   submission=data.get("submission", "") if kind == "code" else "",
                   entrypoint=data.get("entrypoint", "") if kind == "code" else "",
                   probe=probe or "", snippet=data.get("snippet", "") if kind == "output" else "",
                   job_id=clean_text(job_id, 200), requires=requires, features=features, ranks=ranks, seed=seed,
                   tolerances={k: float(v) for k, v in tolerances.items()},
                   limits={k: float(v) for k, v in limits.items()}, allow_exec=allow_exec,
                   mistakes=tuple(mistakes))


@dataclass
class ErrorInfo:
    """What the player's code raised: type, message and a traceback of their own lines only."""

    type: str
    message: str = ""
    traceback: str = ""
    in_probe: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "message": self.message, "traceback": self.traceback}
        if self.in_probe:
            out["in_probe"] = True
        return out

    @classmethod
    def from_json(cls, data: Any) -> ErrorInfo | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ProtocolError("error must be an object")
        return cls(type=_clean(data.get("type", "Error")), message=_clean(data.get("message", "")),
                   traceback=_clean(data.get("traceback", "")), in_probe=bool(data.get("in_probe", False)))


Evidence = Literal["values", "flags"]


@dataclass
class CaseResult:
    index: int
    name: str
    example: bool
    passed: bool
    ran: bool
    message: str = ""
    # What the reference's observation for this case holds: "values" (a tensor's data, a float)
    # or only "flags" (booleans, ints, strings), which a forger could guess. For the bank's checker.
    evidence: Evidence | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "name": self.name, "example": self.example,
                               "passed": self.passed, "ran": self.ran, "message": self.message}
        if self.evidence is not None:
            out["evidence"] = self.evidence
        return out

    @classmethod
    def from_json(cls, data: Any) -> CaseResult:
        if not isinstance(data, dict) or type(data.get("passed")) is not bool:
            raise ProtocolError("a case must be an object with a boolean `passed`")
        evidence = data.get("evidence")
        return cls(index=int(data.get("index", 0)), name=_clean(data.get("name", "")),
                   example=bool(data.get("example", False)), passed=data["passed"],
                   ran=bool(data.get("ran", True)), message=_clean(data.get("message", "")),
                   evidence=evidence if evidence in ("values", "flags") else None)


@dataclass
class Result:
    """A verdict and what led to it. `score` = passed_cases / total_cases (partial credit)."""

    verdict: Verdict
    message: str = ""
    passed_cases: int = 0
    total_cases: int = 0
    cases: list[CaseResult] = field(default_factory=list)
    error: ErrorInfo | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    job_id: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    runner: dict[str, Any] = field(default_factory=dict)
    # index into the job's `mistakes` of the known wrong answer this failing submission behaves
    # like on every case; None when it is like none of them (or passed, or was not judged)
    mistake: int | None = None

    @property
    def score(self) -> float:
        return round(self.passed_cases / self.total_cases, 4) if self.total_cases else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "job_id": self.job_id, "message": self.message,
                "passed_cases": self.passed_cases, "total_cases": self.total_cases, "score": self.score,
                "cases": [c.to_json() for c in self.cases],
                "error": self.error.to_json() if self.error else None,
                "stdout": self.stdout, "stderr": self.stderr, "output_truncated": self.output_truncated,
                "timings": dict(self.timings), "runner": dict(self.runner),
                **({"mistake": self.mistake} if self.mistake is not None else {})}

    @classmethod
    def from_json(cls, data: Any) -> Result:
        """Strict where it matters: an unknown verdict, or counts that do not add up, is a
        `ProtocolError` (the bot retries it as a runner fault), never a grade."""
        if not isinstance(data, dict):
            raise ProtocolError("the result must be an object")
        try:
            verdict = Verdict(data.get("verdict"))
        except ValueError:
            raise ProtocolError(f"unknown verdict {str(data.get('verdict'))[:40]!r}") from None
        passed, total = data.get("passed_cases", 0), data.get("total_cases", 0)
        if type(passed) is not int or type(total) is not int or not 0 <= passed <= total:
            raise ProtocolError("passed_cases/total_cases do not add up")
        cases = data.get("cases") or []
        if not isinstance(cases, list):
            raise ProtocolError("cases must be a list")
        parsed = [CaseResult.from_json(c) for c in cases]
        if verdict is Verdict.PASSED and (passed != total or any(not c.passed for c in parsed)):
            raise ProtocolError("a passed result with failing cases")
        mistake = data.get("mistake")
        if mistake is not None and (type(mistake) is not int or not 0 <= mistake < MAX_MISTAKES
                                    or verdict not in (Verdict.FAILED, Verdict.ERROR)):
            raise ProtocolError("mistake must name a known wrong answer of a failing result")
        # Strings are cleaned again on this side: a runner of another version must not be able to
        # make a result unstorable (a lone surrogate) or unprintable.
        return cls(verdict=verdict, message=_clean(data.get("message") or ""), passed_cases=passed,
                   total_cases=total, cases=parsed, error=ErrorInfo.from_json(data.get("error")),
                   stdout=_clean(data.get("stdout") or ""), stderr=_clean(data.get("stderr") or ""),
                   output_truncated=bool(data.get("output_truncated", False)),
                   job_id=clean_text(data.get("job_id") or "", 200),
                   timings=dict(data.get("timings") or {}), runner=dict(data.get("runner") or {}),
                   mistake=mistake)


@dataclass(frozen=True)
class Capabilities:
    """What one runner can grade, from its `/v1/health`."""

    torch: str | None = None
    cuda: dict[str, Any] | None = None
    sandbox: tuple[str, ...] = ()
    ranks: int = 1  # the most ranks a job may ask for
    features: frozenset[str] = frozenset()  # of FEATURES

    @property
    def devices(self) -> frozenset[str]:
        return frozenset({"cpu", "cuda"} if self.cuda else {"cpu"})

    def can_run(self, requires: str, features: tuple[str, ...] = (), ranks: int = 1) -> bool:
        return requires in self.devices and set(features) <= self.features and ranks <= self.ranks

    def missing(self, requires: str, features: tuple[str, ...] = (), ranks: int = 1) -> str:
        """Why this runner cannot run such a job, as the `unsupported` message says it; "" if it can."""
        if requires not in self.devices:
            return "no CUDA device on this runner" if requires == "cuda" else f"no {requires} on this runner"
        lacking = [f for f in features if f not in self.features]
        if lacking:
            return f"this runner lacks {', '.join(lacking)}"
        if ranks > self.ranks:
            return f"this runner runs at most {self.ranks} rank{'s' if self.ranks != 1 else ''}; the job asks for {ranks}"
        return ""

    def offers(self) -> frozenset[str]:
        """The capability words this runner offers (see `capability_words`)."""
        words: set[str] = set(self.devices) | set(self.features)
        for n in range(2, self.ranks + 1):
            words |= capability_words("cpu", (), n)
        return frozenset(words)

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "features": sorted(self.features)}

    @classmethod
    def from_health(cls, health: dict[str, Any]) -> Capabilities:
        cuda = health.get("cuda")
        given = health.get("capabilities")
        extra: dict[str, Any] = given if isinstance(given, dict) else {}
        ranks = extra.get("ranks", 1)
        features = extra.get("features") or ()
        return cls(torch=health.get("torch"), cuda=cuda if isinstance(cuda, dict) and cuda else None,
                   sandbox=tuple(str(s) for s in health.get("sandbox") or ()),
                   ranks=ranks if type(ranks) is int and ranks >= 1 else 1,
                   features=frozenset(str(f) for f in features if f in FEATURES) if isinstance(features, list) else frozenset())
