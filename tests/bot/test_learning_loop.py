"""The learning loop, through the core with the fake clock (and the real runner where grading
decides what the player reads): feedback that names the mistake."""
from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

from questionbank.model import WrongAnswer, WrongOutput

from bot.core import RunnerPool
from bot.platforms.console import run_console

from .conftest import ALICE, BOB, CAROL, MOD, make_harness
from .helpers import FakeRunner, MiniBank, T, output_item
from .test_real_runner import TRANSPOSE

FORGOT = WrongAnswer(code="def solve(x):\n    return x\n", why="returns the input",
                     hint=T("You returned the tensor as it came: a transpose swaps its two dimensions.",
                            "你原样返回了输入：转置要交换两个维度。"))
FLIPPED = WrongAnswer(code="def solve(x):\n    return x.flip(0).t()\n", why="flips rows first",
                      hint=T("The rows come out in reverse order: transposing does not reorder them."))
TEACHING = replace(TRANSPOSE, id="e2e-transpose-hints", wrong=(FORGOT, FLIPPED))
SHAPE = replace(output_item("o-shape"), wrong_outputs=(
    WrongOutput("torch.Size([3, 2])", T("Shapes list the dimensions in order: rows first.")),
    WrongOutput("(2, 3)", T("A tensor's shape prints as a torch.Size, not a plain tuple.")),
))


async def _answers(h: Any) -> dict[int, tuple[str, int | None]]:
    rows = await h.svc.db.fetchall("SELECT id, verdict, mistake FROM answers ORDER BY id")
    return {r[0]: (r[1], r[2]) for r in rows}


def _text(msg: Any) -> str:
    return "\n".join(b.text for b in msg.blocks)


async def test_a_failing_answer_is_told_the_mistake_it_behaves_like(runner_client: Any, tmp_path: Path) -> None:
    h = await make_harness(tmp_path, bank=MiniBank.of(TEACHING, SHAPE))
    h.svc.pool = RunnerPool.single(runner_client)
    h.svc.grader.pool = h.svc.pool
    try:
        await h.svc.pool.refresh()
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post e2e-transpose-hints")
        # the second known mistake, written another way; then the first; then neither; then right
        await h.answer(ALICE, "```python\ndef solve(x):\n    return torch.flip(x, dims=[0]).transpose(0, 1)\n```")
        await h.answer(BOB, "```python\ndef solve(x):\n    return x.clone()\n```")
        await h.answer(BOB, "```python\ndef solve(x):\n    return x.t() * 3\n```")
        await h.answer(ALICE, "```python\ndef solve(x):\n    return x.mT\n```")
        await h.svc.settle()
        results = sorted(h.kinds("result"), key=lambda m: m.data["answer_id"])
        assert [m.data["verdict"] for m in results] == ["failed", "failed", "failed", "passed"]
        assert "This looks like a known mistake: The rows come out in reverse order" in _text(results[0])
        assert "This looks like a known mistake: You returned the tensor as it came" in _text(results[1])
        assert "known mistake" not in _text(results[2]) and "known mistake" not in _text(results[3])
        assert list((await _answers(h)).values()) == [("failed", 1), ("failed", 0), ("failed", None), ("passed", None)]
        # naming the mistake changes no score: 20 less 10% for one failed attempt, +5 first solver
        assert await h.board() == [(1, "Alice", 23), (2, "Bob", 0)]

        # in a Chinese channel the hint is in Chinese; an output item's listed wrong prediction
        await h.cmd(MOD, "schedule zh")
        await h.cmd(MOD, "post o-shape")
        await h.answer(BOB, "`(2, 3)`")
        await h.answer(ALICE, "torch.Size([3,  2])")
        await h.answer(ALICE, "torch.Size([2, 3])")
        await h.svc.settle()
        shape = sorted(h.kinds("result"), key=lambda m: m.data["answer_id"])[-3:]
        assert "A tensor's shape prints as a torch.Size" in _text(shape[0])
        assert "这像是一个常见错误：Shapes list the dimensions in order" in _text(shape[1])
        assert "常见错误" not in _text(shape[2])
        assert list((await _answers(h)).values())[-3:] == [("failed", 1), ("failed", 0), ("passed", None)]
    finally:
        await h.svc.close()


async def test_a_mistake_the_item_does_not_know_is_never_shown(tmp_path: Path) -> None:
    """A runner of another bank version naming a wrong answer this item lacks: no hint, nothing
    stored, the grade unchanged."""
    runner = FakeRunner(respond=lambda job: {"verdict": "failed", "passed_cases": 0, "total_cases": 2,
                                              "cases": [], "message": "0 of 2", "mistake": 5})
    h = await make_harness(tmp_path, bank=MiniBank.of(TEACHING), runner=runner)
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post e2e-transpose-hints")
        await h.answer(ALICE, "```python\ndef solve(x):\n    return x\n```")
        await h.svc.settle()
        assert "known mistake" not in _text(h.kinds("result")[-1])
        assert list((await _answers(h)).values()) == [("failed", None)]
        job = runner.jobs[-1]
        assert job["mistakes"] == [FORGOT.code, FLIPPED.code]  # the bot sends the item's known answers
    finally:
        await h.svc.close()


async def test_the_console_prints_the_hint(tmp_path: Path) -> None:
    bank = MiniBank.of(SHAPE)
    out = io.StringIO()
    script = "/quiz post o-shape\nalice: `torch.Size([3, 2])`\n"
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00"],
                           stdin=io.StringIO(script), stdout=out, bank=bank,
                           runner_client=FakeRunner(respond=lambda job: {
                               "verdict": "passed", "stdout": "torch.Size([2, 3])\n", "cases": []}))
    assert rc == 0
    text = out.getvalue()
    assert "alice, answer #1: wrong answer" in text
    assert "This looks like a known mistake: Shapes list the dimensions in order: rows first." in text




# ------------------------------------------------------------------------------------ hints

HINTED = replace(TRANSPOSE, id="hinted", hints=(T("Which two dimensions swap?", "哪两个维度交换？"),
                                                 T("x.t() or x.transpose(0, 1).")))


async def test_hints_are_private_cost_a_share_of_the_points_and_show_in_the_stats(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, bank=MiniBank.of(HINTED, replace(TRANSPOSE, id="plain")),
                           runner=FakeRunner(respond=lambda job: (
                               {"verdict": "passed", "passed_cases": 2, "total_cases": 2, "cases": []}
                               if "PASS" in job["submission"] else
                               {"verdict": "failed", "passed_cases": 1, "total_cases": 2, "cases": []})))
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post hinted")
        post = h.kinds("round_open")[-1]
        assert "Stuck? `/quiz hint` shows a hint privately (2 hints, 20% of the points each)." in _text(post)

        preview = (await h.cmd(ALICE, "hint"))[0]
        assert preview.ephemeral and "Hint 1 costs 20% of this round's points" in _text(preview)
        assert "at most 80%" in _text(preview) and "Which two dimensions" not in _text(preview)
        shown = (await h.cmd(ALICE, "hint reveal"))[0]
        assert shown.ephemeral and shown.title.startswith("Hint 1 of 2") and _text(shown).startswith("Which two")
        again = (await h.cmd(ALICE, "hint"))[0]  # what was revealed stays readable, free
        assert "Hint 1: Which two dimensions swap?" in _text(again) and "Hint 2 costs 20%" in _text(again)
        assert "at most 60%" in _text(again)
        assert "Unknown" not in _text((await h.cmd(ALICE, "hint nonsense"))[0])
        assert "Usage: /quiz hint [reveal]" in _text((await h.cmd(ALICE, "hint nonsense"))[0])

        await h.answer(ALICE, "```python\ndef solve(x):  # PASS\n    return x.t()\n```")
        await h.answer(BOB, "```python\ndef solve(x):\n    return x\n```")  # half the cases
        await h.svc.settle()
        # Alice: 20 points less 20% for her hint, +5 first solver; Bob: half of 20
        assert await h.board() == [(1, "Alice", 21), (2, "Bob", 10)]
        assert "solved this round already" in _text((await h.cmd(ALICE, "hint reveal"))[0])

        # a hint after a graded attempt rescores it at once: half of 80%, then of 60%
        await h.cmd(BOB, "hint reveal")
        assert await h.board() == [(1, "Alice", 21), (2, "Bob", 8)]
        h = await h.restart()  # recorded, not remembered
        await h.cmd(BOB, "hint reveal")
        assert await h.board() == [(1, "Alice", 21), (2, "Bob", 6)]
        done = (await h.cmd(BOB, "hint reveal"))[0]
        assert "Hint 1: Which two" in _text(done) and "Hint 2: x.t()" in _text(done)
        assert "every hint" in _text(done) and "at most 60%" in _text(done)
        assert await h.board() == [(1, "Alice", 21), (2, "Bob", 6)]  # seeing them again is free

        await h.cmd(MOD, "close")
        await h.svc.deliver()
        closed = h.kinds("round_close")[-1]
        assert "3 hints revealed by 2 players." in _text(closed) and closed.data["hints"] == 3

        await h.cmd(MOD, "post plain")
        assert "/quiz hint" not in _text(h.kinds("round_open")[-1])
        assert "This question has no hints" in _text((await h.cmd(ALICE, "hint reveal"))[0])
    finally:
        for svc in h.services:
            await svc.close()


async def test_the_hint_cost_is_a_scoring_setting_and_a_hint_keeps_the_cost_it_was_shown(tmp_path: Path) -> None:
    from .conftest import settings
    from bot.core.scoring import ScoringRules

    h = await make_harness(tmp_path, bank=MiniBank.of(HINTED), core=settings(scoring=ScoringRules(hint_cost=50)))
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post hinted")
        assert "50% of the points each" in _text(h.kinds("round_open")[-1])
        assert "Hint 1 costs 50%" in _text((await h.cmd(ALICE, "hint"))[0])
        await h.cmd(ALICE, "hint reveal")
        row = await h.svc.db.fetchone("SELECT n, cost_pct FROM hints")
        assert tuple(row) == (1, 50.0)
        assert "at most 0%" in _text((await h.cmd(ALICE, "hint"))[0])  # two hints at 50%: nothing left
    finally:
        await h.svc.close()


# ------------------------------------------------------------------------------------ approaches

def test_approaches_ignore_names_formatting_comments_docstrings_annotations_and_imports() -> None:
    from bot.core.approaches import Solve, group_approaches, normalise_code

    a = "def solve(x):\n    return x.t()\n"
    b = ('import torch\n\ndef solve(t: torch.Tensor) -> torch.Tensor:\n    """Transpose."""\n'
         "    # swap the two dims\n    return t.t( )\n")
    c = "def solve(x):\n    y = x.transpose(0, 1)\n    return y\n"
    d = "def solve(inp):\n    out = inp.transpose(0, 1)\n    return out\n"
    assert normalise_code(a, "solve") == normalise_code(b, "solve")
    assert normalise_code(c, "solve") == normalise_code(d, "solve") != normalise_code(a, "solve")
    # what the code calls is the approach: another API is another approach, whatever the names
    assert normalise_code("def solve(x):\n    return x.T\n", "solve") != normalise_code(a, "solve")
    assert normalise_code("def solve(x):\n    return len(x)\n", "solve") != normalise_code(
        "def solve(x):\n    return abs(x)\n", "solve")  # builtins keep their names
    assert normalise_code("def solve(x) return", "solve") is None
    solves = [Solve(1, "Ann", c), Solve(2, "Ben", a), Solve(3, "Cy", b), Solve(4, "Di", d), Solve(5, "Ed", b),
              Solve(6, "Flo", "def solve(x):\n    return x.mT\n"), Solve(7, "Gus", "def solve(x) nope")]
    found = group_approaches(solves, "solve")
    assert [(f.count, f.first.player) for f in found] == [(3, "Ben"), (2, "Ann"), (1, "Flo"), (1, "Gus")]


async def test_a_closing_round_shows_the_approaches_players_found(tmp_path: Path) -> None:
    runner = FakeRunner(respond=lambda job: {"verdict": "passed", "passed_cases": 2, "total_cases": 2, "cases": []})
    h = await make_harness(tmp_path, bank=MiniBank.of(replace(TRANSPOSE, id="t1"), replace(TRANSPOSE, id="t2")),
                           runner=runner)
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "post t1")
        await h.answer(BOB, "```python\ndef solve(m):\n    return m.transpose(0, 1)\n```")
        await h.answer(ALICE, "```python\ndef solve(x):\n    return x.t()\n```")
        await h.answer(CAROL, "```python\ndef solve(a):\n    # the short way\n    return a.t()\n```")
        await h.svc.settle()
        await h.cmd(MOD, "close")
        await h.svc.deliver()
        closed = h.kinds("round_close")[-1]
        text = _text(closed)
        assert "How it was solved: 2 distinct approaches (names and formatting aside):" in text
        assert "1. 2 players, first by Alice" in text and "2. 1 player, first by Bob" in text
        codes = [b.text for b in closed.blocks if b.code]
        assert codes == ["def solve(x):\n    return x.t()", "def solve(m):\n    return m.transpose(0, 1)"]

        # a moderator turns the names off: the approaches stay, the credit goes
        assert "names=on" in _text((await h.cmd(ALICE, "settings"))[0])  # anyone may read them
        assert "is for quiz moderators" in _text((await h.cmd(ALICE, "settings names=off"))[0])
        assert "not a setting" in _text((await h.cmd(MOD, "settings colour=red"))[0])
        assert "names=off" in _text((await h.cmd(MOD, "settings names=off"))[0])
        h = await h.restart()
        await h.cmd(MOD, "post t2")
        await h.answer(ALICE, "```python\ndef solve(x):\n    return x.t()\n```")
        await h.svc.settle()
        await h.cmd(MOD, "close")
        await h.svc.deliver()
        text = _text(h.kinds("round_close")[-1])
        assert "1. 1 player\n" in text + "\n" and "first by" not in text
    finally:
        for svc in h.services:
            await svc.close()
