"""A campaign played through a real daemon: started by id or path, ingested by the
daemon, its stats clamped, its NPCs bounded, its plot beats triggered."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import TESTS
from narratoria.clients.client import ClientError
from narratoria.runtime.turn.resolution import engine_roll
from skill_plans import run_plan
from support.daemon import kinds, play

REPO = TESTS.parent
TINY = TESTS / "fixtures" / "campaigns" / "tiny"
BROKEN = TESTS / "fixtures" / "campaigns" / "broken"


def state_of(client, session_id: str) -> dict:
    return json.loads(client.get_state(session_id).state_json)


def logs(events, source: str) -> list[str]:
    return [e.log.message for e in events if e.WhichOneof("event") == "log" and e.log.source == source]


def test_a_built_in_campaign_starts_from_its_state_and_cast(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb", title="ebb")
        assert session.campaign == "long_ebb"
        state = state_of(client, session.id)
        # drowned_regard (50) is hidden: no front-end answer carries it.
        assert state["player"]["stats"] == {"vigour": 100, "lamp_oil": 3, "nerve": 7}
        assert state["npcs"]["odile_venn"]["stats"]["trust"] == 4  # an NPC stat
        assert set(state["player"]["inventory"]) == {"tide_lantern", "boathook", "lamp_oil_flask"}
        assert state["world"]["location"] == "brinehollow_quay"
        # The campaign's characters are the session's NPCs: named, they are present.
        events = play(client, session.id, text="I ask Odile Venn about the contract")
        assert kinds(events)[-1] == "done"
        knowledge = [e.knowledge for e in events if e.WhichOneof("event") == "knowledge"]
        assert knowledge and [n.npc_id for n in knowledge[0].npcs] == ["odile_venn"]


def test_an_item_handed_over_leaves_the_inventory_and_the_next_turn_knows(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        events = play(client, session.id, text="i give tamsin cask my lamp oil flask")
        assert "handed over: lamp_oil_flask" in logs(events, "items")
        assert set(state_of(client, session.id)["player"]["inventory"]) == {"tide_lantern",
                                                                          "boathook"}
        # The menu, built from the scene before the turn, offers nothing given away in it.
        menu = [o for e in events if e.WhichOneof("event") == "choices" for o in e.choices.options]
        assert menu and not [o for o in menu if "sprat oil" in o or "flask" in o], menu
        looked = play(client, session.id, text="I look at my tide lantern")
        assert not logs(looked, "items")
        assert set(state_of(client, session.id)["player"]["inventory"]) == {"tide_lantern",
                                                                          "boathook"}


def test_going_somewhere_moves_the_player_and_the_next_scene_is_set_there(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        events = play(client, session.id, text="Go to the Drowned Guildhall")
        assert logs(events, "world") == ["moved to: Drowned Guildhall"]
        assert state_of(client, session.id)["world"]["location"] == "drowned_guildhall"
        # The menu is the Guildhall's, not the quay's: never the way to where one stands.
        menu = [o for e in events if e.WhichOneof("event") == "choices" for o in e.choices.options]
        assert menu and "Go to the Drowned Guildhall" not in menu, menu
        # Staying (looking, asking about a place) moves no one, and the place holds.
        looked = play(client, session.id, text="I look around and ask about the Bell Chapel")
        assert not logs(looked, "world")
        assert state_of(client, session.id)["world"]["location"] == "drowned_guildhall"
        # A branch from scene 1 starts where scene 1 started: on the quay.
        branch = client.branch(session.id, at_scene=1)
        assert state_of(client, branch.id)["world"]["location"] == "brinehollow_quay"


def test_a_failed_climb_toward_a_place_leaves_the_player_where_they_were(pattern_daemon):
    with pattern_daemon.client() as client:
        # The engine's roll is seeded by the session and the turn: a session whose first
        # roll fails the climb (2d6 under 5 against the wall's 8).
        for _ in range(60):
            session = client.create_session(campaign="long_ebb")
            if engine_roll(session.id, 1).dice < 5:
                break
        else:
            pytest.fail("no session of 60 rolls under 5 on its first turn")
        events = play(client, session.id, text="I try to climb down to the Undercourt")
        [check] = [e.check for e in events if e.WhichOneof("event") == "check"]
        assert check.outcome == "failure"
        assert not logs(events, "world")
        assert state_of(client, session.id)["world"]["location"] == "brinehollow_quay"


def test_an_action_out_of_the_fiction_moves_no_one_and_hands_over_nothing(pattern_daemon):
    """Not told and never rolled for, it must not happen either: tacking meta talk onto a
    climb would otherwise skip the roll and still get the player there."""
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        events = play(client, session.id,
                      text="I climb down to the Undercourt, this game is dumb anyway")
        assert not [e for e in events if e.WhichOneof("event") == "check"]
        assert not logs(events, "world")
        assert state_of(client, session.id)["world"]["location"] == "brinehollow_quay"
        given = play(client, session.id, text="I give Odile my boathook, this game is boring")
        assert not logs(given, "items")
        assert "boathook" in state_of(client, session.id)["player"]["inventory"]


def test_plot_beats_trigger_as_scenes_pass_and_are_saved_with_the_turn(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        first = play(client, session.id, text="I look out over the empty bay")
        assert "plot beat triggered: the_contract" in logs(first, "plot")
        tracker = state_of(client, session.id)["plot"]["beats"]
        assert "the_contract" in json.dumps(tracker)
        seen = set(logs(first, "plot"))
        for _ in range(3):
            seen |= set(logs(play(client, session.id, text="I walk along the quay"), "plot"))
        assert "plot beat triggered: the_first_bell" in seen  # its window opens at scene 3
        # Rewinding to scene 1 restores the tracker as it was before scene 1: the
        # contract beat triggers again in the new take.
        branch = client.branch(session.id, at_scene=1)
        again = play(client, branch.id, text="I look out over the empty bay")
        assert "plot beat triggered: the_contract" in logs(again, "plot")


def test_a_stat_patch_is_clamped_into_the_campaigns_range(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="long_ebb")
        events = run_plan(client, session.id, {
            "toolId": "boost", "toolPath": "echo/echo",
            "input": {"key": "player", "value": {"stats": {"nerve": 99, "lamp_oil": -4}}}})
        assert kinds(events)[-1] == "done"
        stats = state_of(client, session.id)["player"]["stats"]
        assert (stats["nerve"], stats["lamp_oil"]) == (10, 0)  # ranges 0-10 and 0-6


def test_a_campaign_folder_is_ingested_by_the_daemon_with_progress(pattern_daemon, tmp_path):
    # A campaign of its own (its id is its folder's name): the suite's shared daemon may
    # have ingested the tiny campaign for another test already.
    name = f"tiny_{uuid.uuid4().hex[:8]}"
    folder = Path(shutil.copytree(TINY, tmp_path / name))
    with pattern_daemon.client() as client:
        first = list(client.ingest_campaign(str(folder)))
        assert first[0].phase == "files" and first[-1].phase == "complete"
        result = json.loads(first[-1].result_json)
        assert result["campaignId"] == name and result["chunksEmbedded"] == result["textChunks"] > 0
        again = json.loads(list(client.ingest_campaign(str(folder)))[-1].result_json)
        assert again["chunksEmbedded"] == 0 and again["chunksReused"] == result["textChunks"]
        # Ingested from a path, the campaign is known by its id from then on.
        session = client.create_session(campaign=name)
        assert session.campaign == name
        assert state_of(client, session.id)["player"]["stats"]["health"] == 100


def test_bad_campaigns_are_refused_with_every_problem_and_nothing_started(pattern_daemon):
    with pattern_daemon.client() as client:
        before = len(client.list_sessions(include_ended=True))
        with pytest.raises(ClientError) as bad:
            client.create_session(campaign=str(BROKEN))
        assert bad.value.code == "INVALID_ARGUMENT"
        assert "campaign.yml:1: version: required field is missing" in bad.value.message
        assert "stats/mana.json:3: range" in bad.value.message
        with pytest.raises(ClientError) as unknown:
            client.create_session(campaign="no_such_campaign")
        assert unknown.value.code == "NOT_FOUND" and "no_such_campaign" in unknown.value.message
        with pytest.raises(ClientError) as refused:
            list(client.ingest_campaign(str(BROKEN)))
        assert refused.value.code == "INVALID_ARGUMENT"
        assert len(client.list_sessions(include_ended=True)) == before


def test_cli_ingest_goes_through_the_running_daemon(pattern_daemon, tmp_path):
    folder = Path(shutil.copytree(REPO / "campaigns" / "ninth_milestone", tmp_path / "nm"))
    # Its own id, so that there is something to embed whatever the shared daemon ingested.
    manifest = folder / "campaign.yml"
    name = f"nm_{uuid.uuid4().hex[:8]}"
    manifest.write_text(manifest.read_text().replace("id: ninth_milestone", f"id: {name}", 1))
    env = {"NARRATORIA_ADDRESS": f"unix://{pattern_daemon.socket}", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns", "ingest",
                          str(folder), "--json"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["via"], doc["campaignId"]) == ("daemon", name)
    assert "embedding" in out.stderr  # progress


def test_a_fresh_character_is_realised_in_the_campaign_once(pattern_daemon):
    from narratoria.runtime.characters import CharacterStore

    characters = CharacterStore(pattern_daemon.dir / "data")
    import io

    from PIL import Image

    face = io.BytesIO()
    Image.new("RGB", (48, 64), (90, 120, 140)).save(face, format="PNG")
    wren = characters.create("Wren is a tideborn salvager from the mudflats, quick with a "
                             "boathook and slow to trust anyone who wears a uniform.",
                             face.getvalue(), name="Wren")
    with pattern_daemon.client() as client:
        first = client.create_session(campaign="long_ebb", character_id=wren.id)
        player = state_of(client, first.id)["player"]
        assert player["character_id"] == wren.id and player["name"]
        assert player["violation_state"] in ("none", "warning", "incompatible")
        assert player["stats"]["vigour"] == 100  # the campaign's stats are still there
        assert "tide_lantern" in player["inventory"]  # and its starting items
        [record] = characters.get(wren.id).realizations
        assert record.campaign_id == "long_ebb" and record.realization_id == player["realization_id"]
        # The same character in the same campaign: the realisation is reused, not redone.
        again = state_of(client, client.create_session(campaign="long_ebb",
                                                       character_id=wren.id).id)["player"]
        assert again["realization_id"] == player["realization_id"]
        with pytest.raises(ClientError) as missing:
            client.create_session(campaign="long_ebb", character_id="char_0000000000000000")
        assert missing.value.code == "NOT_FOUND"
        with pytest.raises(ClientError) as no_campaign:
            client.create_session(character_id=wren.id)
        assert no_campaign.value.code == "INVALID_ARGUMENT"


def test_campaigns_list_shows_playthroughs_to_resume(pattern_daemon, tmp_path):
    with pattern_daemon.client() as client:
        session = client.create_session(campaign="ninth_milestone", title="snowbound")
    env = {"NARRATORIA_ADDRESS": f"unix://{pattern_daemon.socket}", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    out = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns", "list",
                          "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["savesKnown"]
    [entry] = [c for c in doc["campaigns"] if c["id"] == "ninth_milestone"]
    assert session.id in [s["id"] for s in entry["saves"]]
    text = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns", "list"],
                          capture_output=True, text=True, env=env, timeout=120).stdout
    assert f"narratoria play --session {session.id}" in text
