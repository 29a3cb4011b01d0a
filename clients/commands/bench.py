"""`narratoria bench SUITE`: the benchmarks of ``narratoria.bench`` (``bench/``).

Each suite prints its summary (or, with ``--json``, its whole report) and with
``--write FILE`` appends a dated section to FILE (BENCHMARKS.md) with the command line
that made it. Exit status: ``FAILED`` when ``ingest-load``'s ingestion failed,
``crash`` lost or half-wrote an acknowledged turn, or ``long``'s context grew or it
forgot a planted fact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from narratoria.clients.commands.options import add_write, positive_int
from narratoria.clients.output import ExitCode, emit


def _emit_report(args: argparse.Namespace, report: dict[str, Any],
                 write_markdown: Callable[[Path, dict[str, Any], str], None]) -> None:
    """Append to --write FILE with the command line, then print JSON or the summary."""
    if args.write:
        write_markdown(Path(args.write), report, " ".join(["narratoria", *sys.argv[1:]]))
    emit(report, args.json, report["summary"])


def cmd_bench_protocol(args: argparse.Namespace) -> int:
    from narratoria.bench.protocol import run_protocol_bench, write_markdown

    report = run_protocol_bench(iterations=args.iterations, parallel=args.parallel,
                                progress=not args.json)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def cmd_bench_store(args: argparse.Namespace) -> int:
    from narratoria.bench.store import run_store_bench, write_markdown

    report = run_store_bench(memories=args.memories, records=args.records, lore=args.lore,
                             queries=args.queries, with_model=not args.no_model,
                             progress=not args.json)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def cmd_bench_turn(args: argparse.Namespace) -> int:
    from narratoria.bench.turn import run_turn_bench, write_markdown

    serve = ("--model-slots", str(args.model_slots)) if args.model_slots else ()
    report = run_turn_bench(clients=args.clients, turns_each=args.turns, raw_turns=args.raw_turns,
                            progress=not args.json, serve_args=serve)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def cmd_bench_skills(args: argparse.Namespace) -> int:
    from narratoria.bench.skills import run_skills_bench, write_markdown

    report = run_skills_bench(iterations=args.iterations, progress=not args.json)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    from narratoria.bench.ingest import run_ingest_bench, write_markdown

    report = run_ingest_bench(iterations=args.iterations, progress=not args.json,
                              campaign=Path(args.campaign) if args.campaign else None,
                              files=args.files)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def cmd_bench_ingest_load(args: argparse.Namespace) -> int:
    from narratoria.bench.ingest_load import run, write_markdown

    report = run(args.files, args.turns, progress=not args.json)
    _emit_report(args, report, write_markdown)
    return ExitCode.FAILED if report["ingestError"] else ExitCode.SUCCESS


def cmd_bench_crash(args: argparse.Namespace) -> int:
    from narratoria.bench.crash import run_crash_bench, write_markdown

    report = run_crash_bench(cycles=args.cycles, writers=args.writers, progress=not args.json,
                             seed=args.seed)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS if report["passed"] else ExitCode.FAILED


def cmd_bench_long(args: argparse.Namespace) -> int:
    from narratoria.bench.long import run_long_bench, write_markdown

    # Progress on stderr even with --json (stdout stays the report): a run of
    # hundreds of turns is long to watch in silence.
    report = run_long_bench(args.turns, progress=True)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS if report["passed"] else ExitCode.FAILED


def _outputs(suite: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int]) -> None:
    """What every suite ends with: ``--write FILE``, ``--json`` and its handler."""
    add_write(suite)
    suite.add_argument("--json", action="store_true")
    suite.set_defaults(func=func)


def cmd_bench_batch(args: argparse.Namespace) -> int:
    from narratoria.bench.batch import run_batch_bench, write_markdown

    report = run_batch_bench(args.sizes, tokens=args.tokens, rounds=args.rounds,
                             progress=not args.json)
    _emit_report(args, report, write_markdown)
    return ExitCode.SUCCESS


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks (results can be appended to BENCHMARKS.md)")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="SUITE", required=True)
    proto = bench_sub.add_parser("protocol", help="skill invocation overhead vs a bare spawn")
    proto.add_argument("--iterations", type=int, default=40)
    proto.add_argument("--parallel", type=int, default=8, help="tools in the parallel plan")
    _outputs(proto, cmd_bench_protocol)
    store = bench_sub.add_parser("store", help="engine and persistence layer on DuckDB files")
    store.add_argument("--memories", type=int, default=10_000, help="engine memories (hash)")
    store.add_argument("--records", type=int, default=10_000, help="store records (MiniLM)")
    store.add_argument("--lore", type=int, default=2_500, help="lore chunks to bulk-ingest")
    store.add_argument("--queries", type=int, default=200)
    store.add_argument("--no-model", action="store_true",
                       help="skip the part that needs the real embedding model")
    _outputs(store, cmd_bench_store)
    turn = bench_sub.add_parser("turn", help="turn latency and throughput through a real daemon")
    turn.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8], metavar="N",
                      help="concurrent clients, one run each (default: 1 2 4 8)")
    turn.add_argument("--turns", type=int, default=2, help="turns per client per run")
    turn.add_argument("--raw-turns", type=int, default=8,
                      help="turns of the raw-model baseline (same prompts, no daemon)")
    turn.add_argument("--model-slots", type=positive_int, metavar="N",
                      help="the daemon's `serve --model-slots` (default: serve's)")
    _outputs(turn, cmd_bench_turn)
    bskills = bench_sub.add_parser(
        "skills", help="every built-in script's invocation p50/p95 through a warm daemon")
    bskills.add_argument("--iterations", type=positive_int, default=10, metavar="N",
                         help="invocations per script (default 10)")
    _outputs(bskills, cmd_bench_skills)
    bingest = bench_sub.add_parser(
        "ingest", help="campaign validation, cold ingestion, cached reload and one-file edits")
    bingest.add_argument("--iterations", type=positive_int, default=5, metavar="N",
                         help="runs of validation, cached reload and edit (medians; default 5)")
    bingest.add_argument("--files", type=positive_int, default=500, metavar="N",
                         help="files of the generated campaign (default 500)")
    bingest.add_argument("--campaign", metavar="PATH",
                         help="the rich campaign to measure (default: built-in long_ebb)")
    _outputs(bingest, cmd_bench_ingest)
    bload = bench_sub.add_parser(
        "ingest-load", help="turn latency while the daemon ingests a large campaign")
    bload.add_argument("--files", type=positive_int, default=500, metavar="N",
                       help="text files of the generated campaign (default 500)")
    bload.add_argument("--turns", type=positive_int, default=12, metavar="N",
                       help="turns with the daemon idle, the baseline (default 12)")
    _outputs(bload, cmd_bench_ingest_load)
    bcrash = bench_sub.add_parser(
        "crash", help="SIGKILL the whole daemon (Ray included) under a write load, restart, "
                      "check every acknowledged write")
    bcrash.add_argument("--cycles", type=positive_int, default=20, metavar="N",
                        help="kill/restart cycles (default 20)")
    bcrash.add_argument("--writers", type=positive_int, default=4, metavar="N",
                        help="concurrent writer clients (default 4)")
    bcrash.add_argument("--seed", type=int, default=None, help="seed of the kill moments")
    _outputs(bcrash, cmd_bench_crash)
    blong = bench_sub.add_parser(
        "long", help="one session to turn N: turn latency and history tokens at turn 10 and N, "
                     "facts planted at turns 3/5/7 recalled at the end")
    blong.add_argument("--turns", type=positive_int, default=200, metavar="N",
                       help="turns of the session, at least 16 (default 200)")
    _outputs(blong, cmd_bench_long)
    bbatch = bench_sub.add_parser(
        "batch", help="the model's decode tokens/s against the batch's size (continuous batching)")
    bbatch.add_argument("--sizes", type=positive_int, nargs="+", default=[1, 2, 4, 8, 16],
                        metavar="B", help="batch sizes, one run each (default: 1 2 4 8 16)")
    bbatch.add_argument("--tokens", type=positive_int, default=64, metavar="N",
                        help="new tokens per sequence (default 64)")
    bbatch.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                        help="rounds per size; the median is reported (default 3)")
    _outputs(bbatch, cmd_bench_batch)
