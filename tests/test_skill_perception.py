"""The built-in npc-perception skill (skills/npc-perception) against a real store.

Its scripts run as skill processes of a real daemon (pattern planner), driven by fixed
plans (``execute_only``), so every read and write goes through the daemon's Store
service with the invocation's token, in the session's playthrough. A few failure
cases (bad stdin, no or a forged token, no daemon) run the scripts directly.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from conftest import REPO
from skill_plans import run_by_tool as run_plan

SKILL_DIR = REPO / "skills" / "npc-perception"
SCRIPTS = SKILL_DIR / "scripts"


@pytest.fixture(scope="module")
def perception_daemon(pattern_daemon):
    return pattern_daemon


# -- helpers --------------------------------------------------------------------------

def tool(tool_id: str, script: str, **input) -> dict:
    """A plan step; not required and never retried, so a bad input fails only itself."""
    return {"toolId": tool_id, "toolPath": f"npc-perception/{script}", "input": input,
            "required": False, "retryPolicy": {"maxRetries": 0, "backoffMs": 0}}


def init(tool_id: str, npc: str, **input) -> dict:
    return tool(tool_id, "initialize-perception", npcId=npc, **input)


def update(tool_id: str, npc: str, event: str, **input) -> dict:
    return tool(tool_id, "update-perception", npcId=npc, event=event, **input)


def query(tool_id: str, **input) -> dict:
    return tool(tool_id, "query-perception", **input)


def info(result: dict) -> dict:
    """The fields of the tool's info log (its first one)."""
    logs = [e for e in result["events"] if e["type"] == "log" and e["level"] == "info"]
    assert logs, result
    return logs[0].get("fields", {})


def warnings(result: dict) -> list[str]:
    return [e["message"] for e in result["events"] if e["type"] == "log" and e["level"] == "warn"]


def error_of(result: dict) -> dict:
    assert result["ok"] is False, result
    errors = [e for e in result["events"] if e["type"] == "error"]
    assert len(errors) == 1, result
    done = [e for e in result["events"] if e["type"] == "done"]
    assert not done or done[0]["ok"] is False
    return errors[0]


def patch_of(result: dict) -> dict:
    patches = [e["patch"] for e in result["events"] if e["type"] == "state_patch"]
    assert len(patches) == 1, result
    return patches[0]["perception"]


def npcs_of(result: dict) -> dict[str, dict]:
    """query-perception's answer, by NPC id."""
    assert result["ok"], result
    return {n["npcId"]: n for n in info(result)["npcs"]}


def ago(**delta) -> str:
    return (datetime.now(timezone.utc) - timedelta(**delta)).isoformat().replace("+00:00", "Z")


# -- initialize ----------------------------------------------------------------------

def test_initialize_weights_faction_50_traits_30_variance_20(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception init").id
        seeded = 0.2 * random.Random(5).uniform(-100, 100)
        results, state = run_plan(client, sid, [
            init("a", "aldric", npcName="Aldric", factionReputation=60, traitAffinity=40,
                 variance=0),
            # Traits by the NPC's likes (+50) and dislikes (-50), plus an explicit affinity.
            init("b", "bram", factionReputation=-20, variance=0,
                 visibleTraits=["holy symbol", "bloody axe", {"trait": "guild badge", "affinity": 30},
                                "muddy boots"],
                 npcLikes=["Holy Symbol"], npcDislikes=["bloody axe"]),
            # Chance alone: 20% of a seeded draw from -100..100.
            init("c", "cora", factionReputation=0, traitAffinity=0, variance=100, seed=5),
            # The faction standing read from the store: no reputation stored means neutral.
            init("d", "dorn", factionId="city_watch", traitAffinity=50, variance=0),
        ])
        assert all(r["ok"] for r in results.values()), results

        a = info(results["a"])
        assert a["score"] == pytest.approx(0.5 * 60 + 0.3 * 40)  # 42
        assert (a["attitude"], a["modifier"]) == ("friendly", 1)
        assert {k: v["weight"] for k, v in a["components"].items()} == {
            "faction": 0.5, "traits": 0.3, "variance": 0.2}
        assert "Aldric" in results["a"]["summary"] and "42" in results["a"]["summary"]

        b = info(results["b"])
        assert b["components"]["traits"]["value"] == pytest.approx(50 - 50 + 30)
        assert b["score"] == pytest.approx(0.5 * -20 + 0.3 * 30)  # -1
        assert b["attitude"] == "neutral" and b["modifier"] == 0

        c = info(results["c"])
        assert c["score"] == pytest.approx(round(seeded, 2))
        assert c["components"]["variance"]["seed"] == 5

        d = info(results["d"])
        assert d["components"]["faction"]["source"] == "missing"
        assert d["score"] == pytest.approx(15)
        assert any("city_watch" in w for w in warnings(results["d"]))

        # Every initialized NPC is in the session state, for the narrator.
        assert state["perception"]["aldric"]["score"] == pytest.approx(42, abs=0.05)
        assert state["perception"]["aldric"]["recentEvents"] == ["initialized +42"]


def test_initialize_keeps_an_existing_perception_unless_reset(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception reset").id
        results, _ = run_plan(client, sid, [
            init("first", "edda", factionReputation=100, traitAffinity=100, variance=0),
            init("again", "edda", factionReputation=-100, traitAffinity=-100, variance=0),
            query("q1", npcId="edda"),
            init("reset", "edda", factionReputation=-100, traitAffinity=-100, variance=0,
                 reset=True),
            query("q2", npcId="edda"),
            # Seeded: the same seed gives the same first impression.
            init("s1", "finn", factionReputation=10, variance=100, seed=42),
            init("s2", "greta", factionReputation=10, variance=100, seed=42),
        ])
        assert all(r["ok"] for r in results.values()), results
        assert info(results["again"])["initialized"] is False
        assert any("already" in w and "reset" in w for w in warnings(results["again"]))
        assert "unchanged" in results["again"]["summary"]
        assert npcs_of(results["q1"])["edda"]["score"] == pytest.approx(80, abs=0.05)
        assert info(results["reset"])["reset"] is True
        edda = npcs_of(results["q2"])["edda"]
        assert edda["score"] == pytest.approx(-80, abs=0.05)
        assert edda["recentEvents"] == ["initialized -80"]  # the history starts again
        assert info(results["s1"])["score"] == info(results["s2"])["score"]


# -- update --------------------------------------------------------------------------

def test_update_applies_each_events_delta_and_keeps_the_history(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception update").id
        results, state = run_plan(client, sid, [
            init("init", "hana", factionReputation=0, traitAffinity=0, variance=0),
            update("u1", "hana", "helped"),                          # +20 -> 20
            update("u2", "hana", "gift", note="a silver ring"),      # +10 -> 30
            update("u3", "hana", "insulted"),                        # -10 -> 20
            update("u4", "hana", "lied", magnitude="major"),         # -30 -> -10
            update("u5", "hana", "paid-double", delta=5),            # +5  -> -5
            update("u6", "hana", "rescued"),                         # saved +40 -> 35
            update("u7", "hana", "defended", magnitude=0.5),         # +12.5 -> 47.5
            update("u8", "hana", "betrayed", magnitude="major"),     # -100, capped -50 -> -2.5
            update("u9", "ivo", "threatened"),                       # no record: 0 -> -20
            update("u10", "jory", "attacked"),                       # -35
            update("u11", "jory", "stole"),                          # -25 -> -60
            update("u12", "jory", "refused"),                        # -10 -> -70
            update("u13", "jory", "kept-promise"),                   # +15 -> -55
            update("u14", "jory", "complimented", magnitude="minor"),  # +5 -> -50
            query("q", npcIds=["hana", "ivo", "jory"]),
        ])
        assert all(r["ok"] for r in results.values()), results
        expected = {"u1": (20, 20), "u2": (10, 30), "u3": (-10, 20), "u4": (-30, -10),
                    "u5": (5, -5), "u6": (40, 35), "u7": (12.5, 47.5), "u8": (-50, -2.5),
                    "u9": (-20, -20), "u10": (-35, -35), "u11": (-25, -60), "u12": (-10, -70),
                    "u13": (15, -55), "u14": (5, -50)}
        for tool_id, (delta, after) in expected.items():
            fields = info(results[tool_id])
            assert fields["delta"] == pytest.approx(delta), (tool_id, fields)
            assert fields["after"] == pytest.approx(after, abs=0.05), (tool_id, fields)
        assert info(results["u6"])["event"] == "saved"  # an alias
        assert info(results["u9"])["created"] is True
        assert any("no perception record" in w for w in warnings(results["u9"]))
        assert "helped" in results["u1"]["summary"] and "20" in results["u1"]["summary"]

        npcs = npcs_of(results["q"])
        assert npcs["hana"]["recentEvents"] == [
            "lied -30", "paid-double +5", "saved +40", "defended +12.5", "betrayed -50"]
        assert npcs["jory"]["score"] == pytest.approx(-50, abs=0.05)
        assert (npcs["jory"]["attitude"], npcs["jory"]["modifier"]) == ("unfriendly", -1)
        assert state["perception"]["ivo"]["score"] == pytest.approx(-20, abs=0.05)
        history = [e for e in npcs["hana"]["recentEvents"]]
        assert len(history) == 5  # the last five; the store keeps up to historyLimit


# -- query ---------------------------------------------------------------------------

BANDS = {  # npc: (factionReputation, traitAffinity) -> score, attitude, modifier
    "p80": (100, 100, 80, "devoted", 3),
    "p71": (100, 70, 71, "devoted", 3),
    "p60": (60, 100, 60, "friendly", 2),
    "p40": (80, 0, 40, "friendly", 1),
    "p31": (62, 0, 31, "friendly", 1),
    "p30": (60, 0, 30, "neutral", 0),
    "z0": (0, 0, 0, "neutral", 0),
    "n30": (-60, 0, -30, "neutral", 0),
    "n40": (-80, 0, -40, "unfriendly", -1),
    "n60": (-60, -100, -60, "unfriendly", -2),
    "n80": (-100, -100, -80, "hostile", -3),
}


def test_query_reports_attitude_bands_and_dice_modifiers(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception bands").id
        steps = [init(f"i-{npc}", npc, factionReputation=f, traitAffinity=a, variance=0)
                 for npc, (f, a, *_rest) in BANDS.items()]
        steps.append(query("all", npcIds=list(BANDS) + ["stranger"]))
        steps.append(query("one", npcId="p60"))
        results, state = run_plan(client, sid, steps)
        assert all(r["ok"] for r in results.values()), results
        npcs = npcs_of(results["all"])
        for npc, (_f, _a, score, attitude, modifier) in BANDS.items():
            assert npcs[npc]["score"] == pytest.approx(score, abs=0.05), npc
            assert (npcs[npc]["attitude"], npcs[npc]["modifier"]) == (attitude, modifier), npc
            assert npcs[npc]["known"] is True
            assert state["perception"][npc]["modifier"] == modifier
        assert npcs["stranger"] == {"npcId": "stranger", "score": 0.0, "attitude": "neutral",
                                    "modifier": 0, "known": False}
        assert list(npcs_of(results["one"])) == ["p60"]
        assert results["one"]["summary"] == "p60: friendly 60 (dice +2)"


def test_decay_is_applied_when_read_and_before_an_update(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception decay").id
        results, _ = run_plan(client, sid, [
            # 40 three days ago, the store's 10% a day: 40 * 0.9^3 = 29.16, now neutral.
            init("a", "kara", factionReputation=80, variance=0, lastInteraction=ago(days=3)),
            # The same with decayRate 0: no decay.
            init("b", "lem", factionReputation=80, variance=0, decayRate=0,
                 lastInteraction=ago(days=3)),
            # A strong impression (80) fades at half the rate: 80 * 0.95^2 = 72.2.
            init("c", "mott", factionReputation=100, traitAffinity=100, variance=0,
                 lastInteraction=ago(days=2)),
            query("q", npcIds=["kara", "lem", "mott"]),
            # The delta is added to the decayed score, not the stored one.
            update("u", "kara", "helped"),
        ])
        assert all(r["ok"] for r in results.values()), results
        npcs = npcs_of(results["q"])
        assert npcs["kara"]["storedScore"] == pytest.approx(40)
        assert npcs["kara"]["score"] == pytest.approx(40 * 0.9 ** 3, abs=0.05)
        assert (npcs["kara"]["attitude"], npcs["kara"]["modifier"]) == ("neutral", 0)
        assert npcs["lem"]["score"] == pytest.approx(40)
        assert (npcs["lem"]["attitude"], npcs["lem"]["modifier"]) == ("friendly", 1)
        assert npcs["mott"]["score"] == pytest.approx(80 * 0.95 ** 2, abs=0.05)
        assert npcs["mott"]["attitude"] == "devoted"
        assert info(results["u"])["before"] == pytest.approx(29.16, abs=0.05)
        assert info(results["u"])["after"] == pytest.approx(49.16, abs=0.05)


def test_sc028_a_helped_npc_ends_more_than_30_points_above_a_betrayed_one(perception_daemon):
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception").id
        same_start = {"factionReputation": 10, "traitAffinity": 10, "variance": 100, "seed": 28}
        steps = [init("i1", "helped_npc", **same_start), init("i2", "betrayed_npc", **same_start)]
        steps += [update(f"h{i}", "helped_npc", "helped") for i in range(3)]
        steps += [update("b1", "betrayed_npc", "betrayed")]
        steps += [query("q", npcIds=["helped_npc", "betrayed_npc"])]
        results, _ = run_plan(client, sid, steps)
        assert all(r["ok"] for r in results.values()), results
        assert info(results["i1"])["score"] == info(results["i2"])["score"]
        npcs = npcs_of(results["q"])
        helped, betrayed = npcs["helped_npc"], npcs["betrayed_npc"]
        assert helped["score"] - betrayed["score"] > 30
        assert helped["modifier"] > 0 > betrayed["modifier"]
        assert helped["attitude"] in ("friendly", "devoted")
        assert betrayed["attitude"] in ("unfriendly", "hostile")
        # And in a later turn of the session the store still remembers both.
        later, _ = run_plan(client, sid, [query("q", npcIds=["helped_npc", "betrayed_npc"])])
        again = npcs_of(later["q"])
        assert again["helped_npc"]["score"] - again["betrayed_npc"]["score"] > 30


# -- bad input -------------------------------------------------------------------------

BAD_INPUTS = [
    (init("no-id", "x") | {"input": {"factionReputation": 10}}, "input.npcId", "required"),
    (init("id-type", "x") | {"input": {"npcId": 5}}, "input.npcId", "integer 5"),
    (init("range", "x", factionReputation=150), "input.factionReputation", "150"),
    (init("traits", "x", visibleTraits=[{"trait": "axe"}]), "input.visibleTraits[0].affinity",
     "required"),
    (init("seed", "x", seed="abc"), "input.seed", '"abc"'),
    (init("when", "x", lastInteraction="yesterday"), "input.lastInteraction", "ISO 8601"),
    (update("event", "x", "danced"), "input.event", "unknown event"),
    (update("mag", "x", "helped", magnitude="huge"), "input.magnitude", '"huge"'),
    (update("delta", "x", "custom", delta=90), "input.delta", "90"),
    (tool("no-event", "update-perception", npcId="x"), "input.event", "required"),
    (query("nothing"), "input.npcId", "required"),
    (query("ids", npcIds="x"), "input.npcIds", "array"),
    (query("ids-empty", npcIds=[]), "input.npcIds", "at least one"),
]


def test_bad_inputs_give_an_error_event_and_done_not_ok(perception_daemon):
    with perception_daemon.client() as client:
        # A session disables a skill after six failures in a row: a few per session.
        for start in range(0, len(BAD_INPUTS), 4):
            batch = BAD_INPUTS[start:start + 4]
            sid = client.create_session(title="perception bad input").id
            results, _ = run_plan(client, sid, [step for step, _f, _m in batch])
            for step, field, message in batch:
                result = results[step["toolId"]]
                error = error_of(result)
                assert error["errorCode"] == "invalid_input", result
                assert error["details"]["field"] == field, error
                assert message in error["errorMessage"], error
                assert result["error"], result  # tool_finished names the failure too
            # Nothing was stored for a refused input.
            check, _ = run_plan(client, sid, [query("q", npcId="x")])
            assert npcs_of(check["q"])["x"]["known"] is False


def run_script(name: str, stdin: bytes, env: dict[str, str]) -> list[dict]:
    """Run a script directly (no daemon plan); check exit 0 and no traceback."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NARRATORIA_")}
    base["PATH"] = os.path.dirname(sys.executable) + os.pathsep + base.get("PATH", "")
    proc = subprocess.run([str(SCRIPTS / name)], input=stdin, capture_output=True,
                          env={**base, **env}, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert events and events[-1]["type"] == "done", events
    assert all(e["version"] == "0" for e in events)
    return events


def failed_with(events: list[dict]) -> str:
    assert events[-1]["ok"] is False, events
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1, events
    return errors[0]["errorCode"]


def request(**input) -> bytes:
    return json.dumps({"requestId": "r1", "tool": "npc-perception", "input": input}).encode()


@pytest.mark.parametrize("name", ["initialize-perception", "update-perception",
                                  "query-perception"])
def test_bad_stdin_and_an_unreachable_or_refusing_store(perception_daemon, tmp_path, name):
    good = {"initialize-perception": {"npcId": "x", "variance": 0},
            "update-perception": {"npcId": "x", "event": "helped"},
            "query-perception": {"npcId": "x"}}[name]
    live = {"NARRATORIA_ADDRESS": f"unix://{perception_daemon.socket}"}
    # Not JSON, not an object, an input that is not an object.
    for raw in (b"{not json", b"[1, 2]", b'{"input": "x"}', b"\xff\xfe"):
        assert failed_with(run_script(name, raw, live | {"NARRATORIA_SKILL_TOKEN": "t"})) \
            == "invalid_input"
    # No store in the environment, a socket nobody listens on, a forged token.
    assert failed_with(run_script(name, request(**good), {})) == "store_unavailable"
    nowhere = {"NARRATORIA_ADDRESS": f"unix://{tmp_path}/none.sock", "NARRATORIA_SKILL_TOKEN": "t"}
    events = run_script(name, request(**good), nowhere)
    assert failed_with(events) == "store_unavailable"
    assert "UNAVAILABLE" in events[-1]["summary"]  # the gRPC status of an unreachable store
    forged = run_script(name, request(**good), live | {"NARRATORIA_SKILL_TOKEN": "forged"})
    assert failed_with(forged) == "store_denied"
    assert all(e.get("requestId") == "r1" for e in forged)


# -- AdjustScore: the store's atomic score update ------------------------------------------

def test_simultaneous_updates_of_one_npc_all_count(perception_daemon):
    """update-perception adds its delta in one store transaction (AdjustScore): updates
    of one NPC in one plan, run side by side, never overwrite each other."""
    with perception_daemon.client() as client:
        sid = client.create_session(title="perception atomic").id
        run_plan(client, sid, [init("i", "tamsin", factionReputation=0, traitAffinity=0,
                                    variance=0)])
        results, _ = run_plan(client, sid, [update(f"u{i}", "tamsin", "helped") for i in range(4)])
        assert all(r["ok"] for r in results.values()), results
        check, _ = run_plan(client, sid, [query("q", npcId="tamsin")])
        tamsin = npcs_of(check["q"])["tamsin"]
        assert tamsin["score"] == pytest.approx(80, abs=0.05)
        assert sum(e.startswith("helped +20") for e in tamsin["recentEvents"]) == 4


def test_adjust_score_needs_a_live_skill_token(perception_daemon):
    import grpc

    from narratoria.proto import narratoria_pb2 as pb
    from narratoria.proto import narratoria_pb2_grpc as rpc

    channel = grpc.insecure_channel(f"unix://{perception_daemon.socket}")
    try:
        for token in ("forged", ""):
            with pytest.raises(grpc.RpcError) as err:
                rpc.StoreStub(channel).AdjustScore(
                    pb.AdjustScoreRequest(data_type="npc_perception", key="x", delta=5),
                    metadata=[("x-narratoria-skill-token", token)], timeout=30)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()
