"""The `/quiz` commands, the same on every platform.

Adapters pass the text after `/quiz` (slash-command options joined with spaces); this module
parses it, checks the actor's rights *here* (never in an adapter) and returns Messages.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import date, time, timedelta
from typing import TYPE_CHECKING

from .digests import digest_when, parse_hhmm
from .leaderboards import leaderboard, player_card, render_board, render_card
from .models import (
    NOT_ENABLED,
    PERIODS,
    WEEKDAY_NAMES,
    Actor,
    Attachment,
    Block,
    Channel,
    ChannelOptions,
    ChannelRef,
    Message,
    Schedule,
    denied,
    error,
    info,
    plural,
)
from .roles import Right, allowed, refusal
from .scheduler import item_needs, local_date, week_bounds, zone
from .summaries import CSV_NOTE, build_digest, digest_chart, export_csv, period_bounds, render_digest

if TYPE_CHECKING:
    from .service import QuizService

from questionbank.render import render_explanation, render_item


@dataclass
class Ctx:
    actor: Actor
    where: ChannelRef
    name: str
    args: list[str]
    rest: str  # the raw text after the command name (answers keep their newlines)


Handler = Callable[["CommandRouter", Ctx], Awaitable[list[Message]]]

HELP = {
    "help": ("player", "help", "this list"),
    "answer": ("player", "answer <code or text>", "answer the open round (a ```python block, output text or option keys)"),
    "leaderboard": ("player", "leaderboard [round|week|topic|month|all|practice]",
                    "standings (default: week; `practice` is the board of private practice)"),
    "me": ("player", "me", "your points, solved rounds, streak, strongest and weakest chapters"),
    "hint": ("player", "hint [reveal]", "what the open round's next hint costs; `reveal` shows it (privately)"),
    "practice": ("player", "practice [chapter|section|item-id] | practice answer <code> | practice hint [reveal]"
                 " | practice giveup",
                 "a private question from the bank (one you have not solved here yet), scored on the practice "
                 "board, never on the channel's leaderboards"),
    "review": ("player", "review",
               "privately, a question you failed or gave up, back after 1, 3, 7 and 21 days (a few a day); "
               "answer it with `/quiz practice answer`"),
    "schedule": ("moderator", "schedule [HH:MM] [Area/City] [mon-fri|daily|mon,wed] [8h] [zh|en] [ramp=on|off]",
                 "show or change when rounds open and how long they stay open"),
    "settings": ("moderator", "settings [names=on|off]",
                 "show or change the channel's settings: `names` credits the first solver of each approach "
                 "shown when a round closes"),
    "enable": ("moderator", "enable", "start the quiz in this channel"),
    "disable": ("moderator", "disable", "stop the quiz in this channel (scores are kept)"),
    "week": ("moderator", "week add <chapter[.section]> [start] [end] [title] | week list | week cancel <id>",
             "topic weeks: restrict the picks to a chapter or section for a date range"),
    "post": ("moderator", "post [item-id]", "open a round now (a picked item, or the given one)"),
    "skip": ("moderator", "skip [next|YYYY-MM-DD]",
             "skip the open round (not scored) or, with none open, the next scheduled one; again: the one after;"
             " `skip next` skips the next scheduled round even while one is open, `skip 2026-11-26` that day's"),
    "close": ("moderator", "close", "close the open round now and reveal the answer"),
    "bank": ("moderator", "bank [search <words> | show <item-id> | chapter <n>]", "browse and preview the bank"),
    "summary": ("manager", "summary [week|month] [last]", "digest with a chart"),
    "digest": ("manager", "digest [channel on|off] [dm on|off] [HH:MM] [mon..sun] [off]",
               "the weekly digest (and the monthly one) posted by itself: in this channel and/or to you "
               "as a direct message, at a weekday and time; without arguments, what is set"),
    "export": ("manager", "export [week|month|all] [last]", "CSV of every scored answer"),
}
# who may *change* things; reading a schedule or the week list is open to everyone
RIGHTS: dict[str, Right] = {name: spec[0] for name, spec in HELP.items()}  # type: ignore[misc]
PERIOD_ALIASES = {"round": "round", "today": "round", "week": "week", "topic": "topic", "month": "month",
                  "all": "all", "alltime": "all", "all-time": "all", "total": "all", "practice": "practice"}


class CommandRouter:
    def __init__(self, service: QuizService) -> None:
        self.svc = service

    @property
    def roles(self):  # noqa: ANN201
        return self.svc.settings.roles

    async def dispatch(self, actor: Actor, where: ChannelRef, text: str) -> list[Message]:
        text = (text or "").strip()
        typo = _command_typo(text)
        if typo is not None:
            return [error(typo)]
        if text.startswith("/quiz"):
            text = text[5:].strip()
        if not text:
            return await self.help(Ctx(actor, where, "help", [], ""))
        name, _, rest = text.partition(" ")
        if "\n" in name:  # "answer\n```..." typed on two lines
            name, _, more = name.partition("\n")
            rest = more + (" " + rest if rest else "")
        name = name.lower()
        handler = getattr(self, f"cmd_{name}", None) if name in HELP else None
        if handler is None:
            close = difflib.get_close_matches(name, list(HELP), n=1)
            hint = f" Did you mean `/quiz {close[0]}`?" if close else ""
            return [error(f"Unknown command `/quiz {name}`.{hint} `/quiz help` lists them.")]
        ctx = Ctx(actor, where, name, rest.split(), rest)
        right = RIGHTS[name]
        if name in ("schedule", "week", "settings") and self._read_only(ctx):
            right = "player"
        if not allowed(actor, right, self.roles):
            return [denied(refusal(name, right))]
        return await handler(ctx)

    @staticmethod
    def _read_only(ctx: Ctx) -> bool:
        return not ctx.args or (ctx.name == "week" and ctx.args[0].lower() == "list")

    async def _channel(self, ctx: Ctx, *, readable_when_off: bool = False) -> Channel | None:
        ch = await self.svc.store.channels.by_ref(ctx.where)
        return ch if ch and (ch.enabled or readable_when_off) else None

    def _not_enabled(self) -> list[Message]:
        return [error(NOT_ENABLED)]

    # ------------------------------------------------------------------ everyone

    async def help(self, ctx: Ctx) -> list[Message]:
        return await self.cmd_help(ctx)

    async def cmd_help(self, ctx: Ctx) -> list[Message]:
        lines = []
        for _name, (right, usage, what) in HELP.items():
            if allowed(ctx.actor, right, self.roles):  # type: ignore[arg-type]
                tag = "" if right == "player" else f" ({right})"
                lines.append(f"/quiz {usage}{tag}\n    {what}")
        return [Message(kind="help", title="Quiz commands", blocks=[Block("\n".join(lines))], ephemeral=True)]

    async def cmd_answer(self, ctx: Ctx) -> list[Message]:
        if not ctx.rest.strip():
            form = await self.svc.answer_form(ctx.where)
            if form is None:
                return await self.svc.submit(ctx.actor, ctx.where, "")  # the right refusal (no round / disabled)
            form.blocks = [Block("Paste your answer after `/quiz answer` (a ```python block for code).")]
            form.ephemeral = True
            return [form]
        return await self.svc.submit(ctx.actor, ctx.where, ctx.rest, explicit=True)

    async def cmd_hint(self, ctx: Ctx) -> list[Message]:
        word = ctx.args[0].lower() if ctx.args else ""
        if word not in ("", "reveal", "yes", "show"):
            return [error(f"Usage: /quiz {HELP['hint'][1]}")]
        return await self.svc.hint(ctx.actor, ctx.where, reveal=bool(word))

    async def cmd_practice(self, ctx: Ctx) -> list[Message]:
        word = ctx.args[0].lower() if ctx.args else ""
        practice = self.svc.practice
        if word == "answer":
            rest = ctx.rest.strip()[len("answer"):].strip()
            if not rest:
                found = await practice.open_round(ctx.actor, ctx.where)
                if isinstance(found, Message):
                    return [found]
                return [error("Paste your answer after `/quiz practice answer` (a ```python block for code).")]
            return await self.svc.submit(ctx.actor, ctx.where, rest, explicit=True, private=True)
        if word == "hint":
            more = ctx.args[1].lower() if len(ctx.args) > 1 else ""
            if more not in ("", "reveal", "yes", "show"):
                return [error(f"Usage: /quiz {HELP['practice'][1]}")]
            return await self.svc.hint(ctx.actor, ctx.where, reveal=bool(more), private=True)
        if word in ("giveup", "give-up", "skip", "stop"):
            return await practice.give_up(ctx.actor, ctx.where)
        if len(ctx.args) > 1:
            return [error(f"Usage: /quiz {HELP['practice'][1]}")]
        return await practice.start(ctx.actor, ctx.where, ctx.args[0] if ctx.args else "")

    async def cmd_review(self, ctx: Ctx) -> list[Message]:
        if ctx.args:
            return [error(f"Usage: /quiz {HELP['review'][1]} (it takes nothing more)")]
        return await self.svc.practice.review(ctx.actor, ctx.where)

    async def cmd_leaderboard(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx, readable_when_off=True)  # scores are kept, so they can be read
        if ch is None:
            return self._not_enabled()
        word = ctx.args[0].lower() if ctx.args else "week"
        period = PERIOD_ALIASES.get(word)
        if period is None:
            return [error(f"Unknown period `{word}`: use one of {', '.join(PERIODS)}.")]
        board = await leaderboard(self.svc.store, ch, period, self.svc.clock.now(),
                                  limit=self.svc.settings.leaderboard_size)
        blocks = [Block(render_board(board))]
        if not ch.enabled:
            blocks.append(Block("(The quiz is off in this channel; these scores are kept.)"))
        return [Message(kind="leaderboard", title=f"Leaderboard: {board.title}", blocks=blocks,
                        data={"period": period, "rows": [r.__dict__ for r in board.rows]})]

    async def cmd_me(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx, readable_when_off=True)
        if ch is None:
            return self._not_enabled()
        pid = await self.svc.store.players.find(ctx.actor.platform, ctx.actor.user_id)
        now = self.svc.clock.now()
        card = (await player_card(self.svc.store, ch, pid, now, freezes_per_week=self.svc.rules_for(ch).streak_freezes,
                                  today=local_date(ch.schedule, now)) if pid else None)
        if card is None:
            return [info("You have not answered in this channel yet. Answer the open round to get on the board!",
                         ephemeral=True)]
        players = await self.svc.store.stats.ranked_players(ch.id)
        return [Message(kind="card", title=f"{card.name} in #{ch.ref.name or ch.ref.channel}",
                        blocks=[Block(render_card(card, players))], ephemeral=True, data=card.__dict__)]

    # ------------------------------------------------------------------ moderators

    async def cmd_enable(self, ctx: Ctx) -> list[Message]:
        current = await self._channel(ctx)
        already = current is not None
        ch = current if current is not None else await self.svc.enable(ctx.where)  # nothing to change
        when = " " + await self.svc.next_round_text(ch)
        if already:
            return [info(f"The quiz is already enabled in this channel: {ch.schedule.describe()}.{when} "
                         "`/quiz schedule` changes it.", title="Quiz already enabled")]
        return [info(f"The quiz is on in this channel: {ch.schedule.describe()}.{when} "
                     "Change it with `/quiz schedule`, or open a round now with `/quiz post`.", title="Quiz enabled")]

    async def cmd_disable(self, ctx: Ctx) -> list[Message]:
        if await self.svc.disable(ctx.where, ctx.actor.display) is None:
            return [error("The quiz is not enabled in this channel.")]
        return [info("The quiz is off in this channel; scores are kept. `/quiz enable` turns it back on.",
                     title="Quiz disabled")]

    async def cmd_schedule(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        if not ctx.args:
            rnd = await self.svc.store.rounds.open_in(ch.id)
            now_open = (f"\nRound {rnd.label} is open until {self.svc.when(ch, rnd.closes_at)} "
                        f"({ch.schedule.timezone})." if rnd else "")
            return [info(f"{ch.schedule.describe()}{now_open}\n{await self.svc.next_round_text(ch)}", title="Schedule")]
        sched, problems = parse_schedule(ctx.args, ch.schedule)
        if problems:
            return [error("Schedule not changed:\n" + "\n".join(f"- {p}" for p in problems)
                          + f"\nUsage: /quiz {HELP['schedule'][1]}")]
        ch = await self.svc.set_schedule(ch, sched)
        rnd = await self.svc.store.rounds.open_in(ch.id)
        keeps = (f" Round {rnd.label} stays open until {self.svc.when(ch, rnd.closes_at)} ({sched.timezone}) as "
                 "announced; the new schedule applies from the next round on." if rnd else
                 " It applies from the next posting time on.")
        return [info(f"Schedule: {sched.describe()}.{keeps} {await self.svc.next_round_text(ch)}",
                     title="Schedule updated")]

    async def cmd_settings(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        if not ctx.args:
            return [info(ch.options.describe(), title="Channel settings")]
        options, problems = ch.options, []
        for arg in ctx.args:
            key, _, value = arg.lower().partition("=")
            if key == "names" and value in ("on", "off", "yes", "no", "true", "false"):
                options = replace(options, names=value in ("on", "yes", "true"))
            else:
                problems.append(f"`{arg}` is not a setting (use names=on or names=off)")
        if problems:
            return [error("Settings not changed:\n" + "\n".join(f"- {p}" for p in problems))]
        await self.svc.set_options(ch, options)
        return [info(options.describe(), title="Channel settings updated")]

    async def cmd_week(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        today = local_date(ch.schedule, self.svc.clock.now())
        sub = ctx.args[0].lower() if ctx.args else "list"
        if sub == "list":
            weeks = await self.svc.store.weeks.upcoming(ch.id, today)
            if not weeks:
                return [info("No topic weeks planned. `/quiz week add 3` makes next week about chapter 3.")]
            running = await self.svc.store.weeks.active(ch.id, today)  # the one picks and the topic board use
            return [info("\n".join(f"#{w.id}: {w.start} to {w.end}: {w.title or 'chapter ' + w.scope}"
                                   f"{'  (running)' if running and w.id == running.id else ''}" for w in weeks),
                         title="Topic weeks")]
        if sub == "cancel":
            if len(ctx.args) < 2 or not ctx.args[1].lstrip("#").isdigit():
                return [error("Usage: /quiz week cancel <id> (see `/quiz week list`).")]
            w = await self.svc.cancel_week(ch, int(ctx.args[1].lstrip("#")))
            if w is None:
                return [error(f"No topic week #{ctx.args[1].lstrip('#')} in this channel.")]
            return [info(f"Topic week #{w.id} ({w.title or w.scope}) cancelled.")]
        if sub != "add":
            return [error(f"Usage: /quiz {HELP['week'][1]}")]
        return await self._week_add(ctx, ch, today)

    async def _week_add(self, ctx: Ctx, ch: Channel, today: date) -> list[Message]:
        args = ctx.args[1:]
        if not args or not re.fullmatch(r"\d+(\.\d+)?", args[0]):
            return [error("Usage: /quiz week add <chapter[.section]> [this|next|YYYY-MM-DD] [YYYY-MM-DD] [title]")]
        scope = args[0]
        if not self.svc.topic_items(scope):
            return [error(f"The bank has no items in {'section' if '.' in scope else 'chapter'} {scope}.")]
        rest = args[1:]
        start, end = week_bounds(today + timedelta(days=7))
        dates: list[date] = []
        while rest and (rest[0].lower() in ("this", "next") or re.fullmatch(r"\d{4}-\d{2}-\d{2}", rest[0])):
            word = rest.pop(0).lower()
            if word == "this":
                dates.extend(week_bounds(today))
            elif word == "next":
                dates.extend(week_bounds(today + timedelta(days=7)))
            else:
                try:
                    dates.append(date.fromisoformat(word))
                except ValueError:
                    return [error(f"`{word}` is not a date (YYYY-MM-DD).")]
        if len(dates) == 1:
            start, end = dates[0], dates[0] + timedelta(days=6)
        elif len(dates) >= 2:
            start, end = dates[0], dates[-1]
        title = " ".join(rest) or outline_title(scope) or f"chapter {scope}"
        added, why = await self.svc.add_week(ch, scope, start, end, title=title, by=ctx.actor.display, today=today)
        if added is None:
            return [error(why)]
        w, playable = added.week, added.playable
        note = "" if playable else " (none of its items can be graded by the configured runners: picks fall back to the whole bank)"
        return [info(f"Topic week #{w.id}: {w.title}, {w.start} to {w.end}; {playable} playable items.{note}",
                     title="Topic week added")]

    async def cmd_post(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        item = None
        if ctx.args:
            item = self.svc.bank.items.get(ctx.args[0])
            if item is None:
                close = difflib.get_close_matches(ctx.args[0], list(self.svc.bank.items), n=3)
                return [error(f"No item `{ctx.args[0]}` in the bank."
                              + (f" Did you mean {', '.join(close)}?" if close else ""))]
            if not self.svc.playable(item):
                needs = ", ".join(sorted(item_needs(item)))
                return [error(f"`{item.id}` needs a runner with {needs}, and none is configured.")]
        before = await self.svc.store.rounds.open_in(ch.id)
        rnd = await self.svc.open_round(ch, item=item, by=ctx.actor.display)
        if rnd is None:
            return [error("No question could be picked: the bank has nothing the configured runners can grade.")]
        lines = [f"Round {rnd.label} is open ({rnd.item_id}) until {self.svc.when(ch, rnd.closes_at)}"
                 f" ({ch.schedule.timezone})."]
        if before is not None:
            lines.append(f"Round {before.label} was closed first.")
        if rnd.scheduled:
            lines.append(f"It is the scheduled round of {rnd.local_date:%a %d %b}: no other round is posted that day.")
        over = await self.svc.passed_over(ch, rnd.closes_at)
        if over:
            lines.append(f"While it is open, the scheduled round{'s' if len(over) > 1 else ''} of "
                         f"{', '.join(f'{s.day:%a %d %b}' for s in over)} {'are' if len(over) > 1 else 'is'} not "
                         "posted (a round is never closed early).")
        lines.append(await self.svc.next_round_text(ch))
        return [info(" ".join(lines), ephemeral=True)]

    async def cmd_close(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        rnd = await self.svc.close_open_round(ch, ctx.actor.display)
        if rnd is None:
            return [error("There is no open round to close.")]
        return [info(f"Round {rnd.label} closed. {await self.svc.next_round_text(ch)}", ephemeral=True)]

    async def cmd_skip(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        word = ctx.args[0].lower() if ctx.args else ""
        day: date | None = None
        if word not in ("", "next"):
            try:
                day = date.fromisoformat(word)
            except ValueError:
                return [error(f"Usage: /quiz {HELP['skip'][1]}")]
        done = await self.svc.skip(ch, ctx.actor.display, day=day, scheduled=word == "next")
        if done.round is not None:
            return [info(f"Round {done.round.label} skipped; its answers are not scored. "
                         f"{await self.svc.next_round_text(ch)}", ephemeral=True)]
        slot = done.slot
        if slot is None:
            return [error(done.why)]
        return [info(f"The scheduled round of {self.svc.when(ch, slot.start)} ({ch.schedule.timezone}) will not be "
                     f"posted. {await self.svc.next_round_text(ch)}")]

    async def cmd_bank(self, ctx: Ctx) -> list[Message]:
        bank = self.svc.bank
        ch = await self.svc.store.channels.by_ref(ctx.where)
        lang = ch.schedule.language if ch else "en"
        args = ctx.args
        if not args:
            by_ch: dict[int, list[int]] = {}
            for it in bank.items.values():
                c = by_ch.setdefault(it.chapter, [0, 0])
                c[0] += 1
                c[1] += int(self.svc.playable(it))
            lines = [f"chapter {c}: {n} items, {p} playable here" for c, (n, p) in sorted(by_ch.items())]
            return [info("\n".join(lines) or "The bank is empty.",
                         title=f"Bank: {len(bank.items)} items (runners: {self.svc.pool.describe()})", ephemeral=True)]
        sub = args[0].lower()
        if sub in ("search", "find"):
            words = " ".join(args[1:])
            found = search(bank, words)
            return [info(_list_items(found, lang) or f"Nothing matches `{words}`.",
                         title=f"{len(found)} items match `{words}`", ephemeral=True)]
        if sub == "chapter" and len(args) > 1 and args[1].isdigit():
            found = [it for it in bank.items.values() if it.chapter == int(args[1])]
            return [info(_list_items(found, lang) or "No items.", title=f"Chapter {args[1]}: {len(found)} items",
                         ephemeral=True)]
        item_id = args[1] if sub in ("show", "preview") and len(args) > 1 else args[0]
        item = bank.items.get(item_id)
        if item is None:
            close = difflib.get_close_matches(item_id, list(bank.items), n=3)
            return [error(f"No item `{item_id}`." + (f" Did you mean {', '.join(close)}?" if close else "")
                          + f" Usage: /quiz {HELP['bank'][1]}")]
        return [Message(kind="preview", title=f"Preview of {item.id} (only you see this)", ephemeral=True,
                        blocks=[Block(render_item(item, lang)), Block("---"),
                                Block(render_explanation(item, lang))],
                        data={"item_id": item.id})]

    # ------------------------------------------------------------------ managers

    async def cmd_summary(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        period, last, bad = _period_args(ctx.args, ("week", "month"), "week")
        if bad:
            return [error(f"Usage: /quiz {HELP['summary'][1]}")]
        digest = await build_digest(self.svc.store, ch, period, self.svc.clock.now(), last=last, bank=self.svc.bank)
        chart = digest_chart(digest)
        fname = f"quiz-{period}-{digest.start}.png"
        return [Message(kind="summary", title=f"{'Weekly' if period == 'week' else 'Monthly'} summary",
                        blocks=[Block(render_digest(digest))], ephemeral=True,
                        files=[Attachment(fname, chart, "image/png")],
                        data={"period": period, "start": digest.start.isoformat(), "end": digest.end.isoformat()})]

    async def cmd_digest(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        opts = ch.options
        was_on = opts.digest_on
        args = [a.lower() for a in ctx.args]
        usage = error(f"Usage: /quiz {HELP['digest'][1]}")
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("channel", "dm") and i + 1 < len(args) and args[i + 1] in ("on", "off"):
                on = args[i + 1] == "on"
                if a == "channel":
                    opts = replace(opts, digest_channel=on)
                else:
                    dms = tuple(u for u in opts.digest_dms if u != ctx.actor.user_id)
                    opts = replace(opts, digest_dms=dms + ((ctx.actor.user_id,) if on else ()))
                i += 2
                continue
            if a == "off":
                opts = replace(opts, digest_channel=False, digest_dms=())
            elif a[:3] in WEEKDAY_NAMES:
                opts = replace(opts, digest_weekday=WEEKDAY_NAMES.index(a[:3]))
            elif re.fullmatch(r"\d{1,2}:\d{2}", a) and parse_hhmm(a) is not None:
                opts = replace(opts, digest_time=f"{parse_hhmm(a):%H:%M}")
            else:
                return [usage]
            i += 1
        if opts.digest_on and not was_on:  # from now on: no digest that was due before is posted
            opts = replace(opts, digest_since=self.svc.clock.now().isoformat())
        if opts != ch.options:
            await self.svc.set_options(ch, opts)
        return [info(self._digest_text(ch, opts, ctx.actor.user_id), title="Digest", ephemeral=True)]

    def _digest_text(self, ch: Channel, opts: ChannelOptions, actor_id: str) -> str:
        weekday, at = digest_when(replace(ch, options=opts), self.svc.settings.learning.digest)
        if not opts.digest_on:
            return ("The digest does not post itself in this channel. `/quiz digest channel on` posts it here, "
                    "`/quiz digest dm on` sends it to you; `/quiz summary` shows it any time.")
        where = []
        if opts.digest_channel:
            where.append("in this channel")
        if opts.digest_dms:
            where.append(f"as a direct message to {plural(len(opts.digest_dms), 'manager')}"
                         + (" (you among them)" if actor_id in opts.digest_dms else ""))
        return (f"The weekly digest of the week before posts itself every {WEEKDAY_NAMES[weekday]} at "
                f"{at:%H:%M} ({ch.schedule.timezone}), and the monthly one on the first posting day of each "
                f"month at the same time: {' and '.join(where)}. With participation, points and movers, "
                "mastery per section, the most common mistakes, and the chart.")

    async def cmd_export(self, ctx: Ctx) -> list[Message]:
        ch = await self._channel(ctx)
        if ch is None:
            return self._not_enabled()
        period, last, bad = _period_args(ctx.args, ("week", "month", "all"), "all")
        if bad:
            return [error(f"Usage: /quiz {HELP['export'][1]}")]
        start = end = None
        if period != "all":
            start, end = period_bounds(period, local_date(ch.schedule, self.svc.clock.now()), last=last)
        data = await export_csv(self.svc.store, ch, start, end)
        rows = data.count(b"\n") - 1
        label = "all time" if start is None else f"{start} to {end}"
        fname = f"quiz-scores-{period}.csv" if start is None else f"quiz-scores-{period}-{start}.csv"
        return [Message(kind="export", title="Score export", ephemeral=True,
                        blocks=[Block(f"{rows} scored answers, {label}."), Block(CSV_NOTE)],
                        files=[Attachment(fname, data, "text/csv")])]


def _command_typo(text: str) -> str | None:
    """`/quizz help`, `/quizhelp`, `/qiuz me`: what was meant, instead of running `/quiz z`."""
    m = re.match(r"/(\S+)(.*)", text, re.DOTALL)
    if m is None or m.group(1).lower() == "quiz":
        return None
    word, rest = m.group(1).lower(), m.group(2).split()
    sub = rest[0].lower() if rest else ""
    if word.startswith("quiz") and word[4:] in HELP:  # "/quizhelp"
        sub = word[4:]
    elif not difflib.get_close_matches(word, ["quiz"], n=1, cutoff=0.6):
        return f"Unknown command `/{m.group(1)}`: quiz commands start with `/quiz` (try `/quiz help`)."
    meant = f"/quiz {sub}" if sub in HELP else "/quiz help"
    return f"Unknown command `/{m.group(1)}`. Did you mean `{meant}`?"


def _period_args(args: list[str], allowed_periods: tuple[str, ...], default: str) -> tuple[str, bool, bool]:
    period, last, bad = default, False, False
    for a in args:
        a = a.lower()
        if a in allowed_periods:
            period = a
        elif a in ("last", "previous", "prev"):
            last = True
        else:
            bad = True
    return period, last, bad


def _list_items(items: list, lang: str, limit: int = 25) -> str:  # noqa: ANN001
    lines = [f"{it.id}  [{it.kind}, difficulty {it.difficulty}{''.join(', ' + w for w in sorted(item_needs(it) - {'cpu'}))}]  "
             f"{it.title.get(lang)}" for it in items[:limit]]
    if len(items) > limit:
        lines.append(f"... and {len(items) - limit} more: narrow the search.")
    return "\n".join(lines)


def search(bank, words: str) -> list:  # noqa: ANN001
    """The bank's own search when it has one (the loader's Bank), else a plain word match."""
    if hasattr(bank, "search"):
        return list(bank.search(words))
    ws = words.lower().split()
    out = []
    for it in bank.items.values():
        hay = " ".join([it.id, " ".join(it.tags), " ".join(it.outline), it.title.en, it.title.zh,
                        it.prompt.en, it.prompt.zh]).lower()
        if all(w in hay for w in ws):
            out.append(it)
    return out


def outline_title(scope: str) -> str:
    """A chapter/section title from the outline, when the outline module is there."""
    try:
        from questionbank.outline import load_outline

        outline = load_outline()
        table = outline.sections if "." in scope else outline.chapters
        entry = table.get(scope) if isinstance(table, dict) else None
        if entry is None and isinstance(table, dict) and scope.isdigit():
            entry = table.get(int(scope))  # type: ignore[call-overload]  # chapters are keyed by int
        if entry is None:
            return ""
        text = getattr(entry, "text", entry)
        text = text() if callable(text) else text
        return text.get("en") if hasattr(text, "get") else str(getattr(entry, "title", text))
    except Exception:  # noqa: BLE001 - a title is a nicety, never a failure
        return ""


DAY_SETS = {"daily": (0, 1, 2, 3, 4, 5, 6), "everyday": (0, 1, 2, 3, 4, 5, 6), "weekdays": (0, 1, 2, 3, 4),
            "workdays": (0, 1, 2, 3, 4), "weekends": (5, 6), "weekend": (5, 6), "none": ()}


def parse_days(text: str) -> tuple[int, ...]:
    text = text.lower()
    if text in DAY_SETS:
        return DAY_SETS[text]
    days: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            i, j = _day(a), _day(b)
            rng = range(i, j + 1) if i <= j else list(range(i, 7)) + list(range(0, j + 1))
            days.update(rng)
        elif part:
            days.add(_day(part))
    return tuple(sorted(days))


def _day(word: str) -> int:
    w = word.strip()[:3]
    if w not in WEEKDAY_NAMES:
        raise ValueError(f"`{word}` is not a weekday (mon, tue, ... sun)")
    return WEEKDAY_NAMES.index(w)


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?:in)?)?", text.lower())
    if not m or not any(m.groups()):
        raise ValueError(f"`{text}` is not a duration (like 8h, 90m, 1d, 1h30m)")
    d, h, mi = (int(g) if g else 0 for g in m.groups())
    total = d * 1440 + h * 60 + mi
    if not 5 <= total <= 7 * 1440:
        raise ValueError("a round stays open between 5 minutes and 7 days")
    return total


def parse_schedule(args: list[str], current: Schedule) -> tuple[Schedule, list[str]]:
    """Positional words or key=value, in any order; every problem is reported."""
    s = current
    problems: list[str] = []
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq:
            value = arg
            low = arg.lower()
            if re.fullmatch(r"\d{1,2}:\d{2}", arg):
                key = "time"
            elif "/" in arg or low in ("utc", "gmt"):
                key = "zone"
            elif low in ("zh", "en"):
                key = "lang"
            elif low in ("ramp", "noramp", "no-ramp"):
                key, value = "ramp", "off" if low != "ramp" else "on"
            elif re.fullmatch(r"(\d+d)?(\d+h)?(\d+m(in)?)?", low) and low:
                key = "duration"
            else:
                key = "days"
        key = key.lower()
        try:
            if key == "time":
                hh, mm = value.split(":")
                s = replace(s, post_time=time(int(hh), int(mm)))
            elif key in ("zone", "tz", "timezone"):
                zone(value)
                s = replace(s, timezone="UTC" if value.lower() in ("utc", "gmt") else value)
            elif key in ("days", "weekdays"):
                s = replace(s, weekdays=parse_days(value))
            elif key in ("duration", "open", "for"):
                s = replace(s, duration_min=parse_duration(value))
            elif key in ("lang", "language"):
                if value not in ("zh", "en"):
                    raise ValueError(f"language `{value}` is not zh or en")
                s = replace(s, language=value)
            elif key == "ramp":
                if value.lower() not in ("on", "off", "true", "false", "yes", "no"):
                    raise ValueError("ramp is on or off")
                s = replace(s, ramp=value.lower() in ("on", "true", "yes"))
            else:
                raise ValueError(f"unknown setting `{key}`")
        except ValueError as exc:
            msg = str(exc)
            if key == "time" and "`" not in msg:
                msg = f"`{value}` is not a time of day (HH:MM)"
            problems.append(msg)
    return s, problems
