"""Items the player hands over leave the inventory (runtime/turn/handover.py), on the
built-in campaign's own items and starting inventory."""

from __future__ import annotations

import pytest

from conftest import REPO
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.state.session import SessionState
from narratoria.runtime.turn.handover import handed_over, handover_patch


@pytest.fixture(scope="module")
def ebb():
    return load_campaign(REPO / "campaigns" / "long_ebb")


@pytest.fixture()
def state(ebb):
    return {"player": {"inventory": ebb.items.initial_inventory()}}


@pytest.mark.parametrize("action, items", [
    ("I give Tamsin Cask my lamp oil flask", ["lamp_oil_flask"]),
    ("i hand wick the tide lantern", ["tide_lantern"]),
    ("I try to sell the boathook to Odile Venn", ["boathook"]),
    ("I pass my lantern to Meret", ["tide_lantern"]),          # a word of one item's name
    ("I give the flask and the boathook to Wick", ["lamp_oil_flask", "boathook"]),
])
def test_a_held_item_handed_over_is_named(ebb, state, action, items):
    assert sorted(handed_over(action, ebb.canon, state)) == sorted(items)


@pytest.mark.parametrize("action", [
    "I light the tide lantern",                     # used, not handed over
    "I show Tamsin my lamp oil flask",
    "I give Tamsin a smile",                        # nothing held named
    "I ask Odile to give me her lantern",           # asked for, not given
    "What would Wick give for my boathook?",
    "I give Odile the bell token",                  # not held
])
def test_nothing_else_moves_an_item(ebb, state, action):
    assert handed_over(action, ebb.canon, state) == []


def test_a_stack_loses_one_and_a_last_one_its_key(ebb, state):
    state["player"]["inventory"]["lamp_oil_flask"]["quantity"] = 2
    session = SessionState(state)
    session.apply_patch(handover_patch(["lamp_oil_flask"], session.tree))
    assert session.tree["player"]["inventory"]["lamp_oil_flask"]["quantity"] == 1
    session.apply_patch(handover_patch(["lamp_oil_flask", "boathook"], session.tree))
    assert set(session.tree["player"]["inventory"]) == {"tide_lantern"}


def test_an_inventory_written_as_a_list_loses_the_entry():
    state = {"player": {"inventory": ["rope", {"id": "lantern", "name": "Lantern"}]}}
    assert handed_over("I give Ann the lantern", None, state) == ["lantern"]
    assert handover_patch(["lantern"], state) == {"player": {"inventory": ["rope"]}}
