"""Canonical names (runtime/turn/canon.py) on the built-in campaigns: misspelt names corrected,
invented people removed where the campaign forbids them, and the streamed relay that
never lets a client see a wrong spelling, whatever the pieces' boundaries."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from conftest import REPO
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.planner.narration_scores import misspelt_names
from narratoria.runtime.turn.canon import (NameRelay, correct, fixes, forbids_new_names, recased,
                                          scene_names)


@pytest.fixture(scope="module")
def ebb():
    return load_campaign(REPO / "campaigns" / "long_ebb").canon


@pytest.fixture(scope="module")
def ninth():
    return load_campaign(REPO / "campaigns" / "ninth_milestone").canon


STORY = ("You find Odille Ven by her last kiln. \"Sit,\" Odile says, and Tamsin Cusk watches "
         "from the door while Meret Aldr waits in the Guildhal below the quay.")


def test_misspelt_names_are_corrected_to_the_campaigns_own(ebb):
    fixed = correct(ebb, STORY)
    assert fixed == ("You find Odile Ven by her last kiln. \"Sit,\" Odile says, and Tamsin Cask "
                     "watches from the door while Meret Alder waits in the Guildhall below the "
                     "quay.")
    # What the eval counts as misspelt is exactly what was corrected.
    assert misspelt_names(STORY, ebb.lexicon) and not misspelt_names(fixed, ebb.lexicon)
    assert correct(ebb, fixed) == fixed
    assert [f.was for f in fixes(ebb, STORY)] == ["Odille", "Cusk", "Aldr", "Guildhal"]


def pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(text):
        step = rng.randint(1, 7)
        out.append(text[at:at + step])
        at += step
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_stream_never_shows_a_wrong_spelling_whatever_the_pieces(ebb, seed):
    relay = NameRelay(ebb)
    shown = ""
    for piece in pieces(STORY, seed):
        shown += relay.feed(piece)
        for wrong in ("Odille", "Cusk", "Aldr", "Guildhal "):
            assert wrong not in shown, shown
        assert correct(ebb, STORY).startswith(shown)  # shown text is never taken back
    shown += relay.flush()
    assert shown == correct(ebb, STORY)


@pytest.mark.parametrize("seed", range(4))
def test_a_name_the_narrator_copies_in_lower_case_is_streamed_as_the_campaign_spells_it(ebb, seed):
    told = "You give tamsin cask your flask, and odile venn watches from the brinehollow quay."
    relay = NameRelay(ebb)
    shown = "".join(relay.feed(p) for p in pieces(told, seed)) + relay.flush()
    assert shown == ("You give Tamsin Cask your flask, and Odile Venn watches from the "
                     "Brinehollow Quay.")
    assert {f.why for f in relay.changes} == {"recased"}


def test_the_engines_own_words_are_shown_as_written_and_only_the_models_are_corrected(ebb):
    # The lead is the engine's: the author's beat prose may write a place in lower case
    # ("the brinehollow quay" here), and that is the author's spelling, not a slip.
    relay = NameRelay(ebb)
    lead = "You wait by the brinehollow quay. "
    shown = relay.verbatim(lead) + relay.feed("Then odile venn ") + relay.feed("walks up.")
    shown += relay.flush()
    assert shown == lead + "Then Odile Venn walks up."
    assert [f.was for f in relay.changes] == ["odile venn"]


def test_the_relay_holds_back_only_a_few_words(ebb):
    relay = NameRelay(ebb)
    shown = relay.feed("You walk along the quay toward the booth where the wardens ")
    assert shown == "You walk along the quay toward the "
    assert relay.feed("Odi") == "booth "  # a new word lets one more go, never itself
    assert "Odi" not in relay.feed("lle ")
    rest = relay.feed("waits with a ledger in her hands. ") + relay.flush()
    assert "Odile waits" in rest and "Odille" not in rest
    assert [(f.was, f.text) for f in relay.changes] == [("Odille", "Odile")]


def test_invented_people_are_removed_only_where_the_campaign_forbids_them(ebb, ninth):
    text = ("Orla Finch sets down her satchel. \"Come in,\" Mara says. A man named Jonas "
            "waits by the door, and Captain Reed frowns. Wind whispers through the pass. "
            "Her brother Aldo is to hang at the assizes.")
    assert ninth.forbid_new_names and ebb.forbid_new_names  # long_ebb: its people are canon
    allowing = replace(ebb, forbid_new_names=False)
    assert correct(ninth, text) == (
        "Orla Finch sets down her satchel. \"Come in,\" someone says. A man waits by the "
        "door, and someone frowns. Wind whispers through the pass. Her brother Aldo is to "
        "hang at the assizes.")  # Aldo is in Orla Finch's file: canon, not invented
    assert correct(allowing, text) == text
    # Names the player's own action used are theirs to have in the story.
    assert correct(ninth, text, allowed=frozenset({"mara"})).count("Mara says") == 1


@pytest.mark.parametrize("seed", range(6))
def test_invented_names_never_reach_the_stream_either(ninth, seed):
    text = "Mara nods at Orla Fnch. Someone asks for bread, and Brother Tobin laughs softly."
    relay = NameRelay(ninth)
    shown = ""
    for piece in pieces(text, seed):
        shown += relay.feed(piece)
        assert "Mara" not in shown and "Tobin" not in shown and "Fnch" not in shown
    shown += relay.flush()
    assert shown == "Someone nods at Orla Finch. Someone asks for bread, and someone laughs softly."


def test_a_manifest_says_whether_invented_people_are_allowed():
    assert forbids_new_names({"invented_names": "forbid"}) == (True, "")
    assert forbids_new_names({"invented_names": "allow",
                              "hydration_guidance": "never a second stranger"}) == (False, "")
    assert forbids_new_names({"hydration_guidance": "invent weather freely, but never a "
                                                    "second stranger"}) == (True, "")
    assert forbids_new_names({"hydration_guidance": "Do not invent new characters."})[0]
    assert forbids_new_names({"hydration_guidance": "Invent minor townsfolk freely."}) == (False, "")
    assert forbids_new_names({}) == (False, "")
    forbid, problem = forbids_new_names({"invented_names": "x" * 500})
    assert not forbid and problem.startswith("invented_names: expected allow or forbid, got 'xxx")
    assert problem.endswith("; read from hydration_guidance instead (allow)")
    assert len(problem) < 160  # never the whole value


def test_the_narrator_gets_the_canonical_names_of_what_is_in_the_scene(ebb):
    state = {"world": {"location": "brinehollow_quay"},
             "player": {"inventory": {"tide_lantern": {"quantity": 1}, "boathook": {}}}}
    names = scene_names(ebb, state, ["odile_venn"], ["I ask Wick about the tide", "Tamsin waits."])
    assert names == ("Odile Venn", "Wick", "Tamsin Cask", "Brinehollow Quay", "Tide Lantern",
                     "Boathook")
    assert scene_names(ebb, {}, [], []) == ()


def test_a_name_misspelt_as_it_sounds_is_corrected(ebb):
    """A first letter of the same sound ("Kask" for Cask, "Korran" for Corran) is a
    misspelling too; a word of another sound is not ("Borran")."""
    assert correct(ebb, "You ask Tamsin Kask about the oil.") == \
        "You ask Tamsin Cask about the oil."
    assert correct(ebb, "Korran Hale waits.") == "Corran Hale waits."
    assert correct(ebb, "Borran Hale waits.") == "Borran Hale waits."


def test_a_name_typed_in_lower_case_is_spelled_as_the_campaign_does(ebb):
    """Seen on a held-out campaign: "ask fetterlok whos been drinking…" was told back as
    "You ask fetterlok…". One word of a name, five letters or more, is recased or its
    typo corrected; a thing's word after a determiner ("the cask", "the wick") stays."""
    assert recased(ebb, "give odile the lamp, then ask meret") == \
        "give Odile the lamp, then ask Meret"
    assert correct(ebb, "talk to odille and tamsn") == "talk to Odile and Tamsin"
    assert recased(ebb, "i open the cask and trim the wick") == \
        "i open the cask and trim the wick"
    assert recased(ebb, "ask tamsin about the alder grove") == \
        "ask Tamsin about the alder grove"
