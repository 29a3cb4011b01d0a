"""`narratoria bench batch`: the model's decode tokens/s against the batch's size.

What continuous batching (``runtime/planner/batching.py``) can gain on this machine:
for each size B, B greedy generations of ``tokens`` tokens from different short
prompts are submitted at once to one :class:`~narratoria.runtime.planner.model.ModelPlanner`
with B slots, and the tokens they wrote are divided by the seconds from the moment
every prompt was read to the last token (decode only; prompt reading is reported
apart). Each size runs ``rounds`` times; the median is reported. B = 1 is the
baseline, measured in the same run.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from narratoria.bench.report import append_section, machine, say

PROMPTS = ("The old lighthouse keeper", "Once upon a time in a quiet village",
           "The ship's captain looked at the sea and", "In the market, the merchant",
           "The dragon", "A cold wind blew through", "She opened the letter and",
           "The tavern was full of")


def _round(planner: Any, size: int, tokens: int) -> tuple[float, float, int]:
    """One round of ``size`` generations: (decode tokens/s, prompt seconds, tokens)."""
    from narratoria.runtime.planner.generation import Options, generate

    options = Options(max_tokens=tokens, temperature=0.0)
    read: list[float] = []

    def program(prompt: list[int]) -> Any:
        def run(lease: Any) -> Any:
            # the prompt is read (and timed) as part of the program
            index = yield from lease.feed(lease.seqs[0], prompt)
            del index
            read.append(time.perf_counter())
            return (yield from generate(lease, prompt, options))
        return run

    prompts = [planner.llm.tokenize(f"{PROMPTS[i % len(PROMPTS)]} ({i})".encode(), add_bos=True)
               for i in range(size)]
    planner.batcher._evict()  # no cached prompt helps one size more than another
    started = time.perf_counter()
    jobs = [planner.submit("bench", program(p), session=str(i)) for i, p in enumerate(prompts)]
    outcomes = [job.wait() for job in jobs]
    ended = time.perf_counter()
    written = sum(len(o.tokens) for o in outcomes)
    decode_from = max(read)
    return written / max(1e-9, ended - decode_from), decode_from - started, written


def run_batch_bench(sizes: list[int], tokens: int = 64, rounds: int = 3,
                    progress: bool = True) -> dict[str, Any]:
    from narratoria.runtime.planner.model import ModelPlanner

    say(progress, f"loading the model with {max(sizes)} slots")
    planner = ModelPlanner(slots=max(sizes), narration_candidates=1)
    _round(planner, max(sizes), 8)  # llama.cpp's first batches are slower: not measured
    rows = []
    try:
        for size in sizes:
            runs = [_round(planner, size, tokens) for _ in range(rounds)]
            rate = statistics.median(r[0] for r in runs)
            rows.append({"batch": size, "decodeTokensPerS": round(rate, 1),
                         "promptS": round(statistics.median(r[1] for r in runs), 3),
                         "tokens": runs[0][2], "rounds": rounds})
            say(progress, f"batch {size:>2}: {rate:6.1f} tok/s")
    finally:
        planner.close()
    base = rows[0]["decodeTokensPerS"] if rows else 0.0
    for row in rows:
        row["vsOne"] = round(row["decodeTokensPerS"] / base, 2) if base else None
    summary = [f"decode tokens/s by batch size: " + ", ".join(
        f"{r['batch']}: {r['decodeTokensPerS']} ({r['vsOne']}x)" for r in rows)]
    return {"machine": machine(), "model": str(planner.loaded_path), "tokensEach": tokens,
            "rows": rows, "summary": summary}


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    lines = [f"\n## batch — {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n", f"- command: `{command}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
             f"- model: `{Path(report['model']).name}`, greedy, {report['tokensEach']} new "
             "tokens per sequence, one batch of B sequences (median of rounds)\n",
             "| batch size | decode tokens/s | vs 1 | prompt reading s |", "|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['decodeTokensPerS']} | {r['vsOne']}x | {r['promptS']} |"
              for r in report["rows"]]
    lines += ["", *report["summary"]]
    append_section(path, "\n".join(lines) + "\n")


__all__ = ["run_batch_bench", "write_markdown"]
