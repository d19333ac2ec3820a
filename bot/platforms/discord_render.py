"""Render the core's Messages as Discord embeds, files and components, within Discord's limits.

Discord rejects a whole message when one part is too long (embed title 256, description 4096,
field 1024, 25 fields, 6000 characters over all embeds, content 2000), so everything is cut
here with a note. Player text that is echoed back (tracebacks, printed output) has its
mentions neutralised so a submission cannot ping @everyone.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import discord

from ..core.models import Message
from .text import cut

TITLE_MAX = 256
DESCRIPTION_MAX = 4096
FIELD_MAX = 1024
FIELDS_MAX = 25
EMBED_TOTAL_MAX = 6000
CONTENT_MAX = 2000
FOOTER_MAX = 2048
MODAL_TITLE_MAX = 45
MODAL_INPUT_MAX = 4000
BUTTON_LABEL_MAX = 80
SELECT_LABEL_MAX = 80
SELECT_DESCRIPTION_MAX = 100
SELECT_OPTIONS_MAX = 25
LABEL_DESCRIPTION_MAX = 100
CHOICE_NAME_MAX = 100

COLOURS = {
    "round_open": discord.Colour.blurple(), "round_close": discord.Colour.dark_grey(),
    "error": discord.Colour.red(), "denied": discord.Colour.red(), "leaderboard": discord.Colour.gold(),
}
VERDICT_COLOURS = {"passed": discord.Colour.green(), "failed": discord.Colour.orange()}


def neutralise(text: str) -> str:
    """No pings from text we echo: @everyone, @here, <@user>, <@&role> lose their power."""
    return discord.utils.escape_mentions(text)


def body_text(msg: Message) -> str:
    """The blocks as Discord markdown (code blocks fenced), mentions neutralised."""
    parts = []
    for b in msg.blocks:
        if b.code:
            parts.append(f"```{b.lang}\n{b.text.rstrip()}\n```")
        else:
            parts.append(b.text)
    return neutralise("\n\n".join(p for p in parts if p.strip()))


def embed_for(msg: Message, *, short: bool = False) -> discord.Embed:
    """One embed within every limit. `short`: only the title (a public verdict line when the
    details went to the player privately)."""
    colour = VERDICT_COLOURS.get(str(msg.data.get("verdict")), COLOURS.get(msg.kind, discord.Colour.blue()))
    title = cut(neutralise(msg.title), TITLE_MAX, note="…") if msg.title else None
    description = None if short else cut(body_text(msg), DESCRIPTION_MAX) or None
    embed = discord.Embed(title=title, description=description, colour=colour)
    if msg.kind == "round_open" and "difficulty" in msg.data:
        embed.set_footer(text=cut(f"{msg.data.get('kind', '')} · difficulty {msg.data['difficulty']} · "
                                  f"{msg.data.get('item_id', '')}", FOOTER_MAX, note="…"))
    return fit_total(embed)


def fit_total(embed: discord.Embed) -> discord.Embed:
    """Keep the embed within Discord's 6000-character total by shortening the description."""
    over = len(embed) - EMBED_TOTAL_MAX
    if over > 0 and embed.description:
        embed.description = cut(embed.description, max(0, len(embed.description) - over))
    return embed


def files_for(msg: Message) -> list[discord.File]:
    return [discord.File(io.BytesIO(f.data), filename=f.filename) for f in msg.files]


@dataclass
class Payload:
    """Keyword arguments for `send` / `send_message` / `followup.send`."""

    content: str | None = None
    embed: discord.Embed | None = None
    files: list[discord.File] = field(default_factory=list)
    view: discord.ui.View | None = None
    allowed_mentions: discord.AllowedMentions = field(default_factory=discord.AllowedMentions.none)

    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"allowed_mentions": self.allowed_mentions}
        if self.content:
            kw["content"] = self.content
        if self.embed is not None:
            kw["embed"] = self.embed
        if self.files:
            kw["files"] = self.files
        if self.view is not None:
            kw["view"] = self.view
        return kw


def payload_for(msg: Message, *, short: bool = False, view: discord.ui.View | None = None) -> Payload:
    """What to send for a Message: an embed, its files, and a ping for the player it addresses
    (only that user may be pinged)."""
    p = Payload(embed=embed_for(msg, short=short), files=[] if short else files_for(msg), view=view)
    if msg.mention and msg.mention.isdigit() and not msg.ephemeral:
        p.content = f"<@{msg.mention}>"
        p.allowed_mentions = discord.AllowedMentions(everyone=False, roles=False,
                                                     users=[discord.Object(int(msg.mention))])
    return p


# ---------------------------------------------------------------------------- components

def choice_custom_id(round_id: int, key: str) -> str:
    return f"quiz:choice:{round_id}:{key}"


def choices_custom_id(round_id: int) -> str:
    return f"quiz:choices:{round_id}"


def answer_custom_id(round_id: int) -> str:
    return f"quiz:answer:{round_id}"


def parse_custom_id(custom_id: str) -> tuple[str, int, str] | None:
    """`quiz:choice:12:B` -> ("choice", 12, "B"); None for ids that are not ours."""
    parts = custom_id.split(":")
    if len(parts) < 3 or parts[0] != "quiz" or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2]), ":".join(parts[3:])


def round_view(round_id: int, kind: str, options: list[dict[str, str]], multiple: bool) -> discord.ui.View:
    """Buttons under a round post: one per option for a single-answer choice item, a select for
    a several-answer one, and an Answer button (opens the form) for code and output items.
    Custom ids carry the round, so a click still works after the bot restarts."""
    view = discord.ui.View(timeout=None)
    options = options[:SELECT_OPTIONS_MAX]  # a select takes 25 options, a view 25 buttons (5 rows of 5)
    if kind == "choice" and options:
        if multiple:
            view.add_item(discord.ui.Select(
                custom_id=choices_custom_id(round_id), placeholder="Pick every correct option",
                min_values=1, max_values=len(options),  # never more than the options offered
                options=[discord.SelectOption(label=cut(o["key"], SELECT_LABEL_MAX, note="…"), value=o["key"],
                                              description=cut(o["text"], SELECT_DESCRIPTION_MAX, note="…") or None)
                         for o in options]))
        else:
            for o in options:
                view.add_item(discord.ui.Button(label=cut(o["key"], BUTTON_LABEL_MAX, note="…"),
                                                style=discord.ButtonStyle.secondary,
                                                custom_id=choice_custom_id(round_id, o["key"])))
    else:
        view.add_item(discord.ui.Button(label="Answer", style=discord.ButtonStyle.primary,
                                        custom_id=answer_custom_id(round_id)))
    return view


def modal_default(starter: str | None, max_chars: int) -> str | None:
    """The form starts with the item's starter code when it fits."""
    if starter and len(starter) <= min(MODAL_INPUT_MAX, max_chars):
        return starter
    return None
