"""What every planner receives and returns: the Narrator AI interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Protocol

from narratoria.runtime.skillrun.plan import Plan
from narratoria.runtime.skills.discovery import SkillScript


@dataclass(frozen=True)
class PlanRequest:
    player_input: str
    available: tuple[SkillScript, ...]
    disabled_skills: frozenset[str] = frozenset()
    attempt: int = 1
    parent_plan_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    hints: tuple[str, ...] = ()  # skills a router thinks the turn needs, best first
    # The NPCs and factions of the session's campaign (deeds.Entity): whom a deed can
    # name, and the ids the skills store them under. Empty: names are read from the text.
    entities: tuple[Any, ...] = ()
    # The session the plan is for: the model serves sessions in turn (.batching).
    session: str = ""

    def offered(self) -> list[SkillScript]:
        """Scripts the planner may choose: available and not disabled."""
        return [s for s in self.available if s.skill not in self.disabled_skills]


@dataclass(frozen=True)
class PlanShape:
    """How a model plan is narrowed beyond the offered scripts (see :mod:`.routed`)."""

    only: frozenset[str] | None = None   # skills the plan may call (None: every offered one)
    min_tools: int = 0                   # the plan must call at least this many
    max_tools: int | None = None         # and at most this many (None: the planner's cap)
    each: tuple[str, ...] = ()           # the plan calls each of these skills once, in order
    essential_inputs: bool = False       # inputs limited to required and example fields
    narrative: bool = True               # the plan carries its one-sentence narrative
    # script ref -> {field: value} the player spelled out ("roll 2d6"): fixed in the grammar
    fixed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class Planner(Protocol):
    name: str

    async def generate(self, request: PlanRequest) -> Plan: ...
