"""Scenarios through the core with a fake clock: a week of rounds, topic weeks, penalties,
streaks, ties, skips, schedules."""
from __future__ import annotations

from datetime import date, timedelta


from .conftest import ALICE, BOB, CAROL, FAIL, HALF, MOD, PASS
from .helpers import MiniBank, code_item


def code_bank() -> MiniBank:
    return MiniBank.of(*[code_item(f"c{ch}-{d}", chapter=ch, difficulty=d) for ch in (1, 2) for d in range(1, 6)])


async def to_posting(h, days: int = 0) -> None:
    """Move to 08:00 UTC (09:00 Berlin) `days` days later and tick."""
    now = h.clock.now()
    target = now.replace(hour=8, minute=0, second=0, microsecond=0) + timedelta(days=days)
    if target <= now:
        target += timedelta(days=1)
    h.clock.set(target)
    await h.svc.settle()


async def test_week_of_rounds_penalties_streaks_ties(make):
    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    await h.svc.settle()
    assert not h.kinds("round_open")  # 07:00 Berlin: not yet

    # Monday: difficulty 1 (base 10)
    await to_posting(h)
    opened = h.kinds("round_open")
    assert len(opened) == 1 and opened[0].data["difficulty"] == 1
    assert opened[0].title.startswith("Question of the day")
    await h.answer(ALICE, FAIL)
    await h.answer(ALICE, PASS)   # 10 - 10% = 9, first solver +5
    await h.answer(BOB, PASS)     # 10, second solver +3
    await h.answer(CAROL, HALF)   # 1 of 2 cases: 5
    await h.svc.settle()
    assert await h.points(ALICE, "round") == 14
    assert await h.points(BOB, "round") == 13
    assert await h.points(CAROL, "round") == 5
    results = h.kinds("result")
    assert len(results) == 4 and all(m.thread_ref == f"thread-{m.round_id}" for m in results)

    # the round closes at 17:00 Berlin with the reference and stats
    h.clock.advance(timedelta(hours=8))
    await h.svc.settle()
    closed = h.kinds("round_close")
    assert len(closed) == 1
    assert "Reference solution" in closed[0].text and "3 solved" not in closed[0].text
    assert closed[0].data["solvers"] == 2 and closed[0].data["first"] == "Alice"
    assert closed[0].data["answers"] == 4 and closed[0].data["players"] == 3

    # Tuesday: difficulty 2 (base 20), streaks start paying
    await to_posting(h)
    assert h.kinds("round_open")[-1].data["difficulty"] == 2
    await h.answer(BOB, PASS)     # 20 + 5 + streak 2 -> 27
    await h.answer(ALICE, PASS)   # 20 + 3 + 2 -> 25
    await h.svc.settle()

    # Wednesday: difficulty 3 (base 30)
    await to_posting(h)
    assert h.kinds("round_open")[-1].data["difficulty"] == 3
    await h.answer(CAROL, PASS)   # 30 + 5 -> 35
    for _ in range(2):
        await h.answer(ALICE, FAIL)
    await h.answer(ALICE, PASS)   # 30 - 20% = 24, +3, streak 3 -> +4: 31
    await h.svc.settle()

    assert await h.points(ALICE, "week") == 70
    board = await h.board("week")
    assert board == [(1, "Alice", 70), (2, "Bob", 40), (2, "Carol", 40)]  # a tie shares the rank
    me = (await h.cmd(ALICE, "me"))[0]
    assert me.data["streak"] == 3 and me.data["solved"] == 3 and me.data["attempts"] == 6
    assert "rank 1 of 3" in me.text and me.ephemeral
    bob = (await h.cmd(BOB, "me"))[0]
    assert bob.data["streak"] == 2  # Wednesday is still open: Bob still has time
    h.clock.advance(timedelta(hours=9))
    await h.svc.settle()
    bob = (await h.cmd(BOB, "me"))[0]
    # Bob missed Wednesday: the week's one streak freeze (the default) keeps his streak
    assert bob.data["streak"] == 2 and bob.data["best_streak"] == 2 and bob.data["freezes_left"] == 0
    assert "streak freezes left this week: 0 of 1" in bob.text

    # Thursday, Friday: difficulties 4 and 5; the weekend posts nothing
    await to_posting(h)
    await to_posting(h)
    assert [m.data["difficulty"] for m in h.kinds("round_open")] == [1, 2, 3, 4, 5]
    await to_posting(h)
    await to_posting(h)
    assert len(h.kinds("round_open")) == 5
    # all-time and month boards agree with the week's
    assert await h.board("all") == board
    assert await h.board("month") == board
    # no item repeated in the week
    items = [m.data["item_id"] for m in h.kinds("round_open")]
    assert len(set(items)) == 5


async def test_topic_week_restricts_picks_and_leaderboard(make):
    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC mon-fri 8h")
    out = await h.cmd(MOD, "week add 2 next Autograd week")
    assert out[0].kind == "info" and "2025-01-13 to 2025-01-19" in out[0].text and "Autograd week" in out[0].text
    listed = await h.cmd(ALICE, "week list")  # reading is open to players
    assert "Autograd week" in listed[0].text
    await h.cmd(MOD, "week add 1 this")
    await h.svc.settle()
    h.clock.set(h.clock.now().replace(hour=9))
    await h.svc.settle()
    first_week = h.kinds("round_open")[-1].data["item_id"]
    assert first_week == "c1-1"
    # next week: only chapter 2 items, ramping
    h.clock.advance(timedelta(days=7))
    for _ in range(5):
        await h.svc.settle()
        h.clock.advance(timedelta(days=1))
    topic_rounds = [m for m in h.kinds("round_open") if m.data["item_id"] != first_week][-5:]
    assert all(m.data["item_id"].startswith("c2-") for m in topic_rounds), [m.data["item_id"] for m in topic_rounds]
    assert [m.data["difficulty"] for m in topic_rounds] == [1, 2, 3, 4, 5]
    # cancel: a later week without topic picks from the whole bank again
    wid = (await h.svc.store.weeks.upcoming(1, date(2025, 1, 13)))[0].id
    assert (await h.cmd(ALICE, f"week cancel {wid}"))[0].kind == "denied"
    assert "cancelled" in (await h.cmd(MOD, f"week cancel {wid}"))[0].text
    assert (await h.cmd(MOD, "week add 9"))[0].kind == "error"  # no items in chapter 9


async def test_no_repeats_until_pool_exhausted(make):
    bank = MiniBank.of(*[code_item(f"c{i}", difficulty=2) for i in range(3)])
    h = await make(bank=bank)
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC daily 1h ramp=off")
    picks = []
    for _ in range(7):
        h.clock.set(h.clock.now().replace(hour=9) + timedelta(days=0 if not picks else 1))
        await h.svc.settle()
        picks.append(h.kinds("round_open")[-1].data["item_id"])
    assert len(set(picks[:3])) == 3 and len(set(picks[3:6])) == 3  # each cycle uses every item once


async def test_scheduled_round_is_posted_once(hb):
    hb.clock.set(hb.clock.now().replace(hour=8))
    await hb.svc.tick()
    await hb.svc.tick()
    # a second service instance on the same file ticking at the same time posts nothing more
    other = await hb.restart()
    await other.svc.tick()
    await other.svc.settle()
    assert len(other.kinds("round_open")) == 1
    rows = await other.svc.db.fetchall("SELECT COUNT(*) FROM rounds")
    assert rows[0][0] == 1


async def test_bot_down_at_posting_time_posts_later_same_window(hb):
    hb.clock.set(hb.clock.now().replace(hour=12))  # 13:00 Berlin, window 09:00-17:00
    await hb.svc.settle()
    rnd = hb.kinds("round_open")
    assert len(rnd) == 1 and "17:00" in rnd[0].text
    hb.clock.set(hb.clock.now().replace(hour=17))  # 18:00 Berlin: window over
    await hb.svc.settle()
    assert len(hb.kinds("round_close")) == 1


async def test_skip_open_round_voids_scores_and_skip_next_day(hb):
    await hb.cmd(MOD, "post c1-2")
    await hb.answer(ALICE, PASS)
    await hb.svc.settle()
    assert await hb.points(ALICE) == 25
    out = await hb.cmd(MOD, "skip")
    assert "skipped" in out[0].text
    assert await hb.points(ALICE) == 0
    assert "not scored" in hb.kinds("round_close")[-1].text
    # nothing open now: skip the next scheduled day. The hand-posted round (Monday 07:00 Berlin,
    # before 09:00) was Monday's round, so the next one is Tuesday's
    out = await hb.cmd(MOD, "skip")
    assert "Tue 07 Jan 09:00 (Europe/Berlin) will not be posted" in out[0].text
    hb.clock.set(hb.clock.now().replace(hour=8))
    await hb.svc.settle()
    assert len(hb.kinds("round_open")) == 1  # only the hand-posted one
    hb.clock.advance(timedelta(days=1))
    await hb.svc.settle()
    assert len(hb.kinds("round_open")) == 1  # Tuesday skipped
    hb.clock.advance(timedelta(days=1))
    await hb.svc.settle()
    assert len(hb.kinds("round_open")) == 2


async def test_manual_post_close_and_bank(hb):
    out = await hb.cmd(MOD, "post c2-3")
    assert out[0].kind == "info"
    await hb.svc.settle()
    assert hb.kinds("round_open")[-1].data["item_id"] == "c2-3"
    assert (await hb.cmd(MOD, "post nope"))[0].kind == "error"
    assert "c2-3" in (await hb.cmd(MOD, "post c2-e"))[0].text  # did-you-mean
    out = await hb.cmd(MOD, "post gpu1")
    assert out[0].kind == "error" and "cuda" in out[0].text
    # a new post closes the open round first
    await hb.cmd(MOD, "post c1-1")
    await hb.svc.settle()
    assert len(hb.kinds("round_close")) == 1
    out = await hb.cmd(MOD, "close")
    await hb.svc.settle()
    assert "closed" in out[0].text and len(hb.kinds("round_close")) == 2
    assert (await hb.cmd(MOD, "close"))[0].kind == "error"
    bank = await hb.cmd(MOD, "bank")
    assert "13 items" in bank[0].title and "chapter 1" in bank[0].text
    found = await hb.cmd(MOD, "bank search c2-3")
    assert "c2-3" in found[0].text
    preview = await hb.cmd(MOD, "bank show c2-3")
    assert preview[0].ephemeral and "Reference solution" in preview[0].text
    assert (await hb.cmd(MOD, "bank show zzz"))[0].kind == "error"


async def test_cuda_items_only_with_gpu_runner(make):
    from .helpers import FakeRunner

    bank = MiniBank.of(code_item("gpu", requires="cuda"), code_item("cpu"))
    h = await make(bank=bank)
    await h.cmd(MOD, "enable")
    for _ in range(4):
        await h.cmd(MOD, "post")
    await h.svc.settle()
    assert {m.data["item_id"] for m in h.kinds("round_open")} == {"cpu"}
    h2 = await make("gpu", bank=bank, runner=FakeRunner(cuda=True))
    await h2.cmd(MOD, "enable")
    await h2.cmd(MOD, "post gpu")
    await h2.answer(ALICE, PASS)
    await h2.svc.settle()
    assert h2.runner.jobs[-1]["requires"] == "cuda"
    assert await h2.points(ALICE) > 0


async def test_schedule_command(hb):
    out = await hb.cmd(ALICE, "schedule")  # reading is allowed
    assert "09:00 Europe/Berlin" in out[0].text
    out = await hb.cmd(MOD, "schedule 25:00 Mars/Base funday 0m xx=1")
    assert out[0].kind == "error"
    for bit in ("25:00", "Mars/Base", "funday", "between 5 minutes", "xx"):
        assert bit in out[0].text
    out = await hb.cmd(MOD, "schedule time=10:30 zone=Asia/Shanghai days=mon,wed,fri duration=1h30m lang=zh ramp=off")
    assert "10:30 Asia/Shanghai on mon,wed,fri, open for 1h30m, language zh, difficulty ramp off" in out[0].text
