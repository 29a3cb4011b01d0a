"""`narratoria bench turn`: turn latency and throughput through a real daemon.

The baseline, measured in the same run: the same turns made with llama-cpp-python
in one process, one after another — the most one model on this machine can do.
Each raw turn does what a daemon turn asks of the model: the routed plan (the model
plans under the grammar only when the router picks a skill), narration from the
same prompt (the last scene and the session's scene memories), and the choices.
It runs in a child process so that its model is gone before the daemon is started
on a temporary socket and driven by N concurrent clients, each in its own session;
N = 1 gives the single-player latency, larger N the throughput of the shared model
against the raw one. The one client plays as many sessions as the largest run up to 8
(:data:`BASELINE_SESSIONS`), one after another: its median is then of the same turns the
8 clients play at once, not of 4 turns whose dice happened to fall one way.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from narratoria.bench.daemon import ServeDaemon
from narratoria.bench.report import machine, pct, say

PROMPTS = ("I roll 2d6 to climb the harbour wall", "I look around the market square",
           "I ask the innkeeper about the missing ship", "I search the old library for a map")
BASELINE_SESSIONS = 8


def bench_raw(turns: int, progress: bool, turns_per_session: int = 4) -> dict[str, Any]:
    """The raw baseline, in a process of its own: a model left loaded in this one
    (and its threads) would share the cores with the daemon measured next."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_raw_turns, (turns, progress, turns_per_session))


def _raw_turns(turns: int, progress: bool, turns_per_session: int) -> dict[str, Any]:
    """The same planner path (router, then the model when a skill is needed), narration
    and choices a turn makes, in this process, without the daemon."""
    import asyncio

    from narratoria.runtime.embedding import share_cores_with_llama
    from narratoria.runtime.planner.base import PlanRequest
    from narratoria.runtime.planner.choices import model_choices
    from narratoria.runtime.planner.narration import NarrationContext
    from narratoria.runtime.planner.routed import default_planner
    from narratoria.runtime.turn.scene import RECALL_LIMIT, _beyond, scene_summary
    from narratoria.runtime.skills.registry import SkillRegistry, builtin_skills_dir

    share_cores_with_llama()  # the daemon's embedder has a process of its own
    routed = default_planner()
    planner = routed.model
    available = tuple(SkillRegistry([builtin_skills_dir()]).scripts())
    routed.warm(PlanRequest("warm up", available))  # as the daemon does before it is ready
    latencies = []
    summaries: list[str] = []
    last = ""
    started = time.perf_counter()
    for i in range(turns):
        text = PROMPTS[i % len(PROMPTS)]
        t0 = time.perf_counter()
        try:
            asyncio.run(routed.generate(PlanRequest(text, available)))
        except Exception:  # noqa: BLE001 - a failed plan still costs its tokens
            pass
        # The prompt a daemon turn gives the narrator: the last scene and the session's
        # recalled scene memories (here the latest RECALL_LIMIT, as a short session's are).
        context = NarrationContext(player_input=text, scene=last,
                                   memories=_beyond(summaries[-RECALL_LIMIT:], last))
        narration = "".join(planner.narrate(context)).strip()
        model_choices(planner, context, narration)
        latencies.append(time.perf_counter() - t0)
        summaries.append(scene_summary(i % turns_per_session + 1, text, narration))
        last = narration
        if (i + 1) % turns_per_session == 0:  # the next turns are a new session's
            summaries, last = [], ""
        say(progress, f"raw model: turn {i + 1}/{turns} {latencies[-1]:.2f} s")
    elapsed = time.perf_counter() - started
    return {"turns": turns, "p50S": round(statistics.median(latencies), 3),
            "p95S": round(pct(latencies, 0.95), 3), "turnsPerS": round(turns / elapsed, 4)}


def bench_clients(address: str, clients: int, turns_each: int, progress: bool,
                  sessions: int | None = None) -> dict[str, Any]:
    """``clients`` concurrent clients play ``sessions`` sessions (one each by default)
    of ``turns_each`` turns; a client whose session ends takes the next one unplayed."""
    from narratoria.clients.client import NarratoriaClient

    latencies: list[float] = []
    first_token: list[float] = []
    replanned: list[bool] = []
    queued: list[bool] = []
    phases: dict[str, list[int]] = {}
    failures: list[str] = []
    lock = threading.Lock()
    unplayed = list(range(max(clients, sessions or clients)))

    def next_session() -> int | None:
        with lock:
            return unplayed.pop(0) if unplayed else None

    def player() -> None:
        try:
            with NarratoriaClient(address, timeout_s=600) as client:
                while (i := next_session()) is not None:
                    play(client, i)
        except Exception as exc:  # noqa: BLE001 - counted, reported
            with lock:
                failures.append(f"{type(exc).__name__}: {exc}")

    def play(client: Any, i: int) -> None:
        sid = client.create_session(title=f"bench {i}").id
        for t in range(turns_each):
            t0 = time.perf_counter()
            first = None
            timings: dict[str, int] = {}
            late_plan = waited = False
            for event in client.turn(sid, text=PROMPTS[(i + t) % len(PROMPTS)]):
                kind = event.WhichOneof("event")
                if first is None and kind == "narration":
                    first = time.perf_counter() - t0
                elif kind == "plan" and event.plan.attempt > 1:
                    late_plan = True  # the first plan failed (or ran past its budget)
                elif kind == "queued":
                    waited = True
                elif kind == "done":
                    timings = dict(event.done.timings_ms)
            with lock:
                for phase, ms in timings.items():
                    phases.setdefault(phase, []).append(ms)
                latencies.append(time.perf_counter() - t0)
                replanned.append(late_plan)
                queued.append(waited)
                if first is not None:
                    first_token.append(first)

    started = time.perf_counter()
    threads = [threading.Thread(target=player) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    say(progress, f"daemon: {clients} clients, {len(latencies)} turns in {elapsed:.1f} s")
    return {"clients": clients, "turns": len(latencies), "failures": failures,
            "p50S": round(statistics.median(latencies), 3) if latencies else None,
            "p95S": round(pct(latencies, 0.95), 3) if latencies else None,
            "firstNarrationP50S": round(statistics.median(first_token), 3) if first_token else None,
            # Where a turn's time goes, as the coordinator timed it (ms, medians).
            "phaseP50Ms": {k: int(statistics.median(v)) for k, v in sorted(phases.items())},
            # turns whose first plan failed (the model past the 5 s budget, mostly)
            "replannedTurns": sum(replanned), "queuedTurns": sum(queued),
            "turnsPerS": round(len(latencies) / elapsed, 4)}


def run_turn_bench(clients: list[int], turns_each: int = 2, raw_turns: int = 8,
                   progress: bool = True, serve_args: tuple[str, ...] = ()) -> dict[str, Any]:
    say(progress, f"baseline: {raw_turns} turns straight to llama-cpp-python")
    raw = bench_raw(raw_turns, progress, turns_each)
    with tempfile.TemporaryDirectory(prefix="nb-", dir="/tmp") as tmp:
        say(progress, "starting the daemon")
        daemon = ServeDaemon(Path(tmp), *serve_args)
        try:
            baseline = min(max(clients), BASELINE_SESSIONS)
            runs = [bench_clients(daemon.address, n, turns_each, progress,
                                  sessions=baseline if n == 1 else None)
                    for n in clients]
        finally:
            daemon.stop()
    at_max = runs[-1]
    ratio = round(at_max["turnsPerS"] / raw["turnsPerS"], 3) if raw["turnsPerS"] else None
    one = runs[0]
    return {
        "machine": machine(),
        "baselineRawModel": raw,
        "daemon": runs,
        "targets": {"p50OneClientS": 3.0, "throughputVsRaw": 0.9},
        "throughputVsRaw": ratio,
        "daemonStartupS": daemon.ready.get("startupS"),
        "serveArgs": list(serve_args),
        "summary": [
            f"raw model: p50 {raw['p50S']} s/turn, {raw['turnsPerS']} turns/s",
            *(f"daemon, {r['clients']} clients: p50 {r['p50S']} s, first narration "
              f"{r['firstNarrationP50S']} s, {r['turnsPerS']} turns/s "
              f"({_ratio(r['turnsPerS'], one['turnsPerS'])}x one client's; p50 "
              f"{_ratio(r['p50S'], one['p50S'])}x), replanned {r['replannedTurns']}, "
              f"queued {r['queuedTurns']}, failures {len(r['failures'])}"
              for r in runs),
            f"one client p50 {one['p50S']} s (target < 3 s); throughput at "
            f"{at_max['clients']} clients {ratio} of raw (target >= 0.9)",
        ],
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    raw = report["baselineRawModel"]
    m = report["machine"]
    machine = f"{m['cpu']}, {m['cores']} cores, Python {m['python']}"
    lines = [f"\n## turn — {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n", f"- command: `{command}`",
             f"- machine: {machine}",
             f"- baseline: the same turns straight to llama-cpp-python in one process: p50 "
             f"{raw['p50S']} s, {raw['turnsPerS']} turns/s",
             f"- daemon startup (Ray, 5 actors, model, embedder): {report['daemonStartupS']} s"
             + (f"; `serve {' '.join(report['serveArgs'])}`" if report.get("serveArgs") else "")
             + "\n",
             "| clients | turns | p50 s | p95 s | first narration p50 s | turns/s | vs 1 client "
             "| p50 vs 1 client | vs raw | replanned | queued |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    one = report["daemon"][0]
    for run in report["daemon"]:
        ratio = round(run["turnsPerS"] / raw["turnsPerS"], 3) if raw["turnsPerS"] else "—"
        lines.append(f"| {run['clients']} | {run['turns']} | {run['p50S']} | {run['p95S']} | "
                     f"{run['firstNarrationP50S']} | {run['turnsPerS']} | "
                     f"{_ratio(run['turnsPerS'], one['turnsPerS'])} | "
                     f"{_ratio(run['p50S'], one['p50S'])} | {ratio} | "
                     f"{run.get('replannedTurns', '—')} | {run.get('queuedTurns', '—')} |")
    lines += ["", "Phase medians (ms) as the coordinator timed them:", ""]
    lines += [f"- {run['clients']} clients: " + ", ".join(
        f"{k} {v}" for k, v in run.get("phaseP50Ms", {}).items()) for run in report["daemon"]]
    lines += ["", *report["summary"]]
    with path.open("a") as fh:
        fh.write("\n".join(lines) + "\n")


__all__ = ["run_turn_bench", "write_markdown"]
