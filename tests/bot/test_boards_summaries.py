"""Leaderboard periods in the channel's time zone, player cards, digests, chart and CSV."""
from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

from .conftest import ALICE, BOB, MANAGER, MOD, PASS, FAIL


async def test_periods_follow_the_channel_time_zone(make):
    # Friday 31 January 2025, 23:30 UTC = Saturday 1 February 08:30 in Shanghai
    h = await make(start=datetime(2025, 1, 31, 15, 0, tzinfo=timezone.utc))
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 Asia/Shanghai daily 12h")
    await h.cmd(MOD, "post c1-1")  # local date: Friday 31 January (23:00 in Shanghai)
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    await h.cmd(MOD, "close")  # a hand-posted round keeps its announced end: Saturday's would wait for it
    h.clock.set(datetime(2025, 2, 1, 1, 30, tzinfo=timezone.utc))  # 09:30 Saturday 1 Feb in Shanghai
    await h.svc.settle()
    await h.answer(BOB, PASS)
    await h.svc.settle()
    month = await h.board("month")
    assert [r[1] for r in month] == ["Bob"]  # February in Shanghai
    assert {r[1] for r in await h.board("week")} == {"Alice", "Bob"}  # same Mon-Sun week
    assert [r[1] for r in await h.board("round")] == ["Bob"]
    assert {r[1] for r in await h.board("all")} == {"Alice", "Bob"}
    out = await h.cmd(ALICE, "leaderboard topic")
    assert "No topic week" in out[0].text


async def test_summary_digest_chart_and_csv(make):
    from .test_rounds import code_bank

    h = await make(bank=code_bank())
    await h.cmd(MOD, "enable")
    await h.cmd(MOD, "schedule 09:00 UTC mon-fri 8h")
    h.clock.set(h.clock.now().replace(hour=9))
    await h.svc.settle()
    await h.answer(ALICE, PASS)
    await h.answer(BOB, FAIL)
    await h.svc.settle()
    h.clock.advance(timedelta(days=1))
    await h.svc.settle()
    await h.answer(BOB, PASS)
    await h.svc.settle()
    out = (await h.cmd(MANAGER, "summary week"))[0]
    assert out.kind == "summary" and out.ephemeral
    text = out.text
    assert "Rounds: 2" in text and "answers: 3" in text and "active players: 2" in text
    assert "Top players: 1. Alice" in text or "Top players: 1. Bob" in text
    assert "Biggest movers" not in text  # nothing to compare with in the first week
    assert "Players per day: Mon 06 2, Tue 07 1" in text  # up to today
    png = out.files[0]
    assert png.content_type == "image/png" and png.data[:4] == b"\x89PNG" and len(png.data) > 5000
    last = (await h.cmd(MANAGER, "summary week last"))[0]
    assert "Nobody answered" in last.text
    month = (await h.cmd(MANAGER, "summary month"))[0]
    assert "Monthly summary" in month.text
    assert "Days with answers: 2 of 7; busiest Mon 06 (2 players)" in month.text  # not a line per day
    exp = (await h.cmd(MANAGER, "export week"))[0]
    rows = list(csv.DictReader(io.StringIO(exp.files[0].data.decode())))
    assert len(rows) == 3 and {r["player"] for r in rows} == {"Alice", "Bob"}
    assert [r["verdict"] for r in rows] == ["passed", "failed", "passed"]
    assert float(rows[0]["attempt_total"]) == float(rows[0]["attempt_points"]) + float(rows[0]["first_solver_bonus"])
    # next week Alice plays and Bob does not: Alice moved from 2nd to 1st
    h.clock.advance(timedelta(days=6))
    await h.svc.settle()
    await h.answer(ALICE, PASS)
    await h.svc.settle()
    nxt = (await h.cmd(MANAGER, "summary"))[0]
    assert "Biggest movers: Alice (now 1, was 2)" in nxt.text
