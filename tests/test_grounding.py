"""Grounding (docs/scene.md, "Grounding"): campaign facts reach the narrator first, and
the turn logs which facts the narration used and which of its details were generated."""

from __future__ import annotations

from narratoria.runtime.planner.context import Fragment
from narratoria.runtime.planner.narration import FACTS_HEADING, NarrationContext, narration_messages
from narratoria.runtime.turn.grounding import facts_for_narration, lore_scope, report

PROFILE = Fragment(text="entity_id: gareth\nname: Gareth\npersonality: gruff, secretly kind",
                   source_type="frontmatter", weight_tier=1,
                   file_origin="characters/npcs/blacksmith/profile.md", entity="gareth")
FORGE = Fragment(text="The forge has been in Gareth's family for three generations.",
                 source_type="prose", weight_tier=3, file_origin="lore/locations/forge.md",
                 relevance=0.8)
WELL = Fragment(text="The village well ran dry in the winter of the long frost.",
                source_type="prose", weight_tier=3, file_origin="lore/places/well.md",
                relevance=0.4)


def test_the_spec_example_is_reported_fact_by_fact():
    narration = ("You approach the forge, its heat radiating from the threshold. Gareth looks "
                 "up from his work and grumbles. The forge has been in his family for three "
                 "generations. He wears a gold ring on every finger.")
    grounding = report(narration, [PROFILE, FORGE, WELL])
    assert [f for f, _ in grounding.used] == [PROFILE, FORGE]
    assert grounding.unused == [WELL]
    assert dict((f.file_origin, shared) for f, shared in grounding.used)[
        "lore/locations/forge.md"] == ["family", "forge", "generations", "three"]
    assert grounding.generated == ["He wears a gold ring on every finger."]
    events = grounding.log_events()
    assert events[0] == {"level": "debug", "message": "Grounded 'gareth' from "
                                                      "characters/npcs/blacksmith/profile.md"}
    assert events[1]["message"].startswith("Grounded '") and "lore/locations/forge.md" in events[1]["message"]
    assert events[-1] == {"level": "warning", "message": "No data for 'He wears a gold ring on "
                                                         "every finger.': generated detail"}


def test_a_narration_without_facts_is_all_generated():
    grounding = report("You wait. Rain falls on the empty square.", [])
    assert grounding.used == [] and grounding.generated == ["You wait.",
                                                            "Rain falls on the empty square."]
    # A sentence with no distinctive word ("You go.") is neither grounded nor generated.
    assert report("You go. Gareth nods.", [PROFILE]).generated == []


def test_facts_are_ordered_by_tier_and_fitted_to_a_budget():
    assembled = facts_for_narration([WELL, FORGE, PROFILE])
    assert assembled.kept == [PROFILE, FORGE, WELL]  # tier 1 first, then relevance
    assert "BINDING assertion from characters/npcs/blacksmith/profile.md" in assembled.text
    # The prose names Gareth: under the No-Shadow Rule it cannot override his profile.
    assert "cannot override the BINDING assertions about gareth" in assembled.text
    small = facts_for_narration([WELL, FORGE, PROFILE], budget_tokens=70)
    assert small.kept == [PROFILE] and small.dropped[0] == WELL  # lowest tier, least relevant


def test_the_narrator_is_given_the_facts_first():
    assembled = facts_for_narration([FORGE])
    prompt = narration_messages(NarrationContext("I approach the blacksmith", facts=assembled.text,
                                                 scene="Smoke rises over the village."))[1]["content"]
    assert prompt.startswith(FACTS_HEADING)
    assert prompt.index("three generations") < prompt.index("Scene:") < prompt.index("Player action:")
    assert FACTS_HEADING not in narration_messages(NarrationContext("I wait"))[1]["content"]
    assert lore_scope("harbour") == "campaign:harbour"
