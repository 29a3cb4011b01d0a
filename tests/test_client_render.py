"""The daemon client library, turn rendering and the daemon-facing CLI commands.

Everything here runs without the daemon: rendering works on real ``pb.TurnEvent``
messages, addressing errors need no server at all, and the client and the CLI's
``turn``/``play`` are driven against a small in-process fake of the Narratoria
service (canned sessions and one scripted turn), which speaks the same proto.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from narratoria.clients.client import ClientError, NarratoriaClient, event_to_dict, message_to_dict
from narratoria.clients.play import Action, auto_action, parse_action
from narratoria.clients.render import (
    TurnRenderer,
    dice_line,
    format_patch,
    format_session,
    format_state,
    format_status,
    format_timings,
    render_turn,
)
from narratoria.proto import narratoria_pb2 as pb

from conftest import BUILTIN_SKILLS

NARRATORIA = Path(sys.executable).parent / "narratoria"
ROLL_DICE = BUILTIN_SKILLS / "dice-roller" / "scripts" / "roll-dice"


def ev(seq: int = 1, **event: object) -> pb.TurnEvent:
    return pb.TurnEvent(turn_id="t1", seq=seq, at_ms=seq * 10, **event)


def tool_output(tool_id: str, doc: dict, attempt: int = 1) -> pb.TurnEvent:
    return ev(tool_event=pb.ToolOutput(tool_id=tool_id, type=doc["type"],
                                       event_json=json.dumps(doc), attempt=attempt))


def real_roll(formula: str, seed: int, reason: str | None = None) -> list[dict]:
    """What the built-in dice-roller really prints for this request."""
    request = {"requestId": "r", "input": {"formula": formula, "seed": seed}}
    if reason:
        request["input"]["reason"] = reason
    proc = subprocess.run([sys.executable, str(ROLL_DICE)], input=json.dumps(request),
                          capture_output=True, text=True, timeout=30, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def done(turn: int = 1, **kw: object) -> pb.TurnEvent:
    timings = {"total": 1234, "store": 20, "plan": 100, "narrate": 800, "execute": 200,
               "choices": 50}
    return ev(99, done=pb.TurnDone(turn_number=turn, timings_ms=timings,
                                   outcome=kw.pop("outcome", "SUCCESS"), **kw))


# -- rendering ---------------------------------------------------------------------------

def test_narration_streams_inline_then_choices_and_a_timing_line():
    events = [ev(1, started=pb.TurnStarted(session_id="s", turn_number=1, input="look")),
              ev(2, phase=pb.PhaseChanged(phase="GENERATING", attempt=1)),
              ev(3, narration=pb.NarrationToken(text="The door ")),
              ev(4, narration=pb.NarrationToken(text="creaks open.")),
              ev(5, choices=pb.Choices(options=["Go inside", "Walk away"])),
              done()]
    r = TurnRenderer()
    pieces = [r.feed(e) for e in events]
    assert pieces[:4] == ["", "", "The door ", "creaks open."]  # tokens, no newline each
    assert pieces[4] == "\n\n  1. Go inside\n  2. Walk away\n"
    assert pieces[5] == ("turn 1 · SUCCESS · 1234 ms "
                         "(plan 100, execute 200, narrate 800, choices 50, store 20)\n")
    assert r.choices == ["Go inside", "Walk away"] and r.done is not None


def test_verbose_adds_phases_plans_and_tool_progress():
    events = [ev(1, started=pb.TurnStarted(turn_number=2, input="look")),
              ev(2, phase=pb.PhaseChanged(phase="EXECUTING", attempt=1)),
              ev(3, plan=pb.PlanGenerated(attempt=1, planner="pattern", skills=["dice-roller"],
                                          generation_ms=7)),
              ev(4, tool_started=pb.ToolStarted(tool_id="a", tool_path="x/y", attempt=1)),
              tool_output("a", {"type": "log", "level": "info", "message": "working"}),
              ev(6, tool_finished=pb.ToolFinished(tool_id="a", ok=True, duration_ms=5))]
    assert render_turn(events) == ""
    text = render_turn(events, verbose=True)
    for part in ("turn 2: look", "· EXECUTING (attempt 1)", "plan 1 by pattern in 7 ms: dice-roller",
                 "▸ a x/y", "a: working", "■ a ok in 5 ms"):
        assert part in text, text


def test_a_real_dice_roll_shows_formula_faces_and_total_once():
    out = real_roll("2d6+1", seed=7, reason="to pick the lock")
    payload = next(e for e in out if e["type"] == "ui_event")["payload"]
    summary = next(e for e in out if e["type"] == "done")["summary"]
    events = [ev(1, tool_started=pb.ToolStarted(tool_id="roll", tool_path="dice-roller/roll-dice",
                                                attempt=1)),
              *[tool_output("roll", e) for e in out if e["type"] != "done"],
              ev(9, tool_finished=pb.ToolFinished(
                  tool_id="roll", ok=True, duration_ms=30, attempt=1,
                  output_json=json.dumps({"ok": True, "summary": summary})))]
    text = render_turn(events)
    faces = ", ".join(str(f) for f in payload["dice"][0]["kept"])
    assert text == f"  ⚄ 2d6+1 → {payload['total']}  ({faces}, +1)  to pick the lock\n"


def test_a_dice_roll_is_found_in_the_tool_result_alone():
    # A client that sees only the finished tool (no ui_event) still shows the roll,
    # whether output_json carries the done summary or the roll itself.
    start = ev(1, tool_started=pb.ToolStarted(tool_id="d", tool_path="dice-roller/roll-dice"))
    by_summary = ev(2, tool_finished=pb.ToolFinished(
        tool_id="d", ok=True, output_json=json.dumps({"ok": True, "summary": "Rolled 1d20: 17"})))
    assert render_turn([start, by_summary]) == "  ⚄ 1d20 → 17\n"
    patch = real_roll("3d6", seed=1)[2]["patch"]
    by_roll = ev(2, tool_finished=pb.ToolFinished(tool_id="d", ok=True,
                                                  output_json=json.dumps(patch)))
    faces = ", ".join(map(str, patch["lastRoll"]["rolls"]))
    assert render_turn([start, by_roll]) == f"  ⚄ 3d6 → {patch['lastRoll']['total']}  ({faces})\n"
    assert dice_line({"summary": "nothing rolled"}) is None


def test_state_patches_are_compact_paths_and_values():
    assert format_patch({"hp": 7, "inventory": {"rope": True}, "mood": None}) == (
        "  ~ hp=7, inventory.rope=true, mood removed\n")
    many = {f"k{i}": i for i in range(9)}
    assert format_patch(many).endswith("k5=5, +3 more\n")
    assert "…" in format_patch({"note": "x" * 100})
    text = render_turn([tool_output("t", {"type": "state_patch", "patch": {"gold": 12}})])
    assert text == "  ~ gold=12\n"


def test_the_dice_rollers_last_roll_patch_is_not_repeated():
    out = real_roll("1d20", seed=3)
    events = [ev(1, tool_started=pb.ToolStarted(tool_id="r", tool_path="dice-roller/roll-dice")),
              *[tool_output("r", e) for e in out if e["type"] != "done"]]
    assert render_turn(events).count("\n") == 1
    assert "lastRoll.total=" in render_turn(events, verbose=True)


def test_errors_failed_tools_replans_and_fallbacks():
    events = [ev(1, tool_started=pb.ToolStarted(tool_id="lock", tool_path="locks/pick")),
              tool_output("lock", {"type": "error", "errorCode": "jammed",
                                   "errorMessage": "the lock is jammed"}),
              ev(3, tool_finished=pb.ToolFinished(tool_id="lock", ok=False, attempt=1,
                                                  error="the lock is jammed", duration_ms=12)),
              ev(4, tool_finished=pb.ToolFinished(tool_id="other", ok=False, attempt=1,
                                                  error="timed out", duration_ms=3000)),
              ev(5, replan=pb.Replan(attempt=1, reason="tool failed", failed_tools=["lock"],
                                     disabled_skills=["locks"])),
              ev(6, fallback=pb.Fallback(attempts=3, reason="every plan failed")),
              done(fallback=True, outcome="")]
    assert render_turn(events).splitlines() == [
        "  ✗ lock: jammed: the lock is jammed",
        "  ✗ lock failed after 12 ms",
        "  ✗ other failed after 3000 ms: timed out",
        "  ↻ attempt 1 failed: tool failed (failed lock; disabled locks); replanning",
        "  ! fallback after 3 attempt(s): every plan failed",
        "turn 1 · FALLBACK · 1234 ms (plan 100, execute 200, narrate 800, choices 50, store 20)",
    ]


def test_lines_never_glue_onto_streamed_narration_and_unstreamed_narration_is_shown():
    events = [ev(1, narration=pb.NarrationToken(text="You wait")),
              tool_output("t", {"type": "state_patch", "patch": {"hp": 3}}),
              ev(3, narration=pb.NarrationToken(text="Then more.")),
              done()]
    text = render_turn(events)
    assert text.startswith("You wait\n  ~ hp=3\nThen more.\nturn 1 · SUCCESS")
    assert render_turn([done(narration="All at once.")]).startswith("All at once.\nturn 1 ·")


def test_timings_unknown_keys_come_last_and_unknown_events_are_skipped():
    line = format_timings(pb.TurnDone(turn_number=4, outcome="SUCCESS",
                                      timings_ms={"zeta": 1, "plan": 2}))
    assert line == "turn 4 · SUCCESS (plan 2, zeta 1)\n"
    assert TurnRenderer().feed(pb.TurnEvent(turn_id="t")) == ""


def test_sessions_state_and_status_render():
    s = pb.Session(id="s1", campaign="demo", status="active", turns=2, title="Night",
                   last_narration="The fire dies down.", choices=["Sleep", "Keep watch"])
    assert format_session(s) == ("session s1 “Night” · campaign demo · active · 2 turns\n\n"
                                 "The fire dies down.\n\n  1. Sleep\n  2. Keep watch\n")
    state = pb.SessionState(session_id="s1", turns=2, state_json='{"hp": 9}')
    assert format_state(state) == 'state of s1 after 2 turns:\n{\n  "hp": 9\n}\n'
    status = pb.StatusResponse(version="0.1.0", actors=[pb.ActorStatus(name="planner", alive=True),
                                                        pb.ActorStatus(name="store", restarts=2)],
                               skill_process_limit=8, sessions=1, uptime_s=12.4)
    text = format_status(status)
    assert "narratoria daemon 0.1.0 · up 12 s" in text and "planner: alive" in text
    assert "store: DOWN, 2 restarts" in text and "skill processes 0/8" in text


def test_event_to_dict_parses_json_fields_and_keeps_every_field():
    doc = event_to_dict(ev(3, tool_finished=pb.ToolFinished(
        tool_id="r", ok=False, duration_ms=12, output_json='{"summary": "x"}')))
    assert doc["kind"] == "tool_finished" and doc["at_ms"] == 30 and doc["seq"] == 3
    finished = doc["tool_finished"]
    assert finished["ok"] is False and finished["duration_ms"] == 12  # int64 as a number
    assert finished["output"] == {"summary": "x"} and "output_json" not in finished
    assert event_to_dict(done())["done"]["timings_ms"]["total"] == 1234
    assert event_to_dict(done())["done"]["state"] is None  # empty *_json -> None
    bad = message_to_dict(pb.SessionState(state_json="{not json"))
    assert bad["state_json"] == "{not json"  # kept as text rather than lost
    assert message_to_dict(pb.SessionState(stats_json='{"hp": [0, 10]}'))["stats"] == {
        "hp": [0, 10]}


# -- play's input handling -----------------------------------------------------------------

def test_play_reads_numbers_as_choices_and_the_rest_as_text():
    menu = ["Open", "Leave"]
    assert parse_action("2", menu) == Action("turn", choice=2)
    assert parse_action("  I open it ", menu) == Action("turn", text="I open it")
    assert parse_action("3", menu).kind == "invalid" and "1..2" in parse_action("3", menu).message
    assert parse_action("42", []) == Action("turn", text="42")  # no menu: a number is text
    assert parse_action("/quit", menu).kind == "quit" and parse_action("/exit", []).kind == "quit"
    assert [parse_action(c, menu).kind for c in ("/state", "/help", "/choices", "", "/x")] == [
        "state", "help", "choices", "none", "invalid"]
    assert auto_action([]) == Action("turn", text="look around")
    assert auto_action(menu) == Action("turn", choice=1)


# -- addressing --------------------------------------------------------------------------

@pytest.fixture
def short_dir() -> Iterator[Path]:
    # A unix socket path must fit in 107 bytes; pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="nrt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_missing_socket_says_the_daemon_is_not_running_and_how_to_start_it(
        short_dir, monkeypatch):
    sock = short_dir / "daemon.sock"
    monkeypatch.setenv("NARRATORIA_ADDRESS", f"unix://{sock}")
    with NarratoriaClient() as client:
        assert client.endpoint.unix_path == sock
        with pytest.raises(ClientError) as info:
            client.status()
    assert info.value.code == "UNAVAILABLE"
    assert str(info.value) == (f"UNAVAILABLE: the daemon is not running at {sock} (no socket "
                               f"there); start it with `narratoria serve --socket {sock}`")
    with NarratoriaClient(f"unix://{sock}") as client, pytest.raises(ClientError) as info:
        client.wait_ready(0.3)
    assert info.value.code == "UNAVAILABLE" and "within 0.3s" in info.value.message


def test_the_default_socket_suggests_plain_narratoria_serve(monkeypatch):
    monkeypatch.delenv("NARRATORIA_ADDRESS", raising=False)
    with NarratoriaClient() as client, pytest.raises(ClientError) as info:
        list(client.turn("s1", text="hello"))
    assert info.value.message.endswith("start it with `narratoria serve`")


def test_bad_addresses_and_turn_arguments_are_refused():
    with NarratoriaClient("unix:///tmp/nowhere.sock") as client:
        with pytest.raises(ClientError) as info:
            client.turn("s1", text="a", choice=1)
        assert info.value.code == "INVALID_ARGUMENT"
        with pytest.raises(ClientError):
            client.turn("s1")


# -- against a fake daemon ---------------------------------------------------------------

def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True, input=stdin,
                          timeout=60, env=os.environ.copy())


def test_daemon_commands_without_a_daemon_fail_in_one_line(short_dir, monkeypatch):
    monkeypatch.setenv("NARRATORIA_ADDRESS", f"unix://{short_dir / 'none.sock'}")
    for args in (("status",), ("session", "list"), ("turn", "--session", "s", "x"),
                 ("play", "--auto")):
        proc = cli(*args)
        assert proc.returncode == 1, args
        assert proc.stderr.count("\n") == 1 and "not running" in proc.stderr, proc.stderr
        assert "narratoria serve" in proc.stderr


def test_cli_argument_errors_exit_2():
    cases = {
        ("turn", "--session", "s", "text", "--choice", "1"): "exactly one of them",
        ("turn", "--session", "s"): "exactly one of them",
        ("turn", "hello"): "--session ID",
        ("turn", "--session", "s", "--choice", "0"): "numbered from 1",
        ("turn", "--local", "hi", "--choice", "1"): "--local takes TEXT only",
        ("turn", "--local"): "needs the player's TEXT",
        ("turn", "--session", "s", "x", "--state", "f.json"): "--state only apply",
        ("turn", "--session", "s", "x", "--execute-only"): "applies to a --plan turn",
        ("play", "--turns", "0"): "--turns",
        ("play", "--session", "s", "--campaign", "c"): "--campaign",
    }
    for args, message in cases.items():
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    bad_address = subprocess.run([str(NARRATORIA), "status"], capture_output=True, text=True,
                                 env={**os.environ, "NARRATORIA_ADDRESS": "nonsense"}, timeout=60)
    assert bad_address.returncode == 2 and "neither unix:PATH nor HOST:PORT" in bad_address.stderr


def test_npc_knowledge_shows_in_verbose_mode_only():
    event = pb.TurnEvent(turn_id="t", seq=2, knowledge=pb.NpcKnowledge(npcs=[pb.NpcContext(
        npc_id="mara", name="Mara", facts=["The ferry leaves at dawn."], memories=["a", "b"])]))
    assert TurnRenderer(verbose=True).feed(event) == "  · Mara knows 1 fact(s), 2 memory(ies)\n"
    assert TurnRenderer().feed(event) == ""
