"""Streaks, with freezes: the one rule every streak in the bot is computed by.

A player's streak at a round is the number of rounds they solved in the longest run of the
channel's played rounds ending there in which no ISO week (of the rounds' local dates) has more
unsolved rounds than the channel's `streak_freezes` allows. So with the default of one, missing
one round a week costs nothing, and a second miss in the same week ends the streak there.

The rule is walked backwards from the newest round (`StreakWalk.step`, newest first): shrinking a
valid run keeps it valid, so the first miss that overdraws its week is exactly where the run
starts. Scoring (the streak bonus), `/quiz me` and the freezes left all use this walk.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date


def week_of(d: date) -> tuple[int, int]:
    iso = d.isocalendar()
    return iso[0], iso[1]


@dataclass
class StreakWalk:
    freezes_per_week: int
    streak: int = 0
    misses: dict[tuple[int, int], int] = field(default_factory=dict)  # forgiven misses per ISO week
    ended: bool = False

    def step(self, solved: bool, day: date) -> bool:
        """Take the next older round; False once the run has ended (the round is not part of it)."""
        if self.ended:
            return False
        if solved:
            self.streak += 1
            return True
        wk = week_of(day)
        if self.misses.get(wk, 0) >= self.freezes_per_week:
            self.ended = True
            return False
        self.misses[wk] = self.misses.get(wk, 0) + 1
        return True

    def freezes_left(self, today: date) -> int:
        """Misses this week that would still not break the current streak."""
        return max(0, self.freezes_per_week - self.misses.get(week_of(today), 0))


def streak_of(history: list[tuple[bool, date]], freezes_per_week: int) -> StreakWalk:
    """Walk `history` (solved, local date), newest first, until the run ends."""
    walk = StreakWalk(freezes_per_week)
    for solved, day in history:
        if not walk.step(solved, day):
            break
    return walk
