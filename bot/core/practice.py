"""Practice and review: private rounds for one player, graded and scored like the daily round.

A player's private rounds live in a channel row of their own under the quiz channel
(`Channels.private`), never enabled: the scheduler never posts there, and its scores make the
practice board instead of the channel's leaderboards. Everything else (answers stored before
they are graded, the runner, named mistakes, hints, the explanation at close) is the daily
round's own code. What goes out to a private channel reaches only its player (`QuizService.deliver`).

- `/quiz practice [scope]`: a question from the bank the player has not solved in this channel
  (daily or practice) until the scope is used up, never the open round's.
- `/quiz review`: the items the player failed or gave up, on a spaced schedule (`REVIEW_DAYS`),
  at most `learning.review_per_day` a day.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from questionbank.model import Item
from questionbank.render import render_explanation, render_item

from .models import NOT_ENABLED, Actor, Block, Channel, ChannelRef, Message, Round, error, in_scope, info, plural
from .scheduler import item_needs, local_date

if TYPE_CHECKING:
    from .service import QuizService

REVIEW_DAYS = (1, 3, 7, 21)  # after a failure, then after each successful review
# a private round has no one to race and no daily streak: no first-solver or streak bonus
PRACTICE_RULES: dict[str, Any] = {"first_bonus": [], "streak_bonus": 0}


def next_review(step: int, solved: bool, today: date) -> tuple[int, date] | None:
    """Where an item goes after a review (or a failure): its next step and date, or None when
    the last interval was passed and it is learned."""
    if not solved:
        return 0, today + timedelta(days=REVIEW_DAYS[0])
    nxt = step + 1
    if nxt >= len(REVIEW_DAYS):
        return None
    return nxt, today + timedelta(days=REVIEW_DAYS[nxt])


def pick_practice(items: list[Item], *, solved: set[str], uses: dict[str, int], exclude: set[str],
                  seed: str) -> Item | None:
    """An item the player has not solved, least practised first; once every item of the scope is
    solved, any of them again (least practised first). Never one in `exclude` (the open round's)."""
    pool = [it for it in items if it.id not in exclude]
    fresh = [it for it in pool if it.id not in solved] or pool
    if not fresh:
        return None
    least = min(uses.get(it.id, 0) for it in fresh)
    choices = sorted((it for it in fresh if uses.get(it.id, 0) == least), key=lambda it: it.id)
    return random.Random(f"{seed}:{sum(uses.values())}").choice(choices)


@dataclass
class Private:
    """A player's side of a quiz channel: the channel, their private channel, who they are."""

    channel: Channel
    room: Channel
    player_id: int


class Practice:
    def __init__(self, service: QuizService) -> None:
        self.svc = service

    @property
    def store(self):  # noqa: ANN201
        return self.svc.store

    async def private(self, actor: Actor, where: ChannelRef) -> Private | Message:
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled or ch.private:
            return error(NOT_ENABLED)
        now = self.svc.clock.now()
        async with self.svc.db.transaction():
            pid = await self.store.players.ensure(actor)
            room = await self.store.channels.private(ch, pid, actor.user_id, now)
        return Private(ch, room, pid)

    async def _free(self, actor: Actor, where: ChannelRef) -> Private | Message:
        """The player's side when they have no open private question; else that question again
        (one at a time), or the refusal."""
        p = await self.private(actor, where)
        if isinstance(p, Message):
            return p
        current = await self.store.rounds.open_in(p.room.id)
        return self._still_open(p, current) if current is not None else p

    def today(self, p: Private) -> date:
        return local_date(p.channel.schedule, self.svc.clock.now())

    # ------------------------------------------------------------------ opening

    def scope_items(self, scope: str) -> tuple[list[Item], str]:
        """The bank's items of a scope (a chapter "3", a section "3.2", or "" for all) that a
        configured runner can grade, and a refusal when the scope names nothing."""
        items = [it for it in self.svc.bank.items.values()
                 if (not scope or in_scope(scope, it.chapter, it.section)) and self.svc.playable(it)]
        if not items:
            if scope and not any(in_scope(scope, it.chapter, it.section) for it in self.svc.bank.items.values()):
                return [], f"`{scope}` is not a chapter, section or question id of the bank (try `/quiz bank`)."
            return [], f"The bank has no question in `{scope or 'the bank'}` that the configured runners can grade."
        return sorted(items, key=lambda it: it.id), ""

    async def start(self, actor: Actor, where: ChannelRef, scope: str) -> list[Message]:
        """`/quiz practice [scope]`: the open private question again, or a new one."""
        p = await self._free(actor, where)
        if isinstance(p, Message):
            return [p]
        daily = await self.store.rounds.open_in(p.channel.id)
        exclude = {daily.item_id} if daily is not None and daily.item_id else set()
        scope = scope.strip()
        item = self.svc.bank.items.get(scope) if scope else None
        if item is not None:
            if item.id in exclude:
                return [error("That is the open round's question: answer it in the channel. You can practise it "
                              "after the round closes.")]
            if not self.svc.playable(item):
                return [error(f"`{item.id}` needs a runner with {', '.join(sorted(item_needs(item)))}, which this "
                              "bot does not have.")]
        else:
            items, why = self.scope_items(scope)
            if not items:
                return [error(why)]
            item = pick_practice(items, solved=await self.store.stats.solved_items(p.channel.id, p.player_id),
                                 uses=await self.store.rounds.item_uses(p.room.id), exclude=exclude,
                                 seed=f"{p.channel.id}:{p.player_id}")
            if item is None:
                return [error("The only question in that scope is the open round's: answer it in the channel.")]
        return [await self._open(p, item, "practice")]

    async def review(self, actor: Actor, where: ChannelRef) -> list[Message]:
        """`/quiz review`: the next item due for review, while today's allowance lasts."""
        p = await self._free(actor, where)
        if isinstance(p, Message):
            return [p]
        today = self.today(p)
        cap = self.svc.settings.learning.review_per_day
        done = await self.store.rounds.count_mode_on(p.room.id, "review", today)
        due = [(i, s, d) for i, s, d in await self.store.reviews.due(p.channel.id, p.player_id, today)
               if i in self.svc.bank.items and self.svc.playable(self.svc.bank.items[i])]
        daily = await self.store.rounds.open_in(p.channel.id)
        due = [x for x in due if daily is None or x[0] != daily.item_id]
        if not due or done >= cap:
            later, first = await self.store.reviews.upcoming(p.channel.id, p.player_id, today)
            if due:
                head = (f"That is today's {plural(cap, 'review')}; {plural(len(due), 'more is', 'more are')} due and "
                        "come back tomorrow.")
            else:
                head = "Nothing to review today."
            tail = (f" {plural(later, 'question')} will come back, the next on {first:%a %d %b}." if first
                    else " Questions you fail or give up come back here after 1, 3, 7 and 21 days.")
            return [info(head + tail + " `/quiz practice` gives you a new question any time.", ephemeral=True,
                         title="Review")]
        item_id, step, _ = due[0]
        return [await self._open(p, self.svc.bank.items[item_id], "review",
                                 note=f"Review {done + 1} of at most {cap} today ({plural(len(due), 'question')} due; "
                                      f"step {step + 1} of {len(REVIEW_DAYS)}).")]

    async def _open(self, p: Private, item: Item, mode: str, note: str = "") -> Message:
        now = self.svc.clock.now()
        expected = await self.svc.expected_for(item, f"{mode}-{p.room.id}-{now:%Y%m%d%H%M%S}")
        hours = self.svc.settings.learning.practice_hours
        async with self.svc.db.transaction():
            rid = await self.store.rounds.insert(
                channel_id=p.room.id, item_id=item.id, local_date=self.today(p), scheduled=False, status="open",
                opened_at=now, closes_at=now + timedelta(hours=hours), kind=item.kind, difficulty=item.difficulty,
                chapter=item.chapter, language=p.channel.schedule.language, opened_by=p.room.ref.channel,
                expected_output=expected, mode=mode)
        rnd = await self.store.rounds.get(rid) if rid is not None else None
        if rnd is None:  # the one open private round was opened meanwhile (a double click)
            current = await self.store.rounds.open_in(p.room.id)
            return self._still_open(p, current) if current else error("Try again: the question was not opened.")
        return self.open_message(p, rnd, item, note)

    def open_message(self, p: Private, rnd: Round, item: Item, note: str = "") -> Message:
        lang = p.channel.schedule.language
        hours = self.svc.settings.learning.practice_hours
        answer = ("Answer with `/quiz practice answer` and a ```python block (or the Answer button); "
                  if item.kind == "code" else
                  "Answer with `/quiz practice answer` and the exact output (or the Answer button); "
                  if item.kind == "output" else
                  "Answer with `/quiz practice answer` and the option key(s) (or the buttons); ")
        blocks = [Block(render_item(item, lang)),
                  Block(answer + f"you may try several times. It stays open {hours} hours; "
                        "`/quiz practice giveup` shows the answer (it then comes back for review).")]
        if item.hints:
            blocks.append(Block(f"Stuck? `/quiz practice hint` ({plural(len(item.hints), 'hint')}, "
                                f"{self.svc.rules_for(p.room).hint_cost:g}% of the points each)."))
        if note:
            blocks.append(Block(note))
        title = f"{'Review' if rnd.mode == 'review' else 'Practice'} {rnd.label.split(' ')[-1]}: {item.title.get(lang)}"
        return Message(kind="practice_open", title=title, blocks=blocks, ephemeral=True, data={
            "round_id": rnd.id, "number": rnd.number, "item_id": item.id, "kind": item.kind, "mode": rnd.mode,
            "difficulty": item.difficulty, "closes_at": rnd.closes_at.isoformat(), "private": True,
            "options": [{"key": o.key, "text": o.text.get(lang)} for o in item.options],
            "multiple": len(item.correct) > 1})

    def _still_open(self, p: Private, rnd: Round) -> Message:
        item = self.svc.bank.items.get(rnd.item_id or "")
        if item is None:
            return error("Your open practice question left the bank; `/quiz practice giveup` drops it.")
        return self.open_message(p, rnd, item, note="This is your open question: answer it, or "
                                                    "`/quiz practice giveup` to see the answer and get a new one.")

    async def open_round(self, actor: Actor, where: ChannelRef) -> tuple[Private, Round] | Message:
        """The player's open private round in this channel, or why there is none (a lookup: it
        creates no player or private channel, as answers, hints and forms only read)."""
        ch = await self.store.channels.by_ref(where)
        if ch is None or not ch.enabled or ch.private:
            return error(NOT_ENABLED)
        room = await self.store.channels.by_ref(where.private_for(actor.user_id))
        rnd = await self.store.rounds.open_in(room.id) if room is not None and room.owner_id is not None else None
        if room is None or room.owner_id is None or rnd is None or rnd.item_id is None:
            return error("You have no open practice question here: `/quiz practice` or `/quiz review` gives you one.")
        return Private(ch, room, room.owner_id), rnd

    async def give_up(self, actor: Actor, where: ChannelRef) -> list[Message]:
        found = await self.open_round(actor, where)
        if isinstance(found, Message):
            return [found]
        _p, rnd = found
        await self.svc.close_round(rnd, status="closed", by="")
        await self.svc.deliver()
        return [info(f"Practice question {rnd.label} closed; its answer follows.", ephemeral=True)]

    # ------------------------------------------------------------------ closing (inside the closing transaction)

    async def closed_message(self, rnd: Round, room: Channel, item: Item | None, now: datetime) -> Message:
        """A private round closes (solved, given up, or its time ran out): the explanation, the
        player's outcome, and when the item comes back for review."""
        lang = room.schedule.language
        assert room.owner_id is not None and room.parent_id is not None
        solved = await self.store.scores.solved_row(rnd.id, room.owner_id) is not None
        blocks = [Block(render_explanation(item, lang, expected_output=rnd.expected_output))] if item else []
        points = sum(r.points for r in await self.store.stats.round_totals(rnd.id))
        line = (f"Solved: {points:g} points on the practice board." if solved
                else "Not solved this time.")
        if item is not None:
            line += " " + await self._reschedule(room.parent_id, room.owner_id, item.id, solved,
                                                 review=rnd.mode == "review", today=local_date(room.schedule, now),
                                                 now=now)
        blocks.append(Block(line.strip()))
        return Message(kind="round_close", round_id=rnd.id, title=f"{rnd.label.capitalize()} closed",
                       blocks=blocks, data={"private": True, "solved": solved, "mode": rnd.mode})

    async def daily_closed(self, rnd: Round, channel: Channel, now: datetime) -> None:
        """A daily round closed: whoever answered and did not solve it gets it back for review."""
        if rnd.item_id is None:
            return
        today = local_date(channel.schedule, now)
        for pid in await self.store.stats.round_unsolved(rnd.id):
            await self._reschedule(channel.id, pid, rnd.item_id, False, review=False, today=today, now=now)

    async def _reschedule(self, channel_id: int, player_id: int, item_id: str, solved: bool, *, review: bool,
                          today: date, now: datetime) -> str:
        """Move an item along the review schedule; what the player is told about it."""
        have = await self.store.reviews.get(channel_id, player_id, item_id)
        if solved and not review:
            return "" if have is None else "It stays on your review schedule."
        step = have[0] if have is not None else 0
        nxt = next_review(step, solved, today)
        if nxt is None:
            await self.store.reviews.done(channel_id, player_id, item_id)
            return "You have now reviewed it at every interval: it will not come back for review."
        await self.store.reviews.put(channel_id, player_id, item_id, nxt[0], nxt[1], now)
        days = (nxt[1] - today).days
        return f"It comes back for review in {plural(days, 'day')} ({nxt[1]:%a %d %b}) with `/quiz review`."
