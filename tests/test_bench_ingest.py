"""`narratoria bench ingest`: the generated campaign and a small end-to-end run of the bench."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from narratoria.bench.ingest import (
    TARGETS,
    cold_target_s,
    generate_campaign,
    run_ingest_bench,
    write_markdown,
)
from narratoria.runtime.campaign import chunk_file, validate

from conftest import TESTS

pytestmark = pytest.mark.model

TINY = TESTS / "fixtures" / "campaigns" / "tiny"


def test_generated_campaign_is_valid_varied_and_of_the_requested_size(tmp_path: Path):
    root = generate_campaign(tmp_path / "g", files=20, seed=3)
    report = validate(root)
    assert report.ok and not report.warnings, report.problems
    content = [f for f in report.files if f.kind == "content"]
    assert len(content) == len(report.files) == 20
    assert report.manifest is not None and report.manifest.id == "bench_generated"
    texts = [f.path.read_text() for f in content]
    assert any(t.startswith("---\n") for t in texts) and any(not t.startswith("---") for t in texts)
    assert {f.format for f in content} == {"md", "txt"}
    assert len({f.relative.split("/")[0] for f in content}) >= 3
    assert len(set(texts)) == 20
    chunks = [c for f, t in zip(content, texts) for c in chunk_file(f.relative, t)]
    assert len(chunks) >= 2 * 20 and {c.source_type for c in chunks} == {"frontmatter", "prose"}


def test_generated_campaign_is_deterministic(tmp_path: Path):
    a = generate_campaign(tmp_path / "a", files=12, seed=5)
    b = generate_campaign(tmp_path / "b", files=12, seed=5)
    c = generate_campaign(tmp_path / "c", files=12, seed=6)
    same = filecmp.dircmp(a, b)
    assert not same.diff_files and not same.left_only and not same.right_only
    assert all(not filecmp.dircmp(a / d, b / d).diff_files for d in same.common_dirs)
    assert sorted(p.read_text() for p in a.rglob("*.*")) != sorted(
        p.read_text() for p in c.rglob("*.*"))


def test_cold_target_is_the_typical_one_up_to_a_typical_campaign():
    assert cold_target_s(100) == TARGETS["coldTypicalS"] == 15.0
    assert cold_target_s(2500) == 50.0


def test_bench_end_to_end_on_a_tiny_campaign(tmp_path: Path):
    report = run_ingest_bench(iterations=2, progress=False, campaign=TINY, files=8)
    assert {"date", "machine", "iterations", "targets", "embedder", "campaigns", "met",
            "summary"} <= set(report)
    tiny, generated = report["campaigns"]
    assert tiny["campaignId"] == "tiny" and generated["contentFiles"] == 8
    for c in (tiny, generated):
        assert set(c) >= {"validation", "cold", "cached", "edit", "met"}
        assert c["validation"]["errors"] == 0 and len(c["validation"]["runsMs"]) == 2
        cold = c["cold"]
        assert cold["chunks"] == cold["chunksEmbedded"] > 0
        assert cold["filesReingested"] == cold["files"] == c["contentFiles"]
        assert cold["totalMs"] >= cold["embeddingMs"] > 0
        cached = c["cached"]
        assert cached["ok"] and cached["chunksEmbedded"] == 0 == cached["filesReingested"]
        assert len(cached["runsMs"]) == 2
        edit = c["edit"]
        assert edit["ok"] and edit["filesReingested"] == [1, 1]
        assert all(n >= 1 for n in edit["chunksEmbedded"])
    # The tiny campaign was copied: the fixture itself is untouched by the edits.
    assert "(edit" not in (TINY / "character_merlin.txt").read_text()

    out = tmp_path / "BENCHMARKS.md"
    write_markdown(out, report, "narratoria bench ingest --iterations 2")
    text = out.read_text()
    assert text.startswith("# Benchmarks") and "## ingest — " in text
    assert "| cached reload (unchanged), median |" in text and "Targets, rich (tiny)" in text
    write_markdown(out, report, "again")  # appended, newest last
    assert text.count("## ingest") == 1 and out.read_text().count("## ingest") == 2
