"""`narratoria bench store`: the store's speed on real DuckDB files.

Two parts, each on a fresh database file in a temporary folder:

- the narrative state engine with the ``hash`` backend (384-d): single-call
  memory insert rate and ``query_state`` latency with a query text, at N memories;
- the persistence layer with the real MiniLM model: ``semantic_search`` and
  ``exact_match`` latency at N records, and bulk ingest of lore chunks including
  their embedding.

The Phantom State reference engine (sqlite-vec) cannot run beside it here: this
Python's sqlite3 is built without loadable extensions, so its figures measured on
this machine (DESIGN.md) are the baseline; the same-run baseline is the cost of
the embedding alone, which every insert and query pays before the store does.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from narratoria.bench.report import pct, say
from narratoria.runtime.embedding import (
    EmbeddingSettings,
    HashEmbedding,
    LocalEmbedding,
    make_backend,
)
from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
from narratoria.runtime.store import LoreChunk, MemoryEvent, PersistenceStore

REFERENCE = {"insertsPerS": 640.0, "queryStateP50Ms": 5.0}
LORE_RUNS = 3
TARGETS = {"semanticSearchP95Ms": 50.0, "exactMatchP95Ms": 10.0, "loreIngestS": 20.0}

WORDS = ("forge anvil blade harbour storm lantern oath crown river wolf ember tower market "
         "guild thief merchant spell ruin bridge song ale healer map key shadow tide").split()


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _latency(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {"p50": round(statistics.median(ms), 2), "p95": round(pct(ms, 0.95), 2),
            "n": len(ms)}


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_engine(folder: Path, memories: int, queries: int, progress: bool) -> dict[str, Any]:
    rng = random.Random(7)
    engine = NarrativeStateEngine(EngineConfig(db_path=str(folder / "engine.duckdb"),
                                               embedding_backend="hash"))
    characters = [f"c{i}" for i in range(8)]
    for c in characters:
        engine.register_character(c, c.upper())
    moments = [engine.create_moment(f"m{i}", i) for i in range(1, 101)]
    root = engine.create_take(notes="bench")
    takes = [root, engine.branch(root, "m50"), engine.branch(root, "m80")]
    texts = [_sentence(rng) for _ in range(memories)]
    embed_only = HashEmbedding(384)
    baseline = [_timed(lambda t=t: embed_only.embed(t)) for t in texts[:500]]
    started = time.perf_counter()
    for i, text in enumerate(texts):
        engine.embed_memory(rng.choice(characters), text, rng.choice(moments), rng.choice(takes),
                            "perceived")
        if (i + 1) % 2000 == 0:
            say(progress, f"engine: {i + 1}/{memories} memories")
    insert_s = time.perf_counter() - started
    samples = []
    for _ in range(queries):
        c, m, t, q = rng.choice(characters), rng.choice(moments), rng.choice(takes), _sentence(rng, 6)
        samples.append(_timed(lambda: engine.query_state(c, m, t, query_text=q)))
    engine.close()
    return {
        "backend": "hash-384",
        "memories": memories,
        "insertsPerS": round(memories / insert_s, 1),
        "hashEmbedOnlyMs": _latency(baseline),
        "queryStateMs": _latency(samples),
        "reference": REFERENCE,
    }


def bench_store(folder: Path, records: int, lore: int, queries: int,
                progress: bool) -> dict[str, Any]:
    rng = random.Random(11)
    embedder = make_backend(EmbeddingSettings(backend="local"))
    embedder.embed("warm up")
    store = PersistenceStore(folder / "store.duckdb", embedder)
    pt = store.playthrough("bench")
    other = store.playthrough("someone-else")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    sessions = [f"s{i}" for i in range(20)]
    batch = 1000
    started = time.perf_counter()
    for offset in range(0, records, batch):
        pt.store_many("memory_event", [
            MemoryEvent(summary=_sentence(rng), timestamp=start + timedelta(minutes=offset + i),
                        session_id=rng.choice(sessions), location=rng.choice(WORDS),
                        character_ids=[rng.choice(WORDS)])
            for i in range(min(batch, records - offset))])
        say(progress, f"store: {min(offset + batch, records)}/{records} memory events")
    store_s = time.perf_counter() - started
    other.store_many("memory_event", [MemoryEvent(summary=_sentence(rng), timestamp=start,
                                                  session_id="x") for _ in range(500)])
    embed_only, semantic, exact = [], [], []
    for _ in range(queries):
        q = _sentence(rng, 6)
        embed_only.append(_timed(lambda: embedder.embed(q)))
        semantic.append(_timed(lambda: pt.semantic_search(q, "memory_event", limit=10)))
        s = rng.choice(sessions)
        exact.append(_timed(lambda: pt.exact_match("memory_event", {"sessionId": s}, limit=50)))
    chunks = [
        LoreChunk(campaign_id="bench", campaign_version="1", file_path=f"lore/f{i // 10}.md",
                  chunk_index=i % 10, paragraph_id=i % 10, content=_sentence(rng, 60),
                  token_count=60, source_type="prose", weight_tier=3)
        for i in range(lore)]
    say(progress, f"store: ingesting {lore} lore chunks (with embedding)")
    # The slowest figure on a shared machine: the median of LORE_RUNS ingests, each
    # into its own playthrough (the first is ``pt``, as before).
    runs = [_timed(lambda: pt.store_many("lore_chunk", chunks))]
    for k in range(1, LORE_RUNS):
        say(progress, f"store: lore ingest {k + 1}/{LORE_RUNS}")
        scope = store.playthrough(f"bench-lore-{k}")
        runs.append(_timed(lambda: scope.store_many("lore_chunk", chunks)))
    lore_s = statistics.median(runs)
    # The same texts through the embedder alone: the floor any store could reach.
    texts = [c.content for c in chunks]
    lore_embed_s = _timed(lambda: embedder.embed_batch(texts))
    # Baseline for the precision choice: the same texts with fp32 weights.
    if embedder.precision == "fp32":
        fp32_s = lore_embed_s
    else:
        say(progress, "store: the same lore embedded at fp32 (baseline)")
        fp32 = LocalEmbedding(precision="fp32")
        fp32.embed("warm up")
        fp32_s = _timed(lambda: fp32.embed_batch(texts))
    store.close()
    return {
        "backend": embedder.model,
        "records": records,
        "memoryStoreManyPerS": round(records / store_s, 1),
        "embedOnlyMs": _latency(embed_only),
        "semanticSearchMs": _latency(semantic),
        "exactMatchMs": _latency(exact),
        "loreChunks": lore,
        "loreIngestS": round(lore_s, 2),
        "loreIngestRunsS": [round(r, 2) for r in runs],
        "loreEmbedOnlyS": round(lore_embed_s, 2),
        "embedPrecision": embedder.precision,
        "loreEmbedFp32S": round(fp32_s, 2),
        "targets": TARGETS,
    }


def run_store_bench(memories: int = 10_000, records: int = 10_000, lore: int = 2_500,
                    queries: int = 200, with_model: bool = True,
                    progress: bool = True) -> dict[str, Any]:
    from narratoria.bench.report import machine

    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "machine": machine()}
    with tempfile.TemporaryDirectory(prefix="narratoria-bench-store-") as tmp:
        report["engine"] = bench_engine(Path(tmp), memories, queries, progress)
        if with_model:
            report["persistence"] = bench_store(Path(tmp), records, lore, queries, progress)
    e = report["engine"]
    lines = [
        f"engine (hash-384, {e['memories']} memories): {e['insertsPerS']} inserts/s "
        f"(reference {REFERENCE['insertsPerS']:.0f}/s); query_state p50 {e['queryStateMs']['p50']} ms, "
        f"p95 {e['queryStateMs']['p95']} ms (reference p50 {REFERENCE['queryStateP50Ms']:.0f} ms)",
    ]
    if with_model:
        p = report["persistence"]
        lines += [
            f"persistence (MiniLM, {p['records']} records): semantic_search p95 "
            f"{p['semanticSearchMs']['p95']} ms (embedding alone p95 {p['embedOnlyMs']['p95']} ms; "
            f"target < {TARGETS['semanticSearchP95Ms']:.0f}), exact_match p95 "
            f"{p['exactMatchMs']['p95']} ms (target < {TARGETS['exactMatchP95Ms']:.0f})",
            f"lore ingest: {p['loreChunks']} chunks with embedding in {p['loreIngestS']} s "
            f"(embedding alone {p['loreEmbedOnlyS']} s at {p['embedPrecision']}, "
            f"{p['loreEmbedFp32S']} s at fp32; target < {TARGETS['loreIngestS']:.0f} s)",
        ]
    report["summary"] = lines
    return report


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    e = report["engine"]
    rows = [
        f"| engine memory insert (hash-384, one call each) | {e['insertsPerS']} /s | "
        f"≥ {REFERENCE['insertsPerS']:.0f} /s (reference engine) |",
        f"| engine `query_state` with query text, p50 / p95 | {e['queryStateMs']['p50']} / "
        f"{e['queryStateMs']['p95']} ms | p50 ≤ {REFERENCE['queryStateP50Ms']:.0f} ms (reference) |",
    ]
    if "persistence" in report:
        p = report["persistence"]
        rows += [
            f"| `semantic_search` p50 / p95 (MiniLM, {p['records']} records) | "
            f"{p['semanticSearchMs']['p50']} / {p['semanticSearchMs']['p95']} ms | p95 < 50 ms "
            f"(embedding alone: p95 {p['embedOnlyMs']['p95']} ms) |",
            f"| `exact_match` p50 / p95 | {p['exactMatchMs']['p50']} / {p['exactMatchMs']['p95']} ms"
            f" | p95 < 10 ms |",
            f"| bulk ingest of {p['loreChunks']} lore chunks incl. embedding, median of "
            f"{len(p['loreIngestRunsS'])} | {p['loreIngestS']} s |"
            f" < 20 s (embedding alone: {p['loreEmbedOnlyS']} s at {p['embedPrecision']}; "
            f"{p['loreEmbedFp32S']} s at fp32) |",
            f"| `store_many` of memory events incl. embedding | {p['memoryStoreManyPerS']} /s | — |",
        ]
    text = "\n".join([
        f"## store — {report['date']}", "",
        f"- command: `{command}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- engine at {e['memories']} memories; {e['queryStateMs']['n']} queries each; medians "
        "and p95. Reference figures: the Phantom State engine (sqlite-vec) on this machine "
        "(DESIGN.md); it cannot be run beside ours (no loadable sqlite extensions here).", "",
        "| measure | result | target |", "|---|---|---|", *rows, "", ""])
    if not path.exists():
        path.write_text("# Benchmarks\n\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
