"""Tests for the built-in dice-roller skill (skills/dice-roller).

The real ``scripts/roll-dice`` executable is run as a subprocess through its
shebang, exactly as the runtime launches it, and every NDJSON line it writes is
checked against tool protocol v0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SKILL_DIR = Path(__file__).resolve().parent.parent / "skills" / "dice-roller"
SCRIPT = SKILL_DIR / "scripts" / "roll-dice"
MANIFEST = SKILL_DIR / "references" / "script-manifest.json"
CONFIG_SCHEMA = SKILL_DIR / "references" / "config-schema.json"

EVENT_TYPES = {"log", "state_patch", "asset", "ui_event", "error", "done"}
# Make the script's `#!/usr/bin/env python3` resolve to the interpreter running
# the tests.
ENV = {
    **os.environ,
    "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
}
# The script finds config.json via $NARRATORIA_SKILL_DIR, else next to itself.
ENV.pop("NARRATORIA_SKILL_DIR", None)


def run_raw(stdin: bytes, script: Path = SCRIPT, env: dict | None = None) -> list[dict]:
    """Run the script on raw stdin bytes; check the protocol; return the events."""
    proc = subprocess.run(
        [str(script)], input=stdin, capture_output=True, env={**ENV, **(env or {})}, timeout=30
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode("utf-8")
    assert out.endswith("\n"), out
    lines = out.split("\n")[:-1]
    assert lines, "no output"
    events = []
    for line in lines:
        event = json.loads(line)
        assert isinstance(event, dict), line
        assert event["version"] == "0", line
        assert event["type"] in EVENT_TYPES, line
        events.append(event)
    done = [e for e in events if e["type"] == "done"]
    assert len(done) == 1, events
    assert events[-1]["type"] == "done", events
    assert isinstance(events[-1]["ok"], bool)
    for e in events:
        if e["type"] == "log":
            assert e["level"] in {"debug", "info", "warn", "error"}
            assert isinstance(e["message"], str) and e["message"]
        elif e["type"] == "error":
            assert isinstance(e["errorCode"], str) and e["errorCode"]
            assert isinstance(e["errorMessage"], str) and e["errorMessage"]
        elif e["type"] == "state_patch":
            assert isinstance(e["patch"], dict)
        elif e["type"] == "ui_event":
            assert isinstance(e["event"], str) and e["event"]
    return events


def run(input: dict | None = None, script: Path = SCRIPT, **envelope) -> list[dict]:
    request = {"requestId": "req-1", "tool": "dice-roller", "operation": "roll-dice"}
    request.update(envelope)
    if input is not None:
        request["input"] = input
    return run_raw(json.dumps(request).encode(), script)


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def roll_ok(input: dict | None = None, **envelope) -> tuple[dict, dict, dict]:
    """Run a roll expected to succeed; return (ui payload, lastRoll, done)."""
    events = run(input, **envelope)
    done = events[-1]
    assert done["ok"] is True, events
    assert not of_type(events, "error")
    logs = of_type(events, "log")
    assert logs[0]["level"] == "info" and logs[0]["message"].startswith("Rolling ")
    (ui,) = of_type(events, "ui_event")
    assert ui["event"] == "dice_roll"
    (patch,) = of_type(events, "state_patch")
    last = patch["patch"]["lastRoll"]
    payload = ui["payload"]
    assert last["total"] == last["result"] == payload["total"]
    assert last["formula"] == last["dice"] == payload["formula"]
    assert last["modifier"] == payload["modifier"]
    assert done["summary"].startswith("Rolled ") and str(payload["total"]) in done["summary"]
    # The totals add up: dice subtotals + modifier.
    assert sum(d["subtotal"] for d in payload["dice"]) + payload["modifier"] == payload["total"]
    for d in payload["dice"]:
        if "kept" in d:
            assert d["subtotal"] == d.get("sign", 1) * sum(d["kept"])
            assert all(1 <= r <= d["sides"] for r in d["rolls"])
            assert len(d["rolls"]) == d["count"]
    return payload, last, done


def roll_error(input: dict | None = None, raw: bytes | None = None) -> tuple[dict, dict]:
    """Run a roll expected to fail cleanly; return (error event, done)."""
    events = run_raw(raw) if raw is not None else run(input)
    done = events[-1]
    assert done["ok"] is False, events
    errors = of_type(events, "error")
    assert len(errors) == 1, events
    assert events[-2] is errors[0]
    assert not of_type(events, "ui_event") and not of_type(events, "state_patch")
    return errors[0], done


# --- packaging --------------------------------------------------------------


def test_script_is_executable_python3():
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().splitlines()[0] == "#!/usr/bin/env python3"
    source = SCRIPT.read_text()
    imported = re.findall(r"^\s*(?:import|from)\s+(\w+)", source, re.M)
    assert imported and not any(name.startswith("narratoria") for name in imported)


def test_skill_md_frontmatter():
    yaml = pytest.importorskip("yaml")
    text = (SKILL_DIR / "SKILL.md").read_text()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["name"] == "dice-roller" == SKILL_DIR.name
    assert 0 < len(meta["description"]) <= 1024
    assert meta["license"] == "MIT"
    x = meta["metadata"]["x-narratoria"]
    assert meta["metadata"]["version"] == "1.0.0"
    assert x["displayName"] == "Dice Roller"
    assert set(x["capabilities"]) >= {"dice", "randomness", "skill-check", "outcome-resolution"}
    assert x["priority"] == 60
    assert x["retryPolicy"] == {"maxRetries": 1, "backoffMs": 50}
    assert "roll-dice" in body


def test_config_schema():
    schema = json.loads(CONFIG_SCHEMA.read_text())
    assert schema["type"] == "object"
    props = schema["properties"]
    assert props["showIndividualRolls"]["type"] == "boolean"
    assert props["showIndividualRolls"]["default"] is True
    assert props["randomSource"]["enum"] == ["crypto", "pseudo"]
    assert props["randomSource"]["default"] == "crypto"


def test_manifest_examples_run_and_match_schema():
    manifest = json.loads(MANIFEST.read_text())
    entry = manifest["scripts"]["roll-dice"]
    assert entry["timeoutMs"] == 5000
    schema = entry["inputSchema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    props = schema["properties"]
    pattern = re.compile(props["formula"]["pattern"])
    for formula in ["1d20", "d20", "4d6kh3", " 2d6 + 1D4 - 1 ", "d%", "2d20dl1"]:
        assert pattern.search(formula), formula
    for formula in ["2x6", "", "abc", "1d6+", "2d6kh", "1d6 5"]:
        assert not pattern.search(formula), formula
    assert entry["examples"]
    for example in entry["examples"]:
        assert set(example) <= set(props)
        assert pattern.search(example["formula"])
        roll_ok(example)


# --- successful rolls ---------------------------------------------------------


def test_empty_stdin_defaults_to_1d20():
    events = run_raw(b"")
    assert events[-1]["ok"] is True
    (ui,) = of_type(events, "ui_event")
    assert ui["payload"]["formula"] == "1d20"
    assert 1 <= ui["payload"]["total"] <= 20
    assert of_type(events, "log")[0]["message"] == "Rolling 1d20"


def test_missing_input_and_unknown_fields_are_tolerated():
    payload, _, _ = roll_ok(None, extra={"x": 1}, timestamp="2024-01-01T00:00:00Z")
    assert payload["formula"] == "1d20"


def test_request_id_is_echoed():
    events = run({"formula": "1d6"}, requestId="abc-123")
    assert all(e["requestId"] == "abc-123" for e in events)


def test_seeded_pseudo_is_reproducible():
    request = {"formula": "10d20+3", "randomSource": "pseudo", "seed": 42}
    first, second = run(request), run(request)
    assert first == second
    payload, last, _ = roll_ok(request)
    assert payload == of_type(first, "ui_event")[0]["payload"]
    assert 13 <= payload["total"] <= 203
    assert len(last["rolls"]) == 10 and all(1 <= r <= 20 for r in last["rolls"])
    # A different seed gives a different sequence.
    other, _, _ = roll_ok({**request, "seed": 43})
    assert other["dice"][0]["rolls"] != payload["dice"][0]["rolls"]


def test_seed_without_source_implies_pseudo():
    a, _, _ = roll_ok({"formula": "5d100", "seed": 9})
    b, _, _ = roll_ok({"formula": "5d100", "seed": 9, "randomSource": "pseudo"})
    assert a == b


def test_crypto_source():
    events = run({"formula": "3d6", "randomSource": "crypto"})
    assert of_type(events, "log")[0]["fields"]["randomSource"] == "crypto"
    payload, last, _ = roll_ok({"formula": "3d6", "randomSource": "crypto"})
    assert 3 <= payload["total"] <= 18 and len(last["rolls"]) == 3


def test_crypto_ignores_seed_with_warning():
    events = run({"formula": "1d6", "randomSource": "crypto", "seed": 1})
    assert events[-1]["ok"] is True
    assert any(e["level"] == "warn" and "seed" in e["message"] for e in of_type(events, "log"))


@pytest.mark.parametrize(
    "formula, term, select",
    [
        ("4d6kh3", "4d6kh3", lambda rolls: sorted(rolls)[1:]),
        ("4d6kl1", "4d6kl1", lambda rolls: sorted(rolls)[:1]),
        ("2d20dl1", "2d20dl1", lambda rolls: sorted(rolls)[1:]),
        ("2d20dh1", "2d20dh1", lambda rolls: sorted(rolls)[:1]),
        ("2d20KH1", "2d20kh1", lambda rolls: sorted(rolls)[1:]),
        ("5d10k2", "5d10kh2", lambda rolls: sorted(rolls)[3:]),
        ("5d10d2", "5d10dl2", lambda rolls: sorted(rolls)[2:]),
        ("3d8dl0", "3d8dl0", lambda rolls: sorted(rolls)),
    ],
)
def test_keep_and_drop(formula, term, select):
    for seed in range(2):
        payload, last, done = roll_ok({"formula": formula, "randomSource": "pseudo", "seed": seed})
        (die,) = payload["dice"]
        assert die["term"] == term
        assert sorted(die["kept"]) == select(die["rolls"])
        # kept dice stay in roll order
        it = iter(die["rolls"])
        assert all(any(k == r for r in it) for k in die["kept"])
        assert payload["total"] == sum(die["kept"])
        assert last["rolls"] == die["kept"]
        assert done["summary"] == f"Rolled {die['term']}: {payload['total']}"


def test_4d6kh3_summary_and_state():
    payload, last, done = roll_ok({"formula": "4d6kh3", "randomSource": "pseudo", "seed": 7})
    (die,) = payload["dice"]
    assert die["sides"] == 6 and len(die["rolls"]) == 4 and len(die["kept"]) == 3
    assert 3 <= payload["total"] <= 18
    assert done["summary"] == f"Rolled 4d6kh3: {payload['total']}"
    assert last == {
        "formula": "4d6kh3",
        "dice": "4d6kh3",
        "rolls": die["kept"],
        "modifier": 0,
        "result": payload["total"],
        "total": payload["total"],
    }


def test_1d20_plus_5():
    payload, last, _ = roll_ok({"formula": "1d20+5", "randomSource": "pseudo", "seed": 3})
    (die,) = payload["dice"]
    assert payload["modifier"] == 5
    assert payload["total"] == die["rolls"][0] + 5
    assert last["rolls"] == die["rolls"]


def test_2d6_with_modifier():
    payload, last, done = roll_ok({"formula": "2d6", "modifier": 2, "seed": 11})
    assert payload["formula"] == "2d6" and payload["modifier"] == 2
    assert payload["total"] == sum(last["rolls"]) + 2
    assert 4 <= payload["total"] <= 14
    assert done["summary"] == f"Rolled 2d6+2: {payload['total']}"


def test_negative_modifier_and_constant_combine():
    payload, last, _ = roll_ok({"formula": "1d20 + 5", "modifier": -3, "seed": 1})
    assert payload["modifier"] == 2
    assert payload["total"] == last["rolls"][0] + 2


def test_bare_d20():
    payload, _, _ = roll_ok({"formula": "d20"})
    assert payload["formula"] == "1d20"
    (die,) = payload["dice"]
    assert die["sides"] == 20 and 1 <= payload["total"] <= 20


def test_d100_and_percent():
    for formula in ("d100", "D%"):
        payload, _, _ = roll_ok({"formula": formula})
        assert payload["formula"] == "1d100" and 1 <= payload["total"] <= 100


def test_multi_term_formula_case_and_whitespace():
    payload, last, _ = roll_ok({"formula": " 2D6 + 1d4 - 1 ", "randomSource": "pseudo", "seed": 5})
    assert payload["formula"] == "2d6+1d4-1"
    assert [d["term"] for d in payload["dice"]] == ["2d6", "1d4"]
    assert payload["modifier"] == -1
    assert len(last["rolls"]) == 3
    assert payload["total"] == sum(last["rolls"]) - 1


def test_subtracted_dice_term():
    payload, _, _ = roll_ok({"formula": "1d20-1d4", "seed": 2})
    plus, minus = payload["dice"]
    assert minus["sign"] == -1 and "sign" not in plus
    assert payload["total"] == plus["rolls"][0] - minus["rolls"][0]


def test_hide_individual_rolls():
    payload, last, _ = roll_ok(
        {"formula": "3d6+2", "showIndividualRolls": False, "randomSource": "pseudo", "seed": 1}
    )
    (die,) = payload["dice"]
    assert "rolls" not in die and "kept" not in die
    assert payload["total"] == die["subtotal"] + 2
    assert len(last["rolls"]) == 3  # state keeps the data


def test_reason_is_echoed():
    payload, _, done = roll_ok({"formula": "2d6", "reason": "Sneak past the guard"})
    assert payload["reason"] == "Sneak past the guard"
    assert "Sneak past the guard" in done["summary"]
    payload, _, _ = roll_ok({"formula": "2d6"})
    assert "reason" not in payload


def test_upper_bounds_are_accepted():
    payload, last, _ = roll_ok({"formula": "100d1000"})
    assert len(last["rolls"]) == 100 and 100 <= payload["total"] <= 100_000


def test_unknown_input_field_warns():
    events = run({"formula": "1d6", "colour": "red"})
    assert events[-1]["ok"] is True
    assert any(e["level"] == "warn" and "colour" in e["message"] for e in of_type(events, "log"))


# --- controlled failures --------------------------------------------------------


@pytest.mark.parametrize(
    "formula",
    ["2x6", "", "   ", "0d6", "1000d6", "1d1", "1d0", "1d1001", "abc", "4d6kh5", "4d6kh0",
     "2d6dl2", "1d6+", "+", "2d6kh", "5", "1d6 5", "4d6 kh3", "1d6++1", "x" * 100],
)
def test_bad_formula(formula):
    error, done = roll_error({"formula": formula})
    assert error["errorCode"] == "invalid_formula"
    message = error["errorMessage"]
    assert message.startswith("input.formula: ")
    assert f"'{formula[:64]}" in message
    assert error["details"]["field"] == "input.formula"
    assert done["summary"]


def test_bad_formula_message_exact():
    error, _ = roll_error({"formula": "2x6"})
    assert error["errorMessage"] == "input.formula: cannot parse '2x6'"


@pytest.mark.parametrize(
    "input, field, shown",
    [
        ({"formula": 5}, "input.formula", "5"),
        ({"formula": None, "seed": "x"}, "input.seed", '"x"'),
        ({"randomSource": "dice"}, "input.randomSource", '"dice"'),
        ({"modifier": "2"}, "input.modifier", '"2"'),
        ({"modifier": 1.5}, "input.modifier", "1.5"),
        ({"modifier": True}, "input.modifier", "true"),
        ({"modifier": 10**6}, "input.modifier", "1000000"),
        ({"showIndividualRolls": "yes"}, "input.showIndividualRolls", '"yes"'),
        ({"reason": 3}, "input.reason", "3"),
        ({"formula": ["1d6"]}, "input.formula", '["1d6"]'),
    ],
)
def test_wrong_types(input, field, shown):
    error, _ = roll_error(input)
    assert error["errorCode"] == "invalid_input"
    assert error["errorMessage"].startswith(field + ":")
    assert shown in error["errorMessage"]
    assert error["details"]["field"] == field


def test_input_not_an_object():
    error, _ = roll_error(raw=b'{"input": [1, 2]}')
    assert error["errorCode"] == "invalid_input" and "input" in error["errorMessage"]


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1, 2]", b'{"input": ', b"{not json", b'{"input" {}}', b'{"a": 1} x',
     b'"\x01"', b'{"input": {"formula": "1d6\x01"}}', b"\xff\xfe", b"[" * 10000],
)
def test_bad_stdin(raw):
    error, _ = roll_error(raw=raw)
    assert error["errorCode"] == "invalid_input"
    assert error["errorMessage"].startswith("stdin: ")


# --- configuration ----------------------------------------------------------------


@pytest.fixture
def skill_copy(tmp_path):
    """A copy of the skill in a temp dir, so tests can write its config.json."""
    dest = tmp_path / "dice-roller"
    shutil.copytree(SKILL_DIR, dest, ignore=shutil.ignore_patterns("config.json", "data"))
    return dest


def test_config_json_sets_defaults(skill_copy):
    (skill_copy / "config.json").write_text(
        json.dumps({"showIndividualRolls": False, "randomSource": "pseudo"})
    )
    script = skill_copy / "scripts" / "roll-dice"
    events = run({"formula": "2d6"}, script=script)
    assert events[-1]["ok"] is True
    assert of_type(events, "log")[0]["fields"]["randomSource"] == "pseudo"
    (die,) = of_type(events, "ui_event")[0]["payload"]["dice"]
    assert "rolls" not in die
    # Input overrides config.
    request = {"formula": "2d6", "showIndividualRolls": True, "randomSource": "crypto"}
    events = run(request, script=script)
    assert of_type(events, "log")[0]["fields"]["randomSource"] == "crypto"
    assert "rolls" in of_type(events, "ui_event")[0]["payload"]["dice"][0]


def test_config_found_via_skill_dir_env(skill_copy):
    (skill_copy / "config.json").write_text(json.dumps({"showIndividualRolls": False}))
    request = json.dumps({"input": {"formula": "1d6"}}).encode()
    events = run_raw(request, env={"NARRATORIA_SKILL_DIR": str(skill_copy)})
    (die,) = of_type(events, "ui_event")[0]["payload"]["dice"]
    assert "rolls" not in die


def test_broken_config_json_is_ignored_with_warning(skill_copy):
    (skill_copy / "config.json").write_text("{not json")
    events = run({"formula": "2d6"}, script=skill_copy / "scripts" / "roll-dice")
    assert events[-1]["ok"] is True
    warnings = [e["message"] for e in of_type(events, "log") if e["level"] == "warn"]
    assert any("config.json" in message for message in warnings)


# --- properties ---------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 20),
    s=st.integers(2, 100),
    k=st.integers(-10, 10),
    seed=st.integers(0, 2**32),
    as_field=st.booleans(),
)
def test_total_within_bounds(n, s, k, seed, as_field):
    if as_field:
        request = {"formula": f"{n}d{s}", "modifier": k}
    else:
        request = {"formula": f"{n}d{s}{k:+d}" if k else f"{n}d{s}"}
    request.update(randomSource="pseudo", seed=seed)
    payload, last, _ = roll_ok(request)
    assert payload["modifier"] == k
    assert len(last["rolls"]) == n and all(1 <= r <= s for r in last["rolls"])
    assert payload["total"] == sum(last["rolls"]) + k
    assert n + k <= payload["total"] <= n * s + k
