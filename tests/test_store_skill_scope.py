"""The Store service's skill scope end to end: a real daemon (pattern planner), real
skills run by fixed plans, real gRPC.

A request with ``skill_scope`` works on the calling skill's own records
(``skill:<skill name>``), shared by every playthrough. The scope comes from the
invocation's token (the skill the supervisor ran), never from the request: another
skill's shared records, and the playthrough's own, stay apart; a plan tool that is
no registered skill (a bare script path) never runs, so it never holds a token.

Skills: the built-in character-portraits (which keeps its portraits in its scope)
and the test-only ``scope-probe`` (tests/fixtures/store-scope/skills), which runs the
Store calls its input lists through ``skillkit`` and reports each outcome; a plan
naming the same script by a bare path (tests/fixtures/store-scope/bare-probe) is refused.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import grpc
import pytest

from conftest import TESTS
from narratoria.proto import narratoria_pb2 as pb
from narratoria.proto import narratoria_pb2_grpc as rpc
from skill_plans import finished, run_plan, tool_events
from support.daemon import Daemon, kinds

FIXTURE = TESTS / "fixtures" / "store-scope"
BARE_PROBE = FIXTURE / "bare-probe"
PORTRAIT = "character_portrait"

SMITH = "a broad-shouldered blacksmith with a grey beard, a burn scar and a leather apron"
GHOST = "a pale ghost with hollow eyes in a tattered grey shroud"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """The pattern daemon (as ``pattern_daemon``) with the probe skill's root added; the
    portraits' images go to a folder inside the skill's data folder (the daemon's, a
    temporary one: never the repository), the only place a sandboxed skill may write."""
    root = tmp_path_factory.mktemp("skill-scope")
    config = root / "config" / "skills" / "character-portraits" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"storageLocation": "images"}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NARRATORIA_CONFIG_DIR", str(root / "config"))
        d = Daemon("--planner", "pattern", "--skills-dir", str(FIXTURE / "skills"))
    yield d
    assert d.stop() == 0


def probe(tool_id: str, *ops: dict, path: str = "scope-probe/probe") -> dict:
    return {"toolId": tool_id, "toolPath": path, "input": {"ops": list(ops)}}


def portraits(tool_id: str, script: str, **input_: object) -> dict:
    return {"toolId": tool_id, "toolPath": f"character-portraits/{script}", "input": input_}


def op(kind: str, shared: bool, **fields: object) -> dict:
    return {"op": kind, "shared": shared, "dataType": PORTRAIT, **fields}


def ghost_record() -> dict:
    return {"characterId": "probe_ghost", "imagePath": "/nonexistent/ghost.png",
            "description": GHOST, "generatedAt": "2026-01-01T00:00:00Z"}


def ok_plan(client, session_id: str, *tools: dict) -> list:
    events = run_plan(client, session_id, *tools)
    done = finished(events)
    assert {t["toolId"] for t in tools} <= set(done), kinds(events)
    assert all(done[t["toolId"]].ok for t in tools), [(k, v.error) for k, v in done.items()]
    return events


def log_of(events: list, tool_id: str, message: str) -> dict:
    logs = [e for e in tool_events(events, tool_id) if e["type"] == "log" and e["message"] == message]
    assert len(logs) == 1, tool_events(events, tool_id)
    return logs[0]["fields"]


def probed(events: list, tool_id: str) -> SimpleNamespace:
    fields = log_of(events, tool_id, "probe")
    return SimpleNamespace(results=fields["results"], token=fields["token"])


def value(result: dict) -> object:
    assert result["ok"], result
    return result["value"]


def ids(records: list) -> set[str]:
    return {(r["record"] if "record" in r else r)["characterId"] for r in records}


def test_a_skills_shared_records_are_its_own_and_span_playthroughs(daemon):
    with daemon.client() as client:
        first = client.create_session(title="first playthrough")
        one = ok_plan(client, first.id,
                      probe("probe", op("put", True, record=ghost_record()),
                            op("get", True, key="probe_ghost"),
                            op("get", False, key="probe_ghost"),
                            op("exact", False)),
                      portraits("draw", "generate-portrait", characterId="smith", description=SMITH))
        later = client.create_session(title="a later playthrough")
        two = ok_plan(client, later.id,
                      probe("probe", op("get", True, key="probe_ghost"),
                            op("get", False, key="probe_ghost"),
                            op("exact", True),
                            op("get", True, key="smith"),
                            op("search", True, query=SMITH),
                            op("exact", False)))
        looked = ok_plan(client, later.id,
                         portraits("ghost-id", "lookup-portrait", characterId="probe_ghost"),
                         portraits("ghost-text", "lookup-portrait", description=GHOST),
                         portraits("smith", "lookup-portrait", characterId="smith"))

    # The probe's shared record is stored in its own scope, named after the skill...
    put, got, local_get, local_exact = probed(one, "probe").results
    assert value(put)["playthroughId"] == "skill:scope-probe"
    assert value(got)["description"] == GHOST
    # ...which a playthrough-scoped call of the same skill, same invocation, never sees.
    assert value(local_get) is None and value(local_exact) == []
    assert log_of(one, "draw", "generated portrait")["shared"] is True

    # Another playthrough: the probe's shared record is still there, its playthrough is
    # empty, and character-portraits' shared portrait is not the probe's to see.
    got, local_get, shared_all, smith, search, local_exact = probed(two, "probe").results
    assert value(got)["characterId"] == "probe_ghost"
    assert value(got)["playthroughId"] == "skill:scope-probe"
    assert value(local_get) is None and value(local_exact) == []
    assert ids(value(shared_all)) == {"probe_ghost"}
    assert value(smith) is None
    assert "smith" not in ids(value(search))

    # And the probe's shared record is not character-portraits' to see, by id or by meaning,
    # while its own shared portrait is (drawn in the first playthrough).
    for miss in ("ghost-id", "ghost-text"):
        assert log_of(looked, miss, "no cached portrait")["found"] is False
    found = log_of(looked, "smith", "found portrait")
    assert found["scope"] == "shared" and found["record"]["description"] == SMITH


def test_a_bare_script_path_never_runs_so_it_holds_no_token(daemon):
    assert BARE_PROBE.is_file()
    with daemon.client() as client:
        session = client.create_session(title="bare script")
        events = run_plan(client, session.id,
                          probe("bare", op("put", False, record={**ghost_record(), "characterId": "bare"}),
                                path=str(BARE_PROBE)))
        after = ok_plan(client, session.id, probe("look", op("get", False, key="bare")))
    refused = finished(events)["bare"]
    assert not refused.ok and "is a file path" in refused.error, refused.error
    assert tool_events(events, "bare") == []  # not started: no event, no Store call
    assert value(probed(after, "look").results[0]) is None


def test_a_skill_scope_request_needs_a_live_token(daemon):
    """A token outlives nothing: once its plan ended, skill_scope calls are refused too."""
    with daemon.client() as client:
        session = client.create_session(title="expired")
        events = ok_plan(client, session.id, probe("probe", op("get", True, key="probe_ghost")))
    token = probed(events, "probe").token
    assert token
    with grpc.insecure_channel(f"unix://{daemon.socket}") as channel:
        store = rpc.StoreStub(channel)
        for metadata in ([("x-narratoria-skill-token", token)],
                         [("x-narratoria-skill-token", "forged")], []):
            with pytest.raises(grpc.RpcError) as refused:
                store.Get(pb.KeyRequest(data_type=PORTRAIT, key="probe_ghost", skill_scope=True),
                          metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
