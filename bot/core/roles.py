"""Who may do what. Every protected command asks here, in the core, so no adapter can forget.

Rights come from user lists in the config (user ids, optionally `platform:` qualified), from
platform role names, and from the platform's own admin permission (manage server/workspace).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .models import Actor

Right = Literal["player", "moderator", "manager"]


@dataclass(frozen=True)
class RoleRules:
    moderators: frozenset[str] = frozenset()
    managers: frozenset[str] = frozenset()
    moderator_roles: frozenset[str] = frozenset()
    manager_roles: frozenset[str] = frozenset()
    admins_are_moderators: bool = True  # platform admins count as moderator and manager


def _listed(actor: Actor, users: frozenset[str]) -> bool:
    return actor.user_id in users or f"{actor.platform}:{actor.user_id}" in users


def _has_role(actor: Actor, roles: frozenset[str]) -> bool:
    wanted = {r.lower() for r in roles}
    return any(r.lower() in wanted for r in actor.roles)


def is_moderator(actor: Actor, rules: RoleRules) -> bool:
    return ((rules.admins_are_moderators and actor.admin) or _listed(actor, rules.moderators)
            or _has_role(actor, rules.moderator_roles))


def is_manager(actor: Actor, rules: RoleRules) -> bool:
    return ((rules.admins_are_moderators and actor.admin) or _listed(actor, rules.managers)
            or _has_role(actor, rules.manager_roles))


def allowed(actor: Actor, right: Right, rules: RoleRules) -> bool:
    if right == "player":
        return True
    if right == "moderator":
        return is_moderator(actor, rules)
    return is_manager(actor, rules)


def refusal(command: str, right: Right) -> str:
    """The clear message a refused actor sees."""
    who = {"moderator": "quiz moderators", "manager": "quiz managers"}.get(right, "players")
    return (f"`/quiz {command}` is for {who}. Ask an admin to add you to the {right} list "
            f"or give you a {right} role in the bot's config.")
