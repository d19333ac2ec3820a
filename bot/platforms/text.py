"""Text helpers every chat adapter needs: fit the core's messages into a platform's limits.

Discord and Slack reject a message that exceeds a limit instead of shortening it, so a long
traceback or item would make the bot silently fail to answer. Adapters cut here, with a note
saying so, and never split a code fence in a way that turns the rest of the message into code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from time import monotonic
from typing import Generic, TypeVar

CUT_NOTE = "\n… (cut: {n:,} more characters)"


def cut(text: str, limit: int, *, note: str = CUT_NOTE) -> str:
    """`text` if it fits in `limit` characters, else its head plus a note, within `limit`.
    A fence left open by the cut is closed before the note."""
    if len(text) <= limit:
        return text
    # the note's own length depends on n; reserve for the largest possible n
    reserve = len(note.format(n=len(text))) + 4  # + a closing "\n```"
    head = text[: max(0, limit - reserve)]
    if head.count("```") % 2 == 1:
        head = head.rstrip("\n") + "\n```"
    return head + note.format(n=len(text) - len(head))


def split_blocks(text: str, limit: int, max_parts: int, *, note: str = CUT_NOTE) -> list[str]:
    """Split long text into at most `max_parts` pieces of at most `limit` characters, on line
    boundaries where possible; what does not fit in the last piece is cut with the note."""
    parts: list[str] = []
    rest = text
    while rest and len(parts) < max_parts - 1 and len(rest) > limit:
        at = rest.rfind("\n", 0, limit)
        if at <= limit // 2:
            at = limit
        piece, rest = rest[:at], rest[at:].lstrip("\n")
        if piece.count("```") % 2 == 1:  # keep code fenced on both sides of the split
            piece = piece.rstrip("\n") + "\n```"
            rest = "```\n" + rest
        parts.append(piece)
    if rest:
        parts.append(cut(rest, limit, note=note))
    return parts


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Recent(Generic[K, V]):
    """A small bounded, expiring map: which chat message an answer came from (to react on it
    when its result arrives), which interaction may still get a private follow-up. Losing an
    entry (restart, expiry) only loses a reaction or moves a detail into the public reply."""

    ttl_s: float = 14 * 60.0
    size: int = 2048
    _data: dict[K, tuple[float, V]] = field(default_factory=dict)

    def put(self, key: K, value: V) -> None:
        self._data.pop(key, None)
        self._data[key] = (monotonic(), value)
        while len(self._data) > self.size:
            self._data.pop(next(iter(self._data)))

    def pop(self, key: K) -> V | None:
        entry = self._data.pop(key, None)
        if entry is None or monotonic() - entry[0] > self.ttl_s:
            return None
        return entry[1]

    def get(self, key: K) -> V | None:
        entry = self._data.get(key)
        if entry is None or monotonic() - entry[0] > self.ttl_s:
            return None
        return entry[1]
