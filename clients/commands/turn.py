"""`narratoria turn`: one turn of a daemon session (``--session``), streamed, or one
played in this process without the daemon (``--local``: pattern planner, replan loop)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from narratoria.clients.commands import local
from narratoria.clients.commands.options import add_exec_options, add_skill_dirs
from narratoria.clients.commands.remote import daemon_command
from narratoria.clients.output import ExitCode, fail, print_json, print_json_line

_LOCAL_ONLY = {"state": "--state", "concurrency": "--concurrency",
               "tool_timeout": "--tool-timeout", "plan_timeout": "--plan-timeout",
               "analytics_log": "--analytics-log", "skills_dir": "--skills-dir"}


def cmd_turn(args: argparse.Namespace) -> int:
    """``turn --local TEXT`` plays in this process; ``turn --session ID`` asks the daemon."""
    bad = ExitCode.BAD_INPUT
    if args.local:
        if args.session or args.choice is not None:
            return fail("turn --local takes TEXT only (no --session or --choice)", bad)
        if args.text is None:
            return fail("turn --local needs the player's TEXT", bad)
        return cmd_local_turn(args)
    local_only = [flag for name, flag in _LOCAL_ONLY.items() if getattr(args, name)]
    if local_only:
        return fail(f"{', '.join(local_only)} only apply to a --local turn", bad)
    if not args.session:
        return fail("turn needs --session ID (a daemon session; see `narratoria session new`) "
                    "or --local to play without the daemon", bad)
    if args.text is not None and args.choice is not None:
        return fail("turn takes the player's TEXT or --choice N, exactly one of them", bad)
    if args.text is None and args.choice is None and not args.plan:
        return fail("turn takes the player's TEXT or --choice N, exactly one of them "
                    "(or only a --plan to run)", bad)
    if args.execute_only and not args.plan:
        return fail("--execute-only applies to a --plan turn", bad)
    if args.choice is not None and args.choice < 1:
        return fail(f"--choice {args.choice}: choices are numbered from 1", bad)
    return daemon_command(cmd_daemon_turn)(args)


def cmd_daemon_turn(args: argparse.Namespace) -> int:
    """One turn of a daemon session, streamed as it happens."""
    from narratoria.clients.client import NarratoriaClient, event_to_dict
    from narratoria.clients.render import TurnRenderer

    plan_json = _read_plan_json(args.plan) if args.plan else None
    with NarratoriaClient() as client:
        renderer = TurnRenderer(verbose=args.verbose,
                                dim=not args.json and sys.stdout.isatty())
        for ev in client.turn(args.session, text=args.text, choice=args.choice,
                              plan_json=plan_json, execute_only=args.execute_only):
            text = renderer.feed(ev)  # under --json too: it notes the turn's end
            if args.json:
                print_json_line(event_to_dict(ev))
            else:
                sys.stdout.write(text)
                sys.stdout.flush()
    if renderer.done is None:
        return fail("the turn's stream ended before the turn did", ExitCode.FAILED)
    return ExitCode.SUCCESS


def _read_plan_json(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(fail(f"--plan {path}: cannot be read: {exc}",
                              ExitCode.BAD_INPUT)) from None


def cmd_local_turn(args: argparse.Namespace) -> int:
    import asyncio

    from narratoria.runtime.host.paths import default_data_dir
    from narratoria.runtime.planner import PatternPlanner
    from narratoria.runtime.turn.analytics import AnalyticsLog
    from narratoria.runtime.turn.replan import ReplanLoop

    skills = local.registry(args)
    state = local.load_state(args.state)
    executor = local.executor(args, skills)
    analytics = AnalyticsLog(Path(args.analytics_log) if args.analytics_log
                             else default_data_dir() / "analytics.jsonl")
    loop = ReplanLoop(PatternPlanner(), executor, analytics=analytics)
    show = local.progress(not args.json)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "executor":
            show(data["event"])
        elif kind == "attempt_failed" and not args.json:
            print(f"  attempt {data['attempt']} failed ({data['outcome']}); "
                  f"disabled: {', '.join(data['disabledSkills']) or 'none'}", file=sys.stderr)

    outcome = asyncio.run(loop.run(args.text, tuple(skills.scripts()), state,
                                   on_event=on_event))
    if args.json:
        print_json({
            "state": outcome.state.value,
            "narration": outcome.narration,
            "plan": outcome.plan,
            "result": outcome.result,
            "attempts": [a.to_json() for a in outcome.attempts],
            "disabledSkills": outcome.disabled_skills,
        })
    else:
        print(outcome.narration)
        if outcome.result is not None and outcome.result.success:
            print(local.state_line(outcome.result.aggregatedState))
    return ExitCode.SUCCESS


def register(sub: argparse._SubParsersAction) -> None:
    turn = sub.add_parser(
        "turn", help="play one turn: of a daemon session, or --local without the daemon",
        description="With --session: one turn of a daemon session, streamed (--json: one JSON "
                    "object per event). With --local: the pattern planner and replan loop in "
                    "this process, no daemon.")
    turn.add_argument("text", nargs="?", metavar="TEXT",
                      help="what the player does, e.g. \"I roll 2d6 to pick the lock\"")
    turn.add_argument("--session", metavar="ID", help="the daemon session to play")
    turn.add_argument("--choice", type=int, metavar="N",
                      help="pick choice N (1-based) of the session's last choices, instead of TEXT")
    turn.add_argument("-v", "--verbose", action="store_true",
                      help="also show phases, plans, tool starts and logs (daemon turns)")
    turn.add_argument("--plan", metavar="PLAN.json",
                      help="run this Plan JSON instead of planning (daemon turns; TEXT optional)")
    turn.add_argument("--execute-only", action="store_true",
                      help="with --plan: run the skills only, no model narration or choices")
    turn.add_argument("--local", action="store_true",
                      help="play TEXT in this process (pattern planner + replan loop)")
    group = turn.add_argument_group("--local options")
    add_skill_dirs(group)
    add_exec_options(group)
    group.add_argument("--analytics-log", metavar="FILE",
                       help="where attempt records go (default: the data dir's analytics.jsonl)")
    turn.add_argument("--json", action="store_true")
    turn.set_defaults(func=cmd_turn)
