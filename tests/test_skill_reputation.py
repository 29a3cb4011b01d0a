"""The built-in reputation skill (skills/reputation) end to end: its scripts run as
processes under a real daemon (pattern planner) against the real store through the
Store service, driven by fixed plans (execute_only, no narration); the configured scale
and a failing store are checked in-process, the kit's Store client replaced by the real
persistence layer."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import json
import sys
from pathlib import Path

import msgspec
import pytest

from conftest import REPO
from skill_plans import (failed_on_bad_input, finished, install_skill, run_plan, run_script,
                         skills_check, tool_events)
from support.daemon import done_of

SKILL = REPO / "skills" / "reputation"
SCRIPTS = SKILL / "scripts"


@pytest.fixture(scope="module")
def daemon(pattern_daemon):
    return pattern_daemon


def tool(tool_id: str, script: str, **input_: object) -> dict:
    return {"toolId": tool_id, "toolPath": f"reputation/{script}", "input": input_}


def reported(events: list, tool_id: str) -> dict[str, dict]:
    """query-reputation's factions by id, from its log."""
    log = next(ev for ev in tool_events(events, tool_id)
               if ev["type"] == "log" and ev["message"].startswith("reputation with"))
    return {f["faction"]: f for f in log["fields"]["factions"]}


def summary(events: list, tool_id: str) -> str:
    return next(ev["summary"] for ev in tool_events(events, tool_id) if ev["type"] == "done")


def test_several_factions_change_in_one_call_and_queries_see_them(daemon):
    with daemon.client() as client:
        session = client.create_session(title="reputation")
        events = run_plan(client, session.id, tool("update", "update-reputation", changes=[
            {"faction": "Merchants Guild", "delta": -20, "reason": "stole from a merchant"},
            {"faction": "City Watch", "delta": 10, "reason": "caught a pickpocket"},
            {"faction": "Thieves' Guild", "delta": 150, "reason": "the heist of the century"},
        ]))
        assert finished(events)["update"].ok, finished(events)["update"].error
        logs = [ev for ev in tool_events(events, "update") if ev["type"] == "log"]
        assert [(l["fields"]["faction"], l["fields"]["score"]) for l in logs] == [
            ("merchants_guild", -20), ("city_watch", 10), ("thieves_guild", 100)]  # clamped to 100
        assert logs[0]["fields"]["reason"] == "stole from a merchant"
        assert "Merchants Guild -20 → -20 (unfriendly) for stole from a merchant" in summary(events, "update")
        state = json.loads(done_of(events).state_json)
        assert state["reputation"]["merchants_guild"] == {"score": -20, "standing": "unfriendly"}
        assert state["reputation"]["thieves_guild"] == {"score": 100, "standing": "allied"}

        # A second change builds on the (decayed) current score and is clamped too.
        events = run_plan(client, session.id,
                          tool("update", "update-reputation", faction="merchants guild", delta=-95,
                               reason="burned the warehouse"),
                          {**tool("named", "query-reputation",
                                  factions=["Merchants Guild", "City Watch", "Temple"]),
                           "dependencies": ["update"]},
                          {**tool("one", "query-reputation", faction="Thieves Guild"),
                           "dependencies": ["update"]})
        assert all(f.ok for f in finished(events).values()), finished(events)
        named = reported(events, "named")
        assert list(named) == ["merchants_guild", "city_watch", "temple"]
        assert named["merchants_guild"]["score"] == -100 and named["merchants_guild"]["standing"] == "hostile"
        assert named["city_watch"]["score"] == pytest.approx(10, abs=0.01)  # decayed: a moment's worth
        assert named["city_watch"]["recorded"] and named["city_watch"]["lastUpdated"]
        assert named["temple"] == {"faction": "temple", "name": "temple", "score": 0,
                                   "standing": "neutral", "recorded": False}
        assert "merchants_guild: -100 (hostile)" in summary(events, "named")
        assert "temple: 0 (neutral, no dealings yet)" in summary(events, "named")
        assert reported(events, "one")["thieves_guild"]["score"] == 100
        state = json.loads(done_of(events).state_json)
        assert state["reputation"]["merchants_guild"] == {"score": -100, "standing": "hostile"}

        # Another session is another playthrough: none of this is visible there.
        other = client.create_session(title="someone else")
        events = run_plan(client, other.id, tool("named", "query-reputation",
                                                 factions=["Merchants Guild", "City Watch"]))
        assert finished(events)["named"].ok
        assert not any(f["recorded"] for f in reported(events, "named").values())


def test_a_query_naming_no_faction_lists_them_and_free_text_picks_the_named_ones(daemon):
    with daemon.client() as client:
        session = client.create_session(title="listing")
        events = run_plan(client, session.id,
                          tool("update", "update-reputation", changes=[
                              {"faction": "Merchants Guild", "delta": -20},
                              {"faction": "City Watch", "delta": 10}]),
                          {**tool("asked", "query-reputation",
                                  query="How do the merchants of the guild feel about me?"),
                           "dependencies": ["update"]},
                          {**tool("all", "query-reputation"), "dependencies": ["update"]})
        assert all(f.ok for f in finished(events).values()), finished(events)
        assert not [ev for ev in tool_events(events, "all") if ev.get("level") == "warn"]
        assert list(reported(events, "asked")) == ["merchants_guild"]
        assert set(reported(events, "all")) == {"merchants_guild", "city_watch"}
        other = client.create_session(title="someone else")
        events = run_plan(client, other.id, tool("all", "query-reputation"))
        assert reported(events, "all") == {}
        assert summary(events, "all") == "reputation: no faction reputation recorded yet"


@pytest.mark.parametrize("script,input_,field", [
    ("update-reputation", {}, "input.changes"),
    ("update-reputation", {"changes": []}, "input.changes"),
    ("update-reputation", {"changes": [{"faction": "Watch", "delta": "10"}]}, "input.changes[0].delta"),
    ("update-reputation", {"changes": [{"faction": "Watch", "delta": 5}, {"delta": 5}]},
     "input.changes[1].faction"),
    ("update-reputation", {"changes": [{"faction": "Watch", "delta": 5}, {"faction": "watch", "delta": 1}]},
     "input.changes[1].faction"),
    ("update-reputation", {"changes": [{"faction": "Watch", "delta": 500}]}, "input.changes[0].delta"),
    ("query-reputation", {"faction": 7}, "input.faction"),
    ("query-reputation", {"factions": ["ok", ""]}, "input.factions[1]"),
])
def test_bad_input_is_an_error_event_and_a_failed_done(daemon, script, input_, field):
    with daemon.client() as client:
        session = client.create_session(title="bad input")
        emitted = failed_on_bad_input(client, session.id, tool("bad", script, **input_), field)
        assert [ev["ok"] for ev in emitted if ev["type"] == "done"] == [False]  # no retry
        # Nothing was written: a batch with one bad change changes no faction.
        check = run_plan(client, session.id, tool("named", "query-reputation", factions=["Watch"]))
        assert not reported(check, "named")["watch"]["recorded"]


def _run_script(script: str, stdin: bytes, **env: str) -> list[dict]:
    return run_script(SCRIPTS / script, stdin, **env)


@pytest.mark.parametrize("script", ["update-reputation", "query-reputation"])
def test_without_a_daemon_garbage_on_stdin_is_an_error_event(script, tmp_path):
    events = _run_script(script, b"{\"input\": [unclosed")
    assert [e["type"] for e in events] == ["error", "done"]
    assert events[0]["errorCode"] == "invalid_input" and events[1]["ok"] is False
    request = json.dumps({"input": {"faction": "Watch", "delta": 1}}).encode()
    for env in ({}, {"NARRATORIA_ADDRESS": f"unix://{tmp_path}/none.sock", "NARRATORIA_SKILL_TOKEN": "t"}):
        gone = _run_script(script, request, **env)
        errors = [e for e in gone if e["type"] == "error"]
        assert errors[0]["errorCode"] == "store_unavailable" and gone[-1] == {**gone[-1], "ok": False}


def test_a_forged_token_is_refused_in_protocol(daemon):
    events = _run_script("query-reputation", b"{}", NARRATORIA_ADDRESS=f"unix://{daemon.socket}",
                         NARRATORIA_SKILL_TOKEN="forged")
    assert events[0]["errorCode"] == "store_forbidden" and events[-1]["ok"] is False


def _standing(client, session_id: str, *factions: str) -> dict[str, dict]:
    events = run_plan(client, session_id, tool("named", "query-reputation", factions=list(factions)))
    assert finished(events)["named"].ok, finished(events)["named"].error
    return reported(events, "named")


def test_a_multi_faction_update_whose_second_faction_is_invalid_changes_nothing(daemon, tmp_path):
    with daemon.client() as client:
        session = client.create_session(title="all or nothing")
        events = run_plan(client, session.id, tool("seed", "update-reputation", changes=[
            {"faction": "City Watch", "delta": 30}, {"faction": "Iron Bank", "delta": -10}]))
        assert finished(events)["seed"].ok, finished(events)["seed"].error
        before = _standing(client, session.id, "City Watch", "Iron Bank", "Temple")
        assert before["city_watch"]["storedScore"] == 30 and not before["temple"]["recorded"]

        # Refused by the script's checks: the first (valid) change is not written either.
        failed_on_bad_input(client, session.id, tool("bad", "update-reputation", changes=[
            {"faction": "City Watch", "delta": 10}, {"faction": "Temple", "delta": 500},
            {"faction": "Iron Bank", "delta": 5}]), "input.changes[1].delta")
        assert _standing(client, session.id, "City Watch", "Iron Bank", "Temple") == before

        # Refused by the store itself, through the Store service's AdjustScores: a test
        # skill sends three changes whose second has an empty scale (minimum > maximum).
        probe = install_skill(daemon.skills_root, "adjust-probe", "adjust", f"""#!{sys.executable}
import sys
sys.dont_write_bytecode = True
from narratoria import skillkit as kit

def main(out, params):
    with kit.Store() as store:
        store.adjust_scores(kit.DATA_TYPE_REPUTATION, params["changes"])
    out.emit({{"type": "done", "ok": True, "summary": "adjusted"}})

sys.exit(kit.run("adjust-probe", main))
""")
        events = run_plan(client, session.id, {"toolId": "raw", "toolPath": probe, "required": False,
                                               "input": {"changes": [
                                                   {"key": "city_watch", "delta": 10},
                                                   {"key": "temple", "delta": 5, "minimum": 5, "maximum": 1},
                                                   {"key": "iron_bank", "delta": 5}]}})
        assert not finished(events)["raw"].ok
        errors = [e for e in tool_events(events, "raw") if e["type"] == "error"]  # one a try
        assert errors and all(e["errorCode"] == "store_rejected" for e in errors), errors
        assert "changes[1].minimum: must not exceed maximum" in errors[0]["errorMessage"]
        assert _standing(client, session.id, "City Watch", "Iron Bank", "Temple") == before


def test_concurrent_updates_of_one_faction_all_count(daemon):
    """Four update-reputation invocations at once (a parallel plan, async tools), each
    +5 to the same faction: no update is lost, the store applies all four."""
    with daemon.client() as client:
        session = client.create_session(title="concurrent")
        tools = [{**tool(f"u{i}", "update-reputation", changes=[
                     {"faction": "Iron Bank", "delta": 5, "reason": f"deposit {i}"},
                     {"faction": "Merchants Guild", "delta": -5}]), "async": True}
                 for i in range(4)]
        plan = {"requestId": "test-concurrent", "narrative": "So be it.", "parallel": True,
                "tools": tools}
        events = list(client.turn(session.id, plan_json=json.dumps(plan), execute_only=True))
        done = finished(events)
        assert all(done[f"u{i}"].ok for i in range(4)), [(k, v.error) for k, v in done.items()]
        scores = sorted(next(e for e in tool_events(events, f"u{i}") if e["type"] == "log")
                        ["fields"]["score"] for i in range(4))
        assert scores == pytest.approx([5, 10, 15, 20], abs=0.01)  # each saw the ones before it
        now = _standing(client, session.id, "Iron Bank", "Merchants Guild")
        assert now["iron_bank"]["storedScore"] == pytest.approx(20, abs=0.01)
        assert now["merchants_guild"]["storedScore"] == pytest.approx(-20, abs=0.01)


def test_skills_check_passes():
    assert not skills_check(SKILL)["findings"]


# ---- all or nothing, in-process: the real persistence layer with a failure injected


def _load(script: str):
    sys.path.insert(0, str(SCRIPTS))
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the skill
    try:
        loader = importlib.machinery.SourceFileLoader(f"rep_{script.replace('-', '_')}",
                                                      str(SCRIPTS / script))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))
        sys.dont_write_bytecode = dont_write


class FlakyStore:
    """The kit's Store client over the real persistence layer (a DuckDB file), as the
    daemon's Store service serves it — JSON in and out — with one fault injected: the
    write numbered ``fail_on`` fails as an unreachable daemon would."""

    def __init__(self, kit, path: Path, fail_on: int | None) -> None:
        from narratoria.runtime.db import connect
        from narratoria.runtime.embedding import EmbeddingSettings, make_backend
        from narratoria.runtime.store import PersistenceStore

        self.kit, self.fail_on, self.writes = kit, fail_on, 0
        self.con = connect(path)
        self.store = PersistenceStore(self.con, make_backend(EmbeddingSettings(backend="hash")))
        self.pt = self.store.playthrough("pt-flaky")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.store.close()
        self.con.close()

    def _write(self) -> None:
        self.writes += 1
        if self.writes == self.fail_on:
            raise self.kit.SkillFailure("store_unavailable", "store Put: UNAVAILABLE: gone")

    @staticmethod
    def _wire(record):
        return None if record is None else json.loads(msgspec.json.encode(record))

    def get(self, data_type, key):
        return self._wire(self.pt.get(data_type, key))

    def put(self, data_type, record):
        self._write()
        return self._wire(self.pt.store(data_type, record))

    def update(self, data_type, key, changes):
        self._write()
        return self._wire(self.pt.update(data_type, key, changes))

    def adjust_scores(self, data_type, changes, event=None):
        from narratoria.runtime.store import ScoreChange

        self._write()
        return [self._wire(r) for r in self.pt.adjust_scores(
            data_type, [ScoreChange(**c) for c in changes], event=event)]

    def delete(self, data_type, key):
        return self.pt.delete(data_type, key)

    def exact_match(self, data_type, filters=None, limit=0):
        return [self._wire(r) for r in self.pt.exact_match(data_type, filters or None,
                                                           limit=limit or None)]

    def scores(self) -> dict[str, float]:
        return {r["factionId"]: r["currentScore"] for r in self.exact_match("faction_reputation")}


def _update(monkeypatch, capsys, path: Path, fail_on: int | None, request: dict) -> list[dict]:
    module = _load("update-reputation")
    monkeypatch.setattr(module.kit, "Store", lambda: FlakyStore(module.kit, path, fail_on))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(request).encode())))
    capsys.readouterr()
    assert module.kit.run("update-reputation", module.main) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _seed(path: Path, records: list[dict]) -> None:
    from narratoria import skillkit

    with FlakyStore(skillkit, path, None) as store:
        for record in records:
            store.put("faction_reputation", record)


def _stored(path: Path) -> dict[str, dict]:
    """Every faction record as stored (the decayed score, computed at read time, left out)."""
    from narratoria import skillkit

    with FlakyStore(skillkit, path, None) as store:
        return {r["factionId"]: {k: v for k, v in r.items() if k != "decayedScore"}
                for r in store.exact_match("faction_reputation")}


def test_a_failed_store_call_changes_nothing(monkeypatch, capsys, tmp_path):
    """All changes go in one AdjustScores call: when it fails nothing was written, and
    there is nothing to undo."""
    path = tmp_path / "rep.duckdb"
    _seed(path, [{"factionId": "city_watch", "currentScore": 30.0,
                  "lastUpdated": "2099-01-01T00:00:00Z"}])  # not decayed yet
    before = _stored(path)
    request = {"input": {"changes": [{"faction": "City Watch", "delta": 10},
                                     {"faction": "Merchants Guild", "delta": -20},
                                     {"faction": "Temple", "delta": 5}]}}
    events = _update(monkeypatch, capsys, path, 1, request)
    assert [e["type"] for e in events] == ["error", "done"] and events[1]["ok"] is False
    assert events[0]["errorCode"] == "store_unavailable"
    assert "rolledBack" not in events[0].get("details", {})
    assert _stored(path) == before
    events = _update(monkeypatch, capsys, path, None, request)  # the same call, the store up
    assert events[-1]["ok"] is True, events
    assert {k: round(v["currentScore"], 2) for k, v in _stored(path).items()} == {
        "city_watch": 40, "merchants_guild": -20, "temple": 5}


def test_configured_scale_and_factions_bound_the_changes(monkeypatch, capsys, tmp_path):
    path = tmp_path / "rep.duckdb"
    monkeypatch.setenv("NARRATORIA_SKILL_CONFIG", json.dumps(
        {"factions": ["City Watch", "Merchants Guild"], "scale": {"min": 0, "max": 10}, "decayRate": 0.5}))
    _seed(path, [{"factionId": "city_watch", "currentScore": 7.0,
                  "lastUpdated": "2026-01-01T00:00:00Z", "decayRate": 0.0}])  # no decay since
    too_big = _update(monkeypatch, capsys, path, None,
                      {"input": {"changes": [{"faction": "City Watch", "delta": 25}]}})
    assert "input.changes[0].delta: must be between -10 and 10" in too_big[0]["errorMessage"]
    events = _update(monkeypatch, capsys, path, None, {"input": {"changes": [
        {"faction": "city watch", "delta": 8}, {"faction": "Merchants Guild", "delta": -3}]}})
    assert events[-1]["ok"] is True, events
    stored = _stored(path)
    assert stored["city_watch"]["currentScore"] == 10 and stored["merchants_guild"]["currentScore"] == 0
    assert stored["city_watch"]["decayRate"] == 0.5
    patch = next(e["patch"] for e in events if e["type"] == "state_patch")
    assert patch["reputation"]["city_watch"] == {"score": 10, "standing": "allied"}
    assert patch["reputation"]["merchants_guild"] == {"score": 0, "standing": "hostile"}
    events = _update(monkeypatch, capsys, path, None,
                     {"input": {"changes": [{"faction": "Temple", "delta": 1}]}})
    assert events[-1]["ok"] is False
    assert events[0]["errorCode"] == "invalid_input" and "unknown faction 'Temple'" in events[0]["errorMessage"]


class ListingStore(FlakyStore):
    """With ``broken``, listing fails as the daemon's ExactMatch once did."""

    def __init__(self, kit, path: Path, broken: bool) -> None:
        super().__init__(kit, path, None)
        self.broken = broken

    def exact_match(self, data_type, filters=None, limit=0):
        if self.broken:
            raise self.kit.SkillFailure("store_error", "store ExactMatch: INTERNAL: TypeError: …")
        return super().exact_match(data_type, filters, limit)


def _query(monkeypatch, capsys, path: Path, broken: bool, request: dict) -> list[dict]:
    module = _load("query-reputation")
    monkeypatch.setattr(module.kit, "Store", lambda: ListingStore(module.kit, path, broken))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(request).encode())))
    capsys.readouterr()
    assert module.kit.run("query-reputation", module.main) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _factions(events: list[dict]) -> list[str]:
    log = next(e for e in events if e["type"] == "log" and e["message"].startswith("reputation with"))
    return [f["faction"] for f in log["fields"]["factions"]]


def test_free_text_picks_the_factions_it_names_else_all_are_listed(monkeypatch, capsys, tmp_path):
    path = tmp_path / "rep.duckdb"
    _seed(path, [{"factionId": fid, "currentScore": score, "lastUpdated": "2099-01-01T00:00:00Z",
                  "decayRate": 0.0}
                 for fid, score in (("merchants_guild", -20.0), ("city_watch", 10.0),
                                    ("iron_bank", 60.0))])
    asked = _query(monkeypatch, capsys, path, False,
                   {"input": {"query": "How do the merchants of the guild feel about me?"}})
    assert _factions(asked) == ["merchants_guild"] and asked[-1]["ok"] is True
    assert _factions(_query(monkeypatch, capsys, path, False,
                            {"input": {"query": "Will the watch let me pass?"}})) == ["city_watch"]
    everyone = _query(monkeypatch, capsys, path, False, {"input": {"query": "what do people think of me"}})
    assert _factions(everyone) == ["city_watch", "iron_bank", "merchants_guild"]
    assert "iron_bank: 60 (allied)" in everyone[-1]["summary"]
    # Listing broken in the store: the configured factions are read one by one, with a warning.
    monkeypatch.setenv("NARRATORIA_SKILL_CONFIG", json.dumps({"factions": ["Iron Bank", "Temple"]}))
    fallback = _query(monkeypatch, capsys, path, True, {"input": {}})
    assert any(e.get("level") == "warn" and "cannot list factions" in e["message"] for e in fallback)
    assert _factions(fallback) == ["iron_bank", "temple"] and fallback[-1]["ok"] is True
    assert "Iron Bank: 60 (allied); Temple: 0 (neutral, no dealings yet)" in fallback[-1]["summary"]
