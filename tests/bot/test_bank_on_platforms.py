"""Every bank item, as the core posts it, reaches players whole on Discord and on Slack.

A round post or a closing explanation cut by a platform's limits would hide part of the
question or of the lesson; the renderers cut with a note rather than fail, so this test is
what keeps new content within the limits. Both languages; the real bank, the real core."""
from __future__ import annotations

from typing import Any

from bot.core import Message
from bot.platforms import discord_render, slack_render
from questionbank.loader import load_bank

from .conftest import MOD
from .helpers import FakeRunner


def discord_cut(msg: Message) -> bool:
    embed = discord_render.embed_for(msg)
    return len(embed.description or "") < len(discord_render.body_text(msg))


def slack_cut(msg: Message) -> bool:
    blocks = slack_render.round_blocks(msg) if msg.kind == "round_open" else slack_render.message_blocks(msg)
    return any(slack_render._is_cut_note(b) for b in blocks)


async def test_every_item_posts_and_closes_uncut_in_both_languages(make: Any) -> None:
    bank = load_bank()
    # a GPU runner with every feature and enough ranks: every item may be posted
    h = await make(bank=bank, runner=FakeRunner(cuda=True, capabilities={"ranks": 16, "features": ["onnx", "inductor"]}))
    await h.svc.pool.refresh()
    await h.cmd(MOD, "enable")
    seen: dict[tuple[str, str], int] = {}
    cut: list[str] = []
    for lang in ("en", "zh"):
        await h.cmd(MOD, f"schedule {lang}")
        for item_id in sorted(bank.items):
            start = len(h.sent)
            await h.cmd(MOD, f"post {item_id}")
            await h.cmd(MOD, "close")
            await h.svc.settle()
            for msg in h.sent[start:]:
                if msg.kind in ("round_open", "round_close"):
                    seen[(lang, msg.kind)] = seen.get((lang, msg.kind), 0) + 1
                    cut += [f"{item_id} {lang} {msg.kind} on {where}"
                            for where, was_cut in (("Discord", discord_cut(msg)), ("Slack", slack_cut(msg))) if was_cut]
    assert set(seen.values()) == {len(bank.items)} and len(seen) == 4, seen  # every item posted and closed, twice
    assert not cut, "\n".join(cut)
