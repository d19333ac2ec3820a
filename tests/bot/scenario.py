"""The one scenario every platform plays, and the scores the console gives for it.

enable the channel, post item c1, Alice answers right in the round's thread, Bob answers
wrong through the platform's form and then right in the thread, read the leaderboard. Each
platform's test plays it with that platform's own events and must end with the same points
as the console: the rules live in the core, so no adapter may change a score.
"""
from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from bot.core import ChannelRef, FakeClock, RunnerPool
from bot.core.leaderboards import leaderboard
from bot.core.service import QuizService
from bot.platforms.console import run_console

from questionbank.model import WrongAnswer

from .helpers import FakeRunner, MiniBank, T, choice_item, code_item, output_item

START = datetime(2025, 1, 6, 6, 0, tzinfo=UTC)
RIGHT = "```python\ndef solve(x):\n    return x * 2\n```"
WRONG_FORM = "def solve(x):\n    return x\n"  # what a player types into a form: no fences


# c1 teaches: two hints, and the hint for the mistake of WRONG_FORM
HINTS = (T("Look at what the example's output is compared with its input.", "对比示例的输入和输出。"),
         T("Every element is doubled.", "每个元素都乘以二。"))
FORGOT = WrongAnswer(code=WRONG_FORM, why="returns the input", hint=T(
    "You returned the input unchanged: the function must compute something from it.", "你原样返回了输入。"))


def scenario_bank() -> MiniBank:
    return MiniBank.of(replace(code_item("c1", difficulty=2), hints=HINTS, wrong=(FORGOT,)),
                       code_item("c2", difficulty=1), choice_item("q1", correct=("B",)), output_item("o1"))


async def board_of(svc: QuizService, where: ChannelRef) -> dict[str, float]:
    """Name -> points on the channel's all-time board."""
    ch = await svc.store.channels.by_ref(where)
    assert ch is not None
    b = await leaderboard(svc.store, ch, "all", svc.clock.now(), limit=50)
    return {r.name: r.points for r in b.rows}


async def console_scores(tmp_path: Path) -> dict[str, float]:
    """The scenario on the console (`/quiz answer` is the console's form)."""
    script = (f"/quiz post c1\nAlice: {RIGHT}\nBob: /quiz answer {WRONG_FORM}\nBob: {RIGHT}\n"
              "/quiz leaderboard week\n")
    db = tmp_path / "console.sqlite3"
    out = io.StringIO()
    rc = await run_console(["--db", str(db), "--start", START.isoformat(), "--as", "mod"],
                           stdin=io.StringIO(script), stdout=out, bank=scenario_bank(), runner_client=FakeRunner())
    assert rc == 0, out.getvalue()
    svc = await QuizService.open(str(db), scenario_bank(), RunnerPool([]), clock=FakeClock(START))
    try:
        scores = await board_of(svc, ChannelRef("console", "local", "quiz", "quiz"))
    finally:
        await svc.close()
    assert scores and len(scores) == 2, out.getvalue()
    return scores
