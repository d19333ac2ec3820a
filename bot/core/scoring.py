"""Scoring rules as pure functions.

A player's result for a round is computed from their stored attempts in submission order
(answer ids are assigned when the answer is stored, before grading), never from the order
gradings finish in, so the same attempts always give the same points.

- An attempt is worth `base(difficulty) x fraction`, where fraction is the share of hidden
  cases passed (or 0/1 when the item or the channel is all-or-nothing), minus an *absolute*
  penalty of `regime[k]` percent of the base for k earlier failed attempts (CodeRunner style:
  0, 10, 20, ... percent), never below zero.
- The round counts the player's best attempt: each attempt's row carries the increase over the
  best before it, so the rows of a round sum to the best attempt.
- The player's first passing attempt earns the first-solver bonus (by rank among the round's
  solvers, again in submission order) and the streak bonus (for each consecutive earlier round
  solved, capped).
- Each hint a player revealed takes its recorded share (`hint_cost` percent when it was
  revealed) off the item's points for that player, before everything above.
- `internal` verdicts (the runner's fault) are never scored: they are retried.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from runner.protocol import PLAYER_VERDICTS, Verdict

COUNTED_VERDICTS = frozenset(PLAYER_VERDICTS)
PARTIAL_VERDICTS = frozenset(v.value for v in Verdict if v.partial)


@dataclass(frozen=True)
class ScoringRules:
    points_by_difficulty: tuple[float, ...] = (10, 20, 30, 40, 50)
    partial_credit: bool = True  # False: every item all-or-nothing in this channel
    penalty_regime: tuple[float, ...] = (0, 10, 20)  # percent of the base per earlier failed attempt
    penalty_extend: bool = True  # continue the regime by its last step ("0, 10, 20, ...")
    penalty_max: float = 100.0
    first_bonus: tuple[float, ...] = (5, 3, 1)  # for the 1st, 2nd, 3rd solver
    streak_bonus: float = 2  # per consecutive earlier round solved
    streak_cap: int = 5  # at most this many steps of streak bonus
    streak_freezes: int = 1  # missed rounds per ISO week that do not break a streak (see streaks.py)
    hint_cost: float = 20.0  # percent of the item's points each hint revealed costs

    def base(self, difficulty: int) -> float:
        table = self.points_by_difficulty
        if not table:
            return 0.0
        return float(table[max(0, min(len(table) - 1, difficulty - 1))])

    def penalty_percent(self, failed_before: int) -> float:
        regime = self.penalty_regime or (0,)
        if failed_before < len(regime):
            p = regime[failed_before]
        elif self.penalty_extend and len(regime) >= 2:
            step = regime[-1] - regime[-2]
            p = regime[-1] + step * (failed_before - len(regime) + 1)
        else:
            p = regime[-1]
        return max(0.0, min(self.penalty_max, float(p)))

    def first_bonus_for(self, rank: int | None) -> float:
        if rank is None or rank >= len(self.first_bonus):
            return 0.0
        return float(self.first_bonus[rank])

    def streak_bonus_for(self, streak: int) -> float:
        steps = max(0, min(self.streak_cap, streak - 1))
        return float(self.streak_bonus) * steps

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def merged(self, overrides: dict[str, Any]) -> ScoringRules:
        """These rules with some keys replaced (per-channel settings over the config defaults)."""
        return rules_from_dict(overrides, base=self)


def rules_from_dict(d: dict[str, Any], base: ScoringRules | None = None) -> ScoringRules:
    """Build rules from a mapping; raises ValueError naming every bad key."""
    base = base or ScoringRules()
    kw: dict[str, Any] = {}
    problems: list[str] = []
    names = {f.name: f for f in fields(ScoringRules)}
    for key, value in (d or {}).items():
        if key not in names:
            problems.append(f"{key}: unknown scoring setting")
            continue
        default = getattr(base, key)
        try:
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError("expected true or false")
                kw[key] = value
            elif isinstance(default, tuple):
                if isinstance(value, dict) and key == "points_by_difficulty":
                    value = [value[k] for k in sorted(value, key=int)]
                if not isinstance(value, (list, tuple)) or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value):
                    raise ValueError("expected a list of non-negative numbers")
                if key == "points_by_difficulty" and len(value) != 5:
                    raise ValueError(f"expected five values, one per difficulty 1-5, got {len(value)}: "
                                     f"{list(value)}")
                kw[key] = tuple(float(v) for v in value)
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError("expected a non-negative integer")
                kw[key] = value
            else:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ValueError("expected a non-negative number")
                if key == "hint_cost" and value > 100:
                    raise ValueError(f"expected a percent from 0 to 100, got {value}")
                kw[key] = float(value)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{key}: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return ScoringRules(**{**{f: getattr(base, f) for f in names}, **kw})


def hinted_base(base: float, hint_costs: Sequence[float]) -> float:
    """The item's points left after the hints a player revealed (each costs its recorded
    percent of them); never below zero."""
    return base * max(0.0, 1.0 - sum(hint_costs) / 100.0)


def attempt_fraction(verdict: str, passed_cases: int | None, total_cases: int | None, *,
                     partial: bool) -> float:
    """The share of the item an attempt earned, before penalties."""
    if verdict == "passed":
        return 1.0
    if partial and verdict in PARTIAL_VERDICTS and total_cases:
        return max(0.0, min(1.0, (passed_cases or 0) / total_cases))
    return 0.0


@dataclass(frozen=True)
class Attempt:
    answer_id: int  # submission order
    player_id: int
    verdict: str
    fraction: float


@dataclass(frozen=True)
class AttemptScore:
    answer_id: int
    player_id: int
    attempt_value: float
    points: float
    first_bonus: float = 0.0
    streak_bonus: float = 0.0
    solved: bool = False
    streak: int = 0


def player_round(attempts: Sequence[Attempt], *, base: float, rules: ScoringRules,
                 first_rank: int | None, streak_before: int) -> list[AttemptScore]:
    """Score one player's attempts on one round, in submission order."""
    out: list[AttemptScore] = []
    best = 0.0
    failed = 0
    solved_seen = False
    for a in sorted(attempts, key=lambda x: x.answer_id):
        if a.verdict not in COUNTED_VERDICTS:
            continue
        value = round(max(0.0, base * a.fraction - base * rules.penalty_percent(failed) / 100.0), 2)
        points = round(max(0.0, value - best), 2)
        best = max(best, value)
        solved = a.verdict == "passed" and not solved_seen
        fb = sb = 0.0
        streak = 0
        if solved:
            solved_seen = True
            streak = streak_before + 1
            fb = rules.first_bonus_for(first_rank)
            sb = rules.streak_bonus_for(streak)
        if a.verdict != "passed":
            failed += 1
        out.append(AttemptScore(a.answer_id, a.player_id, value, round(points + fb + sb, 2), fb, sb, solved, streak))
    return out


def first_solvers(attempts: Iterable[Attempt]) -> list[int]:
    """Players in the order of their first passing attempt's submission."""
    firsts: dict[int, int] = {}
    for a in attempts:
        if a.verdict == "passed" and (a.player_id not in firsts or a.answer_id < firsts[a.player_id]):
            firsts[a.player_id] = a.answer_id
    return [p for p, _ in sorted(firsts.items(), key=lambda kv: kv[1])]


def score_round(attempts: Iterable[Attempt], *, base: float, rules: ScoringRules,
                streak_before: dict[int, int] | None = None) -> dict[int, AttemptScore]:
    """Every attempt's score for a whole round: the reference the incremental store must match."""
    attempts = list(attempts)
    streak_before = streak_before or {}
    order = first_solvers(attempts)
    rank = {p: i for i, p in enumerate(order)}
    by_player: dict[int, list[Attempt]] = {}
    for a in attempts:
        by_player.setdefault(a.player_id, []).append(a)
    out: dict[int, AttemptScore] = {}
    for player, own in by_player.items():
        for s in player_round(own, base=base, rules=rules, first_rank=rank.get(player),
                              streak_before=streak_before.get(player, 0)):
            out[s.answer_id] = s
    return out


def round_total(scores: Iterable[AttemptScore]) -> float:
    return round(sum(s.points for s in scores), 2)
