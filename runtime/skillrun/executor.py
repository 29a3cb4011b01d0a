"""The plan executor (docs/plans.md, "Execution"): run a plan's tools as a DAG of skill processes.

Validation happens before anything runs. Tools run sequentially in topological
order, or concurrently when the plan is ``parallel`` and the tool is ``async``
(bounded by ``max_concurrency``). Each tool is retried with exponential backoff,
killed with its whole process group on timeout, and its events are aggregated
into the Execution Result. Only successful invocations contribute state patches,
assets and ui events: a failed attempt's side effects never reach the session.

What a plan may ask for is bounded before anything runs: a ``toolPath`` names a
registered skill's script (``SkillRegistry.lookup``), never a program, unless the local
development switch ``ExecutorConfig.allow_script_paths`` is on (``narratoria plan run
--allow-script-paths`` only; the daemon never sets it); a skill's declared resource
limits and timeouts, a tool's ``timeoutMs`` and the plan's ``timeoutMs`` stay within
``ExecutorConfig.caps``. A refused tool fails with an error naming what it asked for,
the cap and the setting that raises it; nothing of it is started.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import msgspec

from narratoria.runtime.skillrun.plan import (
    ExecutionResult,
    Plan,
    PlanError,
    RetryPolicy,
    ToolError,
    ToolInvocation,
    ToolResult,
    validate_plan,
)
from narratoria.runtime.skillrun.limits import ResourceLimits, SkillCaps
from narratoria.runtime.skillrun.process import InvocationOutcome, ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import AssetEvent, StatePatchEvent, UiEvent, event_to_dict, tool_input
from narratoria.runtime.skillrun.slots import ProcessSlots
from narratoria.runtime.skillrun.zygote import Zygote
from narratoria.runtime.skills.discovery import Skill, SkillScript
from narratoria.runtime.skills.health import SkillHealthTracker
from narratoria.runtime.skills.registry import SkillRegistry, ToolPathError, shown
from narratoria.runtime.state import SessionState
from narratoria.runtime.state.caps import StateCapError

# Key of the tool-input object (docs/protocol.md, "Input") that carries dependency results:
# {"<toolId>": {"ok": true, "summary": str | None, "statePatches": [{...}, ...]} | null}
# null means the dependency failed or was skipped (only possible when it is not
# required); patches are listed in emission order, as deep merge is not associative
# over deletions.
DEPENDENCY_RESULTS_KEY = "dependencyResults"


@dataclass(frozen=True)
class ExecutorConfig:
    max_concurrency: int = os.cpu_count() or 1
    tool_timeout_s: float = 30.0
    plan_timeout_s: float = 60.0
    limits: ProcessLimits = ProcessLimits()
    # A toolPath may also be a script file outside every skill: a local development
    # switch (`narratoria plan run --allow-script-paths`), never set by the daemon.
    allow_script_paths: bool = False
    caps: SkillCaps = SkillCaps()
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutorEvent:
    """Progress of a plan, delivered as it happens (for streaming to clients)."""

    kind: str  # tool_started | tool_event | tool_retry | tool_finished
    tool_id: str
    attempt: int = 0
    event: dict[str, Any] | None = None
    result: ToolResult | None = None


EventSink = Callable[[ExecutorEvent], None]
InvocationEnv = Callable[[Plan, ToolInvocation], Mapping[str, str]]


@dataclass
class _Resolved:
    tool: ToolInvocation
    path: Path | None
    script: SkillScript | None
    skill: str | None
    policy: RetryPolicy
    timeout_s: float
    refusal: ToolError | None = None


def _skill_of_path(path: Path) -> str | None:
    # skills/<skill>/scripts/<script>
    return path.parent.parent.name if path.parent.name == "scripts" else None


class PlanExecutor:
    def __init__(self, registry: SkillRegistry | None = None,
                 config: ExecutorConfig = ExecutorConfig(),
                 health: SkillHealthTracker | None = None, *,
                 slots: ProcessSlots | None = None,
                 invocation_env: InvocationEnv | None = None,
                 zygote: Zygote | None = None) -> None:
        """``slots``: a process cap shared with other executors (the daemon's);
        ``invocation_env``: extra environment for one invocation (a store token);
        ``zygote``: forks Python scripts from a pre-imported interpreter."""
        self.registry = registry
        self.config = config
        self.health = health if health is not None else SkillHealthTracker()
        self.slots = slots
        self.invocation_env = invocation_env
        self.zygote = zygote
        self._sem = asyncio.Semaphore(max(1, config.max_concurrency))
        self._exclusive = asyncio.Lock()

    async def execute(self, plan: Plan, state: SessionState | dict | None = None,
                      on_event: EventSink | None = None) -> ExecutionResult:
        started = time.monotonic()
        run = _PlanRun(self, plan, on_event or (lambda _e: None), started)
        try:
            order = validate_plan(plan)
        except PlanError as exc:
            return run.rejected(exc)
        if self.registry is not None:
            self.registry.refresh()
        caps = self.config.caps
        if plan.timeoutMs is not None and plan.timeoutMs / 1000 > caps.plan_timeout_s:
            return run.rejected(PlanError(
                f"timeoutMs: the plan asks for {plan.timeoutMs} ms, above the daemon's cap of "
                f"{caps.plan_timeout_s * 1000:.0f} ms (raise it with narratoria serve "
                f"{SkillCaps.SETTINGS['plan_timeout_s']})", code="limit_exceeded"))
        run.resolve_all()
        plan_timeout = (plan.timeoutMs / 1000 if plan.timeoutMs
                        else min(self.config.plan_timeout_s, caps.plan_timeout_s))
        try:
            async with asyncio.timeout(plan_timeout):
                if plan.parallel:
                    await run.run_parallel()
                else:
                    for tool_id in order:
                        await run.run_tool(tool_id)
        except TimeoutError:
            run.plan_timed_out(plan_timeout)
        return run.result(order, state)

    async def _slot(self, exclusive: bool) -> int:
        """Acquire concurrency permits: one for an async tool, all for a sync one."""
        if not exclusive:
            await self._sem.acquire()
            return 1
        n = max(1, self.config.max_concurrency)
        async with self._exclusive:
            taken = 0
            try:
                for _ in range(n):
                    await self._sem.acquire()
                    taken += 1
            except BaseException:
                for _ in range(taken):
                    self._sem.release()
                raise
        return n

    def _release(self, n: int) -> None:
        for _ in range(n):
            self._sem.release()


class _PlanRun:
    """The state of one plan execution."""

    def __init__(self, executor: PlanExecutor, plan: Plan, sink: EventSink,
                 started: float) -> None:
        self.ex = executor
        self.plan = plan
        self.sink = sink
        self.started = started
        self.tools = {t.toolId: t for t in plan.tools}
        self.resolved: dict[str, _Resolved] = {}
        self.results: dict[str, ToolResult] = {}
        self.outcomes: dict[str, InvocationOutcome] = {}
        self.running: dict[str, float] = {}
        self.queued_s: dict[str, float] = {}  # each tool's wait for process slots
        self.error: ToolError | None = None

    # -- preparation -----------------------------------------------------------------

    def rejected(self, exc: PlanError) -> ExecutionResult:
        error = ToolError(code=exc.code, message=str(exc), category=exc.category)
        return ExecutionResult(
            planId=self.plan.requestId,
            success=False,
            canReplan=True,
            toolResults=[
                ToolResult(toolId=t.toolId, state="skipped", error=error) for t in self.plan.tools
            ],
            executionTimeMs=self._elapsed_ms(),
            attemptNumber=self.plan.metadata.generationAttempt,
            error=error,
        )

    def resolve_all(self) -> None:
        for tool in self.plan.tools:
            self.resolved[tool.toolId] = self._resolve(tool)

    def _locate(self, tool: ToolInvocation) -> tuple[SkillScript | None, Path | None,
                                                      ToolError | None]:
        """(the registered script, the file to run, why it may not run)."""
        try:
            if self.ex.registry is None:
                raise ToolPathError(f"toolPath {shown(tool.toolPath)}: no skills are registered",
                                    "unknown_tool")
            script = self.ex.registry.lookup(tool.toolPath)
            return script, script.path, None
        except ToolPathError as exc:
            candidate = Path(tool.toolPath)
            if self.ex.config.allow_script_paths and candidate.is_file():
                return None, candidate.resolve(), None
            return None, None, ToolError(code=exc.code, message=str(exc),
                                         category="process_error")

    def _resolve(self, tool: ToolInvocation) -> _Resolved:
        cfg = self.ex.config
        registry = self.ex.registry
        script, path, refusal = self._locate(tool)
        skill = script.skill if script is not None else (_skill_of_path(path) if path else None)
        if skill is not None and refusal is None:
            if skill in self.plan.disabledSkills or skill in self.ex.health.disabled():
                refusal = ToolError(
                    code="skill_disabled",
                    message=f"skill {skill!r} is disabled for this plan",
                    category="tool_failure",
                )
        skill_obj = registry.get(script.skill) if (registry and script) else None
        if skill_obj is not None and refusal is None:
            refusal = _limits_over_cap(skill_obj, cfg.caps)
        policy = tool.retryPolicy
        if policy is None and skill_obj is not None and skill_obj.retry_policy is not None:
            policy = RetryPolicy(
                maxRetries=skill_obj.retry_policy.maxRetries,
                backoffMs=skill_obj.retry_policy.backoffMs,
            )
        timeout_ms = tool.timeoutMs or (script.timeout_ms if script else None)
        if refusal is None and timeout_ms and timeout_ms / 1000 > cfg.caps.tool_timeout_s:
            asker = (f"tool {shown(tool.toolId, 64)}" if tool.timeoutMs
                     else f"skill {skill!r} (its SKILL.md or script manifest)")
            refusal = ToolError(
                code="limit_exceeded",
                message=f"{asker} asks for timeoutMs {timeout_ms}, above the daemon's cap of "
                f"{cfg.caps.tool_timeout_s * 1000:.0f} ms (raise it with narratoria serve "
                f"{SkillCaps.SETTINGS['tool_timeout_s']})",
                category="process_error",
            )
        return _Resolved(
            tool=tool,
            path=path,
            script=script,
            skill=skill,
            policy=policy or RetryPolicy(),
            timeout_s=(timeout_ms / 1000 if timeout_ms
                       else min(cfg.tool_timeout_s, cfg.caps.tool_timeout_s)),
            refusal=refusal,
        )

    # -- scheduling ------------------------------------------------------------------

    async def run_parallel(self) -> None:
        finished = {tid: asyncio.Event() for tid in self.tools}

        async def one(tool_id: str) -> None:
            try:
                for dep in self.tools[tool_id].dependencies:
                    await finished[dep].wait()
                await self.run_tool(tool_id)
            finally:
                finished[tool_id].set()

        await asyncio.gather(*(one(tid) for tid in self.tools))

    async def run_tool(self, tool_id: str) -> None:
        tool = self.tools[tool_id]
        res = self.resolved[tool_id]
        blocked = [d for d in tool.dependencies
                   if self.results[d].state != "success" and self.tools[d].required]
        if blocked:
            self._finish(ToolResult(
                toolId=tool_id, state="skipped", skill=res.skill,
                error=ToolError(
                    code="dependency_failed",
                    message=f"required dependency {', '.join(blocked)} did not succeed",
                    category="tool_failure",
                ),
            ))
            return
        if res.refusal is not None:
            self._finish(ToolResult(toolId=tool_id, state="failed", skill=res.skill,
                                    error=res.refusal))
            return
        exclusive = not (self.plan.parallel and tool.is_async)
        permits = await self.ex._slot(exclusive)
        try:
            await self._attempts(res)
        finally:
            self.ex._release(permits)

    def _resources(self, res: _Resolved) -> ResourceLimits:
        """The daemon's resource limits, with what the skill's SKILL.md sets instead."""
        base = self.ex.config.limits.resources
        skill = self.ex.registry.get(res.skill) if self.ex.registry and res.skill else None
        spec = skill.limits if skill is not None else None
        if spec is None:
            return base
        return replace(  # what the SKILL.md does not set (processes...) stays the daemon's
            base,
            cpu_s=spec.cpuSeconds if spec.cpuSeconds is not None else base.cpu_s,
            memory_mb=spec.memoryMb if spec.memoryMb is not None else base.memory_mb,
            open_files=spec.openFiles if spec.openFiles is not None else base.open_files)

    async def _attempts(self, res: _Resolved) -> None:
        tool = res.tool
        health = self.ex.health
        stdin = tool_input(
            self.plan.requestId,
            res.skill or Path(tool.toolPath).name,
            res.script.name if res.script else Path(tool.toolPath).name,
            tool.input,
            {DEPENDENCY_RESULTS_KEY: self._dependency_results(tool)},
        )
        env = script_env(res.script, self.plan.requestId, self.ex.config.extra_env)
        if self.ex.invocation_env is not None:
            env.update(self.ex.invocation_env(self.plan, tool))
        limits = replace(self.ex.config.limits, timeout_s=res.timeout_s,
                         resources=self._resources(res))
        events: list[dict[str, Any]] = []
        self.running[tool.toolId] = time.monotonic()
        tool_started = time.monotonic()
        outcome = InvocationOutcome()
        attempt = 0
        with _working_dir(res.script) as cwd:
            for attempt in range(res.policy.maxRetries + 1):
                if attempt:
                    delay_ms = int(res.policy.delay_s(attempt) * 1000)
                    self.sink(ExecutorEvent("tool_retry", tool.toolId, attempt,
                                            event={"delayMs": delay_ms,
                                                   "error": _error_dict(outcome.error)}))
                    await asyncio.sleep(res.policy.delay_s(attempt))
                self.sink(ExecutorEvent("tool_started", tool.toolId, attempt,
                                        event={"toolPath": tool.toolPath}))
                async with (self.ex.slots.slot() if self.ex.slots is not None
                            else nullcontext(0.0)) as waited:
                    self.queued_s[tool.toolId] = self.queued_s.get(tool.toolId, 0.0) + waited
                    outcome = await run_script(
                        res.path, stdin, limits=limits, env=env, cwd=cwd,
                        on_event=self._forward(tool.toolId, attempt, events),
                        zygote=self.ex.zygote,
                    )
                if res.skill is not None:
                    if outcome.ok:
                        health.record_success(res.skill)
                    else:
                        health.record_failure(res.skill, transient=outcome.timed_out)
                if outcome.ok:
                    break
            else:
                if res.skill is not None and res.policy.maxRetries > 0:
                    health.record_retries_exhausted(res.skill)
        del self.running[tool.toolId]
        self.outcomes[tool.toolId] = outcome
        error = outcome.error
        self._finish(ToolResult(
            toolId=tool.toolId,
            state="success" if error is None else ("timeout" if outcome.timed_out else "failed"),
            skill=res.skill,
            output=({"ok": outcome.done.ok, "summary": outcome.done.summary}
                    if outcome.done is not None else None),
            events=events,
            executionTimeMs=int((time.monotonic() - tool_started) * 1000),
            retryCount=attempt,
            error=error,
            exitCode=outcome.exit_code,
            stderr=outcome.stderr,
            warnings=[str(w) for w in outcome.warnings],
        ))

    def _forward(self, tool_id: str, attempt: int,
                 events: list[dict[str, Any]]) -> Callable[[Any], None]:
        def forward(event: Any) -> None:
            doc = event_to_dict(event)
            doc["attempt"] = attempt
            doc["receivedAtMs"] = self._elapsed_ms()
            events.append(doc)
            self.sink(ExecutorEvent("tool_event", tool_id, attempt, event=doc))
        return forward

    def _dependency_results(self, tool: ToolInvocation) -> dict[str, Any]:
        deps: dict[str, Any] = {}
        for dep in tool.dependencies:
            result = self.results[dep]
            if result.state != "success":
                deps[dep] = None
                continue
            deps[dep] = {
                "ok": True,
                "summary": result.output.get("summary") if result.output else None,
                "statePatches": [e.patch for e in self._successful_events(dep, StatePatchEvent)],
            }
        return deps

    def _successful_events(self, tool_id: str, kind: type) -> list[Any]:
        outcome = self.outcomes.get(tool_id)
        if outcome is None or not outcome.ok:
            return []
        return [r.event for r in outcome.events if isinstance(r.event, kind)]

    def _finish(self, result: ToolResult) -> None:
        self.results[result.toolId] = result
        # The wait for a daemon process slot, every attempt's: part of executionTimeMs.
        queued_ms = int(self.queued_s.get(result.toolId, 0.0) * 1000)
        self.sink(ExecutorEvent("tool_finished", result.toolId, result.retryCount,
                                event={"queueMs": queued_ms}, result=result))

    def plan_timed_out(self, plan_timeout: float) -> None:
        self.error = ToolError(
            code="plan_timeout",
            message=f"plan did not finish within {plan_timeout:g}s",
            category="timeout",
        )
        now = time.monotonic()
        for tool_id, res in self.resolved.items():
            if tool_id in self.results:
                continue
            if tool_id in self.running:
                self._finish(ToolResult(
                    toolId=tool_id, state="timeout", skill=res.skill, error=self.error,
                    executionTimeMs=int((now - self.running.pop(tool_id)) * 1000),
                ))
                if res.skill is not None:
                    self.ex.health.record_failure(res.skill, transient=True)
            else:
                self._finish(ToolResult(toolId=tool_id, state="skipped", skill=res.skill,
                                        error=self.error))

    # -- the result ------------------------------------------------------------------

    def result(self, order: list[str], state: SessionState | dict | None) -> ExecutionResult:
        session = _session_copy(state)
        assets: list[dict[str, Any]] = []
        ui_events: list[dict[str, Any]] = []
        refused: ToolError | None = None
        for tool_id in order:  # dependency order makes merges deterministic
            patches = [e.patch for e in self._successful_events(tool_id, StatePatchEvent)]
            try:  # one tool's patches: all or none, within the session's caps (state/caps.py)
                session.apply_patches(patches)
            except (StateCapError, TypeError) as exc:
                refused = refused or self._refuse_patches(tool_id, exc)
            result = self.results[tool_id]
            for doc in result.events:
                if result.state != "success" or doc["attempt"] != result.retryCount:
                    continue
                if doc["type"] == "asset":
                    assets.append({"toolId": tool_id, **_strip(doc)})
                elif doc["type"] == "ui_event":
                    ui_events.append({"toolId": tool_id, **_strip(doc)})
        tool_results = [self.results[t.toolId] for t in self.plan.tools]
        failed = [r.toolId for r in tool_results if r.state in ("failed", "timeout")]
        success = self.error is None and all(
            r.state == "success" for r in tool_results if self.tools[r.toolId].required
        )
        disabled = {r.skill for r in tool_results if r.toolId in failed and r.skill}
        disabled |= self.ex.health.disabled()
        return ExecutionResult(
            planId=self.plan.requestId,
            success=success,
            canReplan=not success,
            failedTools=failed,
            disabledSkills=sorted(disabled) if not success else sorted(self.ex.health.disabled()),
            toolResults=tool_results,
            aggregatedState=session.tree,
            aggregatedAssets=assets,
            uiEvents=ui_events,
            executionTimeMs=self._elapsed_ms(),
            attemptNumber=self.plan.metadata.generationAttempt,
            error=self.error or (refused if not success else None),
        )

    def _refuse_patches(self, tool_id: str, exc: Exception) -> ToolError:
        """The tool whose state patches a cap refused fails, its error saying which cap and
        by how much: none of its patches, assets or ui events reach the session."""
        error = ToolError(code="state_cap" if isinstance(exc, StateCapError) else "bad_state_patch",
                          category="tool_failure", message=f"tool {tool_id}: {exc}")
        self.results[tool_id] = msgspec.structs.replace(self.results[tool_id], state="failed",
                                                        error=error)
        skill = self.resolved[tool_id].skill
        if skill is not None:
            self.ex.health.record_failure(skill)
        return error

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


def _limits_over_cap(skill: Skill, caps: SkillCaps) -> ToolError | None:
    """Why the resource limits ``skill`` declares may not be granted, or None."""
    spec = skill.limits
    if spec is None:
        return None
    for name, asked, cap, unit, setting in (
            ("memoryMb", spec.memoryMb, caps.memory_mb, "MB", "memory_mb"),
            ("cpuSeconds", spec.cpuSeconds, caps.cpu_s, "s", "cpu_s"),
            ("openFiles", spec.openFiles, caps.open_files, "files", "open_files")):
        if asked is not None and asked > cap:
            return ToolError(
                code="limit_exceeded",
                message=f"skill {skill.name!r} asks for limits.{name} {asked} {unit} in "
                f"{skill.skill_file}, above the daemon's cap of {cap} {unit} (raise it with "
                f"narratoria serve {SkillCaps.SETTINGS[setting]})",
                category="process_error",
            )
    return None


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("type", "version", "attempt")}


@contextmanager
def _working_dir(script: SkillScript | None) -> Iterator[Path]:
    """Where an invocation runs: its skill's private ``data/`` folder (kept: the skill's
    own working files), or, for a script outside every skill, a fresh folder removed
    afterwards; never the daemon's own working directory."""
    if script is not None:
        data = script.path.parent.parent / "data"
        try:
            data.mkdir(exist_ok=True)
        except OSError:
            pass  # a read-only install: a scratch folder, as for a bare script
        else:
            yield data
            return
    with tempfile.TemporaryDirectory(prefix="narratoria-skill-", ignore_cleanup_errors=True) as tmp:
        yield Path(tmp)


def _error_dict(error: ToolError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"code": error.code, "message": error.message, "category": error.category}


def _session_copy(state: SessionState | dict | None) -> SessionState:
    if isinstance(state, SessionState):
        return state.copy()
    return SessionState(state if state is not None else {})
