"""When a channel's next round opens, and which item it gets.

Pure functions over the channel's schedule and the clock: the service's tick asks `due_date`
and opens the day's round (the storage's unique key makes that idempotent), so a bot that was
down at posting time still posts later in the same window, and never twice.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Iterable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from questionbank.model import Item

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
    return local.astimezone(timezone.utc)


def due_date(schedule: Schedule, now: datetime) -> date | None:
    """The local date whose scheduled round should be open now, if any: a posting weekday,
    past the posting time and still inside the round's open window."""
    today = local_date(schedule, now)
    if today.weekday() not in schedule.weekdays:
        return None
    start = posting_at(schedule, today)
    if start <= now < start + timedelta(minutes=schedule.duration_min):
        return today
    return None


def next_posting(schedule: Schedule, now: datetime) -> datetime | None:
    """The next posting instant at or after `now` (None when no weekday is set)."""
    if not schedule.weekdays:
        return None
    d = local_date(schedule, now)
    for i in range(8):
        day = d + timedelta(days=i)
        if day.weekday() in schedule.weekdays:
            at = posting_at(schedule, day)
            if at >= now:
                return at
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
    """Choice items need no runner; code/output items need a runner offering what they require."""
    if item.kind == "choice":
        return True
    return item.requires in set(capabilities)


@dataclass(frozen=True)
class Pick:
    item: Item
    topic_fallback: bool  # the topic week's pool had nothing gradable, so the whole bank was used
    reused: bool  # the pool was exhausted, so an item is repeated


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
    return Pick(item=rng.choice(candidates), topic_fallback=fallback, reused=least > 0)
