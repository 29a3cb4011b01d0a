"""The `narratoria` command line.

Subcommands are thin: they parse arguments, call the runtime, and print either
a human summary or, with ``--json``, one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import msgspec

from narratoria.runtime.analytics import AnalyticsLog, default_data_dir
from narratoria.runtime.executor import ExecutorConfig, ExecutorEvent, PlanExecutor
from narratoria.runtime.plan import PlanError, load_plan
from narratoria.runtime.planner import PatternPlanner
from narratoria.runtime.replan import ReplanLoop
from narratoria.runtime.skills import SkillRegistry, builtin_skills_dir, user_skills_dir
from narratoria.runtime.skills.conformance import check_skill
from narratoria.runtime.state import SessionState

VERSION = "0.1.0"


def _print_json(doc: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n")


def _err(message: str) -> None:
    print(f"narratoria: {message}", file=sys.stderr)


def _roots(args: argparse.Namespace) -> list[Path]:
    roots = [builtin_skills_dir(), user_skills_dir()]
    for extra in args.skills_dir or []:
        path = Path(extra)
        if not path.is_dir():
            raise SystemExit(_fail(f"--skills-dir {extra}: not a directory"))
        roots.append(path)
    return roots


def _fail(message: str, code: int = 2) -> int:
    _err(message)
    return code


def _load_state(path: str | None) -> SessionState:
    if path is None:
        return SessionState()
    try:
        tree = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise SystemExit(_fail(f"--state {path}: cannot read: {exc.strerror}"))
    except json.JSONDecodeError as exc:
        raise SystemExit(_fail(f"--state {path}:{exc.lineno}:{exc.colno}: {exc.msg}"))
    if not isinstance(tree, dict):
        raise SystemExit(_fail(f"--state {path}: must hold a JSON object"))
    return SessionState(tree)


def _executor(args: argparse.Namespace, registry: SkillRegistry) -> PlanExecutor:
    defaults = ExecutorConfig()
    return PlanExecutor(registry, ExecutorConfig(
        max_concurrency=args.concurrency or defaults.max_concurrency,
        tool_timeout_s=args.tool_timeout or defaults.tool_timeout_s,
        plan_timeout_s=args.plan_timeout or defaults.plan_timeout_s,
    ))


def _progress(enabled: bool):
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


# -- plan run ----------------------------------------------------------------------------

def cmd_plan_run(args: argparse.Namespace) -> int:
    try:
        plan = load_plan(Path(args.plan))
    except PlanError as exc:
        return _fail(str(exc))
    registry = SkillRegistry(_roots(args))
    state = _load_state(args.state)
    executor = _executor(args, registry)
    result = asyncio.run(executor.execute(plan, state, on_event=_progress(not args.json)))
    if args.json:
        _print_json(result)
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
        print("state: " + json.dumps(result.aggregatedState, sort_keys=True))
    return 0 if result.success else 1


# -- turn --------------------------------------------------------------------------------

def cmd_turn(args: argparse.Namespace) -> int:
    registry = SkillRegistry(_roots(args))
    state = _load_state(args.state)
    executor = _executor(args, registry)
    analytics = AnalyticsLog(Path(args.analytics_log) if args.analytics_log
                             else default_data_dir() / "analytics.jsonl")
    loop = ReplanLoop(PatternPlanner(), executor, analytics=analytics)
    show = _progress(not args.json)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "executor":
            show(data["event"])
        elif kind == "attempt_failed" and not args.json:
            print(f"  attempt {data['attempt']} failed ({data['outcome']}); "
                  f"disabled: {', '.join(data['disabledSkills']) or 'none'}", file=sys.stderr)

    outcome = asyncio.run(loop.run(args.text, tuple(registry.scripts()), state,
                                   on_event=on_event))
    if args.json:
        _print_json({
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
            print("state: " + json.dumps(outcome.result.aggregatedState, sort_keys=True))
    return 0


# -- skills ------------------------------------------------------------------------------

def cmd_skills_list(args: argparse.Namespace) -> int:
    registry = SkillRegistry(_roots(args))
    d = registry.discovery
    if args.json:
        _print_json({
            "roots": [str(r) for r in registry.roots],
            "skills": [s.summary() for s in d.skills.values()],
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in d.skipped],
            "overridden": {k: [str(p) for p in v] for k, v in d.overridden.items()},
        })
        return 0
    if not d.skills:
        print("no skills found in: " + ", ".join(str(r) for r in registry.roots))
    for skill in d.skills.values():
        label = skill.display_name or skill.name
        print(f"{skill.name} ({label}, priority {skill.priority}) — {skill.root}")
        print(f"    {skill.description.splitlines()[0][:100]}")
        for script in skill.scripts.values():
            timeout = f", timeout {script.timeout_ms} ms" if script.timeout_ms else ""
            print(f"    script {script.ref}{timeout}")
        for warning in skill.warnings:
            print(f"    warning: {warning}")
    for name, replaced in d.overridden.items():
        print(f"note: {name} overrides {', '.join(str(p) for p in replaced)}")
    for skipped in d.skipped:
        print(f"skipped: {skipped}")
    return 0


def cmd_skills_check(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if not target.is_dir():
        return _fail(f"{target}: not a directory")
    if (target / "SKILL.md").exists():
        folders = [target]
    else:
        folders = sorted(p for p in target.iterdir() if (p / "SKILL.md").is_file())
        if not folders:
            return _fail(f"{target}: no SKILL.md here or in its subfolders")
    reports = [check_skill(folder, timeout_s=args.timeout) for folder in folders]
    if args.json:
        _print_json({"ok": all(r.ok for r in reports), "skills": [r.to_json() for r in reports]})
    else:
        for report in reports:
            status = "ok" if report.ok else f"{len(report.errors)} error(s)"
            print(f"{report.skill or report.skill_dir}: {status}")
            for f in report.findings:
                print(f"  {f.severity}: {f.where}: {f.message}")
            for probe in report.probes:
                mark = "✗" if any(f.severity == "error" for f in probe.findings) else "✓"
                print(f"  {mark} {probe.script} [{probe.probe}] exit {probe.exit_code}, "
                      f"{probe.events} events, done ok={probe.done_ok}, {probe.duration_ms} ms")
                for f in probe.findings:
                    print(f"      {f.severity}: {f.message}")
    return 0 if all(r.ok for r in reports) else 1


# -- bench -------------------------------------------------------------------------------

def _emit_report(args: argparse.Namespace, report: dict[str, Any], write_markdown) -> int:
    """Append to --write FILE with the command line, then print JSON or the summary."""
    if args.write:
        write_markdown(Path(args.write), report, " ".join(["narratoria", *sys.argv[1:]]))
    if args.json:
        _print_json(report)
    else:
        for line in report["summary"]:
            print(line)
    return 0


def cmd_bench_protocol(args: argparse.Namespace) -> int:
    from .bench import run_protocol_bench, write_markdown

    report = run_protocol_bench(iterations=args.iterations, parallel=args.parallel,
                                progress=not args.json)
    return _emit_report(args, report, write_markdown)


def cmd_bench_store(args: argparse.Namespace) -> int:
    from .bench_store import run_store_bench, write_markdown

    report = run_store_bench(memories=args.memories, records=args.records, lore=args.lore,
                             queries=args.queries, with_model=not args.no_model,
                             progress=not args.json)
    return _emit_report(args, report, write_markdown)


# -- parser ------------------------------------------------------------------------------

def _add_skill_dirs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skills-dir", action="append", metavar="DIR",
                   help="an extra skill root (repeatable); later roots override earlier ones")


def _add_exec_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", metavar="FILE", help="initial session state (JSON object)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="max concurrent skill processes (default: CPU count)")
    p.add_argument("--tool-timeout", type=float, metavar="S", help="per-tool timeout (30)")
    p.add_argument("--plan-timeout", type=float, metavar="S", help="per-plan timeout (60)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="narratoria",
        description="Narratoria runtime: plans, skills and the NDJSON tool protocol.",
        epilog="Start with `narratoria skills list`, then `narratoria turn \"I roll the dice\"` "
               "or `narratoria plan run deploy/examples/demo-plan.json`.",
    )
    parser.add_argument("--version", action="version", version=f"narratoria {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    plan = sub.add_parser("plan", help="execute Plan JSON documents")
    plan_sub = plan.add_subparsers(dest="plan_command", metavar="ACTION", required=True)
    run = plan_sub.add_parser("run", help="execute a plan and print the Execution Result")
    run.add_argument("plan", metavar="PLAN.json")
    _add_skill_dirs(run)
    _add_exec_options(run)
    run.add_argument("--json", action="store_true", help="print the Execution Result document")
    run.set_defaults(func=cmd_plan_run)

    turn = sub.add_parser("turn", help="play one turn locally (pattern planner + replan loop)")
    turn.add_argument("text", help="what the player does, e.g. \"I roll 2d6 to pick the lock\"")
    _add_skill_dirs(turn)
    _add_exec_options(turn)
    turn.add_argument("--analytics-log", metavar="FILE",
                      help="where attempt records go (default: the data dir's analytics.jsonl)")
    turn.add_argument("--json", action="store_true")
    turn.set_defaults(func=cmd_turn)

    skills = sub.add_parser("skills", help="discover and check skills")
    skills_sub = skills.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    ls = skills_sub.add_parser("list", help="discovered skills, scripts, and skipped skills")
    _add_skill_dirs(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_skills_list)
    check = skills_sub.add_parser("check", help="protocol conformance check for a skill folder")
    check.add_argument("dir", metavar="DIR", help="a skill folder, or a folder of skills")
    check.add_argument("--timeout", type=float, default=10.0, help="per-probe timeout (10 s)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_skills_check)

    bench = sub.add_parser("bench", help="benchmarks (results can be appended to BENCHMARKS.md)")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="SUITE", required=True)
    proto = bench_sub.add_parser("protocol", help="skill invocation overhead vs a bare spawn")
    proto.add_argument("--iterations", type=int, default=40)
    proto.add_argument("--parallel", type=int, default=8, help="tools in the parallel plan")
    proto.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    proto.add_argument("--json", action="store_true")
    proto.set_defaults(func=cmd_bench_protocol)
    store = bench_sub.add_parser("store", help="engine and persistence layer on DuckDB files")
    store.add_argument("--memories", type=int, default=10_000, help="engine memories (hash)")
    store.add_argument("--records", type=int, default=10_000, help="store records (MiniLM)")
    store.add_argument("--lore", type=int, default=2_500, help="lore chunks to bulk-ingest")
    store.add_argument("--queries", type=int, default=200)
    store.add_argument("--no-model", action="store_true",
                       help="skip the part that needs the real embedding model")
    store.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    store.add_argument("--json", action="store_true")
    store.set_defaults(func=cmd_bench_store)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
