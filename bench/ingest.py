"""`narratoria bench ingest`: campaign validation and ingestion times.

Two campaigns, each copied into a temporary folder and ingested into its own
fresh DuckDB file with the real embedder (``make_backend()``):

- the rich built-in campaign (``campaigns/long_ebb``);
- a generated campaign of ``files`` text files (``generate_campaign``): a
  "large" campaign, deterministic for a given seed.

For each: validation time (median of N ``validate`` calls), one cold ingestion
(total and embedding time, chunks, files), the cached reload of the unchanged
campaign (median of N ``ingest`` calls on the store reopened from its file; none
may embed anything) and a one-file edit (median of N, each appending a paragraph
to one prose file; each must re-ingest exactly that file). The model is loaded
and warmed before any of it (its load time is reported apart): a daemon ingests
with the model it already has.

Targets (docs/campaigns.md, "Ingestion times"): total cold ingestion under 15 s
for a typical (~100 chunk) campaign; for a bigger one, 20 ms a chunk (50 s for
~2500 chunks); a reload of an unchanged campaign under 1 s; a
one-file edit re-ingests only that file, in under 5 s; validation under 2 s.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from narratoria.bench.report import say

DEFAULT_FILES = 500
DEFAULT_SEED = 1729
RICH_CAMPAIGN = "long_ebb"
TARGETS = {
    "coldTypicalS": 15.0,      # total, cold, ~100 chunks
    "typicalChunks": 150,      # up to this many chunks a campaign is "typical"
    "coldPerChunkS": 0.02,     # above it: 50 s for ~2500 chunks
    "cachedS": 1.0,
    "editS": 5.0,
    "validationS": 2.0,
}
# Content the rules of stats, items and plot beats apply to: a prose edit goes elsewhere.
_STRUCTURED_DIRS = {"plot", "beats", "stats", "items"}


# -- the generated campaign ----------------------------------------------------------------

_KINDS = (  # (folder, entity_type, content types, share of the files)
    ("characters", "character", ("personality", "background", "goals", "speech"), 0.30),
    ("lore", "lore", ("history", "world_knowledge", "mechanics"), 0.30),
    ("locations", "world", ("setting", "history"), 0.20),
    ("factions", "lore", ("history", "goals", "relationship"), 0.15),
    ("world", "world", ("setting", "mechanics"), 0.05),
)
_FIRST = ("Aldric Bryn Cazia Dorran Elsbet Fenwick Galen Hesper Ilsa Jory Kestrel Lioren Maud "
          "Nerys Osric Perrin Quill Rowan Sabine Tobin Ulla Varek Wenna Yorick Zara").split()
_LAST = ("Ashgrove Blackwater Coldharbour Dunmere Embervale Farrow Greywick Hollin Ironsides "
         "Jessamy Kettleburn Larkspur Marrow Netherby Oakhollow Pellam Ravensworth Saltmarsh "
         "Thornbury Underhill Vantry Whitlock").split()
_PLACES = ("Brackenford Cinderholt Dunmarrow Eastreach Foxhollow Gallowmere Harrowgate "
           "Ivywatch Kingsferry Lanternfall Mirefield Northmoor Oldcastle Pikeshore Quarrybank "
           "Redwater Stillwater Tidemouth Umberlee Wolfden").split()
_THINGS = ("lantern ledger compass bell key map oath crown blade harp chalice seal tapestry "
           "anchor relic mirror loom kiln forge bridge well orchard tower archive").split()
_ADJ = ("weathered quiet ancient bitter patient restless gilded broken hollow stubborn "
        "gentle fearful proud forgotten salt-stained candlelit ruined sworn hidden ragged").split()
_VERBS = ("guards", "remembers", "distrusts", "trades in", "keeps", "mourns", "hunts for",
          "bargains over", "protects", "refuses to speak of", "studies", "counts",
          "owes a debt to", "dreams of")
_MOODS = ("hopeful", "somber", "tense", "foreboding", "wistful", "playful")
_TAGS = ("debt secrets river trade magic grief salt war harvest faith music law smuggling "
         "weather memory oath family hunger fire tide").split()
_TEMPLATES = (
    "{name} {verb} the {adj} {thing} of {place}.",
    "In {place}, people say the {thing} was {adj} long before {name} arrived.",
    "Nobody in {place} has seen {name} without the {thing} since the {adj} winter.",
    "The {adj} road from {place} to {place2} passes the old {thing}, and travellers leave "
    "a coin there for luck.",
    "{name} once swore an oath over the {thing}; the oath still binds, though the words are "
    "half forgotten.",
    "When the bells of {place} ring twice, the {thing} is carried to the square and the "
    "{adj} families gather around it.",
    "Ask about the {thing} and {name} will change the subject, politely but at once.",
    "Merchants from {place2} pay double for anything {adj} that comes out of {place}.",
    "The {thing} is said to answer only to those who have lost something in {place}.",
    "Children in {place} play a game called {name}'s {thing}, whose rules nobody agrees on.",
    "Every spring the council of {place} argues about the {thing}, and every spring "
    "nothing changes.",
    "{name} keeps a {adj} journal; half of it is about {place2}, the rest about the {thing}.",
)


def _sentence(rng: random.Random, name: str, place: str) -> str:
    return rng.choice(_TEMPLATES).format(
        name=name if rng.random() < 0.6 else f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        verb=rng.choice(_VERBS), adj=rng.choice(_ADJ), thing=rng.choice(_THINGS),
        place=place, place2=rng.choice(_PLACES))


def _file_text(rng: random.Random, kind: str, entity_type: str, contents: tuple[str, ...],
               entity_id: str, name: str, place: str) -> str:
    paragraphs = ["\n".join(_wrap(" ".join(_sentence(rng, name, place)
                                           for _ in range(rng.randint(2, 6)))))
                  for _ in range(rng.randint(2, 6))]
    body = "\n\n".join(paragraphs) + "\n"
    style = rng.random()
    if style < 0.25:  # no frontmatter: everything inferred from the name and the prose
        return body
    lines = ["---", f"entity_type: {entity_type}"]
    if style >= 0.45:  # rich frontmatter
        lines += [f"entity_id: {entity_id}", f"content_type: {rng.choice(contents)}",
                  f"priority: {rng.randint(1, 5)}", f"mood: {rng.choice(_MOODS)}",
                  f"tags: [{', '.join(rng.sample(_TAGS, rng.randint(2, 5)))}]"]
        if kind == "characters":
            lines += [f"name: {name}", f"home: {place}",
                      f"traits: [{', '.join(rng.sample(_ADJ, 3))}]"]
        elif kind == "locations":
            lines += [f"name: {place}", f"region: {rng.choice(_PLACES)}"]
    return "\n".join(lines + ["---", "", body])


def _wrap(text: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


def generate_campaign(folder: Path, files: int = DEFAULT_FILES, seed: int = DEFAULT_SEED) -> Path:
    """Write a valid campaign of ``files`` text files into ``folder``; the same seed, the same bytes.

    ``campaign.yml`` and prose files (``.md`` and ``.txt``) in
    ``characters/``, ``lore/``, ``locations/``, ``factions/`` and ``world/``, 2-6
    paragraphs each; a quarter without frontmatter, the rest with a minimal or a
    rich block (docs/campaigns.md, "Frontmatter"). No stats, items, beats or
    assets: those have their own rules and benches.
    """
    if files < 1:
        raise ValueError("a campaign needs at least one file")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    (folder / "campaign.yml").write_text(
        "id: bench_generated\n"
        "title: The Thousand Harbours (generated)\n"
        "version: 1.0.0\n"
        "author: narratoria bench ingest\n"
        f"description: A generated campaign of {files} files for the ingestion benchmark "
        f"(seed {seed}).\n"
        "genre: Low Fantasy\n"
        "tone: Wistful, Tense\n"
        "rules_hint: narrative\n"
        "content_rating: Teen\n"
        "tags: [generated, benchmark]\n"
        "license: MIT\n", encoding="utf-8")
    counts = [max(1, round(files * share)) for *_, share in _KINDS]
    counts[0] += files - sum(counts)  # the rounding's remainder goes to the characters
    index = 0
    for (kind, entity_type, contents, _), count in zip(_KINDS, counts):
        (folder / kind).mkdir(exist_ok=True)
        for _ in range(count):
            index += 1
            first, last, place = rng.choice(_FIRST), rng.choice(_LAST), rng.choice(_PLACES)
            name = f"{first} {last}"
            stem = {"characters": f"{first}_{last}", "locations": place}.get(
                kind, f"{rng.choice(_ADJ).replace('-', '_')}_{rng.choice(_THINGS)}").lower()
            entity_id = f"{stem}_{index:04d}"
            prefix = {"characters": "character", "lore": "lore", "world": "world"}.get(kind, kind[:-1])
            ext = "md" if rng.random() < 0.6 else "txt"
            text = _file_text(rng, kind, entity_type, contents, entity_id, name, place)
            (folder / kind / f"{prefix}_{entity_id}.{ext}").write_text(text, encoding="utf-8")
    return folder


# -- the bench -----------------------------------------------------------------------------

def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def cold_target_s(chunks: int) -> float:
    """The cold-ingestion target for a campaign of ``chunks`` chunks (see the module doc)."""
    if chunks <= TARGETS["typicalChunks"]:
        return TARGETS["coldTypicalS"]
    return round(max(TARGETS["coldTypicalS"], chunks * TARGETS["coldPerChunkS"]), 1)


def _edit_candidates(files: list[Any]) -> list[Any]:
    """Prose content files an appended paragraph cannot make invalid."""
    def prose(f: Any) -> bool:
        parts = PurePosixPath(f.relative).parts
        return (f.kind == "content" and f.format in ("md", "txt")
                and parts[0] not in _STRUCTURED_DIRS
                and not PurePosixPath(f.relative).name.startswith(("plot_beat", "stat_", "item_")))
    return [f for f in files if prose(f)]


def _timed_ingest(root: Path, store: Any) -> tuple[float, Any]:
    """``ingest(root, store)`` and the seconds it took; the store is closed after."""
    from narratoria.runtime.campaign import ingest

    try:
        started = time.perf_counter()
        result = ingest(root, store)
        return time.perf_counter() - started, result
    finally:
        store.close()


def bench_campaign(name: str, source: Path, work: Path, embedder: Any, iterations: int,
                   progress: bool) -> dict[str, Any]:
    """Validation, cold ingestion, cached reload and one-file edits of the campaign ``source``.

    ``source`` is copied into ``work`` first (the edits change files); the store is a
    fresh DuckDB file in ``work``.
    """
    from narratoria.runtime.campaign import ingest, validate
    from narratoria.runtime.store import PersistenceStore

    # Same folder name: a manifest without an id takes its id from it.
    root = Path(shutil.copytree(source, work / Path(source).resolve().name))
    db = work / "narratoria.duckdb"

    say(progress, f"{name}: validation x{iterations}")
    runs, report = [], None
    for _ in range(iterations):
        started = time.perf_counter()
        report = validate(root)
        runs.append(time.perf_counter() - started)
    assert report is not None
    if report.errors:
        raise RuntimeError(f"{source} is not a valid campaign: "
                           + "; ".join(str(p) for p in report.errors[:5]))
    content = [f for f in report.files if f.kind == "content"]
    validation = {"medianMs": _ms(statistics.median(runs)), "runsMs": [_ms(r) for r in runs],
                  "errors": 0, "warnings": len(report.warnings),
                  "targetS": TARGETS["validationS"]}
    validation["met"] = validation["medianMs"] < TARGETS["validationS"] * 1000

    def phase(label: str):
        def report_phase(phase_name: str, done: int, total: int) -> None:
            if phase_name == "embedding" and done == 0:
                say(progress, f"{name}: {label}: embedding {total} chunk(s)")
        return report_phase

    say(progress, f"{name}: cold ingestion of {len(content)} file(s) into a fresh database")
    started = time.perf_counter()
    store = PersistenceStore(db, embedder)
    open_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        result = ingest(root, store, progress=phase("cold"))
        cold_s = time.perf_counter() - started
    finally:
        store.close()
    cold = {"totalMs": _ms(cold_s), "ingestionMs": result.total_ingestion_ms,
            "embeddingMs": result.embedding_time_ms, "chunks": result.text_chunks,
            "chunksEmbedded": result.chunks_embedded, "files": result.total_files,
            "filesReingested": result.files_reingested, "assets": result.binary_assets,
            "storeCreateMs": _ms(open_s), "targetS": cold_target_s(result.text_chunks)}
    cold["msPerChunk"] = round(cold_s * 1000 / max(1, result.text_chunks), 2)
    cold["met"] = cold_s < cold["targetS"]

    say(progress, f"{name}: cached reload x{iterations}")
    reload_s, opens, embedded, reingested = [], [], [], []
    for _ in range(iterations):
        started = time.perf_counter()
        store = PersistenceStore(db, embedder)  # a second load: the store reopened from its file
        opens.append(time.perf_counter() - started)
        seconds, again = _timed_ingest(root, store)
        reload_s.append(seconds)
        embedded.append(again.chunks_embedded)
        reingested.append(again.files_reingested)
    cached = {"medianMs": _ms(statistics.median(reload_s)), "runsMs": [_ms(r) for r in reload_s],
              "storeOpenMedianMs": _ms(statistics.median(opens)),
              "chunksEmbedded": max(embedded), "filesReingested": max(reingested),
              "targetS": TARGETS["cachedS"]}
    cached["ok"] = cached["chunksEmbedded"] == 0 and cached["filesReingested"] == 0
    cached["met"] = cached["ok"] and cached["medianMs"] < TARGETS["cachedS"] * 1000

    candidates = _edit_candidates(report.files)
    if not candidates:
        raise RuntimeError(f"{source} has no prose file to edit")
    say(progress, f"{name}: one-file edit x{iterations}")
    edit_s, edited, files_done, chunks_done = [], [], [], []
    rng = random.Random(len(candidates))
    for i in range(iterations):
        target = candidates[(i * 7) % len(candidates)]
        with target.path.open("a", encoding="utf-8") as fh:
            fh.write(f"\n\n{_sentence(rng, 'The bench', 'the margin')} (edit {i + 1})\n")
        seconds, changed = _timed_ingest(root, PersistenceStore(db, embedder))
        edit_s.append(seconds)
        edited.append(target.relative)
        files_done.append(changed.files_reingested)
        chunks_done.append(changed.chunks_embedded)
    edit = {"medianMs": _ms(statistics.median(edit_s)), "runsMs": [_ms(r) for r in edit_s],
            "files": edited, "filesReingested": files_done, "chunksEmbedded": chunks_done,
            "targetS": TARGETS["editS"]}
    edit["ok"] = all(n == 1 for n in files_done)
    edit["met"] = edit["ok"] and edit["medianMs"] < TARGETS["editS"] * 1000

    return {"name": name, "campaignId": result.campaign_id, "source": str(source),
            "contentFiles": len(content), "validation": validation, "cold": cold,
            "cached": cached, "edit": edit,
            "met": validation["met"] and cold["met"] and cached["met"] and edit["met"]}


def run_ingest_bench(iterations: int = 5, progress: bool = True, *,
                     campaign: Path | None = None, files: int = DEFAULT_FILES,
                     seed: int = DEFAULT_SEED, embedder: Any = None) -> dict[str, Any]:
    """The bench on the rich built-in campaign (or ``campaign``) and a generated one."""
    from narratoria.runtime.campaign import builtin_campaigns_dir
    from narratoria.runtime.campaign.chunking import count_tokens
    from narratoria.runtime.embedding import make_backend

    from narratoria.bench.report import machine

    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    rich = Path(campaign) if campaign else builtin_campaigns_dir() / RICH_CAMPAIGN
    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "machine": machine(), "iterations": iterations,
                              "targets": TARGETS}
    say(progress, "loading the embedding model")
    started = time.perf_counter()
    backend = embedder if embedder is not None else make_backend()
    backend.embed("warm up")  # the model a daemon already holds
    count_tokens("warm up")   # and the tokenizer the chunker counts with
    report["embedder"] = {"model": backend.model,
                          "precision": getattr(backend, "precision", None),
                          "loadMs": _ms(time.perf_counter() - started)}
    campaigns = []
    with tempfile.TemporaryDirectory(prefix="narratoria-bench-ingest-") as tmp:
        work = Path(tmp)
        (work / "rich").mkdir()
        campaigns.append(bench_campaign(f"rich ({rich.name})", rich, work / "rich", backend,
                                        iterations, progress))
        say(progress, f"generating a {files}-file campaign (seed {seed})")
        generated = generate_campaign(work / "generated-source", files=files, seed=seed)
        (work / "generated").mkdir()
        campaigns.append(bench_campaign(f"generated ({files} files)", generated,
                                        work / "generated", backend, iterations, progress))
    report["campaigns"] = campaigns
    report["met"] = all(c["met"] for c in campaigns)
    report["summary"] = [line for c in campaigns for line in _summary(c)]
    return report


def _yes(met: bool) -> str:
    return "met" if met else "NOT met"


def _summary(c: dict[str, Any]) -> list[str]:
    v, cold, cached, edit = c["validation"], c["cold"], c["cached"], c["edit"]
    return [
        f"{c['name']}: {c['contentFiles']} content file(s), {cold['chunks']} chunk(s), "
        f"{cold['assets']} asset(s)",
        f"  validation: median {v['medianMs']} ms (target < {v['targetS']:.0f} s: {_yes(v['met'])})",
        f"  cold ingestion: {cold['totalMs']} ms total, {cold['embeddingMs']} ms embedding+insert, "
        f"{cold['msPerChunk']} ms/chunk (target < {cold['targetS']:g} s: {_yes(cold['met'])})",
        f"  cached reload: median {cached['medianMs']} ms, {cached['chunksEmbedded']} embedded "
        f"(store open {cached['storeOpenMedianMs']} ms; target < {cached['targetS']:.0f} s: "
        f"{_yes(cached['met'])})",
        f"  one-file edit: median {edit['medianMs']} ms, files re-ingested "
        f"{edit['filesReingested']} (target: exactly 1, < {edit['targetS']:.0f} s: "
        f"{_yes(edit['met'])})",
    ]


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    """Append this run's section to ``path`` (newest last, like the other benches)."""
    m, e = report["machine"], report["embedder"]
    cs = report["campaigns"]

    def row(label: str, cell, target: str) -> str:
        return f"| {label} | " + " | ".join(cell(c) for c in cs) + f" | {target} |"

    lines = [
        f"## ingest — {report['date']}", "",
        f"- command: `{command}`",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
        f"- embedder: {e['model']} ({e['precision']}), loaded and warmed first in "
        f"{e['loadMs'] / 1000:.1f} s (not counted below: a daemon ingests with the model it holds)",
        f"- each campaign copied to a temporary folder, a fresh DuckDB file each; validation, "
        f"cached reload and one-file edit: medians of {report['iterations']}; cold: one run; "
        "cached reload and edit reopen the store from its file (open time apart)", "",
        "| measure | " + " | ".join(c["name"] for c in cs) + " | target |",
        "|---|" + "---|" * len(cs) + "---|",
        row("content files / chunks / assets",
            lambda c: f"{c['contentFiles']} / {c['cold']['chunks']} / {c['cold']['assets']}", "—"),
        row("validation, median", lambda c: f"{c['validation']['medianMs']} ms",
            f"< {TARGETS['validationS']:.0f} s"),
        row("cold ingestion, total", lambda c: f"{c['cold']['totalMs'] / 1000:.2f} s "
            f"({c['cold']['msPerChunk']} ms/chunk)",
            f"< {TARGETS['coldTypicalS']:.0f} s at ~100 chunks; 20 ms/chunk above"),
        row("… of which embedding + insert", lambda c: f"{c['cold']['embeddingMs'] / 1000:.2f} s",
            "—"),
        row("cached reload (unchanged), median",
            lambda c: f"{c['cached']['medianMs']} ms, {c['cached']['chunksEmbedded']} embedded",
            f"< {TARGETS['cachedS']:.0f} s, 0 embedded"),
        row("store open from file, median", lambda c: f"{c['cached']['storeOpenMedianMs']} ms",
            "—"),
        row("one-file edit, median",
            lambda c: f"{c['edit']['medianMs']} ms, files re-ingested "
                      f"{sorted(set(c['edit']['filesReingested']))}",
            f"exactly 1 file, < {TARGETS['editS']:.0f} s"),
        "",
    ]
    for c in cs:
        parts = [f"validation {_yes(c['validation']['met'])}",
                 f"cold (< {c['cold']['targetS']:g} s) {_yes(c['cold']['met'])}",
                 f"cached {_yes(c['cached']['met'])}", f"edit {_yes(c['edit']['met'])}"]
        lines.append(f"Targets, {c['name']}: " + ", ".join(parts) + ".")
    lines.append("")
    if not path.exists():
        path.write_text("# Benchmarks\n\nResults of `narratoria bench …`, newest last.\n\n")
    elif not path.read_text(encoding="utf-8").endswith("\n\n"):
        lines.insert(0, "")  # a blank line after the previous section, whatever it ended with
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


__all__ = ["generate_campaign", "run_ingest_bench", "write_markdown", "bench_campaign",
           "cold_target_s", "TARGETS"]

if __name__ == "__main__":  # pragma: no cover - use `narratoria bench ingest`
    import json

    print(json.dumps(run_ingest_bench(), indent=2))
