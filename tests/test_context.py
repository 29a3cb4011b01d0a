"""Context assembly (docs/scene.md, "Context precedence"): precedence order, No-Shadow rule, player
agency and the token budget, measured with the real tiktoken encoding."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from narratoria.runtime.planner.context import (
    PLAYER_LABEL,
    AssembledContext,
    Fragment,
    assemble,
    count_tokens,
    order,
)
from narratoria.runtime.store import Hit, LoreChunk

MERLIN_FILE = "character_merlin.txt"
MORGANA_FILE = "npc_merlin_morgana_relationship.txt"
MERLIN_FRONTMATTER = ("entity_type: character\nentity_id: merlin\nalignment: lawful_good\n"
                      "core_traits: [never_accepts_evil, protective_of_innocents]")
MERLIN_PROSE = "Merlin is a figure of profound wisdom who would NEVER align with evil..."
MORGANA_PROSE = ("Morgana often tempts Merlin, suggesting his rigid morality blinds him to "
                 "deeper truths. Despite her provocations, Merlin secretly harbors doubts "
                 "about the nature of good and evil...")


def lore(content: str, source_type: str, tier: int, file_path: str, **fields) -> LoreChunk:
    return LoreChunk(campaign_id="camelot", campaign_version="1", file_path=file_path,
                     chunk_index=0, paragraph_id=0, content=content,
                     token_count=count_tokens(content), source_type=source_type,
                     weight_tier=tier, **fields)


def merlin_fragments() -> list[Fragment]:
    # Given in the "wrong" order, most relevant first, as a search would return them.
    return [
        Fragment.from_lore(lore(MORGANA_PROSE, "prose", 4, MORGANA_FILE), relevance=0.92),
        Fragment.from_lore(lore(MERLIN_PROSE, "prose", 3, MERLIN_FILE), relevance=0.40),
        Fragment.from_lore(lore(MERLIN_FRONTMATTER, "frontmatter", 1, MERLIN_FILE,
                                entity_ids=["merlin"]), relevance=0.31),
    ]


def label_of(text: str, body: str) -> str:
    """The label line just above a fragment's text."""
    lines = text.splitlines()
    return lines[lines.index(body.splitlines()[0]) - 1]


# -- the Merlin example: frontmatter against another file's prose ---------------------------

def test_merlin_frontmatter_is_binding_and_morgana_prose_cannot_override_it():
    result = assemble(merlin_fragments(), 2000)
    text = result.text

    assert [f.source_type for f in result.kept] == ["frontmatter", "prose", "prose"]
    assert [f.file_origin for f in result.kept] == [MERLIN_FILE, MERLIN_FILE, MORGANA_FILE]
    assert result.dropped == []
    # The assertion comes first, under a BINDING heading and a BINDING label.
    assert text.index(MERLIN_FRONTMATTER) < text.index(MERLIN_PROSE) < text.index(MORGANA_PROSE)
    tier1 = text.index("TIER 1")
    assert "BINDING" in text[tier1:text.index(MERLIN_FRONTMATTER)]
    assert "BINDING" in label_of(text, MERLIN_FRONTMATTER)
    # The cross-file prose is labelled as unable to override it, naming whom and where.
    morgana_label = label_of(text, MORGANA_PROSE)
    assert MORGANA_FILE in morgana_label
    assert "cannot override" in morgana_label
    assert "merlin" in morgana_label and MERLIN_FILE in morgana_label
    # Same-file prose (tier 3) enriches the assertion: no conflict label.
    assert "cannot override" not in label_of(text, MERLIN_PROSE)
    # Tier boundaries, in order.
    assert tier1 < text.index("TIER 3") < text.index("TIER 4")
    assert "TIER 2" not in text
    assert result.tokens == count_tokens(text)


def test_prose_without_binding_in_context_is_not_labelled_as_conflicting():
    morgana = merlin_fragments()[0]
    text = assemble([morgana], 2000).text
    assert "cannot override" not in text


def test_prose_about_someone_else_is_not_labelled():
    unrelated = Fragment("The lake lies still under the moon; a sword glints below.",
                         "prose", 4, "lake.txt", relevance=0.8)
    # "Merlinesque" is not a whole-word mention of merlin.
    near_miss = Fragment("A Merlinesque hermit lives by the road.", "prose", 4, "road.txt")
    text = assemble([*merlin_fragments(), unrelated, near_miss], 2000).text
    assert "cannot override" not in label_of(text, unrelated.text)
    assert "cannot override" not in label_of(text, near_miss.text)


def test_conflict_found_by_name_key_and_by_spaced_entity_id():
    aldric = Fragment("entity_id: blacksmith_aldric\nname: Gareth\ntemperament: gruff",
                      "frontmatter", 1, "npcs/aldric.md")
    by_name = Fragment("GARETH laughs warmly at everyone.", "prose", 4, "tavern.md", 0.9)
    by_id = Fragment("Nobody has seen Blacksmith Aldric smile.", "prose", 4, "square.md", 0.5)
    text = assemble([by_name, by_id, aldric], 2000).text
    assert "cannot override" in label_of(text, by_name.text)
    assert "cannot override" in label_of(text, by_id.text)
    assert "blacksmith_aldric (npcs/aldric.md)" in label_of(text, by_id.text)


def test_from_hit_takes_metadata_and_score():
    chunk = lore(MERLIN_FRONTMATTER, "frontmatter", 1, "lore/merlin.txt",
                 file_origin=MERLIN_FILE, entity_ids=["merlin", "camelot"])
    fragment = Fragment.from_hit(Hit(record=chunk, score=0.66))
    assert (fragment.source_type, fragment.weight_tier, fragment.file_origin) == (
        "frontmatter", 1, MERLIN_FILE)
    assert (fragment.relevance, fragment.entity, fragment.is_player) == (0.66, "merlin", False)


# -- order ------------------------------------------------------------------------------

def test_ordered_by_tier_then_relevance():
    fragments = [
        Fragment("six low", "memory", 6, relevance=0.1),
        Fragment("four high", "prose", 4, "a.txt", relevance=0.9),
        Fragment("six high", "memory", 6, relevance=0.8),
        Fragment("two", "state", 2, relevance=0.0),
        Fragment("four low", "prose", 4, "b.txt", relevance=0.2),
        Fragment("five", "reputation", 5, relevance=0.5),
    ]
    expected = ["two", "four high", "four low", "five", "six high", "six low"]
    assert [f.text for f in order(fragments)] == expected
    result = assemble(fragments, 5000)
    assert [f.text for f in result.kept] == expected
    positions = [result.text.index(f"\n{t}") for t in expected]
    assert positions == sorted(positions)
    boundaries = [result.text.index(f"TIER {n} ") for n in (2, 4, 5, 6)]
    assert boundaries == sorted(boundaries)
    assert "TIER 1" not in result.text and "TIER 3" not in result.text


# -- budget -----------------------------------------------------------------------------

def budget_fragments() -> list[Fragment]:
    return [
        Fragment(MERLIN_FRONTMATTER, "frontmatter", 1, MERLIN_FILE, 0.3, entity="merlin"),
        Fragment("You stand in the great hall of Camelot, torch in hand.", "state", 2),
        Fragment("The hall fell silent when Merlin last spoke of Morgana.", "memory", 5, None, 0.9),
        Fragment("Merlin owes the player a favour for the rescue at the ford.", "memory", 5,
                 None, 0.4),
        Fragment("In an earlier tale the player lost a ring in the lake.", "memory", 6, None, 0.7),
        Fragment("Long ago the player met a hermit who spoke in riddles.", "memory", 6, None, 0.2),
    ]


def test_small_budget_drops_tier_six_then_five_least_relevant_first(caplog):
    fragments = budget_fragments()
    full = assemble(fragments, 10_000)
    assert full.dropped == [] and len(full.kept) == 6
    without_six = assemble(fragments[:4], 10_000).tokens
    without_five = assemble(fragments[:2], 10_000).tokens

    caplog.set_level(logging.INFO, logger="narratoria.context")
    one_dropped = assemble(fragments, full.tokens - 1)
    assert [f.text for f in one_dropped.dropped] == [fragments[5].text]  # tier 6, least relevant

    result = assemble(fragments, without_six)
    assert result.tokens <= without_six
    assert [f.text for f in result.dropped] == [fragments[5].text, fragments[4].text]

    caplog.clear()
    result = assemble(fragments, without_five)
    assert result.tokens == count_tokens(result.text) <= without_five
    assert [f.text for f in result.kept] == [fragments[0].text, fragments[1].text]
    # Tier 6 goes first, then tier 5; within a tier the least relevant first.
    assert [f.text for f in result.dropped] == [fragments[i].text for i in (5, 4, 3, 2)]
    for fragment in result.dropped:
        assert fragment.text not in result.text
    assert MERLIN_FRONTMATTER in result.text
    records = [r for r in caplog.records if r.name == "narratoria.context"]
    assert len(records) == 1
    message = records[0].getMessage()
    assert "dropped 4 of 6" in message
    assert message.index("tier 6") < message.index("tier 5")


def test_nothing_dropped_nothing_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="narratoria.context")
    result = assemble(budget_fragments(), 10_000)
    assert result.dropped == []
    assert not [r for r in caplog.records if r.name == "narratoria.context"]


def test_zero_budget_keeps_nothing():
    result = assemble(budget_fragments(), 0)
    assert result == AssembledContext(text="", kept=[], dropped=result.dropped, tokens=0)
    assert len(result.dropped) == 6 and result.dropped[-1].source_type == "frontmatter"


def test_special_token_text_is_counted_not_refused():
    assert count_tokens("<|endoftext|>") > 1


fragment_strategy = st.builds(
    Fragment,
    text=st.text(min_size=1, max_size=60).filter(str.strip),
    source_type=st.sampled_from(["frontmatter", "prose", "state", "memory"]),
    weight_tier=st.integers(1, 6),
    file_origin=st.sampled_from([None, "a.txt", "b.txt"]),
    relevance=st.floats(-1, 1),
    is_player=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(fragments=st.lists(fragment_strategy, max_size=12), budget=st.integers(0, 400))
def test_budget_always_holds_and_only_the_tail_is_dropped(fragments, budget):
    result = assemble(fragments, budget)
    assert result.tokens == count_tokens(result.text) <= budget
    ranked = order(fragments)
    assert result.kept + result.dropped[::-1] == ranked
    if result.kept and result.dropped:
        last = result.kept[-1]
        assert all((f.weight_tier, -f.relevance) >= (last.weight_tier, -last.relevance)
                   for f in result.dropped)


# -- player agency ----------------------------------------------------------------------

def test_player_fragments_are_labelled_reference_only():
    wren = Fragment.from_lore(lore("Wren is a quick-tongued rogue who wants her name cleared.",
                                   "prose", 2, "player/wren.json", is_player=True), 0.5)
    innkeeper = Fragment("The innkeeper is a nervous man.", "prose", 4, "inn.txt", 0.5)
    assert wren.is_player
    text = assemble([innkeeper, wren], 2000).text
    label = label_of(text, wren.text)
    assert PLAYER_LABEL in label
    assert "reference only" in label and "never speak" in label and "decide" in label
    assert "reference only" not in label_of(text, innkeeper.text)


# -- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "named"), [
    ({"weight_tier": 0}, "weightTier"),
    ({"weight_tier": 7}, "weightTier"),
    ({"weight_tier": True}, "weightTier"),
    ({"text": ""}, "text"),
    ({"text": "   "}, "text"),
    ({"source_type": "rumour"}, "sourceType"),
    ({"relevance": float("nan")}, "relevance"),
    ({"file_origin": ""}, "fileOrigin"),
    ({"is_player": "yes"}, "isPlayer"),
])
def test_bad_fragment_raises_naming_the_field(fields, named):
    base = {"text": "Merlin waits.", "source_type": "prose", "weight_tier": 4,
            "file_origin": "a.txt"}
    with pytest.raises(ValueError, match=rf"^{named}: .*{fields[next(iter(fields))]!r}"):
        Fragment(**{**base, **fields})


@pytest.mark.parametrize("budget", [-1, 2.5, None])
def test_bad_budget_raises_naming_the_field(budget):
    with pytest.raises(ValueError, match=r"^budget_tokens: "):
        assemble(merlin_fragments(), budget)  # type: ignore[arg-type]


def test_non_fragment_raises():
    with pytest.raises(ValueError, match=r"fragments\[\d\]"):
        assemble(["just a string"], 100)  # type: ignore[list-item]
