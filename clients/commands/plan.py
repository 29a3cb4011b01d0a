"""`narratoria plan run`: execute a Plan JSON document in this process (no daemon)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from narratoria.clients.commands import local
from narratoria.clients.commands.options import add_exec_options, add_skill_dirs
from narratoria.clients.output import ExitCode, fail, print_json


def cmd_plan_run(args: argparse.Namespace) -> int:
    import asyncio

    from narratoria.runtime.skillrun.plan import PlanError, load_plan

    try:
        # A plan that decodes gets an Execution Result, a cyclic or otherwise unrunnable
        # one included: the executor rejects its graph with a categorised error.
        plan = load_plan(Path(args.plan), check_graph=False)
    except PlanError as exc:
        return fail(str(exc), ExitCode.BAD_INPUT)
    skills = local.registry(args)
    state = local.load_state(args.state)
    executor = local.executor(args, skills)
    result = asyncio.run(executor.execute(plan, state, on_event=local.progress(not args.json)))
    if args.json:
        print_json(result)
    else:
        if plan.narrative:
            print(plan.narrative)
        verdict = "succeeded" if result.success else "failed"
        print(f"plan {result.planId} {verdict} in {result.executionTimeMs} ms")
        if result.error:
            print(f"  error [{result.error.category}]: {result.error.message}")
        for tr in result.toolResults:
            summary = tr.output.get("summary") if tr.output else None
            line = f"  {tr.toolId}: {tr.state}"
            if summary:
                line += f" — {summary}"
            if tr.error:
                line += f" [{tr.error.category}: {tr.error.message}]"
            print(line)
        for ui in result.uiEvents:
            print(f"  ui {ui['event']} from {ui['toolId']}: {json.dumps(ui.get('payload'))}")
        print(local.state_line(result.aggregatedState))
    return ExitCode.SUCCESS if result.success else ExitCode.FAILED


def register(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser("plan", help="execute Plan JSON documents")
    plan_sub = plan.add_subparsers(dest="plan_command", metavar="ACTION", required=True)
    run = plan_sub.add_parser("run", help="execute a plan and print the Execution Result")
    run.add_argument("plan", metavar="PLAN.json")
    add_skill_dirs(run)
    add_exec_options(run)
    run.add_argument("--json", action="store_true", help="print the Execution Result document")
    run.add_argument("--allow-script-paths", action="store_true",
                     help="development only: a toolPath may also be the path of a script file "
                          "outside every skill (the daemon always refuses this)")
    run.set_defaults(func=cmd_plan_run)
