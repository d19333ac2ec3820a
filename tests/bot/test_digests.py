"""Digests that post themselves: at the weekday and time the managers chose, to the channel and
to their direct messages, once (also across restarts), with mastery per named section and the
most common recognised mistakes."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.digests import due_digests
from bot.core.models import Channel, ChannelOptions, ChannelRef, Schedule
from bot.core.settings import DigestSettings

from .conftest import ALICE, BOB, MANAGER, MOD, make_harness
from .scenario import RIGHT, WRONG_FORM, scenario_bank


def channel(**opts: object) -> Channel:
    return Channel(id=1, ref=ChannelRef("test", "w", "c"), enabled=True,
                   schedule=Schedule(timezone="Europe/Berlin", weekdays=(0, 1, 2, 3, 4)),
                   options=ChannelOptions(digest_channel=True, **opts))  # type: ignore[arg-type]


def test_a_digest_is_due_from_its_weekday_and_time_in_the_channels_zone() -> None:
    ch = channel(digest_weekday=0, digest_time="10:00", digest_since="2025-01-06T00:00:00+00:00")
    monday_0959 = datetime(2025, 1, 13, 8, 59, tzinfo=UTC)  # 09:59 in Berlin
    assert due_digests(ch, DigestSettings(), monday_0959) == []  # not yet
    due = due_digests(ch, DigestSettings(), monday_0959 + timedelta(minutes=1))
    assert [(d.period, str(d.start)) for d in due] == [("week", "2025-01-06")]
    # the monthly one: the first posting day of February 2025 is Monday the 3rd (the 1st is a Saturday)
    feb3 = datetime(2025, 2, 3, 9, 0, tzinfo=UTC)
    assert [(d.period, str(d.start)) for d in due_digests(ch, DigestSettings(), feb3)] == [
        ("week", "2025-01-27"), ("month", "2025-01-01")]
    # switched on after this week's moment: nothing from before is posted
    late = channel(digest_weekday=0, digest_time="10:00", digest_since="2025-01-15T12:00:00+00:00")
    assert due_digests(late, DigestSettings(), datetime(2025, 1, 16, 9, 0, tzinfo=UTC)) == []


async def test_the_weekly_digest_posts_itself_once_to_the_channel_and_the_managers_dm(tmp_path: Path) -> None:
    h = await make_harness(tmp_path, bank=scenario_bank())
    try:
        await h.cmd(MOD, "enable")
        await h.cmd(MOD, "schedule 09:00 Europe/Berlin mon-fri 8h")
        denied = await h.cmd(ALICE, "digest channel on")
        assert denied[0].kind == "denied"
        said = await h.cmd(MANAGER, "digest channel on dm on 10:00 mon")
        assert "every mon at 10:00 (Europe/Berlin)" in said[0].text and "you among them" in said[0].text
        await h.cmd(MOD, "post c1")
        await h.answer(ALICE, "```python\n" + WRONG_FORM + "```")
        await h.answer(BOB, RIGHT)
        await h.svc.settle()
        assert not h.kinds("summary")
        h.clock.set(datetime(2025, 1, 13, 8, 59, tzinfo=UTC))  # Monday 09:59 in Berlin
        await h.svc.settle()
        assert not h.kinds("summary")
        h.clock.set(datetime(2025, 1, 13, 9, 0, tzinfo=UTC))
        await h.svc.settle()
        posted = h.kinds("summary")
        assert len(posted) == 2
        public, dm = sorted(posted, key=lambda m: m.dm)
        assert not public.dm and dm.dm and dm.mention == MANAGER.user_id
        text = public.text
        assert "2025-01-06 to 2025-01-12" in text
        assert "1.1 Introducing PyTorch and comparing frameworks 1/2 (50%)" in text  # the section, named
        assert "Most common mistakes" in text and "You returned the input unchanged" in text and "(1 player)" in text
        assert public.files and public.files[0].data.startswith(b"\x89PNG")
        assert dm.files and dm.files[0].data == public.files[0].data  # the chart survives the outbox
        # once: later ticks and a restart post nothing more
        h.clock.advance(timedelta(hours=2))
        await h.svc.settle()
        h2 = await h.restart()
        await h2.svc.settle()
        assert len(h2.kinds("summary")) == 2
        # the manager stops the DM; the channel still gets the next one
        await h2.cmd(MANAGER, "digest dm off")
        h2.clock.set(datetime(2025, 1, 20, 9, 30, tzinfo=UTC))
        await h2.svc.settle()
        assert [m.dm for m in h2.kinds("summary")[2:]] == [False]
    finally:
        for svc in h.services:
            await svc.close()
