"""QuizService: the one object every platform adapter talks to.

Adapters call `command`, `message`, `submit` and `answer_form` with an Actor and a
ChannelRef, and render the returned Messages. Messages the bot sends on its own (a round
opens or closes, a grading result) go through the outbox to the adapter's `sink`, which
returns the platform's reference of what it posted (the round post's id becomes the round's
thread). `start()` runs the tick loop (opens and closes rounds), the grading worker and the
outbox dispatcher; tests drive the same steps by hand with a fake clock (`tick`,
`grade_pending`, `deliver`, `settle`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from questionbank.jobs import output_job
from questionbank.model import Item
from questionbank.render import render_explanation, render_item

from ..storage.db import Database, open_database
from ..storage.repos import Store
from .answers import AnswerRejected, looks_like_answer, parse_answer
from .approaches import MAX_APPROACHES, Solve, example_text, group_approaches
from .clock import Clock, SystemClock
from .digests import post_due_digests
from .grading import Grader
from .models import NOT_ENABLED, Actor, Block, Channel, ChannelOptions, ChannelRef, Message, Round, Schedule, TopicWeek, error, in_scope, info, plural
from .practice import PRACTICE_RULES, Practice
from .runners import RunnerPool, RunnerUnavailable
from .scheduler import Slot, current_slot, item_needs, local_date, next_round, pick_item, slot_for, slots_between, upcoming_slots, zone
from .scoring import ScoringRules
from .settings import CoreSettings

log = logging.getLogger(__name__)

Sink = Callable[[ChannelRef, Message], Awaitable[str | None]]


@dataclass
class Skipped:
    """What `QuizService.skip` skipped: the open round, or a scheduled round that will not be
    posted; neither, and `why` says why not."""

    round: Round | None = None
    slot: Slot | None = None
    why: str = ""


@dataclass
class AddedWeek:
    week: TopicWeek
    playable: int  # its items the configured runners can grade


class QuizService:
    def __init__(self, db: Database, bank: Any, pool: RunnerPool, *, clock: Clock | None = None,
                 settings: CoreSettings | None = None, sink: Sink | None = None) -> None:
        self.db = db
        self.store = Store(db)
        self.bank = bank
        self.pool = pool
        self.clock = clock or SystemClock()
        self.settings = settings or CoreSettings()
        self.sink = sink
        self._wake_grader = asyncio.Event()
        self._wake_outbox = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._deliver_lock = asyncio.Lock()
        self.grader = Grader(self.store, pool, bank, self.clock, self.rules_for, self.settings.grading,
                             on_change=self._changed)
        from .commands import CommandRouter  # circular: commands call back into the service

        self.commands = CommandRouter(self)
        self.practice = Practice(self)

    @classmethod
    async def open(cls, path: str, bank: Any, pool: RunnerPool, **kw: Any) -> QuizService:
        """Open the SQLite file (migrating it) and build the service."""
        return cls(await open_database(path), bank, pool, **kw)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, *, background: bool = True) -> None:
        """Resume after a restart (answers left `grading` are queued again), learn what the
        runners can do, then run the loops."""
        async with self.db.transaction():
            n = await self.store.answers.reset_grading(self.clock.now())
        if n:
            log.info("resuming %d answers that were being graded at shutdown", n)
        await self.pool.refresh()
        if background:
            self._tasks = [asyncio.create_task(self._tick_loop(), name="quiz-tick"),
                           asyncio.create_task(self._grading_loop(), name="quiz-grading"),
                           asyncio.create_task(self._outbox_loop(), name="quiz-outbox")]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []

    async def close(self) -> None:
        await self.stop()
        close = getattr(self.pool, "close", None)  # the runner clients' kept-alive connections
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
        await self.db.close()

    def _changed(self) -> None:
        self._wake_outbox.set()

    async def _tick_loop(self) -> None:
        while True:
            try:
                if self.pool.needs_refresh():
                    await self.pool.refresh()
                await self.tick()
            except Exception as exc:  # noqa: BLE001 - keep ticking; the next tick retries
                if self.db.faults.report(exc, "opening and closing rounds") is None:
                    log.exception("tick failed")
            await self.clock.sleep(self.settings.tick_s)

    async def _grading_loop(self) -> None:
        while True:
            timeout = 30.0
            try:
                await self.grade_pending()
                nxt = await self.store.answers.next_due()
                if nxt is not None:
                    timeout = max(0.05, min(30.0, (nxt - self.clock.now()).total_seconds()))
            except Exception as exc:  # noqa: BLE001
                if self.db.faults.report(exc, "grading") is None:
                    log.exception("grading pass failed")
                timeout = 5.0
            own = self.grader.wait_s()  # a storage retry or a runner probe
            if own is not None:
                timeout = max(0.05, min(timeout, own))
            self._wake_grader.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake_grader.wait(), timeout)

    async def _outbox_loop(self) -> None:
        while True:
            self._wake_outbox.clear()
            try:
                await self.deliver()
            except Exception as exc:  # noqa: BLE001
                if self.db.faults.report(exc, "delivering messages") is None:
                    log.exception("delivery failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake_outbox.wait(), 5.0)

    # ------------------------------------------------------------------ steps (tests drive these)

    async def tick(self) -> list[Round]:
        """Close rounds whose time is up (at the end they announced, also when the bot was down
        then), say which posting days were missed, and open the scheduled round whose window is
        running. A round that is open is never closed early: the day's round waits for it."""
        now = self.clock.now()
        for rnd in await self.store.rounds.due_to_close(now):
            await self.close_round(rnd, status="closed", by="", at=min(now, rnd.closes_at))
        opened = []
        channels = await self.store.channels.enabled()
        for ch in channels:
            await self._report_missed(ch, now)
            slot = current_slot(ch.schedule, now)
            if slot is None or (ch.schedule_since is not None and slot.start < ch.schedule_since):
                continue
            if await self.store.rounds.scheduled_on(ch.id, slot.day) or await self.store.rounds.open_in(ch.id):
                continue
            new = await self.open_round(ch, scheduled_day=slot.day)
            if new is not None:
                opened.append(new)
        for ch in channels:
            if ch.options.digest_on:
                try:
                    if await post_due_digests(self, ch, now):
                        self._changed()
                except Exception as exc:  # noqa: BLE001 - a digest must not hold up the rounds
                    if self.db.faults.report(exc, "posting a digest") is None:
                        log.exception("digest for %s failed", ch.ref)
        return opened

    # ------------------------------------------------------------------ the schedule's word

    async def _taken(self, ch: Channel, now: datetime) -> set[date]:
        first = local_date(ch.schedule, now) - timedelta(days=ch.schedule.duration_min // 1440 + 3)
        return await self.store.rounds.scheduled_dates(ch.id, first)

    async def next_round(self, ch: Channel, now: datetime | None = None) -> Slot | None:
        """The channel's next scheduled round (skips, posting days, the schedule's start, a posting
        day already taken by a moderator's post, and an open round it must wait for counted). Every
        message that speaks of the next round asks this."""
        now = now or self.clock.now()
        rnd = await self.store.rounds.open_in(ch.id)
        return next_round(ch.schedule, now, taken=await self._taken(ch, now), since=ch.schedule_since,
                          open_until=rnd.closes_at if rnd else None)

    def when(self, ch: Channel, at: datetime, fmt: str = "%a %d %b %H:%M") -> str:
        return at.astimezone(zone(ch.schedule.timezone)).strftime(fmt)

    async def next_round_text(self, ch: Channel, now: datetime | None = None) -> str:
        """`Next round: Wed 25 Nov 09:00 (Europe/Berlin).`, with why when it is not at its time."""
        now = now or self.clock.now()
        slot = await self.next_round(ch, now)
        tz = ch.schedule.timezone
        if slot is None:
            return ("No round is scheduled: the schedule has no posting days." if not ch.schedule.weekdays
                    else "No round is scheduled.")
        if slot.opens > slot.start and slot.opens > now:
            rnd = await self.store.rounds.open_in(ch.id)
            return (f"Next round: {self.when(ch, slot.opens)} ({tz}), when round {rnd.label if rnd else ''} closes "
                    f"(scheduled for {self.when(ch, slot.start, '%H:%M')}; a round is never closed early).")
        if slot.start <= now:
            return (f"Next round: {self.when(ch, slot.start, '%a %d %b')}'s, posted now (scheduled for "
                    f"{self.when(ch, slot.start, '%H:%M')}, open until {self.when(ch, slot.end, '%a %H:%M')} {tz}).")
        return f"Next round: {self.when(ch, slot.start)} ({tz})."

    async def _report_missed(self, ch: Channel, now: datetime) -> None:
        """Record the posting days whose window ended without a round (the bot was down, or a
        round outlasted it) and say so in the channel, once."""
        today = local_date(ch.schedule, now)
        since = ch.schedule_since
        if since is not None:
            first = local_date(ch.schedule, since)
        else:  # a channel from before schedule_since existed: from its last scheduled day on
            last = await self.store.rounds.last_scheduled_date(ch.id)
            if last is None:
                return
            first = last + timedelta(days=1)
        first = max(first, today - timedelta(days=14))
        if first > today:
            return
        taken = await self.store.rounds.scheduled_dates(ch.id, first)
        missed = [s for s in slots_between(ch.schedule, first, today)
                  if s.end <= now and s.day not in taken and (since is None or s.start >= since)]
        if not missed:
            return
        current = await self.store.rounds.open_in(ch.id)
        lines = []
        async with self.db.transaction():
            for s in missed:
                rid = await self.store.rounds.insert(channel_id=ch.id, item_id=None, local_date=s.day, scheduled=True,
                                                     status="skipped", opened_at=s.start, closes_at=s.end,
                                                     reason="missed")
                if rid is None:
                    continue
                why = (f"round {current.label} was open through its whole window and keeps its announced end"
                       if current is not None and current.opened_at < s.end
                       else "the bot was not running during its window")
                end_fmt = "%H:%M" if self.when(ch, s.start, "%d") == self.when(ch, s.end, "%d") else "%a %H:%M"
                lines.append(f"No round on {self.when(ch, s.start, '%a %d %b')} (window "
                             f"{self.when(ch, s.start, '%H:%M')}-{self.when(ch, s.end, end_fmt)}"
                             f" {ch.schedule.timezone}): {why}.")
            if lines:
                await self.store.outbox.add(ch.id, Message(
                    kind="notice", title="Missed round" if len(lines) == 1 else "Missed rounds",
                    blocks=[Block("\n".join(lines))], data={"missed": [s.day.isoformat() for s in missed]}), now)
        if lines:
            self._changed()

    async def passed_over(self, ch: Channel, until: datetime) -> list[Slot]:
        """Pending scheduled rounds whose whole window ends before `until` (an open round's end):
        they will not be posted, since a round is never closed early."""
        now = self.clock.now()
        out = []
        for s in upcoming_slots(ch.schedule, now, taken=await self._taken(ch, now), since=ch.schedule_since):
            if s.end > until:
                break
            out.append(s)
        return out

    async def skip_scheduled(self, ch: Channel, day: date | None, by: str) -> tuple[Slot | None, str]:
        """Skip the next pending scheduled round (`day` None) or the one of a given local date:
        (the slot, "") or (None, why not)."""
        now = self.clock.now()
        s = ch.schedule
        if day is None:
            slot = await self.next_round(ch, now)
            if slot is None:
                return None, "No scheduled round is ahead to skip."
        else:
            if day.weekday() not in s.weekdays:
                return None, f"{day:%a %d %b} is not a posting day ({s.describe()})."
            slot = slot_for(s, day)
            if slot.end <= now:
                return None, f"The round of {day:%a %d %b} is over (its window ended)."
            if ch.schedule_since is not None and slot.start < ch.schedule_since:
                return None, f"The schedule applies after {day:%a %d %b}'s posting time; there is nothing to skip."
            row = await self.store.rounds.scheduled_on(ch.id, day)
            if row is not None:
                what = f"was posted as round {row.label}" if row.item_id else "is already skipped"
                return None, f"The round of {day:%a %d %b} {what}."
        async with self.db.transaction():
            rid = await self.store.rounds.insert(channel_id=ch.id, item_id=None, local_date=slot.day, scheduled=True,
                                                 status="skipped", opened_at=now, closes_at=now, opened_by=by,
                                                 reason="skipped")
        if rid is None:
            return None, f"The round of {slot.day:%a %d %b} is already posted or skipped."
        return slot, ""

    async def skip(self, ch: Channel, by: str, *, day: date | None = None, scheduled: bool = False) -> Skipped:
        """A moderator's skip: the open round (its answers are not scored) when there is one, else
        the next scheduled round. `scheduled` skips the next scheduled round even while one is
        open, `day` the scheduled round of that local date."""
        if day is None and not scheduled:
            rnd = await self.store.rounds.open_in(ch.id)
            if rnd is not None:
                await self.close_round(rnd, status="skipped", by=by)
                return Skipped(round=rnd)
        slot, why = await self.skip_scheduled(ch, day, by)
        return Skipped(slot=slot, why=why)

    async def grade_pending(self) -> int:
        """Grade what is due; a private round its player solved closes at once (the answer and
        the review schedule follow)."""
        n = await self.grader.grade_due()
        for rnd in await self.store.rounds.solved_private():
            await self.close_round(rnd, status="closed")
        return n

    async def deliver(self) -> int:
        """Hand undelivered outbox messages to the sink, oldest first.

        Order holds within a channel: a message the sink fails on waits for the next pass
        together with everything after it in that channel, while other channels go on (one
        unreachable channel must not hold up everyone's results). Each message is marked
        delivered as soon as the sink took it, so a crash can post again at most the one that
        was in flight."""
        if self.sink is None:
            return 0
        n = 0
        stuck: set[int] = set()
        async with self._deliver_lock:
            while True:
                batch = await self.store.outbox.pending(100, skip_channels=stuck)
                if not batch:
                    return n
                for oid, channel_id, msg in batch:
                    if channel_id in stuck:
                        continue
                    ref: str | None = None
                    ch = await self.store.channels.get(channel_id)
                    if ch is not None and ch.private:  # a player's practice: to them only, in the quiz channel
                        ch, msg = await self._privately(ch, msg)
                    elif ch is not None and msg.round_id is not None:
                        rnd = await self.store.rounds.get(msg.round_id)
                        msg.thread_ref = rnd.message_ref if rnd else None
                    if ch is not None:
                        try:
                            ref = await self.sink(ch.ref, msg)
                        except Exception:  # noqa: BLE001 - kept for the next pass, in its place
                            log.exception("sink failed for outbox message %s (channel %s)", oid, ch.ref)
                            stuck.add(channel_id)
                            continue
                    if ref and msg.kind == "round_open" and msg.round_id is not None:
                        async with self.db.transaction():  # later messages of the round go to its thread
                            await self.store.rounds.set_message_ref(msg.round_id, str(ref))
                            await self.store.outbox.delivered(oid, self.clock.now())
                    else:
                        async with self.db.writing():  # one statement: its own transaction
                            await self.store.outbox.delivered(oid, self.clock.now())
                    n += 1

    async def _privately(self, room: Channel, msg: Message) -> tuple[Channel | None, Message]:
        """A private channel's message goes to its player alone, in its quiz channel."""
        parent = await self.store.channels.get(room.parent_id or 0)
        uid = (await self.store.players.user_ids([room.owner_id or 0])).get(room.owner_id or 0)
        msg.ephemeral, msg.mention, msg.thread_ref = True, uid, None
        msg.data = {**msg.data, "private": True}
        return (parent if uid else None), msg

    async def settle(self, *, passes: int = 50) -> None:
        """Tick, grade and deliver until nothing due is left (answers waiting for a runner that
        is down stay queued). Scripts and tests use it to see results before the next step."""
        await self.tick()
        for _ in range(passes):
            graded = await self.grade_pending()
            delivered = await self.deliver()
            if not graded and not delivered:
                return

    async def pending_report(self) -> str | None:
        """What happens to answers without a result when the bot stops now (`:quit`, shutdown):
        they stay stored and are graded at the next start, each scored once. None when none."""
        counts = await self.store.answers.pending_by_state()
        grading, queued = counts.get("grading", 0), counts.get("queued", 0)
        if not grading and not queued:
            return None
        down = [s.name for s in self.pool.slots if not getattr(s, "reachable", True)]
        parts = []
        if grading:
            parts.append(f"{plural(grading, 'answer was', 'answers were')} still being graded by the runner"
                         f"{' (it is up)' if not down else ''} and did not get a result before the bot stopped")
        if queued:
            why = ("no runner is configured" if not self.pool.slots
                   else f"the runner is unreachable: {', '.join(down)}" if down else "not sent yet")
            parts.append(f"{plural(queued, 'answer is', 'answers are')} still waiting for the runner ({why})")
        return ("; ".join(parts) + ". They are kept in the database and graded the next time the bot runs "
                "with it (each is scored once; the results are posted then).")

    # ------------------------------------------------------------------ rules

    def rules_for(self, channel: Channel) -> ScoringRules:
        """Config defaults, then the config's per-channel overrides, then the channel's stored ones."""
        rules = self.settings.scoring
        ref = channel.ref
        over = self.settings.channel_scoring.get(f"{ref.platform}:{ref.workspace}:{ref.quiz_channel}")
        if over:
            rules = rules.merged(over)
        if channel.scoring:
            rules = rules.merged(channel.scoring)
        if channel.private:
            rules = rules.merged(PRACTICE_RULES)
        return rules

    def capabilities(self) -> set[str]:
        return self.pool.capabilities()

    # ------------------------------------------------------------------ platform entry points

    async def command(self, actor: Actor, where: ChannelRef, text: str) -> list[Message]:
        """`/quiz ...`: `text` is what follows `/quiz` (e.g. `schedule 09:30 Europe/Berlin`)."""
        try:
            return await self.commands.dispatch(actor, where, text)
        except Exception as exc:  # noqa: BLE001 - a storage fault is said plainly, the rest propagates
            return self._storage_reply(exc, "This command could not be completed", "running a command")

    def _storage_reply(self, exc: Exception, lead: str, doing: str) -> list[Message]:
        """The reply when a storage fault stopped an action: the file, the cause, the fix (logged
        once per fault). Anything else is not ours to hide: re-raised."""
        msg = self.db.faults.report(exc, doing)
        if msg is None:
            raise exc
        return [error(f"{lead}: the bot cannot use its database. {msg}")]

    async def message(self, actor: Actor, where: ChannelRef, text: str, *, in_round_thread: bool = False
                      ) -> list[Message]:
        try:
            return await self._message(actor, where, text, in_round_thread=in_round_thread)
        except Exception as exc:  # noqa: BLE001 - see _storage_reply
            return self._storage_reply(exc, "Your message could not be handled", "reading a message")

    async def _message(self, actor: Actor, where: ChannelRef, text: str, *, in_round_thread: bool = False
                       ) -> list[Message]:
        """A plain chat message. It is an answer when it has a code block, inline code, an option
        key for a choice round, or (in the round's thread) any text for an output round;
        anything else is chatter and gets no reply."""
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled:
            return []
        rnd = await self.store.rounds.open_in(ch.id)
        if rnd is None or rnd.item_id is None:
            if "```" in text:
                return [error(await self._no_round_text(ch))]
            return []
        item = self.bank.items.get(rnd.item_id)
        if item is None:
            return []
        keys = tuple(o.key for o in item.options)
        if looks_like_answer(text, item.kind, keys, in_round_thread=in_round_thread):
            return await self.submit(actor, where, text, explicit=in_round_thread and item.kind == "output")
        return []

    async def submit(self, actor: Actor, where: ChannelRef, text: str, *, explicit: bool = True,
                     round_id: int | None = None, private: bool = False) -> list[Message]:
        """`private`: an answer to the player's own practice or review question."""
        try:
            return await self._submit(actor, where, text, explicit=explicit, round_id=round_id, private=private)
        except Exception as exc:  # noqa: BLE001 - see _storage_reply
            return self._storage_reply(exc, "Your answer was not stored (send it again once this is fixed)",
                                       "storing an answer")

    async def _submit(self, actor: Actor, where: ChannelRef, text: str, *, explicit: bool = True,
                      round_id: int | None = None, private: bool = False) -> list[Message]:
        """An answer to the channel's open round (from `/quiz answer`, a form or a message).
        Stored as queued before anything else; the result follows through the sink. `round_id`
        is the round a form or button was made for: an answer meant for a round that has
        closed since is refused rather than counted against the next question."""
        found = await self._answerable(actor, where, round_id, private)
        if isinstance(found, Message):
            return [found]
        ch, rnd = found
        if round_id is not None and round_id != rnd.id:
            old = await self.store.rounds.get(round_id)
            return [error(f"Round {old.label if old else '#' + str(round_id)} has closed; your answer was not counted. "
                          f"Round {rnd.label} is open now: answer it from its own post.")]
        item = self.bank.items.get(rnd.item_id)
        if item is None:
            return [error("This round's question is no longer in the bank; a moderator can `/quiz skip` it.")]
        try:
            parsed = parse_answer(text, item, explicit=explicit, max_chars=self.settings.answers.max_chars)
        except AnswerRejected as exc:
            return [error(str(exc))]
        now = self.clock.now()
        limit = self.settings.answers.max_attempts
        pid = self.store.players.known(actor)
        if pid is None:  # new player or new display name: store it first
            async with self.db.transaction():
                pid = await self.store.players.ensure(actor)
        # One statement, committed when it returns: stored only if the round is open and the
        # player has attempts left. When nothing was stored, say which (the attempts first).
        async with self.db.writing():
            aid = await self.store.answers.insert(round_id=rnd.id, channel_id=ch.id, player_id=pid,
                                                  content=parsed.content, now=now, max_attempts=limit)
            if aid is None and await self.store.answers.count_by(rnd.id, pid) >= limit:
                return [error(f"You have used all {limit} attempts for this round.")]
        if aid is None:
            return [error("This round has just closed; your answer was not counted. The next round opens "
                          "at the posting time.")]
        self._wake_grader.set()
        what = {"choice": f"option(s) {parsed.content.replace(',', ', ')}", "output": "output"}.get(item.kind, "code")
        return [Message(kind="ack", round_id=rnd.id, mention=actor.user_id, ephemeral=True,
                        blocks=[Block(f"Answer #{aid} received ({what}); grading it now.")],
                        data={"answer_id": aid, "round_id": rnd.id})]

    async def _answerable(self, actor: Actor, where: ChannelRef, round_id: int | None,
                          private: bool) -> tuple[Channel, Round] | Message:
        """The round an answer is for: the player's open private one (asked for, or the one a
        form or button was made for), else the channel's open round."""
        if not private and round_id is not None:
            rnd = await self.store.rounds.get(round_id)
            private = rnd is not None and rnd.mode != "daily"
        if private:
            found = await self.practice.open_round(actor, where)
            if isinstance(found, Message):
                return found
            return found[0].room, found[1]
        return await self._open_round(where)

    async def _open_round(self, where: ChannelRef) -> tuple[Channel, Round] | Message:
        """The channel and its open round, or the refusal a player gets when there is none."""
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled:
            return error(NOT_ENABLED)
        rnd = await self.store.rounds.open_in(ch.id)
        if rnd is None or rnd.item_id is None:
            return error(await self._no_round_text(ch))
        return ch, rnd

    async def hint(self, actor: Actor, where: ChannelRef, *, reveal: bool, private: bool = False) -> list[Message]:
        """The open round's next hint, privately. Without `reveal` it says what the next one
        costs (and shows the ones already revealed, free); with it, the hint is recorded with
        the channel's cost and the player's attempts are rescored. A solver needs none.
        `private`: for the player's open practice or review question."""
        found = await self._answerable(actor, where, None, private)
        if isinstance(found, Message):
            return [found]
        ch, rnd = found
        item = self.bank.items.get(rnd.item_id or "")
        if item is None or not item.hints:
            return [info("This question has no hints: read the prompt and the example again, and try a small case "
                         "by hand.", ephemeral=True)]
        lang, total = ch.schedule.language, len(item.hints)
        pid = self.store.players.known(actor)
        if pid is None:
            async with self.db.transaction():
                pid = await self.store.players.ensure(actor)
        costs = await self.store.hints.costs(rnd.id, pid)
        seen = [Block(f"Hint {i + 1}: {item.hints[i].get(lang)}") for i in range(min(len(costs), total))]
        spent = sum(costs)
        if len(costs) >= total:
            return [Message(kind="hint", title=f"All {plural(total, 'hint')} of round {rnd.label}", ephemeral=True,
                            blocks=seen + [Block(f"You have revealed every hint; your answers in this round score "
                                                 f"at most {max(0.0, 100 - spent):g}% of its points.")])]
        if await self.store.scores.solved_row(rnd.id, pid) is not None:
            return [info("You have solved this round already: no hint needed.", ephemeral=True)]
        n, cost = len(costs) + 1, self.rules_for(ch).hint_cost
        if not reveal:
            return [Message(kind="hint", title=f"Hint {n} of {total} for round {rnd.label}", ephemeral=True,
                            blocks=seen + [Block(
                                f"Hint {n} costs {cost:g}% of this round's points: your answers would then score at "
                                f"most {max(0.0, 100 - spent - cost):g}%. Reveal it with `/quiz hint reveal`.")],
                            data={"round_id": rnd.id, "next": n, "cost": cost})]
        now = self.clock.now()
        async with self.db.transaction():
            still = await self.store.rounds.open_in(ch.id)
            if still is None or still.id != rnd.id:
                return [error(f"Round {rnd.label} has just closed; no hint was revealed.")]
            if await self.store.hints.add(rnd.id, pid, n, cost, now):
                spent += cost
                await self.grader.score_player(rnd, pid, self.rules_for(ch), now)
        return [Message(kind="hint", title=f"Hint {n} of {total} for round {rnd.label} (-{cost:g}% of its points)",
                        ephemeral=True,
                        blocks=[Block(item.hints[n - 1].get(lang)),
                                Block(f"Your answers in this round now score at most {max(0.0, 100 - spent):g}% "
                                      "of its points." + (" `/quiz hint` says what the next hint costs."
                                                          if n < total else ""))],
                        data={"round_id": rnd.id, "n": n, "cost": cost})]

    async def answer_form(self, where: ChannelRef, *, actor: Actor | None = None,
                          round_id: int | None = None) -> Message | None:
        """What a platform's answer modal needs for the open round (or, with the actor and the
        round id of their private question, for that one): kind, starter code, options."""
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled:
            return None
        rnd = await self.store.rounds.open_in(ch.id)
        if actor is not None and round_id is not None and (rnd is None or rnd.id != round_id):
            found = await self.practice.open_round(actor, where)
            if not isinstance(found, Message) and found[1].id == round_id:
                rnd = found[1]
        item = self.bank.items.get(rnd.item_id) if rnd and rnd.item_id else None
        if rnd is None or item is None:
            return None
        lang = ch.schedule.language
        return Message(kind="form", round_id=rnd.id, title=item.title.get(lang), data={
            "round_id": rnd.id, "number": rnd.number, "kind": item.kind, "starter": item.starter,
            "entrypoint": item.entrypoint,
            "options": [{"key": o.key, "text": o.text.get(lang)} for o in item.options],
            "multiple": len(item.correct) > 1, "max_chars": self.settings.answers.max_chars,
        })

    async def is_round_thread(self, where: ChannelRef, ref: str) -> bool:
        """Is `ref` (a thread id / parent message ts) the thread of the channel's open round?
        Adapters pass the answer to `message(in_round_thread=...)`."""
        ch = await self.store.channels.by_ref(where)
        if ch is None:
            return False
        rnd = await self.store.rounds.open_in(ch.id)
        return rnd is not None and rnd.message_ref == str(ref)

    async def _no_round_text(self, ch: Channel) -> str:
        slot = await self.next_round(ch)
        when = ""
        if slot is not None:
            when = f" The next one opens {self.when(ch, max(slot.opens, slot.start))} ({ch.schedule.timezone})."
        return "There is no open round in this channel right now." + when

    # ------------------------------------------------------------------ operations (commands call these)

    async def enable(self, where: ChannelRef) -> Channel:
        async with self.db.transaction():
            return await self.store.channels.enable(where, self.settings.schedule, self.clock.now())

    async def disable(self, where: ChannelRef, by: str) -> Channel | None:
        """Switch the quiz off in a channel (its scores are kept) and close its open round as
        usual; None when the quiz was not on there."""
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled:
            return None
        async with self.db.transaction():
            await self.store.channels.set_enabled(ch.id, False)
        rnd = await self.store.rounds.open_in(ch.id)
        if rnd is not None:
            await self.close_round(rnd, status="closed", by=by)
        return ch

    async def close_open_round(self, ch: Channel, by: str) -> Round | None:
        """Close the channel's open round now and reveal the answer; None when none is open."""
        rnd = await self.store.rounds.open_in(ch.id)
        if rnd is None:
            return None
        await self.close_round(rnd, status="closed", by=by)
        return rnd

    def topic_items(self, scope: str) -> list[Item]:
        """The bank's items of a topic: a chapter ("3") or a section ("3.2")."""
        return [it for it in self.bank.items.values() if in_scope(scope, it.chapter, it.section)]

    async def add_week(self, ch: Channel, scope: str, start: date, end: date, *, title: str, by: str,
                       today: date | None = None) -> tuple[AddedWeek | None, str]:
        """Plan a topic week over local dates start..end: (the week, "") or (None, why not). It
        must not end before it starts or before today, nor share a day with another."""
        if today is None:
            today = local_date(ch.schedule, self.clock.now())
        if end < start:
            return None, f"The topic week ends ({end}) before it starts ({start})."
        if end < today:
            return None, (f"The topic week {start} to {end} is wholly in the past (today is {today}): "
                          "give a range that ends today or later.")
        clash = await self.store.weeks.overlapping(ch.id, start, end)
        if clash:
            names = "; ".join(f"#{w.id} {w.title or 'chapter ' + w.scope} ({w.start} to {w.end})" for w in clash)
            return None, (f"Topic weeks may not overlap: {start} to {end} clashes with {names}. Pick other dates, or "
                          f"`/quiz week cancel {clash[0].id}` first.")
        playable = sum(1 for it in self.topic_items(scope) if self.playable(it))
        async with self.db.transaction():
            wid = await self.store.weeks.add(ch.id, scope, title, start, end, by)
        week = TopicWeek(id=wid, channel_id=ch.id, scope=scope, title=title, start=start, end=end, created_by=by)
        return AddedWeek(week, playable), ""

    async def cancel_week(self, ch: Channel, week_id: int) -> TopicWeek | None:
        """Cancel one of the channel's topic weeks; None when it has no such week (or it is
        cancelled already)."""
        w = await self.store.weeks.get(week_id)
        if w is None or w.channel_id != ch.id or w.cancelled:
            return None
        async with self.db.transaction():
            await self.store.weeks.cancel(w.id)
        return w

    async def open_round(self, ch: Channel, *, item: Item | None = None, scheduled_day: Any = None,
                         by: str = "") -> Round | None:
        """Open a round. Scheduled rounds (`scheduled_day`, from the tick) are unique per channel
        and local date (a second call for the same day returns None and posts nothing) and never
        close an open round: they wait. A moderator's post (`scheduled_day` None) closes the open
        round first and, on a posting day whose scheduled round is still pending (its window
        running, or later that local day), *is* that day's round: no other is posted that day."""
        now = self.clock.now()
        slot: Slot | None = None
        if scheduled_day is not None:
            slot = slot_for(ch.schedule, scheduled_day)
        else:
            taken = await self._taken(ch, now)
            for s in upcoming_slots(ch.schedule, now, taken=taken, since=ch.schedule_since):
                if s.start <= now or s.day == local_date(ch.schedule, now):
                    slot = s
                break
        day = slot.day if slot is not None else local_date(ch.schedule, now)
        note = ""
        if item is None:
            week = await self.store.weeks.active(ch.id, day)
            pick = pick_item(self.bank.items.values(), capabilities=self.capabilities(),
                             uses=await self.store.rounds.item_uses(ch.id), week=week, on=day,
                             schedule=ch.schedule, seed=str(ch.id))
            if pick is None:
                if scheduled_day is not None:
                    async with self.db.transaction():
                        rid = await self.store.rounds.insert(
                            channel_id=ch.id, item_id=None, local_date=day, scheduled=True, status="skipped",
                            opened_at=now, closes_at=now, reason="nothing")
                        if rid is not None:
                            await self.store.outbox.add(ch.id, info(
                                "No question today: the bank has nothing the configured runners can grade.",
                                kind="notice"), now)
                    self._changed()
                return None
            item = pick.item
            if pick.topic_fallback and week is not None:
                note = f"(The topic week '{week.title or week.scope}' has no playable items; picked from the whole bank.)"
        expected = await self.expected_for(item, f"expected-{ch.id}-{day}")
        # a moderator's round is open for the schedule's duration from now; a scheduled one until
        # the end of its window (also when posted late: the bot was down, or a round was open)
        closes = now + timedelta(minutes=ch.schedule.duration_min)
        if scheduled_day is not None and slot is not None:
            closes = max(now + timedelta(minutes=1), slot.end)
            if now - slot.start > timedelta(minutes=5):
                late = (f"Scheduled for {self.when(ch, slot.start, '%H:%M')} and posted late; it keeps the "
                        "end of its window.")
                note = f"{note}\n{late}" if note else late
        async with self.db.transaction():
            if scheduled_day is not None and (await self.store.rounds.scheduled_on(ch.id, day)
                                              or await self.store.rounds.open_in(ch.id)):
                return None
            current = await self.store.rounds.open_in(ch.id)
            if current is not None:
                await self._close_in_tx(current, "closed", by=by, now=now, replaced=True)
            fields = dict(channel_id=ch.id, item_id=item.id, local_date=day, status="open", opened_at=now,
                          closes_at=closes, kind=item.kind, difficulty=item.difficulty, chapter=item.chapter,
                          language=ch.schedule.language, opened_by=by, expected_output=expected)
            rid = await self.store.rounds.insert(scheduled=slot is not None, **fields)  # type: ignore[arg-type]
            if rid is None and scheduled_day is None:  # the day was taken meanwhile: a round of its own
                rid = await self.store.rounds.insert(scheduled=False, **fields)  # type: ignore[arg-type]
            if rid is None:
                return None
            rnd = await self.store.rounds.get(rid)
            assert rnd is not None
            await self.store.outbox.add(ch.id, self._round_open_message(rnd, item, ch, note), now)
        self._changed()
        return rnd

    async def expected_for(self, item: Item, job_id: str) -> str | None:
        """An output item's expected output, computed when its round opens; None for other kinds,
        or when the runner is down (then it is computed at the first answer)."""
        if item.kind != "output":
            return None
        try:
            result = await self.pool.grade(output_job(item, job_id=job_id))
            if result.get("verdict") == "passed":
                return str(result.get("stdout") or "")
        except RunnerUnavailable:
            log.warning("runner down: %s's expected output will be computed at the first answer", item.id)
        return None

    def _round_open_message(self, rnd: Round, item: Item, ch: Channel, note: str) -> Message:
        lang = ch.schedule.language
        tz = ZoneInfo(ch.schedule.timezone)
        closes = rnd.closes_at.astimezone(tz)
        blocks = [Block(render_item(item, lang)),
                  Block(f"Open until {closes:%a %H:%M} ({ch.schedule.timezone}). Answer in a reply or with "
                        "`/quiz answer`; you may try several times, the best attempt counts.")]
        if item.hints:
            cost = self.rules_for(ch).hint_cost
            blocks.append(Block(f"Stuck? `/quiz hint` shows a hint privately ({plural(len(item.hints), 'hint')}, "
                                f"{cost:g}% of the points each)."))
        if note:
            blocks.append(Block(note))
        return Message(kind="round_open", round_id=rnd.id, title=f"Question of the day {rnd.label}",
                       blocks=blocks, data={"round_id": rnd.id, "number": rnd.number, "item_id": item.id,
                                            "kind": item.kind,
                                            "difficulty": item.difficulty, "closes_at": rnd.closes_at.isoformat(),
                                            "options": [{"key": o.key, "text": o.text.get(lang)} for o in item.options],
                                            "multiple": len(item.correct) > 1})

    async def close_round(self, rnd: Round, *, status: str = "closed", by: str = "",
                          at: datetime | None = None) -> bool:
        """`at`: when it closed, if earlier than now (its announced end passed while the bot was down)."""
        now = self.clock.now()
        async with self.db.transaction():
            ok = await self._close_in_tx(rnd, status, by=by, now=now, at=at)
        self._changed()
        return ok

    async def _close_in_tx(self, rnd: Round, status: str, *, by: str, now: datetime, at: datetime | None = None,
                           replaced: bool = False) -> bool:
        """`replaced`: a moderator's post closes it to open another (no "next round" line then)."""
        if not await self.store.rounds.set_status(rnd.id, status, at or now):
            return False
        ch = await self.store.channels.get(rnd.channel_id)
        lang = ch.schedule.language if ch else "en"
        item = self.bank.items.get(rnd.item_id) if rnd.item_id else None
        if ch is not None and ch.private and status != "skipped":
            msg = await self.practice.closed_message(rnd, ch, item, now)
            await self.store.outbox.add(rnd.channel_id, msg, now)
            return True
        if status == "skipped":
            await self.store.answers.void_round(rnd.id)
            await self.store.scores.delete_round(rnd.id)
            text = f"Round {rnd.label} was skipped{' by ' + by if by else ''}; its answers are not scored."
            msg = Message(kind="round_close", round_id=rnd.id, title=f"Round {rnd.label} skipped", blocks=[Block(text)])
        else:
            stats = await self.round_stats(rnd.id)
            blocks = []
            if item is not None:
                blocks.append(Block(render_explanation(item, lang, expected_output=rnd.expected_output)))
            line = (f"{plural(stats['answers'], 'answer')} from {plural(stats['players'], 'player')}, "
                    f"{stats['solvers']} solved"
                    + (f"; first solver: {stats['first']}" if stats["first"] else "") + ".")
            if stats["hints"]:
                line += (f" {plural(stats['hints'], 'hint')} revealed by "
                         f"{plural(stats['hinted_players'], 'player')}.")
            if stats["pending"]:
                line += (f" {plural(stats['pending'], 'answer is', 'answers are')} still being graded;"
                         " their results follow.")
            if at is not None and now - at > timedelta(minutes=2) and ch is not None:
                line += (f" It closed at {self.when(ch, at, '%a %H:%M')} as announced; the bot was offline then, "
                         "so this message comes late.")
            blocks.append(Block(line))
            if item is not None and item.kind == "code":
                blocks += await self._approaches(rnd, item, ch)
            if ch is not None:
                await self.practice.daily_closed(rnd, ch, now)
            msg = Message(kind="round_close", round_id=rnd.id,
                          title=f"Round {rnd.label} closed{' by ' + by if by else ''}", blocks=blocks, data=stats)
        if not replaced and ch is not None and ch.enabled:
            msg.blocks.append(Block(await self.next_round_text(ch, now)))
        await self.store.outbox.add(rnd.channel_id, msg, now)
        return True

    async def _approaches(self, rnd: Round, item: Item, ch: Channel | None) -> list[Block]:
        """The distinct ways the round was solved (see approaches.py), most common first."""
        solves = [Solve(s.answer_id, s.player, s.content) for s in await self.store.stats.round_solves(rnd.id)]
        found = group_approaches(solves, item.entrypoint)
        if not found:
            return []
        names = ch.options.names if ch else True
        head = (f"How it was solved: {plural(len(found), 'distinct approach', 'distinct approaches')}"
                + (f", the {MAX_APPROACHES} most common" if len(found) > MAX_APPROACHES else "")
                + " (names and formatting aside):")
        blocks = [Block(head)]
        for i, a in enumerate(found[:MAX_APPROACHES], start=1):
            credit = f", first by {a.first.player}" if names else ""
            blocks.append(Block(f"{i}. {plural(a.count, 'player')}{credit}"))
            blocks.append(Block(example_text(a.first.code), code=True, lang="python"))
        return blocks

    async def enabled_channels(self, platform: str, workspace: str) -> list[Channel]:
        """One workspace's enabled quiz channels (an adapter's overview page, e.g. Slack's App Home)."""
        return [ch for ch in await self.store.channels.enabled()
                if ch.ref.platform == platform and ch.ref.workspace == workspace]

    async def round_stats(self, round_id: int) -> dict[str, Any]:
        counts = await self.store.stats.round_counts(round_id)
        solvers = await self.store.stats.round_solvers(round_id)
        first = ""
        if solvers:
            first = (await self.store.players.names([solvers[0]])).get(solvers[0], "")
        hints, hinted = await self.store.stats.round_hints(round_id)
        return {"answers": counts.answers, "players": counts.players, "pending": counts.pending,
                "solvers": len(solvers), "first": first, "hints": hints, "hinted_players": hinted}

    def playable(self, item: Item) -> bool:
        """Whether one configured runner can grade it (a choice item needs none)."""
        return item.kind == "choice" or self.pool.can_grade(item_needs(item))

    async def set_options(self, ch: Channel, options: ChannelOptions) -> None:
        async with self.db.transaction():
            await self.store.channels.set_options(ch.id, options)

    async def set_schedule(self, ch: Channel, schedule: Schedule) -> Channel:
        """Change the schedule. An open round keeps its announced end; new posting times apply from
        the next one after now (a window of the new time that already began today is not posted)."""
        old = ch.schedule
        moved = (old.post_time, old.timezone, old.weekdays) != (schedule.post_time, schedule.timezone,
                                                               schedule.weekdays)
        async with self.db.transaction():
            await self.store.channels.set_schedule(ch.id, schedule, since=self.clock.now() if moved else None)
        return await self.store.channels.get(ch.id) or ch
