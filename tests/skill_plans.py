"""Helpers for skill tests: fixed plans through a real daemon, and scripts run alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path


def run_plan(client, session_id: str, *tools: dict, narrative: str = "So be it.") -> list:
    """The events of an execute-only turn running ``tools`` as one plan."""
    plan = {"requestId": f"test-{uuid.uuid4().hex[:8]}", "narrative": narrative,
            "tools": list(tools)}
    return list(client.turn(session_id, plan_json=json.dumps(plan), execute_only=True))


def finished(events: list) -> dict[str, object]:
    """The first tool_finished of each tool (a replan may run others after it)."""
    out: dict[str, object] = {}
    for e in events:
        if e.WhichOneof("event") == "tool_finished":
            out.setdefault(e.tool_finished.tool_id, e.tool_finished)
    return out


def tool_events(events: list, tool_id: str) -> list[dict]:
    return [json.loads(e.tool_event.event_json) for e in events
            if e.WhichOneof("event") == "tool_event" and e.tool_event.tool_id == tool_id]


def run_script(path: Path, stdin: bytes, **env: str) -> list[dict]:
    """A skill script run alone (no daemon address or token), its events parsed: it must
    exit 0 and never print a traceback, whatever it was given."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("NARRATORIA_ADDRESS", "NARRATORIA_SKILL_TOKEN")}
    proc = subprocess.run([str(path)], input=stdin, capture_output=True, timeout=60,
                          env={**base, "PYTHONDONTWRITEBYTECODE": "1", **env})
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr, proc.stderr
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def failed_on_bad_input(client, session_id: str, tool: dict, field: str) -> list[dict]:
    """Runs ``tool`` (given bad input) alone and checks how it failed: an ``error`` event
    ``invalid_input`` naming ``field``, and only failed ``done``s. Returns its events."""
    events = run_plan(client, session_id, {**tool, "required": False})
    result = finished(events)[tool["toolId"]]
    assert not result.ok and field in result.error
    emitted = tool_events(events, tool["toolId"])
    errors = [ev for ev in emitted if ev["type"] == "error"]
    assert errors and errors[0]["errorCode"] == "invalid_input"
    assert errors[0]["details"]["field"] == field
    dones = [ev["ok"] for ev in emitted if ev["type"] == "done"]
    assert dones and not any(dones)
    return emitted


def skills_check(skill: Path, **env: str) -> dict:
    """``narratoria skills check SKILL --json`` must pass; returns the skill's report."""
    narratoria = Path(sys.executable).parent / "narratoria"
    proc = subprocess.run([str(narratoria), "skills", "check", str(skill), "--json"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True, report
    [checked] = report["skills"]
    return checked


def run_by_tool(client, session_id: str, tools: list[dict],
                narrative: str = "So be it.") -> tuple[dict, dict]:
    """Run ``tools`` as one execute-only plan; return ({toolId: result}, final state).

    A result holds ``ok``, ``summary`` and ``error`` (from tool_finished) and ``events``
    (the tool's protocol events, in order).
    """
    events = run_plan(client, session_id, *tools, narrative=narrative)
    kinds = [e.WhichOneof("event") for e in events]
    assert "tool_finished" in kinds, kinds
    results: dict[str, dict] = {t["toolId"]: {"events": []} for t in tools}
    for e in events:
        kind = e.WhichOneof("event")
        if kind == "tool_event":
            results[e.tool_event.tool_id]["events"].append(json.loads(e.tool_event.event_json))
        elif kind == "tool_finished":
            f = e.tool_finished
            output = json.loads(f.output_json) if f.output_json else None
            results[f.tool_id].update(ok=f.ok, error=f.error,
                                      summary=(output or {}).get("summary", ""))
    [done] = [e.done for e in events if e.WhichOneof("event") == "done"]
    return results, json.loads(done.state_json)


def install_skill(root: Path, name: str, script: str, code: str) -> str:
    """A one-script skill ``name`` in the skill root ``root`` (a daemon's ``--skills-dir``:
    it is picked up at the next plan); returns its ``skill/script`` name for plans."""
    folder = root / name
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A test's own skill.\n---\n")
    path = folder / "scripts" / script
    path.write_text(code)
    path.chmod(0o755)
    return f"{name}/{script}"
