"""The pattern-based planner over the real skill registry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import BUILTIN_SKILLS, FIXTURE_SKILLS
from narratoria.runtime.planner import PatternPlanner, PlanRequest
from narratoria.runtime.skillrun.executor import PlanExecutor
from narratoria.runtime.skillrun.plan import validate_plan
from narratoria.runtime.skills import SkillRegistry


def make_skill(root: Path, name: str, scripts: list[str]) -> None:
    (root / name / "scripts").mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}\n---\n")
    for script in scripts:
        path = root / name / "scripts" / script
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)


@pytest.fixture(scope="module")
def available(tmp_path_factory) -> tuple:
    # Stand-in folders for the skills a later issue ships, so every pattern has a target.
    root = tmp_path_factory.mktemp("skills")
    make_skill(root, "memory", ["recall-memory"])
    make_skill(root, "reputation", ["query-reputation"])
    make_skill(root, "storyteller", ["narrate"])
    make_skill(root, "npc-perception", ["query-perception"])
    return tuple(SkillRegistry([BUILTIN_SKILLS, root]).scripts())


def plan_for(text: str, available, disabled=(), attempt=1, parent=None):
    request = PlanRequest(text, available, frozenset(disabled), attempt, parent)
    plan = PatternPlanner().plan(request)
    validate_plan(plan)
    return plan


@pytest.mark.parametrize("text,ref", [
    ("I roll the dice to pick the lock", "dice-roller/roll-dice"),
    ("What happened last time? I try to remember", "memory/recall-memory"),
    ("How is my reputation with the guild?", "reputation/query-reputation"),
    ("I talk to the innkeeper", "npc-perception/query-perception"),
    ("I examine the ancient door", "storyteller/narrate"),
])
def test_five_patterns(available, text, ref):
    plan = plan_for(text, available)
    assert [t.toolPath for t in plan.tools] == [ref]


def test_dice_formula_is_extracted(available):
    (tool,) = plan_for("I roll 2d6+1 for damage", available).tools
    assert tool.input["formula"] == "2d6+1"
    (tool,) = plan_for("roll 4d6kh3 for strength", available).tools
    assert tool.input["formula"] == "4d6kh3"
    (tool,) = plan_for("I roll for luck", available).tools
    assert tool.input["formula"] == "1d20"


def test_several_patterns_make_a_parallel_plan(available):
    plan = plan_for("I look around and roll the dice", available)
    assert {t.toolPath for t in plan.tools} == {"dice-roller/roll-dice", "storyteller/narrate"}
    assert plan.parallel and all(t.is_async for t in plan.tools)


def test_disabled_skills_are_respected_with_alternatives(available):
    plan = plan_for("I talk to the guard", available, disabled={"npc-perception"})
    assert [t.toolPath for t in plan.tools] == ["storyteller/narrate"]
    plan = plan_for("I roll the dice", available, disabled={"dice-roller"})
    assert plan.tools == [] and plan.narrative
    assert plan.disabledSkills == ["dice-roller"]


def test_replan_metadata_is_carried(available):
    plan = plan_for("I roll", available, attempt=3, parent="prev")
    assert plan.metadata.generationAttempt == 3 and plan.metadata.parentPlanId == "prev"


def test_unrecognised_input_gets_a_narrative_only_plan(available):
    plan = plan_for("I hum quietly.", available)
    assert plan.tools == [] and "hum quietly" in plan.narrative


def test_the_dice_plan_runs_for_real():
    registry = SkillRegistry([BUILTIN_SKILLS, FIXTURE_SKILLS])
    plan = PatternPlanner().plan(PlanRequest("I roll 3d6", tuple(registry.scripts())))
    result = asyncio.run(PlanExecutor(registry).execute(plan))
    assert result.success
    roll = result.aggregatedState["lastRoll"]
    assert 3 <= roll["total"] <= 18
