"""Campaign and skill files are read within bounds.

- A billion-laughs document (aliases of aliases) in a lore file's frontmatter grew into
  an error message for minutes; every YAML loader now refuses alias expansion past a
  small count, with the file and line, in well under a second.
- A value an author wrote is never echoed whole in a message.
- A text file over 1 MiB is refused, naming the file and its size; nothing parses it.
- JSON or YAML nested 200,000 deep is a problem with its file, never a traceback.
- Ingestion stores new chunks in small steps, invisible to grounding until one swap.

The latency figures (turn p50 during a large ingestion) come from
``narratoria bench ingest-load``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TESTS
from narratoria.runtime.campaign import CampaignError, ingest, validate
from narratoria.runtime.characters.realize import RealizationError, load_campaign_context
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.skills.discovery import SkillError, load_skill
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bounded-ingestion"
TINY = TESTS / "fixtures" / "campaigns" / "tiny"
BOMB = (FIXTURES / "billion-laughs.yml").read_text()
CLI = [sys.executable, "-m", "narratoria.clients.cli"]


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    return folder


def validate_cli(folder: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "campaigns", "validate", str(folder)], capture_output=True,
                          text=True, timeout=timeout)


def test_a_billion_laughs_in_lore_frontmatter_is_refused_at_once(campaign: Path):
    (campaign / "lore" / "laughs.md").write_text(f"---\n{BOMB}tags: *i\n---\nThe tower laughs.\n")
    started = time.monotonic()
    proc = validate_cli(campaign, timeout=60)  # before: over 120 s and 34 MB of message
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = next(l for l in proc.stdout.splitlines() if "laughs.md" in l)
    assert line.startswith(f"{campaign}/lore/laughs.md:6: -: invalid YAML: aliases expand to more "
                           "than 10000 nodes")
    assert len(proc.stdout) + len(proc.stderr) < 4000


def test_every_yaml_loader_refuses_alias_bombs(campaign: Path):
    started = time.monotonic()
    with pytest.raises(SkillError) as refused:  # SKILL.md frontmatter
        load_skill(FIXTURES / "laughing-skill")
    assert "SKILL.md:8:" in str(refused.value) and "aliases expand" in str(refused.value)
    (campaign / "player_character_constraints.yml").write_text(BOMB + "backgrounds: *i\n")
    with pytest.raises(RealizationError) as refused:  # a character's constraints
        load_campaign_context(campaign)
    assert "player_character_constraints.yml" in str(refused.value)
    assert "aliases expand" in str(refused.value) and len(str(refused.value)) < 1000
    (campaign / "items" / "item_laughs.yml").write_text(BOMB + "entity_type: item\nname: *i\n")
    problems = [p for p in validate(campaign).problems if p.file == "items/item_laughs.yml"]
    assert problems and "aliases expand" in problems[0].message
    assert time.monotonic() - started < 10


def test_a_huge_value_is_never_echoed_in_a_message(campaign: Path):
    huge = "x" * 200_000
    (campaign / "lore" / "huge.md").write_text(f"---\npriority: {huge}\nmood: [{huge}]\n---\nBody.\n")
    problems = [p for p in validate(campaign).problems if p.file == "lore/huge.md"]
    assert {p.field for p in problems} == {"priority", "mood"}
    for problem in problems:
        assert len(problem.message) < 300, problem.message[:300]
        assert "(200000 characters)" in problem.message
    with pytest.raises(CampaignError) as refused:
        ingest(campaign, PersistenceStore(":memory:", make_backend(EmbeddingSettings("hash", 32))))
    assert len(str(refused.value)) < 2000


def test_a_text_file_over_the_cap_is_refused_with_its_name_and_size(campaign: Path):
    big = campaign / "lore" / "big.md"
    paragraph = "The tower's stones remember every storm. " * 20 + "\n\n"
    big.write_text(paragraph * ((1 << 20) // len(paragraph) + 1))
    size = big.stat().st_size
    report = validate(campaign)
    assert not report.ok
    problem = next(p for p in report.errors if p.file == "lore/big.md")
    assert problem.message.startswith(f"{size} bytes; a text file may be at most 1048576")
    assert "lore/big.md" not in {f.relative for f in report.files}  # no reader parses it
    with pytest.raises(CampaignError, match="lore/big.md"):
        ingest(campaign, PersistenceStore(":memory:", make_backend(EmbeddingSettings("hash", 32))))


def test_json_and_yaml_nested_200k_deep_are_clean_problems(campaign: Path):
    deep = 200_000
    (campaign / "lore" / "deep.json").write_text("[" * deep + "]" * deep)
    (campaign / "stats" / "deep.json").write_text('{"id": "deep", "range": ' + "[" * deep + "]" * deep + "}")
    (campaign / "items" / "item_deep.yml").write_text("entity_type: item\nname: " + "[" * deep + "]" * deep)
    (campaign / "lore" / "deep_front.md").write_text("---\ntags: " + "[" * deep + "]" * deep + "\n---\nBody\n")
    proc = validate_cli(campaign)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    for file in ("lore/deep.json", "stats/deep.json", "items/item_deep.yml", "lore/deep_front.md"):
        lines = [l for l in proc.stdout.splitlines() if l.startswith(f"{campaign}/{file}:")]
        assert lines and "nested more than 64 levels deep" in lines[0], (file, proc.stdout[-2000:])
    assert len(proc.stdout) < 4000


def test_ingestion_stores_new_chunks_in_small_steps_behind_one_swap(tmp_path: Path):
    from narratoria.bench.ingest import generate_campaign
    from narratoria.runtime.campaign.ingest import STEP_CHUNKS, staging_scope

    folder = generate_campaign(tmp_path / "generated", files=60, seed=7)
    store = PersistenceStore(tmp_path / "s.duckdb", make_backend(EmbeddingSettings("hash", 32)))
    scope = store.playthrough(lore_scope("bench_generated"))
    first = ingest(folder, store)
    before = {r.id for r in scope.exact_match("lore_chunk")}
    assert len(before) == first.text_chunks > 3 * STEP_CHUNKS
    for path in [*folder.rglob("*.md"), *folder.rglob("*.txt")]:  # a new version of every file
        path.write_text(path.read_text() + "\n\nA new storm rose over the harbour.\n")
    seen: list[set[str]] = []

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "embedding" and 0 < done < total:  # between steps, mid-ingestion
            seen.append({r.id for r in scope.exact_match("lore_chunk")})

    second = ingest(folder, store, progress=progress)
    assert second.chunks_embedded > 3 * STEP_CHUNKS
    assert seen and all(ids == before for ids in seen)  # grounding saw the old version only
    after = {r.id for r in scope.exact_match("lore_chunk")}
    assert len(after) == second.text_chunks and not after & before
    steps = [s for s in store.monitor.recent("store_many")
             if s.playthrough_id == staging_scope("bench_generated")]
    assert len(steps) >= second.chunks_embedded // STEP_CHUNKS
    assert max(s.result_count for s in steps) <= STEP_CHUNKS
    assert not store.playthrough(staging_scope("bench_generated")).exact_match("lore_chunk")
    store.close()
