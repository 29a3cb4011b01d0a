"""The `narratoria` command, run as a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILTIN_SKILLS, FIXTURE_SKILLS, REPO

NARRATORIA = Path(sys.executable).parent / "narratoria"


def cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def write_plan(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def test_help_and_version():
    out = cli("--help", check=True).stdout
    for command in ("plan", "skills", "turn", "bench", "status", "session", "play", "serve"):
        assert command in out
    assert cli("--version", check=True).stdout.startswith("narratoria ")


def test_plan_run_json_prints_the_execution_result(tmp_path):
    plan = write_plan(tmp_path, {"requestId": "cli-1", "tools": [
        {"toolId": "e", "toolPath": "echo/echo", "input": {"key": "k", "value": 1}}]})
    proc = cli("plan", "run", str(plan), "--skills-dir", str(FIXTURE_SKILLS), "--json", check=True)
    doc = json.loads(proc.stdout)
    assert doc["planId"] == "cli-1" and doc["success"] is True
    assert doc["aggregatedState"]["k"] == 1 and doc["toolResults"][0]["state"] == "success"


def test_the_bundled_demo_plan_runs():
    proc = cli("plan", "run", str(REPO / "deploy" / "examples" / "demo-plan.json"), check=True)
    assert "succeeded" in proc.stdout and "lastRoll" in proc.stdout


def test_plan_run_reports_failures_and_bad_plans_clearly(tmp_path):
    plan = write_plan(tmp_path, {"requestId": "cli-2", "tools": [
        {"toolId": "c", "toolPath": "hostile/crash"}]})
    proc = cli("plan", "run", str(plan), "--skills-dir", str(FIXTURE_SKILLS))
    assert proc.returncode == 1 and "process_error" in proc.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"requestId": "x", "tools": [{"toolId": 3, "toolPath": "a"}]}')
    proc = cli("plan", "run", str(bad))
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "$.tools[0].toolId" in proc.stderr
    proc = cli("plan", "run", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "cannot read plan" in proc.stderr


def test_skills_list_json_shows_skills_scripts_and_skipped(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n")
    proc = cli("skills", "list", "--skills-dir", str(FIXTURE_SKILLS), "--skills-dir",
               str(tmp_path), "--json", check=True)
    doc = json.loads(proc.stdout)
    names = {s["name"]: s for s in doc["skills"]}
    assert "roll-dice" in names["dice-roller"]["scripts"] and "echo" in names
    assert any("broken" in s["path"] and "description" in s["reason"] for s in doc["skipped"])
    human = cli("skills", "list", "--skills-dir", str(tmp_path), check=True).stdout
    assert "dice-roller/roll-dice" in human and "skipped:" in human


def test_skills_check_passes_the_dice_roller():
    proc = cli("skills", "check", str(BUILTIN_SKILLS / "dice-roller"), "--json", check=True)
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and doc["skills"][0]["probes"]


def test_skills_check_reports_every_violation_of_a_hostile_skill():
    proc = cli("skills", "check", str(FIXTURE_SKILLS / "hostile"), "--timeout", "2", "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    findings = {(p["script"], f["message"]) for p in doc["skills"][0]["probes"]
                for f in p["findings"]}
    text = "\n".join(f"{s}: {m}" for s, m in findings)
    for expected in ("hostile/garbage: stdout line 2: invalid JSON",
                     "hostile/unknown-type: stdout line 2: unknown event type",
                     "hostile/no-done: no done event",
                     "hostile/exit-after-done: exit code 3",
                     "hostile/hang: did not finish within 2s",
                     "hostile/crash: a Python traceback",
                     "hostile/bad-event: stdout line 1",
                     "hostile/events-after-done: stdout line 2: event after done"):
        assert expected in text, f"{expected!r} not in\n{text}"


def test_turn_plays_a_local_turn_and_logs_analytics(tmp_path):
    log = tmp_path / "analytics.jsonl"
    proc = cli("turn", "--local", "I roll 2d6 to climb the wall", "--analytics-log", str(log),
               "--json", check=True)
    doc = json.loads(proc.stdout)
    assert doc["state"] == "SUCCESS" and doc["result"]["aggregatedState"]["lastRoll"]
    assert json.loads(log.read_text().splitlines()[0])["outcome"] == "success"
    human = cli("turn", "--local", "I roll 1d20", "--analytics-log", str(log), check=True)
    assert "lastRoll" in human.stdout


def test_turn_without_local_or_session_explains_both():
    proc = cli("turn", "I roll 2d6")
    assert proc.returncode == 2
    assert "--session ID" in proc.stderr and "--local" in proc.stderr


def test_bench_protocol_json_reports_against_a_same_run_baseline(tmp_path):
    out = tmp_path / "BENCH.md"
    proc = cli("bench", "protocol", "--iterations", "3", "--parallel", "2", "--json",
               "--write", str(out), check=True)
    doc = json.loads(proc.stdout)
    assert doc["bareSpawnMs"]["median"] > 0 and doc["singleToolPlanMs"]["median"] > 0
    assert "planOverheadPct" in doc and doc["parallelPlan"]["tools"] == 2
    assert "bare `python -c pass` spawn" in out.read_text()


def test_bench_store_json_small(tmp_path):
    out = tmp_path / "BENCH.md"
    proc = cli("bench", "store", "--memories", "200", "--queries", "5", "--no-model", "--json",
               "--write", str(out), check=True)
    doc = json.loads(proc.stdout)
    assert doc["engine"]["insertsPerS"] > 0 and doc["engine"]["queryStateMs"]["n"] == 5
    assert "query_state" in out.read_text()


@pytest.mark.model
def test_bench_store_with_the_model_reports_the_fp32_baseline(tmp_path):
    out = tmp_path / "BENCH.md"
    proc = cli("bench", "store", "--memories", "50", "--records", "60", "--lore", "20",
               "--queries", "3", "--json", "--write", str(out), check=True)
    p = json.loads(proc.stdout)["persistence"]
    assert p["loreChunks"] == 20 and p["embedPrecision"] in ("fp32", "bf16")
    assert p["loreIngestS"] > 0 and p["loreEmbedOnlyS"] > 0 and p["loreEmbedFp32S"] > 0
    assert "at fp32" in out.read_text()


@pytest.mark.parametrize("bad", ["0", "two"])
def test_serve_refuses_a_thread_count_that_is_not_positive(bad):
    done = cli("serve", "--threads", bad, "--socket", "/nonexistent/never.sock")
    assert done.returncode == 2
    assert "--threads" in done.stderr


def test_session_branch_and_new_state_check_their_arguments_before_calling_the_daemon(tmp_path):
    assert "branch" in cli("session", "--help", check=True).stdout
    help_text = cli("session", "branch", "--help", check=True).stdout
    assert "--at-scene" in help_text and "--session" in help_text
    zero = cli("session", "branch", "--session", "s1", "--at-scene", "0")
    assert zero.returncode == 2 and "--at-scene" in zero.stderr
    assert cli("session", "branch").returncode == 2  # --session is required
    missing = cli("session", "new", "--state", str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
