"""Test doubles at the edge of the core: a small in-memory bank and a fake runner client."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable

from questionbank.model import Item, Option, Text

from bot.core.runners import RunnerUnavailable


def T(en: str, zh: str = "") -> Text:
    return Text(zh=zh or en, en=en)


def code_item(item_id: str, chapter: int = 1, difficulty: int = 2, *, requires: str = "cpu",
              mode: str = "partial", section: int = 1) -> Item:
    return Item(
        id=item_id, kind="code", outline=(f"{chapter}.{section}.1.1",), difficulty=difficulty, tags=("t",),
        requires=requires, title=T(f"Title {item_id}"), prompt=T(f"Write solve for {item_id}"),
        explanation=T(f"Because {item_id}"), entrypoint="solve", starter="def solve(x):\n    ...\n",
        setup="def make_cases():\n    return [{'args': (torch.ones(2),), 'name': 'c1', 'example': True}]\n",
        reference="def solve(x):\n    return x * 2\n", mode=mode,  # type: ignore[arg-type]
    )


def output_item(item_id: str, chapter: int = 2, difficulty: int = 1) -> Item:
    return Item(
        id=item_id, kind="output", outline=(f"{chapter}.1.1.1",), difficulty=difficulty, tags=(),
        requires="cpu", title=T(f"Output {item_id}"), prompt=T("What does this print?"),
        explanation=T("It prints a shape."), snippet="print(torch.zeros(2, 3).shape)",
    )


def choice_item(item_id: str, chapter: int = 3, difficulty: int = 1, correct: tuple[str, ...] = ("B",)) -> Item:
    return Item(
        id=item_id, kind="choice", outline=(f"{chapter}.1.1.1",), difficulty=difficulty, tags=(),
        requires="cpu", title=T(f"Choice {item_id}"), prompt=T("Pick one"), explanation=T("B is right."),
        options=(Option("A", T("first")), Option("B", T("second")), Option("C", T("third"))), correct=correct,
    )


@dataclass
class MiniBank:
    items: dict[str, Item]

    @classmethod
    def of(cls, *items: Item) -> "MiniBank":
        return cls({it.id: it for it in items})


def verdict_for(code: str) -> dict[str, Any]:
    """Deterministic verdicts from the submitted source: the tests write what they want graded."""
    if "PASS" in code or "return x * 2" in code:
        return {"verdict": "passed", "passed_cases": 3, "total_cases": 3, "score": 1.0, "message": "all passed",
                "cases": []}
    if "HALF" in code:
        return {"verdict": "failed", "passed_cases": 1, "total_cases": 2, "score": 0.5, "message": "1 of 2",
                "cases": []}
    if "INTERNAL" in code:
        return {"verdict": "internal", "message": "harness crashed"}
    if "SYNTAX" in code:
        return {"verdict": "invalid", "passed_cases": 0, "total_cases": 3, "message": "syntax error"}
    return {"verdict": "failed", "passed_cases": 0, "total_cases": 3, "score": 0.0, "message": "0 of 3",
            "cases": []}


@dataclass
class FakeRunner:
    """Records jobs, answers from `verdict_for` (or a custom function), can be down."""

    cuda: bool = False
    down: bool = False
    delay: float = 0.0
    jobs: list[dict[str, Any]] = field(default_factory=list)
    respond: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    gate: asyncio.Event | None = None  # when set, gradings wait for it (to hold answers "in flight")
    capabilities: dict[str, Any] | None = None  # health's {"ranks": N, "features": [...]}, if any

    async def health(self) -> dict[str, Any]:
        if self.down:
            raise RunnerUnavailable("fake runner is down")
        health: dict[str, Any] = {"status": "ok", "torch": "fake", "cuda": {"name": "FakeGPU"} if self.cuda else None}
        if self.capabilities is not None:
            health["capabilities"] = self.capabilities
        return health

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        if self.down:
            raise RunnerUnavailable("fake runner is down")
        self.jobs.append(job)
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.down:
            raise RunnerUnavailable("fake runner went down")
        if job["kind"] == "output":
            return {"verdict": "passed", "stdout": "torch.Size([2, 3])\n", "message": ""}
        if self.respond is not None:
            return self.respond(job)
        result = dict(verdict_for(job["submission"]), job_id=job.get("job_id"))
        # a known wrong answer sent verbatim is named, as the real runner names it (which also
        # names any answer that merely behaves alike: tests/runner/test_mistakes.py)
        known = [m.strip() for m in job.get("mistakes") or ()]
        if result["verdict"] in ("failed", "error") and job["submission"].strip() in known:
            result["mistake"] = known.index(job["submission"].strip())
        return result

    def graded_ids(self) -> list[str]:
        return [j.get("job_id", "") for j in self.jobs if j["kind"] == "code"]
