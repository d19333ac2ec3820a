"""The platform-neutral core: rounds, answers, grading, scoring, schedules, leaderboards, summaries.

Adapters use `QuizService` and the message/actor types; everything else is internal.
"""
from .clock import Clock, FakeClock, SystemClock
from .models import Actor, Attachment, Block, Channel, ChannelRef, Message, Round, Schedule
from .roles import RoleRules
from .runners import RunnerPool, RunnerSlot, RunnerUnavailable
from .scoring import ScoringRules
from .settings import AnswerSettings, CoreSettings, GradingSettings

__all__ = [
    "Actor", "AnswerSettings", "Attachment", "Block", "Channel", "ChannelRef", "Clock", "CoreSettings", "FakeClock",
    "GradingSettings", "Message", "QuizService", "RoleRules", "Round", "RunnerPool", "RunnerSlot",
    "RunnerUnavailable", "Schedule", "ScoringRules", "SystemClock",
]


def __getattr__(name: str):  # noqa: ANN202 - lazy: service imports storage, which imports core models
    if name == "QuizService":
        from .service import QuizService

        return QuizService
    raise AttributeError(name)
