"""Choices offered after a turn: cleaned, de-duplicated, never broken, topped up to three.
The world's menu (a campaign scene's people, places and items) is tested in
``test_scene_world.py`` and ``test_world_choices.py``."""

from __future__ import annotations

import pytest

from narratoria.runtime.planner.choices import (
    CHOICE_VERBS,
    FALLBACK_CHOICES,
    MAX_CHOICES,
    MIN_CHOICES,
    clean_choices,
    fallback_choices,
    VERB_GROUPS,
    choice_prompt,
    menu_lines,
    model_choices,
    story_targets,
)
from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import broken_choices
from narratoria.runtime.planner.pick import Picker, PickError

pytestmark = pytest.mark.model


def test_the_models_own_numbering_and_empty_options_are_dropped():
    raw = ["1. Unlock the door", "2) Run", "- Hide", "...", "  ", "unlock   the door", "Go 2 ways"]
    assert clean_choices(raw) == ["Unlock the door", "Run", "Hide", "Go 2 ways"]


def test_at_most_four_and_at_least_three_with_stock_actions():
    assert len(clean_choices([f"Look at the {c}" for c in ("map", "door", "well", "cart",
                                                            "boat")])) == MAX_CHOICES
    topped = fallback_choices(["...", "Wait"])
    assert topped == ["Wait", "Continue", "Look around"]  # topped up, never repeated
    assert fallback_choices([]) == ["Continue", "Look around", "Wait"]  # the generic set
    assert fallback_choices([]) == list(FALLBACK_CHOICES[:MIN_CHOICES])
    # A line that is no move never reaches the menu, whoever wrote it (a skill too).
    assert clean_choices(["Option a", "Take the hot", "Ask the sword", "Open the door"]) == [
        "Open the door"]


def test_targets_are_the_things_and_names_the_story_speaks_of():
    story = ("I search the old library for a map. The critical moment came when the strange "
             "man took the sail using a wooden beam. I'm sure of it. He met Old Tom near the "
             "North Sea, by the harbour. You feel a chill down your spine.")
    assert story_targets(story) == ["the old library", "the map", "the strange man", "the sail",
                                    "the wooden beam", "the harbour", "Old Tom", "North Sea"]
    assert story_targets("the map. Later the map again, then the well.")[-2:] == [
        "the map", "the well"]  # named again: it moves to the recent end
    assert story_targets("Nothing here at all.") == []


def test_each_menu_line_uses_a_target_the_others_did_not():
    lines = menu_lines(["the map", "Marco"], ["the map"], VERB_GROUPS[0])
    assert lines and all(line.endswith(" Marco\n") for line in lines)
    # With every target used, any may come back rather than no line at all.
    assert len(menu_lines(["the map"], ["the map"], ("Take",))) == 1


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
    for player_input, story in STORIES:
        options = model_choices(planner, player_input, story, seed=1)
        assert MIN_CHOICES <= len(options) <= MAX_CHOICES and len(set(options)) == len(options)
        assert not set(options) & set(FALLBACK_CHOICES)  # every story names three things
        assert not broken_choices(options), options
        targets = story_targets(f"{player_input}. {story}")
        for option in options:
            verb = next(v for v in sorted(CHOICE_VERBS, key=len, reverse=True)
                        if option.startswith(v + " "))
            assert option[len(verb) + 1:] in targets  # a verb of the menu, on a named target
        assert len({o.split()[-1] for o in options}) == len(options)  # different targets


def test_a_story_with_nothing_named_gets_the_generic_choices():
    planner = ModelPlanner(prompt_cache_mb=0)
    assert model_choices(planner, "I wait", "Nothing happens.") == list(FALLBACK_CHOICES[:3])


def test_the_picker_only_writes_candidates_and_reuses_the_narrations_state():
    """The choices continue the narration's own KV state (its ``then``), whatever prompt
    the narrator used: only the cue and the lines are read, not the prompt again."""
    planner = ModelPlanner(prompt_cache_mb=0)
    context = NarrationContext(player_input="I ask the innkeeper about the missing ship")
    candidates = ["- Ask the innkeeper\n", "- Look at the ship\n", "- Leave the inn\n"]
    picked: list[tuple] = []

    def pick(lease, narration: str):
        held = lease.tokens(lease.seqs[0])
        prompt = choice_prompt(lease, context, narration)
        before = lease.evaluated
        picker = Picker(lease, prompt, seed=3)
        first = yield from picker.pick(candidates)
        second = yield from picker.pick([c for c in candidates if c != first])
        lines = len(lease.llm.tokenize((first + second).encode(), add_bos=False))
        told = lease.llm.detokenize(held).decode(errors="replace")
        picked.append((held, told, prompt, lease.evaluated - before, lines, first, second))

    narration = "".join(planner.narrate(context, max_tokens=40, then=pick)).strip()
    assert narration and picked
    held, told, prompt, evaluated, lines, first, second = picked[0]
    assert first in candidates and second in candidates and first != second
    # The picks continue the narration's own context (the state holds the narration just
    # told): only the cue and the lines were read, never the prompt and narration again.
    assert " ".join(narration.split()) in " ".join(told.split()) and prompt[:len(held)] == held
    # (the last token of the context is read again once: its logits choose the first)
    assert evaluated <= len(prompt) - len(held) + lines + 1, (evaluated, len(prompt), len(held))
    with pytest.raises(PickError, match="no candidates"):
        planner.call("choices", lambda lease: Picker(lease, [1, 2]).pick([]))


def test_perception_and_stats_shape_the_menu():
    from narratoria.runtime.planner.choices import UNLIKELY, ChoiceRules

    rules = ChoiceRules.of(NarrationContext("I wait", npc_perception={"Mara": -60.0, "Tom": 45.0,
                                                                      "Ines": 10.0},
                                            player_stats={"charisma": 5, "stealth": 16}))
    assert rules.hostile == {"Mara"} and rules.friendly == ("Tom",)
    assert not rules.allows("- Talk to Mara\n") and not rules.allows("- Help Mara\n")
    assert rules.allows("- Hide from Mara\n") and rules.allows("- Talk to Tom\n")
    finished = rules.finish(["Talk to Tom", "Look at the chest", "Hide from Mara"],
                            ["the chest", "Mara"])
    assert finished == [f"Talk to Tom {UNLIKELY}", "Look at the chest", "Hide from Mara",
                        f"Ask Tom for help {UNLIKELY}"]  # room for one extra: four at most
    calm = ChoiceRules.of(NarrationContext("I wait", player_stats={"stealth": 16}))
    assert calm.finish(["Look at the chest"], ["the chest"]) == [
        "Look at the chest", "Pick the lock of the chest"]
    assert ChoiceRules().finish(["Wait"], ["the chest"]) == ["Wait"]  # no stats, no perception


def test_the_model_offers_no_friendly_move_to_a_hostile_npc():
    from narratoria.runtime.planner.choices import FRIENDLY_VERBS

    planner = ModelPlanner(prompt_cache_mb=0)
    context = NarrationContext("I ask Mara about the missing ship", npc_perception={"Mara": -70.0,
                                                                                   "Tom": 60.0})
    story = ("Mara crosses her arms and glares at you. Behind her, old Tom waves from the pier, "
             "where a rowing boat bobs beside the lighthouse.")
    for seed in range(3):
        options = model_choices(planner, context, story, seed=seed)
        assert "Ask Tom for help" in options and len(options) <= MAX_CHOICES
        for option in options:
            verb = next((v for v in sorted(FRIENDLY_VERBS, key=len, reverse=True)
                         if option.startswith(v + " ")), None)
            assert verb is None or not option[len(verb) + 1:].startswith("Mara"), options
