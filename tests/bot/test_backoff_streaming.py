"""Runner outages back off per runner, not per answer; results stream as they are graded."""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from bot.core.clock import parse_iso
from bot.core.runners import RunnerSlot

from .conftest import ALICE, BOB, CAROL, FAIL, MOD, PASS
from .helpers import FakeRunner


async def test_a_short_runner_restart_delays_no_answer_beyond_one_probe(make):
    """The runner restarts for 3.6 s while 20 answers arrive: every answer waits for the same
    probe (5 s after the outage began), none for a backoff grown by the others."""
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    h.runner.down = True
    start = h.clock.now()
    for i in range(20):
        await h.answer(ALICE if i % 2 else BOB, PASS if i % 3 else FAIL)
        await h.svc.settle()
        h.clock.advance(timedelta(seconds=0.18))
    rows = await h.svc.db.fetchall("SELECT state, next_try_at FROM answers")
    assert {r[0] for r in rows} == {"queued"}
    latest = max(parse_iso(r[1]) for r in rows)
    assert latest <= start + timedelta(seconds=5), latest  # one probe for all, not 5, 10, 20 ... s
    h.runner.down = False  # back at 3.6 s
    h.clock.advance(timedelta(seconds=5) - (h.clock.now() - start))
    await h.svc.settle()
    assert await h.svc.store.answers.pending_count() == 0
    assert len(h.kinds("result")) == 20


async def test_a_long_outage_is_probed_and_everything_waiting_graded_when_it_answers(make):
    """Down for ten minutes: the probe interval grows but stays short (probe_max_s), answers
    are not called into a dead runner meanwhile, and all of them are graded at the first probe
    after the runner is back."""
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    calls = {"grade": 0, "health": 0}
    grade, health = h.runner.grade, h.runner.health

    async def counted_grade(job: dict[str, Any]) -> dict[str, Any]:
        calls["grade"] += 1
        return await grade(job)

    async def counted_health() -> dict[str, Any]:
        calls["health"] += 1
        return await health()

    h.runner.grade, h.runner.health = counted_grade, counted_health  # type: ignore[method-assign]
    h.runner.down = True
    for actor in (ALICE, BOB, CAROL):
        await h.answer(actor, PASS)
    await h.svc.settle()
    for _ in range(120):  # ten minutes in 5 s steps, an answer now and then
        h.clock.advance(timedelta(seconds=5))
        if _ % 20 == 0:
            await h.answer(ALICE, FAIL)
        await h.svc.settle()
    assert calls["grade"] <= 1  # the first failed call opened the outage; then only health probes
    assert 10 <= calls["health"] <= 40  # probed at most every 30 s over 10 minutes
    h.runner.down = False
    back = h.clock.now()
    while await h.svc.store.answers.pending_count():
        h.clock.advance(timedelta(seconds=1))
        await h.svc.settle()
        assert h.clock.now() - back <= timedelta(seconds=30), "not graded within one probe interval"
    assert len(h.kinds("result")) == 9


async def test_each_runner_has_its_own_outage(make):
    """Two runners: one down does not delay the answers the other can grade."""
    up, down = FakeRunner(), FakeRunner(down=True)
    h = await make()
    h.svc.pool.slots[:] = [RunnerSlot("a", down), RunnerSlot("b", up)]
    h.svc.grader.pool.configure(now=h.clock.now, retry_s=5, retry_max_s=30)
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    for actor in (ALICE, BOB, CAROL, ALICE):
        await h.answer(actor, PASS)
    await h.svc.settle()
    assert await h.svc.store.answers.pending_count() == 0
    assert len(up.jobs) == 4 and not down.jobs


class SlowRunner(FakeRunner):
    """Answers containing SLOW wait for `release`; the others are graded at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        if "SLOW" in job.get("submission", ""):
            await self.release.wait()
        return await super().grade(job)


async def test_a_result_does_not_wait_for_a_slower_answer_of_its_batch(make):
    runner = SlowRunner()
    h = await make(runner=runner)
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-2")
    await h.answer(ALICE, "```python\ndef solve(x):\n    return x * 2  # SLOW\n```")
    for actor in (BOB, CAROL, BOB, CAROL):
        await h.answer(actor, PASS)
    worker = asyncio.create_task(h.svc.grade_pending())
    try:
        for _ in range(200):
            await asyncio.sleep(0.01)
            graded = (await h.svc.db.fetchone("SELECT COUNT(*) FROM answers WHERE state = 'graded'"))[0]
            if graded == 4:
                break
        await h.svc.deliver()
        assert sorted(m.data["answer_id"] for m in h.kinds("result")) == [2, 3, 4, 5]
        assert not worker.done()  # Alice's answer is still at the runner
    finally:
        runner.release.set()
        await worker
    await h.svc.deliver()
    assert sorted(m.data["answer_id"] for m in h.kinds("result")) == [1, 2, 3, 4, 5]
    assert await h.board() == [(1, "Alice", 25), (2, "Bob", 23), (3, "Carol", 21)]  # submission order
