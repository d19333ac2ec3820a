"""Leaderboards and player cards, read from the score rows.

Periods are channel-local: the week is Monday..Sunday and the month the calendar month in the
channel's time zone, the topic week its date range. "month" and "all" read the per-player
monthly totals kept by triggers (a few thousand rows even at a million answers); "week",
"topic" and "round" read the scores index for a few days.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from ..storage.repos import Store
from ..storage.stats import PlayerTotals
from .models import Channel, LeaderboardRow, PlayerCard, Round, TopicWeek, plural
from .scheduler import local_date, week_bounds
from .streaks import StreakWalk


@dataclass
class Board:
    title: str
    period: str
    rows: list[LeaderboardRow]
    note: str = ""


def rank_rows(raw: list[PlayerTotals], names: dict[int, str], limit: int | None) -> list[LeaderboardRow]:
    """Competition ranking (1, 2, 2, 4) on points; ties listed by solved, then name."""
    ordered = sorted(raw, key=lambda r: (-round(r.points, 2), -r.solved, names.get(r.player_id, "").lower(), r.player_id))
    out: list[LeaderboardRow] = []
    prev_points: float | None = None
    rank = 0
    for i, (pid, points, solved, attempts) in enumerate(ordered):
        p = round(points, 2)
        if p != prev_points:
            rank = i + 1
            prev_points = p
        out.append(LeaderboardRow(rank, pid, names.get(pid, f"player {pid}"), p, int(solved), int(attempts)))
    return out[:limit] if limit else out


async def current_round(store: Store, channel_id: int) -> Round | None:
    return await store.rounds.open_in(channel_id) or await store.rounds.latest(channel_id)


async def totals(store: Store, channel: Channel, period: str, now: datetime,
                 *, week: TopicWeek | None = None, round_id: int | None = None
                 ) -> tuple[str, list[PlayerTotals], str]:
    """(title, raw rows, note) for a period."""
    today = local_date(channel.schedule, now)
    if period == "round":
        rnd = await store.rounds.get(round_id) if round_id else await current_round(store, channel.id)
        if rnd is None:
            return "This round", [], "No round has been played in this channel yet."
        return f"Round {rnd.label} ({rnd.item_id}, {rnd.local_date})", await store.stats.round_totals(rnd.id), ""
    if period == "week":
        start, end = week_bounds(today)
        return f"This week ({start} to {end})", await store.stats.range_totals(channel.id, start, end), ""
    if period == "topic":
        tw = week or await store.weeks.active(channel.id, today)
        if tw is None:
            return "Topic week", [], "No topic week is running. Moderators set one with `/quiz week add`."
        label = f"Topic week: {tw.title or 'chapter ' + tw.scope} ({tw.start} to {tw.end})"
        return label, await store.stats.range_totals(channel.id, tw.start, tw.end), ""
    if period == "month":
        return f"This month ({today:%B %Y})", await store.stats.month_totals(channel.id, today.strftime("%Y-%m")), ""
    if period == "practice":
        return ("Practice (private questions from `/quiz practice` and `/quiz review`, all time)",
                await store.stats.practice_totals(channel.id), "")
    return "All time", await store.stats.all_time_totals(channel.id), ""


async def leaderboard(store: Store, channel: Channel, period: str, now: datetime, *, limit: int = 10,
                      round_id: int | None = None) -> Board:
    title, raw, note = await totals(store, channel, period, now, round_id=round_id)
    names = await store.players.names(r.player_id for r in raw)
    rows = rank_rows(raw, names, limit)
    if not rows and not note:
        note = "No scores yet."
    return Board(title, period, rows, note)


def render_board(board: Board) -> str:
    if not board.rows:
        return board.note
    width = max(len(r.name) for r in board.rows)
    lines = [f"{r.rank:>3}. {r.name:<{width}}  {r.points:>8g} pts  {r.solved} solved  "
             f"{plural(r.attempts, 'attempt')}"
             for r in board.rows]
    if board.note:
        lines.append(board.note)
    return "\n".join(lines)


async def current_streak(store: Store, channel_id: int, player_id: int, freezes_per_week: int) -> StreakWalk:
    """The player's streak up to the latest played round (streaks.py: misses a week may be
    forgiven); an open round not yet solved does not count (the player still has time)."""
    walk = StreakWalk(freezes_per_week)
    for i, r in enumerate(await store.stats.streak_rounds(channel_id, player_id, 1000)):
        if i == 0 and r.status == "open" and not r.solved:
            continue
        if not walk.step(r.solved, r.local_date):
            break
    return walk


async def player_card(store: Store, channel: Channel, player_id: int, now: datetime, *, freezes_per_week: int = 1,
                      today: date | None = None) -> PlayerCard | None:
    name = (await store.players.names([player_id])).get(player_id)
    if name is None:
        return None
    all_raw = await store.stats.all_time_totals(channel.id)
    names = await store.players.names(r.player_id for r in all_raw)
    ranked = rank_rows(all_raw, names, None)
    mine = next((r for r in ranked if r.player_id == player_id), None)
    chapters = await store.stats.player_chapters(channel.id, player_id)
    rates = sorted(((c.chapter, c.solved / c.rounds) for c in chapters if c.rounds), key=lambda x: (-x[1], x[0]))
    record = await store.stats.player_record(channel.id, player_id)
    walk = await current_streak(store, channel.id, player_id, freezes_per_week)
    # a chapter is a strength only when something in it was solved, and a weakness only when
    # it trails the best one: nothing solved yet is no "Strongest: chapter 2: 0%"
    strongest = [r for r in rates if r[1] > 0][:2]
    best = rates[0][1] if rates else 0.0
    weakest = [r for r in reversed(rates) if r not in strongest and r[1] < best][:2] if strongest else []
    return PlayerCard(
        name=name, points=mine.points if mine else 0.0, solved=mine.solved if mine else 0,
        attempts=mine.attempts if mine else 0, rounds_played=record.rounds_played,
        streak=walk.streak, best_streak=record.best_streak,
        freezes_left=walk.freezes_left(today or now.date()), freezes_per_week=freezes_per_week, rank=mine.rank if mine else None,
        strongest=strongest, weakest=weakest,
    )


def render_card(card: PlayerCard, players: int) -> str:
    lines = [
        f"Points: {card.points:g}" + (f"  (rank {card.rank} of {players})" if card.rank else ""),
        f"Solved: {card.solved} of {plural(card.rounds_played, 'round')} played, {plural(card.attempts, 'attempt')}",
        f"Streak: {card.streak} in a row (best {card.best_streak})"
        + (f"; streak freezes left this week: {card.freezes_left} of {card.freezes_per_week}"
           f" (a missed round uses one instead of ending the streak)" if card.freezes_per_week else ""),
    ]

    def fmt(xs: list[tuple[int, float]]) -> str:
        return ", ".join(f"chapter {c}: {r:.0%}" for c, r in xs)

    if card.strongest:
        lines.append(f"Strongest: {fmt(card.strongest)}")
    if card.weakest:
        lines.append(f"Weakest: {fmt(card.weakest)}")
    return "\n".join(lines)
