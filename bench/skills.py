"""`narratoria bench skills`: every built-in script's invocation time through a warm daemon.

A daemon is started on a temporary socket; for each script of each built-in skill a
fixed plan with the script's shortest manifest example runs ``--iterations`` times
as an execute-only turn (no model narration) in one session. Reported per script:
p50/p95 of the invocation as the executor timed it (spawn to ``done``) and of the
whole turn as the client saw it, and the failures. The SC figures of the skills
(recall under 500 ms, reputation query under 100 ms, choices under 3 s) are read
off these.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from narratoria.bench.daemon import ServeDaemon
from narratoria.bench.report import machine, pct, say


def script_cases(skills_dir: Path | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(script ref, input) for every built-in script: its shortest manifest example."""
    from narratoria.runtime.skills.registry import SkillRegistry, builtin_skills_dir

    registry = SkillRegistry([skills_dir or builtin_skills_dir()])
    cases = []
    for script in sorted(registry.scripts(include_disabled=True), key=lambda s: s.ref):
        examples = sorted(script.examples, key=lambda e: len(json.dumps(e)))
        cases.append((script.ref, dict(examples[0]) if examples else {}))
    return cases


def bench_script(client: Any, session_id: str, ref: str, example: dict[str, Any],
                 iterations: int) -> dict[str, Any]:
    invocations: list[float] = []
    turns: list[float] = []
    failures: list[str] = []
    for i in range(iterations):
        plan = {"requestId": f"bench-{ref.replace('/', '-')}-{i}",
                "tools": [{"toolId": "t", "toolPath": ref, "input": example,
                           "retryPolicy": {"maxRetries": 0}}]}
        started = time.perf_counter()
        finished = None
        for event in client.turn(session_id, text=f"bench {ref}", plan_json=json.dumps(plan),
                                 execute_only=True):
            if event.WhichOneof("event") == "tool_finished" and finished is None:
                finished = event.tool_finished
        turns.append(time.perf_counter() - started)
        if finished is None:
            failures.append("no tool_finished event")
        elif not finished.ok:
            failures.append(finished.error or "failed")
        else:
            invocations.append(finished.duration_ms / 1000)
    return {"script": ref, "iterations": iterations, "input": example,
            "invocationP50Ms": _ms(statistics.median(invocations)) if invocations else None,
            "invocationP95Ms": _ms(pct(invocations, 0.95)) if invocations else None,
            "turnP50Ms": _ms(statistics.median(turns)), "failures": sorted(set(failures))}


def run_skills_bench(iterations: int = 10, progress: bool = True) -> dict[str, Any]:
    from narratoria.clients.client import NarratoriaClient

    cases = script_cases()
    with tempfile.TemporaryDirectory(prefix="nk-", dir="/tmp") as tmp:
        say(progress, "starting the daemon")
        daemon = ServeDaemon(Path(tmp))
        try:
            with NarratoriaClient(daemon.address, timeout_s=600) as client:
                session_id = client.create_session(title="bench skills").id
                results = []
                for ref, example in cases:
                    say(progress, f"{ref}: {iterations} invocations")
                    results.append(bench_script(client, session_id, ref, example, iterations))
        finally:
            daemon.stop()
    return {"machine": machine(), "iterations": iterations, "scripts": results,
            "summary": [f"{r['script']}: invocation p50 {r['invocationP50Ms']} ms, p95 "
                        f"{r['invocationP95Ms']} ms, turn p50 {r['turnP50Ms']} ms, "
                        f"failures {len(r['failures'])}" for r in results]}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    lines = [f"\n## skills — {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n", f"- command: `{command}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
             f"- each script's shortest manifest example, {report['iterations']} execute-only "
             "turns through a warm daemon; invocation = spawn to done as the executor timed it\n",
             "| script | invocation p50 ms | invocation p95 ms | turn p50 ms | failures |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['script']} | {r['invocationP50Ms']} | {r['invocationP95Ms']} | "
              f"{r['turnP50Ms']} | {len(r['failures'])} |" for r in report["scripts"]]
    with path.open("a") as fh:
        fh.write("\n".join(lines) + "\n")


__all__ = ["run_skills_bench", "write_markdown", "script_cases"]

if __name__ == "__main__":  # pragma: no cover - use `narratoria bench skills`
    print(json.dumps(run_skills_bench(), indent=2), file=sys.stdout)
