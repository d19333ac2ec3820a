"""`python -m questionbank check` through the real, sandboxed runner (the `runner_client` fixture).

Deliberately broken items are written to tmp_path; each kind of breakage must be reported,
and the shipped bank must pass the same gate.
"""
from __future__ import annotations

import dataclasses
import io
import textwrap
from pathlib import Path
from typing import Any

import pytest

from questionbank.check import CheckReport, Finding, check_items, run_check
from questionbank.loader import load_bank, load_items
from questionbank.model import Item

OUTLINE_IDS = {"2.1.2.a.1", "2.1.2.a.3", "2.2.1.a.1"}


class StubOutline:
    def exists(self, question_id: str) -> bool:
        return question_id in OUTLINE_IDS


def code_item(item_id: str, *, setup: str, reference: str, wrong: list[tuple[str, str]], starter: str = "",
              solutions: list[tuple[str, str]] | None = None) -> str:
    """YAML for one code item with entrypoint `solve(x)`."""
    def block(source: str, indent: int) -> str:
        return textwrap.indent(textwrap.dedent(source).strip("\n") + "\n", " " * indent)

    starter = starter or "def solve(x):\n    raise NotImplementedError"
    wrong_yaml = "".join(f"      - why: {why}\n        hint: {{zh: 提示, en: 'Hint: {why}'}}\n        code: |\n{block(code, 10)}"
                         for why, code in wrong)
    if solutions is None:  # every code item keeps another correct solution; [] leaves it out
        solutions = [("torch.mul", "def solve(x):\n    return torch.mul(x, 2)\n")]
    solutions_yaml = "".join(f"      - idea: {idea}\n        code: |\n{block(code, 10)}" for idea, code in solutions)
    return (
        f"  - id: {item_id}\n"
        "    outline: [2.1.2.a.1]\n    kind: code\n    difficulty: 1\n    tags: [test]\n    requires: cpu\n"
        "    limits: {wall_s: 5, cpu_s: 5}\n"
        "    title: {zh: 标题, en: Title}\n    prompt: {zh: 题目, en: Prompt}\n    explanation: {zh: 解释, en: Why}\n"
        "    entrypoint: solve\n"
        f"    starter: |\n{block(starter, 6)}"
        f"    setup: |\n{block(setup, 6)}"
        f"    reference: |\n{block(reference, 6)}"
        + (f"    solutions:\n{solutions_yaml}" if solutions else "")
        + f"    wrong:\n{wrong_yaml}"
    )


def output_item(item_id: str, snippet: str) -> str:
    body = textwrap.indent(textwrap.dedent(snippet).strip("\n") + "\n", " " * 6)
    return (
        f"  - id: {item_id}\n"
        "    outline: [2.2.1.a.1]\n    kind: output\n    difficulty: 1\n    tags: [test]\n    requires: cpu\n"
        "    limits: {wall_s: 5, cpu_s: 5}\n"
        "    title: {zh: 标题, en: Title}\n    prompt: {zh: 题目, en: Prompt}\n    explanation: {zh: 解释, en: Why}\n"
        f"    snippet: |\n{body}"
    )


SETUP = """
def make_cases():
    return [
        {"name": "example", "args": (torch.arange(6.0).reshape(2, 3),), "example": True},
        {"name": "hidden", "args": (torch.randn(4, 5),)},
        {"name": "hidden 3-D", "args": (torch.randn(2, 3, 4),)},
    ]
"""
DOUBLE = "def solve(x):\n    return x * 2\n"
ITEMS = {
    "good-double": code_item("good-double", setup=SETUP, reference=DOUBLE,
                             solutions=[("torch.mul", "def solve(x):\n    return torch.mul(x, 2)\n"),
                                        ("a sum", "def solve(x):\n    return torch.stack([x, x]).sum(0)\n")],
                             wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "no-other-solution": code_item("no-other-solution", setup=SETUP, reference=DOUBLE, solutions=[],
                                   wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "rejects-a-solution": code_item("rejects-a-solution", setup=SETUP, reference=DOUBLE,
                                    solutions=[("in float64", "def solve(x):\n    return (x.double() * 2).float()\n"),
                                               ("a new tensor", "def solve(x):\n    return x.mul(2).to(torch.float64)\n")],
                                    wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "broken-reference": code_item("broken-reference", setup=SETUP,
                                  reference="def solve(x):\n    return x.view(-1, 3) * 2\n",
                                  wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "wrong-that-passes": code_item("wrong-that-passes", setup=SETUP, reference=DOUBLE,
                                   wrong=[("adds x to itself", "def solve(x):\n    return x + x\n"),
                                          ("adds one", "def solve(x):\n    return x + 1\n")]),
    "dumb-that-passes": code_item("dumb-that-passes", setup=SETUP,
                                  reference="def solve(x):\n    return x.clone()\n",
                                  wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "wrong-for-the-wrong-reason": code_item("wrong-for-the-wrong-reason", setup=SETUP, reference=DOUBLE,
                                            wrong=[("not a function", "solve = 2\n")]),
    "examples-only": code_item("examples-only", reference=DOUBLE,
                               setup="def make_cases():\n    return [{'args': (torch.arange(3.0),), 'example': True}]\n",
                               wrong=[("adds one", "def solve(x):\n    return x + 1\n")]),
    "good-output": output_item("good-output", "import torch\nprint(torch.ones(2, 1) + torch.ones(3))\n"),
    "random-output": output_item("random-output", "import time\nprint(time.time_ns())\n"),
    "silent-output": output_item("silent-output", "import torch\nx = torch.ones(2)\n"),
    "failing-output": output_item("failing-output", "import torch\nprint(torch.ones(2) + torch.ones(3))\n"),
}


@pytest.fixture(scope="module")
def broken_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bank") / "broken.yaml"
    path.write_text("items:\n" + "".join(ITEMS.values()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def broken_items(broken_file: Path) -> list[Item]:
    items, problems = load_items([broken_file], outline=StubOutline())
    assert problems == [], [str(p) for p in problems]
    assert [i.id for i in items] == list(ITEMS)
    return items


def messages(report: CheckReport, item_id: str) -> list[str]:
    return [f.message for f in report.for_item(item_id) if f.severity == "error"]


async def test_check_reports_each_kind_of_breakage(runner_client: Any, broken_items: list[Item]) -> None:
    report = await check_items(broken_items, runner_client)
    assert not report.ok

    assert messages(report, "good-double") == []
    assert report.for_item("good-double") == []  # two solutions that pass: no warning either

    # the second "solution" returns float64 where the cases expect float32: a correct-looking
    # answer the item rejects is reported at its own line, the first one is fine
    by_id = {i.id: i for i in broken_items}
    [rejected] = [f for f in report.for_item("rejects-a-solution") if f.severity == "error"]
    assert rejected.message.startswith("correct solution 2 (a new tensor) is rejected, so a player who writes it "
                                       "would lose points: failed")
    assert rejected.location == f"{by_id['rejects-a-solution'].source_file}:{by_id['rejects-a-solution'].solutions[1].line}"

    # an item without another correct solution fails: a change that rejects correct players would go unseen
    [missing] = messages(report, "no-other-solution")
    assert missing.startswith("no other correct solution: add `solutions:`")
    assert messages(report, "good-output") == []

    [ref] = messages(report, "broken-reference")
    assert ref.startswith("the reference does not pass: ")

    assert messages(report, "wrong-that-passes") == [
        "wrong answer 1 (adds x to itself) passes; the hidden cases do not catch it"]

    dumb = messages(report, "dumb-that-passes")
    assert "the dumb answer 'return the first input' passes; the hidden cases do not catch it" in dumb

    [reason] = messages(report, "wrong-for-the-wrong-reason")
    assert reason.startswith("wrong answer 1 (not a function) is invalid") and "fails for the wrong reason" in reason

    assert messages(report, "examples-only") == ["make_cases() has no hidden case (every case is an example)"]

    [nondet] = messages(report, "random-output")
    assert nondet.startswith("the snippet is not deterministic: two runs printed different output")
    assert messages(report, "silent-output") == ["the snippet prints nothing, so there is nothing to predict"]
    [failing] = messages(report, "failing-output")
    assert failing.startswith("the snippet does not run cleanly: error")

    # compiler-style locations: the wrong answer's own line, the item's reference or snippet line
    wrong_line = by_id["wrong-that-passes"].wrong[0].line
    located = [f for f in report.for_item("wrong-that-passes") if f.severity == "error"]
    assert located[0].location == f"{by_id['wrong-that-passes'].source_file}:{wrong_line}"
    assert str(located[0]).startswith(f"{located[0].location}: wrong-that-passes: wrong answer 1")
    text = report.format()
    assert text.splitlines()[-1].startswith("check: FAILED: 12 items (8 code, 4 output), ")


async def test_check_command_through_a_runner_url(runner_client: Any, broken_file: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI path: load from files (real outline), grade through --runner URL, exit non-zero."""
    good = broken_file.parent / "good.yaml"
    good.write_text("items:\n" + ITEMS["good-double"].replace("good-double", "good-double-cli")
                    + ITEMS["good-output"].replace("good-output", "good-output-cli"), encoding="utf-8")
    out = io.StringIO()
    code = await run_check([str(good)], runner_url=runner_client.url, token=runner_client.token, out=out)
    assert code == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith(
        "check: ok: 2 items (1 code, 1 output), 13 runner jobs, 1 of 1 wrong answers recognised, 0 errors")

    out = io.StringIO()
    monkeypatch.setenv("RUNNER_TOKEN", runner_client.token)
    code = await run_check([str(broken_file)], runner_url=runner_client.url, out=out)
    assert code == 1
    lines = out.getvalue().splitlines()
    assert any("wrong-that-passes: wrong answer 1 (adds x to itself) passes" in line for line in lines)
    assert lines[-1].startswith("check: FAILED: 12 items")

    out = io.StringIO()
    bad_yaml = broken_file.parent / "bad.yaml"
    bad_yaml.write_text("items:\n  - id: [\n", encoding="utf-8")
    code = await run_check([str(bad_yaml)], runner_url=runner_client.url, token=runner_client.token, out=out)
    assert code == 1 and "bad.yaml:3: YAML syntax error" in out.getvalue()


def _bank_chapters() -> list[int]:
    return sorted({item.chapter for item in load_bank().items.values()})


@pytest.mark.parametrize("chapter", _bank_chapters())
async def test_the_bank_passes_check(runner_client: Any, chapter: int) -> None:
    """`python -m questionbank check --chapter N` for every chapter the bank has, through the
    session's runner: references pass, wrong and dumb answers fail, snippets are deterministic."""
    out = io.StringIO()
    code = await run_check(chapter=chapter, runner_url=runner_client.url, token=runner_client.token, out=out)
    assert code == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("check: ok:"), out.getvalue()


# --------------------------------------------------------------------------------------------
# the checker's logic with a fake client (no runner needed)


class AlwaysPasses:
    """A runner that says yes to everything: every wrong and dumb answer must then be flagged."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        self.jobs.append(job)
        return {"verdict": "passed", "stdout": "same\n", "cases": [
            {"index": 0, "name": "a", "example": True, "passed": True},
            {"index": 1, "name": "b", "example": False, "passed": True}]}


class Unreachable:
    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("no route to the runner")


async def test_known_mistakes_are_recognised_and_twins_or_real_outputs_are_findings(
        runner_client: Any, tmp_path: Path) -> None:
    """Each wrong answer, sent as a player's, must be named as itself: two that the cases cannot
    tell apart are a warning (the second one's hint is never shown); a listed wrong output that
    is what the snippet prints is an error."""
    path = tmp_path / "mistakes.yaml"
    path.write_text("items:\n" + code_item(
        "twin-mistakes", setup=SETUP, reference=DOUBLE,
        wrong=[("adds one", "def solve(x):\n    return x + 1\n"),
               ("adds one again", "def solve(x):\n    return torch.add(x, 1)\n"),
               ("triples", "def solve(x):\n    return x * 3\n")])
        + output_item("real-output-listed", "import torch\nprint(torch.ones(2).shape)\n")
        + "    wrong_outputs:\n"
          "      - {output: 'torch.Size([2])', hint: {zh: 提示, en: hint}}\n"
          "      - {output: '(2,)', hint: {zh: 提示, en: a plain tuple}}\n", encoding="utf-8")
    items, problems = load_items([path], outline=StubOutline())
    assert problems == [], [str(p) for p in problems]
    report = await check_items(items, runner_client)
    assert (report.known_mistakes, report.recognised) == (3, 2)
    [twin] = [f for f in report.for_item("twin-mistakes") if f.severity == "warning"]
    assert twin.message.startswith("wrong answer 2 behaves exactly like wrong answer 1 on every case")
    assert twin.location == f"{items[0].source_file}:{items[0].wrong[1].line}"
    assert [f.message for f in report.for_item("real-output-listed")] == [
        "wrong output 1 is what the snippet really prints"]
    assert "2 of 3 wrong answers recognised" in report.summary()


async def test_everything_passing_flags_every_wrong_starter_and_dumb_answer(broken_items: list[Item]) -> None:
    item = next(i for i in broken_items if i.id == "good-double")
    client = AlwaysPasses()
    report = await check_items([item], client, concurrency=2)
    got = [f.message for f in report.findings]
    assert "wrong answer 1 (adds one) passes; the hidden cases do not catch it" in got
    assert "the starter code passes; the hidden cases do not catch it" in got
    assert sum("the dumb answer" in m for m in got) == 6
    assert not any("correct solution" in m for m in got)  # both solutions pass, as they should
    assert report.jobs == len(client.jobs) == 1 + 2 + 1 + 1 + 6  # reference, solutions, wrong, starter, dumb
    assert {j["submission"] for j in client.jobs[1:]}.isdisjoint({item.reference})


async def test_an_unreachable_runner_is_a_finding_not_a_crash(broken_items: list[Item]) -> None:
    report = await check_items(broken_items[:1], Unreachable())
    assert not report.ok
    assert report.findings[0].message.startswith("the reference does not pass: internal; the runner could not grade it")


class ReportsEvidence:
    """A runner that passes the reference (marking its cases with the given evidence; None: no
    `evidence` field, as an older runner) and the item's other solutions, and fails every other answer."""

    def __init__(self, evidence: tuple[str | None, ...]) -> None:
        self.evidence = evidence

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        cases = [{"index": i, "name": f"case {i + 1}", "example": i == 0, "passed": True, "ran": True,
                  "message": ""} for i in range(len(self.evidence))]
        if not job["job_id"].endswith(":reference") and ":correct solution" not in job["job_id"]:
            for case in cases:
                case.update(passed=False, message="result: 1 of 6 values differ")
            return {"verdict": "failed", "message": f"0 of {len(cases)} cases passed", "cases": cases}
        for case, evidence in zip(cases, self.evidence, strict=True):
            if evidence is not None:
                case["evidence"] = evidence
        return {"verdict": "passed", "message": "", "cases": cases}


@pytest.mark.parametrize("evidence,warned", [
    (("flags", "flags", "flags"), True),
    (("flags", "values", "flags"), False),
    (("values", "values", "values"), False),
    ((None, None, None), False),
    (("flags", None, "flags"), False),
])
async def test_a_probe_that_observes_only_flags_gets_a_warning(
        broken_items: list[Item], evidence: tuple[str | None, ...], warned: bool) -> None:
    """Flags (booleans, ints, strings) on every case of the reference: a player who forges the
    probe's flags could pass without solving. A warning, not an error; silence without the field."""
    item = next(i for i in broken_items if i.id == "good-double")
    report = await check_items([item], ReportsEvidence(evidence))
    assert report.ok and report.errors == []
    flagged = [f for f in report.warnings if "booleans/ints" in f.message]
    assert len(flagged) == (1 if warned else 0), [str(f) for f in report.findings]
    if warned:
        [finding] = flagged
        assert finding.item_id == "good-double" and finding.severity == "warning"
        assert "forge" in finding.message
        assert finding.location == item.location_of("reference")  # the item has no probe
        assert str(finding).startswith(f"{finding.location}: warning: good-double: the probe's observations")


def test_flags_only_needs_every_case_to_say_flags() -> None:
    from questionbank.check import flags_only

    assert flags_only([{"evidence": "flags"}, {"evidence": "flags"}])
    assert not flags_only([{"evidence": "flags"}, {"evidence": "values"}])
    assert not flags_only([{"evidence": "flags"}, {}])
    assert not flags_only([])


def test_finding_text() -> None:
    assert str(Finding("a.yaml:3", "x", "it broke")) == "a.yaml:3: x: it broke"
    assert str(Finding("a.yaml:3", "x", "hmm", "warning")) == "a.yaml:3: warning: x: hmm"


def test_cli_try_grades_through_the_runner(runner_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`try ID FILE --runner URL`: verdict and per-case lines; exit 0 only when it passed."""
    from questionbank.__main__ import main

    monkeypatch.setenv("RUNNER_TOKEN", runner_client.token)
    bank = load_bank()
    item = bank.get("minmax-scale-keepdim")
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(item.reference, encoding="utf-8")
    bad.write_text(item.wrong[0].code, encoding="utf-8")
    assert main(["try", item.id, str(good), "--runner", runner_client.url]) == 0
    assert capsys.readouterr().out.startswith("passed: 8/8")
    assert main(["try", item.id, str(bad), "--runner", runner_client.url]) == 1
    out = capsys.readouterr().out
    assert "✗ rows of a square matrix (hidden): failed" in out and "✓ int64 input (hidden): passed" in out

    guess = tmp_path / "guess.txt"
    guess.write_text("torch.Size([3,  4])\ntorch.Size([2, 3, 5])\n", encoding="utf-8")
    assert main(["try", "broadcasting-shapes", str(guess), "--runner", runner_client.url]) == 1
    assert "failed: the output differs" in capsys.readouterr().out


def test_a_solution_must_be_another_idiom_and_define_the_entrypoint(tmp_path: Path) -> None:
    path = tmp_path / "solutions.yaml"
    path.write_text("items:\n" + code_item(
        "lazy-solutions", setup=SETUP, reference=DOUBLE,
        solutions=[("the reference again", DOUBLE),
                   ("another name", "def double(x):\n    return x * 2\n"),
                   ("einsum", "def solve(x):\n    return torch.einsum('...,->...', x, torch.tensor(2.0))\n")],
        wrong=[("adds one", "def solve(x):\n    return x + 1\n")]), encoding="utf-8")
    items, problems = load_items([path], outline=StubOutline())
    assert items == []
    assert sorted(p.message.partition(": ")[2] for p in problems) == [
        "solution 1 is the reference again; write it in a different idiom",
        "solution 2 does not define the entrypoint 'solve'",
    ], [str(p) for p in problems]


class LacksOnnx:
    """A runner whose health offers `offers` and which answers `unsupported` to onnx jobs."""

    def __init__(self, features: list[str]) -> None:
        self.features = features

    async def health(self) -> dict[str, Any]:
        return {"torch": "2.13.0", "cuda": None, "capabilities": {"ranks": 4, "features": self.features}}

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        return {"verdict": "unsupported", "message": "this runner lacks onnx", "cases": []}


@pytest.mark.parametrize("features,skipped", [([], True), (["onnx"], False)])
async def test_an_item_the_runner_cannot_run_is_counted_never_silent(
        broken_items: list[Item], features: list[str], skipped: bool) -> None:
    item = dataclasses.replace(next(i for i in broken_items if i.id == "good-double"), features=("onnx",))
    report = await check_items([item], LacksOnnx(features))
    if skipped:
        assert report.ok and report.skipped == ["good-double"]
        [warning] = report.warnings
        assert warning.message == "skipped: it needs cpu, onnx (this runner lacks onnx)"
        assert "1 not checked here (1 this runner lacks onnx)" in report.summary()
    else:  # the runner says it has onnx: an unchecked onnx item is a failure, not a skip
        assert not report.ok and report.skipped == []
        assert report.errors[0].message.startswith("the runner offers cpu, onnx but answered unsupported")


def test_an_item_declares_features_and_ranks_and_its_jobs_carry_them(tmp_path: Path) -> None:
    from questionbank.jobs import code_job as build_job

    good = code_item("two-ranks-onnx", setup=SETUP, reference=DOUBLE,
                     wrong=[("adds one", "def solve(x):\n    return x + 1\n")])
    good = good.replace("    requires: cpu\n", "    requires: [cpu, onnx]\n    ranks: 2\n")
    bad = code_item("bad-requires", setup=SETUP, reference=DOUBLE, wrong=[("adds one", "def solve(x):\n    return x + 1\n")])
    bad = bad.replace("    requires: cpu\n", "    requires: [cpu, cuda, onxx]\n")
    path = tmp_path / "caps.yaml"
    path.write_text("items:\n" + good + bad, encoding="utf-8")
    items, problems = load_items([path], outline=StubOutline())
    [item] = items
    job = build_job(item)
    assert job["requires"] == ["cpu", "onnx"] and job["ranks"] == 2
    [problem] = problems
    assert problem.message.endswith("requires: unknown 'onxx' (known: cpu, cuda, onnx, inductor; did you mean 'onnx'?)"), str(problem)
