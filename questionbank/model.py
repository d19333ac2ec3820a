"""Domain objects of the question bank, shared by the checker and the bot.

The bot imports these without torch: an item is content, the runner turns it into verdicts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["code", "output", "choice"]
Requires = Literal["cpu", "cuda"]
Lang = Literal["zh", "en"]
LANGS: tuple[Lang, ...] = ("zh", "en")


@dataclass(frozen=True)
class Text:
    """A text in both languages; `get` falls back to the other one so a player never sees nothing."""

    zh: str
    en: str

    def get(self, lang: str) -> str:
        if lang == "zh":
            return self.zh or self.en
        return self.en or self.zh


@dataclass(frozen=True)
class WrongAnswer:
    """A realistic mistake the hidden cases must catch (`check` asserts it fails)."""

    code: str
    why: str = ""
    # what a player whose answer behaves like this mistake is told (names the mistake, no values)
    hint: Text | None = None
    # line of the entry in its YAML file, so the checker can point at the mistake itself
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class WrongOutput:
    """An output players commonly predict for an `output` item, and the mistake behind it."""

    output: str
    hint: Text


@dataclass(frozen=True)
class Solution:
    """Another correct answer in a different idiom (`check` asserts it passes), so a change to
    an item's cases that would reject a correct player is caught before it ships."""

    code: str
    idea: str = ""
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Option:
    key: str
    text: Text


@dataclass(frozen=True)
class Item:
    id: str
    kind: Kind
    outline: tuple[str, ...]
    difficulty: int
    tags: tuple[str, ...]
    requires: Requires
    title: Text
    prompt: Text
    explanation: Text
    limits: dict[str, Any] = field(default_factory=dict)
    # code
    entrypoint: str = ""
    starter: str = ""
    setup: str = ""
    reference: str = ""
    probe: str = ""
    tolerances: dict[str, float] = field(default_factory=dict)
    wrong: tuple[WrongAnswer, ...] = ()
    solutions: tuple[Solution, ...] = ()
    hints: tuple[Text, ...] = ()  # revealed one at a time, at a cost, by /quiz hint
    ranks: int = 1  # > 1: graded in ranks mode (a gloo group of this many processes)
    features: tuple[str, ...] = ()  # what grading needs beyond the device: onnx, inductor
    mode: Literal["partial", "all_or_nothing"] = "partial"
    # output
    snippet: str = ""
    wrong_outputs: tuple[WrongOutput, ...] = ()
    # choice
    options: tuple[Option, ...] = ()
    correct: tuple[str, ...] = ()
    # where it came from, for file:line messages
    source_file: str = ""
    source_line: int = 0
    # line of each field in the YAML file (e.g. {"reference": 42}), for the checker's messages
    lines: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def chapter(self) -> int:
        """The outline chapter of the item's first outline id (`deep.*` items count as 0)."""
        first = self.outline[0] if self.outline else ""
        head = first.split(".", 1)[0]
        return int(head) if head.isdigit() else 0

    @property
    def section(self) -> str:
        """`chapter.section` of the first outline id, e.g. `2.1`; empty for deep items."""
        parts = (self.outline[0] if self.outline else "").split(".")
        return ".".join(parts[:2]) if parts and parts[0].isdigit() else ""

    @property
    def location(self) -> str:
        return f"{self.source_file}:{self.source_line}" if self.source_file else self.id

    def location_of(self, name: str) -> str:
        """`file:line` of one field (falls back to the item's own line)."""
        if not self.source_file:
            return self.id
        return f"{self.source_file}:{self.lines.get(name, self.source_line)}"
