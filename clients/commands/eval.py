"""`narratoria eval planner|narration`: measure parts of the runtime against datasets.

``eval planner`` plans a JSONL dataset with the real planner path in this process (no
daemon) and scores the plans; ``eval narration`` plays a script through a real daemon
and scores every turn (``clients/eval_narration.py``). Either may append its report to
BENCHMARKS.md (``--write``). Exit status: ``BAD_INPUT`` for a dataset, script, model or
document that cannot be used, ``FAILED`` for a campaign that is not there or a daemon
that failed the run.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narratoria.clients.commands.options import positive_int
from narratoria.clients.output import ExitCode, emit, fail

if TYPE_CHECKING:
    from narratoria.runtime.planner.narration_eval import CampaignFacts, ScriptLine, TurnRecord


# -- planner -------------------------------------------------------------------------------

def cmd_eval_planner(args: argparse.Namespace) -> int:
    """Plan a JSONL dataset with the real planner path (no daemon) and score the plans."""
    import asyncio

    from narratoria.runtime.planner import ModelError, evaluate as ev
    from narratoria.runtime.skills import SkillRegistry, builtin_skills_dir

    registry = SkillRegistry([builtin_skills_dir()])
    # Every built-in skill by default: a score should not depend on this machine's settings.
    scripts = tuple(registry.scripts(include_disabled=not args.enabled_only))
    try:  # the dataset is checked before the model is loaded
        cases = ev.load_dataset(args.dataset, {s.skill for s in scripts})
    except ev.DatasetError as exc:
        return fail(str(exc), ExitCode.BAD_INPUT)
    cases = cases[:args.limit] if args.limit else cases
    from narratoria.runtime.embedding import share_cores_with_llama

    share_cores_with_llama()  # the router's embedder and the model share this process
    try:
        planner = ev.default_planner(args.model, registry)
    except ModelError as exc:
        # A --model that does not load is bad input; the default one missing is a failure.
        return fail(str(exc), ExitCode.BAD_INPUT if args.model else ExitCode.FAILED)

    def progress(index: int, total: int, outcome: Any) -> None:
        print(ev.progress_line(index, total, outcome), file=sys.stderr, flush=True)

    report = asyncio.run(ev.evaluate(cases, planner, available=scripts, progress=progress,
                                     warmup=not args.no_warmup))
    doc = report.to_json()
    if args.write:
        _write_eval(Path(args.write), doc, args.dataset, ev.format_report(doc))
    emit(doc, args.json, ev.format_report(doc))
    return ExitCode.SUCCESS


EVAL_TARGETS = "valid_rate 1.0, skill_accuracy >= 0.90, p95 < 5 s"


def _write_eval(path: Path, doc: dict[str, Any], dataset: str, summary: list[str]) -> None:
    from narratoria.bench.report import append_section, machine

    m = machine()
    met = (doc["valid_rate"] == 1.0 and (doc["skill_accuracy"] or 0) >= 0.9
           and doc["p95_ms"] is not None and doc["p95_ms"] < 5000)
    text = "\n".join([
        f"\n## eval planner — {datetime.now(UTC).isoformat(timespec='seconds')}\n",
        f"- command: `{' '.join(['narratoria', *sys.argv[1:]])}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- dataset: `{dataset}`; targets: {EVAL_TARGETS} — {'met' if met else 'NOT met'}\n",
        "```", *summary, "```", ""])
    append_section(path, text)


# -- narration -----------------------------------------------------------------------------

def _campaign(ref: str, scratch: Path) -> tuple[Path, CampaignFacts]:
    """The campaign ``ref`` names and its facts; LookupError when it names none,
    ValueError when it is not a valid campaign."""
    from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
    from narratoria.runtime.campaign.problems import CampaignError
    from narratoria.runtime.planner import narration_eval as ne

    library = CampaignLibrary(scratch)
    try:
        where = library.locate(ref)
        return where, ne.campaign_facts(library.folder(where))
    except CampaignNotFound as exc:
        raise LookupError(f"--campaign: {exc.args[0] if exc.args else exc}") from None
    except CampaignError as exc:
        raise ValueError(f"--campaign {ne.excerpt(ref, budget=100)}: not a valid campaign:\n"
                         f"{exc}") from None


def cmd_eval_narration(args: argparse.Namespace) -> int:
    import json
    import tempfile

    from narratoria.bench.report import say
    from narratoria.clients.eval_narration import build_document, similarities, write_markdown
    from narratoria.runtime.planner import narration_eval as ne

    bad = ExitCode.BAD_INPUT
    if args.address and (args.model or args.seed is not None):
        return fail("--model and --seed choose the daemon started here; a running daemon "
                    "(--address) keeps its own", bad)
    progress = True  # on stderr: --json's document alone goes to stdout
    if not args.script and not args.turns_from:
        return fail("--script FILE.jsonl is required (or --turns-from DOC.json to score saved "
                    "turns)", bad)
    lines: list[ne.ScriptLine] = []
    try:  # everything is checked before a daemon is started
        if args.script:
            lines = ne.load_script(args.script)
    except ne.ScriptError as exc:
        return fail(f"--script: {len(exc.errors)} problem(s):\n" + "\n".join(exc.errors[:20]),
                    bad)
    with tempfile.TemporaryDirectory(prefix="ne-", dir="/tmp") as tmp:
        try:
            where, facts = _campaign(args.campaign, Path(tmp) / "campaigns")
        except LookupError as exc:
            return fail(str(exc), ExitCode.FAILED)
        except ValueError as exc:
            return fail(str(exc), bad)
        if args.turns_from:
            try:
                saved = json.loads(Path(args.turns_from).read_text("utf-8"))
                records = [ne.TurnRecord.from_json(r) for r in saved["turnRecords"]]
                model, daemon = saved.get("model", ""), saved.get("daemon", {})
                seed = saved.get("seed")
                played_on = str(saved["campaign"]["id"])
                script = args.script or str(saved["script"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                return fail(f"--turns-from {args.turns_from}: not an eval narration document "
                            f"({ne.excerpt(str(exc), budget=120)})", bad)
            if played_on != facts.id:
                return fail(f"--turns-from {args.turns_from}: its turns were played on campaign "
                            f"{ne.excerpt(played_on, budget=60)!r}, not {facts.id!r}", bad)
        else:
            try:
                records, model, daemon = _play(args, lines, str(where), Path(tmp), progress)
            except RuntimeError as exc:
                return fail(str(exc), ExitCode.FAILED)
            seed, script = args.seed, args.script
    say(progress, "scoring (MiniLM similarity of every action and reply)")
    doc = build_document(records, facts, script=script, model=model, daemon=daemon,
                         seed=seed, sims=similarities(records))
    if args.write:
        write_markdown(Path(args.write), doc)
    emit(doc, args.json, ne.format_report(doc, examples=True))
    return ExitCode.SUCCESS


def _play(args: argparse.Namespace, lines: list[ScriptLine], campaign: str, tmp: Path,
          progress: bool) -> tuple[list[TurnRecord], str, dict[str, Any]]:
    from narratoria.bench.daemon import ServeDaemon
    from narratoria.bench.report import say
    from narratoria.clients.client import ClientError, NarratoriaClient
    from narratoria.clients.eval_narration import play_script
    from narratoria.runtime.host.endpoint import EndpointError

    daemon = None
    try:
        address = args.address
        if not address:
            extra = [*(["--model", str(Path(args.model).resolve())] if args.model else []),
                     *(["--seed", str(args.seed)] if args.seed is not None else [])]
            say(progress, "starting a daemon (" + " ".join(["serve", *extra]) + ")")
            daemon = ServeDaemon(tmp, *extra)
            address = daemon.address
        with NarratoriaClient(address, timeout_s=600) as client:
            model = client.status().model_path
            say(progress, f"{len(lines)} turns of {Path(campaign).name} on {Path(model).name}")
            records = play_script(client, campaign, lines, lambda text: say(progress, text))
    except (ClientError, EndpointError) as exc:
        raise RuntimeError(str(exc)) from None
    finally:
        if daemon is not None:
            daemon.stop()
    info = {"started": daemon is not None, "address": address,
            "startupS": daemon.ready.get("startupS") if daemon else None}
    return records, model, info


def _register_narration(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "narration", help="play a script of actions through a real daemon and score the "
                          "narration and choices of every turn",
        description="Each script line (JSONL): {\"session\", \"text\" | \"choice\", \"tags\"?, "
                    "\"note\"?}. Plays every line as a turn of a new session per script session "
                    "(a daemon of its own on a temporary data dir, unless --address), then "
                    "scores: meta talk, the narrator's first person, speaking for the player, "
                    "unsafe content for the campaign's content_rating, entity recall and "
                    "misspelt names, relevance (MiniLM), repetition of the last turn, broken "
                    "choices, dice consistency; turn p50/p95. Progress goes to stderr.")
    p.add_argument("--campaign", metavar="REF", required=True,
                   help="a campaign folder or package, or a built-in or user campaign's id")
    p.add_argument("--script", metavar="FILE.jsonl",
                   help="the actions to play (required unless --turns-from)")
    p.add_argument("--model", metavar="GGUF", help="the daemon's model (default: SmolLM2-135M)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="the model's sampling seed for the daemon started here (serve --seed; "
                        "default: the daemon's)")
    p.add_argument("--address", metavar="ADDR",
                   help="play on this running daemon instead of starting one (its own model "
                        "and seed; --model and --seed are then refused)")
    p.add_argument("--turns-from", metavar="DOC.json",
                   help="score the turns of an earlier --json document again; no daemon")
    p.add_argument("--json", action="store_true", help="print the whole document as JSON")
    p.add_argument("--write", metavar="FILE", help="append the report to FILE (BENCHMARKS.md)")
    p.set_defaults(func=cmd_eval_narration)


def register(sub: argparse._SubParsersAction) -> None:
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
    ep.add_argument("--limit", type=positive_int, metavar="N", help="run the first N cases")
    ep.add_argument("--enabled-only", action="store_true",
                    help="offer only the skills enabled here (default: every built-in skill)")
    ep.add_argument("--no-warmup", action="store_true",
                    help="time the first plan cold too (default: one untimed plan first)")
    ep.add_argument("--json", action="store_true", help="print only the report as JSON")
    ep.add_argument("--write", metavar="FILE", help="append the report to FILE (BENCHMARKS.md)")
    ep.set_defaults(func=cmd_eval_planner)
    _register_narration(eval_sub)
