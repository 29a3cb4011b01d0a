"""The world reacts to deeds, through a real daemon with the default
model: a deed done to a campaign's NPC or faction changes that NPC's opinion or that
faction's standing in the session's state (the real skills, the real store), under the
ids the campaign uses; asking where one stands reads the same record back; a look
around changes no one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.daemon import Daemon, kinds, play


@pytest.fixture(scope="module")
def daemon(config_dir):
    d = Daemon()
    yield d
    assert d.stop() == 0


def state_of(client, session_id: str) -> dict:
    return json.loads(client.get_state(session_id).state_json)


def tools_of(events) -> list[tuple[str, dict]]:
    plans = [json.loads(e.plan.plan_json) for e in events if e.WhichOneof("event") == "plan"]
    return [(t["toolPath"], t.get("input", {})) for plan in plans[-1:] for t in plan["tools"]]


def finished_ok(events) -> list[bool]:
    return [e.tool_finished.ok for e in events if e.WhichOneof("event") == "tool_finished"]


def test_deeds_change_standing_in_the_state_and_questions_read_it(daemon):
    with daemon.client() as client:
        # On from the first turn: no player has to know to switch them on.
        listed = {s.name: s.enabled for s in client.list_skills()}
        assert listed["npc-perception"] and listed["reputation"]
        session = client.create_session(campaign="long_ebb", title="deeds")

        # An NPC by her first name: the store's record is the cast's id.
        events = play(client, session.id, text="I snatch Tamsin's bell token and laugh at her")
        assert kinds(events)[-1] == "done"
        [(ref, deed)] = [t for t in tools_of(events) if t[0].startswith("npc-perception/")]
        assert ref == "npc-perception/update-perception"
        assert deed["npcId"] == "tamsin_cask" and deed["delta"] < 0
        assert all(finished_ok(events))
        tamsin = state_of(client, session.id)["perception"]["tamsin_cask"]
        assert tamsin["score"] == deed["delta"] and tamsin["attitude"] == "neutral"
        # The deed sense's adapted MiniLM is read in the embedder's process: the planner's
        # holds the model, not a second torch.
        planner = next(a.pid for a in client.status().actors if a.name == "planner")
        embedder = next(a.pid for a in client.status().actors if a.name == "embedder")
        assert "libtorch" not in Path(f"/proc/{planner}/maps").read_text()
        assert "libtorch" in Path(f"/proc/{embedder}/maps").read_text()

        # A faction by its short name: the campaign's own faction id.
        events = play(client, session.id, text="I give the guild's journeymen a week's wages")
        [(ref, gift)] = [t for t in tools_of(events) if t[0].startswith("reputation/")]
        assert ref == "reputation/update-reputation"
        [change] = gift["changes"]
        assert change["delta"] > 0
        state = state_of(client, session.id)
        assert state["reputation"]["lampwrights_guild"]["score"] == change["delta"]
        assert state["perception"]["tamsin_cask"]["score"] < 0  # the earlier deed stays

        # Asking reads the same record; looking changes no one.
        events = play(client, session.id, text="Does Tamsin Cask still trust me?")
        assert ("npc-perception/query-perception", {"npcId": "tamsin_cask"}) in tools_of(events)
        summary = " ".join(json.loads(e.tool_finished.output_json).get("summary", "")
                           for e in events if e.WhichOneof("event") == "tool_finished")
        assert "tamsin_cask" in summary and "neutral" in summary
        # The engine answers the question itself: the narration opens with the band
        # the skill read and, inside the neutral band, which way she leans; never a score.
        narration = events[-1].done.narration
        assert narration.startswith(
            "Tamsin Cask has no settled opinion of you, but leans against you."), narration
        asked = play(client, session.id, text="Where do I stand with the Lampwrights?")
        assert any(ref == "reputation/query-reputation" for ref, _ in tools_of(asked))
        assert asked[-1].done.narration.startswith(
            "In the eyes of the Lampwrights Guild, you are neither friend nor foe."), \
            asked[-1].done.narration
        before = state_of(client, session.id)
        events = play(client, session.id, text="I look up at the bell tower of the chapel")
        assert not [t for t in tools_of(events)
                    if t[0].split("/")[0] in ("npc-perception", "reputation")]
        after = state_of(client, session.id)
        assert (after["perception"], after["reputation"]) == (before["perception"],
                                                             before["reputation"])
