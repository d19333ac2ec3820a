"""Weekly and monthly digests for managers: text, a PNG chart and a CSV export.

Built from the score rows and rounds of one channel and one channel-local period, compared
with the period before for the movers. matplotlib is imported lazily with the Agg backend so
a headless bot never needs a display and start-up stays fast.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from ..storage.repos import Store
from .leaderboards import range_totals, rank_rows
from .models import Channel, LeaderboardRow
from .scheduler import local_date, month_bounds, week_bounds


@dataclass
class Digest:
    channel: str
    period: str  # week | month
    start: date
    end: date
    rounds: int
    answers: int
    active_players: int
    per_day: list[tuple[date, int, int]]  # (date, players, answers)
    chapters: list[tuple[int, int, int]]  # (chapter, player-rounds attempted, solved)
    top: list[LeaderboardRow]
    movers: list[tuple[str, int, int | None]]  # (name, rank now, rank before or None if new)
    notes: list[str] = field(default_factory=list)


def period_bounds(period: str, today: date, *, last: bool = False) -> tuple[date, date]:
    if period == "month":
        start, end = month_bounds(today)
        if last:
            start, end = month_bounds(start - timedelta(days=1))
        return start, end
    start, end = week_bounds(today)
    if last:
        start, end = start - timedelta(days=7), end - timedelta(days=7)
    return start, end


def previous(period: str, start: date) -> tuple[date, date]:
    if period == "month":
        return month_bounds(start - timedelta(days=1))
    return start - timedelta(days=7), start - timedelta(days=1)


async def build_digest(store: Store, channel: Channel, period: str, now: datetime, *, last: bool = False) -> Digest:
    today = local_date(channel.schedule, now)
    start, end = period_bounds(period, today, last=last)
    a, b = start.isoformat(), end.isoformat()
    per_day_rows = await store.db.fetchall(
        "SELECT local_date, COUNT(DISTINCT player_id), COUNT(*) FROM scores WHERE channel_id = ?"
        " AND local_date >= ? AND local_date <= ? GROUP BY local_date", (channel.id, a, b))
    by_day = {r[0]: (r[1], r[2]) for r in per_day_rows}
    last_day = min(end, today) if not last else end
    per_day = []
    d = start
    while d <= last_day:
        players, answers = by_day.get(d.isoformat(), (0, 0))
        per_day.append((d, players, answers))
        d += timedelta(days=1)
    chapters = await store.db.fetchall(
        "SELECT chapter, COUNT(*), SUM(s) FROM (SELECT chapter, round_id, player_id, MAX(solved) AS s"
        " FROM scores WHERE channel_id = ? AND local_date >= ? AND local_date <= ?"
        " GROUP BY round_id, player_id) GROUP BY chapter ORDER BY chapter", (channel.id, a, b))
    active = await store.db.fetchone(
        "SELECT COUNT(DISTINCT player_id), COUNT(*) FROM scores WHERE channel_id = ? AND local_date >= ?"
        " AND local_date <= ?", (channel.id, a, b))
    rounds = await store.rounds.in_range(channel.id, start, end)
    now_raw = await range_totals(store, channel.id, start, end)
    p_start, p_end = previous(period, start)
    before_raw = await range_totals(store, channel.id, p_start, p_end)
    names = await store.players.names([r[0] for r in now_raw] + [r[0] for r in before_raw])
    ranked_now = rank_rows(now_raw, names, None)
    ranked_before = {r.player_id: r.rank for r in rank_rows(before_raw, names, None)}
    movers: list[tuple[str, int, int | None]] = []
    scored = []
    for r in ranked_now:
        before = ranked_before.get(r.player_id)
        gain = (before if before is not None else len(ranked_before) + 1) - r.rank
        if gain > 0:
            scored.append((gain, r.rank, r.name, before))
    for gain, rank, name, before in sorted(scored, key=lambda x: (-x[0], x[1]))[:3]:
        movers.append((name, rank, before))
    return Digest(
        channel=channel.ref.name or channel.ref.channel, period=period, start=start, end=end,
        rounds=len(rounds), answers=int(active[1]) if active else 0,
        active_players=int(active[0]) if active else 0, per_day=per_day,
        chapters=[(c[0], c[1], c[2] or 0) for c in chapters], top=ranked_now[:5], movers=movers,
    )


def render_digest(d: Digest) -> str:
    lines = [f"{'Weekly' if d.period == 'week' else 'Monthly'} summary for #{d.channel}, {d.start} to {d.end}",
             f"Rounds: {d.rounds}   answers: {d.answers}   active players: {d.active_players}"]
    if d.per_day and d.period == "week":
        lines.append("Players per day: " + ", ".join(f"{day:%a %d} {players}" for day, players, _ in d.per_day))
    elif d.per_day:  # a month day by day is a wall of zeros: the chart has that; here the gist
        busy = [(players, day) for day, players, _ in d.per_day if players]
        line = f"Days with answers: {len(busy)} of {len(d.per_day)}"
        if busy:
            players, day = max(busy, key=lambda x: (x[0], -x[1].toordinal()))
            line += f"; busiest {day:%a %d} ({players} player{'s' if players != 1 else ''})"
        lines.append(line)
    if d.chapters:
        lines.append("Solve rate per chapter: " + ", ".join(
            f"ch.{c} {solved}/{tried} ({solved / tried:.0%})" for c, tried, solved in d.chapters if tried))
    if d.top:
        lines.append("Top players: " + ", ".join(f"{r.rank}. {r.name} ({r.points:g})" for r in d.top))
    if d.movers:
        lines.append("Biggest movers: " + ", ".join(
            f"{name} (now {rank}, {'new' if before is None else f'was {before}'})" for name, rank, before in d.movers))
    if not d.answers:
        lines.append("Nobody answered in this period.")
    return "\n".join(lines)


def digest_chart(d: Digest) -> bytes:
    """A PNG with participation per day and solve rate per chapter."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6), dpi=100)
    ax1, ax2 = fig.subplots(1, 2)
    # the whole period on the axis (days still to come stay empty), so a Monday chart reads as
    # the start of a week, not as one wide bar
    counts = {day: players for day, players, _ in d.per_day}
    span = [d.start + timedelta(days=i) for i in range((d.end - d.start).days + 1)]
    fmt = "%a %d" if d.period == "week" else "%d"
    ax1.bar([day.strftime(fmt) for day in span], [counts.get(day, 0) for day in span], color="#4c72b0")
    ax1.set_title("Players per day")
    ax1.tick_params(axis="x", labelrotation=60 if d.period != "week" else 0, labelsize=7)
    ax1.yaxis.get_major_locator().set_params(integer=True)
    labels = [f"ch.{c}" for c, _, _ in d.chapters]
    rates = [(s / t * 100) if t else 0 for _, t, s in d.chapters]
    bars = ax2.barh(labels or ["-"], rates or [0], color="#55a868")
    if d.chapters:  # the counts behind each rate; a 0 % bar is otherwise invisible
        ax2.bar_label(bars, labels=[f" {s}/{t}" for _, t, s in d.chapters], fontsize=8)
    ax2.set_xlim(0, 100)
    ax2.set_title("Solve rate per chapter (%)")
    fig.suptitle(f"#{d.channel}: {d.start} to {d.end}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


CSV_COLUMNS = ["local_date", "round_id", "item_id", "chapter", "player", "user_id", "answer_id", "submitted_at",
               "verdict", "fraction", "attempt_value", "points", "first_bonus", "streak_bonus", "solved", "streak"]


async def export_csv(store: Store, channel: Channel, start: date | None, end: date | None) -> bytes:
    """Every score row of the channel (in a date range if given), one line per graded answer."""
    where = "s.channel_id = ?"
    params: list[object] = [channel.id]
    if start is not None and end is not None:
        where += " AND s.local_date >= ? AND s.local_date <= ?"
        params += [start.isoformat(), end.isoformat()]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    async with store.db.conn.execute(
            "SELECT s.local_date, s.round_id, r.item_id, s.chapter, p.name, p.user_id, s.answer_id, a.submitted_at,"
            " a.verdict, a.fraction, s.attempt_value, s.points, s.first_bonus, s.streak_bonus, s.solved, s.streak"
            " FROM scores s JOIN rounds r ON r.id = s.round_id JOIN players p ON p.id = s.player_id"
            f" JOIN answers a ON a.id = s.answer_id WHERE {where} ORDER BY s.answer_id", params) as cur:
        async for row in cur:
            w.writerow(list(row))
    return buf.getvalue().encode("utf-8")
