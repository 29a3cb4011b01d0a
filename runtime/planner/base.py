"""What every planner receives and returns (§5.4): the Narrator AI interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..plan import Plan
from ..skills.discovery import SkillScript


@dataclass(frozen=True)
class PlanRequest:
    player_input: str
    available: tuple[SkillScript, ...]
    disabled_skills: frozenset[str] = frozenset()
    attempt: int = 1
    parent_plan_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def offered(self) -> list[SkillScript]:
        """Scripts the planner may choose: available and not disabled."""
        return [s for s in self.available if s.skill not in self.disabled_skills]


class Planner(Protocol):
    name: str

    async def generate(self, request: PlanRequest) -> Plan: ...
