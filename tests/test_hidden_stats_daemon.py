"""Hidden stats never reach any front-end, through a real daemon.

``long_ebb`` has a hidden stat, ``player.stats.drowned_regard`` (``stats/hidden/``).
Every answer of the front-end service is read here through the raw gRPC stubs (no
client library that could filter it) and through the terminal's own commands: the
stat's path, its id, its value and its range appear in none of them, while the
visible stats around it (``nerve``) still do — the filter removes the hidden stat,
not the state.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.json_format import MessageToJson

from narratoria.proto import narratoria_pb2 as pb
from narratoria.proto import narratoria_pb2_grpc as rpc
from support.daemon import cli, daemon_token

HIDDEN_ID = "drowned_regard"
HIDDEN_PATH = f"player.stats.{HIDDEN_ID}"
TIMEOUT_S = 300


class _Stub:
    """The raw Narratoria stub, every call carrying the daemon token."""

    def __init__(self, channel: grpc.Channel, token: str) -> None:
        self.stub, self.metadata = rpc.NarratoriaStub(channel), [("x-narratoria-token", token)]

    def __getattr__(self, name: str):
        method = getattr(self.stub, name)
        return lambda request, **kw: method(request, metadata=self.metadata, timeout=TIMEOUT_S,
                                            **kw)


@pytest.fixture(scope="module")
def stub(pattern_daemon) -> Iterator[_Stub]:
    with grpc.insecure_channel(f"unix://{pattern_daemon.socket}") as channel:
        yield _Stub(channel, daemon_token(pattern_daemon))


def _text(message) -> str:
    """Everything a message carries, its JSON fields' contents included."""
    return MessageToJson(message, preserving_proto_field_name=True)


def _leaks(text: str) -> list[str]:
    return [word for word in (HIDDEN_ID, HIDDEN_PATH, "Regard of the Drowned") if word in text]


def test_no_front_end_answer_carries_a_hidden_stat(stub):
    session = stub.CreateSession(pb.CreateSessionRequest(campaign="long_ebb", title="hidden"))
    assert session.campaign == "long_ebb"
    answers = {"CreateSession": session}

    state = stub.GetState(pb.SessionRef(session_id=session.id))
    tree, ranges = json.loads(state.state_json), json.loads(state.stats_json)
    # The visible stats are all there, with their ranges: only the hidden one is gone.
    assert tree["player"]["stats"] == {"vigour": 100, "lamp_oil": 3, "nerve": 7}
    assert "player.stats.nerve" in ranges and HIDDEN_PATH not in ranges
    answers["GetState"] = state

    # A skill writes the hidden stat beside a visible one; the plan names it too.
    plan = {"requestId": f"hidden-{uuid.uuid4().hex[:8]}", "narrative": "The Drowned watch.",
            "tools": [{"toolId": "t1", "toolPath": "echo/scripts/echo",
                       "input": {"key": "player",
                                 "value": {"stats": {HIDDEN_ID: 77, "nerve": 5}}}}]}
    events = list(stub.Turn(pb.TurnRequest(session_id=session.id, plan_json=json.dumps(plan),
                                           execute_only=True)))
    assert events[-1].WhichOneof("event") == "done", [e.WhichOneof("event") for e in events]
    patches = [json.loads(e.tool_event.event_json) for e in events
               if e.WhichOneof("event") == "tool_event" and e.tool_event.type == "state_patch"]
    assert patches and patches[0]["patch"]["player"] == {"stats": {"nerve": 5}}
    assert json.loads(events[-1].done.state_json)["player"]["stats"]["nerve"] == 5
    for event in events:
        answers[f"Turn event {event.seq} ({event.WhichOneof('event')})"] = event

    after = stub.GetState(pb.SessionRef(session_id=session.id))
    assert json.loads(after.state_json)["player"]["stats"]["nerve"] == 5
    answers["GetState after the turn"] = after
    answers["ResumeSession"] = stub.ResumeSession(pb.SessionRef(session_id=session.id))
    answers["GetSessionView"] = stub.GetSessionView(pb.SessionRef(session_id=session.id))
    answers["ListSessions"] = stub.ListSessions(pb.ListSessionsRequest())
    branch = stub.Branch(pb.BranchRequest(session_id=session.id, at_scene=1))
    answers["Branch"] = branch
    answers["GetState of the branch"] = stub.GetState(pb.SessionRef(session_id=branch.id))

    leaked = {name: found for name, message in answers.items() if (found := _leaks(_text(message)))}
    assert not leaked, leaked


def test_the_terminal_never_prints_a_hidden_stat(pattern_daemon, stub):
    """``narratoria session show`` and the play loop's ``/state`` print GetState."""
    sid = stub.CreateSession(pb.CreateSessionRequest(campaign="long_ebb")).id
    shown = cli(pattern_daemon, "session", "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert '"nerve": 7' in shown.stdout and not _leaks(shown.stdout), shown.stdout
    played = cli(pattern_daemon, "play", "--session", sid, "--turns", "1", stdin="/state\n/quit\n")
    assert played.returncode == 0, played.stderr
    assert '"nerve": 7' in played.stdout and not _leaks(played.stdout), played.stdout
