"""The Discord adapter driven at discord.py's boundary.

The client, command tree, `/quiz` group, views and modal are the real discord.py objects; the
things Discord's servers would hand us (members, channels, threads, messages, interactions)
are test doubles specced from the real discord.py classes, so a call the adapter makes on
them must exist with that signature in discord.py.
"""
from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock, create_autospec

import discord
import pytest

from bot.config import DiscordConfig
from bot.core import Block, CoreSettings, FakeClock, Message, RoleRules, RunnerPool
from bot.core.service import QuizService
from bot.platforms import discord_render as render
from bot.platforms.discord_app import (
    FAILURE_TEXT,
    NOT_PASSED,
    PASSED,
    RECEIVED,
    UNGRADED_MARK,
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
        # side effects on the specced methods, so a call discord.py would refuse fails here too
        ch.send.side_effect = lambda content=None, **kw: self._posted(ch, {"content": content, **kw})
        return ch

    def _posted(self, where: Any, kw: dict[str, Any]) -> Any:
        msg = create_autospec(discord.Message, instance=True)
        msg.id = next(_ids)
        msg.create_thread.side_effect = lambda **k: self._thread(msg, k)
        self.posts.append({"where": where, "message": msg, **kw})
        return msg

    def _thread(self, parent_msg: Any, kw: dict[str, Any]) -> Any:
        th = create_autospec(discord.Thread, instance=True)
        th.id, th.name, th.parent, th.guild, th.owner_id = parent_msg.id, kw["name"], self.channel, self.guild, BOT_ID
        th.parent_id = self.channel.id
        th.send.side_effect = lambda content=None, **k: self._posted(th, {"content": content, **k})
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
        if used["done"]:  # Discord takes one response per interaction; discord.py raises this
            raise discord.InteractionResponded(inter)
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


async def submit_modal(modal: AnswerModal, inter: Any, value: str) -> None:
    """What discord.py does with a modal submission: fill the inputs, run on_submit (on_error
    when it raises)."""
    await modal._scheduled_task(inter, [{"type": 18, "component": {"type": 4, "custom_id": "quiz:form:answer",
                                                                    "value": value}}], {})


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
    alice_msg.remove_reaction.assert_awaited_once_with(RECEIVED, bot.adapter.client.user)
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


async def test_attachments_outside_an_open_round_are_not_downloaded(bot: Bot) -> None:
    """Every .txt shared anywhere in the server reaches on_message: only a channel with a round
    to answer is worth the download."""
    other = bot.world.text_channel(2001, "general")
    att = create_autospec(discord.Attachment, instance=True)
    att.filename, att.size = "notes.txt", 60
    att.read = AsyncMock(return_value=b"def solve(x):\n    return x * 2\n")
    msg = await bot.say(ALICE, "", other, attachments=[att])
    await bot.slash(MOD, "enable")
    await bot.say(ALICE, "", bot.world.channel, attachments=[att])  # quiz channel, no round open
    att.read.assert_not_awaited()
    msg.add_reaction.assert_not_awaited()
    msg.reply.assert_not_awaited()
    assert await count(bot, "answers") == 0


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


async def test_an_answer_the_runner_never_grades_is_marked_apart_from_wrong(bot: Bot) -> None:
    """The runner fails on it every time: after the retries the player hears it was not graded,
    privately for a form answer, and the thread answer's mark is a warning, not a red cross."""
    bot.runner.respond = lambda job: {"verdict": "internal", "message": "worker crashed"}
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    answer = await bot.say(ALICE, RIGHT, bot.thread())
    form = await bot.slash(BOB, "answer")
    submit = interaction(BOB, bot.thread())
    await submit_modal(form.response.send_modal.call_args.args[0], submit, WRONG_FORM)
    for _ in range(8):
        await bot.settle()
        bot.svc.clock.advance(timedelta(seconds=6))
    answer.add_reaction.assert_awaited_with(UNGRADED_MARK)
    answer.remove_reaction.assert_awaited_once_with(RECEIVED, bot.adapter.client.user)
    assert NOT_PASSED not in [c.args[0] for c in answer.add_reaction.await_args_list]
    notes = [p for p in bot.world.in_(bot.thread()) if p.get("embed") is not None
             and "could not be graded" in p["embed"].title]
    assert len(notes) == 2 and "<@2>" in (notes[0].get("content") or "")
    private = submit.followup.send.call_args
    assert private.kwargs["ephemeral"] is True and "not counted against you" in sent_text(private)
    assert await count(bot, "scores") == 0


# ------------------------------------------------------------------------------------ every interaction is answered

async def test_a_blank_answer_option_opens_the_form(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    inter = await bot.slash(ALICE, "answer", text="   ")
    assert isinstance(inter.response.send_modal.call_args.args[0], AnswerModal)
    assert await count(bot, "answers") == 0


async def test_a_failing_command_still_gets_a_private_reply(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(bot.svc, "command", broken)
    fast = await bot.slash(ALICE, "leaderboard", period="week")
    call = fast.response.send_message.call_args
    assert sent_text(call).strip() == FAILURE_TEXT and call.kwargs["ephemeral"] is True

    async def slow_then_broken(*_a: Any, **_k: Any) -> Any:
        await asyncio.sleep(0.05)
        raise RuntimeError("database is locked")

    monkeypatch.setattr(bot.svc, "command", slow_then_broken)
    bot.adapter.defer_after_s = 0.0
    slow = await bot.slash(ALICE, "leaderboard", period="week")
    slow.response.defer.assert_awaited_once()
    assert sent_text(slow.followup.send.call_args).strip() == FAILURE_TEXT


async def test_a_failing_modal_submission_is_answered(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    form = await bot.slash(ALICE, "answer")
    modal = form.response.send_modal.call_args.args[0]

    async def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(bot.svc, "submit", broken)
    submit = interaction(ALICE, bot.thread())
    await submit_modal(modal, submit, RIGHT)
    call = submit.response.send_message.call_args
    assert sent_text(call).strip() == FAILURE_TEXT and call.kwargs["ephemeral"] is True


async def test_a_slow_modal_answer_defers_then_acks_and_grades_privately(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    form = await bot.slash(ALICE, "answer")
    modal = form.response.send_modal.call_args.args[0]
    bot.adapter.defer_after_s = 0.0  # the core is slower than Discord's 3 s would allow
    submit = interaction(ALICE, bot.thread())
    await submit_modal(modal, submit, "def solve(x):\n    return x * 2\n")
    submit.response.defer.assert_awaited_once_with(ephemeral=True, thinking=True)
    submit.response.send_message.assert_not_awaited()
    ack = submit.followup.send.call_args
    assert "received" in sent_text(ack) and ack.kwargs["ephemeral"] is True
    await bot.settle()
    result = submit.followup.send.call_args  # the verdict's details on the same interaction
    assert "passed" in sent_text(result) and result.kwargs["ephemeral"] is True
    assert submit.followup.send.await_count == 2


async def test_a_one_line_slash_answer_gets_its_details_privately(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="q1")
    inter = await bot.slash(ALICE, "answer", text="A")
    assert inter.response.send_message.call_args.kwargs["ephemeral"] is True
    await bot.settle()
    private = inter.followup.send.call_args
    assert private.kwargs["ephemeral"] is True and "answer #1" in sent_text(private)
    public = [p for p in bot.world.in_(bot.thread()) if "<@2>" in (p.get("content") or "")]
    assert len(public) == 1 and public[0]["embed"].description is None  # the verdict line only


async def test_an_answer_in_a_thread_whose_parent_is_not_cached_counts(bot: Bot) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    thread = bot.thread()
    thread.parent = None  # Thread.parent looks the parent up in the cache; parent_id is always there
    assert where_of(thread).channel == str(CHANNEL_ID)
    msg = await bot.say(ALICE, RIGHT, thread)
    msg.add_reaction.assert_awaited_with(RECEIVED)
    assert await count(bot, "answers") == 1


async def test_an_answer_the_core_fails_on_gets_a_reply(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")

    async def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(bot.svc, "message", broken)
    answer = await bot.say(ALICE, RIGHT, bot.world.channel)
    assert FAILURE_TEXT in sent_text(answer.reply.call_args)
    assert answer.reply.call_args.kwargs["mention_author"] is False
    chatter = await bot.say(BOB, "good morning", bot.world.channel)
    chatter.reply.assert_not_awaited()  # not an answer: no error under every message


async def test_autocomplete_is_wired_to_the_commands(bot: Bot) -> None:
    for command, option, current, expected in (("post", "item", "c", "c1"), ("bank", "query", "c", "c1"),
                                               ("week", "topic", "", "1")):
        inter = interaction(MOD, bot.world.channel)
        cmd = bot.adapter.group.get_command(command)
        await cmd._invoke_autocomplete(inter, option, SimpleNamespace(**{option: current}))  # type: ignore[union-attr]
        choices = inter.response.autocomplete.call_args.args[0]
        assert expected in {c.value for c in choices} and len(choices) <= 25
        assert all(len(c.name) <= render.CHOICE_NAME_MAX for c in choices)


# ------------------------------------------------------------------------------------ more limits

def test_components_and_footers_stay_within_discord_limits() -> None:
    options = [{"key": f"K{i}" + "k" * 120, "text": "t" * 300} for i in range(30)]
    select = render.round_view(7, "choice", options, multiple=True).children[0]
    assert isinstance(select, discord.ui.Select)
    assert len(select.options) == 25 and select.max_values <= len(select.options)
    assert all(len(o.label) <= render.SELECT_LABEL_MAX and len(o.description or "") <= 100 for o in select.options)
    buttons = render.round_view(7, "choice", options, multiple=False).children
    assert len(buttons) == 25 and all(len(b.label or "") <= render.BUTTON_LABEL_MAX for b in buttons)

    msg = Message(kind="round_open", title="Q", blocks=[Block("x" * 5000)],
                  data={"kind": "code", "difficulty": 2, "item_id": "i" * 3000})
    emb = render.embed_for(msg)
    assert len(emb.footer.text) <= 2048 and len(emb) <= render.EMBED_TOTAL_MAX


def test_the_answer_modal_stays_within_discord_limits() -> None:
    form = Message(kind="form", title="A very long item title " * 10, data={
        "round_id": 3, "kind": "code", "starter": "def solve(x):\n    ...\n", "entrypoint": "solve_" + "x" * 200,
        "max_chars": 20_000})
    modal = AnswerModal(MagicMock(), form)
    assert len(modal.title) <= render.MODAL_TITLE_MAX
    assert modal.answer.max_length == render.MODAL_INPUT_MAX
    label = modal.children[0]
    assert isinstance(label, discord.ui.Label) and len(label.description or "") <= 100
    assert modal.to_dict()  # serialisable as discord.py would send it


async def test_a_channel_the_bot_may_not_post_in_does_not_hold_up_the_others(bot: Bot) -> None:
    world = bot.world
    locked = world.text_channel(2001, "locked")
    world.channels[locked.id] = locked
    forbidden = discord.Forbidden(MagicMock(status=403, reason="Forbidden"), {"code": 50013,
                                                                            "message": "Missing Permissions"})
    locked.send.side_effect = forbidden
    await bot.slash(MOD, "enable", channel=locked)
    await bot.slash(MOD, "post", channel=locked, item="q1")  # its round post is refused by Discord
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    # rounds are numbered per channel, by posted rounds: this channel's first is #1
    assert [p["embed"].title for p in world.in_(world.channel)] == ["Question of the day #1"]
    assert await bot.svc.store.outbox.pending() == []
    # a passing outage is not dropped: the core keeps the message and posts it on the next pass
    world.channel.send.side_effect = discord.DiscordServerError(MagicMock(status=503, reason="Unavailable"), "")
    await bot.slash(MOD, "close")
    assert len(await bot.svc.store.outbox.pending()) == 1
    world.channel.send.side_effect = lambda content=None, **kw: world._posted(world.channel, {"content": content, **kw})
    await bot.svc.deliver()
    assert world.in_(world.channel)[-1]["embed"].title.startswith("Round #1 closed")


# ------------------------------------------------------------------------------------ learning loop

async def test_hints_and_named_mistakes_reach_the_player_privately(bot: Bot) -> None:
    """`/quiz hint` answers on the interaction, ephemeral; a wrong answer that is a known mistake
    carries that mistake's hint in its result."""
    await bot.slash(MOD, "enable")
    await bot.slash(MOD, "post", item="c1")
    assert "Stuck? `/quiz hint`" in bot.world.in_(bot.world.channel)[0]["embed"].description
    thread = bot.thread()
    preview = await bot.slash(ALICE, "hint")
    call = preview.response.send_message.call_args
    assert call.kwargs["ephemeral"] is True and "Hint 1 costs 20% of this round's points" in sent_text(call)
    shown = await bot.slash(ALICE, "hint", reveal=True)
    call = shown.response.send_message.call_args
    assert call.kwargs["ephemeral"] is True and "Look at what the example's output" in sent_text(call)
    assert "Hint 1 of 2" in sent_text(call)
    assert await count(bot, "hints") == 1

    await bot.say(BOB, "```python\n" + WRONG_FORM + "```", thread)
    await bot.settle()
    result = next(p for p in bot.world.in_(thread) if "<@3>" in (p.get("content") or ""))
    assert "This looks like a known mistake: You returned the input unchanged" in result["embed"].description


async def test_every_core_command_has_a_slash_command(bot: Bot) -> None:
    """A command the core adds must be reachable on Discord too (Slack's `/quiz` takes any text)."""
    from bot.core.commands import HELP

    names = {c.name for c in bot.adapter.group.commands}
    assert set(HELP) <= names, sorted(set(HELP) - names)


async def test_practice_is_ephemeral_with_its_own_answer_button_and_private_results(bot: Bot) -> None:
    """`/quiz practice` answers privately with the question and its Answer button; the answer
    goes through the modal; its result comes back on that interaction and the close (the
    explanation) as a direct message: nothing reaches the channel."""
    user = create_autospec(discord.User, instance=True)
    dms: list[dict[str, Any]] = []
    user.send.side_effect = lambda content=None, **kw: dms.append({"content": content, **kw})
    bot.adapter.client.get_user = lambda uid: user if uid == ALICE.id else None  # type: ignore[method-assign]
    await bot.slash(MOD, "enable")
    before = len(bot.world.posts)
    q = await bot.slash(ALICE, "practice", scope="c2")
    call = q.response.send_message.call_args
    assert call.kwargs["ephemeral"] is True and call.kwargs["embed"].title.startswith("Practice #1")
    ids = [c.custom_id for c in call.kwargs["view"].children]
    assert len(ids) == 1  # the Answer button, carrying the private round
    click = interaction(ALICE, bot.world.channel, data={"custom_id": ids[0], "component_type": 2})
    await bot.adapter.on_component(click)
    modal = click.response.send_modal.call_args.args[0]
    submit = interaction(ALICE, bot.world.channel)
    await submit_modal(modal, submit, "def solve(x):\n    return x * 2  # PASS\n")
    await bot.settle()
    followed = submit.followup.send.call_args
    assert followed.kwargs["ephemeral"] is True and "passed" in sent_text(followed).lower()
    assert len(dms) == 1 and "Solved" in dms[0]["embed"].description
    assert len(bot.world.posts) == before  # nothing in the channel
    # another player clicking Alice's button gets the core's refusal, privately
    other = interaction(BOB, bot.world.channel, data={"custom_id": ids[0], "component_type": 2})
    await bot.adapter.on_component(other)
    assert "no open practice question" in sent_text(other.response.send_message.call_args)
    board = await bot.slash(BOB, "leaderboard", period="practice")
    assert "Alice" in sent_text(board.response.send_message.call_args)
    review = await bot.slash(ALICE, "review")
    assert "Nothing to review today" in sent_text(review.response.send_message.call_args)


async def test_a_digest_posts_itself_to_the_channel_and_a_managers_direct_messages(bot: Bot) -> None:
    user = create_autospec(discord.User, instance=True)
    dms: list[dict[str, Any]] = []
    user.send.side_effect = lambda content=None, **kw: dms.append({"content": content, **kw})
    bot.adapter.client.get_user = lambda uid: user if uid == MOD.id else None  # type: ignore[method-assign]
    await bot.slash(MOD, "enable")
    said = await bot.slash(MOD, "digest", settings="channel on dm on 10:00 mon")
    assert "you among them" in sent_text(said.response.send_message.call_args)
    await bot.slash(MOD, "post", item="c1")
    await bot.say(ALICE, RIGHT, bot.thread())
    await bot.settle()
    bot.svc.clock.advance(timedelta(days=7, hours=4))  # Monday 10:00 UTC
    await bot.settle()
    summaries = [p for p in bot.world.in_(bot.world.channel) if p.get("embed") is not None
                 and "summary (posted automatically)" in p["embed"].title]
    assert len(summaries) == 1 and summaries[0]["files"][0].filename.endswith(".png")
    assert len(dms) == 1 and "summary (posted automatically)" in dms[0]["embed"].title
    assert dms[0]["files"][0].filename.endswith(".png")
