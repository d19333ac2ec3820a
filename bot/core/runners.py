"""Routing grading jobs across one or more runners by capability.

The runner client (runner/client.py) speaks HTTP to one runner; this pool knows which runner
can take which job (`cuda` jobs only to runners that reported a device), fails over when one
is unreachable, and tells the scheduler what the runners can grade at all.

Backoff is per runner outage, not per answer: the first failed call marks the runner down and
sets when it is probed next (`retry_s`, doubling up to `retry_max_s` with each failed probe);
until then jobs for it fail at once without a call, and the answers wait for that moment. A
probe is a health check; when it answers, the runner is up and everything waiting is graded.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from runner.client import RunnerUnavailable  # torch-free
from runner.protocol import Capabilities, Verdict, capability_words, parse_requires  # torch-free

log = logging.getLogger(__name__)


class GradingClient(Protocol):
    async def grade(self, job: dict[str, Any]) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...


def needs_of(requires: Any, ranks: int = 1) -> frozenset[str]:
    """What a job needs from a runner, as capability words (its device, features, ranks)."""
    device, features = parse_requires(requires)
    return capability_words(device, features, ranks)


@dataclass
class RunnerSlot:
    name: str
    client: GradingClient
    cuda: bool | None = None  # None: not known yet (health never answered)
    cuda_hint: bool = False  # what the config says, used until health answers
    reachable: bool = True
    retry_at: datetime | None = None  # down: when it is probed next (None: up)
    backoff_s: float = 0.0  # down: the wait before that probe
    down_since: datetime | None = None
    caps: Capabilities | None = None  # from its last health answer
    refused: set[frozenset[str]] = field(default_factory=set)  # needs it answered `unsupported` for

    @property
    def has_cuda(self) -> bool:
        return self.cuda if self.cuda is not None else self.cuda_hint

    @property
    def offers(self) -> frozenset[str]:
        """What it can grade: from its health once it answered, else the config's hint."""
        base = self.caps.offers() if self.caps is not None else frozenset({"cpu"})
        return (base | {"cuda"}) if self.has_cuda else (base - {"cuda"})

    def can_take(self, needs: frozenset[str]) -> bool:
        return needs <= self.offers and needs not in self.refused

    def learn(self, health: dict[str, Any]) -> None:
        self.caps = Capabilities.from_health(health)
        self.cuda = self.caps.can_run("cuda")
        self.refused.clear()


class RunnerWaiting(RunnerUnavailable):
    """Every runner that could take the job is down and not due for a probe before `retry_at`."""

    def __init__(self, message: str, retry_at: datetime) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class RunnerPool:
    def __init__(self, slots: list[RunnerSlot], *, retry_s: float = 5.0, retry_max_s: float = 30.0) -> None:
        self.slots = slots
        self._rr = itertools.count()
        self.retry_s = retry_s
        self.retry_max_s = retry_max_s
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.on_up: Callable[[RunnerSlot], None] = lambda slot: None  # a runner answered again

    def configure(self, *, now: Callable[[], datetime], retry_s: float, retry_max_s: float) -> None:
        """The clock and backoff of the service using this pool (the core's clock in tests)."""
        self.now = now
        self.retry_s = max(0.01, retry_s)
        self.retry_max_s = max(self.retry_s, retry_max_s)

    # ---------------------------------------------------------------- outages

    def _down(self, slot: RunnerSlot, exc: object) -> None:
        """A call to the runner failed. The first failure of an outage sets the first probe; a
        failure at or after the probe time (a failed probe) doubles the wait; failures of calls
        that were already under way when the outage began change nothing."""
        now = self.now()
        slot.reachable = False
        if slot.retry_at is None:
            slot.down_since = now
            slot.backoff_s = self.retry_s
            log.warning("runner %s is unreachable (%s); answers wait, probing its health in %.0f s",
                        slot.name, exc, slot.backoff_s)
        elif now >= slot.retry_at:
            slot.backoff_s = min(self.retry_max_s, max(self.retry_s, slot.backoff_s * 2))
            log.info("runner %s still unreachable (%s); next probe in %.0f s", slot.name, exc, slot.backoff_s)
        else:
            return
        slot.retry_at = now + timedelta(seconds=slot.backoff_s)

    def _up(self, slot: RunnerSlot) -> None:
        slot.reachable = True
        if slot.retry_at is not None:
            since = slot.down_since
            slot.retry_at = None
            slot.backoff_s = 0.0
            slot.down_since = None
            log.info("runner %s answers again%s; grading what waited", slot.name,
                     f" after {(self.now() - since).total_seconds():.1f} s" if since else "")
            self.on_up(slot)

    def waiting(self, slot: RunnerSlot) -> bool:
        """Down, and its next probe is not due yet."""
        return slot.retry_at is not None and self.now() < slot.retry_at

    def all_waiting(self) -> datetime | None:
        """When every runner is down and none is due for a probe: the first probe; else None."""
        if not self.slots or not all(self.waiting(s) for s in self.slots):
            return None
        return self.next_probe()

    def next_probe(self) -> datetime | None:
        due = [s.retry_at for s in self.slots if s.retry_at is not None]
        return min(due) if due else None

    async def probe_due(self) -> bool:
        """Health-check every down runner whose probe is due; True when one of them is back."""
        back = False
        for slot in self.slots:
            if slot.retry_at is None or self.waiting(slot):
                continue
            try:
                health = await slot.client.health()
            except Exception as exc:  # noqa: BLE001 - any failure means "still down"
                self._down(slot, exc)
                continue
            with contextlib.suppress(Exception):
                slot.learn(health)
            self._up(slot)
            back = True
        return back

    @classmethod
    def single(cls, client: GradingClient, *, name: str = "runner", cuda: bool | None = None) -> RunnerPool:
        return cls([RunnerSlot(name, client, cuda=cuda)])

    async def refresh(self) -> None:
        """Ask every runner for its capabilities; unreachable ones keep their config hint."""
        for slot in self.slots:
            try:
                health = await slot.client.health()
            except Exception as exc:  # noqa: BLE001 - any failure means "not known now"
                if slot.retry_at is None:
                    log.warning("runner %s: health check failed: %s", slot.name, exc)
                self._down(slot, exc)
                continue
            slot.learn(health)
            self._up(slot)

    def needs_refresh(self) -> bool:
        """A runner that was down at start (or since) is asked again, so a GPU runner that comes
        up after the bot still gets its cuda items."""
        return any(s.cuda is None or not s.reachable for s in self.slots)

    def capabilities(self) -> set[str]:
        """What the configured runners can grade, together: {'cpu'}, {'cpu', 'cuda', 'onnx',
        'ranks:2', ...}; empty with no runner. See `can_grade` for one job's needs."""
        return set().union(*(s.offers for s in self.slots)) if self.slots else set()

    def can_grade(self, needs: frozenset[str]) -> bool:
        """Whether one configured runner offers everything these needs name."""
        return any(s.can_take(needs) for s in self.slots)

    async def close(self) -> None:
        """Close the runner clients' kept-alive connections."""
        for slot in self.slots:
            close = getattr(slot.client, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    def describe(self) -> str:
        if not self.slots:
            return "no runner configured"
        return ", ".join(f"{s.name} ({'cuda' if s.has_cuda else 'cpu'}{'' if s.reachable else ', unreachable'})"
                         for s in self.slots)

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        """Send to a capable runner, failing over; RunnerUnavailable when none answers."""
        needs = needs_of(job.get("requires", "cpu"), int(job.get("ranks", 1)))
        capable = [s for s in self.slots if s.can_take(needs)]
        if not capable:
            raise RunnerUnavailable(f"no runner can grade jobs that need {', '.join(sorted(needs))}")
        start = next(self._rr) % len(capable)
        order = capable[start:] + capable[:start]
        # reachable runners first, then those due for a probe; those waiting for theirs are not called
        order.sort(key=lambda s: not s.reachable)
        waiting = [s for s in order if self.waiting(s)]
        order = [s for s in order if not self.waiting(s)]
        if not order:
            first = min(s.retry_at for s in waiting if s.retry_at is not None)
            raise RunnerWaiting(f"{', '.join(s.name for s in waiting)} unreachable; next probe at "
                                f"{first:%H:%M:%S}", first)
        last: Exception | None = None
        for slot in order:
            if slot.retry_at is not None:  # due for a probe: ask its health before sending work
                try:
                    await slot.client.health()
                except Exception as exc:  # noqa: BLE001
                    self._down(slot, exc)
                    last = RunnerUnavailable(f"{slot.name}: {exc}")
                    continue
            try:
                result = await slot.client.grade(job)
            except RunnerUnavailable as exc:
                self._down(slot, exc)
                last = exc
                continue
            self._up(slot)
            if result.get("verdict") == Verdict.UNSUPPORTED.value:
                if "cuda" in needs and "no CUDA" in str(result.get("message")):
                    slot.cuda = False  # it told us it has no device: route elsewhere from now on
                slot.refused.add(needs)  # it cannot run such jobs: route them elsewhere until it answers health again
                last = RunnerUnavailable(f"{slot.name} cannot run this job: {result.get('message')}")
                continue
            return result
        nxt = [s.retry_at for s in capable if s.retry_at is not None]
        if nxt and all(s.retry_at is not None for s in capable):
            raise RunnerWaiting(str(last) if last else "no runner answered", min(nxt))
        raise RunnerUnavailable(str(last) if last else "no runner answered")

