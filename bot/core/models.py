"""Domain objects of the bot. Plain dataclasses: storage maps rows to them, adapters render them."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Literal

from runner.protocol import VERDICTS, Verdict  # noqa: F401 - the one list of verdicts (torch-free)

# The verdict on a result message for an answer the runner never graded (abandoned after retries,
# or its question left the bank): not a wrong answer, so adapters do not mark it as one.
UNGRADED = "ungraded"
AnswerState = Literal["queued", "grading", "graded", "abandoned", "void"]
RoundStatus = Literal["open", "closed", "skipped"]
Period = Literal["round", "week", "topic", "month", "all", "practice"]
PERIODS: tuple[str, ...] = ("round", "week", "topic", "month", "all", "practice")
WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


PRIVATE_SEP = "~"  # joins a quiz channel's id and a player's id in a private channel's reference


@dataclass(frozen=True)
class ChannelRef:
    """Where a message came from, as the platform names it."""

    platform: str
    workspace: str
    channel: str
    name: str = ""

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace}/{self.name or self.channel}"

    def private_for(self, user_id: str) -> ChannelRef:
        """The reference of a player's private channel (practice, review) under this quiz channel."""
        return ChannelRef(self.platform, self.workspace, f"{self.channel}{PRIVATE_SEP}{user_id}", self.name)

    @property
    def quiz_channel(self) -> str:
        """The quiz channel's id, also for a private channel's reference."""
        return self.channel.split(PRIVATE_SEP)[0]


@dataclass(frozen=True)
class Actor:
    """Who acts. `roles` are the platform role names; `admin` is the platform's own
    'manage server/workspace' permission, which counts as moderator and manager."""

    platform: str
    user_id: str
    name: str = ""
    roles: frozenset[str] = frozenset()
    admin: bool = False

    @property
    def display(self) -> str:
        return self.name or self.user_id


@dataclass
class Schedule:
    post_time: time = time(9, 0)
    timezone: str = "UTC"
    weekdays: tuple[int, ...] = (0, 1, 2, 3, 4)  # Monday = 0
    duration_min: int = 480
    language: str = "en"
    ramp: bool = True

    def describe(self) -> str:
        days = ",".join(WEEKDAY_NAMES[d] for d in self.weekdays) or "no days"
        hours, mins = divmod(self.duration_min, 60)
        dur = f"{hours}h{mins:02d}m" if mins else f"{hours}h"
        return (f"{self.post_time.strftime('%H:%M')} {self.timezone} on {days}, open for {dur}, "
                f"language {self.language}, difficulty ramp {'on' if self.ramp else 'off'}")


@dataclass(frozen=True)
class ChannelOptions:
    """What moderators and managers choose for a channel with `/quiz settings` and `/quiz digest`
    (beyond the schedule)."""

    names: bool = True  # a round's close names the first solver of each approach it shows
    # the weekly (and monthly) digest posts itself: in this channel, and/or to these managers' DMs
    digest_channel: bool = False
    digest_dms: tuple[str, ...] = ()  # platform user ids
    digest_weekday: int | None = None  # None: the config's
    digest_time: str = ""  # "HH:MM" in the channel's time zone; "": the config's
    digest_since: str = ""  # ISO instant the digest was switched on: nothing due before it is posted

    def describe(self) -> str:
        return f"names={'on' if self.names else 'off'} (a round's close names the first solver of each approach)"

    @property
    def digest_on(self) -> bool:
        return self.digest_channel or bool(self.digest_dms)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"names": self.names}
        if self.digest_on or self.digest_weekday is not None or self.digest_time:
            out.update(digest_channel=self.digest_channel, digest_dms=list(self.digest_dms),
                       digest_weekday=self.digest_weekday, digest_time=self.digest_time,
                       digest_since=self.digest_since)
        return out

    @classmethod
    def from_json(cls, data: Any) -> ChannelOptions:
        data = data if isinstance(data, dict) else {}
        wd = data.get("digest_weekday")
        return cls(names=bool(data.get("names", True)), digest_channel=bool(data.get("digest_channel", False)),
                   digest_dms=tuple(str(u) for u in data.get("digest_dms") or ()),
                   digest_weekday=wd if isinstance(wd, int) and 0 <= wd <= 6 else None,
                   digest_time=str(data.get("digest_time") or ""), digest_since=str(data.get("digest_since") or ""))


@dataclass
class Channel:
    id: int
    ref: ChannelRef
    enabled: bool
    schedule: Schedule
    scoring: dict[str, Any] = field(default_factory=dict)  # per-channel overrides
    options: ChannelOptions = field(default_factory=ChannelOptions)
    # the schedule applies to posting times from this instant on (enable or last schedule change)
    schedule_since: datetime | None = None
    # a player's private channel (practice and review rounds): its quiz channel and its player
    parent_id: int | None = None
    owner_id: int | None = None

    @property
    def private(self) -> bool:
        return self.parent_id is not None


@dataclass
class TopicWeek:
    id: int
    channel_id: int
    scope: str  # "3" (chapter) or "3.2" (section)
    title: str
    start: date
    end: date  # inclusive
    created_by: str = ""
    cancelled: bool = False

    def covers(self, d: date) -> bool:
        return not self.cancelled and self.start <= d <= self.end

    def matches(self, chapter: int, section: str) -> bool:
        return in_scope(self.scope, chapter, section)


def in_scope(scope: str, chapter: int, section: str) -> bool:
    """Is an item of this chapter and section in a topic's scope, a chapter ("3") or a section ("3.2")?"""
    if "." in scope:
        return section == scope
    return str(chapter) == scope


@dataclass
class Round:
    id: int
    channel_id: int
    item_id: str | None
    local_date: date
    scheduled: bool
    status: RoundStatus
    opened_at: datetime
    closes_at: datetime
    closed_at: datetime | None
    kind: str
    difficulty: int
    chapter: int
    language: str
    expected_output: str | None = None
    opened_by: str = ""
    message_ref: str | None = None
    number: int | None = None  # per channel, counting posted rounds only (what players see: "#3")
    reason: str = ""  # a day without a question: skipped | missed | nothing
    mode: str = "daily"  # daily (the channel's round) | practice | review (a player's private round)

    @property
    def label(self) -> str:
        """`#N` as players know the round (`practice #N` for a private one)."""
        n = f"#{self.number if self.number is not None else self.id}"
        return n if self.mode == "daily" else f"{self.mode} {n}"


@dataclass
class Grade:
    """The outcome of grading one answer, whoever graded it (runner or core)."""

    verdict: str
    fraction: float
    passed_cases: int = 0
    total_cases: int = 0
    message: str = ""
    cases: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None
    # the known mistake a failing answer behaves like (index into the item's wrong answers, or
    # its wrong outputs); feedback only, never part of the score
    mistake: int | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"


@dataclass
class Answer:
    id: int
    round_id: int
    channel_id: int
    player_id: int
    content: str
    submitted_at: datetime
    state: AnswerState
    tries: int = 0
    verdict: str | None = None
    fraction: float | None = None
    passed_cases: int | None = None
    total_cases: int | None = None
    message: str | None = None



@dataclass
class LeaderboardRow:
    rank: int
    player_id: int
    name: str
    points: float
    solved: int
    attempts: int


@dataclass
class PlayerCard:
    name: str
    points: float
    solved: int
    attempts: int
    rounds_played: int
    streak: int
    best_streak: int
    rank: int | None
    strongest: list[tuple[int, float]]  # (chapter, solve rate)
    weakest: list[tuple[int, float]]
    freezes_left: int = 0  # missed rounds this week that would not end the streak
    freezes_per_week: int = 0


@dataclass
class Attachment:
    filename: str
    data: bytes
    content_type: str


@dataclass
class Block:
    """A piece of a message: prose, or a code block the platform shows monospaced."""

    text: str
    code: bool = False
    lang: str = ""


@dataclass
class Message:
    """What the core says, platform-neutral. Adapters render blocks, cut to their limits and
    post in the round's thread when `round_id` is set and the platform has threads."""

    kind: str  # info | error | denied | round_open | round_close | result | ack | leaderboard | ...
    title: str = ""
    blocks: list[Block] = field(default_factory=list)
    ephemeral: bool = False  # only the actor should see it (platforms that can)
    round_id: int | None = None
    thread_ref: str | None = None  # the round post's platform reference, when known
    mention: str | None = None  # platform user id to address
    dm: bool = False  # a direct message to `mention` instead of a post in the channel (digests)
    files: list[Attachment] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # structured extras (leaderboard rows, form...)

    @property
    def text(self) -> str:
        """A plain-text rendering (console, logs, fallbacks)."""
        parts: list[str] = []
        if self.title:
            parts.append(self.title)
        for b in self.blocks:
            if b.code:
                parts.append(f"```{b.lang}\n{b.text.rstrip()}\n```")
            else:
                parts.append(b.text)
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "title": self.title,
            "blocks": [{"text": b.text, "code": b.code, "lang": b.lang} for b in self.blocks],
            "ephemeral": self.ephemeral, "round_id": self.round_id, "mention": self.mention,
            "data": self.data, "dm": self.dm,
            # the outbox keeps attachments (a digest's chart) with the message
            "files": [{"filename": f.filename, "content_type": f.content_type,
                       "data": base64.b64encode(f.data).decode("ascii")} for f in self.files],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Message:
        return cls(
            kind=d["kind"], title=d.get("title", ""),
            blocks=[Block(**b) for b in d.get("blocks", [])],
            ephemeral=d.get("ephemeral", False), round_id=d.get("round_id"),
            mention=d.get("mention"), data=d.get("data", {}), dm=bool(d.get("dm", False)),
            files=[Attachment(f["filename"], base64.b64decode(f["data"]), f["content_type"])
                   for f in d.get("files", [])],
        )


def info(text: str, *, title: str = "", ephemeral: bool = False, kind: str = "info") -> Message:
    return Message(kind=kind, title=title, blocks=[Block(text)], ephemeral=ephemeral)


NOT_ENABLED = "The quiz is not enabled in this channel. A moderator can turn it on with `/quiz enable`."


def error(text: str) -> Message:
    return Message(kind="error", blocks=[Block(text)], ephemeral=True)


def denied(text: str) -> Message:
    return Message(kind="denied", blocks=[Block(text)], ephemeral=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 answer`, `2 answers`, `0 players`: counts in messages read as English."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
