"""Running plans in this process, without the daemon (``plan run``, ``turn --local``,
``skills``): the skill roots, an initial state file, the executor and its progress."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from narratoria.clients.output import ExitCode, fail

if TYPE_CHECKING:
    from narratoria.runtime.skillrun.executor import ExecutorEvent, PlanExecutor
    from narratoria.runtime.skills import SkillRegistry
    from narratoria.runtime.state import SessionState


def skill_roots(args: argparse.Namespace) -> list[Path]:
    """The built-in and user skill roots, then each ``--skills-dir``."""
    from narratoria.runtime.skills import builtin_skills_dir, user_skills_dir

    roots = [builtin_skills_dir(), user_skills_dir()]
    for extra in args.skills_dir or []:
        path = Path(extra)
        if not path.is_dir():
            raise SystemExit(fail(f"--skills-dir {extra}: not a directory", ExitCode.BAD_INPUT))
        roots.append(path)
    return roots


def registry(args: argparse.Namespace) -> SkillRegistry:
    from narratoria.runtime.skills import SkillRegistry

    return SkillRegistry(skill_roots(args))


def load_state(path: str | None) -> SessionState:
    """``--state FILE``: a JSON object, else exit ``BAD_INPUT``."""
    from narratoria.runtime.state import SessionState

    if path is None:
        return SessionState()
    try:
        tree = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise SystemExit(fail(f"--state {path}: cannot read: {exc.strerror}", ExitCode.BAD_INPUT))
    except json.JSONDecodeError as exc:
        raise SystemExit(fail(f"--state {path}:{exc.lineno}:{exc.colno}: {exc.msg}",
                              ExitCode.BAD_INPUT))
    if not isinstance(tree, dict):
        raise SystemExit(fail(f"--state {path}: must hold a JSON object", ExitCode.BAD_INPUT))
    return SessionState(tree)


def executor(args: argparse.Namespace, skills: SkillRegistry) -> PlanExecutor:
    from narratoria.runtime.skillrun.executor import ExecutorConfig, PlanExecutor

    defaults = ExecutorConfig()
    tool_timeout = args.tool_timeout or defaults.tool_timeout_s
    plan_timeout = args.plan_timeout or defaults.plan_timeout_s
    # The daemon's default caps, widened to the timeouts asked for here on purpose.
    caps = replace(defaults.caps, tool_timeout_s=max(defaults.caps.tool_timeout_s, tool_timeout),
                   plan_timeout_s=max(defaults.caps.plan_timeout_s, plan_timeout))
    return PlanExecutor(skills, ExecutorConfig(
        max_concurrency=args.concurrency or defaults.max_concurrency,
        tool_timeout_s=tool_timeout, plan_timeout_s=plan_timeout, caps=caps,
        # Local development only (`plan run`); the daemon has no such switch.
        allow_script_paths=bool(getattr(args, "allow_script_paths", False)),
    ))


def progress(enabled: bool) -> Callable[[ExecutorEvent], None]:
    """Live tool progress on stderr, so stdout stays clean for --json."""
    def show(ev: ExecutorEvent) -> None:
        if not enabled:
            return
        if ev.kind == "tool_started":
            suffix = f" (attempt {ev.attempt + 1})" if ev.attempt else ""
            print(f"  ▸ {ev.tool_id} running{suffix}", file=sys.stderr)
        elif ev.kind == "tool_event" and ev.event and ev.event["type"] == "log":
            print(f"    {ev.tool_id}: {ev.event['message']}", file=sys.stderr)
        elif ev.kind == "tool_finished" and ev.result is not None:
            r = ev.result
            detail = f" — {r.error.message}" if r.error else ""
            print(f"  ■ {ev.tool_id} {r.state} in {r.executionTimeMs} ms{detail}",
                  file=sys.stderr)
    return show


def state_line(state: dict[str, Any]) -> str:
    return "state: " + json.dumps(state, sort_keys=True)
