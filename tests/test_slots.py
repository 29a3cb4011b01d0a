"""The daemon's global cap on live skill processes, shared by every session's executor."""

from __future__ import annotations

import asyncio

import pytest

from conftest import FIXTURE_SKILLS
from narratoria.runtime.skillrun.executor import ExecutorConfig, PlanExecutor
from narratoria.runtime.skillrun.plan import Plan, ToolInvocation
from narratoria.runtime.skillrun.slots import ProcessSlots
from narratoria.runtime.skills import SkillRegistry


def _sleep_plan(session: str, n: int) -> Plan:
    return Plan(requestId=f"plan-{session}", parallel=True, tools=[
        ToolInvocation(toolId=f"{session}{i}", toolPath="echo/sleep", is_async=True,
                       input={"seconds": 0.3, "key": f"{session}{i}"}) for i in range(n)])


def test_executors_sharing_slots_never_run_more_processes_than_the_limit():
    registry = SkillRegistry([FIXTURE_SKILLS])
    slots = ProcessSlots(2)
    seen_env: list[str] = []

    def env_for(plan: Plan, tool: ToolInvocation) -> dict[str, str]:
        seen_env.append(tool.toolId)
        return {"NARRATORIA_SKILL_TOKEN": f"token-{tool.toolId}"}

    async def main() -> list:
        # Each session's own limit (4) is above the global one: the cap must come from the slots.
        executors = [PlanExecutor(registry, ExecutorConfig(max_concurrency=4), slots=slots,
                                  invocation_env=env_for) for _ in range(3)]
        return await asyncio.gather(*(ex.execute(_sleep_plan(s, 3)) for ex, s in zip(executors, "abc")))

    results = asyncio.run(main())
    assert all(r.success for r in results)
    assert slots.peak == 2 and slots.live == 0 and slots.waiting == 0 and slots.started == 9
    assert sorted(seen_env) == sorted(f"{s}{i}" for s in "abc" for i in range(3))


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="limit"):
        ProcessSlots(0)
