"""SkillSupervisorActor: runs plans' skill processes under one global process cap.

Each session gets its own executor (its own plan concurrency rules and skill
health, docs/plans.md, "Skill health"); every executor shares one
:class:`ProcessSlots`, so the device never runs more than ``limit`` skill processes
and excess work waits in order.
Each invocation gets a store token bound to its playthrough and to the skill it
runs (plans name registered skills only), valid while its plan runs, which the daemon's
Store service checks: the skill names the scope of its own shared records.
Every skill process is kept out of the daemon's data dir (the database, the token,
the characters) by Landlock (``runtime/skillrun/sandbox.py``): it reaches its data only
through the Store service.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator

from narratoria.runtime.bundled import package_root
from narratoria.runtime.host.endpoint import ADDRESS_ENV, SKILL_TOKEN_ENV, published_token_files
from narratoria.runtime.host.tokens import SkillTokens
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.containment import Containment
from narratoria.runtime.skillrun.executor import ExecutorConfig, PlanExecutor
from narratoria.runtime.skillrun.limits import ResourceLimits, SkillCaps
from narratoria.runtime.skillrun.plan import ExecutionResult, Plan, ToolInvocation
from narratoria.runtime.skillrun.process import ProcessLimits, script_env
from narratoria.runtime.skillrun.slots import ProcessSlots
from narratoria.runtime.skillrun.zygote import Zygote
from narratoria.runtime.skills.discovery import SkillScript
from narratoria.runtime.skills.health import SkillHealthTracker
from narratoria.runtime.skills.registry import SkillRegistry
from narratoria.runtime.streams import ProducerStream


class SkillSupervisorActor:
    """Holds the skill processes' cap, executors, zygote and tokens; a plain class, made
    a Ray actor in ``daemon.py``."""

    def __init__(self, skill_roots: list[str], limit: int, daemon_address: str,
                 data_dir: str | None = None, ray_dir: str | None = None,
                 caps: dict[str, float] | None = None, containment: str = "auto") -> None:
        self.registry = SkillRegistry([Path(r) for r in skill_roots])
        self.slots = ProcessSlots(limit)
        self.address = daemon_address
        # Plans name registered skills only: allow_script_paths stays off (its default).
        self.config = ExecutorConfig(max_concurrency=limit,
                                     limits=ProcessLimits(sandbox=skill_sandbox(
                                         data_dir, skill_roots, ray_dir, daemon_address)),
                                     caps=SkillCaps(**(caps or {})))
        self.executors: dict[str, PlanExecutor] = {}
        self.tokens = SkillTokens()
        self.plans_running = 0
        self._plans: set[ProducerStream[Any, ExecutionResult]] = set()
        # Every descendant of a skill dies with its invocation (runtime/skillrun/containment.py).
        self.containment = Containment(containment)
        print(f"supervisor: {self.containment.summary()}", file=sys.stderr)
        policy = self.config.limits.sandbox
        if policy is not None and self.containment.owner_folders:
            policy = replace(policy, denied=policy.denied + self.containment.owner_folders)
            self.config = replace(self.config, limits=replace(self.config.limits, sandbox=policy))
        # Python skills fork from a warm interpreter (a cold start would eat a quick skill's
        # answer time, e.g. a reputation lookup's 100 ms); started now so the
        # first turn does not pay for it, restarted by the executor if it dies. It
        # refuses any request below its policy: sandboxed where Landlock is, and never
        # past the daemon's caps.
        caps = self.config.caps
        ceiling = ResourceLimits(cpu_s=int(caps.cpu_s), memory_mb=int(caps.memory_mb),
                                 open_files=int(caps.open_files))
        # A cap lowered below a default lowers the default too (else the zygote would
        # refuse every skill that declares no limits of its own).
        base = self.config.limits.resources
        base = replace(base, **{f: min(v, getattr(ceiling, f))
                                for f in ("cpu_s", "memory_mb", "open_files")
                                if (v := getattr(base, f)) is not None})
        self.config = replace(self.config, limits=replace(self.config.limits, resources=base))
        self.zygote = Zygote(
            script_env(None, "zygote"), containment=self.containment,
            sandbox=bool(self.config.limits.sandbox and self.config.limits.sandbox.denied
                         and sandbox.available() > 0),
            rlimit_ceiling=ceiling.pairs())
        try:
            self.zygote.start()
        except OSError as exc:
            print(f"supervisor: no zygote ({exc}); skills start by exec", file=sys.stderr)

    def status(self) -> dict[str, Any]:
        return {**self.slots.snapshot(), "pid": os.getpid(), "zygotePid": self.zygote.pid,
                "plansRunning": self.plans_running, "executors": len(self.executors),
                "sandbox": bool(self.config.limits.sandbox) and sandbox.available() > 0,
                "containment": self.containment.describe()}

    def available(self, session_id: str | None = None) -> tuple[SkillScript, ...]:
        self.registry.refresh()
        return tuple(sorted(self.registry.scripts(), key=lambda s: s.ref))

    def skills(self, session_id: str | None = None) -> list[dict[str, Any]]:
        self.registry.refresh()
        health = self.executors[session_id].health if session_id in self.executors else SkillHealthTracker()
        return [{"name": s.name, "description": s.description, "path": str(s.root),
                 "scripts": sorted(f"{s.name}/{n}" for n in s.scripts),
                 "health": health.state(s.name).value}
                for s in sorted(self.registry.skills.values(), key=lambda s: s.name)]

    def check_token(self, token: str) -> str | None:
        """The playthrough a live invocation's store token belongs to, else None."""
        return self.tokens.playthrough(token)

    def token_scope(self, token: str) -> tuple[str, str | None] | None:
        """(playthrough, skill) of a live invocation's store token, else None."""
        return self.tokens.scope(token)

    def _executor(self, session_id: str, playthrough_id: str, issued: list[str]) -> PlanExecutor:
        existing = self.executors.get(session_id)
        health = existing.health if existing is not None else SkillHealthTracker()

        def env_for(plan: Plan, tool: ToolInvocation) -> dict[str, str]:
            # The skill as the executor resolves it (a plan names skill/script; a file
            # path never runs here), so its token carries that skill's scope.
            script = self.registry.resolve(tool.toolPath)
            token = self.tokens.issue(playthrough_id, script.skill if script is not None else None)
            issued.append(token)
            return {SKILL_TOKEN_ENV: token, ADDRESS_ENV: self.address}

        executor = PlanExecutor(self.registry, self.config, health, slots=self.slots,
                                invocation_env=env_for, zygote=self.zygote)
        self.executors[session_id] = executor
        return executor

    async def execute(self, session_id: str, playthrough_id: str, plan: Plan,
                      state: Any) -> AsyncIterator[Any]:
        """Executor events as they happen, then the ExecutionResult (a streaming generator)."""
        issued: list[str] = []
        executor = self._executor(session_id, playthrough_id, issued)
        self.plans_running += 1

        async def run(put: Any) -> ExecutionResult:
            try:
                return await executor.execute(plan, state, on_event=put)
            finally:
                self.tokens.revoke(issued)

        # A turn that leaves early (cancelled) cancels the plan: the executor kills its
        # processes before this generator is done.
        stream: ProducerStream[Any, ExecutionResult] = ProducerStream.task(run)
        self._plans.add(stream)
        try:
            async with stream:
                async for event in stream:
                    yield event
                yield stream.result
        finally:
            self.plans_running -= 1
            self._plans.discard(stream)

    async def shutdown(self) -> int:
        """Cancel every plan still running; the executor kills their process groups."""
        plans = [p for p in self._plans if p.running]
        for plan in plans:
            plan.cancel()
        await asyncio.gather(*(p.wait() for p in plans))
        self.zygote.close()
        self.containment.close()
        return len(plans)

    def reset_session(self, session_id: str) -> None:
        """Forget an ended session's executor (its skill health): the coordinator calls
        this when the session ends, so executors do not pile up for the daemon's life."""
        self.executors.pop(session_id, None)


def skill_sandbox(data_dir: str | None, skill_roots: list[str],
                  ray_dir: str | None = None,
                  daemon_address: str | None = None) -> sandbox.SandboxPolicy | None:
    """Skills may not open the daemon's data dir, nor its private Ray folder (its session
    files name the cluster's address), nor Ray's per-user files (``~/.ray``'s auth token,
    ``/tmp/ray``), nor another process's ``/proc`` folder; the skill roots and the
    interpreter stay readable where they are installed inside it (the user's skills live
    in ``<data>/skills`` by default). Nor the daemon token the daemon leaves beside a
    socket outside the data dir (``daemon_address``): a skill can connect to the socket,
    and with the token it would be the device's owner. None without a data dir."""
    if not data_dir:
        return None
    if not sandbox.available():
        print("supervisor: this kernel has no Landlock; skill processes can read "
              f"{data_dir}", file=sys.stderr)
    package = package_root()  # the code skills import: narratoria.runtime, .clients (skillkit)
    readable = [*skill_roots, sys.prefix, sys.base_prefix, str(package)]
    denied = (str(data_dir), *([ray_dir] if ray_dir else []), *sandbox.ray_files(),
              *published_token_files(daemon_address))
    return sandbox.SandboxPolicy(denied=denied, readable=tuple(readable))
