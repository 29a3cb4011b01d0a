"""The bounded replan loop: generate → execute → success, or replan with the failed
skills disabled, at most five times, then fall back to template narration
(docs/plans.md, "Replan loop").

The planner and the executor are injected, so the state machine is tested on its
own and the daemon can wrap real ones. The player always gets narration.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from narratoria.runtime.planner.base import Planner, PlanRequest
from narratoria.runtime.skillrun.executor import ExecutorEvent
from narratoria.runtime.skillrun.plan import MAX_GENERATION_ATTEMPTS, ExecutionResult, Plan, PlanError, validate_plan
from narratoria.runtime.skills.discovery import SkillScript
from narratoria.runtime.turn.analytics import AnalyticsLog

GENERATION_BUDGET_S = 5.0

FALLBACK_TEMPLATES = (
    "The narrator pauses, considering your words: '{input}'",
    "Your action '{input}' echoes in the stillness...",
)
FALLBACK_EMPTY = "The story continues, though the path is unclear..."


class TurnState(str, enum.Enum):
    GENERATING = "GENERATING"
    EXECUTING = "EXECUTING"
    SUCCESS = "SUCCESS"
    REPLANNING = "REPLANNING"
    FALLBACK = "FALLBACK"


class Executor(Protocol):
    async def execute(self, plan: Plan, state: Any = None,
                      on_event: Callable[[ExecutorEvent], None] | None = None
                      ) -> ExecutionResult: ...


@dataclass
class AttemptRecord:
    attempt: int
    planner: str
    outcome: str = "pending"  # success | failed | planner_error | planner_timeout | invalid_plan
    plan_id: str | None = None
    parent_plan_id: str | None = None
    selected_skills: list[str] = field(default_factory=list)
    failed_tools: list[str] = field(default_factory=list)
    disabled_skills: list[str] = field(default_factory=list)
    generation_ms: int = 0
    execution_ms: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "attempt",
            "planId": self.plan_id,
            "parentPlanId": self.parent_plan_id,
            "attempt": self.attempt,
            "planner": self.planner,
            "selectedSkills": self.selected_skills,
            "outcome": self.outcome,
            "failedTools": self.failed_tools,
            "disabledSkills": self.disabled_skills,
            "generationMs": self.generation_ms,
            "executionMs": self.execution_ms,
            "error": self.error,
        }


@dataclass
class TurnOutcome:
    state: TurnState
    narration: str
    plan: Plan | None = None
    result: ExecutionResult | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    disabled_skills: list[str] = field(default_factory=list)

    @property
    def fallback(self) -> bool:
        return self.state is TurnState.FALLBACK


def fallback_narration(player_input: str) -> str:
    text = " ".join(player_input.split())[:200]
    if not text:
        return FALLBACK_EMPTY
    # Stable per input, so a retried turn reads the same.
    pick = hashlib.sha1(text.encode()).digest()[0] % len(FALLBACK_TEMPLATES)
    return FALLBACK_TEMPLATES[pick].format(input=text)


def success_narration(plan: Plan, result: ExecutionResult) -> str:
    if plan.narrative:
        return plan.narrative
    summaries = [r.output["summary"] for r in result.toolResults
                 if r.output and r.output.get("summary")]
    return " ".join(summaries) or FALLBACK_EMPTY


def _skills_of(plan: Plan, available: tuple[SkillScript, ...]) -> list[str]:
    by_ref = {s.ref: s.skill for s in available}
    return sorted({by_ref.get(t.toolPath, t.toolPath.split("/")[0]) for t in plan.tools})


LoopSink = Callable[[str, dict[str, Any]], None]


class ReplanLoop:
    def __init__(self, planner: Planner, executor: Executor, *,
                 fallback_planner: Planner | None = None,
                 analytics: AnalyticsLog | None = None,
                 generation_budget_s: float = GENERATION_BUDGET_S,
                 max_attempts: int = MAX_GENERATION_ATTEMPTS) -> None:
        self.planner = planner
        self.fallback_planner = fallback_planner
        self.executor = executor
        self.analytics = analytics
        self.generation_budget_s = generation_budget_s
        # The spec's hard limit: never more than five attempts, whatever is asked.
        self.max_attempts = max(1, min(max_attempts, MAX_GENERATION_ATTEMPTS))

    async def run(self, player_input: str, available: tuple[SkillScript, ...] = (),
                  state: Any = None, *, session_id: str | None = None,
                  on_event: LoopSink | None = None,
                  entities: tuple[Any, ...] = ()) -> TurnOutcome:
        emit = on_event or (lambda _k, _d: None)
        outcome = TurnOutcome(state=TurnState.GENERATING, narration="")
        disabled: set[str] = set()
        parent: str | None = None
        planner = self.planner
        for attempt in range(1, self.max_attempts + 1):
            emit("state", {"state": TurnState.GENERATING.value, "attempt": attempt})
            request = PlanRequest(player_input, tuple(available), frozenset(disabled),
                                  attempt, parent, state_tree(state), entities=entities,
                                  session=session_id or "")
            record = AttemptRecord(attempt=attempt, planner=planner.name, parent_plan_id=parent)
            plan = await self._generate(planner, request, record)
            if plan is None:
                # The planner itself failed: the attempt counts, and the pattern
                # planner answers the remaining attempts.
                self._log(record, session_id)
                outcome.attempts.append(record)
                emit("attempt_failed", record.to_json())
                if self.fallback_planner is not None:
                    planner = self.fallback_planner
                continue
            plan.disabledSkills = sorted(disabled | set(plan.disabledSkills))
            plan.metadata.generationAttempt = attempt
            plan.metadata.parentPlanId = parent
            record.plan_id = plan.requestId
            record.selected_skills = _skills_of(plan, request.available)
            emit("plan", {"attempt": attempt, "plan": plan, "planner": record.planner,
                          "generationMs": record.generation_ms,
                          "skills": record.selected_skills})

            emit("state", {"state": TurnState.EXECUTING.value, "attempt": attempt})
            started = time.monotonic()
            result = await self.executor.execute(
                plan, state, on_event=lambda ev: emit("executor", {"event": ev}))
            record.execution_ms = int((time.monotonic() - started) * 1000)
            record.failed_tools = list(result.failedTools)
            outcome.plan, outcome.result = plan, result
            if result.success:
                record.outcome = "success"
                record.disabled_skills = sorted(disabled)
                self._log(record, session_id)
                outcome.attempts.append(record)
                outcome.state = TurnState.SUCCESS
                outcome.narration = success_narration(plan, result)
                outcome.disabled_skills = sorted(disabled)
                emit("state", {"state": TurnState.SUCCESS.value, "attempt": attempt})
                return outcome
            record.outcome = "failed"
            record.error = result.error.message if result.error else None
            disabled |= set(result.disabledSkills)
            record.disabled_skills = sorted(disabled)
            parent = plan.requestId
            self._log(record, session_id)
            outcome.attempts.append(record)
            emit("attempt_failed", record.to_json())
            if attempt < self.max_attempts:
                emit("state", {"state": TurnState.REPLANNING.value, "attempt": attempt})

        outcome.state = TurnState.FALLBACK
        outcome.narration = fallback_narration(player_input)
        outcome.disabled_skills = sorted(disabled)
        if self.analytics is not None:
            self.analytics.write({"event": "fallback", "sessionId": session_id,
                                  "attempts": len(outcome.attempts),
                                  "disabledSkills": outcome.disabled_skills})
        emit("state", {"state": TurnState.FALLBACK.value, "attempt": self.max_attempts})
        return outcome

    async def _generate(self, planner: Planner, request: PlanRequest,
                        record: AttemptRecord) -> Plan | None:
        started = time.monotonic()
        try:
            plan = await asyncio.wait_for(planner.generate(request), self.generation_budget_s)
            validate_plan(plan)
            return plan
        except TimeoutError:
            record.outcome = "planner_timeout"
            record.error = f"plan generation exceeded {self.generation_budget_s:g}s"
        except PlanError as exc:
            record.outcome = "invalid_plan"
            record.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - any planner failure is one failed attempt
            record.outcome = "planner_error"
            record.error = f"{type(exc).__name__}: {exc}"
        finally:
            record.generation_ms = int((time.monotonic() - started) * 1000)
        return None

    def _log(self, record: AttemptRecord, session_id: str | None) -> None:
        if self.analytics is not None:
            self.analytics.write({**record.to_json(), "sessionId": session_id})


def state_tree(state: Any) -> dict[str, Any]:
    if state is None:
        return {}
    if isinstance(state, dict):
        return state
    return getattr(state, "tree", {})
