"""Choices offered after a turn: cleaned, de-duplicated, topped up to three."""

from __future__ import annotations

from narratoria.runtime.planner.choices import (
    CHOICE_VERBS,
    FALLBACK_CHOICES,
    MAX_CHOICES,
    MIN_CHOICES,
    clean_choices,
    fallback_choices,
    grounded_choices,
    model_choices,
)
from narratoria.runtime.planner.model import ModelPlanner


def test_the_models_own_numbering_and_empty_options_are_dropped():
    raw = ["1. Unlock the door", "2) Run", "- Hide", "...", "  ", "unlock   the door", "Go 2 ways"]
    assert clean_choices(raw) == ["Unlock the door", "Run", "Hide", "Go 2 ways"]


def test_at_most_four_and_at_least_three_with_stock_actions():
    assert len(clean_choices([f"Option {c}" for c in "abcdef"])) == MAX_CHOICES
    topped = fallback_choices(["...", "Wait"])
    assert topped == ["Wait", "Continue", "Look around"]  # topped up, never repeated
    assert fallback_choices([]) == ["Continue", "Look around", "Wait"]  # §4.2.1's generic set
    assert fallback_choices([]) == list(FALLBACK_CHOICES[:MIN_CHOICES])


def test_only_grounded_distinct_things_are_kept():
    story = "An old woman gathers mushrooms near a fallen oak. A wolf howls by the river."
    text = ("- Talk to the old woman\n- Ask the woman about\n- Look at the dragon\n"
            "- Follow the wolf and\n- Search the\n- Climb the fallen oak\n")
    assert grounded_choices(text, story) == ["Talk to the old woman", "Follow the wolf",
                                             "Climb the fallen oak"]
    assert grounded_choices("", story) == []
    # The player's own words are not things to act on.
    assert grounded_choices("- Attack the look around\n- Search the wolf\n", "look around. "
                            "A wolf watches.") == ["Search the wolf"]


STORIES = [
    ("I roll 2d6 to climb the harbour wall", "You rolled 9. You pull yourself over the wall. "
     "Fishermen mend nets and a boy runs toward the lighthouse."),
    ("I ask the innkeeper about the missing ship", "The innkeeper lowers her voice. The ship "
     "left at dawn with a captain nobody knew. Old Tom by the fire saw it go."),
    ("I search the old library for a map", "Dust covers the shelves. In a locked cabinet you "
     "see a rolled map, and a librarian watches you from the stairs."),
]


def test_the_model_offers_actions_on_what_the_story_names():
    planner = ModelPlanner(prompt_cache_mb=0)
    grounded = 0
    for player_input, story in STORIES:
        options = model_choices(planner, player_input, story)
        assert MIN_CHOICES <= len(options) <= MAX_CHOICES and len(set(options)) == len(options)
        mine = [o for o in options if o not in FALLBACK_CHOICES]
        named = f"{player_input} {story}".lower()
        for option in mine:
            verb, _, thing = option.partition(" the ")
            assert verb in CHOICE_VERBS and all(w in named for w in thing.split())
        grounded += bool(mine)
    assert grounded >= 2  # the 135M model, held to the grammar, names the scene's things
