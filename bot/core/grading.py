"""The grading pipeline: stored answer -> runner (or the core for choice items) -> score.

Every answer is in SQLite before it is sent. The worker claims due answers (queued ->
grading), grades them outside the database lock, and records the grade, the score rows and the
player's result message in one transaction (grading -> graded). Results stream: whatever has
been graded when a write starts is written together, so no result waits for a slower answer of
the same claim. An unreachable runner puts the answer back in the queue until the runner's next
health probe (the backoff is per runner outage, `RunnerPool`) and costs nothing; an `internal`
verdict is retried a few times, then the answer is given up without a score. A storage fault
(disk full, read-only file) puts the answers back in the queue, keeps their grades in memory
and tries again with a backoff, logging the fault once; an answer whose row alone cannot be
written is given up. After a restart, answers left in `grading` go back to the queue
(`Store.answers.reset_grading`).
"""
from __future__ import annotations

import asyncio
import bisect
import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from questionbank.jobs import code_job, normalise_output, output_job
from questionbank.model import Item, Text
from questionbank.render import VERDICT_LABEL, known_mistake_index, mistake_hint, render_mistake, render_result
from runner.protocol import ProtocolError, Result

from ..storage.faults import fault_kind
from ..storage.repos import SCORE_FIELDS, Store
from .clock import Clock
from .models import UNGRADED, Answer, Block, Channel, Grade, Message, Round
from .runners import RunnerPool, RunnerUnavailable, RunnerWaiting
from .scoring import Attempt, ScoringRules, attempt_fraction, hinted_base, player_round
from .settings import GradingSettings
from .streaks import StreakWalk

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
        pool.configure(now=clock.now, retry_s=settings.retry_s,
                       retry_max_s=min(settings.retry_max_s, settings.probe_max_s))
        self._runner_back = False
        pool.on_up = self._on_runner_up
        # a storage fault: grades decided but not stored (by answer id), answers that could not
        # even be put back in the queue, and when to write again
        self._held: dict[int, tuple[Answer, Round, Grade]] = {}
        self._stuck: set[int] = set()
        self._store_retry_at: datetime | None = None
        self._store_backoff = 0.0

    def _on_runner_up(self, _slot: Any) -> None:
        self._runner_back = True

    def wait_s(self) -> float | None:
        """Seconds until the worker has something of its own to do (a storage retry, a runner
        probe), or None."""
        now = self.clock.now()
        at = [t for t in (self._store_retry_at, self.pool.next_probe()) if t is not None]
        if not at:
            return None
        return max(0.0, (min(at) - now).total_seconds())

    # ------------------------------------------------------------------ worker

    async def grade_due(self, max_rounds: int = 1000) -> int:
        """Grade every answer that is due now (and those that fall due meanwhile); returns how
        many reached a final state.

        Up to `batch` answers are claimed and in flight at once (`concurrency` of them at the
        runner); each time some finish, those finished are recorded together and more are
        claimed. A result is written and handed to the outbox as soon as it is graded, never
        held back for a slower answer of the same claim."""
        if self._store_retry_at is not None and self.clock.now() < self._store_retry_at:
            return 0  # storage fault: wait for the backoff
        if self._stuck and not await self._put_back_stuck():
            return 0
        if self.pool.next_probe() is not None:
            await self.pool.probe_due()
        if self._runner_back:
            self._runner_back = False
            async with self.store.db.transaction():  # everything waiting for the runner is due now
                await self.store.answers.due_now(self.clock.now())
        until = self.pool.all_waiting()
        if until is not None:  # no runner now: what needs one waits for the probe, in one statement
            async with self.store.db.transaction():
                await self.store.answers.postpone_runner_work(self.clock.now(), until)
        done = 0
        claims = 0
        window = max(1, self.settings.batch)
        in_flight: dict[asyncio.Task[Any], int] = {}
        try:
            while True:
                storage_ok = self._store_retry_at is None or self.clock.now() >= self._store_retry_at
                if len(in_flight) < window and claims < max_rounds and storage_ok:
                    ids = await self.store.answers.due_ids(self.clock.now(), window - len(in_flight))
                    if ids:
                        claims += 1
                        async with self.store.db.transaction():
                            claimed = await self.store.answers.claim(ids)
                        for i in claimed:
                            in_flight[asyncio.ensure_future(self._guarded(i))] = i
                if not in_flight:
                    break
                finished, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                prepared = []
                for task in finished:
                    del in_flight[task]
                    prepared.append(task.result())
                outcomes = [p for p in prepared if isinstance(p, GradeOutcome)]
                ready = [p for p in prepared if not isinstance(p, GradeOutcome)]
                if ready:
                    outcomes += await self._record_isolated(ready)
                done += sum(1 for o in outcomes if o.state in ("graded", "abandoned"))
        except Exception:
            self._stuck.update(in_flight.values())  # put back in the queue by the next pass
            raise
        finally:
            for task in in_flight:  # cancelled (shutdown): they stay in `grading`, re-queued at start
                task.cancel()
        return done

    async def _record_isolated(self, ready: list[tuple[Answer, Round, Grade]]) -> list[GradeOutcome]:
        """Record a batch. A storage fault (it hits every write) puts the whole batch back in the
        queue with its grades kept (`_hold`). Any other failure: record the answers one by one, so
        one answer that cannot be stored never keeps the others in `grading`; an answer that alone
        cannot be stored is given up, unless every answer of the batch fails the same way, which
        is the storage's fault too."""
        try:
            out = await self.record_many(ready)
        except Exception as exc:  # noqa: BLE001 - classified and isolated below
            if fault_kind(exc) is not None:
                return await self._hold(ready, exc)
            log.warning("storing a batch of %d grades failed (%s: %s); storing them one by one",
                        len(ready), type(exc).__name__, exc)
        else:
            self._stored()
            return out
        outcomes: list[GradeOutcome] = []
        failed: list[tuple[tuple[Answer, Round, Grade], BaseException]] = []
        wrote = False
        for entry in ready:
            try:
                outcomes += await self.record_many([entry])
                wrote = True
            except Exception as one:  # noqa: BLE001
                if fault_kind(one) is not None:
                    outcomes += await self._hold([entry], one)
                else:
                    failed.append((entry, one))
        if len(failed) > 1 and len(failed) == len(ready) and len({type(e).__name__ for _, e in failed}) == 1:
            return outcomes + await self._hold([f[0] for f in failed], failed[0][1])
        for entry, err in failed:  # this answer alone is given up
            log.error("storing the grade of answer %s failed; giving it up", entry[0].id,
                      exc_info=(type(err), err, err.__traceback__))
            try:
                outcomes.append(await self._abandon(
                    entry[0].id, f"its result could not be stored ({type(err).__name__})"))
            except Exception as err2:  # noqa: BLE001 - storage is down after all
                outcomes += await self._hold([entry], err2)
        if wrote:
            self._stored()
        return outcomes

    async def _hold(self, entries: list[tuple[Answer, Round, Grade]], exc: BaseException) -> list[GradeOutcome]:
        """The storage failed: keep the grades in memory, put the answers back in the queue (or,
        if even that fails, remember them), and wait before the next write: 0.5 s doubling up
        to 30 s. Logged once per fault, with the cause and the fix."""
        msg = self.store.db.faults.report(exc, "storing grades")
        if msg is None:  # every answer failed the same way, but not with a storage error
            log.error("storing %d grades failed the same way (%s: %s); keeping them queued",
                      len(entries), type(exc).__name__, exc)
        self._store_backoff = min(30.0, max(0.5, self._store_backoff * 2))
        self._store_retry_at = self.clock.now() + timedelta(seconds=self._store_backoff)
        ids = [e[0].id for e in entries]
        for e in entries:
            self._held[e[0].id] = e
        try:
            async with self.store.db.transaction():
                await self.store.answers.requeue_many(ids, self._store_retry_at)
        except Exception:  # noqa: BLE001 - still `grading` in the file: put back when it works
            self._stuck.update(ids)
        return [GradeOutcome(i, "queued") for i in ids]

    def _stored(self) -> None:
        self.store.db.faults.ok()  # grades were written: a storage fault is over
        if self._store_retry_at is not None or self._store_backoff:
            self._store_retry_at = None
            self._store_backoff = 0.0

    async def _put_back_stuck(self) -> bool:
        """Put answers that a storage fault left in `grading` back in the queue."""
        ids = sorted(self._stuck)
        try:
            async with self.store.db.transaction():
                await self.store.answers.requeue_many(ids, self.clock.now())
        except Exception as exc:  # noqa: BLE001
            if self.store.db.faults.report(exc, "putting answers back in the queue") is None:
                log.exception("putting answers %s back in the queue failed", ids)
            self._store_backoff = min(30.0, max(0.5, self._store_backoff * 2))
            self._store_retry_at = self.clock.now() + timedelta(seconds=self._store_backoff)
            return False
        self._stuck.clear()
        return True

    async def _guarded(self, answer_id: int) -> GradeOutcome | tuple[Answer, Round, Grade]:
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

    async def prepare(self, answer_id: int) -> GradeOutcome | tuple[Answer, Round, Grade]:
        """Decide a claimed answer's grade (runner call outside the database lock); requeue or
        give it up when that is not possible now."""
        answer = await self.store.answers.get(answer_id)
        if answer is None or answer.state != "grading":
            self._held.pop(answer_id, None)
            return GradeOutcome(answer_id, "gone")
        held = self._held.pop(answer_id, None)
        if held is not None:  # graded before a storage fault: no second runner call
            return answer, held[1], held[2]
        rnd = await self.store.rounds.get(answer.round_id)
        item = self.bank.items.get(rnd.item_id) if rnd and rnd.item_id else None
        if rnd is None or item is None:
            return await self._abandon(answer_id, "this question is no longer in the bank")
        try:
            grade = await self.compute(answer.content, rnd, item, answer_id)
        except RunnerUnavailable as exc:
            # wait for the runner's next health probe (the pool logs each outage once)
            at = exc.retry_at if isinstance(exc, RunnerWaiting) else self.pool.next_probe()
            log.debug("runner unavailable for answer %s: %s", answer_id, exc)
            # no outage to wait for (no runner can take this job at all): try again much later
            await self._requeue(answer_id, count_try=False, at=at, delay=self.settings.retry_max_s)
            return GradeOutcome(answer_id, "unavailable")
        except NeedsRetry as exc:
            tries = await self._requeue(answer_id, count_try=True, delay=self.settings.retry_s)
            if tries >= self.settings.internal_retries:
                return await self._abandon_after_retries(answer_id, str(exc))
            return GradeOutcome(answer_id, "queued")
        return answer, rnd, grade

    async def _requeue(self, answer_id: int, *, count_try: bool, delay: float | None = None,
                       at: datetime | None = None) -> int:
        if at is None:
            at = self.clock.now() + timedelta(seconds=self._backoff if delay is None else delay)
        async with self.store.db.transaction():
            return await self.store.answers.requeue(answer_id, at, count_try=count_try)

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
                    data={"answer_id": answer_id, "verdict": UNGRADED},
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
                         "matches the printed output" if ok else "that is not what the snippet prints",
                         mistake=None if ok else known_mistake_index(item, answer=content))
        raw = await self.pool.grade(code_job(item, content, job_id=f"answer-{answer_id}"))
        try:
            result = Result.from_json(raw)
        except ProtocolError as e:  # a result we cannot read is the runner's fault, never a grade
            raise NeedsRetry(f"the runner's result was unreadable: {e}") from None
        if result.verdict.runner_fault:
            raise NeedsRetry(result.message or "runner internal error")
        channel = await self.store.channels.get(rnd.channel_id)
        rules = self.rules_for(channel) if channel else ScoringRules()
        partial = rules.partial_credit and item.mode == "partial"
        verdict = result.verdict.value
        return Grade(
            verdict=verdict,
            fraction=attempt_fraction(verdict, result.passed_cases, result.total_cases, partial=partial),
            passed_cases=result.passed_cases, total_cases=result.total_cases,
            message=result.message, cases=[c.to_json() for c in result.cases],
            error=result.error.to_json() if result.error else None, raw=result.to_json(),
            mistake=known_mistake_index(item, result=result.to_json()),
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
        graded by someone else) is left alone, so nothing is scored twice.

        The pass reads what it needs for all its answers up front (a few queries per pass, not per
        answer), scores them one by one in submission order against that state exactly as if each
        were written at once, and writes the statements in the same order at the end (batched)."""
        now = self.clock.now()
        out: list[GradeOutcome] = []
        store = self.store
        async with store.db.transaction():
            ordered = sorted(graded, key=lambda g: g[0].id)
            ids = list(dict.fromkeys(a.id for a, _r, _g in ordered))
            grading = await store.answers.in_state(ids, "grading")
            rounds: dict[int, Round] = {}
            for answer, _rnd, _grade in ordered:
                if answer.id in grading and answer.round_id not in rounds:
                    rnd = await store.rounds.get(answer.round_id)
                    if rnd is not None and rnd.status != "skipped":
                        rounds[answer.round_id] = rnd
            players: dict[int, set[int]] = {}
            for answer, _rnd, _grade in ordered:
                if answer.id in grading and answer.round_id in rounds:
                    players.setdefault(answer.round_id, set()).add(answer.player_id)
            view = _PassScores(store)
            await view.load(rounds, players, batch_ids=set(ids))
            finishes: list[tuple[Any, ...]] = []
            messages: list[tuple[int, Message]] = []
            for answer, _rnd, grade in ordered:
                if answer.id not in grading:
                    out.append(GradeOutcome(answer.id, "gone"))
                    continue
                grading.discard(answer.id)  # the same answer twice: the second finds it graded
                finishes.append(store.answers.finish_params(
                    answer.id, state="graded", verdict=grade.verdict, fraction=grade.fraction,
                    passed_cases=grade.passed_cases, total_cases=grade.total_cases, message=grade.message,
                    result=grade.raw, now=now, mistake=grade.mistake))
                view.graded(answer, grade)
                out.append(GradeOutcome(answer.id, "graded", grade))
                rnd = rounds.get(answer.round_id)
                if rnd is None:
                    continue  # graded, but a skipped round is never scored
                channel = await store.channels.get(rnd.channel_id)
                rules = self.rules_for(channel) if channel else ScoringRules()
                total, rows = await self.score_player(rnd, answer.player_id, rules, now, view=view)
                item = self.bank.items.get(rnd.item_id) if rnd.item_id else None
                hint = mistake_hint(item, grade.mistake) if item is not None and not grade.passed else None
                messages.append((answer.channel_id, self._build_result_message(
                    answer.id, rnd, grade, total, channel, rows.get(answer.id), view.who(answer.player_id),
                    hint=hint)))
            await store.answers.finish_many(finishes)
            await view.flush()
            await store.outbox.add_many(messages, now)
        self.on_change()
        return out

    async def score_player(self, rnd: Round, player_id: int, rules: ScoringRules, now: datetime, *,
                           view: _ScoreView | None = None) -> tuple[float, dict[int, dict[str, Any]]]:
        """Rewrite one player's score rows for a round from their graded attempts, and adjust the
        first-solver bonus of players whose rank moved and the streaks of later rounds.
        Must run inside a transaction. Returns the player's round total and rows by answer id.
        `view` is where the rows are read and written (record_many passes its batched one)."""
        store = view or _StoreScores(self.store)
        graded = await store.graded_for(rnd.id, player_id)
        attempts = [Attempt(r[0], player_id, r[1], r[2] or 0.0) for r in graded]
        passing = [a.answer_id for a in attempts if a.verdict == "passed"]
        first_pass = min(passing) if passing else None
        old = await store.rows_for(rnd.id, player_id)
        was_solved = any(r["solved"] for r in old.values())
        k = len(rules.first_bonus)
        rank: int | None = None
        if first_pass is not None and k:
            others = [e for e in await store.first_solvers(rnd.id, k + 1) if e[1] != player_id]
            merged = sorted([(a, p) for a, p, _ in others] + [(first_pass, player_id)])[:k]
            order = [p for _, p in merged]
            rank = order.index(player_id) if player_id in order else None
            for _aid, pid, fb in others:
                new_fb = rules.first_bonus_for(order.index(pid) if pid in order else None)
                if new_fb != fb:
                    row = await store.solved_row(rnd.id, pid)
                    if row is not None:
                        await store.update_bonus(
                            row["answer_id"], first_bonus=new_fb, streak_bonus=row["streak_bonus"],
                            streak=row["streak"], points=round(row["points"] - fb + new_fb, 2))
        streak_before = (await self.streak_before(rnd, player_id, rules, view=store)
                         if first_pass is not None else 0)
        base = hinted_base(rules.base(rnd.difficulty), await store.hint_costs(rnd.id, player_id))
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
                await store.upsert(row, now)
        if first_pass is not None and not was_solved:
            await self._carry_streak(rnd, player_id, rules, view=store)
        return round(total, 2), new_rows

    async def streak_before(self, rnd: Round, player_id: int, rules: ScoringRules, *,
                            view: _ScoreView | None = None) -> int:
        """The player's streak over the played rounds right before this one (streaks.py: a few
        misses a week are forgiven)."""
        store = view or _StoreScores(self.store)
        walk = StreakWalk(rules.streak_freezes)
        offset_limit = 8
        seen = 0
        while True:
            rounds = (await store.played_before(rnd.channel_id, rnd.opened_at, offset_limit))[seen:]
            if not rounds:
                return walk.streak
            solved = await store.solved_rounds([rid for rid, _ in rounds], player_id)
            for rid, day in rounds:
                if not walk.step(rid in solved, day):
                    return walk.streak
            seen += len(rounds)
            if offset_limit > 100_000:
                return walk.streak
            offset_limit *= 8

    async def _carry_streak(self, rnd: Round, player_id: int, rules: ScoringRules, *,
                            view: _ScoreView | None = None) -> None:
        """A round solved late (its grading finished after later rounds were scored) changes the
        streak of the later rounds the player solved: each is walked again, up to the first whose
        streak was right already."""
        store = view or _StoreScores(self.store)
        for later in await store.played_after(rnd.channel_id, rnd.opened_at):
            row = await store.solved_row(later.id, player_id)
            if row is None:
                continue  # a miss: it may be forgiven, so the rounds after it may still change
            streak = await self.streak_before(later, player_id, rules, view=store) + 1
            sb = rules.streak_bonus_for(streak)
            if row["streak"] == streak and row["streak_bonus"] == sb:
                return
            await store.update_bonus(
                row["answer_id"], first_bonus=row["first_bonus"], streak_bonus=sb, streak=streak,
                points=round(row["points"] - row["streak_bonus"] + sb, 2))

    @staticmethod
    def _build_result_message(answer_id: int, rnd: Round, grade: Grade, total: float, channel: Channel | None,
                              mine: dict[str, Any] | None, who_uid: tuple[str, str], *,
                              hint: Text | None = None) -> Message:
        lang = channel.schedule.language if channel else "en"
        who, uid = who_uid
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
        blocks = [Block(body)]
        if hint is not None:  # the known mistake it behaves like: what to think about next
            blocks.append(Block(render_mistake(hint, lang)))
        return Message(
            kind="result", round_id=rnd.id, mention=uid,
            title=f"{who}, answer #{answer_id}: {label}",
            blocks=blocks + [Block("\n".join(extra))],
            data={"answer_id": answer_id, "verdict": grade.verdict, "points": total, "player": who},
        )




class _StoreScores:
    """What scoring reads and writes, straight from the store (one query each)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def graded_for(self, round_id: int, player_id: int) -> list[Any]:
        return await self.store.answers.graded_for(round_id, player_id)

    async def rows_for(self, round_id: int, player_id: int) -> dict[int, Any]:
        return await self.store.scores.rows_for(round_id, player_id)

    async def hint_costs(self, round_id: int, player_id: int) -> list[float]:
        return await self.store.hints.costs(round_id, player_id)

    async def first_solvers(self, round_id: int, limit: int) -> list[tuple[int, int, float]]:
        return await self.store.scores.first_solvers(round_id, limit)

    async def solved_row(self, round_id: int, player_id: int) -> Any:
        return await self.store.scores.solved_row(round_id, player_id)

    async def solved_rounds(self, round_ids: list[int], player_id: int) -> set[int]:
        return await self.store.scores.solved_rounds(round_ids, player_id)

    async def played_before(self, channel_id: int, opened_at: datetime, limit: int) -> list[tuple[int, date]]:
        return await self.store.rounds.played_before(channel_id, opened_at, limit)

    async def played_after(self, channel_id: int, opened_at: datetime) -> list[Round]:
        return await self.store.rounds.played_after(channel_id, opened_at)

    async def upsert(self, row: dict[str, Any], now: datetime) -> None:
        await self.store.scores.upsert(row, now)

    async def update_bonus(self, answer_id: int, *, first_bonus: float, streak_bonus: float, streak: int,
                           points: float) -> None:
        await self.store.scores.update_bonus(answer_id, first_bonus=first_bonus, streak_bonus=streak_bonus,
                                             streak=streak, points=points)


class _RoundRows:
    """One round's rows as a grading pass knows them: every solved row of the round, and every row
    and graded attempt of the players it loaded."""

    def __init__(self) -> None:
        self.players: set[int] = set()
        self.rows: dict[int, dict[int, dict[str, Any]]] = {}  # player -> answer id -> row
        self.solved: dict[int, dict[str, Any]] = {}  # answer id -> row, solved = 1
        self.solved_by: dict[int, dict[int, dict[str, Any]]] = {}  # player -> answer id -> solved row
        self.attempts: dict[int, list[tuple[int, str | None, float | None]]] = {}
        self.hints: dict[int, list[float]] = {}  # player -> costs of the hints revealed


class _PassScores(_StoreScores):
    """The scoring state of one grading pass (inside its transaction), read in a few queries up
    front and kept current in memory as the pass scores answer after answer; the writes are
    queued in order and sent in batches by `flush` (before any further read from the database,
    and at the end of the pass). Reads answer exactly what the per-statement queries would."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._rounds: dict[int, _RoundRows] = {}
        self._by_answer: dict[int, dict[str, Any]] = {}
        self._batch: set[int] = set()
        self._writes = store.scores.batch()
        self._names: dict[int, tuple[str, str]] = {}
        self._before: dict[tuple[int, datetime, int], list[tuple[int, date]]] = {}
        self._after: dict[tuple[int, datetime], list[Round]] = {}
        self._other_solved: dict[tuple[int, int], bool] = {}  # rounds not loaded: unchanged by the pass
        self._other_rows: dict[tuple[int, int], dict[str, Any] | None] = {}

    # ---------------------------------------------------------------- loading

    async def load(self, rounds: dict[int, Round], players: dict[int, set[int]], *, batch_ids: set[int]) -> None:
        self._batch = set(batch_ids)
        for rid, pids in players.items():
            await self._load(rid, pids)
        self._names.update(await self.store.players.identities(p for pids in players.values() for p in pids))
        # the rounds right before each round, and which of them the players solved (for the streak)
        for rid, pids in players.items():
            rnd = rounds[rid]
            ids = [i for i, _ in await self.played_before(rnd.channel_id, rnd.opened_at, 8)
                   if i not in self._rounds]
            if ids and pids:
                await self._load_solved_other(ids, sorted(pids))

    async def _load(self, round_id: int, pids: set[int]) -> None:
        """Load a round's rows for these players (and all its solved rows the first time)."""
        await self.flush()  # the database must hold everything queued before it is read
        rr = self._rounds.get(round_id)
        first = rr is None
        if rr is None:
            rr = self._rounds[round_id] = _RoundRows()
        new = sorted(set(pids) - rr.players)
        if not new and not first:
            return
        for row in await self.store.scores.round_rows(round_id, new, with_solved=first):
            self._keep(rr, row)
        for pid, costs in (await self.store.hints.costs_in_round(round_id, new)).items():
            rr.hints[pid] = costs
        for g in await self.store.answers.graded_in_round(round_id, new):
            if g.answer_id not in self._batch:  # this pass's answers join as they are graded
                rr.attempts.setdefault(g.player_id, []).append((g.answer_id, g.verdict, g.fraction))
        rr.players.update(new)
        for key in [k for k in self._other_rows if k[0] == round_id]:
            del self._other_rows[key]
        for key in [k for k in self._other_solved if k[0] == round_id]:
            del self._other_solved[key]

    def _keep(self, rr: _RoundRows, row: dict[str, Any]) -> None:
        known = self._by_answer.get(row["answer_id"])
        if known is not None:
            known.update(row)
            row = known
        else:
            self._by_answer[row["answer_id"]] = row
        rr.rows.setdefault(row["player_id"], {})[row["answer_id"]] = row
        if row["solved"]:
            rr.solved[row["answer_id"]] = row
            rr.solved_by.setdefault(row["player_id"], {})[row["answer_id"]] = row
        else:
            rr.solved.pop(row["answer_id"], None)
            rr.solved_by.get(row["player_id"], {}).pop(row["answer_id"], None)

    async def _load_solved_other(self, round_ids: list[int], pids: list[int]) -> None:
        missing = [(r, p) for r in round_ids for p in pids if (r, p) not in self._other_solved]
        if not missing:
            return
        hit = await self.store.scores.solved_pairs(sorted({r for r, _ in missing}), sorted({p for _, p in missing}))
        for key in missing:
            self._other_solved[key] = key in hit

    async def _round(self, round_id: int, player_id: int) -> _RoundRows:
        rr = self._rounds.get(round_id)
        if rr is None or player_id not in rr.players:
            await self._load(round_id, {player_id})
            rr = self._rounds[round_id]
        return rr

    def graded(self, answer: Answer, grade: Grade) -> None:
        """An answer of this pass is now graded (its attempt counts from here on)."""
        rr = self._rounds.get(answer.round_id)
        if rr is not None and answer.player_id in rr.players:
            bisect.insort(rr.attempts.setdefault(answer.player_id, []), (answer.id, grade.verdict, grade.fraction),
                          key=lambda a: a[0])

    def who(self, player_id: int) -> tuple[str, str]:
        return self._names.get(player_id, ("?", ""))

    # ---------------------------------------------------------------- reads

    async def graded_for(self, round_id: int, player_id: int) -> list[Any]:
        rr = await self._round(round_id, player_id)
        return list(rr.attempts.get(player_id, []))

    async def rows_for(self, round_id: int, player_id: int) -> dict[int, Any]:
        rr = await self._round(round_id, player_id)
        return {aid: dict(row) for aid, row in rr.rows.get(player_id, {}).items()}

    async def hint_costs(self, round_id: int, player_id: int) -> list[float]:
        rr = await self._round(round_id, player_id)
        return list(rr.hints.get(player_id, ()))

    async def first_solvers(self, round_id: int, limit: int) -> list[tuple[int, int, float]]:
        rr = self._rounds.get(round_id)
        if rr is None:
            await self.flush()
            return await super().first_solvers(round_id, limit)
        return [(r["answer_id"], r["player_id"], r["first_bonus"])
                for r in heapq.nsmallest(limit, rr.solved.values(), key=lambda r: r["answer_id"])]

    async def solved_row(self, round_id: int, player_id: int) -> Any:
        rr = self._rounds.get(round_id)
        if rr is not None:
            mine = rr.solved_by.get(player_id)
            return dict(mine[min(mine)]) if mine else None
        key = (round_id, player_id)
        if key not in self._other_rows:
            # a round this pass did not load: only bonus updates (queued through here) touch it
            row = await super().solved_row(round_id, player_id)
            self._other_rows[key] = {k: row[k] for k in SCORE_FIELDS} if row is not None else None
            stored = self._other_rows[key]
            if row is not None and stored is not None:
                self._by_answer.setdefault(row["answer_id"], stored)
        row = self._other_rows[key]
        return dict(row) if row is not None else None

    async def solved_rounds(self, round_ids: list[int], player_id: int) -> set[int]:
        out: set[int] = set()
        others = [r for r in round_ids if r not in self._rounds]
        await self._load_solved_other(others, [player_id])
        for rid in round_ids:
            rr = self._rounds.get(rid)
            if rr is not None:
                if rr.solved_by.get(player_id):
                    out.add(rid)
            elif self._other_solved[(rid, player_id)]:
                out.add(rid)
        return out

    async def played_before(self, channel_id: int, opened_at: datetime, limit: int) -> list[tuple[int, date]]:
        key = (channel_id, opened_at, limit)
        if key not in self._before:  # rounds do not change during a pass
            self._before[key] = await super().played_before(channel_id, opened_at, limit)
        return list(self._before[key])

    async def played_after(self, channel_id: int, opened_at: datetime) -> list[Round]:
        key = (channel_id, opened_at)
        if key not in self._after:
            self._after[key] = await super().played_after(channel_id, opened_at)
        return list(self._after[key])

    # ---------------------------------------------------------------- writes (queued)

    async def upsert(self, row: dict[str, Any], now: datetime) -> None:
        self._writes.upsert(row, now)
        known = self._by_answer.get(row["answer_id"])
        if known is not None:
            for k in ("attempt_value", "points", "first_bonus", "streak_bonus", "solved", "streak"):
                known[k] = row[k]
            new = known
        else:
            new = {k: row[k] for k in SCORE_FIELDS}
        rr = self._rounds.get(new["round_id"])
        if rr is not None:
            self._keep(rr, new)
        else:
            self._by_answer[new["answer_id"]] = new

    async def update_bonus(self, answer_id: int, *, first_bonus: float, streak_bonus: float, streak: int,
                           points: float) -> None:
        self._writes.update_bonus(answer_id, first_bonus=first_bonus, streak_bonus=streak_bonus, streak=streak,
                                  points=points)
        known = self._by_answer.get(answer_id)
        if known is not None:
            known.update(first_bonus=first_bonus, streak_bonus=streak_bonus, streak=streak, points=points)

    async def flush(self) -> None:
        """Send the queued writes in their order, consecutive ones of a kind in one batch."""
        await self._writes.flush()


_ScoreView = _StoreScores
