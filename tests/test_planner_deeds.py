"""Deeds (docs/scene.md, "The engine decides"): the engine reads what an act does to an
NPC or a faction, the routed planner writes the skills' inputs from that reading, and
the eval checks those inputs. The reading is pure; the planner tests use the real MiniLM
router and the real model; the skills' own tables are read from the shipped scripts."""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from conftest import BUILTIN_SKILLS, REPO
from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.skillrun.plan import Plan, ToolInvocation
from narratoria.runtime.planner.deeds import (
    person_by_role,
    asks_standing,
    names_a_group,
    EVENTS,
    MAGNITUDES,
    MAX_PERCEPTION_DELTA,
    PERCEPTION_ALIASES,
    PERCEPTION_EVENTS,
    campaign_entities,
    cast_entities,
    entity_id,
    mentions,
    planned_effects,
    read_deeds,
)
from narratoria.runtime.planner.evaluate import (
    CaseOutcome,
    DatasetError,
    EvalCase,
    ExpectedEffect,
    parse_dataset,
    summarize,
)
from narratoria.runtime.skills.registry import SkillRegistry

pytestmark = pytest.mark.model

LONG_EBB = campaign_entities(REPO / "campaigns" / "long_ebb")
NINTH = campaign_entities(REPO / "campaigns" / "ninth_milestone")
BUILTIN_NAMES = frozenset(s.skill for s in SkillRegistry([BUILTIN_SKILLS]).scripts(
    include_disabled=True))


def script_module(skill: str, script: str):
    """A shipped skill script (no .py suffix) loaded as a module, its folder importable."""
    path = BUILTIN_SKILLS / skill / "scripts" / script
    sys.path.insert(0, str(path.parent))
    try:
        loader = importlib.machinery.SourceFileLoader(f"_skill_{script.replace('-', '_')}",
                                                      str(path))
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name,
                                                                                 loader))
        sys.modules[loader.name] = module  # dataclasses look their module up
        loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


def changes(text: str, entities=()) -> set[tuple[str, str, str]]:
    """(kind, id, up|down) of every deed ``text`` does."""
    return {(d.target.kind, d.target.id, "up" if d.delta > 0 else "down")
            for d in read_deeds(text, entities)}


# --- the skills' own numbers and ids -----------------------------------------------------------


def test_the_perception_table_is_the_skills_own():
    update = script_module("npc-perception", "update-perception")
    assert PERCEPTION_EVENTS == update.EVENT_DELTAS
    assert PERCEPTION_ALIASES == update.ALIASES
    assert MAGNITUDES == update.MAGNITUDES and MAX_PERCEPTION_DELTA == update.MAX_DELTA
    # Every event the engine writes is within what the skills accept.
    assert all(abs(e.perception) <= 50 and abs(e.reputation) <= 50 for e in EVENTS.values())


def test_ids_are_those_the_reputation_skill_stores():
    reputation = script_module("reputation", "_reputation.py")
    for name in ("Lampwrights' Guild", "Merchants Guild", "the City Watch ", "House Arden"):
        assert entity_id(name) == reputation.faction_id(name).removeprefix("the_")


# --- who a campaign names -------------------------------------------------------------------


def test_a_campaigns_cast_and_factions_are_its_entities():
    by_id = {e.id: e for e in LONG_EBB}
    assert {e.id for e in LONG_EBB if e.kind == "npc"} == {
        "odile_venn", "tamsin_cask", "wick", "corran_hale", "meret_alder"}
    assert {e.id for e in LONG_EBB if e.kind == "faction"} == {
        "lampwrights_guild", "tithe_wardens", "bellkeepers"}
    assert by_id["corran_hale"].faction == "tithe_wardens"
    # First and last names alone name an NPC; a faction's last word names it too.
    found = mentions("I thank Odile, then Hale, then the guild and the wardens", LONG_EBB)
    assert [m.entity.id for m in found] == ["odile_venn", "corran_hale", "lampwrights_guild",
                                            "tithe_wardens"]
    assert [e.id for e in NINTH if e.kind != "thing"] == ["orla_finch"]
    # Places and items are things: named, and never someone a deed is done to.
    assert {"tide_lantern", "bell_chapel"} <= {e.id for e in LONG_EBB if e.kind == "thing"}
    bellkeepers = by_id["bellkeepers"]
    assert (("bell", "chapel"), ("chapel",)) in [h.aliases for h in bellkeepers.holdings]


def test_a_shared_word_names_no_one_alone():
    entities = cast_entities({"a": {"name": "Anna Vell"}, "b": {"name": "Bram Vell"}})
    assert [m.entity.id for m in mentions("I wave to Vell", entities)] == []
    assert [m.entity.id for m in mentions("I wave to Bram", entities)] == ["b"]


def test_without_a_cast_names_and_groups_come_from_the_words():
    found = mentions("I tell Captain Varro that the Temple of the Dawn and the shepherds agree")
    assert [(m.entity.kind, m.entity.id) for m in found] == [
        ("npc", "varro"), ("faction", "temple_of_the_dawn"), ("faction", "shepherds")]
    # a firm is a group by what it does
    found = mentions("I leak Veridian Biotech's trial data to the press")
    assert [(m.entity.kind, m.entity.id) for m in found] == [("faction", "veridian_biotech")]


@pytest.mark.parametrize("text, named", [
    # a title opens a name, first word or not
    ("Captain Reyes orders the crew to lower the boats.", ["reyes"]),
    ("Doc Halvorsen slaps Sorel across the face", ["halvorsen", "sorel"]),
    # whom a line of speech is said to, and no further than the comma
    ('"Jory, I was wrong to call you a coward. I\'m sorry."', ["jory"]),
    ('"Mallet, you\'re a drunk and every soul on this lot knows it."', ["mallet"]),
    ('"Sure, you said midnight."', []),                 # no one called Sure
    ('"Later, you and I will talk."', []),
    # "at" and "on" aimed at someone, not a place
    ("I laugh at Finnegan when he trips over the rigging.", ["finnegan"]),
    ("I pin the missing fuel on Ortega during the inquiry", ["ortega"]),
    ("I wait at Dunmore for the coach", []),
    ("I land the shuttle on Titan", []),
    # a word in capitals is painted or shouted, not a name
    ("I paint LIARS in red across the mill gate", []),
    ("hey GM, I hand Bram my spare knife", ["bram"]),
    ("I reboot the relay so ARIA can hear the crew again", ["aria"]),  # a name in capitals
    # a name ends with its sentence
    ("I wave goodbye to Jory. We ride out at dawn", ["jory"]),
    # a street, a station, a port is a place
    ("I stroll down Main Street and tip the busker", []),
    ("I hitch a ride to Port Kessel with Mara", ["mara"]),
    ("I dock at Halley Station and buy Osei a drink", ["osei"]),
])
def test_without_a_cast_a_name_is_read_where_players_write_one(text, named):
    assert [m.entity.id for m in mentions(text) if m.entity.kind == "npc"] == named


# --- reading deeds ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, entities, expected", [
    ("I steal Odile's purse from her apron", LONG_EBB, {("npc", "odile_venn", "down")}),
    ("I pickpocket Corran Hale", LONG_EBB, {("npc", "corran_hale", "down")}),
    ("I quietly decide to help Tamsin with the bell rope", LONG_EBB,
     {("npc", "tamsin_cask", "up")}),
    ("I say sorry to Wick", LONG_EBB, {("npc", "wick", "up")}),
    ("I donate my wages to the Bellkeepers", LONG_EBB, {("faction", "bellkeepers", "up")}),
    ("I denounce the Harbour Council in the square", LONG_EBB,
     {("faction", "harbour_council", "down")}),
    ("I grab Wick's collar and laugh at him", LONG_EBB, {("npc", "wick", "down")}),
    # whom a betrayal is made to gains by it
    ("I betray Orla Finch to the riders", NINTH,
     {("npc", "orla_finch", "down"), ("faction", "riders", "up")}),
    ("I give the shepherds a sack of oats", NINTH, {("faction", "shepherds", "up")}),
    # typed in lower case, an owner that is a group is the group, not someone by that name
    ("i smash the rowing club's trophy cabinet", (), {("faction", "club", "down")}),
    ("i torch the harbour watch's boathouse", (), {("faction", "harbour_watch", "down")}),
    ("i smash rook's lantern", (), {("npc", "rook", "down")}),
])
def test_a_deed_names_whom_and_which_way(text, entities, expected):
    assert changes(text, entities) == expected


@pytest.mark.parametrize("text, entities, expected", [
    # objects joined by "and" stay one clause; a verb after "and" starts another
    ("I share my bread and dried fish with Wick", LONG_EBB, {("npc", "wick", "up")}),
    ("I insult Odile and the guild", LONG_EBB,
     {("npc", "odile_venn", "down"), ("faction", "lampwrights_guild", "down")}),
    ("I stand between Orla and the riders", NINTH, {("npc", "orla_finch", "up")}),
    # speech against someone is done to whom it is about
    ("I spread rumours in the tavern that the Lampwrights cheat their buyers", LONG_EBB,
     {("faction", "lampwrights_guild", "down")}),
    ("I gossip to the fishwives about Odile's debts", LONG_EBB, {("npc", "odile_venn", "down")}),
    ("I tell Corran a made-up story about where the salvage went", LONG_EBB,
     {("npc", "corran_hale", "down")}),
    ("I feed Corran a string of lies about the Undercourt", LONG_EBB,
     {("npc", "corran_hale", "down")}),
    ("I threaten to tell the wardens about Meret's smuggling", LONG_EBB,
     {("npc", "meret_alder", "down")}),
    # a faction's places and things: its seat, what is in it, its tags
    ("I deface the Roll of the Drowned in the bell chapel", LONG_EBB,
     {("faction", "bellkeepers", "down")}),
    ("I steal candles from the bell chapel", LONG_EBB, {("faction", "bellkeepers", "down")}),
    ("I cut the rope of the tide bell so it cannot ring", LONG_EBB,
     {("faction", "bellkeepers", "down")}),
    # groups named by their words, in any campaign
    ("I swindle the harbour council's clerk out of a week of rations", LONG_EBB,
     {("faction", "harbour_council", "down")}),
    ("I mend the nets of the quay fishermen for free", LONG_EBB,
     {("faction", "fishermen", "up")}),
    ("I shout insults at the King's Riders from the doorway", NINTH,
     {("faction", "kings_riders", "down")}),
    ("I slander the Silver Hand in every tavern in town", (), {("faction", "silver_hand", "down")}),
    ("I extort protection money from the fishmongers", (), {("faction", "fishmongers", "down")}),
    ("I rob the temple's poor box", (), {("faction", "temple", "down")}),
    # done for someone, handed over, made to gain
    ("I repaint a blank board on the Roll of Names for the Bellkeepers", LONG_EBB,
     {("faction", "bellkeepers", "up")}),
    ("I stand guard at the door so Orla can sleep", NINTH, {("npc", "orla_finch", "up")}),
    ("I hand Wick over to the Tithe Wardens", LONG_EBB,
     {("npc", "wick", "down"), ("faction", "tithe_wardens", "up")}),
    ("I hand the purse over to Odile", LONG_EBB, {("npc", "odile_venn", "up")}),
    ("I slip Odile a few coins to cover her rent", LONG_EBB, {("npc", "odile_venn", "up")}),
    ("I forgive Wick for stealing my button", LONG_EBB, {("npc", "wick", "up")}),
    ("I let Corran take the credit for finding the ledger", LONG_EBB,
     {("npc", "corran_hale", "up")}),
    ("I read Orla's letter without asking her", NINTH, {("npc", "orla_finch", "down")}),
    ("I sell the Guild of Masons a cracked bell as sound", (),
     {("faction", "guild_of_masons", "down")}),
    ("I trip Meret as she walks past", LONG_EBB, {("npc", "meret_alder", "down")}),
])
def test_deeds_read_past_the_verb_lists(text, entities, expected):
    assert changes(text, entities) == expected


@pytest.mark.parametrize("text", [
    "I watch Wick steal a button from a warden",        # someone else's deed
    "Tamsin hands me a cup of tea",                      # done to the player
    "Would Odile forgive me if I stole from her?",       # a question
    "I ask Corran Hale to help me with the crates",      # asking is not helping
    "I give the beggar a copper coin",                   # a nameless passer-by
    "I thank Odile Venn and leave",                      # a courtesy
    "I make a Dexterity saving throw",                   # dice words
    "Give me three choices for dealing with the riders",
    "I'm going to look at the bell",
    "I attack the ghoul in the bell chapel",             # in their seat, not to them
    "I give the Heartglass a polish",                    # a thing, not a group
    "I praise the Tide Lantern's craft",
    "I steal the papers from the desk",
    "I cut bread for Wick",                              # a harm word, done for someone
])
def test_not_every_sentence_with_a_name_is_a_deed(text):
    assert read_deeds(text, LONG_EBB + NINTH) == []


def test_a_deed_gives_the_skills_their_inputs_within_bounds():
    [theft] = read_deeds("I steal Odile Venn's purse", LONG_EBB)
    assert (theft.skill, theft.event, theft.delta) == ("npc-perception", "stole", -25)
    [gift] = read_deeds("I donate ten silver to the Bellkeepers", LONG_EBB)
    assert (gift.skill, gift.target.name, gift.delta) == ("reputation", "Bellkeepers", 10)


# --- the eval reads a plan's inputs back ---------------------------------------------------------


def tool(ref: str, **tool_input) -> ToolInvocation:
    return ToolInvocation(toolId="t", toolPath=ref, input=tool_input)


def test_planned_effects_follow_what_the_skills_would_do():
    assert [(e.target, e.change, e.delta) for e in planned_effects(
        "npc-perception/update-perception", {"npcId": "Odile_Venn", "event": "robbed",
                                             "magnitude": "major"})] == [
        ("odile_venn", "down", -50.0)]
    assert [(e.target, e.change) for e in planned_effects(
        "reputation/update-reputation", {"changes": [
            {"faction": "Lampwrights' Guild", "delta": 5}, {"faction": "City Watch", "delta": -5}]})
    ] == [("lampwrights_guild", "up"), ("city_watch", "down")]
    assert planned_effects("npc-perception/update-perception",
                           {"npcId": "x", "event": "waved"}) [0].change == "none"
    assert planned_effects("dice-roller/roll-dice", {"formula": "1d20"}) == []


def test_an_expected_effect_needs_the_target_the_direction_and_the_size():
    down = ExpectedEffect("npc-perception", ("odile_venn",), "down", "notable")
    plan = Plan(requestId="p", tools=[tool("npc-perception/update-perception",
                                           npcId="odile_venn", event="stole")])
    assert down.met(plan)
    assert not ExpectedEffect("npc-perception", ("odile_venn",), "down", "major").met(plan)
    assert not ExpectedEffect("npc-perception", ("wick",), "down").met(plan)
    assert not ExpectedEffect("npc-perception", ("odile_venn",), "up").met(plan)
    asked = Plan(requestId="p", tools=[tool("reputation/query-reputation",
                                            query="Do the Tithe Wardens like me?")])
    assert ExpectedEffect("reputation", ("tithe_wardens",), "query").met(asked)
    assert not ExpectedEffect("reputation", ("bellkeepers",), "query").met(asked)


def test_effects_in_a_dataset_are_checked_and_scored(tmp_path):
    good = {"input": "I rob Wick", "campaign": "long_ebb", "expected_skills": ["npc-perception"],
            "effects": [{"skill": "npc-perception", "target": "wick", "change": "down"}]}
    [case] = parse_dataset(json.dumps(good), "d.jsonl", BUILTIN_NAMES)
    assert case.campaign == "long_ebb" and case.effects[0].targets == ("wick",)
    bad = [({**good, "campaign": "nowhere_at_all"}, "campaign: 'nowhere_at_all' is neither"),
           ({**good, "effects": [{"skill": "reputation", "target": "x", "change": "up"}]},
            "effects[0].skill: 'reputation' is not among expected_skills"),
           ({**good, "effects": [{"skill": "npc-perception", "target": "Wick", "change": "up"}]},
            "effects[0].target: expected an id"),
           ({**good, "effects": [{"skill": "npc-perception", "target": "wick", "change": "query",
                                  "size": "small"}]}, "effects[0].size"),
           ({**good, "effects": [{"skill": "npc-perception", "target": "wick",
                                  "change": "sideways"}]}, "effects[0].change")]
    for doc, message in bad:
        with pytest.raises(DatasetError) as error:
            parse_dataset(json.dumps(doc), "d.jsonl", BUILTIN_NAMES)
        assert str(error.value).startswith("d.jsonl:1: ") and message in str(error.value)
    right = Plan(requestId="p", tools=[tool("npc-perception/update-perception", npcId="wick",
                                            event="stole")])
    wrong = Plan(requestId="p", tools=[tool("npc-perception/update-perception",
                                            npcId="blacksmith_aldric", event="helped")])
    outcomes = [CaseOutcome(case, ("npc-perception",), True, 10.0, plan=plan)
                for plan in (right, wrong)]
    report = summarize(outcomes)
    assert (report["effect_cases"], report["effect_accuracy"]) == (2, 0.5)
    assert report["effect_mistakes"][0]["tools"][0]["input"]["npcId"] == "blacksmith_aldric"
    assert report["skill_accuracy"] == 1.0  # the right skill with the wrong input


def test_a_case_without_effects_scores_as_before():
    case = EvalCase(input="I roll", expected_skills=("dice-roller",))
    report = summarize([CaseOutcome(case, ("dice-roller",), True, 1.0)])
    assert report["effect_cases"] == 0 and report["effect_accuracy"] is None


# --- the routed planner writes the deed's calls ---------------------------------------------------


def plan_for(routed, every, text: str, entities=()) -> Plan:
    from narratoria.runtime.skillrun.plan import validate_plan

    plan = asyncio.run(routed.generate(PlanRequest(text, every, entities=entities)))
    validate_plan(plan)
    assert len({t.toolId for t in plan.tools}) == len(plan.tools)
    return plan


def calls(plan: Plan, skill: str) -> list[tuple[str, dict]]:
    return [(t.toolPath, t.input) for t in plan.tools if t.toolPath.startswith(skill + "/")]


@pytest.mark.parametrize("text", [
    "What do the Bellkeepers make of me these days?",
    "Are the wardens out to get me?",
    "Check my reputation with the Tithe Wardens.",
    "Am I in Odile's good books?",
    "Where do I stand with the Lampwrights' Guild?",
    "Tell me where I stand with Helix Dynamics.",
    "How much goodwill do I have left with the church?",
    "whats my rep with the tithe wardens",
    "rep with tanaka heavy industries?",
    "Check my relationship with Kaito.",
    "how well thought of am i among the lanterns",
])
def test_asking_where_one_stands_in_other_words(text):
    assert asks_standing(text)


@pytest.mark.parametrize("text", ["I think of home", "I check the bolts on the shutters",
                                  "Do the wardens patrol at night?",
                                  "what does the union rep want?",
                                  "How is the Guild's relationship with the wardens?",
                                  "Tell me where the ferry stands"])
def test_not_every_question_asks_where_one_stands(text):
    assert not asks_standing(text)


def test_a_deed_to_a_faction_is_written_by_the_engine(routed, every):
    before = routed.model.last_stats
    plan = plan_for(routed, every, "I donate my whole week's wages to the Bellkeepers", LONG_EBB)
    [(ref, tool_input)] = calls(plan, "reputation")
    assert ref == "reputation/update-reputation"
    [change] = tool_input["changes"]
    assert (entity_id(change["faction"]), change["delta"] > 0) == ("bellkeepers", True)
    if routed.last_routing.chosen == [] or set(routed.last_routing.chosen) <= {"reputation"}:
        assert routed.model.last_stats is before  # nothing left for the model to fill


def test_a_deed_to_an_npc_by_first_name_reaches_the_cast_id(routed, every):
    plan = plan_for(routed, every, "I rob Tamsin of her bell token and laugh at her", LONG_EBB)
    [(ref, tool_input)] = calls(plan, "npc-perception")
    assert ref == "npc-perception/update-perception"
    assert (tool_input["npcId"], tool_input["event"], tool_input["delta"]) == (
        "tamsin_cask", "stole", -25)


def test_a_risky_deed_rolls_and_changes_the_npc(routed, every):
    plan = plan_for(routed, every, "I try to pickpocket Corran Hale while he weighs a sack",
                    LONG_EBB)
    assert calls(plan, "dice-roller")
    [(_, tool_input)] = calls(plan, "npc-perception")
    assert tool_input["npcId"] == "corran_hale" and tool_input["delta"] < 0
    assert all(not t.required for t in plan.tools if t.toolPath.startswith("npc-perception/"))


def test_asking_where_one_stands_queries_whom_it_names(routed, every):
    plan = plan_for(routed, every, "How does Orla feel about me after tonight?", NINTH)
    assert calls(plan, "npc-perception") == [("npc-perception/query-perception",
                                              {"npcId": "orla_finch"})]


@pytest.mark.parametrize("text", ["is the merchant league still sore at me",
                                  "What do the blue coats at the booth think of me these days?"])
def test_a_standing_question_naming_no_known_group_asks_the_reputation_skill(routed, every, text):
    """No campaign entity is named: the query goes out with the player's words, which
    the reputation script matches to the groups it knows (or lists them all)."""
    plan = plan_for(routed, every, text)
    assert calls(plan, "reputation") == [("reputation/query-reputation", {"query": text})]


def test_a_standing_question_naming_no_one_changes_no_one(routed, every):
    """The router leaves npc-perception to the model when no NPC is named; the model
    wrote an update for a question ("varro", -20). A question moves no one: it is asked."""
    plan = plan_for(routed, every, "what does the blacksmith think of me?", LONG_EBB)
    assert not [t for t in plan.tools if t.toolPath.endswith("/update-perception")
                or t.toolPath.endswith("/update-reputation")]
    cast = {e.id for e in LONG_EBB}
    for ref, tool_input in calls(plan, "npc-perception"):
        assert ref == "npc-perception/query-perception"
        assert tool_input.get("npcId") in cast | {"blacksmith", None}
        assert set(tool_input.get("npcIds", [])) <= cast | {"blacksmith"}


def model_plan(*tools: tuple[str, dict, list[str]]) -> Plan:
    """A plan as the model writes one: (path, input, dependencies) per call."""
    return Plan(requestId="r1", parallel=False, tools=[
        ToolInvocation(toolId=f"t{i}", toolPath=path, input=tool_input, dependencies=deps)
        for i, (path, tool_input, deps) in enumerate(tools, 1)])


@pytest.mark.parametrize("npc", ["varro", "npc-perception/query-perception",
                                 "varro_mcc_npc_npc", "", 7])
def test_a_perception_call_for_an_npc_no_one_named_is_dropped(npc):
    """The model filled the call for a question naming no one with an NPC of its own
    ("varro"), even the tool's path; the query stored state under that id."""
    from narratoria.runtime.planner.routed import grounded

    plan = grounded(model_plan(("npc-perception/query-perception", {"npcId": npc}, [])),
                    PlanRequest("what do they all think of me now?", [], entities=LONG_EBB))
    assert plan.tools == [] and plan.narrative


@pytest.mark.parametrize("text, npc", [
    ("what does the blacksmith think of me?", "blacksmith"),
    ("I saved the innkeeper's daughter; she should like me more now.", "innkeepers_daughter"),
    ("Is the guard captain friendly toward me or still wary?", "guard_captain"),
    ("What is the ship's doctor's opinion of me?", "ships_doctor"),
])
def test_a_made_up_npc_becomes_the_person_the_words_name(text, npc):
    from narratoria.runtime.planner.routed import grounded

    plan = grounded(model_plan(("npc-perception/query-perception", {"npcId": "varro"}, [])),
                    PlanRequest(text, [], entities=LONG_EBB))
    assert [t.input for t in plan.tools] == [{"npcId": npc}]


def test_a_perception_call_keeps_the_cast_and_the_players_words():
    from narratoria.runtime.planner.routed import grounded

    text = "I help the Blacksmith's apprentice, then ask Captain Varro for a drink"
    plan = grounded(model_plan(
        ("npc-perception/update-perception", {"npcId": "apprentice", "event": "helped"}, []),
        ("npc-perception/update-perception", {"npcId": "captain_varro", "event": "gift"}, []),
        ("npc-perception/update-perception", {"npcId": "odile_venn", "event": "gift"}, []),
        ("npc-perception/query-perception", {"npcIds": ["odile_venn", "meret", "wick"]}, []),
        ("npc-perception/update-perception", {"npcId": "meret", "event": "lied"}, []),
    ), PlanRequest(text, [], entities=LONG_EBB))
    assert [(t.toolPath.split("/")[1], t.input.get("npcId") or t.input["npcIds"])
            for t in plan.tools] == [
        ("update-perception", "apprentice"), ("update-perception", "captain_varro"),
        ("update-perception", "odile_venn"),
        ("query-perception", ["odile_venn", "blacksmiths_apprentice", "wick"]),
        ("update-perception", "blacksmiths_apprentice")]


@pytest.mark.parametrize("text, npc", [
    ("What does the blacksmith think of me after I paid his debts?", "blacksmith"),
    ("How does the old hermit feel about me since I insulted him?", "hermit"),
    ("Did we ever meet this merchant before, and what does he think of me?", "merchant"),
    ("I attempt to bluff the harbourmaster, who has never liked me.", "harbourmaster"),
    ("Am I in the harbour master's good books?", "harbour_master"),
    ("i stab the bandit leader", "bandit_leader"),
    ("is the merchant league still sore at me?", None),
    ("i punch the dock workers", None),
    ("I look at the map on the table", None),
    ("what do they think of me", None),
])
def test_person_by_role(text, npc):
    found = person_by_role(text)
    assert (found.id if found else None) == npc


def test_a_call_waiting_on_a_dropped_perception_call_no_longer_waits():
    from narratoria.runtime.planner.routed import grounded

    plan = grounded(model_plan(
        ("npc-perception/query-perception", {"npcId": "varro"}, []),
        ("dice-roller/roll-dice", {"formula": "2d6"}, ["t1"]),
    ), PlanRequest("I try to talk my way through", [], entities=LONG_EBB))
    assert [(t.toolPath, t.dependencies) for t in plan.tools] == [
        ("dice-roller/roll-dice", [])]


@pytest.mark.parametrize("text, group", [
    ("how popular am i with the greycloaks", True),
    ("where do i stand w the iron wolves", True),
    ("What is our standing with the rebel faction?", True),
    ("Are the mountain dwarves still angry with our company?", True),
    ("What does the blacksmith think of me after I paid his debts?", False),
    ("Is the witch suspicious of me?", False),
    ("I wonder if the princess likes me after the dance.", False),
    ("Is the guard captain friendly toward me or still wary?", False),
    ("does anyone here trust me?", False),
])
def test_a_group_is_told_from_one_person_by_trade(text, group):
    """Whom a standing question naming no known entity asks about: a group goes to the
    reputation query; one person by their trade is left to npc-perception."""
    assert names_a_group(text) is group


def test_the_routers_guess_of_a_deed_skill_stands_only_where_the_reading_is_not_sure_of_none(
        every):
    """The router's phrases match talk about a group as readily as a deed done to it;
    where the fitted reading finds neither a deed nor a question (``unsure``), its guess
    of a deed skill is dropped, and only that."""
    from narratoria.runtime.planner.router import Route, Routing
    from narratoria.runtime.planner.routed import decide

    refs = {s.ref for s in every}
    request = PlanRequest("Where do the Lampwrights keep their ledgers?", every,
                          entities=LONG_EBB)
    routing = Routing([Route("reputation", 0.4, "", True, 0.7),
                       Route("memory", 0.3, "", True, 0.6)], 0.2, "")
    assert decide(request, routing, [], refs) == ["reputation", "memory"]
    assert decide(request, routing, [], refs, unsure=True) == ["memory"]


def test_a_question_about_a_group_changes_no_standing(routed, every):
    text = "Where do the Lampwrights keep their ledgers?"
    assert routed.sense.turn_reading(text, LONG_EBB).unsure
    plan = plan_for(routed, every, text, LONG_EBB)
    assert not calls(plan, "reputation") and not calls(plan, "npc-perception")


def test_looking_and_moving_change_no_one(routed, every):
    for text in ("I walk with Wick down to the harbour steps",
                 "I look at the Bellkeepers' chapel from the quay"):
        plan = plan_for(routed, every, text, LONG_EBB)
        assert not calls(plan, "npc-perception") and not calls(plan, "reputation"), text


def test_an_oversized_item_file_is_not_read(tmp_path):
    """A campaign's item file past the text-file cap is skipped (validation names it),
    never read whole into the planner's memory."""
    items = tmp_path / "items"
    items.mkdir()
    (items / "tool.lantern.json").write_text('{"id": "lantern", "label": "Tide Lantern"}')
    big = '{"id": "huge", "label": "Huge Thing", "pad": "' + "x" * (1 << 20) + '"}'
    (items / "tool.huge.json").write_text(big)
    things = {e.id for e in campaign_entities(tmp_path) if e.kind == "thing"}
    assert "lantern" in things and "huge" not in things
