"""Practice and review through the core with the fake clock: private questions graded like the
daily round, scored on their own board, and failed questions coming back on a spaced schedule."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.core.practice import REVIEW_DAYS, next_review

from .conftest import ALICE, BOB, FAIL, MOD, PASS, make_harness, settings
from .helpers import MiniBank, code_item
from .test_rounds import to_posting


def bank() -> MiniBank:
    return MiniBank.of(*[code_item(f"c{ch}-{d}", chapter=ch, difficulty=d) for ch in (1, 2) for d in range(1, 4)])


def private(h: Any, kind: str) -> list[Any]:
    return [m for m in h.sent if m.kind == kind and m.data.get("private")]


async def practise(h: Any, who: Any, scope: str = "") -> Any:
    out = await h.cmd(who, f"practice {scope}".strip())
    assert len(out) == 1 and out[0].kind == "practice_open" and out[0].ephemeral, out[0].text
    return out[0]


async def test_practice_is_private_graded_and_on_its_own_board(make) -> None:
    h = await make(bank=bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    await to_posting(h)
    daily = h.kinds("round_open")[-1].data["item_id"]
    # the open round's item cannot be practised by name
    refused = await h.cmd(ALICE, f"practice {daily}")
    assert refused[0].kind == "error" and "open round's question" in refused[0].text
    q = await practise(h, ALICE)
    assert q.data["item_id"] != daily  # never the open round's question
    assert "/quiz practice answer" in q.text and q.title.startswith("Practice #1")
    again = await practise(h, ALICE)  # asking again shows the open one
    assert again.data["round_id"] == q.data["round_id"] and "This is your open question" in again.text

    ack = await h.cmd(ALICE, "practice answer " + FAIL)
    assert ack[0].kind == "ack"
    await h.svc.settle()
    await h.cmd(ALICE, "practice answer " + PASS)
    await h.svc.settle()
    results = private(h, "result")
    assert [m.data["verdict"] for m in results] == ["failed", "passed"]
    assert all(m.ephemeral and m.mention == ALICE.user_id and m.thread_ref is None for m in results)
    closed = private(h, "round_close")
    assert len(closed) == 1 and "Solved:" in closed[0].text and "practice board" in closed[0].text
    assert closed[0].mention == ALICE.user_id and "Because" in closed[0].text  # the explanation
    # a practice question is not the channel's round: nothing on its boards, its own board instead
    assert await h.board("week") == []
    practice_board = (await h.cmd(BOB, "leaderboard practice"))[0]
    difficulty = q.data["difficulty"]
    base = (10, 20, 30)[difficulty - 1]
    assert [(r["name"], r["points"], r["solved"]) for r in practice_board.data["rows"]] == [
        ("Alice", base * 0.9, 1)]  # one failed attempt first: -10%, and no first-solver bonus in private
    # the daily round is still open and answered in the channel as before
    await h.answer(BOB, PASS)
    await h.svc.settle()
    assert (await h.board("week"))[0][1] == "Bob"


async def test_practice_never_repeats_a_solved_item_until_the_scope_is_used_up(make) -> None:
    h = await make(bank=bank())
    await h.cmd(MOD, "enable")
    bad = await h.cmd(ALICE, "practice 9")
    assert bad[0].kind == "error" and "not a chapter, section or question id" in bad[0].text
    seen = []
    for _ in range(3):
        q = await practise(h, ALICE, "2")
        seen.append(q.data["item_id"])
        await h.cmd(ALICE, "practice answer " + PASS)
        await h.svc.settle()
    assert sorted(seen) == ["c2-1", "c2-2", "c2-3"]
    fourth = await practise(h, ALICE, "2")  # all solved: any of them again
    assert fourth.data["item_id"] in seen


async def test_another_player_cannot_answer_your_practice_question(make) -> None:
    h = await make(bank=bank())
    await h.cmd(MOD, "enable")
    q = await practise(h, ALICE)
    out = await h.svc.submit(BOB, h_where(), PASS, round_id=q.data["round_id"])
    assert out[0].kind == "error" and "no open practice question" in out[0].text
    out = await h.cmd(BOB, "practice answer " + PASS)
    assert out[0].kind == "error"
    assert await h.svc.db.fetchall("SELECT id FROM answers") == []


def h_where() -> Any:
    from .conftest import WHERE
    return WHERE


def test_review_intervals() -> None:
    from datetime import date
    d = date(2025, 1, 6)
    assert next_review(2, False, d) == (0, d + timedelta(days=1))  # a failure starts again
    assert next_review(0, True, d) == (1, d + timedelta(days=REVIEW_DAYS[1]))
    assert next_review(len(REVIEW_DAYS) - 1, True, d) is None  # learned


async def test_a_failed_round_comes_back_for_review_on_schedule(tmp_path: Path) -> None:
    from dataclasses import replace

    from bot.core.settings import LearningSettings
    h = await make_harness(tmp_path, bank=bank(), core=replace(settings(), learning=LearningSettings(review_per_day=1)))
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
        await to_posting(h)  # Monday
        first = h.kinds("round_open")[-1].data["item_id"]
        await h.answer(ALICE, FAIL)
        await h.svc.settle()
        nothing = (await h.cmd(ALICE, "review"))[0].text  # the round is still open: nothing scheduled yet
        assert "Nothing to review today" in nothing and "come back here after 1, 3, 7 and 21 days" in nothing
        h.clock.advance(timedelta(hours=9))  # the round closes unsolved
        await h.svc.settle()
        later = (await h.cmd(ALICE, "review"))[0].text
        assert "Nothing to review today. 1 question will come back, the next on Tue 07 Jan" in later
        await to_posting(h)  # Tuesday: it is due; Alice fails Tuesday's too
        second = h.kinds("round_open")[-1].data["item_id"]
        rv = await h.cmd(ALICE, "review")
        assert rv[0].kind == "practice_open" and rv[0].data["item_id"] == first and rv[0].data["mode"] == "review"
        await h.cmd(ALICE, "practice giveup")
        await h.svc.settle()
        gave_up = private(h, "round_close")[-1]
        assert "Not solved" in gave_up.text and "in 1 day" in gave_up.text
        await h.answer(ALICE, FAIL)
        h.clock.advance(timedelta(hours=9))
        await h.svc.settle()
        await to_posting(h)  # Wednesday: both are due, but one review a day
        rv = await h.cmd(ALICE, "review")
        assert rv[0].data["item_id"] in (first, second)
        await h.cmd(ALICE, "practice answer " + PASS)
        await h.svc.settle()
        solved = private(h, "round_close")[-1]
        assert "Solved" in solved.text and f"in {REVIEW_DAYS[1]} days" in solved.text
        capped = await h.cmd(ALICE, "review")
        assert "today's 1 review" in capped[0].text and "1 more is due" in capped[0].text
        # review points go to the practice board, not the channel's
        rows = (await h.cmd(ALICE, "leaderboard practice"))[0].data["rows"]
        assert rows and rows[0]["name"] == "Alice" and rows[0]["solved"] == 1
    finally:
        await h.svc.close()


async def test_a_practice_answer_survives_a_restart_and_is_scored_once(make) -> None:
    h = await make(bank=bank())
    await h.cmd(MOD, "enable")
    await practise(h, ALICE)
    await h.cmd(ALICE, "practice answer " + PASS)  # stored, not graded yet
    h2 = await h.restart()
    await h2.svc.settle()
    rows = (await h2.cmd(ALICE, "leaderboard practice"))[0].data["rows"]
    assert len(rows) == 1 and rows[0]["solved"] == 1 and rows[0]["attempts"] == 1
    assert len(private(h2, "result")) == 1


async def test_the_console_plays_a_practice_question(tmp_path: Path) -> None:
    import io

    from bot.platforms.console import run_console

    from .helpers import FakeRunner
    out = io.StringIO()
    script = ("alice: /quiz practice 1\n"
              "alice: /quiz practice\n"
              "alice: /quiz practice answer ```python\ndef solve(x):\n    return x * 2  # PASS\n```\n"
              "alice: /quiz leaderboard practice\n")
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00"],
                           stdin=io.StringIO(script), stdout=out, bank=bank(), runner_client=FakeRunner())
    assert rc == 0
    text = out.getvalue()
    assert "Practice #1" in text and "This is your open question" in text
    assert "alice, answer #1: passed" in text.lower() or "answer #1: passed" in text.lower()
    assert "Solved:" in text and "practice board" in text
    board = text[text.rindex("Practice (private questions"):]
    assert "alice" in board.lower()


async def test_the_console_week_review_freeze_and_digest(tmp_path: Path) -> None:
    """Through the console with the fake clock: a failed round comes back for review the next
    day, a missed round leaves the streak and shows the freeze used, and Monday's digest posts
    itself into the channel."""
    import io

    from bot.platforms.console import run_console

    from .helpers import FakeRunner
    out = io.StringIO()
    script = ("/quiz schedule 09:00 UTC mon-fri 8h\n"
              "/quiz digest channel on 10:00 mon\n"
              ":advance 3h\n"                          # Monday 09:00: the round opens
              "alice: ```python\ndef solve(x):\n    return x\n```\n"
              ":advance 1d\n"                          # it closed unsolved; Tuesday's is open
              "alice: /quiz review\n"
              "alice: /quiz practice answer ```python\ndef solve(x):\n    return x * 2  # PASS\n```\n"
              "alice: ```python\ndef solve(x):\n    return x * 2  # PASS\n```\n"
              ":advance 1d\n"                          # Wednesday: Alice misses it
              ":advance 1d\n"
              "alice: ```python\ndef solve(x):\n    return x * 2  # PASS\n```\n"
              "alice: /quiz me\n"
              ":advance 4d1h\n")                       # Monday 10:00: the digest
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), "--start", "2025-01-06T06:00+00:00"],
                           stdin=io.StringIO(script), stdout=out, bank=bank(), runner_client=FakeRunner())
    assert rc == 0
    text = out.getvalue()
    assert "Review #1" in text and "comes back for review in 3 days" in text
    assert "Streak: 2 in a row" in text and "streak freezes left this week: 0 of 1" in text
    digest = text[text.index("Weekly summary (posted automatically)"):]
    assert "2025-01-06 to 2025-01-12" in digest and "Mastery per section" in digest and "Practice: 1 player" in digest
