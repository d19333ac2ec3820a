"""When a channel's next round opens, and which item it gets.

Pure functions over the channel's schedule and the clock: the service's tick asks
`current_slot` and opens that posting day's round (the storage's unique key makes that
idempotent), so a bot that was down at posting time still posts later in the same window, and
never twice; `next_round` is the one answer to "when is the next round?".
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from questionbank.model import Item
from runner.protocol import capability_words  # torch-free

from .models import Schedule, TopicWeek


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)") from exc


def local_date(schedule: Schedule, now: datetime) -> date:
    return now.astimezone(zone(schedule.timezone)).date()


def posting_at(schedule: Schedule, d: date) -> datetime:
    """The UTC instant of the posting time on local date `d` (zoneinfo handles DST)."""
    local = datetime.combine(d, schedule.post_time, tzinfo=zone(schedule.timezone))
    return local.astimezone(UTC)


@dataclass(frozen=True)
class Slot:
    """One posting day's scheduled round: it may be posted from `start` until `end` (UTC).

    `end` is the start plus the round's duration, but never past the next posting day's start,
    so windows never overlap and a scheduled round is never cut short by the next one. `opens`
    is when it will really be posted: its start, or later when a round that is open then keeps
    its announced end (the scheduler never closes a round early; the day's round waits)."""

    day: date
    start: datetime
    end: datetime
    opens: datetime

    @property
    def waits(self) -> bool:
        return self.opens > self.start


def _next_weekday(schedule: Schedule, d: date) -> date | None:
    for i in range(1, 8):
        nxt = d + timedelta(days=i)
        if nxt.weekday() in schedule.weekdays:
            return nxt
    return None


def slot_for(schedule: Schedule, d: date) -> Slot:
    start = posting_at(schedule, d)
    end = start + timedelta(minutes=schedule.duration_min)
    nxt = _next_weekday(schedule, d)
    if nxt is not None:
        end = min(end, posting_at(schedule, nxt))
    return Slot(day=d, start=start, end=end, opens=start)


def _lookback_days(schedule: Schedule) -> int:
    return schedule.duration_min // 1440 + 2


def current_slot(schedule: Schedule, now: datetime) -> Slot | None:
    """The posting day whose window contains `now`, if any (a window may cross local midnight:
    23:30 for 2 hours is still Monday's round at 00:15 on Tuesday)."""
    today = local_date(schedule, now)
    for i in range(_lookback_days(schedule) + 1):
        d = today - timedelta(days=i)
        if d.weekday() not in schedule.weekdays:
            continue
        s = slot_for(schedule, d)
        if s.start <= now:
            return s if now < s.end else None
    return None


def slots_between(schedule: Schedule, first: date, last: date) -> Iterator[Slot]:
    """Every posting day's slot from local date `first` to `last`, in order."""
    d = first
    while d <= last:
        if d.weekday() in schedule.weekdays:
            yield slot_for(schedule, d)
        d += timedelta(days=1)


def upcoming_slots(schedule: Schedule, now: datetime, *, taken: Container[date], since: datetime | None = None,
                   horizon_days: int = 400) -> Iterator[Slot]:
    """Pending scheduled rounds in order: posting days not taken (posted, skipped or missed) whose
    window has not ended, counting only posting times at or after `since` (the schedule's start)."""
    if not schedule.weekdays:
        return
    today = local_date(schedule, now)
    for s in slots_between(schedule, today - timedelta(days=_lookback_days(schedule)),
                           today + timedelta(days=horizon_days)):
        if s.end <= now or s.day in taken or (since is not None and s.start < since):
            continue
        yield s


def next_round(schedule: Schedule, now: datetime, *, taken: Container[date], since: datetime | None = None,
               open_until: datetime | None = None) -> Slot | None:
    """THE next scheduled round, as every message tells it: the first pending posting day, posted
    at its start (or now, inside its window), or when the open round ends if that is later and
    still inside the window. A day whose whole window the open round outlasts is passed over."""
    for s in upcoming_slots(schedule, now, taken=taken, since=since):
        opens = max(s.start, now if s.start <= now else s.start, open_until or s.start)
        if opens < s.end:
            return Slot(day=s.day, start=s.start, end=s.end, opens=opens)
    return None


def week_bounds(d: date) -> tuple[date, date]:
    """Monday..Sunday around a local date."""
    start = d - timedelta(days=d.weekday())
    return start, start + timedelta(days=6)


def month_bounds(d: date) -> tuple[date, date]:
    start = d.replace(day=1)
    nxt = (start + timedelta(days=32)).replace(day=1)
    return start, nxt - timedelta(days=1)


def target_difficulty(schedule: Schedule, d: date) -> int | None:
    """Ramp through the week: the first posting weekday asks for difficulty 1, the last for 5."""
    if not schedule.ramp:
        return None
    days = sorted(schedule.weekdays)
    if d.weekday() not in days:
        # a hand-posted round on an off day: place it by weekday anyway
        days = sorted(set(days) | {d.weekday()})
    if len(days) == 1:
        return 3
    idx = days.index(d.weekday())
    return 1 + round(idx * 4 / (len(days) - 1))


def gradable(item: Item, capabilities: Iterable[str]) -> bool:
    """Choice items need no runner; code/output items need a runner offering what they require
    (its device, features and ranks: `runners.needs_of`)."""
    if item.kind == "choice":
        return True
    return item_needs(item) <= set(capabilities)


def item_needs(item: Item) -> frozenset[str]:
    """The capability words a runner must offer to grade this item."""
    return capability_words(item.requires, item.features, item.ranks)


@dataclass(frozen=True)
class Pick:
    item: Item
    topic_fallback: bool  # the topic week's pool had nothing gradable, so the whole bank was used


def pick_item(items: Iterable[Item], *, capabilities: Iterable[str], uses: Mapping[str, int],
              week: TopicWeek | None, on: date, schedule: Schedule, seed: str = "") -> Pick | None:
    """Choose the round's item.

    Pool: gradable items, restricted to the topic week when one is active. Among the pool, only
    the least-used items in this channel are candidates (no repeats until the pool is exhausted),
    then the ramp prefers the difficulty closest to the day's target. Ties are broken by a
    deterministic shuffle (seeded by channel and date) so a retried tick picks the same item.
    """
    caps = set(capabilities)
    pool = [it for it in items if gradable(it, caps)]
    fallback = False
    if week is not None:
        scoped = [it for it in pool if week.matches(it.chapter, it.section)]
        if scoped:
            pool = scoped
        else:
            fallback = True
    if not pool:
        return None
    least = min(uses.get(it.id, 0) for it in pool)
    candidates = sorted((it for it in pool if uses.get(it.id, 0) == least), key=lambda it: it.id)
    target = target_difficulty(schedule, on)
    if target is not None:
        best = min(abs(it.difficulty - target) for it in candidates)
        candidates = [it for it in candidates if abs(it.difficulty - target) == best]
    rng = random.Random(zlib.crc32(f"{seed}|{on.isoformat()}|{least}".encode()))
    return Pick(item=rng.choice(candidates), topic_fallback=fallback)
