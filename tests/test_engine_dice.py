"""Dice are the engine's (runtime/planner/routed.py, runtime/turn/resolution.py): words alone
never call the dice-roller, and a roll the player gave no formula for rolls the engine's
check dice (2d6), so the dice the player sees are the dice the check reads. The routed
planner runs on the real default model and the real skills."""

from __future__ import annotations

import asyncio

import pytest

from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.planner.evaluate import case_entities
from narratoria.runtime.planner.routed import CHECK_FORMULA, engine_dice
from narratoria.runtime.skillrun.plan import Plan, ToolInvocation, validate_plan


def roll(tool_id: str = "t1", **tool_input) -> ToolInvocation:
    return ToolInvocation(toolId=tool_id, toolPath="dice-roller/roll-dice", input=tool_input)


def plan_of(*tools: ToolInvocation, narrative: str | None = None) -> Plan:
    return Plan(requestId="p", tools=list(tools), narrative=narrative)


def test_a_roll_without_a_formula_rolls_the_engines_check_dice():
    assert CHECK_FORMULA == "2d6"
    plan = engine_dice(plan_of(roll(reason="climb")), "I try to climb the slick sea wall")
    assert [t.input for t in plan.tools] == [{"reason": "climb", "formula": "2d6"}]
    given = engine_dice(plan_of(roll(formula="1d20")), "I roll 1d20 to climb the wall")
    assert [t.input for t in given.tools] == [{"formula": "1d20"}]  # the player's own dice


def test_words_alone_lose_the_dice_roller_and_keep_the_rest_of_the_plan():
    memory = ToolInvocation(toolId="t2", toolPath="memory/store-memory", input={"text": "x"},
                            dependencies=["t1"])
    plan = engine_dice(plan_of(roll(formula="2d6"), memory),
                       'I tell the warden that he should let me through the gate')
    assert [t.toolPath for t in plan.tools] == ["memory/store-memory"]
    assert plan.tools[0].dependencies == []  # never waits on a call that is gone
    validate_plan(plan)
    alone = engine_dice(plan_of(roll(formula="2d6")), 'I say "Let the dice decide, warden"')
    assert alone.tools == [] and alone.narrative  # the narrator takes the turn
    validate_plan(alone)


def rolls(routed, every, text: str, campaign: str = "") -> list[dict]:
    entities = case_entities(campaign, {}) if campaign else ()
    plan = asyncio.run(routed.generate(PlanRequest(text, every, entities=entities)))
    validate_plan(plan)
    return [t.input for t in plan.tools if t.toolPath.startswith("dice-roller/")]


def test_the_model_rolls_the_check_dice_when_the_player_names_none(routed, every):
    # This model copied the manifest's first example: "1d20+5 -> 17" beside a 2d6 check.
    [tool_input] = rolls(routed, every, "I try to climb the slick sea wall")
    assert tool_input["formula"] == "2d6"
    [tool_input] = rolls(routed, every, "I roll 3d6 to climb the slick sea wall")
    assert tool_input["formula"] == "3d6"


@pytest.mark.parametrize("text", [
    "I tell the warden that he should let me through the gate",  # the router picks dice
    'I say "Let the dice decide, warden"',
])
def test_words_to_someone_are_never_rolled_for(routed, every, text):
    assert rolls(routed, every, text) == []


@pytest.mark.parametrize("text", [
    "I hand Odile the lantern I found",       # the router picks the dice for this one
    "can I slip Tamsin a few coins",
    "I apologise to Meret Alder for doubting her",
])
def test_a_courteous_deed_is_never_rolled_for(routed, every, text):
    assert rolls(routed, every, text, "long_ebb") == []


@pytest.mark.parametrize("text", [
    "I roll 2d6 to slip Tamsin a few coins unseen",                  # the player asks
    "I bribe the Tithe Wardens to let me through",                   # a gift that buys
    "I quickly slip Tamsin a few coins before the wardens notice",   # a gift in secret
])
def test_a_courteous_deed_at_stake_still_rolls(routed, every, text):
    [tool_input] = rolls(routed, every, text, "long_ebb")
    assert tool_input["formula"] == "2d6"


def default_offered(every) -> tuple:
    """The skills a fresh install offers a player (each skill's ``defaultEnabled``)."""
    return tuple(s for s in every if s.skill in ("dice-roller", "npc-perception", "reputation"))


@pytest.mark.parametrize("text", [
    "Use the tide lantern",          # a menu's line: rolled (and could fail) before
    "Use the brass gas key",         # seen on a held-out campaign
    "Hold the boathook ready",
    "I use my lockpick",
])
def test_a_thing_used_and_nothing_more_is_never_rolled_for(routed, every, text):
    assert rolls(routed, default_offered(every), text, "long_ebb") == []


@pytest.mark.parametrize("text", [
    "I use the rope to climb down the sea wall",
    "Use the boathook and roll for it",
])
def test_a_thing_used_toward_a_risk_still_rolls(routed, every, text):
    [tool_input] = rolls(routed, default_offered(every), text, "long_ebb")
    assert tool_input["formula"] == "2d6"


@pytest.mark.parametrize("text", [
    # seen on an unseen campaign: a question to someone rolled "You barely manage it"
    "so corran hale is ur real name huh? lol why do u flinch every time someone says it",
    "Odile, what is the Heartglass really worth to the wardens?",
])
def test_a_question_that_does_nothing_is_never_rolled_for(routed, every, text):
    assert rolls(routed, default_offered(every), text, "long_ebb") == []


def test_a_question_with_the_dice_asked_still_rolls(routed, every):
    [tool_input] = rolls(routed, default_offered(every),
                         "Does the storm break tonight? Let the dice tell.", "long_ebb")
    assert tool_input["formula"] == "2d6"
