"""The pattern-based planner: deterministic plans from regular expressions.

It needs no model, so it serves tests, development, and the replan loop when
the model planner fails or is too slow. Each pattern names the scripts that
can serve it in order of preference; the first one offered (installed and not
disabled) is used, and an input no pattern can serve gets a narrative-only plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.skillrun.plan import Plan, PlanMetadata, ToolInvocation, new_plan_id
from narratoria.runtime.skills.discovery import SkillScript

DICE_FORMULA = re.compile(r"\b(\d{0,3}d\d{1,4}(?:k[hl]\d+|d[hl]\d+)?(?:\s*[+-]\s*\d+)?)\b", re.I)

InputBuilder = Callable[[str], dict[str, Any]]


def _dice_input(text: str) -> dict[str, Any]:
    match = DICE_FORMULA.search(text)
    return {"formula": match.group(1).replace(" ", "").lower() if match else "1d20",
            "reason": text[:200]}


def _query_input(text: str) -> dict[str, Any]:
    return {"query": text[:500]}


def _scene_input(text: str) -> dict[str, Any]:
    return {"scene": text[:500]}


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern[str]
    scripts: tuple[str, ...]  # skill/script refs in order of preference
    build_input: InputBuilder


PATTERNS: tuple[Pattern, ...] = (
    Pattern("dice", re.compile(r"\broll|\bdice?\b|\b\d*d\d+\b|\bluck\b|\bchance\b", re.I),
            ("dice-roller/roll-dice",), _dice_input),
    Pattern("recall", re.compile(r"\b(recall|remember|what happened|last time|memor)", re.I),
            ("memory/recall-memory",), _query_input),
    Pattern("reputation", re.compile(r"\b(reputation|standing|faction|guild|renown)", re.I),
            ("reputation/query-reputation",), _query_input),
    Pattern("talk", re.compile(r"\b(talk|speak|ask|say|greet|tell|chat|persuade)\b", re.I),
            ("npc-perception/query-perception", "storyteller/narrate"), _scene_input),
    Pattern("look", re.compile(r"\b(look|examine|inspect|search|observe|study|around)\b", re.I),
            ("storyteller/narrate",), _scene_input),
)

NARRATIVE_ONLY = "The story moves on as you {action}."


class PatternPlanner:
    name = "pattern"

    def __init__(self, patterns: tuple[Pattern, ...] = PATTERNS) -> None:
        self.patterns = patterns

    async def generate(self, request: PlanRequest) -> Plan:
        return self.plan(request)

    def plan(self, request: PlanRequest) -> Plan:
        offered = {s.ref: s for s in request.offered()}
        tools: list[ToolInvocation] = []
        matched: list[str] = []
        for pattern in self.patterns:
            if not pattern.regex.search(request.player_input):
                continue
            ref = next((r for r in pattern.scripts if r in offered), None)
            if ref is None or any(t.toolPath == ref for t in tools):
                continue
            matched.append(pattern.name)
            tools.append(ToolInvocation(
                toolId=f"{pattern.name}-{len(tools) + 1}",
                toolPath=ref,
                input=pattern.build_input(request.player_input),
                is_async=True,
            ))
        narrative = None
        if not tools:
            narrative = narrative_only(request.player_input)
        return Plan(
            requestId=new_plan_id(),
            tools=tools,
            narrative=narrative,
            parallel=len(tools) > 1,
            disabledSkills=sorted(request.disabled_skills),
            metadata=PlanMetadata(generationAttempt=request.attempt,
                                  parentPlanId=request.parent_plan_id),
        )


def narrative_only(player_input: str) -> str:
    """The narrative of a plan that calls no tool: the narrator takes it from there."""
    return NARRATIVE_ONLY.format(action=_as_action(player_input))


def _as_action(text: str) -> str:
    action = text.strip().rstrip(".!?")
    if action.lower().startswith("i "):
        action = action[2:]
    return action[:200] or "wait"
