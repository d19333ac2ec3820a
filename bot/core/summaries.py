"""Weekly and monthly digests for managers: text, a PNG chart and a CSV export.

Built from the score rows and rounds of one channel and one channel-local period, compared
with the period before for the movers. matplotlib is imported lazily with the Agg backend so
a headless bot never needs a display and start-up stays fast.
"""
from __future__ import annotations

import csv
import functools
import io
import textwrap
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from questionbank.render import mistake_hint

from ..storage.repos import Store
from .leaderboards import rank_rows
from .models import Channel, LeaderboardRow, plural
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
    # the period before, for comparison: its rounds, answers, active players and players per day
    previous: tuple[int, int, int] = (0, 0, 0)
    previous_per_day: list[tuple[date, int]] = field(default_factory=list)
    points_before: dict[int, float] = field(default_factory=dict)  # player id -> points the period before
    language: str = "en"
    sections: list[tuple[str, int, int]] = field(default_factory=list)  # (section id, tried, solved)
    mistakes: list[tuple[str, str, int]] = field(default_factory=list)  # (question title, mistake, players)
    practice: tuple[int, int] = (0, 0)  # players who practised, questions they solved

    @property
    def unit(self) -> str:
        return "week" if self.period == "week" else "month"


def chapter_name(chapter: int, language: str = "en") -> str:
    """The outline's title of a chapter ("Tensor operations"), or "chapter N" without one."""
    heading = _chapter_headings().get(str(chapter))
    name = getattr(heading, language, "") or getattr(heading, "en", "") if heading else ""
    return name or f"chapter {chapter}"


@functools.lru_cache(maxsize=1)
def _chapter_headings() -> dict[str, object]:
    try:
        from questionbank.outline import load_outline

        return dict(load_outline().chapters)
    except Exception:  # noqa: BLE001 - a name is a nicety; the number still says which chapter
        return {}


def section_name(section: str, language: str = "en") -> str:
    """The outline's title of a section ("3.2 Gradients and the graph"), or "section 3.2"."""
    heading = _section_headings().get(section)
    name = getattr(heading, language, "") or getattr(heading, "en", "") if heading else ""
    return f"{section} {name}" if name else f"section {section}"


@functools.lru_cache(maxsize=1)
def _section_headings() -> dict[str, object]:
    try:
        from questionbank.outline import load_outline
        return dict(load_outline().sections)
    except Exception:  # noqa: BLE001 - as for chapters
        return {}


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


async def build_digest(store: Store, channel: Channel, period: str, now: datetime, *, last: bool = False,
                       bank: Any = None) -> Digest:
    """`bank` (the question bank) names what the period's rounds taught: mastery per outline
    section, and the known mistakes answers behaved like."""
    today = local_date(channel.schedule, now)
    start, end = period_bounds(period, today, last=last)
    by_day = {a.day: (a.players, a.answers) for a in await store.stats.per_day(channel.id, start, end)}
    last_day = min(end, today) if not last else end
    per_day = []
    d = start
    while d <= last_day:
        players, answers = by_day.get(d, (0, 0))
        per_day.append((d, players, answers))
        d += timedelta(days=1)
    chapters = await store.stats.chapter_solves(channel.id, start, end)
    active = await store.stats.activity(channel.id, start, end)
    rounds = await store.rounds.in_range(channel.id, start, end)
    now_raw = await store.stats.range_totals(channel.id, start, end)
    p_start, p_end = previous(period, start)
    before_raw = await store.stats.range_totals(channel.id, p_start, p_end)
    names = await store.players.names([r.player_id for r in now_raw] + [r.player_id for r in before_raw])
    ranked_now = rank_rows(now_raw, names, None)
    ranked_before = {r.player_id: r.rank for r in rank_rows(before_raw, names, None)}
    movers: list[tuple[str, int, int | None]] = []
    scored = []
    for r in ranked_now:
        before = ranked_before.get(r.player_id)
        gain = (before if before is not None else len(ranked_before) + 1) - r.rank
        if gain > 0:
            scored.append((gain, r.rank, r.name, before))
    for _gain, rank, name, before in sorted(scored, key=lambda x: (-x[0], x[1]))[:3]:
        movers.append((name, rank, before))
    prev_active = await store.stats.activity(channel.id, p_start, p_end)
    prev_rounds = await store.rounds.in_range(channel.id, p_start, p_end)
    prev_days = {a.day: a.players for a in await store.stats.per_day(channel.id, p_start, p_end)}
    prev_span = [p_start + timedelta(days=i) for i in range((p_end - p_start).days + 1)]
    previous_per_day = [(day, prev_days.get(day, 0)) for day in prev_span]
    lang = channel.schedule.language
    sections: dict[str, list[int]] = {}
    mistakes: list[tuple[str, str, int]] = []
    if bank is not None:
        for item_id, _pid, solved in await store.stats.item_solves(channel.id, start, end):
            item = bank.items.get(item_id)
            if item is not None:
                tried_solved = sections.setdefault(item.section, [0, 0])
                tried_solved[0] += 1
                tried_solved[1] += solved
        for item_id, index, _n, players in await store.stats.common_mistakes(channel.id, start, end):
            item = bank.items.get(item_id)
            hint = mistake_hint(item, index) if item is not None else None
            if item is not None and hint is not None:
                mistakes.append((item.title.get(lang), hint.get(lang), players))
    return Digest(
        sections=[(sec, t, s) for sec, (t, s) in sorted(sections.items(), key=lambda kv: _section_key(kv[0]))],
        mistakes=mistakes, practice=await store.stats.practice_activity(channel.id, start, end),
        previous=(len(prev_rounds), prev_active.answers, prev_active.players),
        previous_per_day=previous_per_day, points_before={r.player_id: float(r.points) for r in before_raw},
        language=channel.schedule.language,
        channel=channel.ref.name or channel.ref.channel, period=period, start=start, end=end,
        rounds=len(rounds), answers=active.answers,
        active_players=active.players, per_day=per_day,
        chapters=[(c.chapter, c.tried, c.solved) for c in chapters], top=[r for r in ranked_now if r.points > 0][:5],
        movers=movers,
    )


def render_digest(d: Digest) -> str:
    lines = [f"{'Weekly' if d.period == 'week' else 'Monthly'} summary for #{d.channel}, {d.start} to {d.end}",
             f"Rounds: {d.rounds}   answers: {d.answers}   active players: {d.active_players}",
             f"The {d.unit} before: {plural(d.previous[0], 'round')}, {plural(d.previous[1], 'answer')}, "
             f"{plural(d.previous[2], 'active player')}"]
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
        lines.append("Solved per chapter (players who solved the round / players who tried it): " + ", ".join(
            f"{chapter_name(c, d.language)} {solved}/{tried} ({solved / tried:.0%})"
            for c, tried, solved in d.chapters if tried))
    if d.sections:
        lines.append("Mastery per section (solved / tried): " + ", ".join(
            f"{section_name(sec, d.language)} {solved}/{tried} ({solved / tried:.0%})"
            for sec, tried, solved in d.sections if tried))
    if d.mistakes:
        lines.append("Most common mistakes (recognised in failed answers):")
        lines += [f"- {title}: {text} ({plural(players, 'player')})" for title, text, players in d.mistakes]
    if d.practice[0]:
        lines.append(f"Practice: {plural(d.practice[0], 'player')} solved "
                     f"{plural(d.practice[1], 'private question')} (`/quiz practice`, `/quiz review`).")
    if d.top:
        lines.append("Top players: " + ", ".join(f"{r.rank}. {r.name} ({r.points:g})" for r in d.top))
    if d.movers:
        lines.append("Biggest movers: " + ", ".join(
            f"{name} (now {rank}, {'new' if before is None else f'was {before}'})" for name, rank, before in d.movers))
    if not d.answers:
        lines.append("Nobody answered in this period.")
    return "\n".join(lines)


def _section_key(section: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in section.split("."))


def _period_label(period: str, start: date) -> str:
    return f"{start:%B %Y}" if period == "month" else f"week of {start:%d %b %Y}"


def _short(text: str, width: int = 26) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def digest_chart(d: Digest) -> bytes:
    """A PNG: players per day against the period before, the share of players who solved each
    chapter's rounds, and the top players' points against the period before."""
    buf = io.BytesIO()
    digest_figure(d).savefig(buf, format="png")
    return buf.getvalue()


def digest_figure(d: Digest):  # noqa: ANN201 - a matplotlib Figure, imported lazily
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 4.6), dpi=100)
    ax1, ax2, ax3 = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.25, 1.2, 1]})
    this, last = _period_label(d.period, d.start), _period_label(d.period, previous(d.period, d.start)[0])
    # players per day: the whole period on the axis (days still to come stay empty), the period
    # before as grey outlines on the same weekday / day of the month
    counts = {day: players for day, players, _ in d.per_day}
    span = [d.start + timedelta(days=i) for i in range((d.end - d.start).days + 1)]
    xs = list(range(len(span)))
    before = [players for _, players in d.previous_per_day][: len(span)]
    ax1.bar([x - 0.2 for x in range(len(before))], before, width=0.4, color="#cccccc", label=last)
    ax1.bar([x + 0.2 for x in xs], [counts.get(day, 0) for day in span], width=0.4, color="#4c72b0", label=this)
    if d.period == "week":
        ax1.set_xticks(xs, [day.strftime("%a\n%d %b") for day in span], fontsize=8)
    else:  # a month: a label every few days, upright, so the 30 labels do not pile up
        ticks = [i for i, day in enumerate(span) if day.day == 1 or day.day % 5 == 0]
        ax1.set_xticks(ticks, [str(span[i].day) for i in ticks], fontsize=8)
        ax1.set_xlabel(f"day of {d.start:%B %Y}", fontsize=8)
    ax1.set_ylim(0, max([1, *before, *counts.values()]) * 1.35)  # room for the legend
    ax1.set_ylabel("players who answered", fontsize=8)
    ax1.set_title("Players per day", fontsize=10)
    ax1.yaxis.get_major_locator().set_params(integer=True)
    ax1.legend(fontsize=7, loc="upper right", frameon=False)
    # solve rate per chapter, named
    names = [textwrap.fill(_short(f"{c}. {chapter_name(c)}", 40), 20) for c, _, _ in d.chapters]
    rates = [(s / t * 100) if t else 0 for _, t, s in d.chapters]
    bars = ax2.barh(names or ["(no rounds)"], rates or [0], color="#55a868")
    ax2.invert_yaxis()
    if d.chapters:  # the counts behind each rate; a 0 % bar is otherwise invisible
        ax2.bar_label(bars, labels=[f" {s} of {t} solved" for _, t, s in d.chapters], fontsize=8)
    ax2.set_xlim(0, 130)
    ax2.set_xticks([0, 25, 50, 75, 100])
    ax2.set_xlabel("% of players who tried a round and solved it", fontsize=8)
    ax2.set_title("Solve rate per chapter", fontsize=10)
    ax2.tick_params(axis="y", labelsize=8)
    # top players' points, with the period before
    top = d.top[:5]
    labels = [_short(f"{r.rank}. {r.name}", 18) for r in top]
    pts = [r.points for r in top]
    prev = [d.points_before.get(r.player_id, 0.0) for r in top]
    ys = list(range(len(top)))
    if top:
        h = 0.38
        b_now = ax3.barh([y - h / 2 for y in ys], pts, height=h, color="#dd8452", label=this)
        b_prev = ax3.barh([y + h / 2 for y in ys], prev, height=h, color="#cccccc", label=last)
        ax3.bar_label(b_now, labels=[f" {p:g}" for p in pts], fontsize=8)
        ax3.bar_label(b_prev, labels=[f" {p:g}" for p in prev], fontsize=7, color="#777777")
        ax3.set_yticks(ys, labels, fontsize=8)
        ax3.set_ylim(len(top) + 0.4, -0.6)  # the first at the top, a free row under the last for the legend
        ax3.set_xlim(0, max(pts + prev) * 1.3 or 1)
        ax3.legend(fontsize=7, loc="lower right", frameon=False)
    else:
        ax3.set_yticks([])
        ax3.text(0.5, 0.5, "no points scored", ha="center", va="center", transform=ax3.transAxes, fontsize=9)
    ax3.set_xlabel("points", fontsize=8)
    ax3.set_title("Top players: points", fontsize=10)
    pr, pa, pp = d.previous
    fig.suptitle(f"#{d.channel}, {this}: {plural(d.rounds, 'round')}, {plural(d.answers, 'answer')}, "
                 f"{plural(d.active_players, 'player')}   ({last}: {plural(pr, 'round')}, "
                 f"{plural(pa, 'answer')}, {plural(pp, 'player')})", fontsize=11)
    fig.tight_layout()
    return fig


CSV_COLUMNS = ["local_date", "round_id", "item_id", "chapter", "player", "user_id", "answer_id", "submitted_at",
               "verdict", "fraction", "attempt_points", "first_solver_bonus", "streak_bonus", "attempt_total",
               "added_to_round", "round_total_after", "solved", "streak"]
CSV_NOTE = ("One row per graded answer. attempt_points (after the penalty for earlier failed attempts) "
            "+ first_solver_bonus + streak_bonus = attempt_total. The best attempt counts: added_to_round is "
            "what this answer added to the player's round total, round_total_after that total after it; "
            "the sum of added_to_round is the leaderboard's points.")


async def export_csv(store: Store, channel: Channel, start: date | None, end: date | None) -> bytes:
    """Every score row of the channel (in a date range if given), one line per graded answer:
    its components, its total, and what it changed in the player's round total."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    round_totals: dict[tuple[int, int], float] = {}
    async for r in store.stats.export_rows(channel.id, start, end):
        key = (r.round_id, r.player_id)
        round_totals[key] = round(round_totals.get(key, 0.0) + (r.points or 0.0), 4)
        total = round((r.attempt_value or 0.0) + (r.first_bonus or 0.0) + (r.streak_bonus or 0.0), 4)
        w.writerow([r.local_date, r.round_id, r.item_id, r.chapter, r.player, r.user_id, r.answer_id, r.submitted_at,
                    r.verdict, r.fraction, r.attempt_value, r.first_bonus, r.streak_bonus, total, r.points,
                    round_totals[key], r.solved, r.streak])
    return buf.getvalue().encode("utf-8")
