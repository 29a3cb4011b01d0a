"""What a scene holds for the menu, and a session's opening, read from real campaigns:
``runtime/turn/scene_world.py``, no model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import TESTS
from narratoria.runtime.campaign.beat_tracker import BeatTracker, transition
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.host.frontend import free_text_allowed
from narratoria.runtime.planner.choices import (ChoiceRules, SceneFacts, Thing, UNLIKELY,
                                                clean_choices, final_menu, item_lines,
                                                present_people, world_menu)
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import broken_choices, meta_talk
from narratoria.runtime.turn.scene_world import (campaign_world, current_beat, opening_text,
                                            read_world, scene_facts)

CAMPAIGNS = TESTS.parent / "campaigns"


@pytest.fixture(scope="module")
def ebb():
    campaign = load_campaign(CAMPAIGNS / "long_ebb")
    return campaign, campaign_world(campaign)


@pytest.fixture(scope="module")
def milestone():
    campaign = load_campaign(CAMPAIGNS / "ninth_milestone")
    return campaign, campaign_world(campaign)


def test_the_quay_holds_its_exits_features_people_and_the_players_items(ebb):
    campaign, world = ebb
    facts = scene_facts(world, campaign.initial_state(), ["I look around"])
    assert facts.place.name == "the Brinehollow Quay"
    assert [t.name for t in facts.exits] == ["the Bell Chapel", "the Undercourt"]  # connects_to
    # Its tags that its prose names, as the prose names them.
    assert {t.name: t.proper for t in facts.features} == {
        "the quay": False, "the harbour": False, "Lantern Street": True,
        "the Gaff and Lantern": True}
    # Odile Venn's kiln is in the quay's prose: she is there; the others are not yet.
    assert [p.name for p in facts.people] == ["Odile Venn"]
    assert {p.name for p in facts.others} == {"Corran Hale", "Meret Alder", "Tamsin Cask", "Wick"}
    assert [i.name for i in facts.items] == ["the tide lantern", "the boathook",
                                             "the flask of sprat oil"]
    assert facts.hidden_stats == {"drowned_regard"}


def test_people_are_present_where_they_live_and_when_the_story_names_them(ebb):
    campaign, world = ebb
    hall = {**campaign.initial_state(), "world": {"location": "drowned_guildhall"}}
    assert "Meret Alder" in [p.name for p in scene_facts(world, hall).people]  # location: field
    named = scene_facts(world, campaign.initial_state(), ["I wave to Wick across the mud"])
    assert "Wick" in [p.name for p in named.people]
    # A person the new narration names joins the menu's speakers.
    facts = scene_facts(world, campaign.initial_state())
    assert "Tamsin Cask" in [p.name for p in present_people(facts, "Tamsin Cask limps past.")]


def test_the_first_beat_is_the_way_the_menu_points(ebb):
    campaign, world = ebb
    facts = scene_facts(world, campaign.initial_state())
    assert current_beat(world, BeatTracker()).id == "the_contract"
    assert facts.beat[0] == "Talk to Odile Venn"  # present: she is talked to, not looked for
    odile = facts.people[0]
    assert "the Heartglass" in odile.topics  # the beat's own things, to ask her about
    assert "Ask Odile Venn about the Heartglass" in world_menu(facts, "")["speak"]


def test_a_beat_that_waits_for_a_choice_is_offered_a_line_that_makes_it(ebb):
    """The Clerk's Ledger triggers only when a choice says guildhall, counting-room,
    ledger or Meret: the menu's beat line says one, so picking it opens the beat."""
    campaign, world = ebb
    state = campaign.initial_state()
    state["world"]["location"] = "undercourt"
    state["player"]["stats"]["drowned_regard"] = 60
    tracker = BeatTracker(scene=5, triggered={"the_contract": 1, "the_first_bell": 3})
    beat = current_beat(world, tracker)
    assert beat.id == "the_clerks_ledger"
    facts = scene_facts(world, state, tracker=tracker.to_json())
    line = facts.beat[0]
    assert line == "Go to the Drowned Guildhall"
    before = transition(list(campaign.beats), tracker, 6, state, choice="I wait by the wall")
    assert "the_clerks_ledger" not in before.tracker.chosen
    after = transition(list(campaign.beats), tracker, 6, state, choice=line)
    assert "the_clerks_ledger" in after.tracker.chosen


def test_the_world_menu_names_things_with_verbs_that_fit_them(ebb):
    campaign, world = ebb
    facts = scene_facts(world, campaign.initial_state())
    menu = world_menu(facts, "", "The wind drops. A gull lands on the harbour wall, where "
                                 "an old fisherman mends the hot nets.")
    assert "Light the tide lantern" in menu["use"] and "Hold the boathook ready" in menu["use"]
    assert menu["move"][:2] == ["Go to the Bell Chapel", "Go to the Undercourt"]
    assert "Look around the Brinehollow Quay" in menu["look"]
    assert "Look at the harbour wall" in menu["look"]  # things the narration brought in
    assert "Talk to the old fisherman" in menu["speak"]  # and a person: spoken to
    assert not [line for line in menu["speak"] if "gull" in line or "wall" in line]
    people = facts.person_names()
    fit = [line for group in menu.values() for line in group if not broken_choices([line], people)]
    assert "Talk to Odile Venn" in fit and "Talk to the old fisherman" in fit


def test_an_items_own_actions_come_first(tmp_path):
    root = shutil.copytree(CAMPAIGNS / "long_ebb", tmp_path / "ebb")
    path = root / "items" / "tool.tide_lantern.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "actions": ["Raise the tide lantern high"],
                                "use": "Shutter the tide lantern"}))
    world = read_world(load_campaign(root))
    lantern = world.items["tide_lantern"]
    assert item_lines(lantern)[:3] == ["Raise the tide lantern high", "Shutter the tide lantern",
                                       "Light the tide lantern"]


def test_hidden_stats_never_shape_the_menu():
    context = NarrationContext("I wait", player_stats={"charisma": 4.0, "drowned_regard": 1.0})
    # A hidden stat named like a rule's would mark moves "unlikely": it is not read.
    assert ChoiceRules.of(context, frozenset({"charisma"})).charisma is None
    assert ChoiceRules.of(context).charisma == 4.0
    marked = ChoiceRules.of(context).finish(["Talk to Odile Venn"], [])
    assert marked == [f"Talk to Odile Venn {UNLIKELY}"]


def test_no_menu_keeps_a_broken_option():
    broken = ["Look at the story's", "Take the hot", "Ask the sword", "Walk to the"]
    assert clean_choices(broken) == []
    assert final_menu(["Talk to Odile Venn", "Ask the sword", "Light the tide lantern"],
                      ["Odile Venn"]) == ["Talk to Odile Venn", "Light the tide lantern",
                                          "Continue"]
    facts = SceneFacts(people=(Thing("Odile Venn", "person", topics=("the ledger",)),))
    assert "Ask Odile Venn about the ledger" in world_menu(facts, "")["speak"]


def test_the_opening_is_the_campaigns_own_prose(ebb, milestone):
    campaign, world = ebb
    text = opening_text(world, campaign.initial_state())
    paragraphs = text.split("\n\n")
    assert paragraphs[0].startswith("You arrive in Brinehollow on the morning the sea goes out")
    assert paragraphs[1].startswith("The Crooked Quay is where Brinehollow meets the sea")
    assert paragraphs[2].startswith("The sea is already a silver line on the horizon")
    assert "The story begins" not in text and not meta_talk(text)  # talk about the story: out
    campaign, world = milestone
    text = opening_text(world, campaign.initial_state())
    assert text.startswith("The Ninth Milestone is a stone waystation on the Carran Pass")
    assert "You are its keeper." in text and text.endswith("asking for a place by the fire.")


def test_an_authored_opening_wins(tmp_path):
    root = shutil.copytree(CAMPAIGNS / "ninth_milestone", tmp_path / "ninth")
    (root / "opening.md").write_text("---\nentity_type: world\nentity_id: opening\n"
                                     "content_type: opening\n---\n\nSnow ticks at the shutters."
                                     "\n\nSomeone knocks.\n")
    world = read_world(load_campaign(root))
    assert opening_text(world, {}) == "Snow ticks at the shutters.\n\nSomeone knocks."


def test_free_text_is_on_unless_a_campaign_turns_it_off():
    assert free_text_allowed({}) and free_text_allowed({"allowFreeText": True})
    assert not free_text_allowed({"allowFreeText": False})
