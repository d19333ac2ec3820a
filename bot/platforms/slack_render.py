"""Render the core's Messages as Slack Block Kit, within Slack's limits; read what Slack sends.

Slack rejects a whole message when one part is too long (50 blocks per message, 3000
characters per section text, 150 per header, 100 blocks in a home view), so everything is
cut here with a note. Text we echo (a player's traceback or printed output) has `&`, `<` and
`>` escaped, which is also what stops `<!channel>` or `<@U...>` in it from pinging anyone:
the only live mention in a message is the player it addresses.

Pure functions only: the adapter (slack_app.py) decides where and when to post.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ..core.models import Block, ChannelRef, Message
from .text import CUT_NOTE, cut, split_blocks

MAX_BLOCKS = 50
HOME_MAX_BLOCKS = 100
SECTION_MAX = 3000
HEADER_MAX = 150
CONTEXT_MAX = 2000
FALLBACK_MAX = 3000  # the notification text next to the blocks
BUTTON_TEXT_MAX = 75
OPTION_TEXT_MAX = 75
CHECKBOX_OPTIONS_MAX = 10
ACTIONS_ELEMENTS_MAX = 25
MODAL_TITLE_MAX = 24
MODAL_INPUT_MAX = 3000
MODAL_ERROR_MAX = 300
METADATA_MAX = 3000

# ids Slack sends back to us; the adapter registers its handlers on them
VIEW_ANSWER = "quiz_answer"
BLOCK_ANSWER = "answer"
INPUT_ANSWER = "text"
ACTION_CHOICE = "quiz_choice_"  # + option key: one button per option
ACTION_PICK = "quiz_pick_"  # + index: checkboxes of a several-answer item
ACTION_CHOICES_SUBMIT = "quiz_choices_submit"
ACTION_ANSWER = "quiz_answer_open"  # opens the answer modal

CUT_CONTEXT = "Part of this message was cut to fit in Slack."
_CUT_RE = re.compile(re.escape(CUT_NOTE).replace(re.escape("{n:,}"), r"[\d,]+") + r"(\n```)?$")
_FENCE_LANG = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]+[ \t]*\n")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_LANG_LINE = re.compile(r"[ \t]*[A-Za-z0-9_+.-]*[ \t]*")
_LANG_WORDS = frozenset({"python", "python3", "py", "py3", "pycon", "text", "txt"})


# ---------------------------------------------------------------------------- text

def escape(text: str) -> str:
    """Slack's three control characters as entities: shown as typed, never parsed as mentions."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """What a player typed, from Slack's escaped message text (`&amp;` last, so `&amp;lt;` -> `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def mrkdwn(text: str) -> str:
    """Core text (plain, `inline code`, ```lang fences) as Slack mrkdwn: escaped, and fences
    without the language word, which Slack would show as the block's first line."""
    return _FENCE_LANG.sub("```\n", escape(text))


def block_text(block: Block, *, monospace: bool = False) -> str:
    if block.code or monospace:
        return f"```\n{escape(block.text.rstrip())}\n```"
    return mrkdwn(block.text)


def mention(user_id: str | None) -> str:
    """`<@U123>` for a Slack user id, nothing for anything else (a core id from another platform)."""
    return f"<@{user_id}>" if user_id and _USER_ID.match(user_id) else ""


def was_cut(part: str) -> bool:
    return bool(_CUT_RE.search(part))


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": cut(text, limit, note="…") or " ", "emoji": True}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": plain(text, HEADER_MAX)}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, SECTION_MAX)}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(text, CONTEXT_MAX)}]}


def divider() -> dict[str, Any]:
    return {"type": "divider"}


# ---------------------------------------------------------------------------- messages

def body_sections(msg: Message, budget: int, *, lead: str = "") -> tuple[list[dict[str, Any]], bool]:
    """The message's blocks as sections of at most 3000 characters, at most `budget` of them;
    True when something was cut. A leaderboard's table stays monospaced."""
    monospace = msg.kind == "leaderboard" and bool(msg.data.get("rows"))
    texts = [block_text(b, monospace=monospace) for b in msg.blocks]
    texts = [t for t in texts if t.strip()]
    if lead and texts and not texts[0].startswith("```"):
        texts[0] = f"{lead} {texts[0]}"
    elif lead:
        texts.insert(0, lead)
    out: list[dict[str, Any]] = []
    was = False
    for text in texts:
        room = budget - len(out)
        if room <= 0:
            was = True
            break
        parts = split_blocks(text, SECTION_MAX, room)
        was = was or was_cut(parts[-1])
        out.extend(section(p) for p in parts)
    return out, was


def message_blocks(msg: Message, *, extra: list[dict[str, Any]] | None = None, max_blocks: int = MAX_BLOCKS,
                   with_mention: bool = True) -> list[dict[str, Any]]:
    """Header (the title), sections (the body, mentioning the addressed player), `extra`
    (buttons), and a context note when anything had to be cut; never more than `max_blocks`."""
    extra = list(extra or [])
    blocks: list[dict[str, Any]] = []
    if msg.title:
        blocks.append(header(msg.title))
    lead = mention(msg.mention) if with_mention and not msg.ephemeral else ""
    budget = max_blocks - len(blocks) - len(extra) - 1  # one left for the cut note
    sections, was = body_sections(msg, max(1, budget), lead=lead)
    blocks += sections + extra
    if was:
        blocks.append(context(CUT_CONTEXT))
    return blocks[:max_blocks]


def fallback_text(msg: Message, *, with_mention: bool = True) -> str:
    """The notification text sent next to the blocks (and shown where blocks cannot be)."""
    lead = mention(msg.mention) if with_mention and not msg.ephemeral else ""
    text = escape(msg.title or (msg.blocks[0].text if msg.blocks else msg.kind))
    return cut(f"{lead} {text}".strip(), FALLBACK_MAX)


def plain_payload(msg: Message) -> str:
    """A text-only rendering, for when Slack refused our blocks: never lose a message."""
    lead = mention(msg.mention) if not msg.ephemeral else ""
    return cut(f"{lead} {mrkdwn(msg.text)}".strip(), 3 * SECTION_MAX)


# ---------------------------------------------------------------------------- rounds and buttons

def choice_actions(round_id: int, options: list[dict[str, str]], multiple: bool) -> list[dict[str, Any]]:
    """One button per option (value: round and key), or for an item with several correct
    options, checkboxes (ten per group) and a Submit button."""
    if not options:
        return []
    if not multiple:
        buttons = [{
            "type": "button", "action_id": f"{ACTION_CHOICE}{o['key']}",
            "text": plain(f"{o['key']}: {o.get('text', '')}".rstrip(": "), BUTTON_TEXT_MAX),
            "value": json.dumps({"round_id": round_id, "key": o["key"]}),
        } for o in options[:ACTIONS_ELEMENTS_MAX]]
        return [{"type": "actions", "block_id": f"quiz_round_{round_id}", "elements": buttons}]
    groups = [options[i:i + CHECKBOX_OPTIONS_MAX] for i in range(0, len(options), CHECKBOX_OPTIONS_MAX)]
    elements: list[dict[str, Any]] = [{
        "type": "checkboxes", "action_id": f"{ACTION_PICK}{n}",
        "options": [{"text": plain(f"{o['key']}: {o.get('text', '')}", OPTION_TEXT_MAX), "value": o["key"]}
                    for o in group],
    } for n, group in enumerate(groups[:ACTIONS_ELEMENTS_MAX - 1])]
    elements.append({"type": "button", "action_id": ACTION_CHOICES_SUBMIT, "style": "primary",
                     "text": plain("Submit", BUTTON_TEXT_MAX), "value": json.dumps({"round_id": round_id})})
    return [{"type": "actions", "block_id": f"quiz_round_{round_id}", "elements": elements}]


def answer_actions(round_id: int) -> list[dict[str, Any]]:
    return [{"type": "actions", "block_id": f"quiz_round_{round_id}", "elements": [{
        "type": "button", "action_id": ACTION_ANSWER, "style": "primary", "text": plain("Answer", BUTTON_TEXT_MAX),
        "value": json.dumps({"round_id": round_id})}]}]


def round_actions(data: dict[str, Any]) -> list[dict[str, Any]]:
    round_id = int(data["round_id"])
    if data.get("kind") == "choice":
        return choice_actions(round_id, data.get("options") or [], bool(data.get("multiple")))
    return answer_actions(round_id)


def round_blocks(msg: Message) -> list[dict[str, Any]]:
    """A round's post: the question, then its buttons (they survive restarts: the round and
    the option travel in each button's value)."""
    extra = round_actions(msg.data) if "round_id" in msg.data else []
    return message_blocks(msg, extra=extra)


def closed_round_blocks(blocks: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """The round's post once it closed: the same question, no buttons, a note."""
    kept = [b for b in blocks if b.get("type") != "actions" and not _is_cut_note(b)]
    return [*kept[:MAX_BLOCKS - 1], context(note)]


def _is_cut_note(block: dict[str, Any]) -> bool:
    return block.get("type") == "context" and block["elements"][0].get("text") == CUT_CONTEXT


def parse_value(raw: str | None) -> dict[str, Any]:
    """A button's value as we wrote it; {} for anything else."""
    try:
        value = json.loads(unescape(raw or ""))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def selected_keys(state: dict[str, Any] | None) -> list[str]:
    """The option keys ticked in our checkboxes, from a block_actions payload's state."""
    keys: list[str] = []
    for block in ((state or {}).get("values") or {}).values():
        for action_id, element in block.items():
            if action_id.startswith(ACTION_PICK):
                keys += [str(o.get("value")) for o in element.get("selected_options") or []]
    return keys


# ---------------------------------------------------------------------------- the answer modal

def answer_modal(form: Message, where: ChannelRef) -> dict[str, Any]:
    """The modal for `/quiz answer` and the Answer button: one multiline input (at most 3000
    characters, Slack's limit), starting with the starter code when it fits. It is optional
    so that an empty answer reaches the core, whose refusal is shown in the modal."""
    data = form.data
    round_id = int(data["round_id"])
    kind = data.get("kind")
    max_chars = min(MODAL_INPUT_MAX, int(data.get("max_chars") or MODAL_INPUT_MAX))
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": INPUT_ANSWER, "multiline": True,
                               "max_length": max_chars}
    starter = data.get("starter")
    if kind == "code" and starter and len(starter) <= max_chars:
        element["initial_value"] = starter
    element["placeholder"] = plain("def ...  (plain code, no ``` needed)" if kind == "code"
                                   else "the exact printed text", 150)
    entry = data.get("entrypoint")
    label = "Your code" if kind == "code" else "What the snippet prints"
    block: dict[str, Any] = {"type": "input", "block_id": BLOCK_ANSWER, "optional": True,
                             "label": plain(label, 2000), "element": element}
    if kind == "code" and entry:
        block["hint"] = plain(f"Define {entry}. Plain code: no ``` needed.", 2000)
    meta = json.dumps({"team": where.workspace, "channel": where.channel, "name": where.name[:80],
                       "round_id": round_id})
    blocks = [section(f"*{escape(form.title)}*")] if form.title else []
    return {
        "type": "modal", "callback_id": VIEW_ANSWER, "private_metadata": meta[:METADATA_MAX],
        "title": plain(f"Answer round #{form.data.get('number') or round_id}", MODAL_TITLE_MAX),
        "submit": plain("Submit", MODAL_TITLE_MAX), "close": plain("Cancel", MODAL_TITLE_MAX),
        "blocks": [*blocks, block],
    }


def modal_submission(view: dict[str, Any]) -> tuple[ChannelRef | None, int | None, str]:
    """(channel, round id, text) from a submitted answer modal."""
    try:
        meta = json.loads(view.get("private_metadata") or "{}")
        where = ChannelRef("slack", str(meta["team"]), str(meta["channel"]), str(meta.get("name") or ""))
        round_id = int(meta["round_id"])
    except (ValueError, KeyError, TypeError):
        return None, None, ""
    values = ((view.get("state") or {}).get("values") or {}).get(BLOCK_ANSWER) or {}
    text = (values.get(INPUT_ANSWER) or {}).get("value") or ""
    return where, round_id, text


def modal_error(msg: Message) -> str:
    """A refusal as the modal shows it under the input (plain text)."""
    return cut(" ".join(b.text for b in msg.blocks).strip() or msg.title or "Not accepted.", MODAL_ERROR_MAX,
               note="…")


# ---------------------------------------------------------------------------- App Home

def home_view(entries: list[tuple[ChannelRef, Message, Message]], *, more: int = 0) -> dict[str, Any]:
    """The player's App Home: per quiz channel, their card and the week's board; channels
    that do not fit in Slack's 100 blocks are counted at the end."""
    blocks: list[dict[str, Any]] = [header("PyTorch quiz"), context(
        "Your points and this week's standings in each quiz channel you are in. `/quiz help` in a channel "
        "lists the commands.")]
    if not entries and not more:
        blocks.append(section("No quiz channel of yours yet. A moderator starts one with `/quiz enable` in a "
                              "channel; answer a round there to get on the board."))
    left = len(entries) + more
    for ref, card, board in entries:
        group = [divider(), section(f"*<#{ref.channel}>*")]
        for msg in (card, board):
            text = "\n".join(block_text(b, monospace=msg.kind == "leaderboard" and bool(msg.data.get("rows")))
                             for b in msg.blocks)
            title = f"*{escape(msg.title)}*\n" if msg.title and msg.kind != "card" else ""
            group.append(section(title + text))
        if len(blocks) + len(group) + 1 > HOME_MAX_BLOCKS:
            break
        blocks += group
        left -= 1
    if left:
        blocks.append(context(f"… and {left} more quiz channels: `/quiz me` there shows your card."))
    return {"type": "home", "blocks": blocks[:HOME_MAX_BLOCKS]}


def home_error_view(text: str) -> dict[str, Any]:
    """The App Home when it could not be built: a line saying so rather than an empty tab."""
    return {"type": "home", "blocks": [header("PyTorch quiz"), section(escape(text))]}


# ---------------------------------------------------------------------------- incoming messages

def incoming_text(event: dict[str, Any]) -> str:
    """What the player wrote, in the core's terms. Slack's rich text (what its editor sends)
    is rebuilt exactly: a code block becomes a ``` fence on its own lines, inline code a
    `span`; the plain `text` field (API posts, old clients) is unescaped and its fences put
    on their own lines."""
    rich = [b for b in event.get("blocks") or [] if b.get("type") == "rich_text"]
    if rich:
        text = "\n".join(_rich_block(b) for b in rich)
        if text.strip():
            return text
    return fences_on_own_line(unescape(event.get("text") or ""))


def fences_on_own_line(text: str) -> str:
    """Slack has no language tags: in ```def f(): ...``` everything between the fences is the
    code, and its `text` field puts it right after the opening fence. Start the code on a new
    line so that `def` is not read as a language; a lone language word (```python) stays."""
    parts = text.split("```")
    for i in range(1, len(parts), 2):  # what follows each opening fence
        first_line = parts[i].split("\n", 1)[0]
        if not _LANG_LINE.fullmatch(first_line):
            parts[i] = "\n" + parts[i]
    return "```".join(parts)


def _code_block(code: str) -> str:
    """A rich-text code block as a fence; a first line that is only a language word (typed out
    of habit from other tools) becomes the fence's language instead of a line of code."""
    code = code.strip("\n")
    first, nl, rest = code.partition("\n")
    if nl and first.strip().lower() in _LANG_WORDS:
        return f"```{first.strip()}\n{rest}\n```"
    return f"```\n{code}\n```"


def _rich_block(block: dict[str, Any]) -> str:
    out: list[str] = []
    for el in block.get("elements") or []:
        kind = el.get("type")
        if kind == "rich_text_preformatted":
            out.append(_code_block(_run(el.get("elements") or [], in_code=True)))
        elif kind == "rich_text_list":
            ordered = el.get("style") == "ordered"
            for n, item in enumerate(el.get("elements") or [], start=1 + int(el.get("offset") or 0)):
                line = _run(item.get("elements") or [])
                out.append(f"{n}. {line}" if ordered else f"- {line}")
        elif kind == "rich_text_quote":
            out.append("\n".join(f"> {line}" for line in _run(el.get("elements") or []).split("\n")))
        else:  # rich_text_section and anything new: its inline text
            out.append(_run(el.get("elements") or []).rstrip("\n"))
    return "\n".join(p for p in out if p != "")


def _run(elements: list[dict[str, Any]], *, in_code: bool = False) -> str:
    """Inline elements as text; consecutive code-styled pieces become one `span`."""
    out: list[str] = []
    code: list[str] = []
    for el in elements:
        if not in_code and el.get("type") == "text" and (el.get("style") or {}).get("code"):
            code.append(str(el.get("text") or ""))
            continue
        if code:
            out.append(_span("".join(code)))
            code = []
        out.append(_inline(el))
    if code:
        out.append(_span("".join(code)))
    return "".join(out)


def _span(text: str) -> str:
    return f"`{text}`" if text.strip() else text


def _inline(el: dict[str, Any]) -> str:
    kind = el.get("type")
    if kind == "link":
        return str(el.get("text") or el.get("url") or "")
    if kind == "emoji":
        return f":{el.get('name')}:"
    if kind == "user":
        return f"<@{el.get('user_id')}>"
    if kind == "channel":
        return f"<#{el.get('channel_id')}>"
    if kind == "usergroup":
        return f"<!subteam^{el.get('usergroup_id')}>"
    if kind == "broadcast":
        return f"@{el.get('range')}"
    return str(el.get("text") or "")
