"""Streak freezes: a configurable number of missed rounds a week does not end a streak, the same
rule for the streak bonus, `/quiz me` and the freezes it shows left."""
from __future__ import annotations

from datetime import date, timedelta

from bot.core.scoring import ScoringRules
from bot.core.streaks import StreakWalk, streak_of

from .conftest import ALICE, MOD, PASS, make_harness, settings
from .test_rounds import code_bank, to_posting

MON = date(2025, 1, 6)


def days(*offsets: int) -> list[date]:
    return [MON + timedelta(days=o) for o in offsets]


def test_one_miss_a_week_is_forgiven_a_second_ends_the_run() -> None:
    # newest first: Fri solved, Thu missed, Wed solved, Tue missed, Mon solved
    d = days(4, 3, 2, 1, 0)
    history = list(zip([True, False, True, False, True], d, strict=True))
    assert streak_of(history, 1).streak == 2  # Thursday is forgiven, Tuesday is the week's second miss
    assert streak_of(history, 2).streak == 3
    assert streak_of(history, 0).streak == 1
    # misses in different weeks are each forgiven
    spread = [(True, MON + timedelta(days=7)), (False, MON + timedelta(days=4)),
              (True, MON + timedelta(days=3)), (False, MON - timedelta(days=1)), (True, MON - timedelta(days=3))]
    assert streak_of(spread, 1).streak == 3


def test_freezes_left_count_this_weeks_forgiven_misses() -> None:
    walk = streak_of([(False, MON + timedelta(days=2)), (True, MON)], 1)
    assert walk.streak == 1 and walk.freezes_left(MON + timedelta(days=3)) == 0
    assert walk.freezes_left(MON + timedelta(days=7)) == 1  # a new week
    assert StreakWalk(2).freezes_left(MON) == 2


async def _week(h, solve_days: set[int]) -> None:
    """Monday to Friday at 09:00 Berlin; Alice solves on the given weekdays (0 = Monday)."""
    for wd in range(5):
        await to_posting(h)
        if wd in solve_days:
            await h.answer(ALICE, PASS)
            await h.svc.settle()


async def test_a_missed_round_keeps_the_streak_and_its_bonus(make) -> None:
    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
    await _week(h, {0, 2, 4})
    results = [m for m in h.kinds("result") if m.data["verdict"] == "passed"]
    assert "streak bonus" not in results[0].text
    assert "(+2 streak bonus, 2 in a row)" in results[1].text  # Wednesday: Tuesday's miss is forgiven
    # Friday: Thursday's miss is forgiven, so Tuesday's, the week's second, is where the run starts
    assert "(+2 streak bonus, 2 in a row)" in results[2].text
    me = (await h.cmd(ALICE, "me"))[0]
    assert me.data["streak"] == 2 and me.data["best_streak"] == 2
    assert "streak freezes left this week: 0 of 1" in me.text


async def test_no_freezes_when_the_channel_sets_none(tmp_path) -> None:
    h = await make_harness(tmp_path, bank=code_bank(), core=settings(scoring=ScoringRules(streak_freezes=0)))
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
        await _week(h, {0, 2})
        results = [m for m in h.kinds("result") if m.data["verdict"] == "passed"]
        assert "streak bonus" not in results[1].text
        me = (await h.cmd(ALICE, "me"))[0]
        assert me.data["streak"] == 0 and "freezes" not in me.text
    finally:
        await h.svc.close()
