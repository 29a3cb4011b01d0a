"""No session can be bricked by its state (docs/state.md, "Caps").

Seven turns of 0.9 MiB state patches made a session unreadable ("message larger than
max"). A real daemon, a real hostile skill (``fixtures/state-caps/state-flood``) run by
a client's plan: a patch, a turn's patches and a session's state are capped
(``runtime/state/caps.py``); past a cap the turn says which cap and by how much, and
the session keeps its last good state, readable by a client with gRPC's default 4 MiB
limit. A session saved over the cap before the caps existed stays readable and plays
on (patches that do not grow it).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import grpc
import pytest

from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
from narratoria.runtime.host.endpoint import TOKEN_METADATA
from support.daemon import HASH_EMBEDDER, Daemon

SKILLS = Path(__file__).resolve().parent / "fixtures" / "state-caps"
MIB = 1 << 20


def plan(required: bool = True, **args) -> str:
    return json.dumps({"requestId": "flood", "tools": [
        {"toolId": "flood", "toolPath": "state-flood/patch", "input": args,
         "required": required}]})


def play(client, session_id: str, required: bool = True, **args) -> list[pb.TurnEvent]:
    events = list(client.turn(session_id, plan_json=plan(required, **args), execute_only=True))
    assert events[-1].WhichOneof("event") == "done", events[-1]
    return events


def said(events: list[pb.TurnEvent]) -> str:
    """Everything the turn told the client about failures, as one text."""
    parts = []
    for event in events:
        kind = event.WhichOneof("event")
        if kind in ("replan", "fallback", "log", "tool_finished"):
            parts.append(str(getattr(event, kind)))
    return "\n".join(parts)


def state_with_default_limits(socket: Path, session_id: str) -> dict:
    """GetState through a channel with gRPC's default limits (4 MiB received), as any
    front-end that never heard of Narratoria's own client would read it."""
    token = (socket.parent / "data" / "daemon.token").read_text().strip()
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        reply = rpc.NarratoriaStub(channel).GetState(pb.SessionRef(session_id=session_id),
                                                     timeout=60,
                                                     metadata=[(TOKEN_METADATA, token)])
    return json.loads(reply.state_json)


@pytest.fixture(scope="module")
def flood_daemon():
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir", str(SKILLS))
    yield d
    assert d.stop() == 0


def test_seven_turns_of_huge_patches_cannot_brick_a_session(flood_daemon):
    with flood_daemon.client() as client:
        sid = client.create_session(title="flooded", state={"hp": 10}).id
        for turn in range(7):
            events = play(client, sid, key=f"t{turn}", bytes=943_718)
            # Before the caps: past 4 MiB after the 5th turn, "message larger than max".
            state = state_with_default_limits(flood_daemon.socket, sid)
            assert state == {"hp": 10}  # the last good state, readable by anyone
            told = said(events)
            assert "the patch cap is 262144" in told and "over" in told, told[-2000:]
        # Play goes on within the caps.
        play(client, sid, key="small", bytes=100_000)
        assert len(state_with_default_limits(flood_daemon.socket, sid)["flood"]["small"]["0"]) == 100_000


def test_a_turns_patches_and_the_state_are_capped_too(flood_daemon):
    with flood_daemon.client() as client:
        sid = client.create_session(title="capped").id
        # An optional tool's refused patch: the turn succeeds without it, and says why.
        events = play(client, sid, required=False, key="optional", bytes=300_000)
        assert "fallback" not in [e.WhichOneof("event") for e in events]
        assert "the patch cap is 262144" in said(events)
        # Three patches of 200 KB in one turn: each under the patch cap, 600 KB together.
        told = said(play(client, sid, key="burst", bytes=200_000, events=3))
        assert "the turn cap is 524288" in told, told[-2000:]
        assert "flood" not in state_with_default_limits(flood_daemon.socket, sid)
        # 250 KB a turn: accepted until the state would pass 1 MiB.
        sizes = []
        for turn in range(6):
            told = said(play(client, sid, key=f"k{turn}", bytes=250_000))
            state = state_with_default_limits(flood_daemon.socket, sid)
            sizes.append(len(json.dumps(state, separators=(",", ":"))))
            if "the state cap is 1048576" in told:
                break
        else:
            pytest.fail(f"the state grew past its cap unrefused: {sizes}")
        assert max(sizes) <= MIB and len(sizes) >= 4
        assert sizes[-1] == sizes[-2]  # the refused turn left the state as it was
        assert len(client.get_session_view(sid).state_json.encode()) <= MIB


def test_a_session_over_the_cap_from_before_stays_readable_and_playable():
    from narratoria.runtime.db import DB_FILENAME, connect
    from narratoria.runtime.host.identity import LOCAL_OWNER
    from narratoria.runtime.sessions.store import SessionStore

    folder = Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
    data = folder / "data"
    data.mkdir()
    con = connect(data / DB_FILENAME)
    try:  # what the daemon saved before the caps: a 3 MiB state, written as it was
        sessions = SessionStore(con)
        sid = sessions.create(LOCAL_OWNER, title="grown before the caps").id
        big = {"flood": {"old": {"0": "x" * (3 * MIB)}}, "hp": 7}
        con.execute("UPDATE daemon.sessions SET state_json = ? WHERE id = ?", [json.dumps(big), sid])
    finally:
        con.close()
    daemon = Daemon("--planner", "pattern", *HASH_EMBEDDER,
                    "--skills-dir", str(SKILLS), folder=folder)
    try:
        with daemon.client() as client:
            assert json.loads(client.get_state(sid).state_json) == big  # readable
            assert json.loads(client.get_session_view(sid).state_json)["hp"] == 7
            # A patch that grows it further is refused, naming the state cap...
            told = said(play(client, sid, key="more", bytes=1_000))
            assert "the state cap is 1048576" in told, told[-2000:]
            assert json.loads(client.get_state(sid).state_json) == big
            # ...one that shrinks it is played, and then it is an ordinary session.
            play(client, sid, key="old", delete=True)
            assert state_with_default_limits(daemon.socket, sid) == {"flood": {}, "hp": 7}
            play(client, sid, key="more", bytes=1_000)
            assert len(state_with_default_limits(daemon.socket, sid)["flood"]["more"]["0"]) == 1_000
    finally:
        assert daemon.stop() == 0


def test_session_state_refuses_past_its_caps_and_changes_nothing():
    from narratoria.runtime.state import SessionState
    from narratoria.runtime.state.caps import StateCapError

    state = SessionState({"hp": 1})
    deep: dict = {}
    node = deep
    for _ in range(100):
        node = node.setdefault("d", {})
    with pytest.raises(StateCapError, match="the depth cap is 64"):
        state.apply_patch(deep)
    # One tool's patches go in together or not at all.
    with pytest.raises(StateCapError, match="262168 bytes; the patch cap is 262144, 24 over"):
        state.apply_patches([{"a": 1}, {"b": "x" * 262_160}])
    assert state.tree == {"hp": 1} and state.patches == []
    attempt = state.copy()  # a plan attempt counts its own patches against the turn cap
    attempt.apply_patches([{"a": "x" * 200_000}, {"b": "x" * 200_000}])
    with pytest.raises(StateCapError, match="the turn cap is 524288"):
        attempt.apply_patch({"c": "x" * 200_000})
    assert set(attempt.tree) == {"hp", "a", "b"}
    assert set(attempt.copy().apply_patch({"c": "x" * 200_000})) == {"hp", "a", "b", "c"}
