"""Read-only aggregates over the score rows: leaderboards, player cards, digests, the CSV export
and a closing round's numbers.

Periods are given as local dates (`scores.local_date`, the channel's own calendar); the caller
works out which dates a period covers. "month" and "all" read the per-player monthly totals the
triggers keep (`player_months`), the rest the scores index.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import date
from typing import NamedTuple

import aiosqlite

from .db import Database


class PlayerTotals(NamedTuple):
    """One player's standing over a period: points, solved rounds and attempts (for a date range
    or a round: scored answers)."""

    player_id: int
    points: float
    solved: int
    attempts: int


class StreakRound(NamedTuple):
    """A played round of a channel, newest first, and whether one player solved it."""

    round_id: int
    status: str
    solved: bool
    local_date: date


class ChapterRecord(NamedTuple):
    """One player's rounds in a chapter: how many they scored in, and their solved score rows."""

    chapter: int
    rounds: int
    solved: int


class PlayerRecord(NamedTuple):
    rounds_played: int
    best_streak: int


class DayActivity(NamedTuple):
    """A local date with scored answers: how many players answered, and how many answers."""

    day: date
    players: int
    answers: int


class Activity(NamedTuple):
    """A date range's active players and scored answers."""

    players: int
    answers: int


class ChapterSolves(NamedTuple):
    """A chapter over a date range: player-rounds attempted, and of those, solved."""

    chapter: int
    tried: int
    solved: int


class RoundCounts(NamedTuple):
    """A round's answers (void ones left out), the players who sent them, and how many of them
    are still waiting for a grade."""

    answers: int
    players: int
    pending: int


class RoundSolve(NamedTuple):
    """A player's first passing answer of a round: its id (submission order), who, the code."""

    answer_id: int
    player: str
    content: str


class ExportRow(NamedTuple):
    """One scored answer with its round, player and grade (`Stats.export_rows`)."""

    local_date: str
    round_id: int
    item_id: str | None
    chapter: int
    player: str
    user_id: str
    answer_id: int
    submitted_at: str
    verdict: str | None
    fraction: float | None
    attempt_value: float | None
    first_bonus: float | None
    streak_bonus: float | None
    points: float | None
    solved: int
    streak: int
    player_id: int


def _totals(rows: Iterable[aiosqlite.Row]) -> list[PlayerTotals]:
    return [PlayerTotals(r[0], r[1] or 0.0, r[2] or 0, r[3]) for r in rows]


class Stats:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ---------------------------------------------------------------- standings

    async def range_totals(self, channel_id: int, start: date, end: date) -> list[PlayerTotals]:
        """Per player over local dates start..end; `attempts` counts scored answers."""
        rows = await self.db.fetchall(
            "SELECT player_id, SUM(points), SUM(solved), COUNT(*) FROM scores"
            " WHERE channel_id = ? AND local_date >= ? AND local_date <= ? GROUP BY player_id",
            (channel_id, start.isoformat(), end.isoformat()))
        return _totals(rows)

    async def month_totals(self, channel_id: int, month: str) -> list[PlayerTotals]:
        """Per player for one calendar month (`YYYY-MM`), players with attempts only."""
        rows = await self.db.fetchall(
            "SELECT player_id, points, solved, attempts FROM player_months"
            " WHERE channel_id = ? AND month = ? AND attempts > 0", (channel_id, month))
        return _totals(rows)

    async def all_time_totals(self, channel_id: int) -> list[PlayerTotals]:
        """Per player over every month, players with attempts only."""
        rows = await self.db.fetchall(
            "SELECT player_id, SUM(points), SUM(solved), SUM(attempts) FROM player_months"
            " WHERE channel_id = ? GROUP BY player_id HAVING SUM(attempts) > 0", (channel_id,))
        return _totals(rows)

    async def round_totals(self, round_id: int) -> list[PlayerTotals]:
        """Per player in one round; `attempts` counts scored answers."""
        rows = await self.db.fetchall(
            "SELECT player_id, SUM(points), SUM(solved), COUNT(*) FROM scores WHERE round_id = ? GROUP BY player_id",
            (round_id,))
        return _totals(rows)

    async def ranked_players(self, channel_id: int) -> int:
        """How many players the all-time board ranks (those with attempts)."""
        row = await self.db.fetchrow(
            "SELECT COUNT(*) FROM (SELECT player_id FROM player_months WHERE channel_id = ? GROUP BY player_id"
            " HAVING SUM(attempts) > 0)", (channel_id,))
        return int(row[0])

    # ---------------------------------------------------------------- one player

    async def streak_rounds(self, channel_id: int, player_id: int, limit: int = 1000) -> list[StreakRound]:
        """The channel's played rounds (not skipped, with a question), newest first, each with
        whether the player solved it."""
        rows = await self.db.fetchall(
            "SELECT r.id, r.status, EXISTS (SELECT 1 FROM scores s WHERE s.round_id = r.id AND s.player_id = ?"
            " AND s.solved = 1), r.local_date FROM rounds r WHERE r.channel_id = ? AND r.status != 'skipped'"
            " AND r.item_id IS NOT NULL ORDER BY r.opened_at DESC, r.id DESC LIMIT ?",
            (player_id, channel_id, limit))
        return [StreakRound(r[0], r[1], bool(r[2]), date.fromisoformat(r[3])) for r in rows]

    async def player_chapters(self, channel_id: int, player_id: int) -> list[ChapterRecord]:
        rows = await self.db.fetchall(
            "SELECT chapter, COUNT(DISTINCT round_id), SUM(solved) FROM scores WHERE channel_id = ? AND player_id = ?"
            " GROUP BY chapter", (channel_id, player_id))
        return [ChapterRecord(r[0], r[1], r[2] or 0) for r in rows]

    async def player_record(self, channel_id: int, player_id: int) -> PlayerRecord:
        """Rounds the player scored in, and their longest streak."""
        row = await self.db.fetchrow(
            "SELECT COUNT(DISTINCT round_id), COALESCE(MAX(streak), 0) FROM scores WHERE channel_id = ? AND player_id = ?",
            (channel_id, player_id))
        return PlayerRecord(int(row[0] or 0), int(row[1] or 0))

    # ---------------------------------------------------------------- digests

    async def per_day(self, channel_id: int, start: date, end: date) -> list[DayActivity]:
        """The local dates of start..end that have scored answers."""
        rows = await self.db.fetchall(
            "SELECT local_date, COUNT(DISTINCT player_id), COUNT(*) FROM scores WHERE channel_id = ?"
            " AND local_date >= ? AND local_date <= ? GROUP BY local_date",
            (channel_id, start.isoformat(), end.isoformat()))
        return [DayActivity(date.fromisoformat(r[0]), int(r[1]), int(r[2])) for r in rows]

    async def activity(self, channel_id: int, start: date, end: date) -> Activity:
        row = await self.db.fetchrow(
            "SELECT COUNT(DISTINCT player_id), COUNT(*) FROM scores WHERE channel_id = ? AND local_date >= ?"
            " AND local_date <= ?", (channel_id, start.isoformat(), end.isoformat()))
        return Activity(int(row[0] or 0), int(row[1] or 0))

    async def chapter_solves(self, channel_id: int, start: date, end: date) -> list[ChapterSolves]:
        """Per chapter, in chapter order: the (round, player) pairs with a scored answer, and how
        many of them solved the round."""
        rows = await self.db.fetchall(
            "SELECT chapter, COUNT(*), SUM(s) FROM (SELECT chapter, round_id, player_id, MAX(solved) AS s"
            " FROM scores WHERE channel_id = ? AND local_date >= ? AND local_date <= ?"
            " GROUP BY round_id, player_id) GROUP BY chapter ORDER BY chapter",
            (channel_id, start.isoformat(), end.isoformat()))
        return [ChapterSolves(r[0], r[1], r[2] or 0) for r in rows]

    async def export_rows(self, channel_id: int, start: date | None = None,
                          end: date | None = None) -> AsyncIterator[ExportRow]:
        """Every score row of the channel (of local dates start..end when both are given) in
        answer order, streamed from the cursor."""
        where = "s.channel_id = ?"
        params: list[object] = [channel_id]
        if start is not None and end is not None:
            where += " AND s.local_date >= ? AND s.local_date <= ?"
            params += [start.isoformat(), end.isoformat()]
        async with self.db.conn.execute(
                "SELECT s.local_date, s.round_id, r.item_id, s.chapter, p.name, p.user_id, s.answer_id, a.submitted_at,"
                " a.verdict, a.fraction, s.attempt_value, s.first_bonus, s.streak_bonus, s.points, s.solved, s.streak,"
                " s.player_id FROM scores s JOIN rounds r ON r.id = s.round_id JOIN players p ON p.id = s.player_id"
                f" JOIN answers a ON a.id = s.answer_id WHERE {where} ORDER BY s.answer_id", params) as cur:
            async for row in cur:
                yield ExportRow(*row)

    # ---------------------------------------------------------------- a closing round

    async def round_counts(self, round_id: int) -> RoundCounts:
        row = await self.db.fetchrow(
            "SELECT COUNT(*), COUNT(DISTINCT player_id), SUM(state IN ('queued', 'grading')) FROM answers"
            " WHERE round_id = ? AND state != 'void'", (round_id,))
        return RoundCounts(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))

    async def round_solves(self, round_id: int) -> list[RoundSolve]:
        """Each solver's first passing answer, in submission order (the solved score rows)."""
        rows = await self.db.fetchall(
            "SELECT s.answer_id, p.name, a.content FROM scores AS s JOIN answers AS a ON a.id = s.answer_id"
            " JOIN players AS p ON p.id = s.player_id WHERE s.round_id = ? AND s.solved = 1 ORDER BY s.answer_id",
            (round_id,))
        return [RoundSolve(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def round_hints(self, round_id: int) -> tuple[int, int]:
        """Hints revealed in a round, and by how many players."""
        row = await self.db.fetchrow("SELECT COUNT(*), COUNT(DISTINCT player_id) FROM hints WHERE round_id = ?",
                                     (round_id,))
        return int(row[0] or 0), int(row[1] or 0)

    async def round_solvers(self, round_id: int) -> list[int]:
        """Player ids of the round's solved score rows, in submission order (one per solved answer)."""
        rows = await self.db.fetchall(
            "SELECT player_id FROM scores WHERE round_id = ? AND solved = 1 ORDER BY answer_id", (round_id,))
        return [r[0] for r in rows]

    async def round_unsolved(self, round_id: int) -> list[int]:
        """Players who answered a round and have not solved it (answers voided with a skipped
        round, or given up after runner faults, do not count: neither is the player's failure)."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT player_id FROM answers WHERE round_id = ? AND state NOT IN ('void', 'abandoned')"
            " AND player_id NOT IN"
            " (SELECT player_id FROM scores WHERE round_id = ? AND solved = 1) ORDER BY player_id",
            (round_id, round_id))
        return [int(r[0]) for r in rows]

    # ---------------------------------------------------------------- practice

    async def solved_items(self, channel_id: int, player_id: int) -> set[str]:
        """Items the player solved in a quiz channel: its daily rounds and their own practice."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT r.item_id FROM scores s JOIN rounds r ON r.id = s.round_id WHERE s.player_id = ?"
            " AND s.solved = 1 AND (s.channel_id = ? OR s.channel_id IN"
            " (SELECT id FROM channels WHERE parent_id = ? AND owner_id = ?))",
            (player_id, channel_id, channel_id, player_id))
        return {str(r[0]) for r in rows if r[0]}

    async def practice_totals(self, channel_id: int) -> list[PlayerTotals]:
        """Per player, their practice and review rounds under a quiz channel (the practice board)."""
        rows = await self.db.fetchall(
            "SELECT c.owner_id, SUM(s.points), SUM(s.solved), COUNT(*) FROM scores s"
            " JOIN channels c ON c.id = s.channel_id WHERE c.parent_id = ? GROUP BY c.owner_id", (channel_id,))
        return _totals(rows)

    # ---------------------------------------------------------------- digests: mastery and mistakes

    async def item_solves(self, channel_id: int, start: date, end: date) -> list[tuple[str, int, int]]:
        """(item, player, solved 0/1) for each player who scored in each round of local dates
        start..end (the digest maps items to their outline sections)."""
        rows = await self.db.fetchall(
            "SELECT r.item_id, s.player_id, MAX(s.solved) FROM scores s JOIN rounds r ON r.id = s.round_id"
            " WHERE s.channel_id = ? AND s.local_date >= ? AND s.local_date <= ? GROUP BY s.round_id, s.player_id",
            (channel_id, start.isoformat(), end.isoformat()))
        return [(str(r[0]), int(r[1]), int(r[2] or 0)) for r in rows if r[0]]

    async def common_mistakes(self, channel_id: int, start: date, end: date,
                              limit: int = 3) -> list[tuple[str, int, int, int]]:
        """The known mistakes answers of the period behaved like, most players first:
        (item, mistake index, answers, players)."""
        rows = await self.db.fetchall(
            "SELECT r.item_id, a.mistake, COUNT(*), COUNT(DISTINCT a.player_id) FROM answers a"
            " JOIN rounds r ON r.id = a.round_id WHERE a.channel_id = ? AND a.mistake IS NOT NULL"
            " AND a.state = 'graded' AND r.local_date >= ? AND r.local_date <= ? GROUP BY r.item_id, a.mistake"
            " ORDER BY COUNT(DISTINCT a.player_id) DESC, COUNT(*) DESC, r.item_id LIMIT ?",
            (channel_id, start.isoformat(), end.isoformat(), limit))
        return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

    async def practice_activity(self, channel_id: int, start: date, end: date) -> tuple[int, int]:
        """Players who practised under a quiz channel in start..end, and the questions they solved."""
        row = await self.db.fetchrow(
            "SELECT COUNT(DISTINCT c.owner_id), COALESCE(SUM(s.solved), 0) FROM scores s"
            " JOIN channels c ON c.id = s.channel_id WHERE c.parent_id = ? AND s.local_date >= ?"
            " AND s.local_date <= ?", (channel_id, start.isoformat(), end.isoformat()))
        return int(row[0] or 0), int(row[1] or 0)
