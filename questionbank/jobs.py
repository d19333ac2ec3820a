"""Turn bank items into runner jobs (the JSON documented in runner/README.md).

One place builds jobs so the checker, `python -m questionbank job` and the bot send the
runner exactly the same thing for the same item.
"""
from __future__ import annotations

import re
from typing import Any

from runner.protocol import MAX_MISTAKES, Job  # torch-free: the one definition of a job

from .model import Item


def _check_kind(item: Item, kind: str) -> None:
    if item.kind != kind:
        raise ValueError(f"{item.id} is a {item.kind} item, not a {kind} item")


def code_job(item: Item, submission: str | None = None, *, job_id: str = "",
             recognise: bool = True) -> dict[str, Any]:
    """A grading job for a `code` item; with no submission the reference grades itself. With
    `recognise`, the item's known wrong answers travel along, so a failing answer that behaves
    like one is told which (its `hint`)."""
    _check_kind(item, "code")
    return Job(kind="code", job_id=job_id or item.id, requires=item.requires, features=item.features,
               ranks=item.ranks, seed=0,
               setup=item.setup, reference=item.reference, entrypoint=item.entrypoint,
               submission=item.reference if submission is None else submission, probe=item.probe or "",
               tolerances=dict(item.tolerances or {}), limits=dict(item.limits or {}),
               mistakes=tuple(w.code for w in item.wrong[:MAX_MISTAKES]) if recognise else ()).to_json()


def output_job(item: Item, *, job_id: str = "") -> dict[str, Any]:
    """A job that runs an `output` item's snippet so its expected stdout comes from real torch."""
    _check_kind(item, "output")
    return Job(kind="output", job_id=job_id or item.id, requires=item.requires, features=item.features, seed=0,
               snippet=item.snippet, limits=dict(item.limits or {})).to_json()


# A word right after the opening fence is a language tag only when the line ends there:
# "```def f(x):" (Slack's text field, quick Discord messages) starts with code.
_FENCE = re.compile(r"```(?:[ \t]*([A-Za-z0-9_+-]+)[ \t]*\n|[ \t]*\n?)(.*?)```", re.DOTALL)


def code_blocks(text: str) -> list[str]:
    """The bodies of every fenced block, in order. An unclosed last fence runs to the end. The one
    extraction for chat answers (the bot) and answer files (`python -m questionbank try`)."""
    blocks = [body for _lang, body in _FENCE.findall(text)]
    rest = _FENCE.sub("", text)
    if rest.count("```") == 1:  # an unclosed fence: a chat app cut the message, keep what is there
        tail = rest.split("```", 1)[1]
        first, _, body = tail.partition("\n")
        blocks.append(body if first.strip().isidentifier() or not first.strip() else tail)
    return [b.strip("\n") for b in blocks if b.strip()]


def answer_text(text: str, kind: str) -> str:
    """What an answer file says, read the way the bot reads a chat answer: a markdown note with
    fenced blocks gives their bodies (joined in order), a lone `inline` output its inside,
    anything else is the answer as it is."""
    if "```" in text:
        blocks = code_blocks(text)
        return ("\n\n".join(blocks) + "\n") if kind == "code" else "\n".join(blocks)
    stripped = text.strip()
    if kind == "output" and len(stripped) > 1 and stripped[0] == stripped[-1] == "`" and "`" not in stripped[1:-1]:
        return stripped[1:-1]
    return text


_OPEN_BLANK = re.compile(r"([\[(])\s+")
_BLANK_CLOSE = re.compile(r"\s+([\])])")
_BLANK_COMMA = re.compile(r"\s*,\s*")


def normalise_output(text: str) -> str:
    """Printed output as a reader compares it; the one rule the bank, its checker, `questionbank
    try` and the bot use. Whitespace carries no meaning here: runs of blanks, line breaks (torch
    wraps a tensor's rows, a player pastes a multi-line output on one line) and blank lines all
    count as one space; blanks right after `[`/`(`, right before `]`/`)` and around commas (torch
    pads `tensor([ 0,  4,  8])` to align columns) count as none. Everything else, digits, dots,
    dtypes and words, must match: `tensor([1., 2.])` is not `tensor([1, 2])`."""
    flat = " ".join(text.split())
    flat = _OPEN_BLANK.sub(r"\1", flat)
    flat = _BLANK_CLOSE.sub(r"\1", flat)
    return _BLANK_COMMA.sub(", ", flat)


def outputs_match(given: str, expected: str) -> bool:
    """Does a player's (or an author's) output text match what the snippet printed?"""
    return normalise_output(given) == normalise_output(expected)
