"""The schedule keeps its word: a round is never closed before the end it announced, a
moderator's post on a posting day is that day's round, skips and "next round" agree, topic
weeks do not overlap, daylight-saving changes, a bot that was down (across the posting time,
across a round's end, across a whole day, across local midnight), and `:quit` with answers
still being graded. Through the core and the console with a fake clock."""
from __future__ import annotations

import asyncio
import io
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.platforms.console import run_console

from .conftest import ALICE, BOB, MOD, PASS
from .helpers import FakeRunner, MiniBank, choice_item, code_item


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


async def console(tmp_path: Path, script: str, *args: str, runner: FakeRunner | None = None,
                  stdin: io.StringIO | None = None) -> str:
    out = io.StringIO()
    bank = MiniBank.of(code_item("c1", difficulty=2), code_item("c2", difficulty=1), choice_item("q1"))
    rc = await run_console(["--db", str(tmp_path / "q.sqlite3"), *args], stdin=stdin or io.StringIO(script),
                           stdout=out, bank=bank, runner_client=runner or FakeRunner())
    assert rc == 0, out.getvalue()
    return out.getvalue()


async def rounds(h) -> list[tuple]:  # noqa: ANN001
    return [tuple(r) for r in await h.svc.db.fetchall(
        "SELECT number, local_date, scheduled, status, reason, opened_at, closes_at, closed_at FROM rounds"
        " ORDER BY id")]


# ---------------------------------------------------------------------------------- manual rounds

async def test_a_manual_post_is_the_days_round_and_no_schedule_change_closes_it(tmp_path):
    # Tue 24 Nov 2026, 08:00 UTC; the console's default schedule: 09:00 UTC mon-fri, 8 hours
    text = await console(tmp_path, "/quiz post c1\n:advance 1h\n/quiz schedule 07:30\n/quiz schedule\n"
                                   "/quiz schedule 09:30 Europe/Berlin\n:advance 7h\n",
                         "--start", "2026-11-24T08:00+00:00", "--as", "mod")
    before_close, _, after_close = text.partition("Round #1 closed")
    assert "Question of the day #2" not in text
    assert "[console] now 2026-11-24T16:00" in after_close
    assert "Open until Tue 16:00 (UTC)" in before_close
    assert "It is the scheduled round of Tue 24 Nov: no other round is posted that day." in before_close
    assert "[console] now 2026-11-24T09:00" in before_close  # 09:00 came and went: nothing closed or posted
    assert ("Round #1 stays open until Tue 24 Nov 16:00 (UTC) as announced; the new schedule applies from the "
            "next round on. Next round: Wed 25 Nov 07:30 (UTC).") in before_close
    assert "Round #1 is open until Tue 24 Nov 16:00 (UTC).\nNext round: Wed 25 Nov 07:30 (UTC)." in before_close
    assert "Next round: Wed 25 Nov 09:30 (Europe/Berlin)." in before_close
    # it closes at the end it announced (16:00 UTC), and says when the next one comes
    assert "[console] now 2026-11-24T16:00" in after_close
    assert "Next round: Wed 25 Nov 09:30 (Europe/Berlin)." in after_close


async def test_the_days_round_waits_for_a_manual_round_and_keeps_its_window(make):
    h = await make(start=at(2026, 11, 23, 20, 0))  # Monday 20:00 UTC
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC daily 16h")
    out = await h.cmd(MOD, "post c1-1")  # open for 16 hours: until Tuesday 12:00
    await h.answer(ALICE, PASS)
    h.clock.set(at(2026, 11, 24, 9, 0))
    await h.svc.settle()
    assert len(h.kinds("round_open")) == 1 and not h.kinds("round_close")
    assert "until Tue 24 Nov 12:00 (UTC)" in out[0].text
    assert ("Next round: Tue 24 Nov 12:00 (UTC), when round #1 closes (scheduled for 09:00; a round is never "
            "closed early).") in out[0].text
    player = await h.answer(BOB, PASS)
    assert player[0].kind == "ack"  # Monday's round still takes answers, as it said
    h.clock.set(at(2026, 11, 24, 12, 0))
    await h.svc.settle()
    close = h.kinds("round_close")[-1]
    assert close.title == "Round #1 closed" and "Tue 24 Nov's, posted now (scheduled for 09:00" in close.text
    opened = h.kinds("round_open")[-1]
    assert opened.title == "Question of the day #2"
    assert "Open until Wed 01:00 (UTC)" in opened.text and "Scheduled for 09:00 and posted late" in opened.text


async def test_a_round_that_outlasts_a_whole_window_says_that_day_is_missed(make):
    h = await make(start=at(2026, 11, 23, 10, 0))  # Monday 10:00 UTC
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC mon-fri 2h")
    await h.cmd(MOD, "schedule 7d")  # a moderator's round now stays open a week
    out = await h.cmd(MOD, "post c1-1")  # open until next Monday 10:00
    h.clock.set(at(2026, 11, 25, 10, 0))  # Tuesday's window (until Wednesday 09:00) went by
    await h.svc.settle()
    notice = [m for m in h.sent if m.kind == "notice"]
    assert len(notice) == 1 and ("No round on Tue 24 Nov (window 09:00-Wed 09:00 UTC): round #1 was open "
                                 "through its whole window and keeps its announced end.") in notice[0].text
    assert ("While it is open, the scheduled rounds of Tue 24 Nov, Wed 25 Nov, Thu 26 Nov, Fri 27 Nov are not "
            "posted") in out[0].text
    assert "Next round: Mon 30 Nov 10:00 (UTC), when round #1 closes" in out[0].text
    assert not h.kinds("round_close")


# ---------------------------------------------------------------------------------- skip and next

async def test_skip_and_the_next_round_agree(make):
    h = await make(start=at(2026, 11, 24, 6, 0))  # Tuesday 07:00 in Berlin
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    out = await h.cmd(MOD, "skip")
    assert "Tue 24 Nov 09:00 (Europe/Berlin) will not be posted. Next round: Wed 25 Nov 09:00" in out[0].text
    assert "Next round: Wed 25 Nov 09:00 (Europe/Berlin)" in (await h.cmd(ALICE, "schedule"))[0].text
    out = await h.cmd(MOD, "skip")  # a second skip skips the one after
    assert "Wed 25 Nov 09:00 (Europe/Berlin) will not be posted. Next round: Thu 26 Nov 09:00" in out[0].text
    out = await h.cmd(MOD, "skip 2026-11-27")
    assert "Fri 27 Nov 09:00 (Europe/Berlin) will not be posted. Next round: Thu 26 Nov 09:00" in out[0].text
    assert "is already skipped" in (await h.cmd(MOD, "skip 2026-11-27"))[0].text
    assert "not a posting day" in (await h.cmd(MOD, "skip 2026-11-28"))[0].text
    assert "is over" in (await h.cmd(MOD, "skip 2026-11-23"))[0].text
    assert "skip [next|YYYY-MM-DD]" in (await h.cmd(MOD, "help"))[0].text
    player = await h.answer(ALICE, PASS)
    assert "The next one opens Thu 26 Nov 09:00 (Europe/Berlin)" in player[0].text
    # the days go by: only Thursday and Monday post, numbered without a gap
    h.clock.set(at(2026, 11, 24, 8, 0))
    for _ in range(6):  # Wednesday to Monday
        h.clock.advance(timedelta(days=1))
        await h.svc.settle()
    assert [m.title for m in h.kinds("round_open")] == ["Question of the day #1", "Question of the day #2"]
    assert [m.data["closes_at"][:10] for m in h.kinds("round_open")] == ["2026-11-26", "2026-11-30"]
    assert "Next round: Mon 30 Nov 09:00" in h.kinds("round_close")[0].text  # Thursday's close tells it


async def test_skip_next_while_a_round_is_open(make):
    h = await make(start=at(2026, 11, 24, 8, 0))
    await h.cmd(MOD, "enable")
    h.clock.set(at(2026, 11, 24, 9, 0))
    await h.svc.settle()  # Tuesday 09:00 UTC round posted by the scheduler
    assert len(h.kinds("round_open")) == 1
    out = await h.cmd(MOD, "skip next")
    assert "Wed 25 Nov 09:00 (UTC) will not be posted. Next round: Thu 26 Nov 09:00 (UTC)." in out[0].text
    assert not h.kinds("round_close")  # the open round is left alone


# ---------------------------------------------------------------------------------- topic weeks

async def test_topic_weeks_do_not_overlap_nor_lie_in_the_past(make):
    h = await make(start=at(2026, 11, 24, 8, 0))
    await h.cmd(MOD, "enable")
    ok = await h.cmd(MOD, "week add 2.1 this Indexing")
    assert ok[0].kind == "info"
    clash = await h.cmd(MOD, "week add 1 this Autograd")
    assert clash[0].kind == "error" and "#1 Indexing (2026-11-23 to 2026-11-29)" in clash[0].text
    assert "week cancel 1" in clash[0].text
    past = await h.cmd(MOD, "week add 1 2026-11-02 2026-11-08")
    assert past[0].kind == "error" and "wholly in the past" in past[0].text
    assert (await h.cmd(MOD, "week add 1 next Autograd"))[0].kind == "info"
    listed = (await h.cmd(ALICE, "week list"))[0].text
    assert listed.count("(running)") == 1 and "Indexing  (running)" in listed
    board = (await h.cmd(ALICE, "leaderboard topic"))[0]
    assert "Topic week: Indexing" in board.text


# ---------------------------------------------------------------------------------- the bot was down

async def test_bot_down_across_posting_time_posts_late_inside_the_window(make):
    h = await make(start=at(2026, 11, 24, 6, 0))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    await h.svc.settle()
    h.clock.set(at(2026, 11, 24, 12, 0))  # 13:00 Berlin: the bot comes back four hours late
    h = await h.restart()
    await h.svc.settle()
    opened = h.kinds("round_open")
    assert len(opened) == 1 and "Open until Tue 17:00 (Europe/Berlin)" in opened[0].text
    assert "Scheduled for 09:00 and posted late; it keeps the end of its window." in opened[0].text
    assert not [m for m in h.sent if m.kind == "notice"]  # not missed


async def test_a_round_whose_end_passes_while_the_bot_is_down_closes_at_its_end(make):
    h = await make(start=at(2026, 11, 24, 6, 0))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    h.clock.set(at(2026, 11, 24, 8, 0))
    await h.svc.settle()
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    h.clock.set(at(2026, 11, 25, 7, 0))  # down from Tuesday 09:00 until Wednesday 08:00 Berlin
    h = await h.restart()
    await h.svc.settle()
    close = h.kinds("round_close")
    assert len(close) == 1
    assert "It closed at Tue 17:00 as announced; the bot was offline then" in close[0].text
    assert "Next round: Wed 25 Nov 09:00 (Europe/Berlin)." in close[0].text
    rows = await rounds(h)
    assert rows[0][3] == "closed" and rows[0][7] == rows[0][6]  # closed_at is the announced end
    assert await h.points(ALICE) > 0
    assert not [m for m in h.sent if m.kind == "notice"]
    h.clock.set(at(2026, 11, 25, 8, 0))
    await h.svc.settle()
    assert h.kinds("round_open")[-1].title == "Question of the day #2"


async def test_a_day_missed_entirely_is_said_at_the_next_start(make):
    h = await make(start=at(2026, 11, 23, 6, 0))  # Monday
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    await h.svc.settle()
    h.clock.set(at(2026, 11, 25, 7, 0))  # back on Wednesday 08:00 Berlin
    h = await h.restart()
    await h.svc.settle()
    notes = [m for m in h.sent if m.kind == "notice"]
    assert len(notes) == 1 and notes[0].title == "Missed rounds"
    assert ("No round on Mon 23 Nov (window 09:00-17:00 Europe/Berlin): the bot was not running during its "
            "window.\nNo round on Tue 24 Nov") in notes[0].text
    h = await h.restart()
    await h.svc.settle()
    assert len([m for m in h.sent if m.kind == "notice"]) == 1  # said once
    h.clock.set(at(2026, 11, 25, 8, 0))
    await h.svc.settle()
    assert h.kinds("round_open")[-1].title == "Question of the day #1"
    assert "Next round: Thu 26 Nov 09:00" in (await h.cmd(ALICE, "schedule"))[0].text


async def test_a_window_across_local_midnight_is_posted_when_the_bot_is_back_at_0015(make):
    h = await make(start=at(2026, 11, 24, 18, 0))  # Tuesday 19:00 Berlin
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 23:30 Europe/Berlin daily 2h")
    await h.svc.settle()
    h.clock.set(at(2026, 11, 24, 23, 15))  # Wednesday 00:15 Berlin: Tuesday's window runs until 01:30
    h = await h.restart()
    await h.svc.settle()
    opened = h.kinds("round_open")
    assert len(opened) == 1 and "Open until Wed 01:30 (Europe/Berlin)" in opened[0].text
    assert not [m for m in h.sent if m.kind == "notice"]
    h.clock.set(at(2026, 11, 25, 0, 30))
    await h.svc.settle()
    assert len(h.kinds("round_close")) == 1 and len(h.kinds("round_open")) == 1


# ---------------------------------------------------------------------------------- daylight saving

async def test_daylight_saving_ends_in_berlin(make):
    # Sunday 25 October 2026: 03:00 CEST becomes 02:00 CET
    h = await make(start=at(2026, 10, 24, 18, 0))  # Saturday 20:00 CEST
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 23:30 Europe/Berlin daily 2h")
    schedule = (await h.cmd(ALICE, "schedule"))[0].text
    await h.svc.settle()
    h.clock.set(at(2026, 10, 24, 22, 15))  # down over the posting time; back on Sunday 00:15 CEST
    h = await h.restart()
    await h.svc.settle()
    first = h.kinds("round_open")
    assert len(first) == 1 and "Open until Sun 01:30 (Europe/Berlin)" in first[0].text
    assert "Next round: Sat 24 Oct 23:30 (Europe/Berlin)." in schedule
    h.clock.set(at(2026, 10, 25, 12, 0))
    await h.svc.settle()
    assert len(h.kinds("round_close")) == 1
    assert "Next round: Sun 25 Oct 23:30 (Europe/Berlin)." in (await h.cmd(ALICE, "schedule"))[0].text
    h.clock.set(at(2026, 10, 25, 22, 30))  # 23:30 CET: 25 hours after Saturday's posting time
    await h.svc.settle()
    rows = await rounds(h)
    assert [r[5][:16] for r in rows] == ["2026-10-24T22:15", "2026-10-25T22:30"]
    assert [r[6][:16] for r in rows] == ["2026-10-24T23:30", "2026-10-26T00:30"]
    assert "Open until Mon 01:30 (Europe/Berlin)" in h.kinds("round_open")[-1].text


async def test_daylight_saving_starts_in_berlin(make):
    # Sunday 29 March 2026: 02:00 CET becomes 03:00 CEST
    h = await make(start=at(2026, 3, 28, 20, 0))  # Saturday 21:00 CET
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 23:30 Europe/Berlin daily 2h")
    await h.svc.settle()
    h.clock.set(at(2026, 3, 28, 23, 15))  # Sunday 00:15 CET, inside Saturday's 23:30-01:30 window
    h = await h.restart()
    await h.svc.settle()
    assert len(h.kinds("round_open")) == 1 and "Open until Sun 01:30" in h.kinds("round_open")[0].text
    h.clock.set(at(2026, 3, 29, 12, 0))
    await h.svc.settle()
    assert "Next round: Sun 29 Mar 23:30 (Europe/Berlin)." in (await h.cmd(ALICE, "schedule"))[0].text
    h.clock.set(at(2026, 3, 29, 21, 30))  # 23:30 CEST: 23 hours after Saturday's posting time
    await h.svc.settle()
    rows = await rounds(h)
    assert [r[5][:16] for r in rows] == ["2026-03-28T23:15", "2026-03-29T21:30"]
    assert [r[6][:16] for r in rows] == ["2026-03-29T00:30", "2026-03-29T23:30"]


# ---------------------------------------------------------------------------------- :quit

class SlowTerminal(io.StringIO):
    """A terminal whose user types `:quit` only once the runner has the answer in hand."""

    def __init__(self, text: str, ready: threading.Event) -> None:
        super().__init__(text)
        self.ready = ready

    def isatty(self) -> bool:
        return True

    def readline(self, *a) -> str:  # noqa: ANN002
        line = super().readline(*a)
        if line.startswith(":quit"):
            self.ready.wait(5)
            time.sleep(0.05)
        return line


async def test_quit_with_answers_still_being_graded_says_so_and_how(tmp_path):
    gate = asyncio.Event()
    ready = threading.Event()
    runner = FakeRunner(gate=gate)
    original = runner.grade

    async def grade(job):  # noqa: ANN001, ANN202
        ready.set()
        return await original(job)

    runner.grade = grade  # type: ignore[method-assign]
    script = "/quiz post c1\nalice: ```python\ndef solve(x):\n    return x * 2\n```\n:quit\n"
    text = await console(tmp_path, script, "--start", "2026-11-24T08:00+00:00", "--wait", "no",
                         runner=runner, stdin=SlowTerminal(script, ready))
    assert ("[console] 1 answer was still being graded by the runner (it is up) and did not get a result before "
            "the bot stopped. They are kept in the database and graded the next time the bot runs with it") in text
    # and so they are
    again = await console(tmp_path, "/quiz leaderboard all\n", "--start", "2026-11-24T08:05+00:00")
    assert "alice, answer #1: passed" in again


async def test_days_while_the_quiz_was_off_are_not_missed_and_enable_twice_keeps_the_watch(make):
    h = await make(start=at(2026, 11, 23, 6, 0))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "disable")
    h.clock.set(at(2026, 11, 26, 12, 0))  # Thursday 12:00 UTC, inside Thursday's window
    out = await h.cmd(MOD, "enable")
    assert "Next round: Fri 27 Nov 09:00 (UTC)." in out[0].text  # the schedule starts at its next posting time
    await h.svc.settle()
    assert not [m for m in h.sent if m.kind == "notice"] and not h.kinds("round_open")
    h.clock.set(at(2026, 11, 27, 8, 0))
    await h.cmd(MOD, "enable")  # already on: the schedule's start does not move
    h.clock.set(at(2026, 11, 27, 9, 0))
    await h.svc.settle()
    assert h.kinds("round_open")[-1].title == "Question of the day #1"


async def test_an_old_database_numbers_its_rounds_by_posted_rounds(tmp_path):
    import shutil

    from bot.storage.db import open_database
    from bot.storage.migrations import MIGRATIONS_DIR

    old = tmp_path / "old"
    old.mkdir()
    for name in ("0001_initial.sql", "0002_hot_path_indexes.sql"):
        shutil.copy(MIGRATIONS_DIR / name, old)
    db = await open_database(tmp_path / "q.sqlite3", migrations_dir=old)
    t = "2026-11-23T09:00:00.000000+00:00"
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO channels (platform, workspace, channel, created_at) VALUES ('t','w','c',?)",
                           (t,))
        for d, item in (("2026-11-23", "a"), ("2026-11-24", None), ("2026-11-25", "b")):
            await conn.execute("INSERT INTO rounds (channel_id, item_id, local_date, scheduled, status, opened_at,"
                               " closes_at) VALUES (1, ?, ?, 1, ?, ?, ?)", (item, d, "closed" if item else "skipped",
                                                                           t, t))
    await db.close()
    db = await open_database(tmp_path / "q.sqlite3")
    try:
        rows = await db.fetchall("SELECT number, reason FROM rounds ORDER BY id")
        assert [tuple(r) for r in rows] == [(1, ""), (None, "skipped"), (2, "")]
    finally:
        await db.close()
