"""The Discord adapter (discord.py 2): `/quiz` slash commands, a thread per round, a modal for
code, buttons for choice items, reactions on answers.

It translates and renders only: who may run a command, what counts as an answer and how it
scores are the core's decisions (QuizService); rate limits and reconnects are discord.py's.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, Literal, TypeVar

import discord
from discord import app_commands

from ..config import DiscordConfig
from ..core.answers import may_have_been_an_answer
from ..core.commands import outline_title, search
from ..core.models import UNGRADED, Actor, ChannelRef, Message
from ..core.service import QuizService
from . import discord_render as render
from .text import Recent

log = logging.getLogger(__name__)

PLATFORM = "discord"
RECEIVED, PASSED, NOT_PASSED, UNGRADED_MARK = "📥", "✅", "❌", "⚠️"
ATTACHMENT_MAX_BYTES = 64 * 1024  # Discord turns long pastes into message.txt; read those
ATTACHMENT_SUFFIXES = (".py", ".txt")
FAILURE_TEXT = "Something went wrong on the bot's side; nothing was lost. Please try again in a moment."
T = TypeVar("T")


def actor_of(user: discord.abc.User, admin_permission: str = "manage_guild") -> Actor:
    """Who acts: the member's role names and whether they hold the configured admin permission
    (the core turns these into rights; nothing is decided here)."""
    roles = frozenset(r.name for r in getattr(user, "roles", []) if not r.is_default())
    perms = getattr(user, "guild_permissions", None)
    admin = bool(perms is not None and (perms.administrator or getattr(perms, admin_permission, False)))
    return Actor(PLATFORM, str(user.id), getattr(user, "display_name", None) or user.name, roles, admin)


def where_of(channel: Any) -> ChannelRef:
    """The quiz channel a message or interaction belongs to: a thread counts as its parent
    (by `parent_id`, which a thread always has; `parent` is None when it is not cached)."""
    guild = getattr(channel, "guild", None)
    gid = str(guild.id) if guild else "dm"
    if isinstance(channel, discord.Thread):
        return ChannelRef(PLATFORM, gid, str(channel.parent_id), getattr(channel.parent, "name", "") or "")
    return ChannelRef(PLATFORM, gid, str(channel.id), getattr(channel, "name", "") or "")


class QuizClient(discord.Client):
    """discord.Client with the quiz's intents; events go to the adapter."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the developer portal (README)
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.adapter = adapter

    async def setup_hook(self) -> None:
        await self.adapter.sync_commands()

    async def on_ready(self) -> None:
        log.info("discord: logged in as %s in %d servers", self.user, len(self.guilds))

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.adapter.on_component(interaction)


class AnswerModal(discord.ui.Modal):
    """`/quiz answer` without text, or the Answer button: a paragraph input for the code."""

    def __init__(self, adapter: DiscordAdapter, form: Message) -> None:
        title = render.cut(f"Answer: {form.title}", render.MODAL_TITLE_MAX, note="…")
        super().__init__(title=title, timeout=30 * 60)
        self.adapter = adapter
        self.round_id = int(form.data["round_id"])
        kind = form.data.get("kind")
        max_chars = min(render.MODAL_INPUT_MAX, int(form.data.get("max_chars") or render.MODAL_INPUT_MAX))
        self.answer: discord.ui.TextInput[Any] = discord.ui.TextInput(
            style=discord.TextStyle.paragraph, custom_id="quiz:form:answer", max_length=max_chars,
            default=render.modal_default(form.data.get("starter"), max_chars) if kind == "code" else None,
            placeholder="def ...  (plain code, no ``` needed)" if kind == "code" else "the exact printed text")
        label = "Your code" if kind == "code" else "What the snippet prints"
        entry = form.data.get("entrypoint")
        self.add_item(discord.ui.Label(
            text=label, component=self.answer,
            description=render.cut(f"Define {entry}", render.LABEL_DESCRIPTION_MAX, note="…") if entry else None))

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await self.adapter.submit_answer(interaction, self.answer.value or "", round_id=self.round_id)

    async def on_error(self, interaction: discord.Interaction, error: Exception, *_: object) -> None:
        """A Modal's handler (no item): a failing submit is answered, never silent."""
        await self.adapter.report_failure(interaction, error)


Period = Literal["round", "week", "topic", "month", "all", "practice"]


class QuizGroup(app_commands.Group):
    """`/quiz ...`: each subcommand becomes the core's command text. Rights are checked in the
    core for every call, whatever a server admin sets in Discord's integration settings."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        super().__init__(name="quiz", description="The daily PyTorch quiz", guild_only=True)
        self.adapter = adapter

    @app_commands.command(description="What you can do with the quiz")
    async def help(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "help")

    @app_commands.command(description="Answer the open round (opens a form without text)")
    @app_commands.describe(text="One-line answer: option keys or printed output; leave empty for the code form")
    async def answer(self, interaction: discord.Interaction, text: str | None = None) -> None:
        if text and text.strip():
            await self.adapter.run_command(interaction, f"answer {text}")
        else:
            await self.adapter.open_form(interaction)

    @app_commands.command(description="Standings in this channel")
    async def leaderboard(self, interaction: discord.Interaction, period: Period = "week") -> None:
        await self.adapter.run_command(interaction, f"leaderboard {period}")

    @app_commands.command(description="Your points, streak, strongest and weakest chapters")
    async def me(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "me")

    @app_commands.command(description="The open round's next hint, privately (each costs a share of the points)")
    @app_commands.describe(reveal="true reveals the next hint; without it you see what it would cost")
    async def hint(self, interaction: discord.Interaction, reveal: bool = False) -> None:
        await self.adapter.run_command(interaction, f"hint{' reveal' if reveal else ''}")

    @app_commands.command(description="A private question from the bank, on the practice board (not the channel's)")
    @app_commands.describe(scope="A chapter (3), section (3.2) or question id; empty: the whole bank",
                           action="question (default), hint, reveal-hint or giveup for your open one")
    async def practice(self, interaction: discord.Interaction, scope: str | None = None,
                       action: Literal["question", "hint", "reveal-hint", "giveup"] = "question") -> None:
        text = {"question": f"practice {scope or ''}".strip(), "hint": "practice hint",
                "reveal-hint": "practice hint reveal", "giveup": "practice giveup"}[action]
        await self.adapter.run_command(interaction, text)

    @app_commands.command(description="Privately, a question you failed or gave up, back on a spaced schedule")
    async def review(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "review")

    @app_commands.command(description="Start the quiz in this channel (moderators)")
    async def enable(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "enable")

    @app_commands.command(description="Stop the quiz in this channel; scores are kept (moderators)")
    async def disable(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "disable")

    @app_commands.command(description="Show or change when rounds open (moderators change)")
    @app_commands.describe(settings="e.g. 09:30 Europe/Berlin mon-fri 8h en")
    async def schedule(self, interaction: discord.Interaction, settings: str | None = None) -> None:
        await self.adapter.run_command(interaction, f"schedule {settings or ''}")

    @app_commands.command(description="Show or change the channel's settings (moderators change)")
    @app_commands.describe(names="credit the first solver of each approach shown when a round closes")
    async def settings(self, interaction: discord.Interaction, names: bool | None = None) -> None:
        value = "" if names is None else f" names={'on' if names else 'off'}"
        await self.adapter.run_command(interaction, f"settings{value}")

    @app_commands.command(description="Topic weeks: list, add or cancel (moderators change)")
    @app_commands.describe(action="list, add or cancel", topic="chapter or section for add; week id for cancel",
                           when="this, next or YYYY-MM-DD [YYYY-MM-DD], and an optional title")
    async def week(self, interaction: discord.Interaction, action: Literal["list", "add", "cancel"] = "list",
                   topic: str | None = None, when: str | None = None) -> None:
        await self.adapter.run_command(interaction, " ".join(p for p in ("week", action, topic, when) if p))

    @week.autocomplete("topic")
    async def _topic_choices(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return self.adapter.topic_choices(current)

    @app_commands.command(description="Open a round now (moderators)")
    @app_commands.describe(item="an item id; empty picks one")
    async def post(self, interaction: discord.Interaction, item: str | None = None) -> None:
        await self.adapter.run_command(interaction, f"post {item or ''}")

    @post.autocomplete("item")
    async def _post_items(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return self.adapter.item_choices(current)

    @app_commands.command(description="Skip the open round, or the next scheduled one (moderators)")
    @app_commands.describe(day="`next` (the next scheduled round, even while one is open) or a date YYYY-MM-DD")
    async def skip(self, interaction: discord.Interaction, day: str | None = None) -> None:
        await self.adapter.run_command(interaction, f"skip {day or ''}")

    @app_commands.command(description="Close the open round and reveal the answer (moderators)")
    async def close(self, interaction: discord.Interaction) -> None:
        await self.adapter.run_command(interaction, "close")

    @app_commands.command(description="Browse the question bank (moderators)")
    @app_commands.describe(query="an item id to preview, `search <words>` or `chapter <n>`; empty for an overview")
    async def bank(self, interaction: discord.Interaction, query: str | None = None) -> None:
        await self.adapter.run_command(interaction, f"bank {query or ''}")

    @bank.autocomplete("query")
    async def _bank_items(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return self.adapter.item_choices(current)

    @app_commands.command(description="Weekly or monthly digest with a chart (managers)")
    async def summary(self, interaction: discord.Interaction, period: Literal["week", "month"] = "week",
                      last: bool = False) -> None:
        await self.adapter.run_command(interaction, f"summary {period}{' last' if last else ''}")

    @app_commands.command(description="The weekly digest posted by itself, here and/or to you (managers)")
    @app_commands.describe(settings="e.g. `channel on dm on 09:00 mon`, `dm off`, `off`; empty: what is set")
    async def digest(self, interaction: discord.Interaction, settings: str | None = None) -> None:
        await self.adapter.run_command(interaction, f"digest {settings or ''}".strip())

    @app_commands.command(description="CSV of every scored answer (managers)")
    async def export(self, interaction: discord.Interaction, period: Literal["week", "month", "all"] = "all",
                     last: bool = False) -> None:
        await self.adapter.run_command(interaction, f"export {period}{' last' if last else ''}")


class DiscordAdapter:
    """Wires a discord.Client to the QuizService. `client` is injectable for tests."""

    #: answer within this long, else defer (Discord gives an interaction 3 s for its first reply)
    defer_after_s = 1.5

    def __init__(self, service: QuizService, cfg: DiscordConfig | None = None, *,
                 client: discord.Client | None = None) -> None:
        self.svc = service
        self.cfg = cfg or DiscordConfig()
        self.client = client if client is not None else QuizClient(self)
        self.tree = app_commands.CommandTree(self.client)
        self.group = QuizGroup(self)
        self.tree.add_command(self.group)
        self.tree.on_error = self._tree_error  # type: ignore[method-assign]
        self.receipts: Recent[int, discord.Message] = Recent(ttl_s=24 * 3600.0)  # answer -> chat message
        self.followups: Recent[int, discord.Interaction] = Recent()  # answer -> interaction (15 min token)

    # ------------------------------------------------------------------ lifecycle

    async def sync_commands(self) -> None:
        """Register /quiz: per configured guild at once (global registration takes up to an hour)."""
        if self.cfg.guild_ids:
            for gid in self.cfg.guild_ids:
                guild = discord.Object(int(gid))
                self.tree.copy_global_to(guild=guild)
                await self.tree.sync(guild=guild)
        else:
            await self.tree.sync()

    async def start(self, token: str) -> None:
        await self.client.start(token)

    async def stop(self) -> None:
        await self.client.close()

    def actor(self, user: discord.abc.User) -> Actor:
        return actor_of(user, self.cfg.moderator_permission)

    # ------------------------------------------------------------------ slash commands

    async def in_time(self, interaction: discord.Interaction, work: Awaitable[T]) -> tuple[T, bool]:
        """Await the core's work; if it is slow (a chart, a busy database), defer the interaction
        first (Discord allows 3 s for the first response) so the reply can follow up.
        Returns the result and whether the interaction was deferred."""
        task = asyncio.ensure_future(work)
        deferred = False
        done, _ = await asyncio.wait({task}, timeout=self.defer_after_s)
        if not done and not interaction.response.is_done():
            try:
                await interaction.response.defer(ephemeral=True, thinking=True)
                deferred = True
            except discord.HTTPException as exc:  # expired already: the work still finishes
                log.warning("discord: could not defer interaction %s: %s", interaction.id, exc)
        return await task, deferred

    async def run_command(self, interaction: discord.Interaction, text: str) -> None:
        """Run a core command; if it is slow (a chart, a busy database) defer, then follow up."""
        try:
            messages, deferred = await self.in_time(
                interaction, self.svc.command(self.actor(interaction.user), where_of(interaction.channel), text.strip()))
        except Exception as exc:  # noqa: BLE001 - the user gets a message, the log the traceback
            await self.report_failure(interaction, exc)
            return
        await self.reply(interaction, messages, deferred=deferred)

    async def reply(self, interaction: discord.Interaction, messages: list[Message], *, deferred: bool = False) -> None:
        """The core's replies: the first as the interaction response, the rest as follow-ups.
        After a private deferral, public replies go to the channel and the player gets 'Done'."""
        followed = False
        for msg in messages:
            if msg.kind == "ack" and "answer_id" in msg.data:  # the verdict's details follow privately
                self.followups.put(int(msg.data["answer_id"]), interaction)
            if msg.kind == "form":  # `/quiz answer` without an answer: the modal or the buttons
                if not interaction.response.is_done():
                    await self.show_form(interaction, msg)
                continue
            view = (render.round_view(int(msg.data["round_id"]), str(msg.data.get("kind", "")),
                                      msg.data.get("options") or [], bool(msg.data.get("multiple")))
                    if msg.kind == "practice_open" else None)  # a private question: its answer buttons
            payload = render.payload_for(msg, view=view).kwargs()
            if not interaction.response.is_done():
                await interaction.response.send_message(**payload, ephemeral=msg.ephemeral)
            elif deferred and not msg.ephemeral and interaction.channel is not None:
                await interaction.channel.send(**payload)  # type: ignore[union-attr]
            else:
                await interaction.followup.send(**payload, ephemeral=msg.ephemeral)
                followed = True
        if deferred and not followed:
            await interaction.followup.send("Done.", ephemeral=True)
        elif not interaction.response.is_done():  # nothing to show: still answer, or Discord says "failed"
            await interaction.response.send_message("Done.", ephemeral=True)

    async def report_failure(self, interaction: discord.Interaction, exc: BaseException) -> None:
        log.error("discord: interaction failed", exc_info=exc)
        try:
            if interaction.response.is_done():
                await interaction.followup.send(FAILURE_TEXT, ephemeral=True)
            else:
                await interaction.response.send_message(FAILURE_TEXT, ephemeral=True)
        except discord.DiscordException as again:  # expired token, or answered meanwhile
            log.info("discord: could not report the failure: %s", again)

    async def _tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        await self.report_failure(interaction, error)

    def item_choices(self, current: str) -> list[app_commands.Choice[str]]:
        """Autocomplete for item ids: the bank's own search, 25 at most (Discord's limit)."""
        bank = self.svc.bank
        items = search(bank, current) if current.strip() else list(bank.items.values())
        return [app_commands.Choice(name=render.cut(f"{it.id}: {it.title.get('en')}", render.CHOICE_NAME_MAX,
                                                    note="…"), value=it.id) for it in items[:25]]

    def topic_choices(self, current: str) -> list[app_commands.Choice[str]]:
        """Autocomplete for topic weeks: the chapters and sections the bank has items in."""
        scopes = sorted({str(it.chapter) for it in self.svc.bank.items.values()}
                        | {it.section for it in self.svc.bank.items.values() if getattr(it, "section", None)},
                        key=lambda s: [int(p) for p in s.split(".") if p.isdigit()])
        out = []
        for scope in scopes:
            name = f"{scope} {outline_title(scope) or ''}".strip()
            if current.lower() in name.lower():
                out.append(app_commands.Choice(name=render.cut(name, render.CHOICE_NAME_MAX, note="…"), value=scope))
        return out[:25]

    # ------------------------------------------------------------------ answers

    async def open_form(self, interaction: discord.Interaction, round_id: int | None = None) -> None:
        """The answer form for the open round: a modal for code and output items, the option
        buttons (privately) for choice items, the core's refusal when there is no round."""
        where = where_of(interaction.channel)
        form = await self.svc.answer_form(where, actor=self.actor(interaction.user), round_id=round_id)
        if form is None or (round_id is not None and form.data.get("round_id") != round_id):
            await self.reply(interaction, await self.svc.submit(self.actor(interaction.user), where, "",
                                                                round_id=round_id))
            return
        await self.show_form(interaction, form)

    async def show_form(self, interaction: discord.Interaction, form: Message) -> None:
        """The first response to `interaction`: the option buttons privately, else the modal."""
        if form.data.get("kind") == "choice":
            view = render.round_view(int(form.data["round_id"]), "choice", form.data.get("options") or [],
                                     bool(form.data.get("multiple")))
            await interaction.response.send_message("Pick your answer:", view=view, ephemeral=True)
            return
        await interaction.response.send_modal(AnswerModal(self, form))

    async def submit_answer(self, interaction: discord.Interaction, text: str, *, round_id: int | None) -> None:
        """A modal, button or select answer: stored by the core, acknowledged privately; the
        verdict's details come back privately on the same interaction when it is graded."""
        replies, deferred = await self.in_time(
            interaction, self.svc.submit(self.actor(interaction.user), where_of(interaction.channel), text,
                                         explicit=True, round_id=round_id))
        await self.reply(interaction, replies, deferred=deferred)

    async def on_message(self, message: discord.Message) -> None:
        """A chat message in a quiz channel or a round's thread; the core decides if it answers."""
        if message.author.bot or message.guild is None:
            return
        channel = message.channel
        where = where_of(channel)
        text = message.content or ""
        in_round_thread = False
        try:
            if message.attachments and await self.svc.answer_form(where) is not None:
                text += await self._attached_code(message)  # only where a round is open to answer
            if not text.strip():
                return
            replied_to = getattr(getattr(message, "reference", None), "message_id", None)
            in_round_thread = ((isinstance(channel, discord.Thread)
                                and await self.svc.is_round_thread(where, str(channel.id)))
                               or (replied_to is not None  # a reply to the round's post
                                   and await self.svc.is_round_thread(where, str(replied_to))))
            replies = await self.svc.message(self.actor(message.author), where, text,
                                             in_round_thread=in_round_thread)
        except Exception:  # noqa: BLE001
            log.exception("discord: message %s failed", message.id)
            if may_have_been_an_answer(text, in_round_thread=in_round_thread):
                try:
                    await message.reply(FAILURE_TEXT, mention_author=False)
                except discord.HTTPException as exc:
                    log.info("discord: could not report the failure: %s", exc)
            return
        for msg in replies:
            if msg.kind == "ack" and "answer_id" in msg.data:
                self.receipts.put(int(msg.data["answer_id"]), message)
                await self._react(message, RECEIVED)
            else:  # a refusal (too long, no attempts left, round closed): tell the player in place
                await message.reply(**render.payload_for(msg).kwargs(), mention_author=False)

    async def _attached_code(self, message: discord.Message) -> str:
        """Discord turns a long paste into a message.txt attachment: read it as a code block."""
        out = ""
        for att in message.attachments:
            if att.filename.lower().endswith(ATTACHMENT_SUFFIXES) and 0 < att.size <= ATTACHMENT_MAX_BYTES:
                try:
                    data = (await att.read()).decode("utf-8", errors="replace")
                except discord.HTTPException:
                    log.warning("discord: could not read attachment %s", att.filename)
                    continue
                if "```" not in data:
                    data = f"```python\n{data}\n```"
                out += "\n" + data
        return out

    async def on_component(self, interaction: discord.Interaction) -> None:
        """Clicks on our buttons and selects, matched by custom id so they survive restarts."""
        if interaction.type is not discord.InteractionType.component or not interaction.data:
            return
        parsed = render.parse_custom_id(str(interaction.data.get("custom_id", "")))
        if parsed is None:
            return
        what, round_id, key = parsed
        try:
            if what == "choice":
                await self.submit_answer(interaction, key, round_id=round_id)
            elif what == "choices":
                data: dict[str, Any] = dict(interaction.data or {})
                values: list[Any] = list(data.get("values") or [])
                await self.submit_answer(interaction, ",".join(str(v) for v in values), round_id=round_id)
            elif what == "answer":
                await self.open_form(interaction, round_id)
        except Exception as exc:  # noqa: BLE001
            await self.report_failure(interaction, exc)

    async def _react(self, message: discord.Message, emoji: str, *, remove: str | None = None) -> None:
        try:
            if remove and self.client.user is not None:
                await message.remove_reaction(remove, self.client.user)
            await message.add_reaction(emoji)
        except discord.HTTPException as exc:  # missing permission, deleted message: cosmetic only
            log.info("discord: reaction %s failed: %s", emoji, exc)

    # ------------------------------------------------------------------ what the bot says by itself

    async def _resolve(self, channel_id: str) -> Any:
        cid = int(channel_id)
        channel = self.client.get_channel(cid)
        if channel is None:
            channel = await self.client.fetch_channel(cid)
        return channel

    async def sink(self, ref: ChannelRef, msg: Message) -> str | None:
        """Post a core message. A round gets its embed and a thread for answers (the thread's
        id is the post's id, which becomes the round's reference); round messages go into it.

        The core keeps a message whose sink raised and retries it, with the rest of that
        channel's messages behind it. Posting again cannot help when the channel is gone or the
        bot may not post there (NotFound, Forbidden): that message is dropped and logged rather
        than retried forever. Other errors (Discord down) raise, and the core retries."""
        try:
            return await self._sink(ref, msg)
        except (discord.NotFound, discord.Forbidden) as exc:
            log.error("discord: dropped a %s message for %s (round %s): %s", msg.kind, ref, msg.round_id, exc)
            return None

    async def _sink(self, ref: ChannelRef, msg: Message) -> str | None:
        if (msg.ephemeral or msg.dm) and msg.mention:  # meant for one person only: never the channel
            await self._post_private(msg)
            return None
        channel = await self._resolve(ref.channel)
        if msg.kind == "round_open":
            return await self._post_round(channel, msg)
        target = channel
        if msg.thread_ref:
            try:
                target = await self._resolve(msg.thread_ref)
            except (discord.NotFound, discord.Forbidden):
                target = channel  # the thread was deleted: say it in the channel
        if msg.kind == "result":
            await self._post_result(target, msg)
        elif msg.kind == "round_close":
            await channel.send(**render.payload_for(msg).kwargs())
            if isinstance(target, discord.Thread):
                await target.send(f"Round closed: the answer is in {channel.mention}.")
        else:
            await target.send(**render.payload_for(msg).kwargs())
        return None

    async def _post_round(self, channel: Any, msg: Message) -> str:
        view = render.round_view(int(msg.data["round_id"]), str(msg.data.get("kind", "")),
                                 msg.data.get("options") or [], bool(msg.data.get("multiple")))
        posted = await channel.send(**render.payload_for(msg, view=view).kwargs())
        try:
            await posted.create_thread(name=render.cut(f"Answers to round #{msg.data.get('number') or msg.data['round_id']}", 100, note="…"),
                                       auto_archive_duration=1440)
        except discord.HTTPException as exc:  # no thread permission: answers in the channel still work
            log.warning("discord: could not create the round thread: %s", exc)
        return str(posted.id)

    async def _post_private(self, msg: Message) -> None:
        """A message for one player: on the interaction they answered through while it lasts (an
        ephemeral follow-up), else as a direct message (a bot cannot post ephemerally unasked)."""
        interaction = (self.followups.pop(int(msg.data.get("answer_id", 0) or 0))
                       if msg.kind == "result" and not msg.dm else None)
        payload = render.payload_for(msg).kwargs()
        if interaction is not None:
            try:
                await interaction.followup.send(**payload, ephemeral=True)
                return
            except discord.HTTPException as exc:  # token expired or revoked
                log.info("discord: private follow-up failed, sending a direct message: %s", exc)
        assert msg.mention is not None
        user = self.client.get_user(int(msg.mention)) or await self.client.fetch_user(int(msg.mention))
        await user.send(**payload)

    async def _post_result(self, target: Any, msg: Message) -> None:
        answer_id = int(msg.data.get("answer_id", 0) or 0)
        verdict = str(msg.data.get("verdict", ""))
        interaction = self.followups.pop(answer_id)
        sent_privately = False
        if interaction is not None:  # answered through the form: details privately, verdict publicly
            try:
                await interaction.followup.send(**render.payload_for(msg).kwargs(), ephemeral=True)
                sent_privately = True
            except discord.HTTPException as exc:  # token expired or revoked
                log.info("discord: private result follow-up failed: %s", exc)
        await target.send(**render.payload_for(msg, short=sent_privately).kwargs())
        chat = self.receipts.pop(answer_id)
        if chat is not None:
            mark = PASSED if verdict == "passed" else UNGRADED_MARK if verdict == UNGRADED else NOT_PASSED
            await self._react(chat, mark, remove=RECEIVED)
