"""Permission refusals and every bad input get a clear reply and are never graded."""
from __future__ import annotations

from bot.core.answers import AnswerRejected, code_blocks, parse_answer, parse_choice
from bot.core.models import Actor, ChannelRef
from bot.core.settings import AnswerSettings

import pytest

from .conftest import ALICE, BOB, MANAGER, MOD, PASS, settings
from .helpers import choice_item, code_item, output_item

MOD_COMMANDS = ["enable", "disable", "schedule 10:00", "week add 1", "week cancel 1", "post", "skip", "close",
                "bank", "bank search x"]


async def test_players_are_refused_protected_commands(hb):
    for text in MOD_COMMANDS + ["summary", "export"]:
        out = await hb.cmd(ALICE, text)
        assert out[0].kind == "denied" and out[0].ephemeral, text
        assert "/quiz " + text.split()[0] in out[0].text
    # moderators are not managers, managers are not moderators
    assert (await hb.cmd(MOD, "summary"))[0].kind == "denied"
    assert (await hb.cmd(MANAGER, "post"))[0].kind == "denied"
    assert (await hb.cmd(MANAGER, "summary"))[0].kind == "summary"
    # platform roles and platform admins
    assert (await hb.cmd(Actor("test", "x", "X", roles=frozenset({"Quiz-Mod"})), "post"))[0].kind == "info"
    assert (await hb.cmd(Actor("test", "y", "Y", admin=True), "export"))[0].kind == "export"
    # nothing changed by the refused commands
    assert (await hb.svc.db.fetchone("SELECT COUNT(*) FROM topic_weeks"))[0] == 0


async def test_help_lists_what_the_actor_may_do(hb):
    player = (await hb.cmd(ALICE, "help"))[0].text
    mod = (await hb.cmd(MOD, "help"))[0].text
    assert "/quiz answer" in player and "/quiz post" not in player
    assert "/quiz post" in mod and "/quiz summary" not in mod
    assert (await hb.cmd(ALICE, ""))[0].kind == "help"


async def test_unknown_command(hb):
    out = await hb.cmd(ALICE, "leaderbord week")
    assert out[0].kind == "error" and "Unknown command" in out[0].text and "/quiz leaderboard" in out[0].text
    assert (await hb.cmd(ALICE, "leaderboard fortnight"))[0].kind == "error"
    assert (await hb.cmd(MANAGER, "summary year"))[0].kind == "error"


async def test_answer_without_open_round_or_channel(hb):
    out = await hb.answer(ALICE, PASS)
    assert out[0].kind == "error" and "no open round" in out[0].text and "next one opens Mon 06 Jan 09:00" in out[0].text
    other = ChannelRef("test", "ws", "C2", "other")
    out = await hb.answer(ALICE, PASS, where=other)
    assert "not enabled" in out[0].text
    assert (await hb.cmd(ALICE, "leaderboard", where=other))[0].kind == "error"
    assert await hb.svc.message(ALICE, other, PASS) == []  # the bot stays quiet where it is not enabled


async def test_closed_round_and_disabled_channel(hb):
    await hb.cmd(MOD, "post c1-1")
    await hb.cmd(MOD, "close")
    out = await hb.answer(ALICE, PASS)
    assert out[0].kind == "error" and "no open round" in out[0].text
    await hb.cmd(MOD, "post c1-2")
    out = await hb.cmd(MOD, "disable")
    assert "off" in out[0].text
    assert "not enabled" in (await hb.answer(ALICE, PASS))[0].text
    assert (await hb.cmd(MOD, "disable"))[0].kind == "error"
    await hb.cmd(MOD, "enable")
    assert (await hb.svc.db.fetchone("SELECT COUNT(*) FROM answers"))[0] == 0


async def test_empty_oversized_and_too_many_attempts(make):
    h = await make(core=settings(answers=AnswerSettings(max_chars=500, max_attempts=3)))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    assert "empty" in (await h.answer(ALICE, "   "))[0].text
    assert "empty" in (await h.answer(ALICE, "```python\n```"))[0].text
    out = await h.answer(ALICE, "```python\n" + "x = 1\n" * 200 + "```")
    assert out[0].kind == "error" and "limit is 500" in out[0].text
    for _ in range(3):
        assert (await h.answer(ALICE, PASS))[0].kind == "ack"
    assert "all 3 attempts" in (await h.answer(ALICE, PASS))[0].text
    assert (await h.svc.db.fetchone("SELECT COUNT(*) FROM answers"))[0] == 3
    # `/quiz answer` with nothing after it returns the form (what a modal shows)
    form = (await h.cmd(BOB, "answer"))[0]
    assert form.kind == "form" and form.data["starter"].startswith("def solve") and form.data["max_chars"] == 500


def test_code_block_parsing():
    text = "Here:\n```python\ndef f(x):\n    return x\n```\nand a helper\n```\ndef g():\n    pass\n```"
    assert code_blocks(text) == ["def f(x):\n    return x", "def g():\n    pass"]
    item = code_item("c")
    parsed = parse_answer(text, item, explicit=False)
    assert parsed.content == "def f(x):\n    return x\n\ndef g():\n    pass\n" and parsed.source == "fenced"
    assert parse_answer("```py\ndef solve(x): return x", item).content == "def solve(x): return x\n"  # unclosed
    assert parse_answer("def solve(x):\n    return x", item, explicit=True).source == "plain"
    # code right after the fence (Slack's text field, a quick Discord message) is code, not a language
    assert code_blocks("```def solve(x):\n    return x * 2```") == ["def solve(x):\n    return x * 2"]
    assert code_blocks("```x = 1```") == ["x = 1"]
    assert code_blocks("``` python \nx = 1\n```") == ["x = 1"]
    with pytest.raises(AnswerRejected, match="python block"):
        parse_answer("def solve(x): return x", item, explicit=False)
    out = output_item("o")
    assert parse_answer("`tensor([1, 2])`", out, explicit=False).content == "tensor([1, 2])"
    assert parse_answer("```\ntensor([1,\n        2])\n```", out).content == "tensor([1,\n        2])\n"
    assert parse_answer("tensor([1, 2])", out).content == "tensor([1, 2])"
    ch = choice_item("q")
    assert parse_choice("(a) and C", ("A", "B", "C")) == ["A", "C"]
    assert parse_answer("b", ch).content == "B"
    with pytest.raises(AnswerRejected, match="not one of the options"):
        parse_answer("e", ch)
