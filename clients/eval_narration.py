"""`narratoria eval narration`: play a script of actions through a real daemon and score
every turn's narration and choices (issue 20).

The daemon is the one the player would get: started here on a temporary socket and
data dir with ``bench turn``'s helper (``--model`` passed on to ``serve``), or, with
``--address``, a running one. Each script session is a new session of the campaign;
every line is one turn, a ``choice`` line picks that option of the last menu. The
scores (``runtime/planner/narration_scores.py``) are computed after the daemon has
stopped, with the real MiniLM embedder for relevance, so the scorer never competes
with the model for the cores while turns are timed.

``--turns-from DOC.json`` scores the turns of an earlier ``--json`` document again
(no daemon): a changed scorer is compared on the very same turns.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable

from narratoria.runtime.planner import narration_eval as ne

DOC_VERSION = 1


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"  {text}", file=sys.stderr, flush=True)


# -- playing -------------------------------------------------------------------------------

def play_script(client: Any, campaign: str, lines: list[ne.ScriptLine],
                progress: Callable[[str], None] = lambda _: None) -> list[ne.TurnRecord]:
    """Each line as one turn of ``client``'s daemon; a failed turn is a record with
    its error (and ends nothing: the next line plays on)."""
    from narratoria.clients.client import ClientError, event_to_dict

    records: list[ne.TurnRecord] = []
    session_id: str | None = None
    label: str | None = None
    menu: list[str] = []
    for index, line in enumerate(lines, start=1):
        record = ne.TurnRecord(index=index, line=line.line, session=line.session,
                               action=line.text or "", choice=line.choice, tags=line.tags)
        records.append(record)
        try:
            if line.session != label:
                label, menu = line.session, []
                session_id = client.create_session(campaign=campaign,
                                                   title=f"eval narration {line.session}").id
            if line.choice is not None:
                if line.choice > len(menu):
                    raise ClientError("SCRIPT", f"choice {line.choice}: the last menu had "
                                                f"{len(menu)} option(s)")
                record.action = menu[line.choice - 1]
            started = time.perf_counter()
            events = [event_to_dict(e) for e in client.turn(
                session_id, text=line.text, choice=line.choice)]
            record.latency_s = round(time.perf_counter() - started, 3)
        except ClientError as exc:
            record.error = ne.excerpt(f"{exc.code}: {exc}", budget=300)
            menu = []
            progress(f"turn {index}/{len(lines)} (line {line.line}): failed: {record.error}")
            continue
        _fill(record, events)
        menu = list(record.choices)
        progress(f"turn {index}/{len(lines)} (line {line.line}): {record.latency_s:.1f} s, "
                 f"{len(record.narration)} characters, {len(record.choices)} choices")
    return records


def _fill(record: ne.TurnRecord, events: list[dict[str, Any]]) -> None:
    """What the turn's events say: the action as played, narration, menu, roll, plan."""
    done = None
    for event in events:
        kind = event.get("kind")
        if kind == "started":
            record.action = event["started"].get("input") or record.action
        elif kind == "choices":
            record.choices = list(event["choices"].get("options") or [])
        elif kind == "plan":
            record.planner = event["plan"].get("planner") or None
            record.skills = list(event["plan"].get("skills") or [])
        elif kind == "done":
            done = event["done"]
    if done is None:
        record.error = "the turn's stream ended without its done event"
        return
    record.narration = done.get("narration") or ""
    record.fallback = bool(done.get("fallback"))
    record.timings_ms = {k: int(v) for k, v in (done.get("timings_ms") or {}).items()}
    record.roll_total, record.outcome, record.outcome_source = ne.roll_of_events(events)


# -- scoring -------------------------------------------------------------------------------

def similarities(records: list[ne.TurnRecord]) -> dict[int, float]:
    """MiniLM cosine of each played turn's action and narration (the real embedder)."""
    from narratoria.runtime.embedding import LocalEmbedding

    played = [r for r in records if r.error is None and r.narration.strip()]
    if not played:
        return {}
    embedder = LocalEmbedding()
    actions = embedder.embed_batch([r.action for r in played])
    replies = embedder.embed_batch([r.narration for r in played])
    return {r.index: round(float(a @ b), 4) for r, a, b in zip(played, actions, replies)}


def build_document(records: list[ne.TurnRecord], facts: ne.CampaignFacts, *, script: str,
                   model: str, daemon: dict[str, Any], seed: int | None,
                   sims: dict[int, float]) -> dict[str, Any]:
    from narratoria.clients.bench import machine

    scores = ne.score_records(records, facts, sims)
    summary = ne.summarize(records, scores, facts)
    turns = [{**r.to_json(), "scores": ne.score_json(s)} for r, s in zip(records, scores)]
    return {
        "eval": "narration", "version": DOC_VERSION,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["narratoria", *sys.argv[1:]]),
        "machine": machine(), "model": model, "seed": seed,
        "campaign": facts.to_json(), "script": script, "daemon": daemon,
        "summary": summary, "targets": ne.targets_met(summary),
        "turnRecords": turns,
    }


def write_markdown(path: Path, doc: dict[str, Any]) -> None:
    """Append a dated section, as ``eval planner`` does (``clients/cli.py`` _write_eval)."""
    m = doc["machine"]
    met = [k for k, v in doc["targets"].items() if v is False]
    text = "\n".join([
        f"\n## eval narration — {doc['at']}\n",
        f"- command: `{doc['command']}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- campaign `{doc['campaign']['id']}`, script `{doc['script']}`, model "
        f"`{Path(str(doc['model'])).name}`; targets of issue 20 item 2 — "
        + ("met" if not met else "NOT met: " + ", ".join(met)) + "\n",
        "```", *ne.format_report(doc), "```", ""])
    if not path.exists():
        path.write_text("# Benchmarks\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


# -- the command ---------------------------------------------------------------------------

def add_eval_narration_parser(eval_sub: Any) -> None:
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


def _campaign(ref: str, scratch: Path) -> tuple[Path, ne.CampaignFacts]:
    from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
    from narratoria.runtime.campaign.problems import CampaignError

    library = CampaignLibrary(scratch)
    try:
        where = library.locate(ref)
        return where, ne.campaign_facts(library.folder(where))
    except CampaignNotFound as exc:
        raise ValueError(f"--campaign: {exc.args[0] if exc.args else exc}") from None
    except CampaignError as exc:
        raise ValueError(f"--campaign {ne.excerpt(ref, budget=100)}: not a valid campaign:\n"
                         f"{exc}") from None


def cmd_eval_narration(args: argparse.Namespace) -> int:
    from narratoria.clients.cli import _err, _print_json

    if args.address and (args.model or args.seed is not None):
        _err("--model and --seed choose the daemon started here; a running daemon "
             "(--address) keeps its own")
        return 2
    progress = True  # on stderr: --json's document alone goes to stdout
    if not args.script and not args.turns_from:
        _err("--script FILE.jsonl is required (or --turns-from DOC.json to score saved turns)")
        return 2
    lines: list[ne.ScriptLine] = []
    try:  # everything is checked before a daemon is started
        if args.script:
            lines = ne.load_script(args.script)
    except ne.ScriptError as exc:
        _err(f"--script: {len(exc.errors)} problem(s):\n" + "\n".join(exc.errors[:20]))
        return 2
    with tempfile.TemporaryDirectory(prefix="ne-", dir="/tmp") as tmp:
        try:
            where, facts = _campaign(args.campaign, Path(tmp) / "campaigns")
        except ValueError as exc:
            _err(str(exc))
            return 2
        if args.turns_from:
            try:
                saved = json.loads(Path(args.turns_from).read_text("utf-8"))
                records = [ne.TurnRecord.from_json(r) for r in saved["turnRecords"]]
                model, daemon = saved.get("model", ""), saved.get("daemon", {})
                seed = saved.get("seed")
                played_on = str(saved["campaign"]["id"])
                script = args.script or str(saved["script"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                _err(f"--turns-from {args.turns_from}: not an eval narration document "
                     f"({ne.excerpt(str(exc), budget=120)})")
                return 2
            if played_on != facts.id:
                _err(f"--turns-from {args.turns_from}: its turns were played on campaign "
                     f"{ne.excerpt(played_on, budget=60)!r}, not {facts.id!r}")
                return 2
        else:
            try:
                records, model, daemon = _play(args, lines, str(where), Path(tmp), progress)
            except RuntimeError as exc:
                _err(str(exc))
                return 1
            seed, script = args.seed, args.script
    _say(progress, "scoring (MiniLM similarity of every action and reply)")
    doc = build_document(records, facts, script=script, model=model, daemon=daemon,
                         seed=seed, sims=similarities(records))
    if args.write:
        write_markdown(Path(args.write), doc)
    if args.json:
        _print_json(doc)
    else:
        print("\n".join(ne.format_report(doc, examples=True)))
    return 0


def _play(args: argparse.Namespace, lines: list[ne.ScriptLine], campaign: str, tmp: Path,
          progress: bool) -> tuple[list[ne.TurnRecord], str, dict[str, Any]]:
    from narratoria.runtime.host.endpoint import EndpointError

    from narratoria.clients.client import ClientError, NarratoriaClient
    from narratoria.clients.loadtest import _ServeDaemon

    daemon = None
    try:
        address = args.address
        if not address:
            extra = [*(["--model", str(Path(args.model).resolve())] if args.model else []),
                     *(["--seed", str(args.seed)] if args.seed is not None else [])]
            _say(progress, "starting a daemon (" + " ".join(["serve", *extra]) + ")")
            daemon = _ServeDaemon(tmp, extra)
            address = f"unix://{daemon.socket}"
        with NarratoriaClient(address, timeout_s=600) as client:
            model = client.status().model_path
            _say(progress, f"{len(lines)} turns of {Path(campaign).name} on {Path(model).name}")
            records = play_script(client, campaign, lines, lambda text: _say(progress, text))
    except (ClientError, EndpointError) as exc:
        raise RuntimeError(str(exc)) from None
    finally:
        if daemon is not None:
            daemon.stop()
    info = {"started": daemon is not None, "address": address,
            "startupS": daemon.ready.get("startupS") if daemon else None}
    return records, model, info


__all__ = ["add_eval_narration_parser", "build_document", "cmd_eval_narration", "play_script",
           "similarities", "write_markdown"]
