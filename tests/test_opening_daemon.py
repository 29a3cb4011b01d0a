"""A new session starts with its campaign's opening, and every turn's
menu comes from the world, through a real daemon: the opening narration and
choices are on the session before the player types, in the terminal and in the web
page's view alike, stored as scene 0 (a resume and a branch show them), and free text
is on by default."""

from __future__ import annotations

import shutil

from conftest import TESTS
from narratoria.clients.client import NarratoriaClient
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.planner.choices import MAX_CHOICES, MIN_CHOICES
from narratoria.runtime.planner.narration_scores import broken_choices
from narratoria.runtime.turn.scene_world import campaign_world, opening_text
from support.daemon import cli, kinds, play

CAMPAIGNS = TESTS.parent / "campaigns"
EBB_PEOPLE = ["Odile Venn", "Corran Hale", "Meret Alder", "Tamsin Cask", "Wick"]


def _opening(campaign: str) -> str:
    loaded = load_campaign(CAMPAIGNS / campaign)
    return opening_text(campaign_world(loaded), loaded.initial_state())


def _a_good_menu(choices, people=()) -> None:
    assert MIN_CHOICES <= len(choices) <= MAX_CHOICES, choices
    assert not broken_choices(list(choices), people), choices
    assert len(set(choices)) == len(choices)


def test_a_new_session_opens_on_its_campaign_and_keeps_it_as_scene_0(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb", title="opening")
        assert session.turns == 0
        assert session.last_narration == _opening("long_ebb")
        assert session.last_narration.startswith("You arrive in Brinehollow")
        _a_good_menu(session.choices, EBB_PEOPLE)
        assert session.choices[0] == "Talk to Odile Venn"  # toward the first beat, the contract
        resumed = client.resume_session(session.id)
        assert (resumed.last_narration, list(resumed.choices)) == (session.last_narration,
                                                                   list(session.choices))

        # The first choice is a turn like any other; its menu is the world's too.
        events = play(client, session.id, choice=1)
        assert kinds(events)[-1] == "done"
        started = next(e.started for e in events if e.WhichOneof("event") == "started")
        assert started.input == "Talk to Odile Venn"
        menu = [list(e.choices.options) for e in events if e.WhichOneof("event") == "choices"][0]
        _a_good_menu(menu, EBB_PEOPLE)
        assert client.resume_session(session.id).last_narration != session.last_narration

        # Scene 0 is the opening: retrying scene 1 starts from it again.
        branch = client.branch(session.id, at_scene=1)
        assert branch.turns == 0 and branch.last_narration == session.last_narration
        assert list(branch.choices) == list(session.choices)


def test_every_campaign_opens_and_a_session_without_one_does_not(pattern_daemon):
    with pattern_daemon.client() as client:
        milestone = client.create_session(campaign="ninth_milestone")
        assert milestone.last_narration == _opening("ninth_milestone")
        assert "You are its keeper." in milestone.last_narration
        _a_good_menu(milestone.choices, ["Orla Finch"])
        bare = client.create_session()
        assert bare.last_narration == "" and not bare.choices  # nothing to open with


def test_the_terminal_shows_the_opening_before_the_player_types(pattern_daemon):
    played = cli(pattern_daemon, "play", "--campaign", "long_ebb", stdin="/quit\n")
    assert played.returncode == 0, played.stderr
    out = played.stdout
    opening = _opening("long_ebb")
    first, typed = out.find(opening.split("\n\n")[0]), out.find("> /quit")
    assert 0 <= first < typed, out
    assert "  1. Talk to Odile Venn\n" in out[first:typed]


def test_the_web_pages_first_view_is_the_opening_with_free_text_on(pattern_daemon):
    from support.web import LiveGateway  # the gateway under uvicorn, as its tests run it

    client = NarratoriaClient(f"unix://{pattern_daemon.socket}")
    live = LiveGateway(client)
    try:
        status, _, doc = live.request("POST", "/api/sessions", {"campaign": "long_ebb"})
        assert status == 201, doc
        status, _, view = live.request("GET", f"/api/sessions/{doc['id']}/view")
        assert status == 200
        # What app.js draws on a session's first view: its last narration and choices.
        assert view["last_narration"] == _opening("long_ebb") and view["turns"] == 0
        _a_good_menu(view["choices"], EBB_PEOPLE)
        assert view["free_text"] is True  # long_ebb says nothing: free text is on
    finally:
        live.stop()
        client.close()


def test_a_campaign_that_turns_free_text_off_is_obeyed(pattern_daemon, tmp_path):
    root = shutil.copytree(TESTS / "fixtures" / "campaigns" / "tiny", tmp_path / "tiny")
    manifest = root / "campaign.yml"
    manifest.write_text(manifest.read_text() + "allowFreeText: false\n")
    with pattern_daemon.client() as client:
        session = client.create_session(campaign=str(root))
        assert client.get_session_view(session.id).free_text is False
