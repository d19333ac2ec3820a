"""Every near miss gets an answer (issue 14): wrong option keys, output typed the way players
read tensors, an unclosed fence in the console, typos and small wording slips."""
from __future__ import annotations

import io
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.core.answers import looks_like_answer
from bot.platforms.console import run_console

from .conftest import ALICE, BOB, FAIL, MANAGER, MOD, PASS, WHERE
from .helpers import FakeRunner, MiniBank, choice_item, code_item, output_item
from .test_discord import bot  # noqa: F401 - the Discord adapter fixture

KEYS = ("A", "B", "C", "D")


async def console(tmp_path: Path, script: str, *args: str, runner: FakeRunner | None = None,
                  stdin: io.StringIO | None = None) -> str:
    out = io.StringIO()
    bank = MiniBank.of(code_item("c1", difficulty=2), choice_item("q1"), output_item("o1"))
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00", *args],
                           stdin=stdin or io.StringIO(script), stdout=out, bank=bank,
                           runner_client=runner or FakeRunner())
    assert rc == 0
    return out.getvalue()


# ---------------------------------------------------------------- wrong option keys


def test_the_rule_reads_wrong_keys_as_answers_and_words_as_chatter() -> None:
    for text in ("F", "a, f", "(a) and (f)", "`e`", "b"):
        assert looks_like_answer(text, "choice", KEYS), text
    for text in ("ok", "I think b is right", "lol", "what does view do?", "2"):
        assert not looks_like_answer(text, "choice", KEYS), text
    # in the round's thread a bare number is a try at a key too
    assert looks_like_answer("2", "choice", KEYS, in_round_thread=True)
    assert not looks_like_answer("hmm, not sure", "choice", KEYS, in_round_thread=True)


async def test_wrong_option_key_in_chat_gets_the_same_reply_as_quiz_answer(tmp_path):
    text = await console(tmp_path, "/quiz post q1\nbob: F\nbob: a, f\nbob: no idea, sorry\nbob: /quiz answer F\n")
    assert text.count("[bot -> bob only] `f` is not one of the options (A, B, C)") == 3
    assert "no idea" not in text.split("Question of the day")[-1].replace("bob: no idea", "")
    assert "Answer #" not in text  # nothing was stored: a refused key costs no attempt


async def test_wrong_key_in_the_round_thread_and_chatter_elsewhere(hb):
    await hb.cmd(MOD, "post q1")
    thread = await hb.svc.message(BOB, WHERE, "2", in_round_thread=True)
    assert "`2` is not one of the options (A, B, C)" in thread[0].text
    assert await hb.svc.message(BOB, WHERE, "2") == []  # a number in the channel is chatter
    assert await hb.svc.message(BOB, WHERE, "that one is tricky", in_round_thread=True) == []
    assert "`f` is not one of the options" in (await hb.svc.message(BOB, WHERE, "f"))[0].text


# ---------------------------------------------------------------- output answers


class PaddedRunner(FakeRunner):
    """Prints like torch does: padded columns, rows wrapped over lines."""

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        if job["kind"] == "output":
            printed = "tensor([[ 0,  4,  8],\n        [12, 16, 20]])\ntorch.Size([2, 3])\n"
            return {"verdict": "passed", "stdout": printed, "message": ""}
        return await super().grade(job)


async def test_output_typed_as_players_read_it_passes(make):
    h = await make(runner=PaddedRunner())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post o1")
    await h.cmd(ALICE, "answer tensor([[0, 4, 8], [12, 16, 20]]) torch.Size([2, 3])")  # one line
    await h.cmd(BOB, "answer `tensor([[0,4,8],[12,16,20]])\ntorch.Size([2, 3])`")
    await h.cmd(MANAGER, "answer tensor([[0., 4., 8.], [12., 16., 20.]]) torch.Size([2, 3])")  # floats: wrong
    await h.svc.settle()
    verdicts = {m.data["player"]: m.data["verdict"] for m in h.kinds("result")}
    assert verdicts == {"Alice": "passed", "Bob": "passed", "Boss": "failed"}


# ---------------------------------------------------------------- the console's fences and prompt


async def test_unclosed_fence_quit_still_quits(tmp_path):
    text = await console(tmp_path, "/quiz post c1\nalice: ```python\ndef solve(x):\n:quit\n/quiz leaderboard\n")
    assert "alice's unclosed ``` block was not sent" in text
    assert "Leaderboard" not in text and "Answer #" not in text


async def test_unclosed_fence_cancel_and_end_of_input_are_said(tmp_path):
    text = await console(tmp_path, "/quiz post c1\nalice: ```python\ndef solve(x):\n:cancel\n/quiz leaderboard\n"
                                   "bob: ```python\ndef solve(x):\n    return x\n")
    assert "alice's unclosed ``` block was dropped" in text
    assert "Leaderboard: This week" in text  # the line after :cancel is a command again
    assert "bob's ``` block was never closed; sent as it is" in text
    assert "bob, answer #1" in text


class Terminal:
    """stdin and stdout of a terminal: what is typed is echoed into the output with its
    newline, and the typist pauses between lines (`readline` runs in a worker thread)."""

    def __init__(self, script: str, pause: float = 0.0) -> None:
        self.lines = io.StringIO(script)
        self.out = io.StringIO()
        self.pause = pause

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        if self.pause:
            time.sleep(self.pause)
        line = self.lines.readline()
        self.out.write(line)
        return line


async def in_terminal(tmp_path: Path, term: Terminal, *args: str, runner: FakeRunner | None = None) -> str:
    bank = MiniBank.of(code_item("c1", difficulty=2), choice_item("q1"), output_item("o1"))
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00", *args],
                           stdin=term, stdout=term.out, bank=bank,  # type: ignore[arg-type]
                           runner_client=runner or FakeRunner())
    assert rc == 0
    return term.out.getvalue()


async def test_interactive_prompts_continuation_and_prompt_after_results(tmp_path):
    script = "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n/quiz leaderboard\n"
    text = await in_terminal(tmp_path, Terminal(script), "--wait", "yes")
    # the block's lines were read under a continuation prompt
    assert "> alice: ```python\n... def solve(x):\n...     return x * 2\n... ```\n" in text
    assert "> [bot" not in text and "... [bot" not in text  # results never share a line with a prompt
    assert text.split("Leaderboard: This week")[1].endswith("\n> ")  # the prompt comes back after the results


async def test_interactive_results_that_arrive_later_go_above_the_prompt(tmp_path):
    script = "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n\n"
    text = await in_terminal(tmp_path, Terminal(script, pause=0.3), "--wait", "no",
                             runner=FakeRunner(delay=0.05))
    assert "alice, answer #1: passed" in text
    assert "> [bot" not in text
    # the result came while the prompt waited: the prompt was wiped, the result printed, the prompt shown again
    assert "\n> \r  \r[bot -> @alice] alice, answer #1: passed" in text
    assert text.split("alice, answer #1: passed")[1].split("\n> ")[0].count("[bot") == 0


# ---------------------------------------------------------------- words


async def test_quizz_typo_is_understood(tmp_path):
    text = await console(tmp_path, "/quizz help\n/quizleaderboard\n/qiuz me\n/frobnicate\n")
    assert "Unknown command `/quizz`. Did you mean `/quiz help`?" in text
    assert "Did you mean `/quiz leaderboard`?" in text
    assert "Unknown command `/qiuz`. Did you mean `/quiz me`?" in text
    assert "quiz commands start with `/quiz`" in text
    assert "/quiz z" not in text


async def test_round_close_counts_read_as_english(hb):
    await hb.cmd(MOD, "post c1-1")
    await hb.answer(ALICE, PASS)
    await hb.svc.settle()
    await hb.cmd(MOD, "close")
    text = hb.kinds("round_close")[-1].text
    assert "1 answer from 1 player, 1 solved" in text


async def test_card_without_a_solve_names_no_strength(hb):
    await hb.cmd(MOD, "post c2-1")
    await hb.answer(ALICE, FAIL)
    await hb.svc.settle()
    card = (await hb.cmd(ALICE, "me"))[0].text
    assert "Strongest" not in card and "0%" not in card.split("Streak")[1]
    await hb.cmd(MOD, "post c1-1")
    await hb.answer(ALICE, PASS)
    await hb.svc.settle()
    card = (await hb.cmd(ALICE, "me"))[0].text
    assert "Strongest: chapter 1: 100%" in card and "Weakest: chapter 2: 0%" in card


async def test_second_enable_says_already_enabled(hb):
    out = (await hb.cmd(MOD, "enable"))[0]
    assert out.title == "Quiz already enabled" and "already enabled" in out.text


async def test_leaderboard_readable_while_disabled(hb):
    await hb.cmd(MOD, "post c1-1")
    await hb.answer(ALICE, PASS)
    await hb.svc.settle()
    await hb.cmd(MOD, "disable")
    out = (await hb.cmd(BOB, "leaderboard all"))[0]
    assert out.kind == "leaderboard" and "Alice" in out.text and "quiz is off" in out.text
    assert (await hb.cmd(ALICE, "me"))[0].kind == "card"
    assert "not enabled" in (await hb.cmd(MOD, "post"))[0].text  # playing still needs the quiz on


async def test_top_players_leave_out_zero_points(hb):
    await hb.cmd(MOD, "post c1-1")
    await hb.answer(ALICE, PASS)
    await hb.answer(BOB, FAIL)
    await hb.svc.settle()
    text = (await hb.cmd(MANAGER, "summary week"))[0].text
    top = next(line for line in text.splitlines() if line.startswith("Top players"))
    assert "Alice" in top and "Bob" not in top
    hb.clock.advance(timedelta(days=7))
    await hb.svc.settle()
    assert "Top players" not in (await hb.cmd(MANAGER, "summary week"))[0].text


async def test_discord_reply_to_the_round_post_with_a_wrong_key_is_answered(bot):  # noqa: F811
    from unittest.mock import MagicMock

    from .test_discord import ALICE as D_ALICE
    from .test_discord import MOD as D_MOD
    from .test_discord import chat, sent_text

    await bot.slash(D_MOD, "enable")
    await bot.slash(D_MOD, "post", item="q1")
    post = bot.world.in_(bot.world.channel)[0]["message"]
    reply = chat(D_ALICE, bot.world.channel, "2")
    reply.reference = MagicMock(message_id=post.id)  # Discord's "reply" to the round's post
    await bot.adapter.on_message(reply)
    assert "`2` is not one of the options (A, B, C)" in sent_text(reply.reply.call_args)
    in_thread = await bot.say(D_ALICE, "a, f", bot.thread())
    assert "`f` is not one of the options (A, B, C)" in sent_text(in_thread.reply.call_args)
    chatter = await bot.say(D_ALICE, "2", bot.world.channel)  # a number in the channel: chatter
    chatter.reply.assert_not_awaited()
    assert (await bot.svc.db.fetchone("SELECT COUNT(*) FROM answers"))[0] == 0


async def test_the_players_card_counts_in_english(make):
    h = await make()
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "post c1-1")
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    card = (await h.cmd(ALICE, "me"))[0].text
    assert "Solved: 1 of 1 round played, 1 attempt" in card, card
