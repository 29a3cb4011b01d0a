"""`narratoria loadtest`: N concurrent sessions against a daemon (``bench/loadtest.py``):
turns/s, latency per phase, skill processes against their limit, fairness, leaks.

Starts a daemon of its own (in a temporary data dir) when none answers, or with
``--start-daemon``. The sessions it opens are ended when it finishes, fails or is
interrupted (``bench/loadtest.py``). Exit status: ``FAILED`` when a turn failed, the
skill limit was exceeded or a process leaked.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from narratoria.clients.output import ExitCode, emit, fail


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "loadtest", help="drive a daemon with N concurrent sessions; turns/s, latency, skills, "
                         "leaks",
        description="N clients, each its own session, play M turns (text turns through the "
                    "daemon's planner, or --plan's fixed plan, execute_only, to load skills "
                    "alone). Reports turns/s, latency p50/p95/p99 per phase, skill invocations/s, "
                    "queue, failures by category, peak live skill processes against the limit, "
                    "fairness and leaked processes (must be 0). Starts its own daemon (in a "
                    "temporary data dir) when none answers, or with --start-daemon. Its sessions "
                    "are ended when it finishes or is interrupted. Exit 1 if a "
                    "turn failed, the limit was exceeded or a process leaked.")
    p.add_argument("--clients", type=int, default=4, metavar="N", help="concurrent sessions (4)")
    p.add_argument("--turns", type=int, metavar="M",
                   help="turns per client (default 3; with --duration: no cap)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="play until S seconds have passed (with --turns: whichever comes first)")
    p.add_argument("--plan", metavar="PLAN.json", help="a fixed plan, run execute_only")
    p.add_argument("--skills-dir", action="append", metavar="DIR",
                   help="an extra skill root for the daemon the loadtest starts (repeatable)")
    p.add_argument("--skill-concurrency", type=int, metavar="K",
                   help="the daemon's skill process limit (serve --skill-limit) for a daemon "
                        "the loadtest starts; a running daemon's is reported, not changed")
    p.add_argument("--flood", type=int, default=0, metavar="F",
                   help="F more sessions play --flood-plan over and over while the N clients "
                        "play: are their turns starved?")
    p.add_argument("--flood-plan", metavar="PLAN.json",
                   help="the flood's plan (execute_only), e.g. many parallel tools")
    p.add_argument("--planner", choices=("model", "pattern"),
                   help="the planner of a daemon the loadtest starts (default: the model)")
    p.add_argument("--skill-containment", choices=("auto", "cgroup", "subreaper", "off"),
                   help="the skill containment of a daemon the loadtest starts (serve "
                        "--skill-containment; 'off' shows what the leak scan catches)")
    p.add_argument("--address", metavar="ADDR",
                   help="the daemon to drive (default: NARRATORIA_ADDRESS or the default socket)")
    p.add_argument("--start-daemon", action="store_true",
                   help="start a daemon of its own even if one is running")
    p.add_argument("--json", action="store_true", help="print one final JSON document")
    p.set_defaults(func=cmd_loadtest)


def cmd_loadtest(args: argparse.Namespace) -> int:
    bad = ExitCode.BAD_INPUT
    if args.clients < 1 or (args.turns is not None and args.turns < 1):
        return fail("--clients and --turns must be at least 1", bad)
    if args.skill_concurrency is not None and args.skill_concurrency < 1:
        return fail("--skill-concurrency must be at least 1", bad)
    turns = args.turns if args.turns is not None or args.duration else 3
    plans: dict[str, str | None] = {"--plan": None, "--flood-plan": None}
    for option, path in (("--plan", args.plan), ("--flood-plan", args.flood_plan)):
        if not path:
            continue
        try:
            plans[option] = Path(path).read_text(encoding="utf-8")
            json.loads(plans[option] or "")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return fail(f"{option} {path}: {exc}", bad)
    plan = plans["--plan"]
    if args.flood < 0 or bool(args.flood) != bool(args.flood_plan):
        return fail("--flood F and --flood-plan PLAN.json go together", bad)
    for extra in args.skills_dir or []:
        if not Path(extra).is_dir():
            return fail(f"--skills-dir {extra}: not a directory", bad)
    from narratoria.bench.daemon import ServeDaemon
    from narratoria.bench.loadtest import adopt_orphans, daemon_running, run_loadtest
    from narratoria.bench.report import machine, say
    from narratoria.clients.client import ClientError, NarratoriaClient
    from narratoria.runtime.host.endpoint import EndpointError

    progress = not args.json
    daemon = None
    tmp = None
    adopter: int | None = None
    try:
        address = args.address
        if args.start_daemon or not daemon_running(address):
            extra = [f"--skills-dir={str(Path(d).resolve())}" for d in args.skills_dir or []]
            if args.skill_concurrency:
                extra += ["--skill-limit", str(args.skill_concurrency)]
            if args.planner:
                extra += ["--planner", args.planner]
            if args.skill_containment:
                extra += ["--skill-containment", args.skill_containment]
            tmp = tempfile.TemporaryDirectory(prefix="nl-", dir="/tmp")  # a short socket path
            say(progress, "starting a daemon (" + " ".join(["serve", *extra]) + ")")
            adopter = adopt_orphans(progress)
            daemon = ServeDaemon(Path(tmp.name), *extra)
            address = daemon.address
        elif args.skills_dir or args.planner or args.skill_containment:
            say(progress, "note: --skills-dir/--planner/--skill-containment apply only to a "
                          "daemon the loadtest starts (--start-daemon)")

        def factory() -> NarratoriaClient:
            return NarratoriaClient(address, timeout_s=600)

        with factory() as client:
            limit = client.status().skill_process_limit
        if args.skill_concurrency and limit != args.skill_concurrency:
            say(progress, f"note: the daemon's skill limit is {limit}, not "
                          f"{args.skill_concurrency} (restart it with --skill-limit, or use "
                          "--start-daemon)")
        say(progress, f"{args.clients} clients x {turns or 'unlimited'} turns"
                      + (f" for {args.duration} s" if args.duration else "")
                      + (f", plan {args.plan}" if plan else ", text turns")
                      + f", skill limit {limit}")
        report = run_loadtest(factory, args.clients, turns, plan=plan, duration_s=args.duration,
                              progress=progress, skill_concurrency=args.skill_concurrency,
                              flood_plan=plans["--flood-plan"], flood_clients=args.flood,
                              adopter=adopter, keep=[daemon.proc.pid] if daemon else [])
    except (ClientError, EndpointError, RuntimeError) as exc:
        return fail(str(exc), ExitCode.FAILED)
    finally:
        if daemon is not None:
            daemon.stop()
        if tmp is not None:
            tmp.cleanup()
    report = {"machine": machine(), "address": address, "startedDaemon": daemon is not None,
              "daemonStartupS": daemon.ready.get("startupS") if daemon else None,
              "plan": args.plan, **report}
    emit(report, args.json, report["summary"])
    return ExitCode.SUCCESS if report["ok"] else ExitCode.FAILED
