"""Invented people (runtime/turn/canon.py) on the built-in campaigns: long_ebb's people are
canon, so the narrator's "the King" and "Brindlemark nods" become "someone", an invented
place stays, and the menu (runtime/planner/choices.py) never offers to chase a person the
narration made up."""

from __future__ import annotations

import random

import pytest

from conftest import REPO
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.planner.choices import known_names, world_menu
from narratoria.runtime.turn.canon import (NameRelay, correct, forbids_new_names,
                                           invented_people, names_anyone)
from narratoria.runtime.turn.scene_world import campaign_world, scene_facts


@pytest.fixture(scope="module")
def campaign():
    return load_campaign(REPO / "campaigns" / "long_ebb")


@pytest.fixture(scope="module")
def ebb(campaign):
    return campaign.canon


# What the default model wrote in play on long_ebb, and its like.
STORY = ("The King has sent his men to the quay, and the King's ledger is read aloud. "
         "Brindlemark nods at you. Lord Brindlemark waits by the door; the Lord Mayor frowns. "
         "The Duke laughs. The road to Brindlemark is long. You meet the Captain by the "
         "Gaff and Lantern, and Odile Venn says nothing.")


def test_a_campaign_whose_people_are_canon_forbids_invented_names(ebb):
    assert ebb.forbid_new_names  # "the people, places, laws and dates in these files are canon"
    assert forbids_new_names({"hydration_guidance": "Everything named in these files is canon; "
                                                    "invent weather freely."}) == (True, "")
    # Inviting minor townsfolk is no leave to name them: they stay nameless.
    assert forbids_new_names({"hydration_guidance": "The people in these files are canon. "
                                                    "Invent minor townsfolk."}) == (True, "")
    assert forbids_new_names({"hydration_guidance": "Invent minor townsfolk freely."})[0] is False
    assert forbids_new_names({"hydration_guidance": "The tide is not canon."})[0] is False


def test_titled_and_named_inventions_become_someone_and_places_stay(ebb):
    assert correct(ebb, STORY) == (
        "Someone has sent his men to the quay, and someone's ledger is read aloud. "
        "Someone nods at you. Someone waits by the door; someone frowns. "
        "Someone laughs. The road to Brindlemark is long. You meet the Captain by the "
        "Gaff and Lantern, and Odile Venn says nothing.")  # Captain: long_ebb writes it


@pytest.mark.parametrize("seed", range(6))
def test_no_invented_person_reaches_the_stream(ebb, seed):
    rng = random.Random(seed)
    relay, shown, at = NameRelay(ebb), "", 0
    while at < len(STORY):
        step = rng.randint(1, 7)
        shown += relay.feed(STORY[at:at + step])
        at += step
        assert "King" not in shown and "Lord" not in shown and "Duke" not in shown, shown
    assert shown + relay.flush() == correct(ebb, STORY)


def test_the_menu_never_offers_a_person_the_narration_invented(campaign):
    facts = scene_facts(campaign_world(campaign), campaign.initial_state(), ["I look around"])
    narration = ("The duke waits on the steps with his herald, and the queen looks at the "
                 "booth. Brindlemark nods at you. Odile Venn counts her coins by the lantern.")
    menu = world_menu(facts, "I look around the quay", narration)
    lines = [line for group in menu.values() for line in group]
    assert "Look at the herald" in lines  # someone the story brings in, nameless
    assert not [line for line in lines if names_anyone(line, ["the queen", "the duke",
                                                              "Brindlemark"])]
    assert any("Odile Venn" in line for line in lines)  # the campaign's people stay
    assert any(line == "Look at the booth" for line in lines)  # and the story's things
    known = known_names(facts, "I look around the quay")
    assert invented_people(narration, known) == ["Brindlemark", "the duke", "the queen"]
    # A person the player names is theirs to ask after.
    assert invented_people(narration, known_names(facts, "I ask the Queen about the "
                                                         "Brindlemark family")) == ["the duke"]
