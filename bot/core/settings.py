"""What the core needs from the configuration, independent of how it was loaded."""
from __future__ import annotations

from dataclasses import dataclass, field

from .models import Schedule
from .roles import RoleRules
from .scoring import ScoringRules


@dataclass(frozen=True)
class GradingSettings:
    concurrency: int = 4  # answers graded at once
    retry_s: float = 5.0  # first health probe after a runner became unreachable; doubles with each failed probe
    retry_max_s: float = 300.0
    probe_max_s: float = 30.0  # ... up to this (or retry_max_s if lower): a runner back is seen within it
    internal_retries: int = 5  # `internal` verdicts before an answer is given up (never scored)
    batch: int = 64


@dataclass(frozen=True)
class AnswerSettings:
    max_chars: int = 20_000
    max_attempts: int = 20  # per player per round


@dataclass(frozen=True)
class DigestSettings:
    """When the weekly digest (and the monthly one, on the first posting day of a month) posts
    itself, in each channel's time zone; where is each channel's choice (`/quiz digest`)."""

    weekday: int = 0  # Monday
    time: str = "09:00"
    destination: str = "off"  # default for channels that chose nothing: off | channel


@dataclass(frozen=True)
class LearningSettings:
    review_per_day: int = 3  # review questions a player may take per day
    practice_hours: int = 24  # how long a private question stays open
    digest: DigestSettings = field(default_factory=DigestSettings)


@dataclass(frozen=True)
class CoreSettings:
    schedule: Schedule = field(default_factory=Schedule)  # defaults for newly enabled channels
    scoring: ScoringRules = field(default_factory=ScoringRules)
    answers: AnswerSettings = field(default_factory=AnswerSettings)
    grading: GradingSettings = field(default_factory=GradingSettings)
    learning: LearningSettings = field(default_factory=LearningSettings)
    roles: RoleRules = field(default_factory=RoleRules)
    tick_s: float = 20.0  # how often the scheduler looks at the clock
    leaderboard_size: int = 10
    # scoring overrides per channel, keyed "platform:workspace:channel" (from the config)
    channel_scoring: dict[str, dict] = field(default_factory=dict)
