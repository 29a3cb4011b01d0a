"""The narration eval's scripts and held-out material (tests/data/):
every line valid, the development and held-out splits disjoint, the held-out campaign a
valid campaign of its own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from narratoria.runtime.planner import narration_eval as ne

DATA = Path(__file__).resolve().parent / "data"
HELDOUT = DATA / "heldout"
REPO = DATA.parent.parent
HELDOUT_CAMPAIGN = HELDOUT / "kessarine_deep_heldout"
BUILTIN = ("long_ebb", "ninth_milestone")
SCRIPT_NAME = re.compile(r"narration_(?P<campaign>[a-z_]+?)_(?P<split>dev|heldout)\.jsonl")


def scripts() -> list[Path]:
    found = sorted(DATA.glob("narration_*.jsonl")) + sorted(HELDOUT.glob("narration_*.jsonl"))
    return [p for p in found if p.name != "narration_relevance_labels.jsonl"]


def campaign_of(script: Path) -> Path:
    name = SCRIPT_NAME.fullmatch(script.name)
    assert name, f"{script.name}: name it narration_<campaign>_<dev|heldout>.jsonl"
    campaign = name["campaign"]
    return REPO / "campaigns" / campaign if campaign in BUILTIN else HELDOUT / f"{campaign}_heldout"


def split_of(script: Path) -> str:
    return SCRIPT_NAME.fullmatch(script.name)["split"]


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def test_the_scripts_are_where_the_issue_asks() -> None:
    names = {p.relative_to(DATA).as_posix() for p in scripts()}
    for campaign in BUILTIN:
        assert f"narration_{campaign}_dev.jsonl" in names
        assert f"heldout/narration_{campaign}_heldout.jsonl" in names
    assert "heldout/narration_kessarine_deep_heldout.jsonl" in names
    # Held-out material lives under heldout/ and says so in its name; nothing else does.
    for path in scripts():
        assert (split_of(path) == "heldout") == (path.parent == HELDOUT), path
    assert "_heldout" in HELDOUT_CAMPAIGN.name


@pytest.mark.parametrize("script", scripts(), ids=lambda p: p.name)
def test_every_script_line_is_valid(script: Path) -> None:
    lines = ne.load_script(script)  # raises ScriptError naming every bad line
    tags = {t for line in lines for t in line.tags}
    # Each script exercises every kind of action the eval scores.
    assert {"choice", "risky", "question", "npc", "place", "item", "tricky"} <= tags, tags
    assert all(line.tags for line in lines), "every line says what it exercises"
    # Choice lines carry the "choice" tag and only they do: a report can count them.
    assert all((line.choice is not None) == ("choice" in line.tags) for line in lines)


@pytest.mark.parametrize("script", scripts(), ids=lambda p: p.name)
def test_the_actions_name_the_campaigns_entities(script: Path) -> None:
    """Entity recall needs actions that name people, places and things of the campaign."""
    lexicon = ne.campaign_facts(campaign_of(script)).lexicon
    texts = [line.text for line in ne.load_script(script) if line.text]
    naming = [t for t in texts if lexicon.named_in(t)]
    assert len(naming) >= len(texts) // 3, (len(naming), len(texts))


def test_the_development_split_has_forty_actions_over_both_builtin_campaigns() -> None:
    dev = [p for p in scripts() if split_of(p) == "dev"]
    assert {campaign_of(p).name for p in dev} == set(BUILTIN)
    assert sum(len(ne.load_script(p)) for p in dev) >= 40
    assert all(len(ne.load_script(p)) >= 10 for p in scripts())


def test_the_splits_are_disjoint() -> None:
    seen: dict[str, Path] = {}
    for path in scripts():
        for line in ne.load_script(path):
            if line.text is None:
                continue
            key = _norm(line.text)
            assert key not in seen, f"{path.name}:{line.line} repeats {seen[key].name}"
            seen[key] = path
    heldout = {k for k, p in seen.items() if split_of(p) == "heldout"}
    labels = [_norm(json.loads(raw)["action"]) for raw in
              (DATA / "narration_relevance_labels.jsonl").read_text().splitlines() if raw.strip()]
    assert not heldout & set(labels), "the relevance calibration must not use held-out actions"


def test_the_readme_says_held_out_files_are_never_tuned_on() -> None:
    readme = (DATA / "README.md").read_text()
    line = next((l for l in readme.splitlines() if "heldout" in l and "never" in l), "")
    assert "tuned" in line, readme


def test_the_held_out_campaign_is_valid_and_different() -> None:
    proc = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns",
                           "validate", str(HELDOUT_CAMPAIGN)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 error(s), 0 warning(s)" in proc.stdout
    files = [p for p in HELDOUT_CAMPAIGN.rglob("*") if p.is_file()]
    assert 4 <= len(files) <= 8, files
    facts = ne.campaign_facts(HELDOUT_CAMPAIGN)
    assert facts.content_rating == "Everyone"  # the built-ins are Teen
    import yaml

    manifest = yaml.safe_load((HELDOUT_CAMPAIGN / "campaign.yml").read_text())
    assert "Science Fiction" in manifest["genre"]
    assert "never invent another named person" in " ".join(manifest["hydration_guidance"].split())
    people = [e for e in facts.lexicon.entities if e.kind == "npc"]
    builtin_names = {e.name for c in BUILTIN for e in ne.campaign_facts(
        REPO / "campaigns" / c).lexicon.entities}
    assert len(people) >= 3 and not {e.name for e in people} & builtin_names
    # Names that are hard to spell: long, with consonant clusters a small model garbles.
    assert any(re.search(r"[bcdfghjklmnpqrstvwxz]{3}", e.name.lower()) for e in people)


# -- the parser refuses what it cannot play ------------------------------------------------

@pytest.mark.parametrize("text,error", [
    ('{"text": "I wait", "mood": "calm"}', "x.jsonl:1: 'mood': unknown key"),
    ('{"text": "I wait", "choice": 1}', "x.jsonl:1: text/choice: a line has exactly one"),
    ('{"tags": ["free"]}', "x.jsonl:1: text/choice: a line has exactly one"),
    ('{"choice": 2}', "x.jsonl:1: choice: the first line of session '1' has no menu"),
    ('{"text": "I wait"}\n{"choice": 5}', "x.jsonl:2: choice: expected a whole number 1..4"),
    ('{"text": "I wait"}\n{"choice": true}', "x.jsonl:2: choice: expected a whole number"),
    ('{"text": "   "}', "x.jsonl:1: text: empty"),
    ('{"text": 7}', "x.jsonl:1: text: expected a string, got int"),
    ('{"text": "I wait", "tags": ["dance"]}', "x.jsonl:1: tags: unknown tag 'dance'"),
    ('{"text": "I wait", "session": "a b"}', "x.jsonl:1: session: expected 1-40 letters"),
    ('{"session": "a", "text": "x"}\n{"session": "b", "text": "y"}\n'
     '{"session": "a", "text": "z"}', "x.jsonl:3: session: 'a' came earlier"),
    ('[1, 2]', "x.jsonl:1: expected a JSON object, got list"),
    ('{"text": "I wait"', "x.jsonl:1: not JSON"),
    ('', "x.jsonl: no lines"),
])
def test_bad_script_lines_are_named(text: str, error: str) -> None:
    with pytest.raises(ne.ScriptError) as info:
        ne.parse_script(text, "x.jsonl")
    assert any(e.startswith(error) for e in info.value.errors), info.value.errors


def test_long_input_is_never_echoed_whole() -> None:
    with pytest.raises(ne.ScriptError) as info:
        ne.parse_script('{"text": "I wait", "' + "k" * 5000 + '": 1}', "x.jsonl")
    assert len(str(info.value)) < 300
    with pytest.raises(ne.ScriptError) as info:
        ne.parse_script('{"text": "' + "w" * 600 + '"}', "x.jsonl")
    assert "600 characters, at most 500" in str(info.value) and "www" not in str(info.value)


def test_every_bad_line_is_reported_at_once() -> None:
    with pytest.raises(ne.ScriptError) as info:
        ne.parse_script('{"text": "a", "x": 1}\n{"text": "b"}\n{"choice": 9}', "x.jsonl")
    assert [e.split(":")[1] for e in info.value.errors] == ["1", "3"]
