"""The built-in memory skill (skills/memory) end to end: its scripts run as processes
under a real daemon (pattern planner) and talk to the real store through the Store
service, driven by fixed plans (execute_only, no narration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from skill_plans import failed_on_bad_input, finished, run_plan, run_script, skills_check, tool_events
from support.daemon import Daemon, done_of

SKILL = REPO / "skills" / "memory"

MEMORIES = [
    {"summary": "The player helped the blacksmith Aldric repair his cracked anvil",
     "characters": ["player", "blacksmith_aldric"], "location": "blacksmith_shop",
     "significance": "high", "tags": ["smithing"]},
    {"summary": "The player promised the ferryman Tobin a silver coin on the way back",
     "characters": ["player", "ferryman_tobin"], "location": "docks", "significance": 0.7},
    {"summary": "A storm flooded the lower market and ruined the spice stalls",
     "characters": ["player"], "location": "market", "significance": "low",
     "timestamp": "2020-01-01T00:00:00Z"},
    {"summary": "The player bought a new sword from the blacksmith's apprentice Mira",
     "characters": ["player", "apprentice_mira"], "location": "blacksmith_shop"},
]


@pytest.fixture(scope="module")
def daemon(pattern_daemon):
    return pattern_daemon


def tool(tool_id: str, script: str, **input_: object) -> dict:
    return {"toolId": tool_id, "toolPath": f"memory/{script}", "input": input_}


def recalled(events: list, tool_id: str) -> list[dict]:
    logs = [ev for ev in tool_events(events, tool_id)
            if ev["type"] == "log" and ev["message"].startswith("recalled")]
    assert logs, tool_events(events, tool_id)
    return logs[0]["fields"]["memories"]


def store_all(client, session_id: str, memories: list[dict]) -> list:
    # Sequential (each depends on the one before), so the store's ties keep this order.
    tools = []
    for i, memory in enumerate(memories):
        step = tool(f"store-{i}", "store-memory", **memory)
        if i:
            step["dependencies"] = [f"store-{i - 1}"]
        tools.append(step)
    events = run_plan(client, session_id, *tools)
    done = finished(events)
    assert [done[f"store-{i}"].ok for i in range(len(memories))] == [True] * len(memories), \
        [(k, v.error) for k, v in done.items()]
    return events


@pytest.fixture(scope="module")
def remembered(daemon):
    """One session that stored MEMORIES."""
    with daemon.client() as client:
        session = client.create_session(title="memory skill")
        events = store_all(client, session.id, MEMORIES)
    return session, events


def test_store_memory_reports_what_it_stored(remembered):
    _, events = remembered
    stored = tool_events(events, "store-0")
    log = next(ev for ev in stored if ev["type"] == "log")
    assert log["message"] == "stored memory" and log["fields"]["id"]
    assert log["fields"]["significance"] == "high"
    assert log["fields"]["location"] == "blacksmith_shop"
    done = next(ev for ev in stored if ev["type"] == "done")
    assert done["ok"] and done["summary"].startswith("remembered: The player helped the blacksmith")
    # A number 0-1 maps onto the named levels.
    second = next(ev for ev in tool_events(events, "store-1") if ev["type"] == "log")
    assert second["fields"]["significance"] == "high"


def test_recall_ranks_the_matching_memory_first_with_its_relevance(daemon, remembered):
    session, _ = remembered
    with daemon.client() as client:
        events = run_plan(client, session.id,
                          tool("recall", "recall-memory", query="repairing the anvil at the forge"))
    assert finished(events)["recall"].ok
    memories = recalled(events, "recall")
    assert memories, "nothing recalled"
    first = memories[0]
    assert "anvil" in first["summary"]
    assert 0 < first["relevance"] <= 1
    assert [m["relevance"] for m in memories] == sorted((m["relevance"] for m in memories), reverse=True)
    assert first["characters"] == ["player", "blacksmith_aldric"]
    assert first["location"] == "blacksmith_shop" and first["significance"] == "high"
    assert first["tags"] == ["smithing"] and first["timestamp"]
    # The narrator reads the done summary; dependent steps and the state get the patch.
    done = next(ev for ev in tool_events(events, "recall") if ev["type"] == "done")
    assert done["summary"].startswith("recalled ") and "anvil" in done["summary"]
    assert "relevance" in done["summary"]
    state = json.loads(done_of(events).state_json)
    assert state["memory"]["recalled"]["memories"][0]["id"] == first["id"]


def test_recall_honours_limit_and_filters(daemon, remembered):
    session, _ = remembered
    with daemon.client() as client:
        events = run_plan(
            client, session.id,
            tool("one", "recall-memory", query="the blacksmith", limit=1, minRelevance=0.01),
            tool("shop", "recall-memory", query="buying and repairing things",
                 filters={"location": "blacksmith_shop"}, minRelevance=0.01),
            tool("mira", "recall-memory", query="the blacksmith", characters=["player", "apprentice_mira"],
                 minRelevance=0.01),
            tool("recent", "recall-memory", query="a storm in the market", since="2021-01-01T00:00:00Z",
                 minRelevance=0.01),
            tool("old", "recall-memory", query="a storm in the market", until="2021-01-01",
                 minRelevance=0.01),
            tool("tagged", "recall-memory", query="anything at all", tags=["smithing"], minRelevance=0.01),
        )
    assert all(f.ok for f in finished(events).values()), finished(events)
    assert len(recalled(events, "one")) == 1
    shop = recalled(events, "shop")
    assert len(shop) == 2 and {m["location"] for m in shop} == {"blacksmith_shop"}
    mira = recalled(events, "mira")
    assert [m["summary"] for m in mira] == [MEMORIES[3]["summary"]]
    assert all("storm" not in m["summary"] for m in recalled(events, "recent"))
    old = recalled(events, "old")
    assert [m["summary"] for m in old] == [MEMORIES[2]["summary"]]
    assert [m["summary"] for m in recalled(events, "tagged")] == [MEMORIES[0]["summary"]]


def test_another_sessions_memories_are_not_recalled(daemon, remembered):
    with daemon.client() as client:
        other = client.create_session(title="another playthrough")
        events = run_plan(client, other.id,
                          tool("recall", "recall-memory", query="the blacksmith's anvil",
                               minRelevance=0.01, limit=20))
    assert finished(events)["recall"].ok
    assert not any("anvil" in m["summary"] or "ferryman" in m["summary"]
                   for m in recalled(events, "recall"))


@pytest.mark.parametrize("script,input_,field", [
    ("store-memory", {}, "input.summary"),
    ("store-memory", {"summary": 42}, "input.summary"),
    ("store-memory", {"summary": "x", "characters": "player, npc" * 100}, "input.characters[0]"),
    ("store-memory", {"summary": "x", "significance": "enormous"}, "input.significance"),
    ("store-memory", {"summary": "x", "timestamp": "last tuesday"}, "input.timestamp"),
    ("recall-memory", {}, "input.query"),
    ("recall-memory", {"query": "x", "limit": 0}, "input.limit"),
    ("recall-memory", {"query": "x", "filters": {"mood": "sad"}}, "input.filters"),
    ("recall-memory", {"query": "x", "characters": [1, 2]}, "input.characters[0]"),
])
def test_bad_input_is_an_error_event_and_a_failed_done(daemon, script, input_, field):
    with daemon.client() as client:
        session = client.create_session(title="bad input")
        # Every attempt (the skill's retry policy allows one retry) ends the same way.
        failed_on_bad_input(client, session.id, tool("bad", script, **input_), field)


def _run_script(script: str, stdin: bytes, **env: str) -> list[dict]:
    return run_script(SKILL / "scripts" / script, stdin, **env)


@pytest.mark.parametrize("script", ["store-memory", "recall-memory"])
def test_without_a_daemon_garbage_on_stdin_is_an_error_event(script):
    events = _run_script(script, b"\x00not json{")
    assert [e["type"] for e in events] == ["error", "done"]
    assert events[0]["errorCode"] == "invalid_input" and events[1]["ok"] is False
    assert all(e["version"] == "0" for e in events)


@pytest.mark.parametrize("script,input_", [("store-memory", {"summary": "x"}),
                                           ("recall-memory", {"query": "x"})])
def test_without_a_daemon_the_store_is_reported_unavailable(script, input_, tmp_path):
    request = json.dumps({"requestId": "r-1", "input": input_}).encode()
    missing = _run_script(script, request)
    assert missing[0]["errorCode"] == "store_unavailable" and missing[-1]["ok"] is False
    assert all(e["requestId"] == "r-1" for e in missing)
    # A socket nobody listens on, with a token: the call fails, in protocol.
    gone = _run_script(script, request, NARRATORIA_ADDRESS=f"unix://{tmp_path}/none.sock",
                       NARRATORIA_SKILL_TOKEN="t")
    assert gone[0]["errorCode"] == "store_unavailable" and gone[-1]["ok"] is False


def test_a_forged_token_is_refused_in_protocol(daemon):
    request = json.dumps({"input": {"query": "anything"}}).encode()
    events = _run_script("recall-memory", request, NARRATORIA_ADDRESS=f"unix://{daemon.socket}",
                         NARRATORIA_SKILL_TOKEN="forged")
    assert events[0]["type"] == "error" and events[0]["errorCode"] == "store_forbidden"
    assert events[-1] == {**events[-1], "type": "done", "ok": False}


def test_skills_check_passes():
    assert not skills_check(SKILL)["findings"]


# ---- recall benchmark, under 500 ms for 1000+ events
# (not a test: timings depend on the machine, so nothing asserts them)
#
#   .venv/bin/python -c "import sys; sys.path[:0] = ['tests']; import test_skill_memory as t; \
#       print(t.benchmark_recall())"

_LOADER = '''#!/usr/bin/env python3
import json, os, sys, time
import grpc
from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
n = json.load(sys.stdin)["input"]["count"]
store = rpc.StoreStub(grpc.insecure_channel(os.environ["NARRATORIA_ADDRESS"]))
meta = [("x-narratoria-skill-token", os.environ["NARRATORIA_SKILL_TOKEN"])]
places, people = ["docks", "market", "temple", "forge", "keep"], ["mara", "tomas", "aldric", "ines"]
for i in range(n):
    record = {"summary": f"Event {i}: the player met {people[i % 4]} at the {places[i % 5]} "
                         f"and talked about {['grain', 'debts', 'storms', 'ghosts', 'swords'][i % 5]}",
              "timestamp": "2026-01-01T00:00:00Z", "sessionId": "bench",
              "characterIds": ["player", people[i % 4]], "location": places[i % 5]}
    store.Put(pb.PutRequest(data_type="memory_event", record_json=json.dumps(record)), metadata=meta)
search = []
for q in ["debts owed at the docks", "ghost stories", "who sold me a sword"] * 5:
    t = time.perf_counter()
    store.SemanticSearch(pb.SemanticSearchRequest(data_type="memory_event", query=q, limit=5),
                         metadata=meta)
    search.append((time.perf_counter() - t) * 1000)
print(json.dumps({"version": "0", "type": "log", "level": "info", "message": "bench",
                  "fields": {"searchMs": search}}))
print(json.dumps({"version": "0", "type": "done", "ok": True, "summary": f"loaded {n}"}))
'''


def benchmark_recall(events: int = 1000, recalls: int = 10) -> dict:
    """Recall latency at ``events`` stored memories: the Store's SemanticSearch alone
    (over gRPC, from a skill process) and a whole recall-memory invocation (process
    start, imports, search, events) as the executor timed it."""
    import statistics
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="bench-skills-"))
    script = root / "bench-loader" / "scripts" / "load"
    script.parent.mkdir(parents=True)
    (root / "bench-loader" / "SKILL.md").write_text(
        "---\nname: bench-loader\ndescription: Loads memories for the recall benchmark.\n---\n")
    script.write_text(_LOADER)
    script.chmod(0o755)
    d = Daemon("--planner", "pattern", "--skills-dir", str(root))
    try:
        with d.client() as client:
            sid = client.create_session(title="bench").id
            loaded = run_plan(client, sid, {"toolId": "load", "toolPath": "bench-loader/load",
                                            "input": {"count": events}, "timeoutMs": 600000})
            assert finished(loaded)["load"].ok, finished(loaded)["load"].error
            search = next(ev for ev in tool_events(loaded, "load") if ev["type"] == "log")["fields"]["searchMs"]
            whole = []
            for i in range(recalls):
                got = run_plan(client, sid, tool("r", "recall-memory", query=["debts at the docks",
                                                 "a ghost story at the temple"][i % 2], limit=5))
                assert finished(got)["r"].ok
                whole.append(finished(got)["r"].duration_ms)
    finally:
        d.stop()
    return {"events": events,
            "store_search_ms": {"median": round(statistics.median(search), 1), "max": round(max(search), 1)},
            "recall_invocation_ms": {"median": statistics.median(whole), "max": max(whole)}}
