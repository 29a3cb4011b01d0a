"""Plan JSON decoding and validation."""

from __future__ import annotations

import json

import pytest

from narratoria.runtime.skillrun.plan import (
    ExecutionResult,
    Plan,
    PlanError,
    RetryPolicy,
    ToolInvocation,
    decode_plan,
    encode,
    load_plan,
    validate_plan,
)


def plan_doc(*tools, **extra) -> bytes:
    return json.dumps({"requestId": "p1", "tools": list(tools), **extra}).encode()


def tool(tid: str, *deps: str, **extra) -> dict:
    return {"toolId": tid, "toolPath": "echo/echo", "dependencies": list(deps), **extra}


def test_defaults_follow_the_spec():
    plan = decode_plan(plan_doc(tool("a")))
    t = plan.tools[0]
    assert plan.parallel is False and plan.disabledSkills == []
    assert plan.metadata.generationAttempt == 1 and plan.metadata.parentPlanId is None
    assert t.input == {} and t.required is True and t.is_async is False
    assert t.retryPolicy is None
    assert RetryPolicy().maxRetries == 3 and RetryPolicy().backoffMs == 100


def test_wire_names_are_camel_case_and_async_round_trips():
    plan = decode_plan(plan_doc(tool("a", **{"async": True, "retryPolicy": {"maxRetries": 1}})))
    assert plan.tools[0].is_async is True
    doc = json.loads(encode(plan))
    assert doc["tools"][0]["async"] is True
    assert doc["tools"][0]["retryPolicy"] == {"maxRetries": 1}


def test_backoff_formula():
    policy = RetryPolicy(maxRetries=3, backoffMs=100)
    assert [policy.delay_s(n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]


def test_syntax_error_names_source_line_and_column():
    with pytest.raises(PlanError) as info:
        decode_plan(b'{\n  "requestId": "p",\n  "tools": [,]\n}', "demo.json")
    assert "demo.json" in str(info.value) and "line 3" in str(info.value)


@pytest.mark.parametrize("doc,field", [
    (plan_doc(tool("a"), parallel="yes"), "$.parallel"),
    (plan_doc({"toolId": "", "toolPath": "x"}), "$.tools[0].toolId"),
    (plan_doc({"toolId": "a"}), "toolPath"),
    (plan_doc(tool("a", input=[1])), "$.tools[0].input"),
    (json.dumps({"tools": []}).encode(), "requestId"),
    (plan_doc(tool("a"), metadata={"generationAttempt": 6}), "$.metadata.generationAttempt"),
])
def test_type_errors_name_the_field(doc: bytes, field: str):
    with pytest.raises(PlanError) as info:
        decode_plan(doc, "p.json")
    assert field in str(info.value)


def test_an_empty_plan_needs_a_narrative():
    with pytest.raises(PlanError):
        decode_plan(plan_doc())
    assert decode_plan(plan_doc(narrative="Nothing happens.")).tools == []


def test_duplicate_ids_and_unknown_dependencies_are_rejected():
    with pytest.raises(PlanError, match="duplicate toolId 'a'"):
        decode_plan(plan_doc(tool("a"), tool("a")))
    with pytest.raises(PlanError, match="unknown toolId 'ghost'") as info:
        decode_plan(plan_doc(tool("a", "ghost")))
    assert info.value.code == "unknown_dependency"


@pytest.mark.parametrize("tools", [
    [tool("a", "a")],
    [tool("a", "b"), tool("b", "a")],
    [tool("a", "c"), tool("b", "a"), tool("c", "b"), tool("d")],
])
def test_cycles_direct_or_transitive_are_circular_dependency(tools):
    with pytest.raises(PlanError) as info:
        decode_plan(plan_doc(*tools))
    assert info.value.category == "circular_dependency"


def test_topological_order_is_deterministic_and_respects_dependencies():
    plan = decode_plan(plan_doc(tool("d", "b", "c"), tool("c", "a"), tool("b", "a"), tool("a")))
    assert validate_plan(plan) == ["a", "c", "b", "d"]


def test_load_plan_reports_unreadable_files(tmp_path):
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.json")


def test_execution_result_serialises_with_spec_field_names():
    doc = json.loads(encode(ExecutionResult(planId="p", success=True, canReplan=False)))
    for key in ("planId", "success", "canReplan", "failedTools", "disabledSkills", "toolResults",
                "aggregatedState", "aggregatedAssets", "executionTimeMs", "attemptNumber"):
        assert key in doc
