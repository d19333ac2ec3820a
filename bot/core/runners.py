"""Routing grading jobs across one or more runners by capability.

The runner client (runner/client.py) speaks HTTP to one runner; this pool knows which runner
can take which job (`cuda` jobs only to runners that reported a device), fails over when one
is unreachable, and tells the scheduler what the runners can grade at all.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from runner.client import RunnerUnavailable  # torch-free
from runner.protocol import Capabilities, Verdict  # torch-free

log = logging.getLogger(__name__)


class GradingClient(Protocol):
    async def grade(self, job: dict[str, Any]) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...


@dataclass
class RunnerSlot:
    name: str
    client: GradingClient
    cuda: bool | None = None  # None: not known yet (health never answered)
    cuda_hint: bool = False  # what the config says, used until health answers
    reachable: bool = True

    @property
    def has_cuda(self) -> bool:
        return self.cuda if self.cuda is not None else self.cuda_hint


class RunnerPool:
    def __init__(self, slots: list[RunnerSlot]) -> None:
        self.slots = slots
        self._rr = itertools.count()

    @classmethod
    def single(cls, client: GradingClient, *, name: str = "runner", cuda: bool | None = None) -> "RunnerPool":
        return cls([RunnerSlot(name, client, cuda=cuda)])

    async def refresh(self) -> None:
        """Ask every runner for its capabilities; unreachable ones keep their config hint."""
        for slot in self.slots:
            try:
                health = await slot.client.health()
            except Exception as exc:  # noqa: BLE001 - any failure means "not known now"
                log.warning("runner %s: health check failed: %s", slot.name, exc)
                slot.reachable = False
                continue
            slot.reachable = True
            slot.cuda = Capabilities.from_health(health).can_run("cuda")

    def needs_refresh(self) -> bool:
        """A runner that was down at start (or since) is asked again, so a GPU runner that comes
        up after the bot still gets its cuda items."""
        return any(s.cuda is None or not s.reachable for s in self.slots)

    def capabilities(self) -> set[str]:
        """What the configured runners can grade: {'cpu'} or {'cpu', 'cuda'}, empty with no runner."""
        if not self.slots:
            return set()
        caps = {"cpu"}
        if any(s.has_cuda for s in self.slots):
            caps.add("cuda")
        return caps

    def describe(self) -> str:
        if not self.slots:
            return "no runner configured"
        return ", ".join(f"{s.name} ({'cuda' if s.has_cuda else 'cpu'}{'' if s.reachable else ', unreachable'})"
                         for s in self.slots)

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        """Send to a capable runner, failing over; RunnerUnavailable when none answers."""
        need_cuda = job.get("requires") == "cuda"
        capable = [s for s in self.slots if s.has_cuda or not need_cuda]
        if not capable:
            raise RunnerUnavailable(f"no runner can grade {job.get('requires')} jobs")
        start = next(self._rr) % len(capable)
        order = capable[start:] + capable[:start]
        # reachable runners first, but still try the others: they may be back
        order.sort(key=lambda s: not s.reachable)
        last: Exception | None = None
        for slot in order:
            try:
                result = await slot.client.grade(job)
            except RunnerUnavailable as exc:
                slot.reachable = False
                last = exc
                continue
            slot.reachable = True
            if result.get("verdict") == Verdict.UNSUPPORTED.value:
                if need_cuda:
                    slot.cuda = False  # it told us it has no device: route elsewhere from now on
                last = RunnerUnavailable(f"{slot.name} cannot run this job: {result.get('message')}")
                continue
            return result
        raise RunnerUnavailable(str(last) if last else "no runner answered")
