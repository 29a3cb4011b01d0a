"""What a turn starts from (runtime/turn/compose.py): the player's text or choice, and
the scene composed from the session, the opened scene and a real campaign."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conftest import TESTS
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.sessions.store import SessionRecord
from narratoria.runtime.sessions.storyline import OpenScene
from narratoria.runtime.skillrun.plan import Plan
from narratoria.runtime.turn.compose import TEXT_MAX, BadChoice, player_input, scene_input
from narratoria.runtime.turn.npcs import NpcView
from narratoria.runtime.turn.resolution import Rules

LONG_EBB = TESTS.parent / "campaigns" / "long_ebb"


def session(**fields) -> SessionRecord:
    now = datetime.now(UTC)
    return SessionRecord(**{"id": "s1", "owner": "me", "campaign": "", "title": "t",
                            "playthrough_id": "p1", "status": "active", "created_at": now,
                            "updated_at": now, **fields})


def test_the_input_is_the_trimmed_text_or_the_chosen_line():
    menu = session(choices=["Ask about the map", "Leave the quay"])
    assert player_input(menu, "  I wade into the mud \n", None) == "I wade into the mud"
    assert player_input(menu, None, 2) == "Leave the quay"
    assert player_input(menu, "ignored", 1) == "Ask about the map"  # a choice wins


@pytest.mark.parametrize(("record", "text", "choice", "why"), [
    (session(), None, 1, "no choices yet"),
    (session(choices=["a", "b"]), None, 3, "choice: 3 is not between 1 and 2"),
    (session(choices=["a", "b"]), None, 0, "choice: 0 is not between 1 and 2"),
    (session(), "   ", None, "a turn needs text or a choice"),
    (session(), None, None, "a turn needs text or a choice"),
    (session(), "x" * (TEXT_MAX + 1), None, f"at most {TEXT_MAX}"),
])
def test_an_input_the_session_cannot_take_is_refused(record, text, choice, why):
    with pytest.raises(BadChoice, match=why):
        player_input(record, text, choice)


def test_a_given_plan_without_text_is_named_after_the_plan():
    plan = Plan(requestId="dice-check", tools=[])
    assert player_input(session(), None, None, plan) == "(plan dice-check)"
    assert player_input(session(), "I roll", None, plan) == "I roll"


def test_a_campaign_scene_carries_its_beats_rules_and_the_names_in_it():
    campaign = load_campaign(LONG_EBB)
    record = session(campaign=campaign.id, turns=0, state=campaign.initial_state(),
                     last_narration="The boats lie in the mud.")
    state = record.session_state()
    said = "I ask Odile about the lantern"
    guidance = campaign.guidance(1, state, said)
    opened = OpenScene("m1", npcs=(NpcView("odile_venn", "Odile Venn"),))
    scene = scene_input(record, said, opened, state, campaign=campaign, guidance=guidance,
                        canon=campaign.canon, entities=("an entity",))
    assert (scene.session_id, scene.playthrough_id, scene.turn_number) == ("s1", "p1", 1)
    assert scene.player_input == said and scene.last_narration == "The boats lie in the mud."
    assert scene.beats_triggered == ("the_contract",) and scene.guidance == guidance.lines
    assert scene.beat_patch == guidance.state_patch and scene.beat_sentences
    assert scene.rules == campaign.rules and scene.npcs == opened.npcs
    assert "Odile Venn" in scene.names and "Tide Lantern" in scene.names
    assert scene.entities == ("an entity",) and scene.execute_only is False


def test_a_scene_without_a_campaign_has_default_rules_and_no_names():
    record = session(turns=4)
    scene = scene_input(record, "I wait", OpenScene(None), record.session_state(),
                        execute_only=True)
    assert scene.turn_number == 5 and scene.rules == Rules() and scene.names == ()
    assert scene.guidance == () and scene.beat_patch == {} and scene.execute_only
