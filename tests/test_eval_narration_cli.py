"""`narratoria eval narration` end to end: a 3-action script played on a real daemon,
the document's shape, and its numbers computed from the turns the daemon really
played."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from narratoria.runtime.planner import narration_eval as ne
from support.daemon import Daemon

SCRIPT = [
    {"session": "quay", "text": "I ask Odile Venn what she wants from the Undercourt",
     "tags": ["npc", "question"]},
    {"session": "quay", "choice": 2, "tags": ["choice"]},
    {"session": "quay", "text": "I roll to jump the channel with my boathook",
     "tags": ["risky", "item"]},
]


def _eval(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "eval", "narration",
                           *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The eval run on a daemon of the test's own, then what that daemon kept."""
    folder = tmp_path_factory.mktemp("eval-narration")
    script = folder / "three.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in SCRIPT))
    bench = folder / "BENCH.md"
    daemon = Daemon()
    try:
        proc = _eval("--campaign", "long_ebb", "--script", str(script), "--json",
                     "--address", f"unix://{daemon.socket}", "--write", str(bench))
        assert proc.returncode == 0, proc.stderr[-3000:]
        with daemon.client() as client:
            sessions = [s for s in client.list_sessions() if s.title == "eval narration quay"]
            assert len(sessions) == 1, sessions
            view = client.get_session_view(sessions[0].id)
            model = client.status().model_path
    finally:
        assert daemon.stop() == 0
    return json.loads(proc.stdout), view, model, script, bench


def test_the_document_has_every_metric_and_the_run_it_came_from(played) -> None:
    doc, _, model, script, _ = played
    assert doc["eval"] == "narration" and doc["model"] == model
    assert doc["campaign"]["id"] == "long_ebb" and doc["campaign"]["contentRating"] == "Teen"
    assert doc["script"] == str(script) and doc["daemon"]["started"] is False
    summary = doc["summary"]
    assert (summary["turns"], summary["scored"], summary["failed"]) == (3, 3, 0)
    assert list(summary["metrics"]) == list(ne.METRICS)
    for name, metric in summary["metrics"].items():
        assert {"rate", "count", "over", "unit", "worst"} <= set(metric), name
        assert metric["over"] == 0 or 0 <= metric["rate"] <= 1
        for example in metric["worst"]:
            assert {"turn", "line", "action", "excerpt", "why"} <= set(example)
            assert len(example["excerpt"]) <= 170 and len(example["why"]) <= 210
    assert set(doc["targets"]) == set(ne.TARGETS) | {"turn_p50"}


def test_the_turns_are_the_daemons_own(played) -> None:
    doc, view, _, _, _ = played
    records = [ne.TurnRecord.from_json(r) for r in doc["turnRecords"]]
    assert [r.line for r in records] == [1, 2, 3] and all(r.error is None for r in records)
    assert all(r.narration.strip() and len(r.choices) >= 3 for r in records)
    # The choice line played the second option of the menu before it.
    assert records[1].choice == 2 and records[1].action == records[0].choices[1]
    # What the daemon stored for the session is what the eval scored.
    assert view.turns == 3
    assert view.last_narration == records[2].narration
    assert list(view.choices) == records[2].choices


def test_the_numbers_are_computed_from_those_turns(played) -> None:
    doc, _, _, _, _ = played
    records = [ne.TurnRecord.from_json(r) for r in doc["turnRecords"]]
    facts = ne.CampaignFacts.from_json(doc["campaign"])
    # The similarities are the real MiniLM cosines of each action and its narration.
    from narratoria.runtime.embedding import LocalEmbedding

    embedder = LocalEmbedding()
    actions = embedder.embed_batch([r.action for r in records])
    replies = embedder.embed_batch([r.narration for r in records])
    sims = {r.index: float(a @ b) for r, a, b in zip(records, actions, replies)}
    for r, turn in zip(records, doc["turnRecords"]):
        assert turn["scores"]["similarity"] == pytest.approx(sims[r.index], abs=2e-3)
    # Scoring those turns again gives the document's summary, number for number.
    again = ne.summarize(records, ne.score_records(
        records, facts, {r.index: t["scores"]["similarity"]
                         for r, t in zip(records, doc["turnRecords"])}), facts)
    assert again["metrics"] == doc["summary"]["metrics"]
    m = doc["summary"]["metrics"]
    assert m["broken_choices"]["over"] == sum(len(r.choices) for r in records)
    assert m["repetition"]["over"] == 2  # turns 2 and 3 follow a turn of their session
    assert m["dice_consistency"]["over"] == sum(1 for r in records if r.roll_total is not None)
    # Odile Venn, the Undercourt and the boathook are named; each counted once.
    assert m["entity_recall"]["over"] == sum(
        len(t["scores"]["named"]) for t in doc["turnRecords"]) >= 3
    latency = doc["summary"]["latency"]
    assert latency["p50S"] == pytest.approx(sorted(r.latency_s for r in records)[1])
    assert latency["phaseP50Ms"]["total"] == int(statistics.median(
        r.timings_ms["total"] for r in records))


def test_write_appends_a_dated_section(played) -> None:
    doc, _, _, script, bench = played
    text = bench.read_text()
    assert text.startswith("# Benchmarks\n")
    assert f"## eval narration — {doc['at']}" in text
    assert f"script `{script}`" in text and "entity_recall" in text and "turn p50" in text


def test_a_bad_script_is_refused_before_any_daemon(tmp_path: Path) -> None:
    script = tmp_path / "bad.jsonl"
    script.write_text('{"text": "I wait", "mood": "calm"}\n{"choice": 1, "session": "x"}\n')
    proc = _eval("--campaign", "long_ebb", "--script", str(script), timeout=120)
    assert proc.returncode == 2
    assert f"{script}:1: 'mood': unknown key" in proc.stderr
    assert f"{script}:2: choice: the first line of session 'x'" in proc.stderr
    assert "starting a daemon" not in proc.stderr


def test_an_unknown_campaign_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "ok.jsonl"
    script.write_text('{"text": "I wait"}\n')
    proc = _eval("--campaign", "no_such_campaign", "--script", str(script), timeout=120)
    # not there: FAILED (1), as for every command; a bad argument is BAD_INPUT (2)
    assert proc.returncode == 1 and "no campaign with id 'no_such_campaign'" in proc.stderr
    proc = _eval("--campaign", "long_ebb", "--script", str(script), "--address", "unix:///x",
                 "--model", "m.gguf", timeout=120)
    assert proc.returncode == 2 and "--model and --seed" in proc.stderr


def test_it_starts_a_daemon_of_its_own_with_the_seed(tmp_path: Path) -> None:
    """Without --address the command starts `serve` itself (here with --seed) on a
    temporary data dir, plays, and stops it."""
    script = tmp_path / "one.jsonl"
    script.write_text(json.dumps({"text": "I light the tide lantern", "tags": ["item"]}) + "\n")
    proc = _eval("--campaign", "long_ebb", "--script", str(script), "--seed", "7", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["seed"] == 7 and doc["daemon"]["started"] is True
    assert doc["daemon"]["startupS"] > 0 and "serve --seed 7" in proc.stderr
    assert doc["summary"]["scored"] == 1 and doc["turnRecords"][0]["narration"].strip()
    # The daemon it started is gone, its socket with it.
    assert not Path(doc["daemon"]["address"].removeprefix("unix://")).exists()
