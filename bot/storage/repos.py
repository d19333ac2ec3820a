"""Repositories: the SQL of the bot, one small class per table (the read-only aggregates of
leaderboards, cards and digests are in `stats.py`, reached as `Store.stats`).

There is one connection: reads may run anywhere, writes must run inside
`Database.transaction()` (the single writer path).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time
from typing import Any, NamedTuple

import aiosqlite

from ..core.clock import iso, parse_iso
from ..core.models import Actor, Answer, Channel, ChannelOptions, ChannelRef, Message, Round, Schedule, TopicWeek
from .db import Database
from .stats import Stats


def _schedule(row: aiosqlite.Row) -> Schedule:
    hh, mm = row["post_time"].split(":")
    return Schedule(
        post_time=time(int(hh), int(mm)), timezone=row["timezone"],
        weekdays=tuple(int(d) for d in row["weekdays"].split(",") if d != ""),
        duration_min=row["duration_min"], language=row["language"], ramp=bool(row["ramp"]),
    )


def _channel(row: aiosqlite.Row) -> Channel:
    return Channel(
        id=row["id"], ref=ChannelRef(row["platform"], row["workspace"], row["channel"], row["name"]),
        enabled=bool(row["enabled"]), schedule=_schedule(row), scoring=json.loads(row["scoring"] or "{}"),
        options=ChannelOptions.from_json(json.loads(row["options"] or "{}")),
        schedule_since=parse_iso(row["schedule_since"]) if row["schedule_since"] else None,
        parent_id=row["parent_id"], owner_id=row["owner_id"],
    )


def _round(row: aiosqlite.Row) -> Round:
    return Round(
        id=row["id"], channel_id=row["channel_id"], item_id=row["item_id"],
        local_date=date.fromisoformat(row["local_date"]), scheduled=bool(row["scheduled"]),
        status=row["status"], opened_at=parse_iso(row["opened_at"]), closes_at=parse_iso(row["closes_at"]),
        closed_at=parse_iso(row["closed_at"]) if row["closed_at"] else None, kind=row["kind"],
        difficulty=row["difficulty"], chapter=row["chapter"], language=row["language"],
        expected_output=row["expected_output"], opened_by=row["opened_by"], message_ref=row["message_ref"],
        number=row["number"], reason=row["reason"], mode=row["mode"],
    )


def _answer(row: aiosqlite.Row) -> Answer:
    return Answer(
        id=row["id"], round_id=row["round_id"], channel_id=row["channel_id"], player_id=row["player_id"],
        content=row["content"], submitted_at=parse_iso(row["submitted_at"]), state=row["state"],
        tries=row["tries"], verdict=row["verdict"], fraction=row["fraction"],
        passed_cases=row["passed_cases"], total_cases=row["total_cases"], message=row["message"],
    )


def _week(row: aiosqlite.Row) -> TopicWeek:
    return TopicWeek(
        id=row["id"], channel_id=row["channel_id"], scope=row["scope"], title=row["title"],
        start=date.fromisoformat(row["start_date"]), end=date.fromisoformat(row["end_date"]),
        created_by=row["created_by"], cancelled=bool(row["cancelled"]),
    )


class Channels:
    """Channels are read on every message and change rarely: cached, forgotten on every write
    (the process is the database's only writer)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._by_ref: dict[tuple[str, str, str], Channel | None] = {}
        self._by_id: dict[int, Channel | None] = {}
        db.on_rollback.append(self.forget)

    def forget(self) -> None:
        self._by_ref.clear()
        self._by_id.clear()

    async def by_ref(self, ref: ChannelRef) -> Channel | None:
        key = (ref.platform, ref.workspace, ref.channel)
        if key not in self._by_ref:
            row = await self.db.fetchone(
                "SELECT * FROM channels WHERE platform = ? AND workspace = ? AND channel = ?", key)
            ch = _channel(row) if row else None
            if ch is None:
                return None  # not cached: it may be enabled any moment
            self._by_ref[key] = ch
        return self._by_ref[key]

    async def get(self, channel_id: int) -> Channel | None:
        if channel_id not in self._by_id:
            row = await self.db.fetchone("SELECT * FROM channels WHERE id = ?", (channel_id,))
            if row is None:
                return None
            self._by_id[channel_id] = _channel(row)
        return self._by_id[channel_id]

    async def enable(self, ref: ChannelRef, schedule: Schedule, now: datetime) -> Channel:
        """Create the channel with the default schedule, or switch it back on keeping its own."""
        s = schedule
        self.forget()
        await self.db.conn.execute(
            "INSERT INTO channels (platform, workspace, channel, name, enabled, post_time, timezone,"
            " weekdays, duration_min, language, ramp, created_at, schedule_since) VALUES (?,?,?,?,1,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (platform, workspace, channel) DO UPDATE SET enabled = 1,"
            " schedule_since = CASE WHEN enabled = 0 THEN excluded.schedule_since ELSE schedule_since END,"
            " name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END",
            (ref.platform, ref.workspace, ref.channel, ref.name, s.post_time.strftime("%H:%M"), s.timezone,
             ",".join(map(str, s.weekdays)), s.duration_min, s.language, int(s.ramp), iso(now), iso(now)))
        ch = await self.by_ref(ref)
        assert ch is not None
        return ch

    async def set_enabled(self, channel_id: int, enabled: bool) -> None:
        self.forget()
        await self.db.conn.execute("UPDATE channels SET enabled = ? WHERE id = ?", (int(enabled), channel_id))

    async def set_schedule(self, channel_id: int, s: Schedule, since: datetime | None = None) -> None:
        """`since`: the new schedule's posting times count from then on (None keeps the old mark)."""
        self.forget()
        await self.db.conn.execute(
            "UPDATE channels SET post_time = ?, timezone = ?, weekdays = ?, duration_min = ?, language = ?,"
            " ramp = ?, schedule_since = COALESCE(?, schedule_since) WHERE id = ?",
            (s.post_time.strftime("%H:%M"), s.timezone, ",".join(map(str, s.weekdays)), s.duration_min,
             s.language, int(s.ramp), iso(since) if since else None, channel_id))

    async def set_options(self, channel_id: int, options: ChannelOptions) -> None:
        self.forget()
        await self.db.conn.execute("UPDATE channels SET options = ? WHERE id = ?",
                                   (json.dumps(options.to_json()), channel_id))

    async def enabled(self) -> list[Channel]:
        return [_channel(r) for r in await self.db.fetchall(
            "SELECT * FROM channels WHERE enabled = 1 AND parent_id IS NULL ORDER BY id")]

    async def private(self, parent: Channel, owner_id: int, user_id: str, now: datetime) -> Channel:
        """A player's private channel under a quiz channel (practice and review rounds), created
        on first use. Never enabled: the scheduler never posts there."""
        ref = parent.ref.private_for(user_id)
        ch = await self.by_ref(ref)
        if ch is not None:
            return ch
        s = parent.schedule
        self.forget()
        await self.db.conn.execute(
            "INSERT INTO channels (platform, workspace, channel, name, enabled, post_time, timezone, weekdays,"
            " duration_min, language, ramp, created_at, parent_id, owner_id) VALUES (?,?,?,?,0,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (platform, workspace, channel) DO NOTHING",
            (ref.platform, ref.workspace, ref.channel, ref.name, s.post_time.strftime("%H:%M"), s.timezone,
             ",".join(map(str, s.weekdays)), s.duration_min, s.language, int(s.ramp), iso(now),
             parent.id, owner_id))
        ch = await self.by_ref(ref)
        assert ch is not None
        return ch


class Players:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[tuple[str, str], tuple[int, str]] = {}

    async def ensure(self, actor: Actor) -> int:
        """The player's id, created on first sight; the display name follows the platform's."""
        key = (actor.platform, actor.user_id)
        name = actor.display
        hit = self._cache.get(key)
        if hit and hit[1] == name:
            return hit[0]
        row = await self.db.fetchrow(
                "INSERT INTO players (platform, user_id, name) VALUES (?, ?, ?)"
                " ON CONFLICT (platform, user_id) DO UPDATE SET name = excluded.name RETURNING id",
                (actor.platform, actor.user_id, name))
        pid = int(row[0])
        self._cache[key] = (pid, name)
        return pid

    def known(self, actor: Actor) -> int | None:
        """The player's id when `ensure` has nothing to write (seen before under this name)."""
        hit = self._cache.get((actor.platform, actor.user_id))
        return hit[0] if hit and hit[1] == actor.display else None

    async def find(self, platform: str, user_id: str) -> int | None:
        row = await self.db.fetchone("SELECT id FROM players WHERE platform = ? AND user_id = ?", (platform, user_id))
        return int(row[0]) if row else None

    async def names(self, ids: Iterable[int]) -> dict[int, str]:
        ids = list(set(ids))
        if not ids:
            return {}
        out: dict[int, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT id, name FROM players WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            out.update({r[0]: r[1] for r in rows})
        return out

    async def identities(self, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """(display name, platform user id) of several players, by id."""
        ids = sorted(set(ids))
        out: dict[int, tuple[str, str]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT id, name, user_id FROM players WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            out.update({r[0]: (r[1], r[2]) for r in rows})
        return out

    async def who(self, player_id: int) -> tuple[str, str]:
        """(display name, platform user id) of one player."""
        row = await self.db.fetchone("SELECT name, user_id FROM players WHERE id = ?", (player_id,))
        return (row[0], row[1]) if row else ("?", "")

    async def user_ids(self, ids: Iterable[int]) -> dict[int, str]:
        ids = list(set(ids))
        if not ids:
            return {}
        rows = await self.db.fetchall(
            f"SELECT id, user_id FROM players WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r[0]: r[1] for r in rows}


class TopicWeeks:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, channel_id: int, scope: str, title: str, start: date, end: date, by: str) -> int:
        row = await self.db.fetchrow(
                "INSERT INTO topic_weeks (channel_id, scope, title, start_date, end_date, created_by)"
                " VALUES (?,?,?,?,?,?) RETURNING id",
                (channel_id, scope, title, start.isoformat(), end.isoformat(), by))
        return int(row[0])

    async def get(self, week_id: int) -> TopicWeek | None:
        row = await self.db.fetchone("SELECT * FROM topic_weeks WHERE id = ?", (week_id,))
        return _week(row) if row else None

    async def cancel(self, week_id: int) -> None:
        await self.db.conn.execute("UPDATE topic_weeks SET cancelled = 1 WHERE id = ?", (week_id,))

    async def upcoming(self, channel_id: int, from_date: date) -> list[TopicWeek]:
        rows = await self.db.fetchall(
            "SELECT * FROM topic_weeks WHERE channel_id = ? AND cancelled = 0 AND end_date >= ?"
            " ORDER BY start_date, id", (channel_id, from_date.isoformat()))
        return [_week(r) for r in rows]

    async def overlapping(self, channel_id: int, start: date, end: date) -> list[TopicWeek]:
        """The channel's topic weeks (not cancelled) sharing a day with start..end."""
        rows = await self.db.fetchall(
            "SELECT * FROM topic_weeks WHERE channel_id = ? AND cancelled = 0 AND start_date <= ?"
            " AND end_date >= ? ORDER BY start_date, id", (channel_id, end.isoformat(), start.isoformat()))
        return [_week(r) for r in rows]

    async def active(self, channel_id: int, d: date) -> TopicWeek | None:
        """The topic week covering a local date; the latest added wins when they overlap."""
        row = await self.db.fetchone(
            "SELECT * FROM topic_weeks WHERE channel_id = ? AND cancelled = 0 AND start_date <= ?"
            " AND end_date >= ? ORDER BY id DESC LIMIT 1", (channel_id, d.isoformat(), d.isoformat()))
        return _week(row) if row else None


class Rounds:
    """Rounds by id and the open round per channel are cached; every write forgets the cache."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._by_id: dict[int, Round] = {}
        self._open: dict[int, Round | None] = {}
        db.on_rollback.append(self.forget)

    def forget(self) -> None:
        self._by_id.clear()
        self._open.clear()

    async def insert(self, *, channel_id: int, item_id: str | None, local_date: date, scheduled: bool,
                     status: str, opened_at: datetime, closes_at: datetime, kind: str = "",
                     difficulty: int = 0, chapter: int = 0, language: str = "en", opened_by: str = "",
                     expected_output: str | None = None, reason: str = "", mode: str = "daily") -> int | None:
        """The new round's id, or None when the day's scheduled round already exists. A posted
        round (with an item) gets the channel's next number; a day without a question none."""
        self.forget()
        row = await self.db.fetchone(
                "INSERT INTO rounds (channel_id, item_id, local_date, scheduled, status, opened_at, closes_at,"
                " closed_at, kind, difficulty, chapter, language, opened_by, expected_output, reason, mode, number)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?, CASE WHEN ? IS NULL THEN NULL ELSE"
                " (SELECT COALESCE(MAX(number), 0) + 1 FROM rounds WHERE channel_id = ?) END)"
                " ON CONFLICT (channel_id, local_date) WHERE scheduled = 1 DO NOTHING RETURNING id",
                (channel_id, item_id, local_date.isoformat(), int(scheduled), status, iso(opened_at),
                 iso(closes_at), iso(opened_at) if status != "open" else None, kind, difficulty, chapter,
                 language, opened_by, expected_output, reason, mode, item_id, channel_id))
        return int(row[0]) if row else None

    async def get(self, round_id: int) -> Round | None:
        hit = self._by_id.get(round_id)
        if hit is None:
            row = await self.db.fetchone("SELECT * FROM rounds WHERE id = ?", (round_id,))
            if row is None:
                return None
            hit = self._by_id[round_id] = _round(row)
        return hit

    async def open_in(self, channel_id: int) -> Round | None:
        if channel_id not in self._open:
            row = await self.db.fetchone("SELECT * FROM rounds WHERE channel_id = ? AND status = 'open'",
                                         (channel_id,))
            self._open[channel_id] = _round(row) if row else None
        return self._open[channel_id]

    async def scheduled_on(self, channel_id: int, d: date) -> Round | None:
        row = await self.db.fetchone(
            "SELECT * FROM rounds WHERE channel_id = ? AND local_date = ? AND scheduled = 1",
            (channel_id, d.isoformat()))
        return _round(row) if row else None

    async def scheduled_dates(self, channel_id: int, from_date: date) -> set[date]:
        """Local dates from `from_date` on whose scheduled round is taken: posted (by the scheduler or
        by a moderator's post on that day), skipped, or recorded as missed."""
        rows = await self.db.fetchall(
            "SELECT local_date FROM rounds WHERE channel_id = ? AND scheduled = 1 AND local_date >= ?",
            (channel_id, from_date.isoformat()))
        return {date.fromisoformat(r[0]) for r in rows}

    async def last_scheduled_date(self, channel_id: int) -> date | None:
        row = await self.db.fetchone(
            "SELECT MAX(local_date) FROM rounds WHERE channel_id = ? AND scheduled = 1", (channel_id,))
        return date.fromisoformat(row[0]) if row and row[0] else None

    async def latest(self, channel_id: int) -> Round | None:
        row = await self.db.fetchone(
            "SELECT * FROM rounds WHERE channel_id = ? AND item_id IS NOT NULL ORDER BY opened_at DESC, id DESC"
            " LIMIT 1", (channel_id,))
        return _round(row) if row else None

    async def due_to_close(self, now: datetime) -> list[Round]:
        rows = await self.db.fetchall(
            "SELECT * FROM rounds WHERE status = 'open' AND closes_at <= ? ORDER BY closes_at", (iso(now),))
        return [_round(r) for r in rows]

    async def solved_private(self) -> list[Round]:
        """Open private rounds their player has solved (they close at once)."""
        rows = await self.db.fetchall(
            "SELECT * FROM rounds r WHERE r.status = 'open' AND r.mode != 'daily' AND EXISTS"
            " (SELECT 1 FROM scores s WHERE s.round_id = r.id AND s.solved = 1)")
        return [_round(r) for r in rows]

    async def count_mode_on(self, channel_id: int, mode: str, d: date) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) FROM rounds WHERE channel_id = ? AND mode = ? AND local_date = ?",
            (channel_id, mode, d.isoformat()))
        return int(row[0]) if row else 0

    async def set_status(self, round_id: int, status: str, now: datetime) -> bool:
        """Close or skip an open round; False when it was no longer open (someone else won)."""
        self.forget()
        cur = await self.db.conn.execute(
            "UPDATE rounds SET status = ?, closed_at = ? WHERE id = ? AND status = 'open'",
            (status, iso(now), round_id))
        return cur.rowcount == 1

    async def item_uses(self, channel_id: int) -> dict[str, int]:
        rows = await self.db.fetchall(
            "SELECT item_id, COUNT(*) FROM rounds WHERE channel_id = ? AND item_id IS NOT NULL GROUP BY item_id",
            (channel_id,))
        return {r[0]: r[1] for r in rows}

    async def set_expected(self, round_id: int, text: str) -> None:
        self.forget()
        await self.db.conn.execute("UPDATE rounds SET expected_output = ? WHERE id = ?", (text, round_id))

    async def set_message_ref(self, round_id: int, ref: str) -> None:
        self.forget()
        await self.db.conn.execute("UPDATE rounds SET message_ref = ? WHERE id = ?", (ref, round_id))

    async def played_before(self, channel_id: int, opened_at: datetime, limit: int) -> list[tuple[int, date]]:
        """The channel's earlier played rounds (id, local date), newest first (the streak looks
        back along them)."""
        rows = await self.db.fetchall(
            "SELECT id, local_date FROM rounds WHERE channel_id = ? AND opened_at < ? AND status != 'skipped'"
            " AND item_id IS NOT NULL ORDER BY opened_at DESC, id DESC LIMIT ?",
            (channel_id, iso(opened_at), limit))
        return [(r[0], date.fromisoformat(r[1])) for r in rows]

    async def played_after(self, channel_id: int, opened_at: datetime) -> list[Round]:
        rows = await self.db.fetchall(
            "SELECT * FROM rounds WHERE channel_id = ? AND opened_at > ? AND status != 'skipped'"
            " AND item_id IS NOT NULL ORDER BY opened_at, id", (channel_id, iso(opened_at)))
        return [_round(r) for r in rows]

    async def in_range(self, channel_id: int, start: date, end: date) -> list[Round]:
        rows = await self.db.fetchall(
            "SELECT * FROM rounds WHERE channel_id = ? AND local_date >= ? AND local_date <= ?"
            " AND item_id IS NOT NULL AND status != 'skipped' ORDER BY opened_at",
            (channel_id, start.isoformat(), end.isoformat()))
        return [_round(r) for r in rows]


class GradedAttempt(NamedTuple):
    answer_id: int
    player_id: int
    verdict: str | None
    fraction: float | None


class Answers:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, *, round_id: int, channel_id: int, player_id: int, content: str,
                     now: datetime, max_attempts: int | None = None) -> int | None:
        """Store a queued answer; None when the round closed in the meantime or (with
        `max_attempts`) when the player already has that many answers for the round (`count_by`)."""
        sql = ("INSERT INTO answers (round_id, channel_id, player_id, content, submitted_at, state, next_try_at)"
               " SELECT ?,?,?,?,?, 'queued', ? WHERE EXISTS"
               " (SELECT 1 FROM rounds WHERE id = ? AND status = 'open' AND closes_at > ?)")
        params: tuple[Any, ...] = (round_id, channel_id, player_id, content, iso(now), iso(now), round_id, iso(now))
        if max_attempts is not None:
            sql += (" AND (SELECT COUNT(*) FROM answers WHERE round_id = ? AND player_id = ? AND state != 'void')"
                    " < ?")
            params += (round_id, player_id, max_attempts)
        row = await self.db.fetchone(sql + " RETURNING id", params)
        return int(row[0]) if row else None

    async def count_by(self, round_id: int, player_id: int) -> int:
        row = await self.db.fetchrow(
            "SELECT COUNT(*) FROM answers WHERE round_id = ? AND player_id = ? AND state != 'void'",
            (round_id, player_id))
        return int(row[0])

    async def get(self, answer_id: int) -> Answer | None:
        row = await self.db.fetchone("SELECT * FROM answers WHERE id = ?", (answer_id,))
        return _answer(row) if row else None

    async def due_ids(self, now: datetime, limit: int) -> list[int]:
        rows = await self.db.fetchall(
            "SELECT id FROM answers WHERE state = 'queued' AND next_try_at <= ? ORDER BY next_try_at, id LIMIT ?",
            (iso(now), limit))
        return [r[0] for r in rows]

    async def claim(self, ids: Sequence[int]) -> list[int]:
        """Move queued answers to grading; returns those this caller claimed."""
        if not ids:
            return []
        rows = await self.db.fetchall(
            f"UPDATE answers SET state = 'grading' WHERE state = 'queued' AND id IN ({','.join('?' * len(ids))})"
            " RETURNING id", list(ids))
        return sorted(r[0] for r in rows)

    async def requeue(self, answer_id: int, next_try: datetime, *, count_try: bool) -> int:
        row = await self.db.fetchone(
                "UPDATE answers SET state = 'queued', next_try_at = ?, tries = tries + ?"
                " WHERE id = ? AND state = 'grading' RETURNING tries",
                (iso(next_try), int(count_try), answer_id))
        return int(row[0]) if row else 0

    async def requeue_many(self, ids: Sequence[int], next_try: datetime) -> None:
        """Put answers being graded back in the queue (a storage fault kept their grades from
        being written); no try is counted."""
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            await self.db.conn.execute(
                f"UPDATE answers SET state = 'queued', next_try_at = ? WHERE state = 'grading' AND id IN"
                f" ({','.join('?' * len(chunk))})", (iso(next_try), *chunk))

    async def postpone_runner_work(self, now: datetime, until: datetime) -> int:
        """No runner answers before `until`: the due answers that need one (code items, output
        items whose expected output is not known yet) wait until then; choice items go on."""
        cur = await self.db.conn.execute(
            "UPDATE answers SET next_try_at = ? WHERE state = 'queued' AND next_try_at <= ? AND round_id IN"
            " (SELECT id FROM rounds WHERE kind = 'code' OR (kind = 'output' AND expected_output IS NULL))",
            (iso(until), iso(now)))
        return cur.rowcount

    async def due_now(self, now: datetime) -> int:
        """A runner is back: every queued answer waiting for a later try is due now."""
        cur = await self.db.conn.execute(
            "UPDATE answers SET next_try_at = ? WHERE state = 'queued' AND next_try_at > ?", (iso(now), iso(now)))
        return cur.rowcount

    FINISH = ("UPDATE answers SET state = ?, verdict = ?, fraction = ?, passed_cases = ?, total_cases = ?,"
              " message = ?, result_json = ?, graded_at = ?, mistake = ? WHERE id = ? AND state = 'grading'")

    @staticmethod
    def finish_params(answer_id: int, *, state: str, verdict: str | None, fraction: float | None,
                      passed_cases: int | None, total_cases: int | None, message: str,
                      result: dict[str, Any] | None, now: datetime, mistake: int | None = None) -> tuple[Any, ...]:
        return (state, verdict, fraction, passed_cases, total_cases, message,
                json.dumps(result) if result is not None else None, iso(now), mistake, answer_id)

    async def finish(self, answer_id: int, *, state: str, verdict: str | None, fraction: float | None,
                     passed_cases: int | None, total_cases: int | None, message: str,
                     result: dict[str, Any] | None, now: datetime) -> bool:
        """Record the grade; False when the answer was not being graded (already done elsewhere)."""
        cur = await self.db.conn.execute(self.FINISH, self.finish_params(
            answer_id, state=state, verdict=verdict, fraction=fraction, passed_cases=passed_cases,
            total_cases=total_cases, message=message, result=result, now=now))
        return cur.rowcount == 1

    async def finish_many(self, params: Sequence[tuple[Any, ...]]) -> None:
        """`finish` for several answers (params from `finish_params`) in one batch; the caller
        checked inside the same transaction that they are being graded (`in_state`)."""
        if params:
            await self.db.conn.executemany(self.FINISH, params)

    async def in_state(self, ids: Sequence[int], state: str) -> set[int]:
        """Those of the answers that are in `state`."""
        out: set[int] = set()
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT id FROM answers WHERE state = ? AND id IN ({','.join('?' * len(chunk))})", (state, *chunk))
            out.update(r[0] for r in rows)
        return out

    async def reset_grading(self, now: datetime) -> int:
        """After a restart nothing is being graded any more: send those answers again."""
        cur = await self.db.conn.execute(
            "UPDATE answers SET state = 'queued', next_try_at = ? WHERE state = 'grading'", (iso(now),))
        return cur.rowcount

    async def void_round(self, round_id: int) -> None:
        await self.db.conn.execute(
            "UPDATE answers SET state = 'void' WHERE round_id = ? AND state IN ('queued', 'grading')", (round_id,))

    async def graded_for(self, round_id: int, player_id: int) -> list[aiosqlite.Row]:
        return await self.db.fetchall(
            "SELECT id, verdict, fraction FROM answers WHERE round_id = ? AND player_id = ? AND state = 'graded'"
            " ORDER BY id", (round_id, player_id))

    async def graded_in_round(self, round_id: int, player_ids: Sequence[int]) -> list[GradedAttempt]:
        """The graded answers of these players in a round, each player's in submission order."""
        out: list[GradedAttempt] = []
        ids = list(player_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT id, player_id, verdict, fraction FROM answers WHERE round_id = ? AND player_id IN"
                f" ({','.join('?' * len(chunk))}) AND state = 'graded' ORDER BY id", (round_id, *chunk))
            out.extend(GradedAttempt(r[0], r[1], r[2], r[3]) for r in rows)
        return out

    async def pending_count(self, round_id: int | None = None) -> int:
        if round_id is None:
            row = await self.db.fetchrow("SELECT COUNT(*) FROM answers WHERE state IN ('queued', 'grading')")
        else:
            row = await self.db.fetchrow(
                "SELECT COUNT(*) FROM answers WHERE round_id = ? AND state IN ('queued', 'grading')", (round_id,))
        return int(row[0])

    async def pending_by_state(self) -> dict[str, int]:
        """How many answers are `queued` and how many `grading` (sent to a runner, no result yet)."""
        rows = await self.db.fetchall(
            "SELECT state, COUNT(*) FROM answers WHERE state IN ('queued', 'grading') GROUP BY state")
        return {r[0]: int(r[1]) for r in rows}

    async def next_due(self) -> datetime | None:
        row = await self.db.fetchone("SELECT MIN(next_try_at) FROM answers WHERE state = 'queued'")
        return parse_iso(row[0]) if row and row[0] else None


SCORE_FIELDS = ("answer_id", "round_id", "channel_id", "player_id", "local_date", "chapter", "attempt_value",
                "points", "first_bonus", "streak_bonus", "solved", "streak")


class Scores:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def rows_for(self, round_id: int, player_id: int) -> dict[int, aiosqlite.Row]:
        rows = await self.db.fetchall("SELECT * FROM scores WHERE round_id = ? AND player_id = ?",
                                      (round_id, player_id))
        return {r["answer_id"]: r for r in rows}

    async def first_solvers(self, round_id: int, limit: int) -> list[tuple[int, int, float]]:
        """(answer_id, player_id, first_bonus) of the round's earliest solvers by submission."""
        rows = await self.db.fetchall(
            "SELECT answer_id, player_id, first_bonus FROM scores WHERE round_id = ? AND solved = 1"
            " ORDER BY answer_id LIMIT ?", (round_id, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    async def round_rows(self, round_id: int, player_ids: Sequence[int], *, with_solved: bool = False
                         ) -> list[dict[str, Any]]:
        """The score rows (`SCORE_FIELDS`) of these players in a round and, with `with_solved`,
        every solved row of the round as well (a row may then come twice)."""
        ids = list(player_ids)
        out: list[dict[str, Any]] = []
        for i in range(0, max(1, len(ids)), 500):
            chunk = ids[i:i + 500]
            cond = f"player_id IN ({','.join('?' * len(chunk))})" if chunk else "0"
            if with_solved and i == 0:
                cond = f"(solved = 1 OR {cond})"
            rows = await self.db.fetchall(f"SELECT * FROM scores WHERE round_id = ? AND {cond}", (round_id, *chunk))
            out.extend({k: r[k] for k in SCORE_FIELDS} for r in rows)
        return out

    async def solved_pairs(self, round_ids: Sequence[int], player_ids: Sequence[int]) -> set[tuple[int, int]]:
        """The (round id, player id) pairs among these with a solved score row."""
        if not round_ids or not player_ids:
            return set()
        rows = await self.db.fetchall(
            f"SELECT DISTINCT round_id, player_id FROM scores WHERE solved = 1 AND round_id IN"
            f" ({','.join('?' * len(round_ids))}) AND player_id IN ({','.join('?' * len(player_ids))})",
            (*round_ids, *player_ids))
        return {(r[0], r[1]) for r in rows}

    async def solved_row(self, round_id: int, player_id: int) -> aiosqlite.Row | None:
        return await self.db.fetchone(
            "SELECT * FROM scores WHERE round_id = ? AND player_id = ? AND solved = 1", (round_id, player_id))

    async def solved_rounds(self, round_ids: Sequence[int], player_id: int) -> set[int]:
        if not round_ids:
            return set()
        rows = await self.db.fetchall(
            f"SELECT round_id FROM scores WHERE player_id = ? AND solved = 1 AND round_id IN"
            f" ({','.join('?' * len(round_ids))})", (player_id, *round_ids))
        return {r[0] for r in rows}

    UPSERT = ("INSERT INTO scores (answer_id, round_id, channel_id, player_id, local_date, chapter, attempt_value,"
              " points, first_bonus, streak_bonus, solved, streak, scored_at)"
              " VALUES (:answer_id, :round_id, :channel_id, :player_id, :local_date, :chapter, :attempt_value,"
              " :points, :first_bonus, :streak_bonus, :solved, :streak, :scored_at)"
              " ON CONFLICT (answer_id) DO UPDATE SET attempt_value = excluded.attempt_value,"
              " points = excluded.points, first_bonus = excluded.first_bonus, streak_bonus = excluded.streak_bonus,"
              " solved = excluded.solved, streak = excluded.streak")
    UPDATE_BONUS = "UPDATE scores SET first_bonus = ?, streak_bonus = ?, streak = ?, points = ? WHERE answer_id = ?"

    @staticmethod
    def upsert_params(s: dict[str, Any], now: datetime) -> dict[str, Any]:
        return {**s, "scored_at": iso(now)}

    @staticmethod
    def bonus_params(answer_id: int, *, first_bonus: float, streak_bonus: float, streak: int,
                     points: float) -> tuple[Any, ...]:
        return (first_bonus, streak_bonus, streak, points, answer_id)

    async def upsert(self, s: dict[str, Any], now: datetime) -> None:
        await self.db.conn.execute(self.UPSERT, self.upsert_params(s, now))

    async def update_bonus(self, answer_id: int, *, first_bonus: float, streak_bonus: float, streak: int,
                           points: float) -> None:
        await self.db.conn.execute(self.UPDATE_BONUS, self.bonus_params(
            answer_id, first_bonus=first_bonus, streak_bonus=streak_bonus, streak=streak, points=points))

    def batch(self) -> ScoreWrites:
        """`upsert` and `update_bonus` queued in memory and written in order by `flush`."""
        return ScoreWrites(self)

    async def delete_round(self, round_id: int) -> None:
        await self.db.conn.execute("DELETE FROM scores WHERE round_id = ?", (round_id,))


class ScoreWrites:
    """Score writes kept in their order until `flush`, which sends consecutive writes of a kind
    in one batch (`executemany`)."""

    def __init__(self, scores: Scores) -> None:
        self.db = scores.db
        self._ops: list[tuple[str, Any]] = []

    def upsert(self, s: dict[str, Any], now: datetime) -> None:
        self._ops.append((Scores.UPSERT, Scores.upsert_params(s, now)))

    def update_bonus(self, answer_id: int, *, first_bonus: float, streak_bonus: float, streak: int,
                     points: float) -> None:
        self._ops.append((Scores.UPDATE_BONUS, Scores.bonus_params(
            answer_id, first_bonus=first_bonus, streak_bonus=streak_bonus, streak=streak, points=points)))

    async def flush(self) -> None:
        ops, self._ops = self._ops, []
        i = 0
        while i < len(ops):
            j = i
            while j < len(ops) and ops[j][0] == ops[i][0]:
                j += 1
            await self.db.conn.executemany(ops[i][0], [p for _, p in ops[i:j]])
            i = j


class Outbox:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, channel_id: int, message: Message, now: datetime) -> int:
        row = await self.db.fetchrow(
                "INSERT INTO outbox (channel_id, round_id, payload, created_at) VALUES (?,?,?,?) RETURNING id",
                (channel_id, message.round_id, json.dumps(message.to_json()), iso(now)))
        return int(row[0])

    async def add_many(self, messages: Sequence[tuple[int, Message]], now: datetime) -> None:
        """`add` for several (channel id, message) pairs, in their order, in one batch."""
        if messages:
            await self.db.conn.executemany(
                "INSERT INTO outbox (channel_id, round_id, payload, created_at) VALUES (?,?,?,?)",
                [(cid, m.round_id, json.dumps(m.to_json()), iso(now)) for cid, m in messages])

    async def pending(self, limit: int = 100, *, skip_channels: Iterable[int] = ()) -> list[tuple[int, int, Message]]:
        """The oldest undelivered messages, leaving out the channels in `skip_channels`."""
        skip = sorted(set(skip_channels))
        where = f" AND channel_id NOT IN ({','.join('?' * len(skip))})" if skip else ""
        rows = await self.db.fetchall(
            f"SELECT id, channel_id, payload FROM outbox WHERE delivered_at IS NULL{where} ORDER BY id LIMIT ?",
            (*skip, limit))
        return [(r[0], r[1], Message.from_json(json.loads(r[2]))) for r in rows]

    async def delivered(self, outbox_id: int, now: datetime) -> None:
        await self.db.conn.execute("UPDATE outbox SET delivered_at = ? WHERE id = ?", (iso(now), outbox_id))


class Hints:
    """Hints players revealed, one row each; their recorded costs scale the round's points."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def costs(self, round_id: int, player_id: int) -> list[float]:
        """The cost (percent) of each hint the player revealed in the round, in order."""
        rows = await self.db.fetchall("SELECT cost_pct FROM hints WHERE round_id = ? AND player_id = ? ORDER BY n",
                                      (round_id, player_id))
        return [float(r[0]) for r in rows]

    async def costs_in_round(self, round_id: int, player_ids: Sequence[int]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        ids = list(player_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT player_id, cost_pct FROM hints WHERE round_id = ? AND player_id IN ({','.join('?' * len(chunk))})"
                " ORDER BY player_id, n", (round_id, *chunk))
            for r in rows:
                out.setdefault(r[0], []).append(float(r[1]))
        return out

    async def add(self, round_id: int, player_id: int, n: int, cost_pct: float, now: datetime) -> bool:
        """Record hint `n`; False when it was already revealed (a double click counts once)."""
        cur = await self.db.conn.execute(
            "INSERT OR IGNORE INTO hints (round_id, player_id, n, cost_pct, revealed_at) VALUES (?, ?, ?, ?, ?)",
            (round_id, player_id, n, cost_pct, iso(now)))
        return cur.rowcount == 1


class Reviews:
    """Spaced review: when each item a player failed or gave up in a quiz channel comes back."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, channel_id: int, player_id: int, item_id: str) -> tuple[int, date] | None:
        row = await self.db.fetchone(
            "SELECT step, due_date FROM reviews WHERE channel_id = ? AND player_id = ? AND item_id = ?",
            (channel_id, player_id, item_id))
        return (int(row[0]), date.fromisoformat(row[1])) if row else None

    async def put(self, channel_id: int, player_id: int, item_id: str, step: int, due: date, now: datetime) -> None:
        await self.db.conn.execute(
            "INSERT INTO reviews (channel_id, player_id, item_id, step, due_date, updated_at) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT (channel_id, player_id, item_id) DO UPDATE SET step = excluded.step,"
            " due_date = excluded.due_date, updated_at = excluded.updated_at",
            (channel_id, player_id, item_id, step, due.isoformat(), iso(now)))

    async def done(self, channel_id: int, player_id: int, item_id: str) -> None:
        await self.db.conn.execute(
            "DELETE FROM reviews WHERE channel_id = ? AND player_id = ? AND item_id = ?",
            (channel_id, player_id, item_id))

    async def due(self, channel_id: int, player_id: int, today: date) -> list[tuple[str, int, date]]:
        """(item, step, due date) of the items due by `today`, longest overdue first."""
        rows = await self.db.fetchall(
            "SELECT item_id, step, due_date FROM reviews WHERE channel_id = ? AND player_id = ? AND due_date <= ?"
            " ORDER BY due_date, item_id", (channel_id, player_id, today.isoformat()))
        return [(r[0], int(r[1]), date.fromisoformat(r[2])) for r in rows]

    async def upcoming(self, channel_id: int, player_id: int, after: date) -> tuple[int, date | None]:
        """How many are scheduled after `after`, and the first of their dates."""
        row = await self.db.fetchone(
            "SELECT COUNT(*), MIN(due_date) FROM reviews WHERE channel_id = ? AND player_id = ? AND due_date > ?",
            (channel_id, player_id, after.isoformat()))
        return (int(row[0]), date.fromisoformat(row[1]) if row[1] else None) if row else (0, None)


class Digests:
    """Digests posted by themselves: one row per (channel, period, first day, destination)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def posted(self, channel_id: int, period: str, start: date, destination: str) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM digests WHERE channel_id = ? AND period = ? AND start_date = ? AND destination = ?",
            (channel_id, period, start.isoformat(), destination))
        return row is not None

    async def claim(self, channel_id: int, period: str, start: date, destination: str, now: datetime) -> bool:
        """Record the digest as posted; False when it already was (inside the queuing transaction)."""
        cur = await self.db.conn.execute(
            "INSERT INTO digests (channel_id, period, start_date, destination, posted_at) VALUES (?,?,?,?,?)"
            " ON CONFLICT DO NOTHING", (channel_id, period, start.isoformat(), destination, iso(now)))
        return cur.rowcount == 1


class Store:
    """All repositories over one database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.channels = Channels(db)
        self.players = Players(db)
        self.weeks = TopicWeeks(db)
        self.rounds = Rounds(db)
        self.answers = Answers(db)
        self.scores = Scores(db)
        self.hints = Hints(db)
        self.reviews = Reviews(db)
        self.digests = Digests(db)
        self.outbox = Outbox(db)
        self.stats = Stats(db)
