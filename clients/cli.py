"""The `narratoria` command line.

Subcommands are thin: they parse arguments, call the runtime (local commands) or
the daemon over gRPC (``status``, ``session``, ``turn --session``, ``play``), and
print either a human summary or, with ``--json``, JSON on stdout: one document, or
one object a line for a streamed turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable, Sequence

import msgspec

from narratoria.runtime.host.endpoint import EndpointError
from narratoria.runtime.host.paths import default_data_dir
from narratoria.runtime.planner import PatternPlanner
from narratoria.runtime.skillrun.executor import ExecutorConfig, ExecutorEvent, PlanExecutor
from narratoria.runtime.skillrun.plan import PlanError, load_plan
from narratoria.runtime.skills import SkillRegistry, builtin_skills_dir, user_skills_dir
from narratoria.runtime.skills import config as skill_config
from narratoria.runtime.skills.conformance import check_skill
from narratoria.runtime.state import SessionState
from narratoria.runtime.turn.analytics import AnalyticsLog
from narratoria.runtime.turn.replan import ReplanLoop

from narratoria.clients import play
from narratoria.clients.client import ClientError, NarratoriaClient, campaign_ref, event_to_dict, message_to_dict
from narratoria.clients.render import (
    TurnRenderer,
    format_session,
    format_session_line,
    format_state,
    format_status,
)

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
    tool_timeout = args.tool_timeout or defaults.tool_timeout_s
    plan_timeout = args.plan_timeout or defaults.plan_timeout_s
    # The daemon's default caps, widened to the timeouts asked for here on purpose.
    caps = replace(defaults.caps, tool_timeout_s=max(defaults.caps.tool_timeout_s, tool_timeout),
                   plan_timeout_s=max(defaults.caps.plan_timeout_s, plan_timeout))
    return PlanExecutor(registry, ExecutorConfig(
        max_concurrency=args.concurrency or defaults.max_concurrency,
        tool_timeout_s=tool_timeout, plan_timeout_s=plan_timeout, caps=caps,
        # Local development only (`plan run`); the daemon has no such switch.
        allow_script_paths=bool(getattr(args, "allow_script_paths", False)),
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


# -- daemon commands ---------------------------------------------------------------------

Command = Callable[[argparse.Namespace], int]


def _client_command(func: Command) -> Command:
    """Report a daemon error or a bad NARRATORIA_ADDRESS in one line, never a traceback:
    exit 2 for a request the daemon calls invalid, 1 for everything else it refused."""
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except EndpointError as exc:
            return _fail(str(exc))
        except ClientError as exc:
            return _fail(str(exc), 2 if exc.code == "INVALID_ARGUMENT" else 1)
    run.__name__ = func.__name__
    return run


def _print_json_line(doc: Any) -> None:
    # Flushed per line so a reader sees each streamed event as it happens.
    sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def cmd_status(args: argparse.Namespace) -> int:
    with NarratoriaClient() as client:
        status = client.status()
    if args.json:
        _print_json(message_to_dict(status))
    else:
        sys.stdout.write(format_status(status))
    return 0


def cmd_session_new(args: argparse.Namespace) -> int:
    initial = _load_state(args.state).tree if args.state else None
    with NarratoriaClient() as client:
        session = client.create_session(campaign=campaign_ref(args.campaign or ""),
                                        title=args.title or "", character_id=args.character or "",
                                        state=initial)
    if args.json:
        _print_json(message_to_dict(session))
    else:
        print(session.id)
    return 0


def cmd_session_list(args: argparse.Namespace) -> int:
    with NarratoriaClient() as client:
        sessions = client.list_sessions(include_ended=args.all)
    if args.json:
        _print_json({"sessions": [message_to_dict(s) for s in sessions]})
    elif not sessions:
        print("no sessions" if args.all else "no active sessions (--all shows ended ones)")
    else:
        sys.stdout.write("".join(format_session_line(s) for s in sessions))
    return 0


def cmd_session_branch(args: argparse.Namespace) -> int:
    """Rewind: a new session retrying --session from scene --at-scene (default: the last)."""
    with NarratoriaClient() as client:
        session = client.branch(args.session, at_scene=args.at_scene or 0)
    if args.json:
        _print_json(message_to_dict(session))
    else:
        print(session.id)
        print(f"branched from {session.parent_session_id} at scene {session.branched_at_scene}: "
              f"scene {session.branched_at_scene} is next (the old session is unchanged)",
              file=sys.stderr)
    return 0


def cmd_session_cancel(args: argparse.Namespace) -> int:
    with NarratoriaClient() as client:
        reply = client.cancel_turn(args.id)
    if args.json:
        _print_json(message_to_dict(reply))
    elif reply.cancelled:
        print(f"turn {reply.turn_id} cancelled; session {args.id} is as it was before it")
    else:
        print(f"nothing cancelled: {reply.reason}")
    return 0 if reply.cancelled else 1


def cmd_session_end(args: argparse.Namespace) -> int:
    with NarratoriaClient() as client:
        session = client.end_session(args.id)
    if args.json:
        _print_json(message_to_dict(session))
    else:
        print(f"session {session.id} {session.status} after {session.turns} turns")
    return 0


def cmd_session_show(args: argparse.Namespace) -> int:
    with NarratoriaClient() as client:
        session = client.resume_session(args.id)
        state = client.get_state(args.id)
    if args.json:
        _print_json({"session": message_to_dict(session), "state": message_to_dict(state)})
    else:
        sys.stdout.write(format_session(session) + "\n" + format_state(state))
    return 0


def cmd_daemon_turn(args: argparse.Namespace) -> int:
    """One turn of a daemon session, streamed as it happens."""
    with NarratoriaClient() as client:
        renderer = TurnRenderer(verbose=args.verbose)
        plan_json = _read_plan_json(args.plan) if args.plan else None
        for ev in client.turn(args.session, text=args.text, choice=args.choice,
                              plan_json=plan_json, execute_only=args.execute_only):
            text = renderer.feed(ev)  # under --json too: it notes the turn's end
            if args.json:
                _print_json_line(event_to_dict(ev))
            else:
                sys.stdout.write(text)
                sys.stdout.flush()
    if renderer.done is None:
        return _fail("the turn's stream ended before the turn did", 1)
    return 0


def _read_plan_json(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"narratoria: --plan {path}: cannot be read: {exc}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    # Imported here: the daemon pulls in Ray and the model, which no other command needs.
    try:
        from narratoria.actors.daemon import serve_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("narratoria.actors.daemon", "narratoria.actors"):
            raise
        return _fail("this build has no daemon (narratoria.actors.daemon is missing)", 1)
    return serve_main(args)


def cmd_web(args: argparse.Namespace) -> int:
    """The web front-end: a gateway (HTTP, a gRPC client of the daemon) serving the page."""
    from narratoria.clients.web.gateway import DEFAULT_MAX_BODY, GatewayError, parse_size
    from narratoria.clients.web.gateway import serve as serve_web

    try:
        max_body = parse_size(args.max_body) if args.max_body else DEFAULT_MAX_BODY
    except GatewayError as exc:
        return _fail(str(exc), 2)
    return serve_web(listen=args.listen, socket=args.socket, token=args.token,
                     allow_hosts=args.allow_host or (), max_body=max_body, json_output=args.json)


# -- turn --------------------------------------------------------------------------------

_LOCAL_ONLY = {"state": "--state", "concurrency": "--concurrency",
               "tool_timeout": "--tool-timeout", "plan_timeout": "--plan-timeout",
               "analytics_log": "--analytics-log", "skills_dir": "--skills-dir"}


def cmd_turn(args: argparse.Namespace) -> int:
    """``turn --local TEXT`` plays in this process; ``turn --session ID`` asks the daemon."""
    if args.local:
        if args.session or args.choice is not None:
            return _fail("turn --local takes TEXT only (no --session or --choice)")
        if args.text is None:
            return _fail("turn --local needs the player's TEXT")
        return cmd_local_turn(args)
    local_only = [flag for name, flag in _LOCAL_ONLY.items() if getattr(args, name)]
    if local_only:
        return _fail(f"{', '.join(local_only)} only apply to a --local turn")
    if not args.session:
        return _fail("turn needs --session ID (a daemon session; see `narratoria session new`) "
                     "or --local to play without the daemon")
    if args.text is not None and args.choice is not None:
        return _fail("turn takes the player's TEXT or --choice N, exactly one of them")
    if args.text is None and args.choice is None and not args.plan:
        return _fail("turn takes the player's TEXT or --choice N, exactly one of them "
                     "(or only a --plan to run)")
    if args.execute_only and not args.plan:
        return _fail("--execute-only applies to a --plan turn")
    if args.choice is not None and args.choice < 1:
        return _fail(f"--choice {args.choice}: choices are numbered from 1")
    return _client_command(cmd_daemon_turn)(args)


def cmd_local_turn(args: argparse.Namespace) -> int:
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
            "skills": [{**s.summary(), "envReads": skill_config.env_reads(s)}
                       for s in d.skills.values()],
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
        if reads := skill_config.env_reads(skill):
            # Settings resolve from the daemon's environment: what the skill is granted.
            print(f"    reads environment: {skill_config.describe_env_reads(reads)}")
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


def _find_skill(args: argparse.Namespace):
    registry = SkillRegistry(_roots(args))
    skill = registry.get(args.skill)
    if skill is None:
        known = ", ".join(sorted(registry.skills)) or "none"
        raise SystemExit(_fail(f"unknown skill {args.skill!r} (known: {known})"))
    return skill


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key.strip(), value


def _show_value(row: dict[str, Any]) -> str:
    value = row["value"]
    if row["sensitive"]:
        return value if value is not None else "(not set)"
    return "(not set)" if value is None else json.dumps(value, ensure_ascii=False)


def cmd_skills_config(args: argparse.Namespace) -> int:
    skill = _find_skill(args)
    if args.set or args.unset:
        try:
            skill_config.update_config(skill, args.set or [], args.unset or [])
        except skill_config.ConfigError as exc:
            for problem in exc.problems:
                _err(problem)
            _err(f"nothing saved to {skill_config.config_path(skill)}")
            return 2
        if not args.json:
            print(f"saved {skill_config.config_path(skill)}", file=sys.stderr)
    view = skill_config.describe(skill)
    if args.json:
        _print_json(view)
        return 0
    state = "enabled" if view["enabled"] else "disabled"
    print(f"{skill.name} ({state}) — settings in {view['configPath']}")
    if not view["fields"]:
        print("    no settings (no references/config-schema.json properties)")
    for row in view["fields"]:
        kind = row["type"]
        if row["enum"] is not None:
            kind += " (" + " | ".join(str(o) for o in row["enum"]) + ")"
        if row["minimum"] is not None or row["maximum"] is not None:
            low = "" if row["minimum"] is None else row["minimum"]
            high = "" if row["maximum"] is None else row["maximum"]
            kind += f" [{low}..{high}]"
        flags = [row["source"]] + (["required"] if row["required"] else []) \
            + (["sensitive"] if row["sensitive"] else [])
        refs = "".join(f" from ${{{v}}}" for v in row["envVars"])
        print(f"  {row['name']} = {_show_value(row)}{refs}    {kind}, {', '.join(flags)}")
        if row["description"]:
            print(f"      {row['description']}")
    print(f"  reads environment: {skill_config.describe_env_reads(view['envReads'])}")
    for problem in view["problems"]:
        print(f"  problem: {problem}")
    return 0


def cmd_skills_enable(args: argparse.Namespace) -> int:
    skill = _find_skill(args)
    enabled = args.skills_command == "enable"
    try:
        changed = skill_config.set_enabled(skill.name, enabled)
    except skill_config.ConfigError as exc:
        return _fail(str(exc))
    if args.json:
        _print_json({"skill": skill.name, "enabled": enabled, "changed": changed,
                     "settingsPath": str(skill_config.settings_path())})
    else:
        word = "enabled" if enabled else "disabled"
        print(f"{skill.name} {word}" + ("" if changed else " (already)")
              + " — takes effect on the next turn")
    return 0


# -- campaigns ---------------------------------------------------------------------------
# Local commands: the campaign folder is read here. Imported when used, so the
# other commands do not pay for tiktoken, DuckDB or the embedder.

def _problem_docs(problems) -> list[dict[str, Any]]:
    return [{"file": p.file, "line": p.line, "field": p.field, "message": p.message,
             "severity": p.severity} for p in problems]


def cmd_campaigns_validate(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import validate

    report = validate(Path(args.path))
    if args.json:
        m = report.manifest
        _print_json({"ok": report.ok, "path": str(report.root),
                     "campaign": None if m is None else {"id": m.id, "title": m.title,
                                                         "version": m.version},
                     "files": len(report.files), "problems": _problem_docs(report.problems)})
    else:
        for problem in report.problems:  # paths from here, so an editor can jump to them
            print(f"{Path(args.path) / problem.file}:{problem.line}: {problem.field}: "
                  f"{problem.message}" + (" (warning)" if problem.severity == "warning" else ""))
        verdict = "valid" if report.ok else "invalid"
        print(f"{args.path}: {verdict}: {len(report.errors)} error(s), "
              f"{len(report.warnings)} warning(s), {len(report.files)} file(s)",
              file=sys.stderr if report.problems else sys.stdout)
    return 0 if report.ok else 1


def cmd_campaigns_ingest(args: argparse.Namespace) -> int:
    if not args.data_dir:
        # A running daemon holds the database: it ingests, and reports its progress.
        try:
            with NarratoriaClient(timeout_s=2) as client:
                client.status()
                return _ingest_through(client, args)
        except ClientError as exc:
            if exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                return _fail(str(exc), 1)
    return _ingest_here(args)


def _ingest_through(client: NarratoriaClient, args: argparse.Namespace) -> int:
    path = Path(args.path)
    ref = str(path.resolve()) if path.exists() else args.path  # else: a campaign id
    try:
        for progress in client.ingest_campaign(ref):
            if progress.result_json:
                result = json.loads(progress.result_json)
            elif progress.phase in ("files", "embedding") or progress.done == progress.total:
                print(f"  {progress.phase}: {progress.done}/{progress.total}", file=sys.stderr)
    except ClientError as exc:
        if args.json:
            _print_json({"status": "invalid" if exc.code == "INVALID_ARGUMENT" else "error",
                         "message": exc.message})
        return _fail(exc.message, 1)
    if args.json:
        _print_json({**result, "via": "daemon"})
    else:
        print(f"{result['campaignId']} {result['version']}: {result['totalFiles']} file(s), "
              f"{result['textChunks']} chunk(s) ({result['chunksEmbedded']} embedded, "
              f"{result['chunksReused']} reused, {result['chunksRemoved']} removed), "
              f"{result['binaryAssets']} asset(s) in {result['totalIngestionMs']:.0f} ms "
              "(by the running daemon)")
    return 0


def _campaign_path(ref: str, data_dir: Path) -> Path:
    """A folder or package path as given; else a built-in or user campaign's id."""
    from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound

    if Path(ref).exists():
        return Path(ref)
    try:
        return CampaignLibrary(data_dir).locate(ref)
    except CampaignNotFound as exc:
        raise SystemExit(_fail(str(exc.args[0]), 1)) from None


def _ingest_here(args: argparse.Namespace) -> int:
    import duckdb

    from narratoria.runtime.campaign import CampaignError, ingest
    from narratoria.runtime.db import DB_FILENAME, DatabaseLocked, connect
    from narratoria.runtime.embedding import make_backend
    from narratoria.runtime.store import PersistenceStore

    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    try:
        con = connect(data_dir / DB_FILENAME)
    except DatabaseLocked as exc:  # names the file and the daemon's pid
        return _fail(f"{exc}: stop `narratoria serve` or pass another --data-dir", 1)
    except duckdb.IOException as exc:
        return _fail(f"cannot open {data_dir / DB_FILENAME}: {exc}", 1)

    def progress(phase: str, done: int, total: int) -> None:
        if phase in ("files", "embedding") or done == total:
            print(f"  {phase}: {done}/{total}", file=sys.stderr)

    try:
        with PersistenceStore(con, make_backend()) as store:
            result = ingest(_campaign_path(args.path, data_dir), store, progress=progress)
    except CampaignError as exc:
        if args.json:
            _print_json({"status": "invalid", "problems": _problem_docs(exc.problems)})
        for problem in exc.problems:
            _err(str(problem))
        return 1
    finally:
        con.close()
    if args.json:
        _print_json(result)
    else:
        print(f"{result.campaign_id} {result.version}: {result.total_files} file(s), "
              f"{result.text_chunks} chunk(s) ({result.chunks_embedded} embedded, "
              f"{result.chunks_reused} reused, {result.chunks_removed} removed), "
              f"{result.binary_assets} asset(s) in {result.total_ingestion_ms:.0f} ms")
        for warning in result.warnings:
            print(f"  warning: {warning}")
    return 0


def cmd_campaigns_pack(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import CampaignError, pack

    try:
        result = pack(Path(args.path), Path(args.output))
    except CampaignError as exc:
        if args.json:
            _print_json({"status": "invalid", "problems": _problem_docs(exc.problems)})
        for problem in exc.problems:
            _err(str(problem))
        _err(f"{args.path}: not packed")
        return 1
    if args.json:
        _print_json({"status": "packed", "output": str(result.output), "campaign": result.campaign_id,
                     "version": result.version, "files": result.files, "bytes": result.bytes})
    else:
        print(result.output)
    return 0


def cmd_campaigns_list(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import builtin_campaigns_dir, list_campaigns, user_campaigns_dir

    entries = list_campaigns()
    saves = _saves_by_campaign()
    if args.json:
        _print_json({"builtinDir": str(builtin_campaigns_dir()), "userDir": str(user_campaigns_dir()),
                     "campaigns": [{"source": e.source, "path": str(e.path), "kind": e.kind,
                                    "id": e.id, "title": e.title, "version": e.version,
                                    "valid": e.valid, "errors": e.errors, "warnings": e.warnings,
                                    "saves": saves.get(e.id or "", [])}
                                   for e in entries],
                     "savesKnown": saves is not _NO_DAEMON})
        return 0
    if not entries:
        print(f"no campaigns (built-in: {builtin_campaigns_dir()}, user: {user_campaigns_dir()})")
    for e in entries:
        state = "valid" if e.valid else f"INVALID ({len(e.errors)} error(s))"
        print(f"{e.id or '?'}\t{e.version or '?'}\t{e.title or '?'}\t[{e.source}] {e.path}\t{state}")
        for save in saves.get(e.id or "", []):
            print(f"  resume: narratoria play --session {save['id']}\t{save['turns']} turn(s)"
                  f"\t{save['title'] or ''}")
    return 0


_NO_DAEMON: dict[str, list[dict[str, Any]]] = {}


def _saves_by_campaign() -> dict[str, list[dict[str, Any]]]:
    """Playthroughs to resume (§6.3.6), by campaign id, from the running daemon (which
    holds the sessions); none when no daemon answers."""
    try:
        with NarratoriaClient(timeout_s=2) as client:
            sessions = client.list_sessions()
    except ClientError:
        return _NO_DAEMON
    saves: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(sessions, key=lambda s: -s.updated_at_ms):
        if s.campaign:
            saves.setdefault(s.campaign, []).append(
                {"id": s.id, "title": s.title, "turns": s.turns, "updatedAtMs": s.updated_at_ms})
    return saves


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
    from narratoria.clients.bench import run_protocol_bench, write_markdown

    report = run_protocol_bench(iterations=args.iterations, parallel=args.parallel,
                                progress=not args.json)
    return _emit_report(args, report, write_markdown)


def cmd_bench_store(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_store import run_store_bench, write_markdown

    report = run_store_bench(memories=args.memories, records=args.records, lore=args.lore,
                             queries=args.queries, with_model=not args.no_model,
                             progress=not args.json)
    return _emit_report(args, report, write_markdown)


def cmd_bench_turn(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_turn import run_turn_bench, write_markdown

    report = run_turn_bench(clients=args.clients, turns_each=args.turns, raw_turns=args.raw_turns,
                            progress=not args.json)
    return _emit_report(args, report, write_markdown)


def cmd_bench_skills(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_skills import run_skills_bench, write_markdown

    report = run_skills_bench(iterations=args.iterations, progress=not args.json)
    return _emit_report(args, report, write_markdown)


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_ingest import run_ingest_bench, write_markdown

    report = run_ingest_bench(iterations=args.iterations, progress=not args.json,
                              campaign=Path(args.campaign) if args.campaign else None,
                              files=args.files)
    return _emit_report(args, report, write_markdown)


def cmd_bench_ingest_load(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_ingest_load import run, write_markdown

    report = run(args.files, args.turns, progress=not args.json)
    _emit_report(args, report, write_markdown)
    return 0 if not report["ingestError"] else 1


def cmd_bench_crash(args: argparse.Namespace) -> int:
    from narratoria.clients.bench_crash import run_crash_bench, write_markdown

    report = run_crash_bench(cycles=args.cycles, writers=args.writers, progress=not args.json,
                             seed=args.seed)
    _emit_report(args, report, write_markdown)
    return 0 if report["passed"] else 1


# -- eval --------------------------------------------------------------------------------

def cmd_eval_planner(args: argparse.Namespace) -> int:
    """Plan a JSONL dataset with the real planner path (no daemon) and score the plans."""
    from narratoria.runtime.planner import ModelError, evaluate as ev

    registry = SkillRegistry([builtin_skills_dir()])
    # Every built-in skill by default: a score should not depend on this machine's settings.
    scripts = tuple(registry.scripts(include_disabled=not args.enabled_only))
    try:  # the dataset is checked before the model is loaded
        cases = ev.load_dataset(args.dataset, {s.skill for s in scripts})
    except ev.DatasetError as exc:
        return _fail(str(exc))
    cases = cases[:args.limit] if args.limit else cases
    from narratoria.runtime.embedding import share_cores_with_llama

    share_cores_with_llama()  # the router's embedder and the model share this process
    try:
        planner = ev.default_planner(args.model, registry)
    except ModelError as exc:
        return _fail(str(exc), 2 if args.model else 1)

    def progress(index: int, total: int, outcome: Any) -> None:
        print(ev.progress_line(index, total, outcome), file=sys.stderr, flush=True)

    report = asyncio.run(ev.evaluate(cases, planner, available=scripts, progress=progress,
                                     warmup=not args.no_warmup))
    doc = report.to_json()
    if args.write:
        _write_eval(Path(args.write), doc, args.dataset, ev.format_report(doc))
    if args.json:
        _print_json(doc)
    else:
        print("\n".join(ev.format_report(doc)))
    return 0


EVAL_TARGETS = "valid_rate 1.0, skill_accuracy >= 0.90 (SC-002), p95 < 5 s (SC-001)"


def _write_eval(path: Path, doc: dict[str, Any], dataset: str, summary: list[str]) -> None:
    from narratoria.clients.bench import machine

    m = machine()
    met = (doc["valid_rate"] == 1.0 and (doc["skill_accuracy"] or 0) >= 0.9
           and doc["p95_ms"] is not None and doc["p95_ms"] < 5000)
    text = "\n".join([
        f"\n## eval planner — {datetime.now(UTC).isoformat(timespec='seconds')}\n",
        f"- command: `{' '.join(['narratoria', *sys.argv[1:]])}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- dataset: `{dataset}`; targets: {EVAL_TARGETS} — {'met' if met else 'NOT met'}\n",
        "```", *summary, "```", ""])
    if not path.exists():
        path.write_text("# Benchmarks\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


# -- parser ------------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _add_skill_dirs(p: argparse._ActionsContainer) -> None:
    p.add_argument("--skills-dir", action="append", metavar="DIR",
                   help="an extra skill root (repeatable); later roots override earlier ones")


def _add_exec_options(p: argparse._ActionsContainer) -> None:
    p.add_argument("--state", metavar="FILE", help="initial session state (JSON object)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="max concurrent skill processes (default: CPU count)")
    p.add_argument("--tool-timeout", type=float, metavar="S", help="per-tool timeout (30)")
    p.add_argument("--plan-timeout", type=float, metavar="S", help="per-plan timeout (60)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="narratoria",
        description="Narratoria runtime: plans, skills and the NDJSON tool protocol.",
        epilog="Start the daemon with `narratoria serve`, then `narratoria play`. Without it: "
               "`narratoria skills list`, `narratoria turn --local \"I roll the dice\"` or "
               "`narratoria plan run deploy/examples/demo-plan.json`.",
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
    run.add_argument("--allow-script-paths", action="store_true",
                     help="development only: a toolPath may also be the path of a script file "
                          "outside every skill (the daemon always refuses this)")
    run.set_defaults(func=cmd_plan_run)

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
    local = turn.add_argument_group("--local options")
    _add_skill_dirs(local)
    _add_exec_options(local)
    local.add_argument("--analytics-log", metavar="FILE",
                       help="where attempt records go (default: the data dir's analytics.jsonl)")
    turn.add_argument("--json", action="store_true")
    turn.set_defaults(func=cmd_turn)

    status = sub.add_parser("status", help="the daemon's actors, model, skill processes, sessions")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_client_command(cmd_status))

    session = sub.add_parser("session", help="daemon sessions: new, list, show, branch, cancel, end")
    session_sub = session.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    new = session_sub.add_parser("new", help="create a session and print its id")
    new.add_argument("--campaign", metavar="ID|PATH",
                     help="a built-in or user campaign's id, or a folder or package")
    new.add_argument("--character", metavar="ID",
                     help="play as this fresh character, realised in the campaign")
    new.add_argument("--title", metavar="T")
    new.add_argument("--state", metavar="FILE",
                     help="initial state (JSON object); its \"npcs\" map declares the NPCs: "
                          "id -> {\"name\", \"traits\", \"voice\", \"knows\": [facts]}")
    new.add_argument("--json", action="store_true")
    new.set_defaults(func=_client_command(cmd_session_new))
    branch = session_sub.add_parser(
        "branch", help="rewind: a new session retrying a session from one of its scenes",
        description="Create a new session as --session was after scene N-1, so that scene N "
                    "is played again (default: the last scene). NPCs remember only what "
                    "happened before scene N; the old session is unchanged and can be resumed. "
                    "Prints the new session's id.")
    branch.add_argument("--session", required=True, metavar="ID")
    branch.add_argument("--at-scene", type=_positive_int, metavar="N",
                        help="the scene to play again (1-based; default: the last one)")
    branch.add_argument("--json", action="store_true")
    branch.set_defaults(func=_client_command(cmd_session_branch))
    sls = session_sub.add_parser("list", help="active sessions (--all: ended ones too)")
    sls.add_argument("--all", action="store_true", help="include ended sessions")
    sls.add_argument("--json", action="store_true")
    sls.set_defaults(func=_client_command(cmd_session_list))
    show = session_sub.add_parser("show", help="a session's last narration, choices and state")
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_client_command(cmd_session_show))
    cancel = session_sub.add_parser(
        "cancel", help="cancel the session's turn in flight (its skills are killed, nothing "
                       "is stored)")
    cancel.add_argument("id", metavar="ID")
    cancel.add_argument("--json", action="store_true")
    cancel.set_defaults(func=_client_command(cmd_session_cancel))
    end = session_sub.add_parser("end", help="end a session")
    end.add_argument("id", metavar="ID")
    end.add_argument("--json", action="store_true")
    end.set_defaults(func=_client_command(cmd_session_end))

    play_p = sub.add_parser("play", help="play in the terminal (a daemon session)",
                            description="Create (or --session resume) a session and play it: "
                                        "a number picks a choice, other text is free text; "
                                        "/state, /help, /quit. Reads the terminal, a pipe, "
                                        "--script FILE, or nothing with --auto.")
    play.add_arguments(play_p)
    play_p.set_defaults(func=_client_command(play.cmd_play))

    serve = sub.add_parser("serve", help="run the daemon")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help="unix socket to listen on (default: the data dir's daemon.sock)")
    where.add_argument("--listen", metavar="HOST:PORT",
                       help="listen on TCP instead (clients need the daemon token)")
    serve.add_argument("--data-dir", metavar="DIR", help="sessions, store, token, socket")
    serve.add_argument("--model", metavar="PATH", help="the GGUF model for planning and narration")
    _add_skill_dirs(serve)
    serve.add_argument("--threads", type=_positive_int, metavar="N",
                       help="CPU threads for the model (default: every core)")
    serve.add_argument("--seed", type=int, metavar="N",
                       help="the model's sampling seed (default 42; `eval narration --seed`)")
    serve.add_argument("--narration-mode", choices=("story", "chat", "auto"),
                       help="story: the model continues the scene as prose; chat: it answers "
                            "a chat request; auto (default): chat only for a model of 1B "
                            "parameters or more with a chat template")
    serve.add_argument("--narration-candidates", type=_positive_int, metavar="N",
                       help="story mode keeps the best of N sentences written side by side "
                            "(default 3, at most 8)")
    serve.add_argument("--skill-limit", type=int, metavar="N",
                       help="max concurrent skill processes")
    serve.add_argument("--max-skill-memory-mb", type=_positive_int, metavar="MB",
                       help="the most address space a SKILL.md may ask for (default 4096)")
    serve.add_argument("--max-skill-cpu-s", type=_positive_int, metavar="S",
                       help="the most CPU seconds a SKILL.md may ask for (default 300)")
    serve.add_argument("--max-skill-open-files", type=_positive_int, metavar="N",
                       help="the most open files a SKILL.md may ask for (default 4096)")
    serve.add_argument("--max-tool-timeout-s", type=_positive_int, metavar="S",
                       help="the longest timeout a plan's tool or a SKILL.md may ask for "
                            "(default 300)")
    serve.add_argument("--max-plan-timeout-s", type=_positive_int, metavar="S",
                       help="the longest timeout a plan may ask for (default 600)")
    serve.add_argument("--max-concurrent-rpcs", type=_positive_int, metavar="N",
                       help="gRPC calls in flight at once, a turn's stream included; past it "
                            "a call ends RESOURCE_EXHAUSTED (default 512)")
    serve.add_argument("--planner", choices=("model", "pattern"),
                       help="who plans turns: the model (default) or the pattern planner "
                            "(no model plans: tests, weak devices)")
    serve.add_argument("--embedding-backend", choices=("local", "hash", "openai"),
                       help="the store's embeddings (default: local MiniLM)")
    serve.add_argument("--planner-replicas", type=_positive_int, metavar="N",
                       help="model (planner) actors to start, each with its own model; turns go "
                            "to the least busy (default: 1). On a Ray cluster (RAY_ADDRESS) they "
                            "spread over the nodes; see deploy/ray/README.md")
    serve.add_argument("--planner-resource", metavar="NAME[=AMOUNT]",
                       help="a custom Ray resource each planner replica needs, to pin replicas "
                            "to nodes started with `ray start --resources '{\"NAME\": 1}'`")
    serve.add_argument("--supervisor-resource", metavar="NAME[=AMOUNT]",
                       help="a custom Ray resource the skill supervisor needs: skill processes "
                            "then run on the node that offers it (see deploy/ray/README.md)")
    serve.add_argument("--skill-containment", choices=("auto", "cgroup", "subreaper", "off"),
                       help="how every process a skill starts dies with its invocation: a "
                            "cgroup per invocation where one is writable, else a subreaper "
                            "(auto, the default); 'off' keeps the process group alone, for "
                            "measurements only")
    serve.add_argument("--json", action="store_true")
    serve.set_defaults(func=cmd_serve)

    web = sub.add_parser("web", help="the web front-end: serve the page (a client of the daemon)",
                         description="Serve the web page on http://127.0.0.1:8765/ (--listen). "
                                     "Each start makes a new browser token and prints the URL "
                                     "to open (http://HOST:PORT/?token=...); every request "
                                     "needs it (a cookie that URL sets, or Authorization: "
                                     "Bearer), on loopback too.")
    web.add_argument("--listen", metavar="HOST:PORT", help="where to serve (default 127.0.0.1:8765)")
    web.add_argument("--socket", metavar="PATH", help="the daemon's unix socket "
                                                      "(default: NARRATORIA_ADDRESS or the data dir's)")
    web.add_argument("--token", metavar="TOKEN", help="the daemon token, for the daemon only "
                                                      "(default: NARRATORIA_TOKEN or daemon.token); "
                                                      "browsers never see it")
    web.add_argument("--allow-host", metavar="NAME", action="append",
                     help="one more name browsers may reach the gateway by (its Host header), "
                          "besides localhost, 127.0.0.1, [::1] and the --listen host; repeatable")
    web.add_argument("--max-body", metavar="SIZE", help="the largest request body, e.g. 8M "
                                                        "(default 8M: a 5 MiB portrait as base64)")
    web.add_argument("--json", action="store_true",
                     help="print {url, token, port, ...} as one JSON line on stdout once listening")
    web.set_defaults(func=cmd_web)

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
    cfg = skills_sub.add_parser(
        "config", help="show or change a skill's settings (references/config-schema.json)",
        description="Shows every setting with its value (defaults filled in; secrets masked). "
                    "--set KEY=VALUE parses VALUE by the field's type, validates the whole "
                    "config and saves it only if valid. A value may refer to ${VAR}: it is "
                    "stored as written and read from the environment when the skill runs.")
    cfg.add_argument("skill", metavar="SKILL")
    cfg.add_argument("--set", action="append", type=_assignment, metavar="KEY=VALUE",
                     help="change a setting (repeatable)")
    cfg.add_argument("--unset", action="append", metavar="KEY",
                     help="remove a saved setting, back to its default (repeatable)")
    cfg.add_argument("--json", action="store_true")
    _add_skill_dirs(cfg)
    cfg.set_defaults(func=cmd_skills_config)
    for action, text in (("enable", "offer a skill to the planner again"),
                         ("disable", "never offer a skill to the planner (persisted)")):
        toggle = skills_sub.add_parser(action, help=text)
        toggle.add_argument("skill", metavar="SKILL")
        toggle.add_argument("--json", action="store_true")
        _add_skill_dirs(toggle)
        toggle.set_defaults(func=cmd_skills_enable)

    campaigns = sub.add_parser("campaigns", help="check, ingest, pack and list campaigns "
                                                 "(folders or .narratoria/.zip packages)")
    campaigns_sub = campaigns.add_subparsers(dest="campaigns_command", metavar="ACTION",
                                             required=True)
    cval = campaigns_sub.add_parser(
        "validate", help="every problem of a campaign folder, as file:line: field: message")
    cval.add_argument("path", metavar="PATH", help="the campaign folder or package")
    cval.add_argument("--json", action="store_true")
    cval.set_defaults(func=cmd_campaigns_validate)
    cing = campaigns_sub.add_parser(
        "ingest", help="chunk, embed and store a campaign's lore (progress on stderr)",
        description="Validates the campaign, then stores its chunks in the data dir's database: "
                    "through the running daemon when there is one, else directly. Unchanged "
                    "files are not re-embedded. PATH may be a built-in or user campaign's id.")
    cing.add_argument("path", metavar="PATH", help="the campaign folder or package")
    cing.add_argument("--data-dir", metavar="DIR", help="where the database is (default: the "
                                                        "data dir)")
    cing.add_argument("--json", action="store_true", help="print the completion record")
    cing.set_defaults(func=cmd_campaigns_ingest)
    cpack = campaigns_sub.add_parser(
        "pack", help="write a valid campaign as a .narratoria package (prints its path)",
        description="Validates first; hidden files are left out, symbolic links refused. The same "
                    "folder always gives the same bytes.")
    cpack.add_argument("path", metavar="DIR", help="the campaign folder")
    cpack.add_argument("-o", "--output", metavar="NAME.narratoria", required=True)
    cpack.add_argument("--json", action="store_true")
    cpack.set_defaults(func=cmd_campaigns_pack)
    clist = campaigns_sub.add_parser(
        "list", help="built-in and user campaigns, with id, version, title and whether valid")
    clist.add_argument("--json", action="store_true")
    clist.set_defaults(func=cmd_campaigns_list)
    from narratoria.clients.campaigns_cli import add_campaign_queries  # related, assets: in their own module
    add_campaign_queries(campaigns_sub)

    from narratoria.clients.characters_cli import add_characters_parser  # the command group lives in its own module

    add_characters_parser(sub)
    from narratoria.clients.identities_cli import add_clients_parser

    add_clients_parser(sub)

    from narratoria.clients.loadtest import add_loadtest_parser  # `narratoria loadtest`, in its own module

    add_loadtest_parser(sub)

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
    turn = bench_sub.add_parser("turn", help="turn latency and throughput through a real daemon")
    turn.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8], metavar="N",
                      help="concurrent clients, one run each (default: 1 2 4 8)")
    turn.add_argument("--turns", type=int, default=2, help="turns per client per run")
    turn.add_argument("--raw-turns", type=int, default=8,
                      help="turns of the raw-model baseline (same prompts, no daemon)")
    turn.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    turn.add_argument("--json", action="store_true")
    turn.set_defaults(func=cmd_bench_turn)
    bskills = bench_sub.add_parser(
        "skills", help="every built-in script's invocation p50/p95 through a warm daemon")
    bskills.add_argument("--iterations", type=_positive_int, default=10, metavar="N",
                         help="invocations per script (default 10)")
    bskills.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    bskills.add_argument("--json", action="store_true")
    bskills.set_defaults(func=cmd_bench_skills)
    bingest = bench_sub.add_parser(
        "ingest", help="campaign validation, cold ingestion, cached reload and one-file edits")
    bingest.add_argument("--iterations", type=_positive_int, default=5, metavar="N",
                         help="runs of validation, cached reload and edit (medians; default 5)")
    bingest.add_argument("--files", type=_positive_int, default=500, metavar="N",
                         help="files of the generated campaign (default 500)")
    bingest.add_argument("--campaign", metavar="PATH",
                         help="the rich campaign to measure (default: built-in long_ebb)")
    bingest.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    bingest.add_argument("--json", action="store_true")
    bingest.set_defaults(func=cmd_bench_ingest)
    bload = bench_sub.add_parser(
        "ingest-load", help="turn latency while the daemon ingests a large campaign")
    bload.add_argument("--files", type=_positive_int, default=500, metavar="N",
                       help="text files of the generated campaign (default 500)")
    bload.add_argument("--turns", type=_positive_int, default=12, metavar="N",
                       help="turns with the daemon idle, the baseline (default 12)")
    bload.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    bload.add_argument("--json", action="store_true")
    bload.set_defaults(func=cmd_bench_ingest_load)
    bcrash = bench_sub.add_parser(
        "crash", help="SIGKILL the whole daemon (Ray included) under a write load, restart, "
                      "check every acknowledged write")
    bcrash.add_argument("--cycles", type=_positive_int, default=20, metavar="N",
                        help="kill/restart cycles (default 20)")
    bcrash.add_argument("--writers", type=_positive_int, default=4, metavar="N",
                        help="concurrent writer clients (default 4)")
    bcrash.add_argument("--seed", type=int, default=None, help="seed of the kill moments")
    bcrash.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
    bcrash.add_argument("--json", action="store_true")
    bcrash.set_defaults(func=cmd_bench_crash)

    evals = sub.add_parser("eval", help="measure parts of the runtime against datasets")
    eval_sub = evals.add_subparsers(dest="eval_command", metavar="SUITE", required=True)
    ep = eval_sub.add_parser(
        "planner", help="plan a JSONL dataset with the real planner path and score the plans",
        description="Each line: {\"input\", \"expected_skills\", \"forbidden_skills\", "
                    "\"state\"?}. Plans every input with the default planner (5 s budget, "
                    "pattern-planner fallback) over the built-in skills; reports valid_rate, "
                    "skill_accuracy, p50/p95 latency and per-skill precision/recall. "
                    "No daemon needed; progress goes to stderr.")
    ep.add_argument("--dataset", required=True, metavar="FILE.jsonl")
    ep.add_argument("--model", metavar="PATH", help="the GGUF model (default: SmolLM2-135M)")
    ep.add_argument("--limit", type=_positive_int, metavar="N", help="run the first N cases")
    ep.add_argument("--enabled-only", action="store_true",
                    help="offer only the skills enabled here (default: every built-in skill)")
    ep.add_argument("--no-warmup", action="store_true",
                    help="time the first plan cold too (default: one untimed plan first)")
    ep.add_argument("--json", action="store_true", help="print only the report as JSON")
    ep.add_argument("--write", metavar="FILE", help="append the report to FILE (BENCHMARKS.md)")
    ep.set_defaults(func=cmd_eval_planner)
    from narratoria.clients.eval_narration import add_eval_narration_parser  # `eval narration`, its own module

    add_eval_narration_parser(eval_sub)
    from narratoria.clients.train_cli import add_train_parser  # `train`, its own module

    add_train_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from narratoria.runtime.files import PRIVATE_UMASK

    # Local commands write the data dir without a daemon (campaigns ingest, characters,
    # clients): what they create is private, as what the daemon creates is.
    os.umask(PRIVATE_UMASK)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (`| head`) went away: nothing left to say, and no traceback. Point
        # stdout at /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
