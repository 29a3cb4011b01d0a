"""Story mode's prompt (docs/scene.md, "Narration"): the action told as "You …", the
scene as prose.

Pure functions, no model: runtime/planner/story.py.
"""

from __future__ import annotations

import pytest

from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import meta_talk
from narratoria.runtime.planner.story import NEUTRAL_LEAD, second_person, story_prompt


@pytest.mark.parametrize("action, told", [
    ("I climb the wall", "You climb the wall."),
    ("I climb the wall.", "You climb the wall."),
    ("i climb the wall", "You climb the wall."),
    ("i give tamsin my flask and then i leave", "You give tamsin your flask and then you leave."),
    ("i'm cold so i am leaving", "You're cold so you are leaving."),
    ("look at my map", "You look at your map."),
    ("Ask the people", "You ask the people."),
    ("Let me rest by the fire", "You rest by the fire."),
    ("I am tired and I was cold", "You are tired and you were cold."),
    ("I ask Odile Venn what exactly she wants me to bring up from the Undercourt",
     "You ask Odile Venn what exactly she wants you to bring up from the Undercourt."),
    # the player's words stay theirs: quotes are not rewritten
    ('I say "I will help you"', 'You say "I will help you."'),
    ('"Hello there!"', 'You speak up: "Hello there!"'),
    ("Orla, what is in the satchel you will not set down?",
     'You turn to Orla: "What is in the satchel you will not set down?"'),
    ("Captain Corran Hale, tell me your orders",
     'You turn to Captain Corran Hale: "Tell me your orders."'),
    ("Where is the bell?", 'You speak up: "Where is the bell?"'),
    ("Can I climb the wall?", "You try to climb the wall."),
    ("   ", ""),
    # the party the player speaks for is "you" too (seen on a held-out campaign: the
    # narration's first sentence said "how long we have", the narrator's "we")
    ("I ask Tchevel what that whistle means and how long we have",
     "You ask Tchevel what that whistle means and how long you have."),
    ("I ask Derrowin why his water is worth a tenth of our salt",
     "You ask Derrowin why his water is worth a tenth of your salt."),
    ("I tell the captain the soldiers are a day behind us, so we're safe tonight",
     "You tell the captain the soldiers are a day behind you, so you're safe tonight."),
    ("We climb the wall", "You climb the wall."),
    ("we are lost, so we rest", "You are lost, so you rest."),
    ('We shout "we will not go" and lock our door', 'You shout "we will not go" and lock your door.'),
    ("I salute the US flag", "You salute the US flag."),
    # something put before the player's own clause
    ("when the valet grabs the book i shove him back",
     "When the valet grabs the book, you shove him back."),
    ("After dark I climb the sea wall", "After dark, you climb the sea wall."),
    ("Then I climb the wall", "Then you climb the wall."),
    ("When Odile asks why I came, I shrug", "When Odile asks why you came, you shrug."),
    ("look at the water", "You look at the water."),
    # words, then a deed in a sentence of its own (seen on an unseen campaign: the deed was
    # quoted as the player's words, 'You turn to Winifred: "Could… I open the box…"')
    ("Wick, could the fault be the lamp? I open the box on his bench.",
     'You turn to Wick: "Could the fault be the lamp?" You open the box on his bench.'),
    ('"Stand back!" I kick the door.', 'You speak up: "Stand back!" You kick the door.'),
    ('Wick, "Run. I hold them off."', 'You turn to Wick: "Run. I hold them off."'),
])
def test_the_action_is_told_in_the_second_person(action: str, told: str) -> None:
    assert second_person(action) == told


def test_told_speech_is_not_the_narrator_speaking_for_the_player() -> None:
    from narratoria.runtime.planner.narration_scores import speaks_for_player

    for action in ("Orla, what is in the satchel?", '"Hello!"', "Where is the bell?"):
        assert not speaks_for_player(second_person(action), action), action


def test_a_rewrite_is_deterministic_and_bounded() -> None:
    long = "I walk " + "very " * 200 + "slowly"
    once = second_person(long)
    assert once == second_person(long)
    assert len(once) <= 302 and once.startswith("You walk very")


def test_the_prompt_ends_with_the_lead_and_the_action_leads_without_one() -> None:
    plain = story_prompt(NarrationContext(player_input="I light the tide lantern",
                                          scene="The flats are dark. Water moves."))
    assert plain.lead == "You light the tide lantern."
    assert plain.text.endswith("\n\nYou light the tide lantern.")
    assert "The flats are dark. Water moves." in plain.text
    engine = story_prompt(NarrationContext(
        player_input="I climb the sea wall", lead="You climb the sea wall, but you slip."))
    assert engine.lead == "You climb the sea wall, but you slip."
    assert engine.text.endswith(engine.lead) and engine.text.count("climb the sea wall") == 1
    other = story_prompt(NarrationContext(player_input="I climb the sea wall",
                                          lead="The bell rings out over the bay."))
    # a lead that does not tell the action: the action comes first, then the lead
    assert other.text.endswith("You climb the sea wall. The bell rings out over the bay.")


def test_the_prompt_is_prose_without_labels_ids_or_talk_of_the_game() -> None:
    facts = ("=== TIER 1 | ABSOLUTE: BINDING campaign assertions (frontmatter). ===\n"
             "[BINDING assertion from plot/plot_beat_the_first_bell.yml]\n"
             "entity_id: the_first_bell\nmood: eerie\n"
             "description: At the first dusk of the Ebb, Tamsin Cask rings the tide bell on\n"
             "  Gull Hill, and the lights of the Undercourt answer it.\n"
             "[BINDING assertion from items/tool.tide_lantern.json]\n"
             "behavioral_prompt: 'A hooded lantern of green saltglass. The narrator should\n"
             "  describe its glow as green and steady.'")
    context = NarrationContext(
        player_input="I ring the bell", facts=facts,
        guidance=["Plot beat — The First Bell: Wherever the player is, let them see lit windows.",
                  "Regard of the Drowned (hidden: show it only through the story): Between 30 "
                  "and 70, the Drowned are distant and distracted."],
        npc_knowledge=["Tamsin Cask knows: nothing about this.",
                       "Wick knows: The ferry leaves at dawn."],
        state={"location": "Gull Hill", "inventory": {"lantern": 1}})
    text = story_prompt(context).text
    assert "At the first dusk of the Ebb, Tamsin Cask rings the tide bell on Gull Hill" in text
    assert "A hooded lantern of green saltglass." in text
    assert "Wherever you are, let them see lit windows." in text
    assert "Tamsin Cask is here." in text and "Wick is here. The ferry leaves at dawn." in text
    assert "The Drowned are distant and distracted." in text
    assert "Your location is Gull Hill." in text
    for gone in ("entity_id", "the_first_bell", "eerie", "TIER", "BINDING", "narrator",
                 "Plot beat", "hidden", "Between 30", "lantern\": 1", "{", ":"):
        assert gone not in text, gone
    assert not meta_talk(text), meta_talk(text)


@pytest.mark.parametrize("action, rating", [
    ("What does the narrator think I should do next?", "Teen"),
    ("I shoot the warden with my gun", "Everyone"),
])
def test_an_action_that_told_back_would_be_meta_or_unsafe_leads_neutrally(action: str,
                                                                           rating: str) -> None:
    prompt = story_prompt(NarrationContext(player_input=action, rating=rating))
    assert prompt.lead == NEUTRAL_LEAD and prompt.text.endswith(NEUTRAL_LEAD)
    assert "narrator" not in prompt.text and "gun" not in prompt.text


def test_the_engines_judgement_of_the_action_wins_over_its_words() -> None:
    """The engine knows the campaign's names: "the prompt book" is a theatre's, told back;
    without its judgement the words alone decide (a prompt is meta talk)."""
    told = story_prompt(NarrationContext(player_input="read the prompt book", told_back=True))
    assert told.lead == "You read the prompt book."
    judged = story_prompt(NarrationContext(player_input="read the prompt book"))
    assert judged.lead == NEUTRAL_LEAD
    kept = story_prompt(NarrationContext(player_input="I climb the wall", told_back=False))
    assert kept.lead == NEUTRAL_LEAD and "climb" not in kept.text
