"""Turn a chat message into an answer for the open round's item.

Players paste code the way chat apps make easy: ```python fences, bare ``` fences, several
blocks (joined in order), inline `code`, or the raw text of a platform form. Choice items take
option keys ("b", "A, C", "(a) and (d)"). Rejections carry the message shown to the player.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from questionbank.jobs import code_blocks
from questionbank.model import Item

__all__ = ["AnswerRejected", "ParsedAnswer", "code_blocks", "looks_like_answer", "parse_answer",
           "parse_choice"]

DEFAULT_MAX_CHARS = 20_000

_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_WRAPPED = re.compile(r"`([^`]+)`")


class AnswerRejected(ValueError):
    """An answer the core will not grade; `str(exc)` is the reply for the player."""


@dataclass(frozen=True)
class ParsedAnswer:
    content: str  # what is stored and graded: code, output text, or sorted option keys
    source: str  # fenced | inline | plain | options


def looks_like_answer(text: str, kind: str, option_keys: tuple[str, ...] = (), *,
                      in_round_thread: bool = False) -> bool:
    """Should a plain chat message (not `/quiz answer`) count as an answer? The one rule every
    adapter relies on. A code fence does; for an output round, a message that is nothing but
    inline code does, and in the round's thread (or a reply to it) any text does; for a choice
    round, a message made only of option keys does, also keys that are not options (`F`,
    `a, f`): those get the same reply as `/quiz answer F` rather than silence; in the round's
    thread a bare number (`2`) is read as a try at a key too. Chatter, including chatter that
    merely mentions `some.code`, does not: it would cost the player a failed attempt for
    talking about the question."""
    if "```" in text:
        return True
    if kind == "output":
        return in_round_thread or bool(_INLINE.fullmatch(text.strip()))
    if kind == "choice" and option_keys:
        try:
            parse_choice(text, option_keys)
            return True
        except AnswerRejected:
            return looks_like_option_keys(text, in_round_thread=in_round_thread)
    return False


_KEYISH = re.compile(r"[a-z]")
_KEYISH_IN_THREAD = re.compile(r"[a-z0-9]")


def looks_like_option_keys(text: str, *, in_round_thread: bool = False) -> bool:
    """A message shaped like a choice answer even if a key is wrong: one to six single letters
    (in the round's thread also single digits), separated the way `parse_choice` reads them.
    Words ("ok", "I think b") are chatter, not a near miss."""
    tokens = _choice_tokens(text)
    shape = _KEYISH_IN_THREAD if in_round_thread else _KEYISH
    return 0 < len(tokens) <= 6 and all(shape.fullmatch(t) for t in tokens)


def may_have_been_an_answer(text: str, *, in_round_thread: bool) -> bool:
    """When handling a chat message failed before the core could decide, was it probably an
    answer? Then the player is told it was not taken, rather than left waiting for a verdict;
    chatter that failed stays silent."""
    return in_round_thread or "```" in text


def _choice_tokens(text: str) -> list[str]:
    cleaned = re.sub(r"\b(and|und|or|et|和|与)\b", " ", text.strip().strip("`").lower())
    return [t for t in re.split(r"[\s,;/()\[\]、，.&+]+", cleaned) if t]


def parse_choice(text: str, option_keys: tuple[str, ...]) -> list[str]:
    keys = {k.lower(): k for k in option_keys}
    tokens = _choice_tokens(text)
    if not tokens:
        raise AnswerRejected("Your answer is empty: reply with the option key(s), e.g. `b` or `a, c`.")
    unknown = [t for t in tokens if t not in keys]
    if unknown:
        raise AnswerRejected(
            f"`{unknown[0]}` is not one of the options ({', '.join(option_keys)}): "
            "reply with the option key(s), e.g. `b` or `a, c`.")
    return sorted({keys[t] for t in tokens})


def parse_answer(text: str, item: Item, *, explicit: bool = True,
                 max_chars: int = DEFAULT_MAX_CHARS) -> ParsedAnswer:
    """Extract the gradable content. `explicit` is True for `/quiz answer` and forms, where plain
    text is the answer; a chat message needs a code block (see `looks_like_answer`)."""
    if text is None or not text.strip():
        raise AnswerRejected("Your answer is empty: paste your code in a ```python block.")
    if len(text) > max_chars:
        raise AnswerRejected(
            f"Your answer is {len(text):,} characters; the limit is {max_chars:,}. "
            "Send only the function the question asks for.")
    if item.kind == "choice":
        keys = tuple(o.key for o in item.options)
        body = "\n".join(code_blocks(text)) if "```" in text else text
        return ParsedAnswer(",".join(parse_choice(body, keys)), "options")
    if "```" in text:
        blocks = code_blocks(text)
        if not blocks:
            raise AnswerRejected("Your code block is empty.")
        return ParsedAnswer("\n\n".join(blocks) + "\n", "fenced")
    inline = _INLINE.findall(text)
    if item.kind == "output":
        if inline and not explicit:
            return ParsedAnswer("\n".join(inline), "inline")
        if inline and len(inline) == 1 and text.strip() == f"`{inline[0]}`":
            return ParsedAnswer(inline[0], "inline")
        wrapped = _WRAPPED.fullmatch(text.strip())
        if wrapped:  # `several printed lines` in one pair of backticks
            return ParsedAnswer(wrapped.group(1).strip("\n"), "inline")
        return ParsedAnswer(text.strip("\n"), "plain")
    # code items
    if explicit:
        return ParsedAnswer(text.strip("\n") + "\n", "plain")
    if inline:
        return ParsedAnswer("\n".join(inline) + "\n", "inline")
    raise AnswerRejected("Paste your code in a ```python block (or use `/quiz answer`).")
