"""The bounded replan loop with the real executor, real skills and injected planners."""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import FIXTURE_SKILLS
from narratoria.runtime.planner import PatternPlanner, PlanRequest
from narratoria.runtime.skillrun.executor import PlanExecutor
from narratoria.runtime.skillrun.plan import Plan, PlanMetadata, RetryPolicy, ToolInvocation
from narratoria.runtime.skills import SkillRegistry
from narratoria.runtime.turn.analytics import AnalyticsLog
from narratoria.runtime.turn.replan import ReplanLoop, TurnState, fallback_narration

NO_RETRY = RetryPolicy(maxRetries=0, backoffMs=0)


@pytest.fixture(scope="module")
def registry():
    return SkillRegistry([FIXTURE_SKILLS])


class ScriptedPlanner:
    """A planner for tests: picks, for each attempt, the first offered ref of a list."""

    name = "scripted"

    def __init__(self, refs: list[str]):
        self.refs = refs
        self.requests: list[PlanRequest] = []

    async def generate(self, request: PlanRequest) -> Plan:
        self.requests.append(request)
        offered = {s.ref for s in request.offered()}
        ref = next(r for r in self.refs if r in offered)
        return Plan(requestId=f"plan-{request.attempt}", tools=[
            ToolInvocation(toolId="t", toolPath=ref, input={"key": "k", "value": ref},
                           retryPolicy=NO_RETRY)])


class BrokenPlanner:
    name = "broken"

    def __init__(self, mode: str):
        self.mode = mode
        self.calls = 0

    async def generate(self, request: PlanRequest) -> Plan:
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("model exploded")
        if self.mode == "cycle":
            return Plan(requestId="c", tools=[
                ToolInvocation(toolId="a", toolPath="echo/echo", dependencies=["a"])])
        await asyncio.sleep(10)
        raise AssertionError("unreachable")


def play(loop: ReplanLoop, registry, text="I act", events=None):
    sink = (lambda k, d: events.append((k, d))) if events is not None else None
    return asyncio.run(loop.run(text, tuple(registry.scripts()), None, session_id="s1",
                                on_event=sink))


def test_success_on_the_first_attempt(registry, tmp_path):
    log = AnalyticsLog(tmp_path / "a.jsonl")
    loop = ReplanLoop(ScriptedPlanner(["echo/echo"]), PlanExecutor(registry), analytics=log)
    out = play(loop, registry)
    assert out.state is TurnState.SUCCESS and len(out.attempts) == 1
    assert out.result.aggregatedState["k"] == "echo/echo"
    assert out.narration == "echoed k"
    (record,) = log.read()
    assert record["outcome"] == "success" and record["selectedSkills"] == ["echo"]
    assert record["sessionId"] == "s1" and record["attempt"] == 1 and "ts" in record


def test_a_failed_skill_is_disabled_and_the_next_plan_avoids_it(registry, tmp_path):
    planner = ScriptedPlanner(["hostile/crash", "echo/echo"])
    events = []
    loop = ReplanLoop(planner, PlanExecutor(registry), analytics=AnalyticsLog(tmp_path / "a"))
    out = play(loop, registry, events=events)
    assert out.state is TurnState.SUCCESS and len(out.attempts) == 2
    assert planner.requests[1].disabled_skills == {"hostile"}
    assert planner.requests[1].parent_plan_id == "plan-1"
    assert out.plan.metadata.generationAttempt == 2
    assert out.plan.metadata.parentPlanId == "plan-1"
    assert out.plan.disabledSkills == ["hostile"]
    states = [d["state"] for k, d in events if k == "state"]
    assert states == ["GENERATING", "EXECUTING", "REPLANNING", "GENERATING", "EXECUTING",
                      "SUCCESS"]
    first, second = AnalyticsLog(tmp_path / "a").read()
    assert first["outcome"] == "failed" and first["failedTools"] == ["t"]
    assert second["parentPlanId"] == first["planId"]


class AlwaysFailing:
    name = "always-failing"

    def __init__(self):
        self.requests = []

    async def generate(self, request):
        self.requests.append(request)
        return Plan(requestId=f"p{request.attempt}", tools=[
            ToolInvocation(toolId="t", toolPath="echo/fail", retryPolicy=NO_RETRY)],
            disabledSkills=[])


def test_five_failures_end_in_fallback_narration_quoting_the_input(registry, tmp_path):
    planner = AlwaysFailing()
    log = AnalyticsLog(tmp_path / "a")
    loop = ReplanLoop(planner, PlanExecutor(registry), analytics=log, max_attempts=99)
    out = play(loop, registry, text="I sing to the dragon")
    assert out.state is TurnState.FALLBACK and out.fallback
    assert len(out.attempts) == 5  # the hard limit, whatever was configured
    assert "I sing to the dragon" in out.narration
    assert [req.attempt for req in planner.requests] == [1, 2, 3, 4, 5]
    assert [req.parent_plan_id for req in planner.requests] == [None, "p1", "p2", "p3", "p4"]
    records = log.read()
    assert [r.get("outcome") for r in records[:5]] == ["failed"] * 5
    assert records[-1]["event"] == "fallback"


def test_planner_exception_counts_and_the_pattern_planner_takes_over(registry):
    broken = BrokenPlanner("raise")
    loop = ReplanLoop(broken, PlanExecutor(registry), fallback_planner=PatternPlanner())
    out = play(loop, registry, text="I look around")
    assert broken.calls == 1
    assert out.attempts[0].outcome == "planner_error" and "model exploded" in out.attempts[0].error
    assert out.attempts[1].planner == "pattern"
    assert out.state is TurnState.SUCCESS  # a narrative-only plan: no storyteller installed


def test_planner_timeout_counts_as_a_failed_attempt(registry):
    broken = BrokenPlanner("sleep")
    loop = ReplanLoop(broken, PlanExecutor(registry), fallback_planner=PatternPlanner(),
                      generation_budget_s=0.2)
    out = play(loop, registry, text="I wait")
    assert out.attempts[0].outcome == "planner_timeout"
    assert out.state is TurnState.SUCCESS


def test_invalid_plans_from_the_planner_count_and_without_fallback_planner_end_in_fallback(registry):
    broken = BrokenPlanner("cycle")
    loop = ReplanLoop(broken, PlanExecutor(registry))
    out = play(loop, registry, text="I loop")
    assert broken.calls == 5 and out.state is TurnState.FALLBACK
    assert {a.outcome for a in out.attempts} == {"invalid_plan"}
    assert "circular" in out.attempts[0].error


def test_fallback_templates():
    assert "'I hum'" in fallback_narration("I hum")
    assert fallback_narration("  ") == "The story continues, though the path is unclear..."
    assert fallback_narration("same") == fallback_narration("same")
