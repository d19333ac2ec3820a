"""`python -m questionbank check`: the content gate, run in CI.

A schema that loads is not enough: an item whose reference fails, whose hidden cases let a
realistic mistake (or a lazy non-answer) through, or whose "what does this print?" snippet is
not deterministic would teach the team the wrong thing. So every code item is graded through
the real runner with its reference and its other `solutions` (all must pass), and with its
`wrong` answers, its starter and a set of generic dumb answers (all must fail); every output
item runs twice. No torch is imported here: the runner does the running.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from runner.protocol import Capabilities, capability_words  # torch-free

from .jobs import code_job, normalise_output, output_job
from .loader import Problem, defined_names, load_items
from .model import Item

Severity = Literal["error", "warning"]

DEFAULT_CONCURRENCY = 4


class GradingClient(Protocol):
    """What the checker needs from runner.client.RunnerClient (tests pass the fixture's client)."""

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Finding:
    """One thing `check` found; `str()` is a compiler-style line."""

    location: str  # file:line
    item_id: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        head = f"{self.location}: " if self.location else ""
        tag = "warning: " if self.severity == "warning" else ""
        who = f"{self.item_id}: " if self.item_id else ""
        return f"{head}{tag}{who}{self.message}"


@dataclass
class CheckReport:
    """Everything `check` found, and what it ran, for the report and the exit code."""

    findings: list[Finding] = field(default_factory=list)
    items: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    jobs: int = 0
    skipped: list[str] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)  # the runner's message -> items
    seconds: float = 0.0
    known_mistakes: int = 0  # wrong answers submitted as players would
    recognised: int = 0  # ... that the runner named as themselves

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def for_item(self, item_id: str) -> list[Finding]:
        return [f for f in self.findings if f.item_id == item_id]

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items()))
        parts = [f"{self.items} item{'s' if self.items != 1 else ''}" + (f" ({kinds})" if kinds else ""),
                 f"{self.jobs} runner job{'s' if self.jobs != 1 else ''}"]
        if self.skipped:
            why = "; ".join(f"{n} {reason}" for reason, n in sorted(self.skip_reasons.items()))
            parts.append(f"{len(self.skipped)} not checked here" + (f" ({why})" if why else ""))
        if self.known_mistakes:
            parts.append(f"{self.recognised} of {self.known_mistakes} wrong answers recognised")
        parts.append(f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''}")
        if self.warnings:
            parts.append(f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}")
        verdict = "ok" if self.ok else "FAILED"
        return f"check: {verdict}: " + ", ".join(parts) + f" in {self.seconds:.1f}s"

    def format(self) -> str:
        lines = [str(f) for f in sorted(self.findings, key=_finding_order)]
        lines.append(self.summary())
        return "\n".join(lines)


def _finding_order(f: Finding) -> tuple[str, int, str]:
    file, _, line = f.location.rpartition(":")
    return (file, int(line) if line.isdigit() else 0, f.message)


# --------------------------------------------------------------------------------------------
# Generic dumb answers


@dataclass(frozen=True)
class DumbAnswer:
    name: str  # "return None", shown in the report
    code: str


def _signature(item: Item) -> tuple[str, list[str]]:
    """The entrypoint's parameter list (source text) and the expressions of its inputs.

    Taken from the reference with ast so a dumb answer is callable exactly like the real one;
    a class or odd entrypoint falls back to `*args, **kwargs`.
    """
    try:
        tree = ast.parse(item.reference)
        node = defined_names(tree).get(item.entrypoint)
    except SyntaxError:
        node = None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "*args, **kwargs", ["*args", "*kwargs.values()"]
    args = node.args
    inputs = [a.arg for a in (*args.posonlyargs, *args.args)]
    if inputs and inputs[0] in ("self", "cls"):
        inputs = inputs[1:]
    if args.vararg:
        inputs.append(f"*{args.vararg.arg}")
    inputs.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg:
        inputs.append(f"*{args.kwarg.arg}.values()")
    return ast.unparse(args), inputs


def dumb_answers(item: Item) -> list[DumbAnswer]:
    """Lazy non-answers that no item's hidden cases should let through.

    Generated per entrypoint signature: return None, return the first input, zeros_like /
    ones_like of the first tensor input, raise NotImplementedError, and an empty body.
    """
    params, inputs = _signature(item)
    name = item.entrypoint

    def make(body: str) -> str:
        return f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body.splitlines())

    listed = "(" + "".join(f"{x}, " for x in inputs) + ")"
    answers = [DumbAnswer("return None", make("return None"))]
    if inputs:
        first = inputs[0]
        if first.startswith("*"):
            answers.append(DumbAnswer("return the first input", make(f"_inputs = {listed}\nreturn _inputs[0] if _inputs else None")))
        else:
            answers.append(DumbAnswer("return the first input", make(f"return {first}")))
    for fn in ("zeros_like", "ones_like"):
        answers.append(DumbAnswer(
            f"return torch.{fn} of the first tensor input",
            make(
                f"for _value in {listed}:\n"
                f"    if isinstance(_value, torch.Tensor):\n"
                f"        return torch.{fn}(_value)\n"
                "return None"
            ),
        ))
    answers.append(DumbAnswer("raise NotImplementedError", make("raise NotImplementedError")))
    answers.append(DumbAnswer("an empty body (pass)", make("pass")))
    return answers


# --------------------------------------------------------------------------------------------
# Running the checks


def _describe_result(result: dict[str, Any]) -> str:
    """A short account of a runner result: verdict, then the error, or the message and first failing cases."""
    verdict = str(result.get("verdict", "?"))
    bits = [verdict]
    message = str(result.get("message") or "")
    error = result.get("error")
    head = ""
    if isinstance(error, dict) and (error.get("type") or error.get("message")):
        head = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
    if message and message not in head:
        bits.append(message)
    if head:
        bits.append(head)
    else:
        failing = [c for c in result.get("cases") or [] if not c.get("passed")]
        for case in failing[:2]:
            bits.append(f"case '{case.get('name', case.get('index'))}': {case.get('message', '')}".rstrip(": "))
        if len(failing) > 2:
            bits.append(f"and {len(failing) - 2} more failing cases")
    return "; ".join(bits)


FLAGS_ONLY_WARNING = (
    "the probe's observations are all booleans/ints (no tensor values, no floats) on every case, "
    "so a player who forges the flags could pass without solving; observe values only a solver has "
    "(the result after mutating the input, the gradient itself, the state after the call)")


MISSING_SOLUTION = (
    "no other correct solution: add `solutions:` with at least one correct answer in a different idiom "
    "from the reference, so a change to the cases that rejects correct players is caught here")


def flags_only(cases: Sequence[dict[str, Any]]) -> bool:
    """Whether the reference's self-check says every case was decided on flags alone.

    The runner marks each case of a result `"evidence": "values"` or `"evidence": "flags"` (the
    reference's observation holds no tensor with data and no float, only bool/int/None/str/dtype).
    Probes run in the player's process, so flags are what a determined player can forge. A runner
    that does not say (no `evidence` field) gets no warning.
    """
    return bool(cases) and all(c.get("evidence") == "flags" for c in cases)


def _unsupported(result: dict[str, Any]) -> bool:
    return result.get("verdict") == "unsupported"


class Checker:
    """Runs the runtime checks for a set of items through one client, a few jobs at a time."""

    def __init__(self, client: GradingClient, concurrency: int = DEFAULT_CONCURRENCY,
                 progress: Callable[[str], None] | None = None):
        self.client = client
        self.semaphore = asyncio.Semaphore(max(1, concurrency))
        self.report = CheckReport()
        self.progress = progress or (lambda line: None)
        self.offers: set[str] | None = None  # what the runner says it can run, once asked

    async def ask_capabilities(self) -> None:
        health = getattr(self.client, "health", None)
        if health is None:
            return
        try:
            self.offers = set(Capabilities.from_health(await health()).offers())
        except Exception:  # noqa: BLE001 - an older or unreachable runner: skips are then only warnings
            self.offers = None

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        async with self.semaphore:
            self.report.jobs += 1
            try:
                return await self.client.grade(job)
            except Exception as e:  # noqa: BLE001 - an unreachable runner is a finding, not a crash
                return {"verdict": "internal", "message": f"the runner could not grade it: {type(e).__name__}: {e}"}

    def skip(self, item: Item, result: dict[str, Any]) -> None:
        """An item this runner cannot run is counted and said, never passed over in silence; if
        the runner claims on its health what the item needs, that is an error, not a skip."""
        needs = sorted(capability_words(item.requires, item.features, item.ranks))
        if self.offers is not None and set(needs) <= self.offers:
            self.add(item, "requires", f"the runner offers {', '.join(needs)} but answered unsupported: "
                                       f"{result.get('message', '')}")
            return
        self.report.skipped.append(item.id)
        reason = str(result.get("message") or "this runner cannot run it")
        self.report.skip_reasons[reason] = self.report.skip_reasons.get(reason, 0) + 1
        self.add(item, "", f"skipped: it needs {', '.join(needs)} ({reason})", "warning")

    def add(self, item: Item, where: str, message: str, severity: Severity = "error") -> None:
        self.report.findings.append(Finding(item.location_of(where) if where else item.location, item.id, message, severity))

    async def check_code(self, item: Item) -> None:
        reference = await self.grade(code_job(item, job_id=f"check:{item.id}:reference"))
        if _unsupported(reference):
            self.skip(item, reference)
            return
        if reference.get("verdict") != "passed":
            self.add(item, "reference", f"the reference does not pass: {_describe_result(reference)}")
            return  # every other verdict would be meaningless
        cases = reference.get("cases") or []
        if not any(not c.get("example") for c in cases):
            self.add(item, "setup", "make_cases() has no hidden case (every case is an example)")
        if not any(c.get("example") for c in cases):
            self.add(item, "setup", "no case is marked 'example': True, so players see no example")
        if flags_only(cases):
            self.add(item, "probe" if item.probe else "reference", FLAGS_ONLY_WARNING, "warning")

        async def must_fail(label: str, where: str, code: str, line: int = 0, known: int | None = None) -> None:
            result = await self.grade(code_job(item, code, job_id=f"check:{item.id}:{label}",
                                               recognise=known is not None))
            verdict = result.get("verdict")
            location = f"{item.source_file}:{line}" if line and item.source_file else item.location_of(where)
            if known is not None and verdict in ("failed", "error"):
                self.recognise(item, known, result.get("mistake"), location)
            if verdict == "passed":
                message = f"{label} passes; the hidden cases do not catch it"
            elif verdict == "internal":
                message = f"{label} could not be graded (runner internal error): {_describe_result(result)}"
            elif verdict == "invalid" and where == "wrong":
                message = f"{label} is invalid ({_describe_result(result)}), so it fails for the wrong reason"
            else:
                return
            self.report.findings.append(Finding(location, item.id, message))

        async def must_pass(label: str, code: str, line: int) -> None:
            result = await self.grade(code_job(item, code, job_id=f"check:{item.id}:{label}"))
            if result.get("verdict") != "passed":
                location = f"{item.source_file}:{line}" if line and item.source_file else item.location_of("solutions")
                self.report.findings.append(Finding(
                    location, item.id, f"{label} is rejected, so a player who writes it would lose points: "
                                       f"{_describe_result(result)}"))

        tasks: list[Awaitable[None]] = []
        if not item.solutions:
            self.add(item, "reference", MISSING_SOLUTION)
        for i, solution in enumerate(item.solutions, start=1):
            idea = f" ({solution.idea})" if solution.idea else ""
            tasks.append(must_pass(f"correct solution {i}{idea}", solution.code, solution.line))
        async def wrong_answers() -> None:
            # one after another, as players would send them: each is then recognised from the
            # runner's cache of the ones before, and no known answer runs twice
            for i, wrong in enumerate(item.wrong):
                why = f" ({wrong.why})" if wrong.why else ""
                await must_fail(f"wrong answer {i + 1}{why}", "wrong", wrong.code, wrong.line, known=i)

        tasks.append(wrong_answers())
        tasks.append(must_fail("the starter code", "starter", item.starter))
        for dumb in dumb_answers(item):
            tasks.append(must_fail(f"the dumb answer '{dumb.name}'", "reference", dumb.code))
        await asyncio.gather(*tasks)

    def recognise(self, item: Item, index: int, named: Any, location: str) -> None:
        """A known wrong answer sent as a player's must be named as itself; one named as an
        earlier answer means the cases cannot tell the two apart (the player gets the earlier
        answer's hint)."""
        self.report.known_mistakes += 1
        if named == index:
            self.report.recognised += 1
        elif isinstance(named, int) and 0 <= named < index:
            self.report.findings.append(Finding(location, item.id, (
                f"wrong answer {index + 1} behaves exactly like wrong answer {named + 1} on every case, so a player "
                f"who makes it is given answer {named + 1}'s hint; add a case that tells them apart"), "warning"))
        else:
            self.report.findings.append(Finding(location, item.id, (
                f"wrong answer {index + 1} is not recognised when a player sends it (it behaves differently "
                "from one run to the next?)"), "warning"))

    async def check_output(self, item: Item) -> None:
        first, second = await asyncio.gather(
            self.grade(output_job(item, job_id=f"check:{item.id}:run1")),
            self.grade(output_job(item, job_id=f"check:{item.id}:run2")),
        )
        if _unsupported(first):
            self.skip(item, first)
            return
        for result in (first, second):
            if result.get("verdict") != "passed":
                self.add(item, "snippet", f"the snippet does not run cleanly: {_describe_result(result)}")
                return
        out1, out2 = str(first.get("stdout") or ""), str(second.get("stdout") or "")
        if first.get("output_truncated") or second.get("output_truncated"):
            self.add(item, "snippet", "the snippet's output is cut at the output limit; print less")
        if not out1.strip():
            self.add(item, "snippet", "the snippet prints nothing, so there is nothing to predict")
        elif out1 != out2:
            self.add(item, "snippet", "the snippet is not deterministic: two runs printed different output "
                                      f"(first difference: {_first_difference(out1, out2)})")
        for i, wrong in enumerate(item.wrong_outputs, start=1):
            if normalise_output(wrong.output) == normalise_output(out1):
                self.add(item, "wrong_outputs", f"wrong output {i} is what the snippet really prints")

    def check_choice(self, item: Item) -> None:
        """The loader already checks keys; here only what makes a question unfair to answer."""
        texts = [(o.text.zh.strip(), o.text.en.strip()) for o in item.options]
        for lang, index in (("zh", 0), ("en", 1)):
            seen = [t[index] for t in texts]
            if len(set(seen)) != len(seen):
                self.add(item, "options", f"two options have the same {lang} text")

    async def check_item(self, item: Item) -> None:
        self.report.items += 1
        self.report.kinds[item.kind] = self.report.kinds.get(item.kind, 0) + 1
        try:
            if item.kind == "code":
                await self.check_code(item)
            elif item.kind == "output":
                await self.check_output(item)
            else:
                self.check_choice(item)
        finally:
            status = "FAILED" if any(f.severity == "error" for f in self.report.for_item(item.id)) else "ok"
            self.progress(f"{item.id}: {status}")

    async def run(self, items: Iterable[Item]) -> CheckReport:
        started = time.monotonic()
        await self.ask_capabilities()
        await asyncio.gather(*(self.check_item(item) for item in items))
        self.report.seconds = time.monotonic() - started
        return self.report


def _first_difference(a: str, b: str) -> str:
    for n, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if x != y:
            return f"line {n}: {x!r} vs {y!r}"
    return "the outputs have different lengths"


async def check_items(items: Sequence[Item], client: GradingClient, *,
                      problems: Sequence[Problem] = (), concurrency: int = DEFAULT_CONCURRENCY,
                      progress: Callable[[str], None] | None = None) -> CheckReport:
    """Check loaded items through `client`; loader `problems` are folded into the report."""
    checker = Checker(client, concurrency, progress)
    report = await checker.run(items)
    for p in problems:
        report.findings.append(Finding(f"{p.file}:{p.line}" if p.line else p.file, "", p.message))
    return report


def select_items(items: Sequence[Item], chapter: int | None) -> list[Item]:
    """Items of one chapter (any of their outline ids), or all."""
    if chapter is None:
        return list(items)
    prefix = f"{chapter}."
    return [item for item in items if any(o.startswith(prefix) for o in item.outline)]


async def run_check(paths: Sequence[str] | None = None, *, chapter: int | None = None,
                    runner_url: str | None = None, token: str | None = None,
                    concurrency: int = DEFAULT_CONCURRENCY, out: Any = None, verbose: bool = False) -> int:
    """The command: load, check through a remote or an embedded runner, print, return the exit code."""
    out = out or sys.stdout
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else None
    items, problems = load_items(paths or None)
    items = select_items(items, chapter)
    # schema problems alone are enough to fail; still run what loaded so one report says it all
    needs_runner = any(item.kind in ("code", "output") for item in items)
    try:
        if not needs_runner:
            report = await check_items(items, _NoRunner(), problems=problems, concurrency=concurrency,
                                     progress=progress)
        elif runner_url:
            from runner.client import RunnerClient  # torch-free

            client = RunnerClient(runner_url, token if token is not None else os.environ.get("RUNNER_TOKEN", ""))
            try:
                report = await check_items(items, client, problems=problems, concurrency=concurrency,
                                           progress=progress)
            finally:
                close = getattr(client, "close", None)
                if close is not None:
                    await close()
        else:
            from runner.embedded import EmbeddedRunner

            async with EmbeddedRunner() as client:
                report = await check_items(items, client, problems=problems, concurrency=concurrency,
                                           progress=progress)
    except Exception as e:  # noqa: BLE001 - the runner could not start: say so plainly
        print(f"check: cannot use the runner: {type(e).__name__}: {e}", file=out)
        for p in problems:
            print(p, file=out)
        return 2
    print(report.format(), file=out)
    return 0 if report.ok else 1


class _NoRunner:
    """Stands in when nothing needs running (only choice items selected)."""

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - never called
        raise RuntimeError("no runner")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="item files or folders (default: the whole bank)")
    parser.add_argument("--chapter", type=int, help="only items covering this outline chapter")
    parser.add_argument("--runner", metavar="URL", help="grade through this runner (token from RUNNER_TOKEN) "
                        "instead of an embedded one")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="jobs in flight (default %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each item's status as it finishes")


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run_check(args.paths, chapter=args.chapter, runner_url=args.runner,
                                 concurrency=args.concurrency, verbose=args.verbose))
