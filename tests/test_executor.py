"""The plan executor against real subprocess skills."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from conftest import FIXTURE_SKILLS, process_alive
from narratoria.runtime.skillrun.executor import DEPENDENCY_RESULTS_KEY, ExecutorConfig, PlanExecutor
from narratoria.runtime.skillrun.plan import Plan, RetryPolicy, ToolInvocation
from narratoria.runtime.skills import Health, SkillRegistry
from narratoria.runtime.state import SessionState, StatRange

NO_RETRY = RetryPolicy(maxRetries=0, backoffMs=0)


@pytest.fixture(scope="module")
def registry() -> SkillRegistry:
    return SkillRegistry([FIXTURE_SKILLS])


def t(tool_id: str, path: str, *deps: str, **kw) -> ToolInvocation:
    kw.setdefault("retryPolicy", NO_RETRY)
    return ToolInvocation(toolId=tool_id, toolPath=path, dependencies=list(deps), **kw)


def run(registry, *tools, state=None, events=None, config=ExecutorConfig(), **plan_kw):
    executor = PlanExecutor(registry, config)
    plan = Plan(requestId="plan-1", tools=list(tools), **plan_kw)
    sink = events.append if events is not None else None
    return asyncio.run(executor.execute(plan, state, on_event=sink)), executor


def by_id(result):
    return {r.toolId: r for r in result.toolResults}


def test_a_single_tool_plan_aggregates_state_assets_and_ui_events(registry):
    result, _ = run(registry, t("a", "echo/echo", input={"key": "k", "value": 7, "asset": True}))
    assert result.success and not result.canReplan and result.failedTools == []
    assert result.aggregatedState["k"] == 7
    (asset,) = result.aggregatedAssets
    assert asset.pop("receivedAtMs") >= 0
    assert asset == {"toolId": "a", "assetId": "k-asset", "kind": "image",
                     "mediaType": "image/png", "path": "/tmp/k.png"}
    assert result.uiEvents[0]["event"] == "echoed" and result.uiEvents[0]["toolId"] == "a"
    tr = by_id(result)["a"]
    assert tr.state == "success" and tr.output == {"ok": True, "summary": "echoed k"}
    assert tr.skill == "echo" and tr.exitCode == 0
    assert [e["type"] for e in tr.events] == ["log", "state_patch", "asset", "ui_event", "done"]
    assert all("receivedAtMs" in e for e in tr.events)


def test_state_is_merged_onto_the_given_session_without_touching_it(registry):
    session = SessionState({"keep": 1, "player": {"stats": {"hp": 5}}})
    session.declare_stat("player.stats.hp", StatRange(0, 10))
    result, _ = run(registry,
                    t("a", "echo/echo", input={"key": "player", "value": {"stats": {"hp": 99}}}),
                    state=session)
    assert result.aggregatedState["keep"] == 1
    assert result.aggregatedState["player"]["stats"]["hp"] == 10  # clamped to the declared range
    assert session.tree == {"keep": 1, "player": {"stats": {"hp": 5}}}


def test_diamond_runs_each_tool_once_after_its_dependencies(registry, tmp_path):
    events = []
    tools = [
        t("A", "echo/echo", input={"key": "A", "value": 1}),
        t("B", "echo/echo", "A", input={"key": "B", "value": 2}, is_async=True),
        t("C", "echo/echo", "A", input={"key": "C", "value": 3}, is_async=True),
        t("D", "echo/echo", "B", "C", input={"key": "D", "value": 4}),
    ]
    for parallel in (False, True):
        events.clear()
        result, _ = run(registry, *tools, events=events, parallel=parallel)
        assert result.success
        started = [e.tool_id for e in events if e.kind == "tool_started"]
        finished = [e.tool_id for e in events if e.kind == "tool_finished"]
        assert sorted(started) == ["A", "B", "C", "D"]  # each exactly once
        assert started[0] == "A" and started[-1] == "D"
        assert finished.index("B") < started.index("D") and finished.index("C") < started.index("D")
        deps = result.aggregatedState["deps"]["D"]
        assert set(deps) == {"B", "C"}
        assert deps["B"] == {"ok": True, "summary": "echoed B", "statePatches": [
            {"B": 2, "seen": {"B": True}, "deps": {"B": {"A": {
                "ok": True, "summary": "echoed A",
                "statePatches": [{"A": 1, "seen": {"A": True}, "deps": {"A": {}}}]}}}}]}


def _overlap(runs: dict) -> bool:
    spans = sorted(runs.values())
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def test_parallel_async_tools_overlap_and_respect_the_concurrency_limit(registry):
    tools = [t(f"s{i}", "echo/sleep", input={"seconds": 0.4, "key": f"s{i}"}, is_async=True)
             for i in range(4)]
    result, _ = run(registry, *tools, parallel=True, config=ExecutorConfig(max_concurrency=2))
    runs = result.aggregatedState["runs"]
    assert result.success and _overlap(runs)
    # never more than two at once: at each start, count runs in flight
    for key, (start, _end) in runs.items():
        in_flight = sum(1 for s, e in runs.values() if s <= start < e)
        assert in_flight <= 2, (key, runs)


def test_sequential_when_not_parallel_or_not_async(registry):
    tools = [t(f"s{i}", "echo/sleep", input={"seconds": 0.2, "key": f"s{i}"}, is_async=True)
             for i in range(3)]
    result, _ = run(registry, *tools, parallel=False, config=ExecutorConfig(max_concurrency=4))
    assert not _overlap(result.aggregatedState["runs"])
    sync_tools = [t(f"s{i}", "echo/sleep", input={"seconds": 0.2, "key": f"s{i}"})
                  for i in range(3)]
    result, _ = run(registry, *sync_tools, parallel=True, config=ExecutorConfig(max_concurrency=4))
    assert not _overlap(result.aggregatedState["runs"])


def test_retries_with_exponential_backoff_then_success(registry, tmp_path):
    counter = tmp_path / "calls"
    result, executor = run(registry, t("f", "echo/flaky",
                                       input={"counterFile": str(counter), "failures": 2},
                                       retryPolicy=RetryPolicy(maxRetries=3, backoffMs=100)))
    calls = [float(x) for x in counter.read_text().split()]
    assert result.success and len(calls) == 3
    tr = by_id(result)["f"]
    assert tr.retryCount == 2
    assert calls[1] - calls[0] >= 0.1 and calls[2] - calls[1] >= 0.2
    # a failed attempt's patch never reaches the state
    assert "flakyFailed" not in result.aggregatedState and result.aggregatedState["flaky"] == 3
    assert executor.health.state("echo") is Health.HEALTHY


def test_retries_are_exhausted_after_max_retries(registry, tmp_path):
    counter = tmp_path / "calls"
    result, _ = run(registry, t("f", "echo/flaky",
                                input={"counterFile": str(counter), "failures": 10},
                                retryPolicy=RetryPolicy(maxRetries=2, backoffMs=1)))
    assert not result.success and result.failedTools == ["f"]
    assert len(counter.read_text().split()) == 3
    assert by_id(result)["f"].error.category == "tool_failure"
    assert by_id(result)["f"].error.code == "flaky"


def test_skill_retry_policy_applies_when_the_plan_sets_none(registry):
    result, _ = run(registry, ToolInvocation(toolId="c", toolPath="hostile/crash"))
    assert by_id(result)["c"].retryCount == 0  # hostile's SKILL.md says maxRetries: 0


def test_required_failure_skips_dependents_and_fails_the_plan(registry):
    result, _ = run(registry,
                    t("bad", "echo/fail"),
                    t("child", "echo/echo", "bad", input={"key": "child"}),
                    t("grandchild", "echo/echo", "child", input={"key": "gc"}),
                    t("free", "echo/echo", input={"key": "free", "value": 1}))
    r = by_id(result)
    assert not result.success and result.canReplan
    assert r["bad"].state == "failed" and r["child"].state == "skipped"
    assert r["grandchild"].state == "skipped" and r["free"].state == "success"
    assert result.failedTools == ["bad"] and result.disabledSkills == ["echo"]
    assert result.aggregatedState == {"free": 1, "seen": {"free": True}, "deps": {"free": {}}}


def test_optional_failure_lets_dependents_run_with_a_null_result(registry):
    result, _ = run(registry,
                    t("opt", "echo/fail", required=False),
                    t("child", "echo/echo", "opt", input={"key": "child", "value": 1}))
    assert result.success
    assert by_id(result)["opt"].state == "failed"
    patch = next(e["patch"] for e in by_id(result)["child"].events if e["type"] == "state_patch")
    assert patch["deps"]["child"] == {"opt": None}  # (a null that deep merge then deletes)
    assert "failedPatch" not in result.aggregatedState


def test_cycles_are_rejected_before_anything_runs(registry):
    result, _ = run(registry, t("a", "echo/echo", "b"), t("b", "echo/echo", "a"))
    assert not result.success and result.canReplan
    assert result.error.category == "circular_dependency"
    assert {r.state for r in result.toolResults} == {"skipped"}


def test_tool_timeout_kills_and_independent_tools_continue(registry, tmp_path):
    pid_file = tmp_path / "pids"
    result, executor = run(
        registry,
        t("slow", "hostile/hang-with-child", input={"pidFile": str(pid_file)}, timeoutMs=500),
        t("ok", "echo/echo", input={"key": "ok", "value": True}),
    )
    r = by_id(result)
    assert r["slow"].state == "timeout" and r["slow"].error.category == "timeout"
    assert r["ok"].state == "success"
    for pid in map(int, pid_file.read_text().split()):
        assert not process_alive(pid)
    assert executor.health.state("hostile") is Health.TEMPORARY_FAILURE


def test_plan_timeout_kills_running_tools_and_skips_the_rest(registry, tmp_path):
    pid_file = tmp_path / "pids"
    started = time.monotonic()
    result, _ = run(registry,
                    t("slow", "hostile/hang-with-child", input={"pidFile": str(pid_file)}),
                    t("after", "echo/echo", "slow"),
                    timeoutMs=700)
    assert time.monotonic() - started < 5
    r = by_id(result)
    assert result.error.category == "timeout" and not result.success
    assert r["slow"].state == "timeout" and r["after"].state == "skipped"
    for pid in map(int, pid_file.read_text().split()):
        deadline = time.monotonic() + 3
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not process_alive(pid)


@pytest.mark.parametrize("script,category", [
    ("crash", "process_error"), ("garbage", "invalid_json"), ("unknown-type", "invalid_json"),
    ("no-done", "process_error"), ("exit-after-done", "process_error"),
    ("long-line", "invalid_json"),
])
def test_hostile_tools_fail_with_their_category(registry, script, category):
    result, _ = run(registry, t("h", f"hostile/{script}"))
    tr = by_id(result)["h"]
    assert tr.state == "failed" and tr.error.category == category
    assert "shouldNot" not in result.aggregatedState


def test_unknown_tools_and_disabled_skills_fail_without_spawning(registry):
    result, _ = run(registry, t("u", "nowhere/nothing"))
    assert by_id(result)["u"].error.code == "unknown_tool"
    result, _ = run(registry, t("d", "echo/echo"), disabledSkills=["echo"])
    assert by_id(result)["d"].error.code == "skill_disabled"


def test_plain_paths_run_only_with_the_development_switch(registry):
    script = FIXTURE_SKILLS / "echo" / "scripts" / "echo"
    result, _ = run(registry, t("p", str(script), input={"key": "p", "value": "v"}))
    refused = by_id(result)["p"]
    assert refused.state == "failed" and refused.error.code == "tool_path_refused"
    assert refused.exitCode is None and "p" not in result.aggregatedState  # nothing ran
    result, _ = run(None, t("p", str(script), input={"key": "p", "value": "v"}),
                    config=ExecutorConfig(allow_script_paths=True))
    assert result.success and result.aggregatedState["p"] == "v"  # stdin carried the input


def test_health_degrades_after_three_consecutive_failures(registry):
    executor = PlanExecutor(registry)

    async def go():
        for _ in range(3):
            await executor.execute(Plan(requestId="x", tools=[t("f", "echo/fail")]))
    asyncio.run(go())
    assert executor.health.state("echo") is Health.DEGRADED


def test_patches_merge_in_dependency_order_not_completion_order(registry):
    tools = [
        t("late", "echo/sleep", input={"seconds": 0.3, "key": "x"}, is_async=True),
        t("early", "echo/echo", input={"key": "runs", "value": {"x": "early"}}, is_async=True),
    ]
    result, _ = run(registry, *tools, parallel=True)
    # "early" finishes first, but among independent tools plan order decides the merge
    assert result.aggregatedState["runs"]["x"] == "early"


def test_a_skills_declared_resource_limits_bound_its_processes(tmp_path):
    limits_root = Path(__file__).resolve().parent / "fixtures" / "limits"
    greedy = SkillRegistry([limits_root])
    assert greedy.get("greedy").limits.cpuSeconds == 1
    started = time.monotonic()
    result, _ = run(greedy, t("spin", "greedy/cpu-spin", timeoutMs=20_000),
                    t("hog", "greedy/memory-hog", timeoutMs=20_000))
    spin, hog = by_id(result)["spin"], by_id(result)["hog"]
    # Stopped by the skill's own 1 s of CPU and 256 MB, long before the 20 s timeout.
    assert spin.state == "failed" and hog.state == "failed"
    assert time.monotonic() - started < 15
    bad = tmp_path / "bad"
    (bad / "scripts").mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: bad\ndescription: d\nmetadata:\n  x-narratoria:\n"
                                  "    limits:\n      memoryMb: 10\n---\n")
    skipped = SkillRegistry([tmp_path]).discovery.skipped
    assert any("memoryMb must be >= 64" in s.reason for s in skipped)


def test_a_skill_runs_in_its_own_data_folder_and_a_bare_script_in_a_scratch_one(tmp_path):
    skill = tmp_path / "skills" / "where"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: where\ndescription: says where it runs\n---\n")
    script = skill / "scripts" / "cwd"
    script.write_text("#!/usr/bin/env python3\nimport json, os, sys\nsys.stdin.read()\n"
                      "print(json.dumps({'version': '0', 'type': 'state_patch', "
                      "'patch': {'cwd': os.getcwd()}}))\n"
                      "print(json.dumps({'version': '0', 'type': 'done', 'ok': True}))\n")
    script.chmod(0o755)
    result, _ = run(SkillRegistry([tmp_path / "skills"]), t("a", "where/cwd"))
    assert result.aggregatedState["cwd"] == str(skill / "data")
    loose = tmp_path / "loose-cwd"  # a script outside every skill
    loose.write_bytes(script.read_bytes())
    loose.chmod(0o755)
    result, _ = run(SkillRegistry([tmp_path / "skills"]), t("b", str(loose)),
                    config=ExecutorConfig(allow_script_paths=True))
    bare = Path(result.aggregatedState["cwd"])
    assert bare.name.startswith("narratoria-skill-") and bare != Path(os.getcwd())
    assert not bare.exists()  # removed after the invocation
