"""Items declare what grading needs (device, features, ranks); the bot picks only items a
configured runner can grade and sends each job to a runner that offers what it needs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.core import FakeClock
from bot.core.runners import RunnerPool, RunnerSlot, needs_of
from bot.core.service import QuizService
from runner.client import RunnerUnavailable

from .helpers import FakeRunner
from .scenario import START, scenario_bank


def job(requires: object = "cpu", ranks: int = 1) -> dict:
    out = {"kind": "code", "requires": requires, "submission": "def f(x):\n    return x\n", "job_id": "j"}
    if ranks > 1:
        out["ranks"] = ranks
    return out


async def test_jobs_go_to_the_runner_that_offers_what_they_need() -> None:
    plain = FakeRunner()
    dist = FakeRunner(capabilities={"ranks": 4, "features": ["onnx"]})
    pool = RunnerPool([RunnerSlot("plain", plain), RunnerSlot("dist", dist)])
    await pool.refresh()
    assert pool.capabilities() == {"cpu", "onnx", "ranks:2", "ranks:3", "ranks:4"}
    for _ in range(3):
        await pool.grade(job(["cpu", "onnx"]))
        await pool.grade(job("cpu", ranks=4))
    assert len(dist.jobs) == 6 and plain.jobs == []
    with pytest.raises(RunnerUnavailable, match="no runner can grade jobs that need cpu, ranks:5"):
        await pool.grade(job("cpu", ranks=5))
    with pytest.raises(RunnerUnavailable, match="cuda"):
        await pool.grade(job(["cuda", "onnx"]))


async def test_a_runner_that_answers_unsupported_is_not_asked_again_for_such_jobs() -> None:
    """Its health claimed onnx, but its sandbox could not import it: route onnx jobs elsewhere."""
    liar = FakeRunner(capabilities={"ranks": 1, "features": ["onnx"]},
                      respond=lambda j: {"verdict": "unsupported", "message": "this runner lacks onnx"})
    honest = FakeRunner(capabilities={"ranks": 1, "features": ["onnx"]})
    pool = RunnerPool([RunnerSlot("liar", liar), RunnerSlot("honest", honest)])
    await pool.refresh()
    for _ in range(4):
        result = await pool.grade(job(["cpu", "onnx"]))
        assert result["verdict"] != "unsupported"
    assert len(liar.jobs) == 1 and len(honest.jobs) == 4
    assert not pool.slots[0].can_take(needs_of(["cpu", "onnx"])) and pool.slots[0].can_take(needs_of("cpu"))


async def test_only_items_some_runner_can_grade_are_playable(tmp_path: Path) -> None:
    bank = scenario_bank()
    code = next(i for i in bank.items.values() if i.kind == "code")
    choice = next(i for i in bank.items.values() if i.kind == "choice")
    onnx_item = dataclasses.replace(code, features=("onnx",))
    two_ranks = dataclasses.replace(code, ranks=2)
    svc = await QuizService.open(str(tmp_path / "q.sqlite3"), bank, RunnerPool([RunnerSlot("cpu", FakeRunner())]),
                                 clock=FakeClock(START))
    try:
        await svc.pool.refresh()
        assert svc.playable(code) and svc.playable(choice)
        assert not svc.playable(onnx_item) and not svc.playable(two_ranks)
        svc.pool.slots.append(RunnerSlot("dist", FakeRunner(capabilities={"ranks": 2, "features": ["onnx"]})))
        await svc.pool.refresh()
        assert svc.playable(onnx_item) and svc.playable(two_ranks)
    finally:
        await svc.close()
