"""The deed sense: a trained classifier reads the deeds and standing
questions no verb list knows, with the real MiniLM and the shipped weights; the weights
are current with the datasets they name; ``narratoria train deeds`` fits them again;
and names are found where players put them (after "on", first in the input, typed in
lower case)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import BUILTIN_SKILLS, REPO
from narratoria.runtime.planner import deed_sense, tuned_encoder
from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.planner.deed_sense import DeedSense, SenseModel, mask
from narratoria.runtime.planner.deeds import (campaign_entities, cast_entities, epithets, mentions,
                                             other_names, person_and_group, read_deeds, role_noun,
                                             unnamed)
from narratoria.runtime.skills.registry import SkillRegistry

pytestmark = pytest.mark.model

LONG_EBB = campaign_entities(REPO / "campaigns" / "long_ebb")


@pytest.fixture(scope="module")
def embedder():
    from narratoria.runtime.embedding import shared_local

    return shared_local()


@pytest.fixture(scope="module")
def sense(embedder) -> DeedSense:
    return DeedSense(embedder)


# --- the shipped weights ---------------------------------------------------------------------


def test_the_shipped_weights_are_current_with_their_datasets(embedder):
    """Editing a training set without running ``narratoria train deeds`` fails here."""
    from narratoria.clients.commands.train import SKILLS_MARK, deed_examples

    model = SenseModel.load()
    assert model.datasets and model.embedder == deed_sense.embedder_name(embedder)
    files = [REPO / name for name in model.datasets if name != SKILLS_MARK]
    examples = deed_examples(files, skill_examples=SKILLS_MARK in model.datasets)
    assert deed_sense.digest(examples) == model.digest
    # The held-out sets are never trained on.
    assert not [n for n in model.datasets if "heldout" in n]
    assert SKILLS_MARK in model.datasets  # the non-deed skills' examples are acts of no one


# --- deeds and questions no verb list reads ----------------------------------------------------


@pytest.mark.parametrize("text", ["Odile, thank you for your help", "Thank you, Wick, for the lift",
                                  "I thank Odile for her help"])
def test_thanks_are_a_kind_word_not_help_given(sense, text):
    """Whose help is thanked for is the other's: thanking is a kind word (+10), not the
    player's help (+20; seen in play: "Odile, thank you for your help" was helped)."""
    deeds = sense.turn(text, LONG_EBB)[0]
    assert [(d.event, d.delta) for d in deeds] == [("complimented", 10)]


@pytest.mark.parametrize("text, entities, expected", [
    ("While Meret counts the tithe I quietly pour sand into her ink pot", LONG_EBB,
     ("npc", "meret_alder", "down")),
    ("Odile's lamp is guttering, so I trim the wick and top it up from my own flask",
     LONG_EBB, ("npc", "odile_venn", "up")),
    ("Make sure every tavern on the quay hears that the Lampwrights cheat their customers",
     LONG_EBB, ("faction", "lampwrights_guild", "down")),
    ("I spend the evening scrubbing the soot off the Bellkeepers' chapel steps", LONG_EBB,
     ("faction", "bellkeepers", "up")),
    ("Once the colonel turns away I pour sugar into Sergeant Pike's fuel tank", (),
     ("npc", "pike", "down")),
])
def test_a_deed_no_verb_list_reads_is_read_by_its_sense(sense, text, entities, expected):
    assert read_deeds(text, entities) == []  # the lists alone miss it
    deed = sense.deed(text, entities)
    assert deed is not None, sense.read(text, entities).probabilities
    assert (deed.target.kind, deed.target.id, "up" if deed.delta > 0 else "down") == expected


@pytest.mark.parametrize("text, entities", [
    ("I walk with Tamsin up to the chapel", LONG_EBB),
    ("I ask Corran where the wardens patrol at night", LONG_EBB),
    ("I sit with Wick on the quay wall and watch the boats come in", LONG_EBB),
    ("I read the Lampwrights' notice about the missing oil", LONG_EBB),
    ("Corran shoves a drunk off the pier while I watch", LONG_EBB),
    ("I buy two crates of rations from Captain Reyes at her asking price", ()),
    ("I trim the wick of my lantern and wait for the tide", LONG_EBB),
])
def test_company_looking_and_others_acts_are_no_deed(sense, text, entities):
    assert sense.turn(text, entities) == ([], False), sense.read(text, entities).probabilities


@pytest.mark.parametrize("text", [
    "Three masked cutthroats jump me under the bridge. I cut them down.",
    "A hooded brigand steps out of the reeds and grabs for my purse. I club him with my lantern.",
    "Two boarders in void suits come through the hull breach. I hold them off with a torch.",
    "I imagine standing up at the Lampwrights' meeting and denouncing Odile. I stay seated.",
    "In my dream the wardens drag Wick away and I do nothing to stop them.",
    "sell the brass compass to tamsin, take whatever she offers",
])
def test_fighting_off_nameless_attackers_a_dream_and_a_sale_are_no_deed(sense, text):
    """The labelling guide's not-deeds that the adapted reader reads as deeds (0.99 on
    the brigand): fighting off attackers no one names, a deed only imagined or dreamt,
    a sale at whatever the buyer offers. The router's guess is put aside too (unsure)."""
    reading = sense.turn_reading(text, LONG_EBB)
    assert (reading.deeds, reading.asks) == ([], False)
    assert reading.unsure or "offers" in text


@pytest.mark.parametrize("text, target", [
    ("The Tithe Wardens charge me on the quay. I cut down their captain.", "tithe_wardens"),
    ("Corran comes at me with a boathook and I punch him in the jaw.", "corran_hale"),
])
def test_fighting_off_someone_the_campaign_names_is_still_a_deed(sense, text, target):
    assert [d.target.id for d in sense.turn(text, LONG_EBB)[0]] == [target]


@pytest.mark.parametrize("text", [
    "would Meret still open her door to me after all that?",
    "Are the Tithe Wardens done being angry with us yet?",
])
def test_a_standing_question_in_other_words_is_read(sense, text):
    assert sense.read(text, LONG_EBB).side == deed_sense.QUERY


@pytest.mark.parametrize("text", [
    "Odile, what is the Heartglass really worth to you?",
    "Tamsin, how much is the lantern worth to you?",
])
def test_a_question_about_what_a_thing_is_worth_to_someone_asks_no_standing(sense, text):
    """The adapted reader reads these as standing questions (a player's read of long_ebb
    found the turn querying Odile and the Heartglass, lore, as a group): asking where the
    player stands needs the player or a standing in the words."""
    assert sense.turn(text, LONG_EBB) == ([], False)


@pytest.mark.parametrize("text", ["rep w/ wardens?", "dov still pissed abt the barrels?",
                                  "Does Odile trust me now?"])
def test_a_standing_question_without_a_first_person_is_still_asked(sense, text):
    assert sense.turn(text, LONG_EBB)[1]


def test_the_planner_writes_a_sensed_deed_and_asks_whom_a_question_names(embedder):
    from narratoria.runtime.planner.model import ModelPlanner
    from narratoria.runtime.planner.routed import routed_planner

    registry = SkillRegistry([BUILTIN_SKILLS])
    routed = routed_planner(ModelPlanner(skills=registry.get), embedder)
    every = tuple(registry.scripts(include_disabled=True))

    def plan(text: str):
        return asyncio.run(routed.generate(PlanRequest(text, every, entities=LONG_EBB)))

    deed = plan("While Meret counts the tithe I quietly pour sand into her ink pot")
    [(path, tool_input)] = [(t.toolPath, t.input) for t in deed.tools
                            if t.toolPath.startswith("npc-perception/")]
    assert path == "npc-perception/update-perception"
    assert tool_input["npcId"] == "meret_alder"
    question = plan("would Meret still open her door to me after all that?")
    assert [(t.toolPath, t.input) for t in question.tools] == [
        ("npc-perception/query-perception", {"npcId": "meret_alder"})]


@pytest.mark.parametrize("text, entities", [
    ("Wick pockets another warden's button", LONG_EBB),
    ("Odile gives me a written contract and a purse of silver.", LONG_EBB),
    ("She slaps Captain Reyes across the face.", ()),
    ("I hear Wick stole from the Lampwrights again. I finish my soup.", LONG_EBB),  # heard of
    ("Corran Hale shoves Wick into the canal - I just watch from the bridge", LONG_EBB),
    # the player's part after a comma, as players type it
    ("Doc Halvorsen slaps Sorel across the face in the med deck, I stay out of it", ()),
    ("Captain Reyes orders the crew to lower the boats. I watch from the rail.", ()),
    ("Corran Hale drags a salvager off the quay, and I keep my head down", LONG_EBB),
])
def test_someone_elses_act_is_no_deed_of_the_players(sense, text, entities):
    assert sense.turn(text, entities) == ([], False)


@pytest.mark.parametrize("text, target", [
    ("\"Lampwrights, you're all frauds and cheats\"", "lampwrights_guild"),
    ("Odile Venn, you're the finest glassmaker on the quay", "odile_venn"),
])
def test_what_is_said_to_whom_an_input_names_first_is_the_players_deed(sense, text, target):
    deeds, _ = sense.turn(text, LONG_EBB)
    assert [d.target.id for d in deeds] == [target]


def test_whom_the_player_speaks_to_stays_in_the_players_part():
    from narratoria.runtime.planner.deed_sense import _players_part

    # the comma after a name is no sentence of someone else's
    said = "Odile, I paid your rent for the quarter. Wick laughs."
    assert _players_part(said, LONG_EBB) == "Odile I paid your rent for the quarter."
    assert _players_part("Doc Halvorsen slaps Sorel, I stay out of it", ()) == "I stay out of it"


@pytest.mark.parametrize("text", [
    "What would the Tithe Wardens do if someone robbed their strongbox?",
    "what if i stole odile venn's purse",
    "i could tell the bellkeepers what tamsin said, but i keep quiet",
    "someday i'll get back at odile for this",            # put off to some day
    "if i had the coin i'd pay off tamsin's debts",        # only wished
])
def test_a_deed_asked_about_or_let_go_is_not_done(sense, text):
    assert sense.turn(text, LONG_EBB) == ([], False)


def test_a_deed_done_is_read_whatever_follows_it(sense):
    [deed] = sense.turn("I punch Corran Hale, but I don't kill him", LONG_EBB)[0]
    assert (deed.target.id, deed.delta < 0) == ("corran_hale", True)


@pytest.mark.parametrize("text", [
    "Odile Venn stands the whole quay a round of rum. I take my cup with the rest.",
    "Meret Alder slaps a dockhand across the face while I mend my net.",
    "Someone smashed the Lampwrights' window last night. I ask the watch what they saw.",
])
def test_someone_elses_act_told_first_is_no_deed_though_the_player_acts_after(sense, text):
    assert sense.turn(text, LONG_EBB) == ([], False)


def test_the_player_may_do_a_deed_to_the_one_another_sentence_names(sense):
    deeds, _ = sense.turn("Odile Venn drops her purse on the quay. I pick it up and "
                          "hurry after her to give it back.", LONG_EBB)
    assert [(d.target.id, d.delta > 0) for d in deeds] == [("odile_venn", True)]


@pytest.mark.parametrize("text", [
    "I plan to rob the Lampwrights someday. For now I count my coins.",
    "I intend to punch Odile Venn when this is over",
    "I draft a letter denouncing the Lampwrights but keep it in my pocket for now",
    "Tomorrow I'll pay back every coin I owe Odile",
    "\"I'll think about it, Tamsin,\" I say when she asks me to carry her nets",
    "I write Wick an apology and burn it unsent",
])
def test_a_deed_planned_is_not_done(sense, text):
    assert sense.turn(text, LONG_EBB) == ([], False)


def test_the_sense_overrules_a_verb_list_it_is_sure_is_wrong(sense):
    """"where's" reads as a gift to the wardens by the lists; the sense is sure it is
    no deed, and the turn changes no one."""
    text = "where's the tithe wardens booth at"
    assert read_deeds(text, LONG_EBB)
    assert sense.read(text, LONG_EBB).probabilities["deed"] < sense.veto_below
    assert sense.turn(text, LONG_EBB) == ([], False)
    deeds, _ = sense.turn("I steal Odile Venn's purse", LONG_EBB)
    assert [(d.target.id, d.event) for d in deeds] == [("odile_venn", "stole")]


@pytest.mark.parametrize("text, gift", [
    ("I buy one lamp from the Lampwrights at the marked price", False),
    ("I pay the Lampwrights their asking price for a flask of oil", False),
    ("I pay the Lampwrights double the asking price", True),
    ("I pay Odile the full fee and a little extra", True),
    ("I pay Odile her usual dollar for the lamp oil", False),
])
def test_paying_what_was_asked_is_a_trade_not_a_gift(text, gift):
    assert bool(read_deeds(text, LONG_EBB)) == gift


def test_weights_for_another_embedder_read_nothing():
    """A daemon configured with another embedding model keeps the verb lists and does
    not read its vectors with MiniLM's weights."""
    from narratoria.runtime.embedding import HashEmbedding

    reading = DeedSense(HashEmbedding(384)).read("I pour sand into Meret's ink pot", LONG_EBB)
    assert reading.side == deed_sense.NONE and reading.probabilities == {}


def test_a_mask_puts_one_name_for_every_person_and_group():
    masked, named = mask("I tell Odile's secret to the Tithe Wardens in the bell chapel",
                         LONG_EBB)
    assert masked == "I tell Sam's secret to the Guild in the bell chapel"
    assert [m.entity.id for m in named] == ["odile_venn", "tithe_wardens", "bellkeepers"]


# --- names where players put them -------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("I spit on Marshal Cole's boots.", [("Marshal Cole", "npc")]),
    ("I hack into Jax's accounts and drain them", [("Jax", "npc")]),
    ("Tomas looks parched. I share my canteen with him.", [("Tomas", "npc")]),
    ("Kestrel's secret is safe with me", [("Kestrel", "npc")]),
    ("Helix Dynamics' technicians give up, so I fix the relay for them.",
     [("Helix Dynamics", "faction")]),
    ("i send Kuroda Systems' memos to a journalist", [("Kuroda Systems", "faction")]),
    ("lets patch up dr aisha penn's wounded arm", [("aisha penn", "npc")]),
    ("i tip mayor holloway a few coins", [("holloway", "npc")]),
    ("i diss rook's lockpicking in front of everyone", [("rook", "npc")]),
])
def test_names_after_a_place_word_first_or_in_lower_case(text, expected):
    assert [(m.entity.name, m.entity.kind) for m in mentions(text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("I shove a warden off the harbour steps", ("tithe_wardens", False)),
    ("I sneak into a lampwright's workshop", ("lampwrights_guild", False)),
    ("I smear mud across the names on the chapel walls", ("bellkeepers", True)),
])
def test_one_member_or_a_place_of_a_campaigns_faction_names_it(text, expected):
    [mention] = mentions(text, LONG_EBB)
    assert (mention.entity.id, mention.holding is not None) == expected


@pytest.mark.parametrize("text", [
    "Rain falls as I walk along the shore",
    "Something moves in the dark. I hit it with my staff",
    "i steal old boots from the stall",
    "i grab tonight's catch and ring the ship's bell",
    "Throw the bones for him, old woman. Tell me whether he lives.",
    "I land on Titan and walk to the Tower",
])
def test_no_one_is_made_up_from_places_and_things(text):
    assert [m for m in mentions(text) if m.entity.kind == "npc"] == []


def test_the_shipped_weights_read_with_an_adapter_fitted_on_the_same_datasets(sense, embedder):
    """The regressions read the adapted MiniLM's vectors: unit length like the plain
    embedder's, and not the same (the adapter is applied)."""
    adapter = sense.model.adapter
    assert adapter is not None and adapter.rank == tuned_encoder.RANK
    assert len(adapter.factors) == 6 * len(tuned_encoder.ADAPTED)
    assert all(a.shape[0] == b.shape[1] == adapter.rank for a, b in adapter.factors.values())
    texts = ["I steal Sam's purse", "Sam steals my purse"]
    tuned, plain = sense.reader.embed_batch(texts), embedder.embed_batch(texts)
    assert np.allclose(np.linalg.norm(tuned, axis=1), 1.0, atol=1e-4)
    assert float(np.min(np.sum(tuned * plain, axis=1))) < 0.99


def test_an_adapter_is_saved_and_read_back_whole(tmp_path, sense):
    out = tmp_path / "sense.npz"
    sense.model.save(out)
    again = SenseModel.load(out)
    assert again.adapter is not None and again.adapter.rank == sense.model.adapter.rank
    assert again.adapter.factors.keys() == sense.model.adapter.factors.keys()
    assert all(np.array_equal(x, y) for name in again.adapter.factors
               for x, y in zip(again.adapter.factors[name], sense.model.adapter.factors[name]))
    assert again.digest == sense.model.digest


# --- train deeds ----------------------------------------------------------------------------


def _case(text: str, skill: str | None, change: str = "", target: str = "") -> str:
    doc = {"input": text, "expected_skills": [skill] if skill else [],
           "forbidden_skills": [], "effects": []}
    if skill:
        doc["effects"] = [{"skill": skill, "target": target, "change": change}]
    return json.dumps(doc)


def test_train_deeds_fits_and_writes_weights_the_sense_reads(tmp_path, embedder):
    from narratoria.clients.cli import main

    lines = [_case("I punch Bram in the face", "npc-perception", "down", "bram"),
             _case("I rob Mira's stall", "npc-perception", "down", "mira"),
             _case("I bandage Bram's arm", "npc-perception", "up", "bram"),
             _case("I give Mira a loaf of bread", "npc-perception", "up", "mira"),
             _case("What does Mira think of me?", "npc-perception", "query", "mira"),
             _case("I look at the sea", None), _case("I ask Bram the way", None)]
    data = tmp_path / "deeds.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "sense.npz"
    assert main(["train", "deeds", "--dataset", str(data), "--out", str(out), "--epochs", "1",
                 "--json"]) == 0
    model = SenseModel.load(out)
    assert set(model.weights) == {"deed", "kind", "query"}  # too few name a person and a group
    assert all(np.isfinite(w).all() for w in model.weights.values())
    assert model.adapter is not None and model.adapter.rank == tuned_encoder.RANK
    assert len(model.adapter.factors) == 6 * len(tuned_encoder.ADAPTED)  # every layer of six
    sense = DeedSense(embedder, model)
    assert isinstance(sense.reader, tuned_encoder.TunedEncoder)
    reading = sense.read("I kick Tobin hard", ())
    assert reading.probabilities["deed"] > reading.probabilities["query"]


def test_train_deeds_without_an_adapter_reads_with_the_plain_embedder(tmp_path, embedder):
    from narratoria.clients.cli import main

    data = tmp_path / "deeds.jsonl"
    data.write_text("\n".join([_case("I punch Bram in the face", "npc-perception", "down", "bram"),
                               _case("I look at the sea", None)]) + "\n")
    out = tmp_path / "sense.npz"
    assert main(["train", "deeds", "--dataset", str(data), "--out", str(out), "--no-adapter",
                 "--no-skill-examples"]) == 0
    model = SenseModel.load(out)
    assert model.adapter is None and DeedSense(embedder, model).reader is embedder
    assert main(["train", "deeds", "--dataset", str(data), "--out", str(out),
                 "--epochs", "0"]) == 2


def test_train_deeds_names_the_bad_line(tmp_path, capsys):
    from narratoria.clients.cli import main

    data = tmp_path / "deeds.jsonl"
    data.write_text(_case("I punch Bram", "npc-perception", "down", "bram") + "\n{oops\n")
    out = tmp_path / "sense.npz"
    assert main(["train", "deeds", "--dataset", str(data), "--out", str(out)]) == 2
    assert f"{data}:2" in capsys.readouterr().err
    assert not out.exists()


def test_no_deed_skill_offered_reads_nothing(embedder):
    """With the default skill set (no npc-perception, no reputation) a turn pays for no
    deed reading: the sense's weights are never even loaded."""
    from narratoria.runtime.planner.model import ModelPlanner
    from narratoria.runtime.planner.routed import routed_planner

    registry = SkillRegistry([BUILTIN_SKILLS])
    routed = routed_planner(ModelPlanner(skills=registry.get), embedder)
    dice = tuple(s for s in registry.scripts(include_disabled=True) if s.skill == "dice-roller")
    plan = asyncio.run(routed.generate(PlanRequest(
        "I pour sand into Meret's ink pot", dice, entities=LONG_EBB)))
    assert not [t for t in plan.tools if t.toolPath.split("/")[0] in
                ("npc-perception", "reputation")]
    assert routed.sense._model is None



def test_a_sentence_start_far_into_a_long_input_is_found():
    """Sentence starts are read from the gap before each word (linear in the input)."""
    text = "word " * 4000 + ". Tomas looks parched. I share my canteen with him."
    assert [m.entity.name for m in mentions(text)] == ["Tomas"]


# --- names a campaign's files give, and names as players type them ---------------------------

CIRCUS_NPC = """---
entity_type: npc
entity_id: {id}
name: {name}
{extra}
---
"""
CIRCUS_FACTION = """---
entity_type: lore
entity_id: {id}
content_type: background
kind: faction
name: {name}
tags: {tags}
---
"""


@pytest.fixture(scope="module")
def circus(tmp_path_factory) -> tuple:
    """A campaign whose files give nicknames, titles, roles and people tags."""
    root = tmp_path_factory.mktemp("circus")
    (root / "campaign.yml").write_text("id: circus\ntitle: Circus\nversion: 1.0.0\n")
    (root / "characters").mkdir()
    (root / "factions").mkdir()
    people = {"augustin_vell": ("Augustin Vell", "title: Ringmaster\nrole: ringmaster and owner"),
              "dorran_hask": ("Dorran Hask", "nickname: Mallet\nrole: boss canvasman"),
              "fennick": ("Fennick", "role: clown, juggler and tent-hand"),
              "patience_gallow": ("Patience Gallow", "role: eldest of the sisters"),
              "ines_marchetti": ("Ines Marchetti", "role: clown in training")}
    for npc_id, (name, extra) in people.items():
        (root / "characters" / f"character_{npc_id}.md").write_text(
            CIRCUS_NPC.format(id=npc_id, name=name, extra=extra))
    for fid, name, tags in (("tumbling_sisters", "the Tumbling Sisters", "[acrobats, trapeze]"),
                            ("canvasmens_union", "the Canvasmen's Union", "[tents, union]")):
        (root / "factions" / f"faction_{fid}.md").write_text(
            CIRCUS_FACTION.format(id=fid, name=name, tags=tags))
    return campaign_entities(root)


@pytest.mark.parametrize("text, expected", [
    ("spit on the ringmaster's boots", "augustin_vell"),        # a role the cast has once
    ("Ringmaster Vell turns his back on me", "augustin_vell"),   # a title and a name
    ("mallet u absolute donkey, i say", "dorran_hask"),          # a nickname
    ("How do the acrobats feel about me these days?", "tumbling_sisters"),  # a people tag
    ("i cross the canvasmen's picket line", "canvasmens_union"),  # "-men's" members
    ("I buy a canvasman a drink", "canvasmens_union"),            # one of them
    ("I tell patence gallo she is too old to fly", "patience_gallow"),  # misspelt
    ("i lift fennicks purse", "fennick"),                        # an owner without apostrophe
])
def test_a_campaigns_files_name_its_people_as_players_do(circus, text, expected):
    assert [m.entity.id for m in mentions(text, circus)][:1] == [expected]


def test_a_role_two_characters_share_names_neither(circus):
    assert mentions("I bow to the clown", circus) == []  # Fennick and Ines are both clowns


def test_a_misspelling_near_two_names_names_neither():
    cast = cast_entities({"a": {"name": "Marta"}, "b": {"name": "Maria"}})
    assert mentions("I thank marja for the bread", cast) == []
    assert mentions("I trim the wicks of the lamps", LONG_EBB) == []  # the word, not Wick


@pytest.mark.parametrize("text, expected", [
    ("does hana actually trust me or nah", ["hana"]),
    ("is varga still sore at me after what i said?", ["varga"]),
    ("does anyone here trust me?", []),
    ("is it safe to go?", []),
])
def test_a_lower_case_standing_question_names_whom_it_asks_about(text, expected):
    assert [m.entity.id for m in mentions(text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("i frame jonah for the missing cashbox", "jonah"),
    ("threaten ezra w my knife til he hands over the map", "ezra"),
    ("i stand up for kessa when the drunk starts heckling her", "kessa"),
    # names MiniLM reads as words a little more than as names
    ("i tell bex her cat ran off when it didn't", "bex"),
    ("snitch on dex to the foreman", "dex"),
])
def test_a_deed_typed_in_lower_case_finds_whom_it_is_done_to(sense, text, expected):
    """No capital, no cast: the word nearest a name rather than a thing is whom."""
    assert unnamed(text)  # candidates exist, and no verb list or capital names anyone
    assert [m for m in mentions(text) if not m.guess] == []
    deeds, _ = sense.turn(text)
    assert [d.target.id for d in deeds] == [expected]


def test_a_lower_case_deed_guesses_no_one_when_the_cast_is_known(sense):
    assert sense.turn("i frame jonah for the missing cashbox", LONG_EBB) == ([], False)
    assert sense.turn("i kick the door open") == ([], False)


@pytest.mark.parametrize("text", [
    "I pay the church ferryman the usual two coppers to cross.",
    "I buy a drink at the Saints' bar and pay what they charge.",
    "I buy a loaf from the monks' stall at the price on the board.",
    "Pay the Harbour Council's docking fee, standard rate.",
    "In my head I picture the Iron Syndicate's tower burning. I don't actually do anything.",
    "Maybe I should apologise to Odile later. Not now though.",
    "I think about poisoning Corran's wine. Not tonight, though. I go up to bed.",
])
def test_a_fair_price_or_a_deed_only_thought_of_changes_no_one(sense, text):
    assert sense.turn(text, LONG_EBB) == ([], False)


def test_a_deed_naming_a_person_and_a_group_is_done_to_the_one_the_fit_reads(embedder):
    """With enough examples of each, a fourth regression learns which of a person and a
    group named together a deed is done to ("I tell Bram the Ferrymen are thieves" is
    the Ferrymen's); without it the person named is the target."""
    cast = cast_entities({"bram": {"name": "Bram"}}, [("ferrymen", "the Ferrymen")])
    says = ["thieves", "liars", "cowards", "cheats", "frauds", "drunks", "traitors",
            "a disgrace", "lazy", "useless", "crooks"]
    to_group = ([f"I tell Bram the Ferrymen are {w}" for w in says]
                + [f"I tell Bram that the Ferrymen are all {w}" for w in says])
    hits = ["punch", "kick", "slap", "shove", "trip", "rob", "mock", "insult", "threaten",
            "cheat", "spit at"]
    to_person = ([f"I {v} Bram in front of the Ferrymen" for v in hits]
                 + [f"I {v} Bram while the Ferrymen watch" for v in hits])
    examples = ([deed_sense.Example(t, cast, deed_sense.HARMFUL, "faction") for t in to_group]
                + [deed_sense.Example(t, cast, deed_sense.HARMFUL, "npc") for t in to_person]
                + [deed_sense.Example(t, cast, deed_sense.NONE)
                   for t in ("I look at the river", "I ask Bram the way", "I wait for the ferry",
                             "I count my coins", "I watch the Ferrymen load the boat")])
    model = deed_sense.fit(examples, embedder)
    assert deed_sense.GROUP in model.weights
    sense = DeedSense(embedder, model)
    assert sense.read("I tell Bram the Ferrymen are swindlers", cast).target.entity.id == "ferrymen"
    assert sense.read("I elbow Bram in front of the Ferrymen", cast).target.entity.id == "bram"
    no_group = deed_sense.fit(examples[len(to_group) - 5:], embedder)  # 5 to the group
    assert deed_sense.GROUP not in no_group.weights


def _done(deeds) -> list[tuple[str, str]]:
    return sorted((d.target.id, "up" if d.delta > 0 else "down") for d in deeds)


@pytest.mark.parametrize("text, expected", [
    ("I deliver Corran to the Tithe Wardens in irons", [("corran_hale", "down"),
                                                         ("tithe_wardens", "up")]),
    ("I turn Wick over to the Lampwrights for the missing oil", [("lampwrights_guild", "up"),
                                                                 ("wick", "down")]),
    ("I give Meret up to the Bellkeepers", [("bellkeepers", "up"), ("meret_alder", "down")]),
    ("I take Tamsin's side against the Tithe Wardens", [("tamsin_cask", "up"),
                                                         ("tithe_wardens", "down")]),
    ("I side with Odile against the Lampwrights", [("lampwrights_guild", "down"),
                                                    ("odile_venn", "up")]),
])
def test_a_person_handed_to_a_group_or_sided_with_against_one_is_a_deed_to_each(
        sense, text, expected):
    assert _done(sense.turn(text, LONG_EBB)[0]) == expected


@pytest.mark.parametrize("text", [
    "I bring Tamsin to the Bellkeepers so she can pray with them",  # taking along: a kindness
    "I hand Wick a coin to give to the Lampwrights",                # a gift carried
    "I think about handing Corran over to the Tithe Wardens",        # only thought of
])
def test_taking_someone_along_or_a_gift_carried_is_no_handing_over(sense, text):
    deeds = sense.turn(text, LONG_EBB)[0]
    assert not ({d.target.kind for d in deeds} == {"npc", "faction"}
                and any(d.event == "betrayed" for d in deeds)), _done(deeds)


@pytest.mark.parametrize("text, entities, expected", [
    ("I tell Odile the Lampwrights are cheats and thieves", LONG_EBB,
     [("lampwrights_guild", "down")]),
    ("I tell Corran, loud enough for the quay to hear, that the Tithe Wardens are bullies",
     LONG_EBB, [("tithe_wardens", "down")]),
    ("I tell Captain Ilyana the Ravens are cowards who ran from the battle", (),
     [("ravens", "down")]),
    ("I tell Corran he is a coward", LONG_EBB, [("corran_hale", "down")]),
])
def test_a_harm_told_to_someone_about_a_group_is_done_to_the_group(sense, text, entities,
                                                                    expected):
    assert _done(sense.turn(text, entities)[0]) == expected


@pytest.mark.parametrize("text, expected", [
    ("would it be bad if I lied to Meret about the bell?", [("meret_alder", "down")]),
    ("may I borrow Odile's lens without telling her?", [("odile_venn", "down")]),
    ("can I ask Odile where the ferry leaves?", []),
    ("can I trust Corran?", []),  # a standing question, not a deed
])
def test_a_deed_asked_leave_for_is_read_as_done(sense, text, expected):
    assert _done(sense.turn(text, LONG_EBB)[0]) == expected


@pytest.mark.parametrize("text, expected", [
    ("tamsin gets a slap from me for spilling the wine", [("tamsin_cask", "down")]),
    ("Wick ends the night owing me his life", [("wick", "up")]),
    ("Odile gives me a lamp for the road", []),  # done to the player
])
def test_the_player_named_as_the_doer_after_someone_else_is_read(sense, text, expected):
    assert _done(sense.turn(text, LONG_EBB)[0]) == expected


@pytest.mark.parametrize("text", ["my standing with the bellkeepers", "my rep with the wardens",
                                  "our standing with the Lampwrights Guild?"])
def test_a_standing_named_and_nothing_else_asks_to_see_it(sense, text):
    """A player's read found "my standing with the bellkeepers" done as a deed ("stand
    with": defended), and the adapted reader read "my rep with the wardens" as one (0.85)."""
    assert sense.turn(text, LONG_EBB) == ([], True)


def test_a_standing_named_before_a_deed_leaves_the_deed(sense):
    deeds, asks = sense.turn("my rep with the wardens is bad so I bribe their captain", LONG_EBB)
    assert deeds and not asks


@pytest.mark.parametrize("text", ["where do i stand with the bellkeepers",
                                  "wats my standing w/ the tithe wardens"])  # no "?" or question word
def test_a_standing_question_a_verb_list_misreads_is_still_asked(sense, text):
    # "stand with" is a deed to the lists ("I stand with the Bellkeepers"), not here.
    assert sense.turn(text, LONG_EBB) == ([], True)


def test_a_name_then_a_group_is_two_names():
    said = [(m.entity.name, m.entity.kind) for m in
            mentions("I tell Ilyana the Ravens are cowards")]
    assert said == [("Ilyana", "npc"), ("Ravens", "faction")]


@pytest.mark.parametrize("text, expected", [
    ("walk into the bowls club dinner and call them all cheats", "bowls"),
    ("buy the whole bell choir a round after the service", "choir"),
])
def test_a_deed_to_a_group_typed_in_lower_case_is_done_to_the_group(sense, text, expected):
    """No capital and no campaign: a group the words describe is whom the deed is done to
    (before, no one was, and the deed was lost)."""
    deeds, _ = sense.turn(text)
    assert [(d.target.id, d.target.kind) for d in deeds] == [(expected, "faction")]


def test_a_sentence_case_input_guesses_no_lower_case_name(sense):
    """"I thank the captain for the ride" is written with capitals: a name in it would be
    one, so "ride" or "hand" is no one's."""
    assert unnamed("I thank the captain for the ride and shake her hand.") == []
    assert sense.turn("I thank the captain for the ride and shake her hand.") == ([], False)


def test_a_possessive_pronoun_is_no_owner():
    assert [m.entity.id for m in mentions("pickpocket old tam while he's counting his change")
            ] == []


def test_a_title_one_character_holds_names_them_after_the():
    """"the captain" is Captain Ingrid Halvorsen where she alone is titled so; a title two
    share names neither."""
    cast = cast_entities({"ingrid": {"name": "Ingrid Halvorsen", "also": ["Captain"]},
                          "amos": {"name": "Amos Okafor", "also": ["Doctor"]}})
    assert [m.entity.id for m in mentions("leave a bottle of rum on the captain's desk", cast)
            ] == ["ingrid"]
    assert [m.entity.id for m in mentions("i patch the doctor's coat", cast)] == ["amos"]
    two = cast_entities({"a": {"name": "Ann Lee", "also": ["Captain"]},
                         "b": {"name": "Bo Ray", "also": ["Captain"]}})
    assert mentions("I salute the captain", two) == []



@pytest.mark.parametrize("text, expected", [
    ("hand jory over to the harbour watch", [("harbour_watch", "up"), ("jory", "down")]),
    ("deliver the turncoat silas to the rebels' court in chains",
     [("rebels", "up"), ("silas", "down")]),
    ("i give the deserter corporal ilse up to the legion", [("ilse", "down"), ("legion", "up")]),
    ("I hand the doctor over to the masters' men", [("doctor", "down"), ("masters", "up")]),
])
def test_a_person_no_cast_names_handed_to_a_group_is_a_deed_to_each(sense, text, expected):
    """Typed in lower case a lone word handed over is a name; in any case, "the doctor" or
    "the thief" is someone (before, only the group's standing moved)."""
    assert _done(sense.turn(text)[0]) == expected


@pytest.mark.parametrize("text, expected", [
    # the person handed as "him" or "her", the group after the verb or, handed over, before
    ("I tie up Corran Hale and hand him over to the Lampwrights Guild",
     [("corran_hale", "down"), ("lampwrights_guild", "up")]),
    ("I march Odile down the harbour steps and hand her over to the Tithe Wardens",
     [("odile_venn", "down"), ("tithe_wardens", "up")]),
    ("I drag Wick to the Tithe Wardens' booth and hand him over for the buttons",
     [("tithe_wardens", "up"), ("wick", "down")]),
    # how the person is held between them, and "before" or "into"
    ("I haul Meret in chains before the Lampwrights", [("lampwrights_guild", "up"),
                                                       ("meret_alder", "down")]),
    ("I bring Tamsin to the Tithe Wardens in cuffs", [("tamsin_cask", "down"),
                                                     ("tithe_wardens", "up")]),
    # a verb four words before the person, the group described on the way
    ("turn the old thief Meret over to the angry Wardens",
     [("meret_alder", "down"), ("tithe_wardens", "up")]),
])
def test_a_person_taken_or_handed_to_a_group_in_other_words_is_a_deed_to_each(text, expected):
    """A player's read of the held-out sets found most hand-overs read as one deed:
    the person named once and then "him" or "her", held "in cuffs" on the way, or
    brought "before" the group."""
    assert sorted((d.target.id, "up" if d.delta > 0 else "down")
                  for d in person_and_group(text, LONG_EBB)) == sorted(expected)


@pytest.mark.parametrize("text", [
    "I walk Odile to the Lampwrights' hall and hand her the lantern",  # a thing handed
    "I bring Tamsin to the Tithe Wardens' booth to pay her tithe",      # brought, not held
    "The wardens catch Wick and he hands her over to the Lampwrights",   # another's act
    "I take Meret by the arm to the Lampwrights",                        # led, not held
])
def test_a_person_brought_or_walked_to_a_group_is_not_handed_over(text):
    assert person_and_group(text, LONG_EBB) == []


@pytest.mark.parametrize("text", [
    "hand the ledger over to the guild",
    "hand the old letters over to the guild",
    "hand it over to the watch",
    "I hand the ledger over to the Guild",
])
def test_a_thing_handed_to_a_group_is_no_person_betrayed(text):
    assert [d.target.kind for d in person_and_group(text)] == []


@pytest.mark.parametrize("text, expected", [
    ("rob the night shift's lockers", ("night_shift", "faction")),
    ("steal the circus folk's winter feed for my own horses", ("circus_folk", "faction")),
    ("kick over the salvage crew's little shrine", ("salvage_crew", "faction")),
])
def test_a_lower_case_owner_after_the_is_a_group_not_a_name(text, expected):
    """A name takes no determiner: "the night shift's" is no one called Shift."""
    assert [(m.entity.id, m.entity.kind) for m in mentions(text)] == [expected]
    assert [m.entity.id for m in mentions("steal the old man's purse")] == ["man"]
    assert [m.entity.id for m in mentions("i diss rook's lockpicking")] == ["rook"]


@pytest.mark.parametrize("text", [
    "someday i'm gonna sabotage the miners union. not today though",
    "i plan to rob the thieves guild someday, once im strong enough",
    "the thieves' guild robbed the bank last night. I read about it over breakfast.",
])
def test_a_deed_put_off_or_anothers_leaves_the_router_no_deed_skill(sense, text):
    """The deed the words tell is not the player's now: no deed, and the router's own
    guess of a deed skill, which its phrases make as readily, is dropped (``unsure``)."""
    found = sense.turn_reading(text)
    assert (found.deeds, found.asks, found.unsure) == ([], False, True)


TITLED = cast_entities({"amos_whitlock": {"name": "Sheriff Amos Whitlock", "role": "sheriff"},
                        "josiah_hale": {"name": "Reverend Josiah Hale", "role": "preacher"},
                        "wen_zhao": {"name": "Doctor Wen Zhao", "role": "surgeon"},
                        "delphine_marchand": {"name": "Delphine Marchand", "role": "owner"},
                        "cole_brannigan": {"name": "Cole Brannigan", "role": "gunslinger"}})


@pytest.mark.parametrize("text, expected", [
    ("steal the reverend's bible", "josiah_hale"),         # the title the name opens with
    ("buy the rev a drink", "josiah_hale"),                # typed short
    ("I thank Amos for the ride", "amos_whitlock"),        # the name after the title
    ("I snap Doc Wen's spectacles in half", "wen_zhao"),
    ("spit on the floor of miss del's saloon", "delphine_marchand"),  # shortened, after "miss"
    ("I step between Del and the drover", "delphine_marchand"),       # shortened, capitalised
    ('"Reverend, I came to thank you for burying my brother."', "josiah_hale"),  # called by it
    ('"Sit down, Doc, I\'ll hold the lamp," I say', "wen_zhao"),
])
def test_players_call_people_by_title_and_by_short_names(text, expected):
    """Before, "Sheriff Amos Whitlock" was no one's "Amos", "the reverend" was a common
    word after "the", and "Del" was no one: the deed had no target and was lost."""
    assert [m.entity.id for m in mentions(text, TITLED)] == [expected]


@pytest.mark.parametrize("text", [
    "Gun down the bandits",          # a role is no name to shorten: not the gunslinger
    "Delivery for the saloon",       # a longer word only starts like a name
    "Walk to the docks",             # a sentence's first word: not Walker
    "I take a walk by the river",    # lower case after "the" or "a" is a word
    "I go for a walk. Walk slowly.",
])
def test_a_word_that_only_starts_like_a_name_or_a_role_names_no_one(text):
    cast = cast_entities({**{e.id: {"name": e.name} for e in TITLED if e.kind == "npc"},
                          "walker_reyes": {"name": "Walker Reyes"}})
    assert not [m for m in mentions(text, cast) if m.entity.kind == "npc"]


@pytest.mark.parametrize("text, expected", [
    ("I tip off the Tithe Wardens that Corran hides the stolen oil",
     [("corran_hale", "down"), ("tithe_wardens", "up")]),
    ("report Wick to the Lampwrights", [("lampwrights_guild", "up"), ("wick", "down")]),
    ("I inform the Bellkeepers where Meret is hiding", [("bellkeepers", "up"),
                                                        ("meret_alder", "down")]),
    ("I rat Wick out to the Lampwrights", [("lampwrights_guild", "up"), ("wick", "down")]),
])
def test_a_person_informed_on_to_a_group_is_a_deed_to_each(sense, text, expected):
    assert _done(sense.turn(text, LONG_EBB)[0]) == expected


@pytest.mark.parametrize("text", [
    "I tip off Odile that the Tithe Wardens are coming",      # a warning to a person
    "I alert the Tithe Wardens about the fire on the quay",   # no one informed on
])
def test_a_warning_or_news_is_no_one_informed_on(text):
    assert person_and_group(text, LONG_EBB) == []


EPITHETS = cast_entities({
    "hashim": {"name": "Grand Vizier Hashim al-Rumi, called the Old Vizier"},
    "nadira": {"name": "Vizier Nadira Sefu, the Vizier of Coin"},
    "kasim": {"name": "Kasim, called the Whisper"},
    "zara": {"name": "Zara bint Qadir, called Auntie Zara"},
    "rafi": {"name": "Rafi (Sparrow)"},
    "nico": {"name": 'Nico "the Eel" Falier'},
    "zanetta": {"name": "Zanetta Corvo", "also": other_names(
        {"name": "Zanetta Corvo", "role": "captain of the Salt Moths, called the Scorpion"})}},
    [("divan", "the Divan")], faction_names={"divan": ["viziers", "vizier"]})


@pytest.mark.parametrize("text, expected", [
    ("When the Old Vizier stumbles on the stair I catch him", "hashim"),  # ", called the X"
    ("I yank Nadira back before the rail gives way", "nadira"),          # a middle name
    ("I lie to the Vizier of Coin about the ledger", "nadira"),           # ", the X of Y"
    ("I hand the Whisper a fat pouch of silver", "kasim"),
    ('"Auntie, your camels are the finest I have ever seen."', "zara"),        # its title
    ("I pull Sparrow out of the cistern", "rafi"),                         # "(X)"
    ("I pay the Eel's debts", "nico"),                                     # 'A "X" B'
    ("I tip my hat to Falier", "nico"),
    ("I cut the Scorpion's sail ropes", "zanetta"),                        # in the role
])
def test_a_name_written_with_an_epithet_names_its_person_by_each(text, expected):
    """Before, "Kasim, called the Whisper" was one long name nobody types, and "Vizier
    Nadira Sefu" was "Vizier" or "Coin": the deed went to the Divan's viziers or nowhere."""
    assert [m.entity.id for m in mentions(text, EPITHETS) if not m.guess] == [expected]


def test_an_epithet_is_no_name_of_its_own():
    assert epithets("Kasim, called the Whisper") == ("Kasim", ["the Whisper"])
    assert epithets("Morwenna Vail, the Pirate Queen") == ("Morwenna Vail", ["the Pirate Queen"])
    assert epithets("Odile Venn") == ("Odile Venn", [])
    # a lone "whisper" is a verb, not Kasim
    assert [m.entity.id for m in mentions("I whisper to the innkeeper", EPITHETS)] == []


@pytest.mark.parametrize("text, expected", [
    ("I borrow Odile's lens without telling her", [("odile_venn", "down")]),
    ("I fix Odile's lamp without telling her", [("odile_venn", "up")]),  # a kindness unasked
])
def test_taking_behind_someones_back_is_no_favour(sense, text, expected):
    assert _done(sense.turn(text, LONG_EBB)[0]) == expected


HOUSES = cast_entities({
    "livia": {"name": "Contessa Livia Morosin", "traits": {"faction": "house_morosin"}},
    "flint": {"name": "Flint", "role": "captain", "traits": {"faction": "wall_militia"}},
    "patch": {"name": "Patch", "role": "apprentice"},
    "rust": {"name": "Rust", "role": "boss"}},
    [("house_morosin", "House Morosin"), ("wall_militia", "the Wall Militia"),
     ("lantern_clinic", "the Lantern Clinic")])


@pytest.mark.parametrize("text, expected", [
    ("I carry the Morosin household ledgers out of their archive", "house_morosin"),
    ("I bar the gate against the Morosin guards", "house_morosin"),
    ("I steal Morosin's mask", "livia"),               # a possessive is the person's
    ("I slap Morosin hard", "livia"),
    ("I hand the militia captain a rifle scope", "flint"),  # her group's own captain
    ("I call the Wall Militia captain a coward", "flint"),
    ("I rob the militia", "wall_militia"),
])
def test_a_name_a_group_shares_and_a_groups_own_role(text, expected):
    """A family name said of things or people ("the Morosin guards") names the house;
    "the militia captain" is the militia's captain, not the militia."""
    assert [m.entity.id for m in mentions(text, HOUSES) if not m.guess][:1] == [expected]


def test_a_role_that_opens_with_head_or_member_names_no_one():
    assert role_noun("head of House Morosin and hostess of the masquerade") == ""
    assert role_noun("member of the Glass Rats") == ""
    assert role_noun("captain of the Wall Militia") == "captain"


@pytest.mark.parametrize("text, expected", [
    ("Patch asks me to help him haul water for the Lantern Clinic. I laugh at him.", "patch"),
    ("I pull Flint aside and warn her that one of her own sentries sells the rotation.",
     "flint"),
    ("Rust offers me a place on his crew. I spit at his feet.", "rust"),
])
def test_him_and_her_are_a_person_not_the_group_named_last(text, expected):
    """Before, "him" took the last one named, a group ("the Lantern Clinic"), and "her
    shift" or "his crew" was a group of its own."""
    assert [d.target.id for d in read_deeds(text, HOUSES)] == [expected]


def test_taken_unasked_is_a_taking_verb_and_no_leave_in_one_sentence():
    from narratoria.runtime.planner.deeds import taken_unasked

    assert taken_unasked("may I borrow Odile's lens without telling her?")
    assert taken_unasked("I read her letters without asking")
    assert not taken_unasked("I fix Odile's lamp without telling her")
    assert not taken_unasked("I take the lamp. I fix her roof without telling her.")
