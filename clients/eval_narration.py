"""The narration eval (`narratoria eval narration`, ``clients/commands/eval.py``): play a
script of actions through a real daemon and score every turn's narration and choices
against the targets of docs/scene.md, "Narration eval".

The daemon is the one the player would get: started here on a temporary socket and
data dir (``narratoria.bench.daemon``) (``--model`` passed on to ``serve``), or, with
``--address``, a running one. Each script session is a new session of the campaign;
every line is one turn, a ``choice`` line picks that option of the last menu. The
scores (``runtime/planner/narration_scores.py``) are computed after the daemon has
stopped, with the real MiniLM embedder for relevance, so the scorer never competes
with the model for the cores while turns are timed.

``--turns-from DOC.json`` scores the turns of an earlier ``--json`` document again
(no daemon): a changed scorer is compared on the very same turns.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable

from narratoria.runtime.planner import narration_eval as ne

DOC_VERSION = 1


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
    from narratoria.bench.report import machine

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
    from narratoria.bench.report import append_section

    """Append a dated section, as ``eval planner`` does (``clients/commands/eval.py``)."""
    m = doc["machine"]
    met = [k for k, v in doc["targets"].items() if v is False]
    text = "\n".join([
        f"\n## eval narration — {doc['at']}\n",
        f"- command: `{doc['command']}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- campaign `{doc['campaign']['id']}`, script `{doc['script']}`, model "
        f"`{Path(str(doc['model'])).name}`; narration eval targets — "
        + ("met" if not met else "NOT met: " + ", ".join(met)) + "\n",
        "```", *ne.format_report(doc), "```", ""])
    append_section(path, text)


__all__ = ["build_document", "play_script", "similarities", "write_markdown"]
