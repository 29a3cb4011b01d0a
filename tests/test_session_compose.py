"""What a new session of a campaign starts from (runtime/sessions/compose.py): the
campaign's state, the realised character, then the request; its NPCs over the cast."""

from __future__ import annotations

import pytest

from conftest import TESTS
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.sessions.compose import compose_session, player_part, requested_state

LONG_EBB = TESTS.parent / "campaigns" / "long_ebb"


@pytest.fixture(scope="module")
def ebb():
    return load_campaign(LONG_EBB)


def test_a_session_starts_from_the_campaign_alone(ebb):
    start = compose_session(ebb, {})
    assert start.state == ebb.initial_state() and start.cast == dict(ebb.cast)


def test_the_character_then_the_request_are_laid_over_the_campaign(ebb):
    player = player_part({"player": {"name": "Ysolde", "stats": {"nerve": 9},
                                     "inventory": {"sword": {}}, "location": "the moon"}})
    assert player == {"player": {"name": "Ysolde", "stats": {"nerve": 9}}}  # the world's own
    request = {"player": {"stats": {"vigour": 80}}, "weather": "fog",
               "npcs": {"wick": {"name": "Wick the Younger"}, "ferry": {"name": "Ferry"}}}
    start = compose_session(ebb, request, player)
    stats = start.state["player"]["stats"]
    assert start.state["player"]["name"] == "Ysolde"
    assert (stats["nerve"], stats["vigour"], stats["lamp_oil"]) == (9, 80, 3)
    assert "tide_lantern" in start.state["player"]["inventory"]  # the campaign's items
    assert start.state["world"]["location"] == "brinehollow_quay"
    assert start.state["weather"] == "fog" and "npcs" not in request.get("player", {})
    assert start.cast["wick"] == {"name": "Wick the Younger"}  # the request's replaces
    assert start.cast["ferry"] == {"name": "Ferry"} and "odile_venn" in start.cast
    assert "wick" not in start.state.get("npcs", {})  # the cast, not the state
    assert "npcs" in request  # the caller's request is left as it was


@pytest.mark.parametrize(("text", "expected"), [("", {}), ('{"a": 1}', {"a": 1})])
def test_the_requested_state_is_a_json_object(text, expected):
    assert requested_state(text) == expected


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "{not json"])
def test_a_requested_state_that_is_no_object_is_refused(text):
    with pytest.raises(ValueError):
        requested_state(text)
