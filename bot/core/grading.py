"""The grading pipeline: stored answer -> runner (or the core for choice items) -> score.

Every answer is in SQLite before it is sent. The worker claims due answers (queued ->
grading), grades them outside the database lock, and records the grade, the score rows and the
player's result message in one transaction (grading -> graded). An unreachable runner puts the
answer back in the queue with a backoff and costs nothing; an `internal` verdict is retried a
few times, then the answer is given up without a score. After a restart, answers left in
`grading` go back to the queue (`Store.answers.reset_grading`).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable

from questionbank.jobs import code_job, normalise_output, output_job
from questionbank.model import Item
from questionbank.render import VERDICT_LABEL, render_result

from ..storage.repos import Store
from .clock import Clock
from .models import Answer, Block, Channel, Grade, Message, Round
from .runners import RunnerPool, RunnerUnavailable
from .scoring import Attempt, ScoringRules, attempt_fraction, player_round
from .settings import GradingSettings

log = logging.getLogger(__name__)



class NeedsRetry(Exception):
    """The grade could not be decided now (runner `internal`); the answer goes back in the queue."""


@dataclass
class GradeOutcome:
    answer_id: int
    state: str  # graded | queued | unavailable | abandoned | gone
    grade: Grade | None = None


class Grader:
    def __init__(self, store: Store, pool: RunnerPool, bank: Any, clock: Clock,
                 rules_for: Callable[[Channel], ScoringRules], settings: GradingSettings,
                 on_change: Callable[[], None] | None = None) -> None:
        self.store = store
        self.pool = pool
        self.bank = bank
        self.clock = clock
        self.rules_for = rules_for
        self.settings = settings
        self.on_change = on_change or (lambda: None)
        self._backoff = settings.retry_s
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))

    # ------------------------------------------------------------------ worker

    async def grade_due(self, max_rounds: int = 1000) -> int:
        """Grade every answer that is due now; returns how many reached a final state."""
        done = 0
        for _ in range(max_rounds):
            now = self.clock.now()
            ids = await self.store.answers.due_ids(now, self.settings.batch)
            if not ids:
                break
            async with self.store.db.transaction():
                claimed = await self.store.answers.claim(ids)
            if not claimed:
                continue
            prepared = await asyncio.gather(*(self._guarded(i) for i in claimed))
            outcomes = [p for p in prepared if isinstance(p, GradeOutcome)]
            ready = [p for p in prepared if not isinstance(p, GradeOutcome)]
            if ready:
                outcomes += await self.record_many(ready)
            done += sum(1 for o in outcomes if o.state in ("graded", "abandoned"))
            if any(o.state == "unavailable" for o in outcomes):
                # the runner is down: wait longer next time, leave the rest for after the backoff
                self._backoff = min(self.settings.retry_max_s, self._backoff * 2)
                break
        return done

    async def _guarded(self, answer_id: int) -> "GradeOutcome | tuple[Answer, Round, Grade]":
        async with self._sem:
            try:
                return await self.prepare(answer_id)
            except Exception:  # noqa: BLE001 - a bug must not lose the answer: requeue it
                log.exception("grading answer %s failed", answer_id)
                await self._requeue(answer_id, count_try=True)
                return GradeOutcome(answer_id, "queued")

    async def grade_one(self, answer_id: int) -> GradeOutcome:
        """Grade one claimed answer and record the outcome."""
        prepared = await self.prepare(answer_id)
        if isinstance(prepared, GradeOutcome):
            return prepared
        return (await self.record_many([prepared]))[0]

    async def prepare(self, answer_id: int) -> "GradeOutcome | tuple[Answer, Round, Grade]":
        """Decide a claimed answer's grade (runner call outside the database lock); requeue or
        give it up when that is not possible now."""
        answer = await self.store.answers.get(answer_id)
        if answer is None or answer.state != "grading":
            return GradeOutcome(answer_id, "gone")
        rnd = await self.store.rounds.get(answer.round_id)
        item = self.bank.items.get(rnd.item_id) if rnd and rnd.item_id else None
        if rnd is None or item is None:
            return await self._abandon(answer_id, "this question is no longer in the bank")
        try:
            grade = await self.compute(answer.content, rnd, item, answer_id)
        except RunnerUnavailable as exc:
            log.warning("runner unavailable for answer %s: %s", answer_id, exc)
            await self._requeue(answer_id, count_try=False)
            return GradeOutcome(answer_id, "unavailable")
        except NeedsRetry as exc:
            tries = await self._requeue(answer_id, count_try=True, delay=self.settings.retry_s)
            if tries >= self.settings.internal_retries:
                return await self._abandon_after_retries(answer_id, str(exc))
            return GradeOutcome(answer_id, "queued")
        self._backoff = self.settings.retry_s  # the runner answered: reset the backoff
        return answer, rnd, grade

    async def _requeue(self, answer_id: int, *, count_try: bool, delay: float | None = None) -> int:
        if delay is None:
            delay = self._backoff
        async with self.store.db.transaction():
            return await self.store.answers.requeue(
                answer_id, self.clock.now() + timedelta(seconds=delay), count_try=count_try)

    async def _abandon_after_retries(self, answer_id: int, why: str) -> GradeOutcome:
        async with self.store.db.transaction():
            await self.store.answers.claim([answer_id])
        return await self._abandon(answer_id, f"the runner kept failing ({why})")

    async def _abandon(self, answer_id: int, why: str) -> GradeOutcome:
        answer = await self.store.answers.get(answer_id)
        async with self.store.db.transaction():
            ok = await self.store.answers.finish(
                answer_id, state="abandoned", verdict=None, fraction=None, passed_cases=None,
                total_cases=None, message=why, result=None, now=self.clock.now())
            if ok and answer is not None:
                uid = (await self.store.players.user_ids([answer.player_id])).get(answer.player_id)
                await self.store.outbox.add(answer.channel_id, Message(
                    kind="result", round_id=answer.round_id, mention=uid,
                    title=f"Answer #{answer_id} could not be graded",
                    blocks=[Block(f"{why}. It is not counted against you; a moderator can check the runner.")],
                ), self.clock.now())
        self.on_change()
        return GradeOutcome(answer_id, "abandoned" if ok else "gone")

    # ------------------------------------------------------------------ grading

    async def compute(self, content: str, rnd: Round, item: Item, answer_id: int) -> Grade:
        """Decide the grade: choice items here, output items against the round's expected
        output, code items in the runner."""
        if item.kind == "choice":
            given = sorted(k for k in content.split(",") if k)
            ok = given == sorted(item.correct)
            return Grade("passed" if ok else "failed", 1.0 if ok else 0.0, int(ok), 1,
                         "correct" if ok else "not the right option(s)")
        if item.kind == "output":
            expected = rnd.expected_output
            if expected is None:
                expected = await self.expected_output(rnd, item)
            ok = normalise_output(content) == normalise_output(expected)
            return Grade("passed" if ok else "failed", 1.0 if ok else 0.0, int(ok), 1,
                         "matches the printed output" if ok else "that is not what the snippet prints")
        result = await self.pool.grade(code_job(item, content, job_id=f"answer-{answer_id}"))
        verdict = str(result.get("verdict", "internal"))
        if verdict == "internal":
            raise NeedsRetry(str(result.get("message") or "runner internal error"))
        channel = await self.store.channels.get(rnd.channel_id)
        rules = self.rules_for(channel) if channel else ScoringRules()
        partial = rules.partial_credit and item.mode == "partial"
        return Grade(
            verdict=verdict,
            fraction=attempt_fraction(verdict, result.get("passed_cases"), result.get("total_cases"),
                                      partial=partial),
            passed_cases=int(result.get("passed_cases") or 0), total_cases=int(result.get("total_cases") or 0),
            message=str(result.get("message") or ""), cases=list(result.get("cases") or []),
            error=result.get("error"), raw=result,
        )

    async def expected_output(self, rnd: Round, item: Item) -> str:
        """Run an output item's snippet on the runner and keep what it printed with the round."""
        result = await self.pool.grade(output_job(item, job_id=f"round-{rnd.id}-expected"))
        if result.get("verdict") != "passed":
            raise NeedsRetry(f"the snippet did not run cleanly: {result.get('verdict')} {result.get('message', '')}")
        text = str(result.get("stdout") or "")
        async with self.store.db.transaction():
            await self.store.rounds.set_expected(rnd.id, text)
        rnd.expected_output = text
        return text

    # ------------------------------------------------------------------ recording and scoring

    async def record_many(self, graded: list[tuple[Answer, Round, Grade]]) -> list[GradeOutcome]:
        """Store grades, rescore the players' rounds and queue the result messages, in one
        transaction, in submission order. An answer no longer in `grading` (skipped round,
        graded by someone else) is left alone, so nothing is scored twice."""
        now = self.clock.now()
        out: list[GradeOutcome] = []
        async with self.store.db.transaction():
            for answer, _rnd, grade in sorted(graded, key=lambda g: g[0].id):
                ok = await self.store.answers.finish(
                    answer.id, state="graded", verdict=grade.verdict, fraction=grade.fraction,
                    passed_cases=grade.passed_cases, total_cases=grade.total_cases, message=grade.message,
                    result=grade.raw, now=now)
                if not ok:
                    out.append(GradeOutcome(answer.id, "gone"))
                    continue
                out.append(GradeOutcome(answer.id, "graded", grade))
                rnd = await self.store.rounds.get(answer.round_id)
                if rnd is None or rnd.status == "skipped":
                    continue  # graded, but a skipped round is never scored
                channel = await self.store.channels.get(rnd.channel_id)
                rules = self.rules_for(channel) if channel else ScoringRules()
                total, rows = await self.score_player(rnd, answer.player_id, rules, now)
                await self.store.outbox.add(answer.channel_id, await self._result_message(
                    answer.id, answer.player_id, rnd, grade, total, channel, rows.get(answer.id)), now)
        self.on_change()
        return out

    async def record(self, answer_id: int, grade: Grade) -> bool:
        """Record one grade for a claimed answer (see record_many)."""
        answer = await self.store.answers.get(answer_id)
        rnd = await self.store.rounds.get(answer.round_id) if answer else None
        if answer is None or rnd is None:
            return False
        return (await self.record_many([(answer, rnd, grade)]))[0].state == "graded"

    async def score_player(self, rnd: Round, player_id: int, rules: ScoringRules, now: datetime
                           ) -> tuple[float, dict[int, dict[str, Any]]]:
        """Rewrite one player's score rows for a round from their graded attempts, and adjust the
        first-solver bonus of players whose rank moved and the streaks of later rounds.
        Must run inside a transaction. Returns the player's round total and rows by answer id."""
        store = self.store
        graded = await store.answers.graded_for(rnd.id, player_id)
        attempts = [Attempt(r[0], player_id, r[1], r[2] or 0.0) for r in graded]
        passing = [a.answer_id for a in attempts if a.verdict == "passed"]
        first_pass = min(passing) if passing else None
        old = await store.scores.rows_for(rnd.id, player_id)
        was_solved = any(r["solved"] for r in old.values())
        k = len(rules.first_bonus)
        rank: int | None = None
        if first_pass is not None and k:
            others = [e for e in await store.scores.first_solvers(rnd.id, k + 1) if e[1] != player_id]
            merged = sorted([(a, p) for a, p, _ in others] + [(first_pass, player_id)])[:k]
            order = [p for _, p in merged]
            rank = order.index(player_id) if player_id in order else None
            for aid, pid, fb in others:
                new_fb = rules.first_bonus_for(order.index(pid) if pid in order else None)
                if new_fb != fb:
                    row = await store.scores.solved_row(rnd.id, pid)
                    if row is not None:
                        await store.scores.update_bonus(
                            row["answer_id"], first_bonus=new_fb, streak_bonus=row["streak_bonus"],
                            streak=row["streak"], points=round(row["points"] - fb + new_fb, 2))
        streak_before = await self.streak_before(rnd, player_id) if first_pass is not None else 0
        base = rules.base(rnd.difficulty)
        total = 0.0
        new_rows: dict[int, dict[str, Any]] = {}
        for s in player_round(attempts, base=base, rules=rules, first_rank=rank, streak_before=streak_before):
            total += s.points
            prev = old.get(s.answer_id)
            row = {"answer_id": s.answer_id, "round_id": rnd.id, "channel_id": rnd.channel_id,
                   "player_id": player_id, "local_date": rnd.local_date.isoformat(), "chapter": rnd.chapter,
                   "attempt_value": s.attempt_value, "points": s.points, "first_bonus": s.first_bonus,
                   "streak_bonus": s.streak_bonus, "solved": int(s.solved), "streak": s.streak}
            new_rows[s.answer_id] = row
            if prev is None or any(prev[k2] != row[k2] for k2 in (
                    "attempt_value", "points", "first_bonus", "streak_bonus", "solved", "streak")):
                await store.scores.upsert(row, now)
        if first_pass is not None and not was_solved:
            await self._carry_streak(rnd, player_id, streak_before + 1, rules)
        return round(total, 2), new_rows

    async def streak_before(self, rnd: Round, player_id: int) -> int:
        """How many played rounds right before this one the player solved, without a gap."""
        n = 0
        offset_limit = 8
        seen = 0
        while True:
            ids = await self.store.rounds.played_before(rnd.channel_id, rnd.opened_at, offset_limit)
            ids = ids[seen:]
            if not ids:
                return n
            solved = await self.store.scores.solved_rounds(ids, player_id)
            for rid in ids:
                if rid not in solved:
                    return n
                n += 1
            seen += len(ids)
            if offset_limit > 100_000:
                return n
            offset_limit *= 8

    async def _carry_streak(self, rnd: Round, player_id: int, streak: int, rules: ScoringRules) -> None:
        """A round solved late (its grading finished after later rounds were scored) extends the
        streak of the later rounds the player solved without a gap."""
        for later in await self.store.rounds.played_after(rnd.channel_id, rnd.opened_at):
            row = await self.store.scores.solved_row(later.id, player_id)
            if row is None:
                return
            streak += 1
            sb = rules.streak_bonus_for(streak)
            if row["streak"] == streak and row["streak_bonus"] == sb:
                return
            await self.store.scores.update_bonus(
                row["answer_id"], first_bonus=row["first_bonus"], streak_bonus=sb, streak=streak,
                points=round(row["points"] - row["streak_bonus"] + sb, 2))

    async def _result_message(self, answer_id: int, player_id: int, rnd: Round, grade: Grade,
                              total: float, channel: Channel | None, mine: dict[str, Any] | None) -> Message:
        lang = channel.schedule.language if channel else "en"
        who, uid = await self.store.players.who(player_id)
        label = VERDICT_LABEL.get(grade.verdict, {}).get("en", grade.verdict) if VERDICT_LABEL else grade.verdict
        if grade.raw is not None:
            body = render_result(grade.raw, lang)
        else:
            body = f"{label}: {grade.message}" if grade.message else label
        extra = []
        if mine is not None:
            extra.append(f"This attempt: {mine['attempt_value']:g} points"
                         + (f" (+{mine['first_bonus']:g} first-solver bonus)" if mine["first_bonus"] else "")
                         + (f" (+{mine['streak_bonus']:g} streak bonus, {mine['streak']} in a row)"
                            if mine["streak_bonus"] else ""))
        extra.append(f"Your round total: {total:g} points")
        return Message(
            kind="result", round_id=rnd.id, mention=uid,
            title=f"{who}, answer #{answer_id}: {label}",
            blocks=[Block(body), Block("\n".join(extra))],
            data={"answer_id": answer_id, "verdict": grade.verdict, "points": total, "player": who},
        )


GradingHook = Callable[[], Awaitable[None]]
