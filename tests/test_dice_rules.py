"""dice-roller's default rules and its NPC perception modifier (docs/rules.md).

The bands are checked by running scripts/roll-dice directly with the seeded pseudo
source (the test predicts the dice with the same generator); the perception modifier
through a real daemon (pattern planner), where npc-perception stores a perception
first and roll-dice reads it back through the Store service in the same session.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from conftest import REPO
from skill_plans import run_by_tool as run_plan

SCRIPT = REPO / "skills" / "dice-roller" / "scripts" / "roll-dice"


def predicted(seed: int, dice: int = 2, sides: int = 6) -> list[int]:
    """The faces roll-dice rolls for ``seed`` with randomSource pseudo."""
    rng = random.Random(seed)
    return [rng.randint(1, sides) for _ in range(dice)]


def seed_for(band: range) -> int:
    """The first seed whose plain 2d6 lands in ``band``."""
    return next(s for s in range(10_000) if sum(predicted(s)) in band)


def run(input: dict, env: dict[str, str] | None = None) -> list[dict]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NARRATORIA_")}
    base["PATH"] = os.path.dirname(sys.executable) + os.pathsep + base.get("PATH", "")
    request = {"requestId": "r1", "tool": "dice-roller", "operation": "roll-dice", "input": input}
    proc = subprocess.run([str(SCRIPT)], input=json.dumps(request).encode(), capture_output=True,
                          env={**base, **(env or {})}, timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode()
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert events[-1]["type"] == "done" and sum(e["type"] == "done" for e in events) == 1
    return events


def rolled(events: list[dict]) -> tuple[dict, dict, dict]:
    """(dice_roll payload, lastRoll, done) of a successful roll."""
    assert events[-1]["ok"] is True, events
    (payload,) = [e["payload"] for e in events if e["type"] == "ui_event"]
    (patch,) = [e["patch"] for e in events if e["type"] == "state_patch"]
    assert sum(d["subtotal"] for d in payload["dice"]) + payload["modifier"] == payload["total"]
    return payload, patch["lastRoll"], events[-1]


def warns(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "log" and e["level"] == "warn"]


# -- the 2d6 bands ---------------------------------------------------------------------

@pytest.mark.parametrize("band, outcome, label", [
    (range(2, 7), "failure", "failure"),
    (range(7, 10), "partial", "partial success"),
    (range(10, 13), "success", "success"),
])
def test_a_check_rolls_2d6_and_classifies_the_total(band, outcome, label):
    seed = seed_for(band)
    payload, last, done = rolled(run({"check": True, "seed": seed, "reason": "Climb the wall"}))
    assert payload["formula"] == "2d6" and payload["dice"][0]["rolls"] == predicted(seed)
    assert payload["total"] in band
    assert (payload["rules"], payload["outcome"], payload["outcomeLabel"]) == ("default", outcome,
                                                                             label)
    assert last["outcome"] == outcome and last["total"] == payload["total"]
    assert done["summary"] == f"Rolled 2d6: {payload['total']}, {label} (Climb the wall)"


def test_every_total_is_classified_by_the_spec_bands():
    """Modifiers move a total across the bands; 10-12 "or more" is a success, below 2 a failure."""
    seen = set()
    for seed in range(40):
        for modifier in (-3, 0, 4):
            payload, _, _ = rolled(run({"check": True, "seed": seed, "modifier": modifier,
                                        "showIndividualRolls": False}))
            total = sum(predicted(seed)) + modifier
            assert payload["total"] == total
            expected = "failure" if total <= 6 else "partial" if total <= 9 else "success"
            assert payload["outcome"] == expected, (seed, modifier, total)
            seen.add(expected)
    assert seen == {"failure", "partial", "success"}


def test_check_modifiers_of_7_4_are_listed_and_added():
    seed = seed_for(range(7, 8))  # a 7: partial alone, a success with +3
    payload, last, done = rolled(run({"seed": seed, "relevantTrait": "silver tongue",
                                      "memoryCallback": True, "modifier": 1}))
    # No formula but a trait named: the default check is implied.
    assert payload["rules"] == "default" and payload["formula"] == "2d6"
    assert payload["modifiers"] == [
        {"source": "modifier", "value": 1},
        {"source": "relevantTrait", "value": 1, "label": "silver tongue"},
        {"source": "memoryCallback", "value": 1}]
    assert payload["modifier"] == 3 and payload["total"] == 10 and payload["outcome"] == "success"
    assert done["summary"] == "Rolled 2d6+3: 10, success"
    # An explicit formula "2d6" with check works too; without check nothing is classified.
    plain, plain_last, plain_done = rolled(run({"formula": "2d6", "seed": seed}))
    assert "outcome" not in plain and "outcome" not in plain_last and "rules" not in plain
    assert plain_done["summary"] == "Rolled 2d6: 7"
    assert rolled(run({"formula": "2d6", "check": True, "seed": seed}))[0]["outcome"] == "partial"
    # A formula alone keeps the old default (1d20) and no classification.
    old, _, _ = rolled(run({"modifier": 2, "seed": seed}))
    assert old["formula"] == "1d20" and "outcome" not in old


@pytest.mark.parametrize("input, field, message", [
    ({"check": True, "formula": "1d20"}, "input.check", "2d6"),
    ({"check": "yes"}, "input.check", '"yes"'),
    ({"relevantTrait": 5}, "input.relevantTrait", "5"),
    ({"memoryCallback": ""}, "input.memoryCallback", '""'),
    ({"npcId": ""}, "input.npcId", "non-empty"),
    ({"npcId": 7}, "input.npcId", "7"),
])
def test_bad_check_inputs_are_refused(input, field, message):
    events = run(input)
    assert events[-1]["ok"] is False
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["errorCode"] == "invalid_input" and error["details"]["field"] == field
    assert message in error["errorMessage"]
    assert not [e for e in events if e["type"] in ("ui_event", "state_patch")]


def test_without_a_store_the_npc_modifier_is_0_with_a_warning(tmp_path):
    seed = 5
    for env in ({}, {"NARRATORIA_ADDRESS": f"unix://{tmp_path}/nobody.sock",
                     "NARRATORIA_SKILL_TOKEN": "t"}):
        events = run({"check": True, "npcId": "mara", "seed": seed}, env)
        payload, _, done = rolled(events)
        assert payload["total"] == sum(predicted(seed))
        assert payload["perception"] == {"npcId": "mara", "known": False, "modifier": 0,
                                         "available": False}
        assert any("without mara's perception modifier" in w for w in warns(events)), events
        assert "[" not in done["summary"]


# -- the perception modifier through a real store ----------------------------------------

@pytest.fixture(scope="module")
def rules_daemon(pattern_daemon):
    return pattern_daemon


def step(tool_id: str, tool_path: str, **input) -> dict:
    return {"toolId": tool_id, "toolPath": tool_path, "input": input, "required": False,
            "retryPolicy": {"maxRetries": 0, "backoffMs": 0}}


def dice_of(result: dict) -> dict:
    assert result["ok"], result
    (payload,) = [e["payload"] for e in result["events"] if e["type"] == "ui_event"]
    return payload


def test_the_named_npcs_perception_modifier_is_added(rules_daemon):
    seed = seed_for(range(7, 8))  # a plain 7
    with rules_daemon.client() as client:
        sid = client.create_session(title="dice rules").id
        results, state = run_plan(client, sid, [
            # Mara: 0.5*100 + 0.3*100 = 80, devoted (+3); Varro: 0.5*-80 = -40, unfriendly (-1);
            # Sela: 0.5*40 = 20, neutral (0).
            step("i-mara", "npc-perception/initialize-perception", npcId="mara",
                 factionReputation=100, traitAffinity=100, variance=0),
            step("i-varro", "npc-perception/initialize-perception", npcId="varro",
                 factionReputation=-80, variance=0),
            step("i-sela", "npc-perception/initialize-perception", npcId="sela",
                 factionReputation=40, variance=0),
            step("r-mara", "dice-roller/roll-dice", npcId="mara", seed=seed,
                 reason="Ask Mara for the key"),
            step("r-varro", "dice-roller/roll-dice", check=True, npcId="varro", seed=seed),
            step("r-sela", "dice-roller/roll-dice", check=True, npcId="sela", seed=seed),
            step("r-nobody", "dice-roller/roll-dice", check=True, npcId="nobody", seed=seed),
            # Not a check: the modifier applies to any formula, nothing is classified.
            step("r-d20", "dice-roller/roll-dice", formula="1d20", npcId="mara", seed=seed),
            # After betraying Varro (-40 - 50 = -90: hostile) the penalty grows to -3.
            step("betray", "npc-perception/update-perception", npcId="varro", event="betrayed"),
            step("r-varro-2", "dice-roller/roll-dice", check=True, npcId="varro", seed=seed,
                 relevantTrait=True),
        ])
        assert all(r["ok"] for r in results.values()), results

        mara = dice_of(results["r-mara"])
        assert mara["perception"] == {"npcId": "mara", "known": True, "score": pytest.approx(80, abs=0.05),
                                      "attitude": "devoted", "modifier": 3}
        assert mara["modifiers"] == [{"source": "npcPerception", "npcId": "mara", "value": 3}]
        assert (mara["modifier"], mara["total"], mara["outcome"]) == (3, 10, "success")
        assert results["r-mara"]["summary"] == \
            "Rolled 2d6+3: 10, success (Ask Mara for the key) [mara devoted: +3]"

        varro = dice_of(results["r-varro"])
        assert varro["perception"]["modifier"] == -1 and varro["perception"]["attitude"] == "unfriendly"
        assert (varro["total"], varro["outcome"]) == (6, "failure")

        sela = dice_of(results["r-sela"])
        assert sela["perception"]["known"] is True and sela["perception"]["modifier"] == 0
        assert (sela["total"], sela["outcome"]) == (7, "partial")

        nobody = dice_of(results["r-nobody"])
        assert nobody["perception"] == {"npcId": "nobody", "known": False, "modifier": 0}
        assert (nobody["total"], nobody["outcome"]) == (7, "partial")
        assert not [e for e in results["r-nobody"]["events"]
                    if e["type"] == "log" and e["level"] == "warn"]  # no record is no problem

        d20 = dice_of(results["r-d20"])
        assert d20["formula"] == "1d20" and "outcome" not in d20
        assert d20["total"] == predicted(seed, 1, 20)[0] + 3

        again = dice_of(results["r-varro-2"])
        assert again["perception"]["attitude"] == "hostile" and again["perception"]["modifier"] == -3
        assert again["modifier"] == 1 - 3 and again["total"] == 5 and again["outcome"] == "failure"
        # The session state holds the last roll with its outcome.
        assert state["lastRoll"]["outcome"] == "failure" and state["lastRoll"]["total"] == 5


def test_a_refused_token_rolls_without_the_modifier(rules_daemon):
    env = {"NARRATORIA_ADDRESS": f"unix://{rules_daemon.socket}", "NARRATORIA_SKILL_TOKEN": "forged"}
    events = run({"check": True, "npcId": "mara", "seed": 1}, env)
    payload, _, _ = rolled(events)
    assert payload["perception"]["available"] is False and payload["perception"]["modifier"] == 0
    assert any("PERMISSION_DENIED" in w for w in warns(events)), events
