"""The Discord adapter driven at discord.py's boundary.

The client, command tree, `/quiz` group, views and modal are the real discord.py objects; the
things Discord's servers would hand us (members, channels, threads, messages, interactions)
are test doubles specced from the real discord.py classes, so a call the adapter makes on
them must exist with that signature in discord.py.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock, MagicMock, create_autospec

import discord
import pytest

from bot.config import DiscordConfig
from bot.core import Block, CoreSettings, FakeClock, Message, RoleRules, RunnerPool
from bot.core.service import QuizService
from bot.platforms import discord_render as render
from bot.platforms.discord_app import (
    NOT_PASSED,
    PASSED,
    RECEIVED,
    AnswerModal,
    DiscordAdapter,
    where_of,
)

from .helpers import FakeRunner
from .scenario import RIGHT, START, WRONG_FORM, board_of, console_scores, scenario_bank

GUILD_ID, CHANNEL_ID, BOT_ID = 1000, 2000, 9
_ids = itertools.count(50_000)


# ------------------------------------------------------------------------------------ doubles

class World:
    """One guild with one text channel; records what the bot posts."""

    def __init__(self) -> None:
        self.guild = create_autospec(discord.Guild, instance=True)
        self.guild.id = GUILD_ID
        self.channel = self.text_channel(CHANNEL_ID, "quiz")
        self.channels: dict[int, Any] = {CHANNEL_ID: self.channel}
        self.posts: list[dict[str, Any]] = []  # every send(), with where it went
        self.threads: dict[int, Any] = {}

    def text_channel(self, cid: int, name: str) -> Any:
        ch = create_autospec(discord.TextChannel, instance=True)
        ch.id, ch.name, ch.guild, ch.mention = cid, name, self.guild, f"<#{cid}>"
        ch.send = AsyncMock(side_effect=lambda **kw: self._posted(ch, kw))
        return ch

    def _posted(self, where: Any, kw: dict[str, Any]) -> Any:
        msg = create_autospec(discord.Message, instance=True)
        msg.id = next(_ids)
        msg.create_thread = AsyncMock(side_effect=lambda **k: self._thread(msg, k))
        self.posts.append({"where": where, "message": msg, **kw})
        return msg

    def _thread(self, parent_msg: Any, kw: dict[str, Any]) -> Any:
        th = create_autospec(discord.Thread, instance=True)
        th.id, th.name, th.parent, th.guild, th.owner_id = parent_msg.id, kw["name"], self.channel, self.guild, BOT_ID
        th.send = AsyncMock(side_effect=lambda *a, **k: self._posted(th, {"content": a[0]} if a else k))
        self.threads[th.id] = th
        self.channels[th.id] = th
        return th

    def in_(self, where: Any) -> list[dict[str, Any]]:
        return [p for p in self.posts if p["where"] is where]


def member(uid: int, name: str, *, admin: bool = False, roles: tuple[str, ...] = ()) -> Any:
    m = create_autospec(discord.Member, instance=True)
    m.id, m.name, m.display_name, m.bot = uid, name.lower(), name, False
    role_objs = []
    for r in roles:
        role = create_autospec(discord.Role, instance=True)
        role.name = r
        role.is_default.return_value = False
        role_objs.append(role)
    m.roles = role_objs
    m.guild_permissions = discord.Permissions(manage_guild=admin)
    return m


def interaction(user: Any, channel: Any, *, data: dict[str, Any] | None = None) -> Any:
    """An Interaction double whose response knows whether it was used, as Discord's does."""
    inter = create_autospec(discord.Interaction, instance=True)
    inter.user, inter.channel, inter.guild = user, channel, channel.guild
    inter.type = discord.InteractionType.component if data else discord.InteractionType.application_command
    inter.data = data
    resp = create_autospec(discord.InteractionResponse, instance=True)
    used = {"done": False}

    def mark(*_a: Any, **_k: Any) -> None:
        used["done"] = True

    resp.is_done.side_effect = lambda: used["done"]
    resp.send_message.side_effect = mark
    resp.defer.side_effect = mark
    resp.send_modal.side_effect = mark
    inter.response = resp
    inter.followup = create_autospec(discord.Webhook, instance=True)
    return inter


def chat(author: Any, channel: Any, content: str, attachments: list[Any] | None = None) -> Any:
    msg = create_autospec(discord.Message, instance=True)
    msg.id, msg.author, msg.channel, msg.guild = next(_ids), author, channel, channel.guild
    msg.content, msg.attachments = content, attachments or []
    return msg


MOD = member(1, "Mona", admin=True)
ALICE = member(2, "Alice")
BOB = member(3, "Bob")
HELPER = member(4, "Hana", roles=("quiz-moderator",))


class Bot:
    """The adapter on a real discord.Client (never connected) and a real service."""

    def __init__(self, svc: QuizService, world: World, runner: FakeRunner) -> None:
        self.svc, self.world, self.runner = svc, world, runner
        self.adapter = DiscordAdapter(svc, DiscordConfig(enabled=True))
        client = self.adapter.client
        client._connection.user = MagicMock(id=BOT_ID)  # who "we" are in the gateway's state
        client.get_channel = lambda cid: world.channels.get(cid)  # type: ignore[method-assign]
        svc.sink = self.adapter.sink

    async def slash(self, user: Any, name: str, channel: Any = None, **options: Any) -> Any:
        inter = interaction(user, channel or self.world.channel)
        cmd = self.adapter.group.get_command(name)
        assert cmd is not None, name
        await cmd.callback(self.adapter.group, inter, **options)  # type: ignore[arg-type]
        await self.svc.deliver()
        return inter

    async def say(self, user: Any, content: str, channel: Any, attachments: list[Any] | None = None) -> Any:
        msg = chat(user, channel, content, attachments)
        await self.adapter.on_message(msg)
        return msg

    async def settle(self) -> None:
        await self.svc.settle()

    def thread(self) -> Any:
        return list(self.world.threads.values())[-1]


@pytest.fixture
async def bot(tmp_path: Path) -> Any:
    runner = FakeRunner()
    settings = CoreSettings(roles=RoleRules(moderator_roles=frozenset({"quiz-moderator"})))
    svc = await QuizService.open(str(tmp_path / "discord.sqlite3"), scenario_bank(), RunnerPool.single(runner),
                                 clock=FakeClock(START), settings=settings)
    await svc.start(background=False)
    b = Bot(svc, World(), runner)
    yield b
    await svc.close()


async def count(bot: Bot, table: str) -> int:
    row = await bot.svc.db.fetchone(f"SELECT COUNT(*) FROM {table}")
    return int(row[0])


def sent_text(call: Any) -> str:
    """Everything a send/send_message call would show: content plus embed title and description."""
    kw = call.kwargs
    parts = [str(call.args[0]) if call.args else "", kw.get("content") or ""]
    emb = kw.get("embed")
    if emb is not None:
        parts += [emb.title or "", emb.description or ""]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------ scenario

async def test_scenario_scores_like_the_console(bot: Bot, tmp_path: Path) -> None:
    """enable, post, Alice in the thread, Bob wrong by the modal then right in the thread."""
    expected = await console_scores(tmp_path)
    enable = await bot.slash(MOD, "enable")
    assert "Quiz enabled" in sent_text(enable.response.send_message.call_args)
    await bot.slash(MOD, "post", item="c1")
    round_post = bot.world.in_(bot.world.channel)[0]
    assert "Question of the day #1" in round_post["embed"].title
    assert isinstance(round_post["view"].children[0], discord.ui.Button)  # the Answer button
    thread = bot.thread()
    assert thread.id == round_post["message"].id and thread.owner_id == BOT_ID

    alice_msg = await bot.say(ALICE, RIGHT, thread)
    alice_msg.add_reaction.assert_awaited_with(RECEIVED)

    form = await bot.slash(BOB, "answer")
    modal = form.response.send_modal.call_args.args[0]
    assert isinstance(modal, AnswerModal) and modal.answer.default.startswith("def solve")
    submit = interaction(BOB, thread)
    modal._refresh(submit, [{"type": 18, "component": {"type": 4, "custom_id": "quiz:form:answer",
                                                         "value": WRONG_FORM}}], {})
    await modal.on_submit(submit)
    assert "received" in sent_text(submit.response.send_message.call_args)
    assert submit.response.send_message.call_args.kwargs["ephemeral"] is True
    await bot.settle()  # grade Bob's first attempt before his second, as the console does
    await bot.say(BOB, RIGHT, thread)
    await bot.settle()

    board = await bot.slash(MOD, "leaderboard", period="week")
    text = sent_text(board.response.send_message.call_args)
    assert text.index("Alice") < text.index("Bob")
    assert await board_of(bot.svc, where_of(bot.world.channel)) == expected

    # verdicts: Alice's in the thread with a ping for her only; reactions moved on
    alice_result = next(p for p in bot.world.in_(thread) if "<@2>" in (p.get("content") or ""))
    assert "passed" in alice_result["embed"].title
    assert alice_result["allowed_mentions"].users[0].id == 2 and alice_result["allowed_mentions"].everyone is False
    alice_msg.add_reaction.assert_awaited_with(PASSED)
    alice_msg.remove_reaction.assert_awaited()
    # Bob's form answer: details privately on his interaction, only the verdict line in public
    private = submit.followup.send.call_args
    assert private.kwargs["ephemeral"] is True and "wrong answer" in sent_text(private)
    bob_public = [p for p in bot.world.in_(thread) if "<@3>" in (p.get("content") or "")]
    assert bob_public[0]["embed"].description is None  # short: title only


async def test_thread_and_modal_answers_are_graded_alike(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    await bot.say(ALICE, RIGHT, bot.thread())
    form = await bot.slash(BOB, "answer")
    modal = form.response.send_modal.call_args.args[0]
    submit = interaction(BOB, bot.world.channel)
    modal._refresh(submit, [{"type": 18, "component": {"type": 4, "custom_id": "quiz:form:answer",
                                                         "value": "def solve(x):\n    return x * 2\n"}}], {})
    await modal.on_submit(submit)
    await bot.settle()
    subs = [j["submission"] for j in bot.runner.jobs if j["kind"] == "code"]
    assert len(subs) == 2 and subs[0] == subs[1]
    rows = await bot.svc.db.fetchall("SELECT verdict FROM answers ORDER BY id")
    assert [r[0] for r in rows] == ["passed", "passed"]


async def test_a_4000_character_modal_answer_is_stored_and_graded(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    code = "def solve(x):\n    return x * 2  # PASS\n"
    code += "#" * (4000 - len(code) - 1) + "\n"
    assert len(code) == 4000
    form = await bot.slash(ALICE, "answer")
    modal = form.response.send_modal.call_args.args[0]
    assert modal.answer.max_length == 4000
    submit = interaction(ALICE, bot.world.channel)
    modal._refresh(submit, [{"type": 18, "component": {"type": 4, "custom_id": "quiz:form:answer", "value": code}}],
                   {})
    await modal.on_submit(submit)
    await bot.settle()
    row = await bot.svc.db.fetchone("SELECT length(content), verdict FROM answers")
    assert row[0] >= 4000 and row[1] == "passed"


async def test_long_paste_arrives_as_message_txt_and_is_read_as_code(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    att = create_autospec(discord.Attachment, instance=True)
    att.filename, att.size = "message.txt", 60
    att.read = AsyncMock(return_value=b"def solve(x):\n    return x * 2\n")
    msg = await bot.say(ALICE, "", bot.thread(), attachments=[att])
    msg.add_reaction.assert_awaited_with(RECEIVED)
    await bot.settle()
    assert (await bot.svc.db.fetchone("SELECT verdict FROM answers"))[0] == "passed"


async def test_plain_text_in_an_output_rounds_thread_is_an_answer(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="o1")
    in_channel = await bot.say(ALICE, "torch.Size([2, 3])", bot.world.channel)  # chatter in the channel
    in_channel.add_reaction.assert_not_awaited()
    in_thread = await bot.say(BOB, "torch.Size([2, 3])", bot.thread())
    in_thread.add_reaction.assert_awaited_with(RECEIVED)
    await bot.settle()
    rows = await bot.svc.db.fetchall("SELECT verdict FROM answers")
    assert [r[0] for r in rows] == ["passed"]
    in_thread.add_reaction.assert_awaited_with(PASSED)


# ------------------------------------------------------------------------------------ rights

async def test_moderator_commands_are_refused_in_code_for_players(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    refused = await bot.slash(ALICE, "post", item="c1")
    call = refused.response.send_message.call_args
    assert "is for quiz moderators" in sent_text(call) and call.kwargs["ephemeral"] is True
    assert bot.world.in_(bot.world.channel) == []  # nothing posted
    assert await count(bot, "rounds") == 0
    # a member with the configured role may, without Discord's Manage Server permission
    await bot.slash(HELPER, "post", item="c1")
    assert await count(bot, "rounds") == 1
    denied = await bot.slash(ALICE, "export")
    assert "is for quiz managers" in sent_text(denied.response.send_message.call_args)


async def test_chatter_is_ignored_and_refusals_are_replied_in_place(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    chatter = await bot.say(ALICE, "is `x.view` a copy?", bot.world.channel)
    chatter.add_reaction.assert_not_awaited()
    chatter.reply.assert_not_awaited()
    huge = await bot.say(ALICE, "```python\n" + "x = 1\n" * 5000 + "```", bot.thread())
    assert "the limit is" in sent_text(huge.reply.call_args)
    assert await count(bot, "answers") == 0
    bot_msg = chat(member(5, "OtherBot"), bot.world.channel, RIGHT)
    bot_msg.author.bot = True
    await bot.adapter.on_message(bot_msg)
    assert await count(bot, "answers") == 0


# ------------------------------------------------------------------------------------ components

async def test_choice_round_buttons_answer_and_stale_buttons_are_refused(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="q1")
    post = bot.world.in_(bot.world.channel)[0]
    ids = [c.custom_id for c in post["view"].children]
    assert ids == [render.choice_custom_id(1, k) for k in ("A", "B", "C")]
    click = interaction(ALICE, bot.world.channel, data={"custom_id": ids[1], "component_type": 2})
    await bot.adapter.on_component(click)
    assert "option(s) B" in sent_text(click.response.send_message.call_args)
    await bot.settle()
    assert (await bot.svc.db.fetchone("SELECT verdict FROM answers"))[0] == "passed"

    await bot.slash(MOD, "post", item="c1")  # round 2 replaces round 1
    stale = interaction(BOB, bot.world.channel, data={"custom_id": ids[0], "component_type": 2})
    await bot.adapter.on_component(stale)
    assert "Round #1 has closed" in sent_text(stale.response.send_message.call_args)
    assert await count(bot, "answers") == 1


async def test_slow_commands_defer_then_follow_up_with_the_chart(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    bot.adapter.defer_after_s = 0.0  # whatever the machine's speed, take the slow path
    inter = await bot.slash(MOD, "summary", period="week")
    inter.response.defer.assert_awaited_once()
    follow = inter.followup.send.call_args
    assert follow.kwargs["ephemeral"] is True
    assert follow.kwargs["files"][0].filename.endswith(".png")


async def test_autocomplete_offers_item_ids_and_topics(bot: Bot) -> None:
    choices = bot.adapter.item_choices("c")
    assert {c.value for c in choices} >= {"c1", "c2"} and all(len(c.name) <= 100 for c in choices)
    topics = bot.adapter.topic_choices("")
    assert "1" in {t.value for t in topics}


# ------------------------------------------------------------------------------------ limits

def test_embeds_are_cut_to_discord_limits_with_a_note() -> None:
    msg = Message(kind="result", title="T" * 400, blocks=[Block("x" * 9000), Block("y = 1\n" * 2000, code=True)])
    emb = render.embed_for(msg)
    assert len(emb.title) <= render.TITLE_MAX
    assert len(emb.description) <= render.DESCRIPTION_MAX and "cut:" in emb.description
    assert len(emb) <= render.EMBED_TOTAL_MAX
    assert emb.to_dict()  # serialisable as discord.py would send it


def test_echoed_output_cannot_ping() -> None:
    msg = Message(kind="result", title="Alice, answer #1: error", mention="2",
                  blocks=[Block("ValueError: @everyone look <@123456789012345678> and <@&234567890123456789>")])
    payload = render.payload_for(msg).kwargs()
    assert "@everyone" not in payload["embed"].description.replace("@\u200beveryone", "")
    assert "<@123456789012345678>" not in payload["embed"].description
    assert "<@&234567890123456789>" not in payload["embed"].description
    mentions = payload["allowed_mentions"]
    assert mentions.everyone is False and mentions.roles is False and [u.id for u in mentions.users] == [2]


async def test_player_error_output_with_mentions_is_neutralised_in_the_thread(bot: Bot) -> None:
    bot.runner.respond = lambda job: {"verdict": "error", "message": "ValueError: @here ping",
                                      "error": {"type": "ValueError", "message": "@here ping <@&77>"},
                                      "passed_cases": 0, "total_cases": 2, "cases": []}
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    answer = await bot.say(ALICE, "```python\ndef solve(x):\n    raise ValueError('@here ping')\n```", bot.thread())
    await bot.settle()
    result = next(p for p in bot.world.in_(bot.thread()) if p.get("embed") is not None)
    assert "ping" in result["embed"].description
    assert "@here" not in result["embed"].description.replace("@\u200bhere", "")
    assert result["allowed_mentions"].everyone is False
    answer.add_reaction.assert_awaited_with(NOT_PASSED)
