"""The original contracts the Execution Result and the shipped plan keep
(docs/plans.md; the spec's execution-result schema): optional objects are absent,
never ``null``; every plan that decodes gets a result document, a cyclic one
included; the example plan's ``requestId`` is a UUID. Run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import msgspec

from narratoria.runtime.skillrun.plan import ExecutionResult, ToolResult, encode

from conftest import FIXTURE_SKILLS, REPO

NARRATORIA = Path(sys.executable).parent / "narratoria"
DEMO_PLAN = REPO / "deploy" / "examples" / "demo-plan.json"
# Keys the schema gives an object type or leaves out: a null there breaks its readers.
OBJECT_OR_ABSENT = ("output", "error")


def plan_run(plan: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), "plan", "run", str(plan), "--json", *extra],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())


def write_plan(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def assert_no_null_objects(doc: dict[str, Any]) -> None:
    assert "error" not in doc or isinstance(doc["error"], dict), doc
    for result in doc["toolResults"]:
        for key in OBJECT_OR_ABSENT:
            assert key not in result or isinstance(result[key], dict), (key, result)
        # The counts and collections stay, whatever their value.
        assert {"toolId", "state", "events", "executionTimeMs", "retryCount"} <= set(result)


def test_a_successful_plan_writes_no_null_error_or_output(tmp_path: Path):
    plan = write_plan(tmp_path, {"requestId": str(uuid.uuid4()), "tools": [
        {"toolId": "e", "toolPath": "echo/echo", "input": {"key": "k", "value": 1}}]})
    proc = plan_run(plan, "--skills-dir", str(FIXTURE_SKILLS))
    assert proc.returncode == 0, proc.stderr
    assert "null" not in proc.stdout.replace('"parentPlanId": null', ""), proc.stdout
    doc = json.loads(proc.stdout)
    assert_no_null_objects(doc)
    [echo] = doc["toolResults"]
    assert echo["output"]["summary"] == "echoed k" and "error" not in echo and "error" not in doc


def test_failed_and_skipped_tools_carry_an_error_object_and_no_output_key(tmp_path: Path):
    plan = write_plan(tmp_path, {"requestId": str(uuid.uuid4()), "tools": [
        {"toolId": "c", "toolPath": "hostile/crash", "retryPolicy": {"maxRetries": 0}},
        {"toolId": "after", "toolPath": "echo/echo", "dependencies": ["c"],
         "input": {"key": "k", "value": 1}}]})
    proc = plan_run(plan, "--skills-dir", str(FIXTURE_SKILLS))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert_no_null_objects(doc)
    crashed, skipped = doc["toolResults"]
    assert crashed["state"] == "failed" and crashed["error"]["category"] == "process_error"
    assert skipped["state"] == "skipped" and "output" not in skipped
    assert skipped["error"]["code"] == "dependency_failed"


def test_a_result_read_back_has_none_where_the_json_has_no_key():
    # Readers in this process see None for an absent key, as before.
    doc = encode(ExecutionResult(planId="p", success=True, canReplan=False,
                                 toolResults=[ToolResult(toolId="a", state="skipped")]))
    assert b"null" not in doc
    again = msgspec.json.decode(doc, type=ExecutionResult)
    assert again.error is None and again.toolResults[0].output is None
    assert again.toolResults[0].error is None and again.failedTools == []


def test_plan_run_json_prints_a_result_document_for_a_cyclic_plan(tmp_path: Path):
    plan_id = str(uuid.uuid4())
    plan = write_plan(tmp_path, {"requestId": plan_id, "tools": [
        {"toolId": "a", "toolPath": "echo/echo", "dependencies": ["c"]},
        {"toolId": "b", "toolPath": "echo/echo", "dependencies": ["a"]},
        {"toolId": "c", "toolPath": "echo/echo", "dependencies": ["b"]}]})
    proc = plan_run(plan, "--skills-dir", str(FIXTURE_SKILLS))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["planId"] == plan_id and doc["success"] is False and doc["canReplan"] is True
    assert doc["error"]["category"] == "circular_dependency"
    assert "circular dependency" in doc["error"]["message"]
    assert [r["state"] for r in doc["toolResults"]] == ["skipped"] * 3
    assert all(r["error"]["category"] == "circular_dependency" for r in doc["toolResults"])
    assert_no_null_objects(doc)


def test_other_unrunnable_graphs_get_a_result_document_too(tmp_path: Path):
    plan = write_plan(tmp_path, {"requestId": str(uuid.uuid4()), "tools": [
        {"toolId": "a", "toolPath": "echo/echo", "dependencies": ["ghost"]}]})
    proc = plan_run(plan, "--skills-dir", str(FIXTURE_SKILLS))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["error"]["code"] == "unknown_dependency"
    # A document that is no plan at all is still refused with the field it breaks.
    bad = tmp_path / "bad.json"
    bad.write_text('{"requestId": "x", "tools": [{"toolId": 3, "toolPath": "a"}]}')
    proc = plan_run(bad)
    assert proc.returncode == 2 and proc.stdout == "" and "$.tools[0].toolId" in proc.stderr


def test_the_shipped_example_plan_has_a_uuid_request_id_and_runs():
    request_id = json.loads(DEMO_PLAN.read_text())["requestId"]
    assert str(uuid.UUID(request_id)) == request_id
    proc = plan_run(DEMO_PLAN)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["planId"] == request_id and doc["success"] is True
    assert_no_null_objects(doc)
