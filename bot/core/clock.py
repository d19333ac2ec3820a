"""Time, injectable: the service asks the clock, tests move a fake one through days."""
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """Stands still until told to move; `sleep` yields to the loop without waiting."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        self._now += delta
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when.astimezone(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


def iso(dt: datetime) -> str:
    """Fixed-width UTC text that sorts chronologically."""
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def after(dt: datetime, **kw: float) -> datetime:
    return dt + timedelta(**kw)
