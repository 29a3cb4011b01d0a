"""Turn latency while the daemon ingests a large campaign: ingestion must not stall play.

A real daemon with the pattern planner and skills-only turns (``execute_only``), so
the model is out of it: what a turn waits for is the store and the embedder, the
two things ingestion shares with it. One session plays ``turns`` turns with the
daemon idle (the baseline), then as many as fit while a generated campaign of
``files`` text files (``bench_ingest.generate_campaign``) is ingested through
``IngestCampaign``; the report gives both medians, the ingestion's duration and
its chunk count.

    narratoria bench ingest-load [--files 500] [--turns 12] [--write BENCHMARKS.md] [--json]
"""

from __future__ import annotations

import datetime
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from narratoria.bench.daemon import ServeDaemon
from narratoria.bench.report import machine

PROMPTS = ["I look around the hall", "I ask the keeper about the road", "I check my pack",
           "I listen at the door", "I walk to the window", "I search the shelves"]


def _turn(client: Any, session_id: str, i: int) -> float:
    started = time.perf_counter()
    kinds = [e.WhichOneof("event") for e in client.turn(session_id, text=PROMPTS[i % len(PROMPTS)],
                                                        execute_only=True)]
    if kinds[-1:] != ["done"]:
        raise RuntimeError(f"turn {i} ended with {kinds[-1:]}")
    return time.perf_counter() - started


def _summary(latencies: list[float], seconds: float | None = None) -> dict[str, Any]:
    """Median, 95th percentile and mean; with ``seconds``, turns a second too (a turn stuck
    behind the ingestion shows in the mean and the rate, not in the median)."""
    doc: dict[str, Any] = {"turns": len(latencies), "p50S": _p(latencies, 0.5),
                           "p95S": _p(latencies, 0.95),
                           "meanS": round(statistics.fmean(latencies), 3) if latencies else None}
    if seconds:
        doc["turnsPerS"] = round(len(latencies) / seconds, 2)
    return doc


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def run(files: int, turns: int, progress: bool = True) -> dict[str, Any]:
    from narratoria.bench.ingest import generate_campaign
    from narratoria.clients.client import NarratoriaClient

    def say(text: str) -> None:
        if progress:
            print(f"bench ingest-load: {text}", file=sys.stderr, flush=True)

    folder = Path(tempfile.mkdtemp(prefix="nbil-", dir="/tmp"))  # a short socket path
    campaign = generate_campaign(folder / "campaign", files=files)
    say(f"starting a daemon (pattern planner) in {folder}")
    daemon = ServeDaemon(folder, "--planner", "pattern")
    try:
        with NarratoriaClient(daemon.address, timeout_s=900) as client:
            session = client.create_session(campaign="ninth_milestone", title="bench").id
            for i in range(2):  # warm: first-call costs (the skill processes, caches)
                _turn(client, session, i)
            started = time.perf_counter()
            baseline = [_turn(client, session, i) for i in range(turns)]
            baseline_s = time.perf_counter() - started
            say(f"baseline: {turns} turns, p50 {statistics.median(baseline):.3f} s")

            done = threading.Event()
            outcome: dict[str, Any] = {}

            def ingest() -> None:
                started = time.perf_counter()
                try:
                    with NarratoriaClient(daemon.address, timeout_s=3600) as other:
                        for item in other.ingest_campaign(str(campaign)):
                            if item.result_json:
                                outcome["result"] = json.loads(item.result_json)
                except Exception as exc:  # noqa: BLE001 - reported
                    outcome["error"] = f"{type(exc).__name__}: {exc}"
                outcome["seconds"] = round(time.perf_counter() - started, 1)
                done.set()

            thread = threading.Thread(target=ingest, daemon=True)
            thread.start()
            during: list[float] = []
            overlapping: list[float] = []  # the last one may end after the ingestion
            i = 0
            while not done.is_set():
                latency = _turn(client, session, i)
                overlapping.append(latency)
                if not done.is_set():  # only turns that ran wholly during the ingestion
                    during.append(latency)
                i += 1
            thread.join()
            say(f"during ingestion ({outcome.get('seconds')} s): {len(during)} turns, "
                f"p50 {statistics.median(during) if during else float('nan'):.3f} s")
    finally:
        daemon.stop()
    result = outcome.get("result") or {}
    report = {"date": datetime.date.today().isoformat(), "machine": machine(),
              "files": files, "chunks": result.get("textChunks"), "ingestS": outcome.get("seconds"),
              "ingestError": outcome.get("error"),
              "baseline": _summary(baseline, baseline_s),
              "duringIngest": _summary(during, outcome.get("seconds")),
              "longestOverlappingS": round(max(overlapping), 3) if overlapping else None}
    report["summary"] = _lines(report)
    return report


def _lines(r: dict[str, Any]) -> list[str]:
    b, d = r["baseline"], r["duringIngest"]
    return [f"ingest {r['files']} files ({r['chunks']} chunks): {r['ingestS']} s"
            + (f", failed: {r['ingestError']}" if r["ingestError"] else ""),
            f"turns, daemon idle: {b['turns']}, p50 {b['p50S']} s, p95 {b['p95S']} s",
            f"turns during ingestion: {d['turns']}, p50 {d['p50S']} s, p95 {d['p95S']} s, "
            f"{d.get('turnsPerS')} turns/s; longest overlapping {r['longestOverlappingS']} s"]


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    """Append this run's section to ``path`` (newest last, like the other benches)."""
    m, b, d = report["machine"], report["baseline"], report["duringIngest"]
    lines = [f"## ingest-load — {report['date']}", "",
             f"- command: `{command}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
             "- a real daemon (pattern planner, skills-only turns); one session plays turns "
             "idle, then while a generated campaign is ingested through IngestCampaign", "",
             "| measure | daemon idle | during ingestion |", "|---|---|---|",
             f"| turns | {b['turns']} | {d['turns']} |",
             f"| turn p50 | {b['p50S']} s | {d['p50S']} s |",
             f"| turn p95 | {b['p95S']} s | {d['p95S']} s |",
             f"| turns/s | {b.get('turnsPerS')} | {d.get('turnsPerS')} |",
             f"| ingestion | — | {report['ingestS']} s, {report['files']} files, "
             f"{report['chunks']} chunks |", ""]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
