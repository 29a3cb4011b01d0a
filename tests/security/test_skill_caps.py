"""Limits have ceilings, against real daemons and real skills.

A SKILL.md may set its own kernel limits and timeout, and a plan its tools' and its own
timeout; the daemon caps them all (``runtime/skillrun/limits.py`` ``SkillCaps``: 4 GiB, 300 CPU
seconds, 4096 files, 300 s a tool, 600 s a plan by default; ``narratoria serve
--max-skill-memory-mb`` and friends raise them). Past a cap the tool (or the plan) is
refused before anything runs, with an error naming the skill or tool, what it asked for,
the cap and the flag. The test skills (fixtures/skill-caps) each leave a marker when they
run and report the kernel limits they got.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from skill_plans import finished, run_plan, tool_events
from support.daemon import Daemon, kinds

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "skill-caps"
NARRATORIA = Path(sys.executable).parent / "narratoria"
HOUR_MS = 3_600_000


def install(root: Path) -> Path:
    for skill in FIXTURES.iterdir():
        shutil.copytree(skill, root / skill.name, dirs_exist_ok=True)
    return root


def ran(root: Path) -> set[str]:
    found = {p.name.removeprefix("ran-") for p in root.glob("*/data/ran-*")}
    for marker in root.glob("*/data/ran-*"):
        marker.unlink()
    return found


def greedy_tools() -> list[dict]:
    def one(tool_id: str, skill: str, **extra: object) -> dict:
        return {"toolId": tool_id, "toolPath": f"{skill}/run", "required": False,
                "retryPolicy": {"maxRetries": 0}, **extra}
    return [one("memory", "greedy-memory"), one("cpu", "greedy-cpu"),
            one("skill-timeout", "greedy-timeout"), one("tool-timeout", "modest", timeoutMs=HOUR_MS),
            one("fine", "modest")]


def test_what_a_skill_or_a_plan_asks_past_the_caps_is_refused(pattern_daemon):
    root = install(pattern_daemon.skills_root)
    ran(root)
    with pattern_daemon.client() as client:
        session = client.create_session(title="greedy")
        events = run_plan(client, session.id, *greedy_tools())
        whole = list(client.turn(session.id, plan_json=json.dumps({
            "requestId": "an-hour", "narrative": "An hour.", "timeoutMs": HOUR_MS,
            "tools": [{"toolId": "p", "toolPath": "modest/run"}]}), execute_only=True))
    assert ran(root) == {"modest"}  # only the tool within every cap
    done = finished(events)
    assert done["fine"].ok
    expected = {
        "memory": ["skill 'greedy-memory'", "limits.memoryMb 65536 MB", "cap of 4096 MB",
                   "--max-skill-memory-mb"],
        "cpu": ["skill 'greedy-cpu'", "limits.cpuSeconds 100000 s", "cap of 300 s",
                "--max-skill-cpu-s"],
        "skill-timeout": ["skill 'greedy-timeout'", "timeoutMs 3600000", "cap of 300000 ms",
                          "--max-tool-timeout-s"],
        "tool-timeout": ["tool 'tool-timeout'", "timeoutMs 3600000", "cap of 300000 ms",
                         "--max-tool-timeout-s"],
    }
    for tool_id, parts in expected.items():
        error = done[tool_id].error
        assert not done[tool_id].ok and all(p in error for p in parts), (tool_id, error)
    started = {e.tool_started.tool_id for e in events if e.WhichOneof("event") == "tool_started"}
    assert started == {"fine"}
    # A plan asking an hour for itself is refused whole: every attempt, then the fallback.
    reasons = [e.replan.reason for e in whole if e.WhichOneof("event") == "replan"]
    assert reasons and all("timeoutMs: the plan asks for 3600000 ms, above the daemon's cap "
                           "of 600000 ms" in r and "--max-plan-timeout-s" in r
                           for r in reasons), reasons
    assert "tool_started" not in kinds(whole) and kinds(whole)[-1] == "done"


def test_the_serve_flags_raise_the_caps(tmp_path):
    root = install(tmp_path / "skills")
    d = Daemon("--planner", "pattern", "--embedding-backend", "hash", "--skills-dir", str(root),
               "--max-skill-memory-mb", "65536", "--max-skill-cpu-s", "100000",
               "--max-tool-timeout-s", "3600", "--max-plan-timeout-s", "3600")
    try:
        with d.client() as client:
            session = client.create_session(title="generous")
            events = run_plan(client, session.id, *greedy_tools())
            whole = list(client.turn(session.id, plan_json=json.dumps({
                "requestId": "an-hour", "narrative": "An hour.", "timeoutMs": HOUR_MS,
                "tools": [{"toolId": "p", "toolPath": "modest/run"}]}), execute_only=True))
    finally:
        assert d.stop() == 0
    done = finished(events)
    assert all(r.ok for r in done.values()), {k: v.error for k, v in done.items()}
    assert finished(whole)["p"].ok
    assert ran(root) == {"greedy-memory", "greedy-cpu", "greedy-timeout", "modest"}

    def limits(tool_id: str) -> dict:
        [log] = [e for e in tool_events(events, tool_id) if e.get("message") == "limits"]
        return log["fields"]
    # What the skills asked for is what the kernel gave them.
    assert limits("memory")["AS"] == 65536 * 1024 * 1024
    assert limits("cpu")["CPU"] == 100_000


def test_skills_check_warns_of_what_a_daemon_would_refuse(tmp_path):
    skill = install(tmp_path) / "greedy-memory"  # the check runs it: its marker goes there
    proc = subprocess.run([str(NARRATORIA), "skills", "check", str(skill), "--json"],
                          capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    [skill] = report["skills"]
    warnings = [f["message"] for f in skill["findings"] if f["severity"] == "warning"]
    assert any("limits.memoryMb asks for 65536 MB, above the daemon's default cap of 4096 MB"
               in w and "--max-skill-memory-mb" in w for w in warnings), warnings
