"""Whatever order gradings finish in, and however a grading pass batches them, the points are
the same: randomized scenarios graded one at a time in submission order versus shuffled,
batched and partly late must leave identical score rows and monthly totals."""
from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from bot.core import Actor, CoreSettings, FakeClock, RoleRules, RunnerPool
from bot.core.service import QuizService
from tests.bot.conftest import MOD, MONDAY, WHERE
from tests.bot.helpers import FakeRunner, MiniBank, choice_item, code_item

CODES = ["def solve(x):\n    return x * 2  # PASS\n", "def solve(x):\n    return 0  # FAIL\n",
         "def solve(x):\n    return 0  # HALF\n", "def solve(x):\n    return 0  # SYNTAX\n"]


async def _play(db: Path, seed: int, *, shuffled: bool) -> dict[str, list[tuple]]:
    scenario, order = random.Random(seed), random.Random(seed * 7919 + 1)
    bank = MiniBank.of(*[code_item(f"c{i}", chapter=1 + i % 3, difficulty=1 + i % 5) for i in range(8)],
                       choice_item("q1"))
    clock = FakeClock(MONDAY)
    svc = await QuizService.open(str(db), bank, RunnerPool.single(FakeRunner()), clock=clock,
                                 settings=CoreSettings(roles=RoleRules(moderators=frozenset({"mod"}))))

    async def sink(ref, msg):  # noqa: ANN001, ANN202
        return f"thread-{msg.round_id}" if msg.kind == "round_open" else None

    svc.sink = sink
    try:
        await svc.start(background=False)
        await svc.command(MOD, WHERE, "enable")
        players = [Actor("test", f"p{i}", f"P{i}") for i in range(6)]
        held: list[int] = []
        for r in range(4):
            clock.advance(timedelta(hours=scenario.randint(20, 30)))
            await svc.command(MOD, WHERE, f"post c{r}")
            ids = []
            for _ in range(scenario.randint(8, 25)):
                ack = await svc.submit(scenario.choice(players), WHERE, "```python\n" + scenario.choice(CODES) + "```")
                if ack[0].kind == "ack":
                    ids.append(ack[0].data["answer_id"])
                clock.advance(timedelta(seconds=scenario.randint(1, 60)))
            if shuffled:
                ids += held
                order.shuffle(ids)
                k = order.randint(0, len(ids) // 3)
                held, ids = ids[:k], ids[k:]  # some are graded only during a later round
            while ids:
                n = order.randint(1, 12) if shuffled else 1
                batch, ids = ids[:n], ids[n:]
                async with svc.db.transaction():
                    claimed = await svc.store.answers.claim(batch)
                prepared = [p for p in [await svc.grader.prepare(i) for i in claimed] if isinstance(p, tuple)]
                await svc.grader.record_many(prepared)
        if held:
            async with svc.db.transaction():
                claimed = await svc.store.answers.claim(held)
            prepared = [p for p in [await svc.grader.prepare(i) for i in claimed] if isinstance(p, tuple)]
            await svc.grader.record_many(prepared)
        await svc.settle()
        return {
            "scores": [tuple(r) for r in await svc.db.fetchall(
                "SELECT answer_id, round_id, player_id, attempt_value, points, first_bonus, streak_bonus, solved,"
                " streak FROM scores ORDER BY answer_id")],
            "months": [tuple(r) for r in await svc.db.fetchall("SELECT * FROM player_months ORDER BY 1, 2, 3")],
        }
    finally:
        await svc.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_batched_shuffled_and_late_gradings_score_like_one_at_a_time(tmp_path: Path, seed: int) -> None:
    in_order = await _play(tmp_path / "a.sqlite3", seed, shuffled=False)
    shuffled = await _play(tmp_path / "b.sqlite3", seed, shuffled=True)
    assert in_order["scores"], "the scenario scored nothing, so it proves nothing"
    assert any(row[5] or row[6] for row in in_order["scores"]), "no bonus in the scenario"
    assert shuffled == in_order
