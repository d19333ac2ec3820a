"""Fixtures for the bot tests: a real SQLite file per test, a fake clock, a fake runner."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from bot.core import Actor, ChannelRef, CoreSettings, FakeClock, Message, RoleRules, RunnerPool
from bot.core.service import QuizService

from .helpers import FakeRunner, MiniBank, choice_item, code_item, output_item

MONDAY = datetime(2025, 1, 6, 6, 0, tzinfo=timezone.utc)  # 07:00 in Berlin
WHERE = ChannelRef("test", "ws", "C1", "quiz")
MOD = Actor("test", "mod", "Mona")
ALICE = Actor("test", "alice", "Alice")
BOB = Actor("test", "bob", "Bob")
CAROL = Actor("test", "carol", "Carol")
MANAGER = Actor("test", "boss", "Boss")


def default_bank() -> MiniBank:
    items = [code_item(f"c{ch}-{d}", chapter=ch, difficulty=d) for ch in (1, 2) for d in range(1, 6)]
    items += [output_item("o1"), choice_item("q1"), code_item("gpu1", chapter=1, difficulty=3, requires="cuda")]
    return MiniBank.of(*items)


def settings(**kw: Any) -> CoreSettings:
    return CoreSettings(roles=RoleRules(moderators=frozenset({"mod"}), managers=frozenset({"boss"}),
                                        moderator_roles=frozenset({"quiz-mod"})), **kw)


@dataclass
class Harness:
    path: Path
    clock: FakeClock
    runner: FakeRunner
    bank: MiniBank
    svc: QuizService
    sent: list[Message] = field(default_factory=list)
    services: list[QuizService] = field(default_factory=list)  # every instance, for teardown

    async def sink(self, ref: ChannelRef, msg: Message) -> str | None:
        self.sent.append(msg)
        return f"thread-{msg.round_id}" if msg.kind == "round_open" else None

    async def cmd(self, actor: Actor, text: str, where: ChannelRef = WHERE) -> list[Message]:
        out = await self.svc.command(actor, where, text)
        await self.svc.deliver()  # what the background dispatcher does right away
        return out

    async def answer(self, actor: Actor, text: str, where: ChannelRef = WHERE) -> list[Message]:
        return await self.svc.submit(actor, where, text)

    def kinds(self, kind: str) -> list[Message]:
        return [m for m in self.sent if m.kind == kind]

    async def restart(self, **kw: Any) -> "Harness":
        """A new service on the same SQLite file, as after a crash or a deploy."""
        await self.svc.db.close()
        svc = await QuizService.open(str(self.path), self.bank, RunnerPool.single(self.runner), clock=self.clock,
                                     settings=kw.pop("settings", self.svc.settings))
        h = Harness(self.path, self.clock, self.runner, self.bank, svc, self.sent, self.services)
        self.services.append(svc)
        svc.sink = h.sink
        await svc.start(background=False)
        return h

    async def points(self, actor: Actor, period: str = "all") -> float:
        out = await self.cmd(actor, f"leaderboard {period}")
        for row in out[0].data.get("rows", []):
            if row["name"] == actor.name:
                return row["points"]
        return 0.0

    async def board(self, period: str = "all") -> list[tuple[int, str, float]]:
        out = await self.cmd(ALICE, f"leaderboard {period}")
        return [(r["rank"], r["name"], r["points"]) for r in out[0].data["rows"]]


async def make_harness(tmp_path: Path, *, bank: MiniBank | None = None, runner: FakeRunner | None = None,
                       start: datetime = MONDAY, core: CoreSettings | None = None) -> Harness:
    clock = FakeClock(start)
    runner = runner or FakeRunner()
    bank = bank or default_bank()
    path = tmp_path / "quiz.sqlite3"
    svc = await QuizService.open(str(path), bank, RunnerPool.single(runner), clock=clock, settings=core or settings())
    h = Harness(path, clock, runner, bank, svc, services=[svc])
    svc.sink = h.sink
    await svc.start(background=False)
    return h


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path)
    yield harness
    for svc in harness.services:
        await svc.close()


@pytest.fixture
async def hb(tmp_path: Path) -> AsyncIterator[Harness]:
    """A harness with the channel enabled, 09:00 Berlin Mon-Fri, open 8 hours."""
    harness = await make_harness(tmp_path)
    await harness.cmd(MOD, "enable")
    await harness.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    yield harness
    for svc in harness.services:
        await svc.close()


PASS = "```python\ndef solve(x):\n    return x * 2  # PASS\n```"
FAIL = "```python\ndef solve(x):\n    return x\n```"
HALF = "```python\ndef solve(x):\n    return x  # HALF\n```"
INTERNAL = "```python\n# INTERNAL\n```"
ONE_HOUR = timedelta(hours=1)


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Any]:
    """`h = await make(bank=...)`: harnesses closed at teardown even when the test fails
    (an open aiosqlite thread would keep pytest from exiting)."""
    made: list[Harness] = []

    async def factory(sub: str = "", **kw: Any) -> Harness:
        harness = await make_harness(tmp_path / sub if sub else tmp_path, **kw)
        made.append(harness)
        return harness

    factory.made = made  # type: ignore[attr-defined]
    yield factory
    for harness in made:
        for svc in harness.services:
            await svc.close()
