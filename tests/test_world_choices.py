"""The menu the model ranks, with the real model and real campaigns:
never a broken option, one of them toward the plot beat, each on something the scene
holds. Narrations here are written the way the 135M narrator writes (odd words,
describing words with no noun after them), where the old menu broke."""

from __future__ import annotations

import re

import pytest

from conftest import TESTS
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.planner.choices import (FALLBACK_CHOICES, MAX_CHOICES, MIN_CHOICES,
                                                model_choices, still_held, story_targets,
                                                world_menu)
from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import broken_choices
from narratoria.runtime.turn.scene_world import campaign_world, scene_facts

pytestmark = pytest.mark.model

CAMPAIGNS = TESTS.parent / "campaigns"
# The words of a menu line that name nothing ("Ask X about the Y", "Hold the Z ready").
_LINKS = {"the", "and", "about", "around", "ready", "for", "with", "to", "at", "of", "talk",
          "look", "up", "into"}

# (action, narration): the shapes the baseline menus broke on ("Take the half-frozen",
# "Ask the whole", "Look at the large wooden", "Climb the those", "Ask the silver crown").
HARD = [
    ("I open the door to the half-frozen traveller",
     "You open the door and the half-frozen traveller stumbles in out of the snow. The whole "
     "room smells of wet wool and woodsmoke, and those boots have walked a long way."),
    ("I look around the quay",
     "The large wooden boats lie in the mud. A silver crown glints by the harbour steps, and "
     "the slight wind carries the hot smell of the kilns over the green water."),
    ("Ask the people",
     "The people at the booth turn away. Their story's end is not yours to hear, and the "
     "right answer seems already lost somewhere in the grey."),
]


@pytest.fixture(scope="module")
def planner():
    return ModelPlanner(prompt_cache_mb=0)


def _names_something(option: str, words: str) -> bool:
    """Does ``option`` act on something ``words`` (the scene's things) name?"""
    tail = option.split(" ", 1)[-1].lower()
    named = [w for w in re.findall(r"[a-z][a-z'-]{2,}", tail) if w not in _LINKS]
    return bool(named) and any(re.search(rf"\b{re.escape(w)}\b", words.lower()) for w in named)


def test_no_story_gets_a_broken_menu(planner):
    for seed in range(2):
        for action, narration in HARD:
            options = model_choices(planner, action, narration, seed=seed)
            assert MIN_CHOICES <= len(options) <= MAX_CHOICES, options
            assert not broken_choices(options), (narration, options)
            assert len(set(options)) == len(options)


@pytest.mark.parametrize("campaign,location,action,narration", [
    ("long_ebb", "brinehollow_quay", "I look around the quay while the sea pulls back",
     "The sea is a silver line far out. Odile Venn waves you over from her kiln, goggles up, "
     "and a boy named Wick watches from the harbour steps."),
    ("long_ebb", "undercourt", "I wade out onto the flats with my lantern",
     "Mud sucks at your boots. In the green light the drowned streets straighten, and a "
     "doorway hung with weed stands open ahead."),
    ("ninth_milestone", None, "I let the traveller in out of the snow",
     "Orla Finch stamps the snow off her boots and takes the stool by the fire, her satchel "
     "held tight against her side."),
])
def test_the_world_menu_is_whole_distinct_and_points_at_the_beat(planner, campaign, location,
                                                                action, narration):
    loaded = load_campaign(CAMPAIGNS / campaign)
    world = campaign_world(loaded)
    state = loaded.initial_state()
    if location:
        state.setdefault("world", {})["location"] = location
    facts = scene_facts(world, state, [action])
    scene = " ".join([narration, action, *(t.name for t in (*facts.exits, *facts.features,
                                                             *facts.items, *facts.people,
                                                             *facts.others)),
                      *(facts.place.name for _ in [0] if facts.place), *facts.beat])
    for seed in range(3):
        options = model_choices(planner, NarrationContext(player_input=action), narration,
                                facts=facts, seed=seed)
        assert MIN_CHOICES <= len(options) <= MAX_CHOICES, options
        assert not broken_choices(options, facts.person_names()), options
        assert len({o.lower() for o in options}) == len(options)
        assert not set(options) & set(FALLBACK_CHOICES), options  # the world fills the menu
        if facts.beat:
            assert options[0] in facts.beat, options  # the way toward the plot beat
        for option in options:
            assert _names_something(option, scene), (option, options)


def test_the_people_the_narration_brings_in_can_be_spoken_to(planner):
    loaded = load_campaign(CAMPAIGNS / "ninth_milestone")
    facts = scene_facts(campaign_world(loaded), loaded.initial_state(), ["I wait by the fire"])
    assert not facts.people  # nobody named yet
    narration = "Orla Finch shakes the snow from her hood and sits by the hearth."
    seen = set()
    for seed in range(4):
        seen |= set(model_choices(planner, NarrationContext(player_input="I wait by the fire"),
                                  narration, facts=facts, seed=seed))
    assert any("Orla Finch" in option for option in seen), seen
    assert story_targets(narration)  # and the hearth, the hood: things to look at


def test_an_item_given_away_in_the_turn_is_not_on_its_menu():
    # The scene's facts are read before the turn; the handover happens inside it.
    loaded = load_campaign(CAMPAIGNS / "long_ebb")
    facts = scene_facts(campaign_world(loaded), loaded.initial_state(), ["I look around"])
    before = world_menu(still_held(facts, None), "I look around")
    assert "Use the flask of sprat oil" in before["use"]
    after = world_menu(still_held(facts, ["tide_lantern", "boathook"]),
                       "I give Tamsin my flask of sprat oil")
    offered = [line for lines in after.values() for line in lines]
    assert not [line for line in offered if "sprat oil" in line], offered
    assert "Use the boathook" in after["use"]


def test_a_name_with_its_own_the_is_said_with_one():
    """Seen on an unseen campaign: its place "The Kennel" was offered as "Go to the The
    Kennel" (and "Ask … about the The Kennel"); the scorer now counts two articles too."""
    from narratoria.runtime.planner.narration_scores import choice_problems
    from narratoria.runtime.turn.scene_world import _place_name

    assert _place_name("The Kennel", "The Kennel is warm.") == "the Kennel"
    assert _place_name("Bell Chapel", "the Bell Chapel stands.") == "the Bell Chapel"
    assert "two articles ('the the')" in choice_problems("Go to the The Kennel")
    assert choice_problems("Tell Odile that the bell rings") == []
