"""Digests that post themselves: the weekly digest of the week before at the chosen weekday and
time, and the monthly one of the month before on the month's first posting day, in each
channel's time zone, to the channel and/or the managers who asked for a direct message.

Each (channel, period, first day, destination) is posted once: a row in `digests` is written in
the transaction that queues the message, so a restart (or two ticks racing) never posts it twice.
A digest missed while the bot was down is posted when it comes back, but only the latest one of
each period, and never one due before the digest was switched on.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from .clock import parse_iso
from .models import Attachment, Block, Channel, Message
from .scheduler import month_bounds, week_bounds, zone
from .settings import DigestSettings
from .summaries import build_digest, digest_chart, render_digest

if TYPE_CHECKING:
    from .service import QuizService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DueDigest:
    period: str  # week | month
    start: date  # the first day of the period it covers
    at: datetime  # when it was due


def parse_hhmm(text: str) -> time | None:
    try:
        hh, mm = text.strip().split(":")
        return time(int(hh), int(mm))
    except (ValueError, AttributeError):
        return None


def digest_when(ch: Channel, defaults: DigestSettings) -> tuple[int, time]:
    """The channel's digest weekday and local time (its own choice, else the config's)."""
    weekday = ch.options.digest_weekday if ch.options.digest_weekday is not None else defaults.weekday
    at = parse_hhmm(ch.options.digest_time) or parse_hhmm(defaults.time) or time(9, 0)
    return weekday, at


def due_digests(ch: Channel, defaults: DigestSettings, now: datetime) -> list[DueDigest]:
    """The digests whose moment has passed: last week's once this week's digest day and time
    came, last month's once this month's first posting day (a weekday the channel posts on) and
    the time came. Never one due before the digest was switched on."""
    tz = zone(ch.schedule.timezone)
    local = now.astimezone(tz)
    today = local.date()
    weekday, at = digest_when(ch, defaults)
    since = parse_iso(ch.options.digest_since) if ch.options.digest_since else None
    out: list[DueDigest] = []
    monday = week_bounds(today)[0]
    week_at = datetime.combine(monday + timedelta(days=weekday), at, tzinfo=tz)
    if local >= week_at and (since is None or week_at >= since):
        out.append(DueDigest("week", monday - timedelta(days=7), week_at))
    first = month_bounds(today)[0]
    posting_days = ch.schedule.weekdays or tuple(range(7))
    day = next(first + timedelta(days=i) for i in range(7) if (first + timedelta(days=i)).weekday() in posting_days)
    month_at = datetime.combine(day, at, tzinfo=tz)
    if local >= month_at and (since is None or month_at >= since):
        out.append(DueDigest("month", month_bounds(first - timedelta(days=1))[0], month_at))
    return out


def destinations(ch: Channel) -> list[str]:
    return (["channel"] if ch.options.digest_channel else []) + [f"dm:{uid}" for uid in ch.options.digest_dms]


async def post_due_digests(svc: QuizService, ch: Channel, now: datetime) -> int:
    """Queue the channel's due digests that are not posted yet; how many were queued."""
    if not ch.options.digest_on:
        return 0
    n = 0
    for due in due_digests(ch, svc.settings.learning.digest, now):
        todo = [d for d in destinations(ch) if not await svc.store.digests.posted(ch.id, due.period, due.start, d)]
        if not todo:
            continue
        digest = await build_digest(svc.store, ch, due.period, now, last=True, bank=svc.bank)
        if digest.start != due.start:  # the clock moved on between the two reads: next tick
            continue
        chart = Attachment(f"quiz-{due.period}-{digest.start}.png", digest_chart(digest), "image/png")
        title = f"{'Weekly' if due.period == 'week' else 'Monthly'} summary (posted automatically)"
        text = render_digest(digest)
        async with svc.db.transaction():
            for dest in todo:
                if not await svc.store.digests.claim(ch.id, due.period, due.start, dest, now):
                    continue
                msg = Message(kind="summary", title=title, blocks=[Block(text)], files=[chart],
                              data={"period": due.period, "start": digest.start.isoformat(),
                                    "end": digest.end.isoformat(), "auto": True})
                if dest.startswith("dm:"):
                    msg.dm, msg.mention = True, dest[3:]
                await svc.store.outbox.add(ch.id, msg, now)
                n += 1
    return n
