"""`narratoria bench protocol`: what the protocol and the executor cost per skill call.

Every figure is compared with a baseline measured in the same run, interleaved
with it, so a noisy shared machine shifts both alike: a bare `python -c pass`
spawn against one minimal skill invocation (protocol layer) and one single-tool
plan (protocol + executor). Medians are reported.

The zygote (``runtime/skillrun/zygote.py``) is measured the same way: a skill that imports
the Store client as the built-in skills do, started by exec and forked from the
zygote, interleaved.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from narratoria.bench.report import machine
from narratoria.runtime.skillrun.executor import ExecutorConfig, PlanExecutor
from narratoria.runtime.skillrun.plan import Plan, ToolInvocation
from narratoria.runtime.skillrun.process import run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skillrun.zygote import Zygote
from narratoria.runtime.skills import SkillRegistry

MINIMAL_SCRIPT = """#!/usr/bin/env python3
import sys
sys.stdin.buffer.read()
sys.stdout.write('{"version":"0","type":"done","ok":true,"summary":"ok"}\\n')
"""

# What a built-in skill imports before its first line of work: the Store client.
STORE_SKILL_SCRIPT = """#!/usr/bin/env python3
import sys
import grpc
from narratoria import skillkit
from narratoria.proto import narratoria_pb2, narratoria_pb2_grpc
sys.stdin.buffer.read()
sys.stdout.write('{"version":"0","type":"done","ok":true,"summary":"ok"}\\n')
"""

TARGET_OVERHEAD_PCT = 20.0


def _make_skill(root: Path) -> Path:
    skill = root / "bench-minimal"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: bench-minimal\ndescription: The smallest conforming skill, for benchmarks.\n"
        "---\nEmits done.\n")
    script = skill / "scripts" / "noop"
    script.write_text(MINIMAL_SCRIPT)
    script.chmod(0o755)
    store_skill = skill / "scripts" / "store-client"
    store_skill.write_text(STORE_SKILL_SCRIPT)
    store_skill.chmod(0o755)
    return script


async def _bare_spawn() -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "pass", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    await proc.wait()
    return time.perf_counter() - started


async def _invoke(script: Path, zygote: Zygote | None = None) -> float:
    stdin = tool_input("bench", "bench-minimal", script.name, {})
    env = script_env(None, "bench")
    started = time.perf_counter()
    outcome = await run_script(script, stdin, env=env, zygote=zygote)
    elapsed = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"minimal skill failed: {outcome.error}")
    return elapsed


def _plan(n: int, parallel: bool) -> Plan:
    return Plan(requestId=f"bench-{n}-{parallel}", parallel=parallel, tools=[
        ToolInvocation(toolId=f"t{i}", toolPath="bench-minimal/noop", is_async=True)
        for i in range(n)
    ])


async def _run_plan(executor: PlanExecutor, plan: Plan) -> float:
    started = time.perf_counter()
    result = await executor.execute(plan)
    elapsed = time.perf_counter() - started
    if not result.success:
        raise RuntimeError(f"bench plan failed: {result.error or result.failedTools}")
    return elapsed


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered) * 1000, 2),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
        "min": round(ordered[0] * 1000, 2),
    }


async def _bench(iterations: int, parallel: int, progress: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="narratoria-bench-") as tmp:
        script = _make_skill(Path(tmp))
        registry = SkillRegistry([Path(tmp)])
        executor = PlanExecutor(registry, ExecutorConfig())
        single = _plan(1, False)
        store_skill = script.with_name("store-client")
        zygote = Zygote(script_env(None, "zygote"))
        zygote.start()
        for _ in range(3):  # warm the page cache and the interpreter's imports
            await _bare_spawn()
            await _invoke(script)
            await _run_plan(executor, single)
            await _invoke(store_skill)
            await _invoke(store_skill, zygote)
        bare: list[float] = []
        invoke: list[float] = []
        plan_one: list[float] = []
        store_exec: list[float] = []
        store_fork: list[float] = []
        minimal_fork: list[float] = []
        for i in range(iterations):
            bare.append(await _bare_spawn())
            invoke.append(await _invoke(script))
            plan_one.append(await _run_plan(executor, single))
            store_exec.append(await _invoke(store_skill))
            store_fork.append(await _invoke(store_skill, zygote))
            minimal_fork.append(await _invoke(script, zygote))
            if progress and (i + 1) % 10 == 0:
                print(f"  single invocations: {i + 1}/{iterations}", file=sys.stderr)
        rounds = max(3, iterations // 8)
        par: list[float] = []
        seq: list[float] = []
        for i in range(rounds):
            par.append(await _run_plan(executor, _plan(parallel, True)))
            seq.append(await _run_plan(executor, _plan(parallel, False)))
            if progress:
                print(f"  {parallel}-tool plans: {i + 1}/{rounds}", file=sys.stderr)
        zygote.close()

    bare_ms, invoke_ms, plan_ms = _ms(bare), _ms(invoke), _ms(plan_one)
    inv_over = (invoke_ms["median"] - bare_ms["median"]) / bare_ms["median"] * 100
    plan_over = (plan_ms["median"] - bare_ms["median"]) / bare_ms["median"] * 100
    par_ms, seq_ms = _ms(par), _ms(seq)
    exec_ms, fork_ms, min_fork_ms = _ms(store_exec), _ms(store_fork), _ms(minimal_fork)
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "iterations": iterations,
        "bareSpawnMs": bare_ms,
        "invocationMs": invoke_ms,
        "singleToolPlanMs": plan_ms,
        "invocationOverheadPct": round(inv_over, 1),
        "planOverheadPct": round(plan_over, 1),
        "targetOverheadPct": TARGET_OVERHEAD_PCT,
        "meetsTarget": plan_over < TARGET_OVERHEAD_PCT,
        "zygote": {
            "storeSkillExecMs": exec_ms,
            "storeSkillForkedMs": fork_ms,
            "minimalForkedMs": min_fork_ms,
            "speedup": round(exec_ms["median"] / fork_ms["median"], 1),
        },
        "parallelPlan": {
            "tools": parallel,
            "maxConcurrency": executor.config.max_concurrency,
            "rounds": rounds,
            "parallelMs": par_ms,
            "sequentialMs": seq_ms,
            "parallelToolsPerS": round(parallel / (par_ms["median"] / 1000), 1),
            "sequentialToolsPerS": round(parallel / (seq_ms["median"] / 1000), 1),
        },
    }
    report["summary"] = [
        f"bare `python -c pass` spawn:     median {bare_ms['median']:.2f} ms",
        f"minimal skill invocation:        median {invoke_ms['median']:.2f} ms "
        f"(+{inv_over:.1f}% over bare)",
        f"single-tool plan (executor):     median {plan_ms['median']:.2f} ms "
        f"(+{plan_over:.1f}% over bare; target < {TARGET_OVERHEAD_PCT:.0f}%)",
        f"Store-client skill, exec:        median {exec_ms['median']:.2f} ms",
        f"Store-client skill, zygote fork: median {fork_ms['median']:.2f} ms "
        f"({report['zygote']['speedup']}x faster)",
        f"{parallel}-tool plan, parallel:        median {par_ms['median']:.1f} ms "
        f"= {report['parallelPlan']['parallelToolsPerS']} tools/s "
        f"(concurrency {executor.config.max_concurrency})",
        f"{parallel}-tool plan, sequential:      median {seq_ms['median']:.1f} ms "
        f"= {report['parallelPlan']['sequentialToolsPerS']} tools/s",
    ]
    return report


def run_protocol_bench(iterations: int = 40, parallel: int = 8,
                       progress: bool = True) -> dict[str, Any]:
    return asyncio.run(_bench(iterations, parallel, progress))


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    p = report["parallelPlan"]
    z = report["zygote"]
    lines = [
        f"## protocol — {report['date']}",
        "",
        f"- command: `{command}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['platform']}",
        f"- iterations: {report['iterations']} interleaved (bare, invocation, plan); medians",
        "",
        "| measure | median ms | p95 ms | vs bare spawn |",
        "|---|---|---|---|",
        f"| bare `python -c pass` spawn | {report['bareSpawnMs']['median']} | "
        f"{report['bareSpawnMs']['p95']} | baseline |",
        f"| minimal skill invocation (protocol) | {report['invocationMs']['median']} | "
        f"{report['invocationMs']['p95']} | +{report['invocationOverheadPct']}% |",
        f"| single-tool plan (protocol + executor) | {report['singleToolPlanMs']['median']} | "
        f"{report['singleToolPlanMs']['p95']} | +{report['planOverheadPct']}% |",
        f"| skill importing the Store client, exec'd | {z['storeSkillExecMs']['median']} | "
        f"{z['storeSkillExecMs']['p95']} | baseline for the zygote |",
        f"| the same skill forked from the zygote | {z['storeSkillForkedMs']['median']} | "
        f"{z['storeSkillForkedMs']['p95']} | {z['speedup']}x faster |",
        f"| minimal skill forked from the zygote | {z['minimalForkedMs']['median']} | "
        f"{z['minimalForkedMs']['p95']} | |",
        f"| {p['tools']}-tool plan, parallel (concurrency {p['maxConcurrency']}) | "
        f"{p['parallelMs']['median']} | {p['parallelMs']['p95']} | "
        f"{p['parallelToolsPerS']} tools/s |",
        f"| {p['tools']}-tool plan, sequential | {p['sequentialMs']['median']} | "
        f"{p['sequentialMs']['p95']} | {p['sequentialToolsPerS']} tools/s |",
        "",
        f"Target: protocol + executor overhead under {report['targetOverheadPct']:.0f}% of the "
        f"bare spawn — {'met' if report['meetsTarget'] else 'NOT met'} "
        f"({report['planOverheadPct']}%).",
        "",
    ]
    if not path.exists():
        path.write_text("# Benchmarks\n\nResults of `narratoria bench …`, newest last. "
                        "Medians; every figure is compared with a baseline measured in the "
                        "same run.\n\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
