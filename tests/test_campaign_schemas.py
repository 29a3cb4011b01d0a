"""Campaigns written to the original schemas: plot beats
as ``plot/beats.json`` in the plot-beats schema's form, loaded, checked and tracked like
the YAML form; and an entity's id taken from what its file says (frontmatter name, first
heading) when its file name does not follow the convention.

Real campaign folders in tmp_path, the real CLI in a subprocess, the real store and
embedder for the search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from narratoria.runtime.campaign import ingest, validate
from narratoria.runtime.campaign.beat_tracker import BeatTracker, transition
from narratoria.runtime.campaign.beats import Beat, load_beats
from narratoria.runtime.embedding import shared_local
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

NARRATORIA = Path(sys.executable).parent / "narratoria"
MANIFEST = "title: The Tower\nversion: 1.0.0\n"

# The plot-beats schema's form: scene_count {min, max}, player_state as text,
# consequences as text, requires_beat as one id, npc_state {npc: state}.
SCHEMA_BEATS = {
    "beats": [
        {"id": "beat_001", "title": "The First Trial",
         "description": "A logic puzzle bars the tower door.", "priority": "critical",
         "conditions": {"scene_count": {"min": 1, "max": 4}},
         "consequences": ["Leory takes note of the player"],
         "location": "Tower vestibule", "tags": ["puzzle"]},
        {"id": "beat_002", "title": "The Realization",
         "description": "The player sees that every trial was calibrated.", "priority": "high",
         "conditions": {"scene_count": {"min": 3, "max": 12}, "requires_beat": "beat_001",
                        "player_state": "established in the tower",
                        "npc_state": {"leory": "watchful"},
                        "world_state": {"tower_status": "awake"}},
         "consequences": ["Leory becomes an open adversary", "The tower grows colder"]},
        {"id": "beat_003", "title": "Final Confrontation",
         "description": "The last room demands everything the player has learned.",
         "conditions": {"requires_any_beat": ["beat_002", "beat_004"],
                        "player_choices": ["defy", "climb"],
                        "custom": {"expression": "player.courage >= 2 && not player.cursed"}}},
        {"id": "beat_004", "title": "A Side Door", "description": "A way round the trials.",
         "priority": "optional",
         "conditions": {"scene_count": {"min": 20, "max": 21}}},
    ]
}

# The same beats in the architecture spec's YAML form, one file each.
YAML_BEATS = {
    "plot/beat_001.yml": """
        entity_type: plot_beat
        entity_id: beat_001
        title: The First Trial
        description: A logic puzzle bars the tower door.
        priority: critical
        conditions: {scene_count_min: 1, scene_count_max: 4}
    """,
    "plot/beat_002.yml": """
        entity_type: plot_beat
        entity_id: beat_002
        title: The Realization
        description: The player sees that every trial was calibrated.
        priority: high
        conditions:
          scene_count_min: 3
          scene_count_max: 12
          requires_beat: [beat_001]
          player_state: established_in_the_tower
          npc_state: ["leory.state == watchful"]
          world_state: ["tower_status == awake"]
    """,
    "plot/beat_003.yml": """
        entity_type: plot_beat
        entity_id: beat_003
        title: Final Confrontation
        description: The last room demands everything the player has learned.
        conditions:
          requires_any_beat: [beat_002, beat_004]
          player_choices: [defy, climb]
          state: ["player.courage >= 2", "not player.cursed"]
    """,
    "plot/beat_004.yml": """
        entity_type: plot_beat
        entity_id: beat_004
        title: A Side Door
        description: A way round the trials.
        priority: optional
        conditions: {scene_count_min: 20, scene_count_max: 21}
    """,
}

STATE = {"player": {"established_in_the_tower": True, "courage": 3},
         "world": {"tower_status": "awake"}, "npcs": {"leory": {"state": "watchful"}}}
SCENES = [(1, ""), (2, "I defy him"), (3, ""), (4, "climb the stair"), (5, ""), (6, "")]


def campaign(root: Path, files: dict[str, str | dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "campaign.yml").write_text(MANIFEST)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (json.dumps(content, indent=2) if isinstance(content, dict)
                else textwrap.dedent(content).lstrip("\n"))
        path.write_text(text, "utf-8")
    return root


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())


def play(beats: list[Beat]) -> list[tuple[int, list[str]]]:
    tracker, story = BeatTracker(), []
    for scene, choice in SCENES:
        step = transition(beats, tracker, scene, STATE, choice=choice)
        tracker = step.tracker
        story.append((scene, [b.id for b in step.triggered]))
    return story


# -- plot beats ------------------------------------------------------------------------

def test_a_schema_form_beats_json_loads_and_validates(tmp_path: Path):
    root = campaign(tmp_path / "tower", {"plot/beats.json": SCHEMA_BEATS})
    report = validate(root)
    assert report.ok and report.problems == [], report.problems
    beats = {b.id: b for b in load_beats(root)}
    first, second, third = beats["beat_001"], beats["beat_002"], beats["beat_003"]
    assert (first.scene_min, first.scene_max, first.priority_name) == (1, 4, "critical")
    assert first.consequences == ("Leory takes note of the player",)
    assert "Leory takes note of the player" in first.guidance and first.file == "plot/beats.json"
    assert (second.scene_min, second.scene_max, second.requires) == (3, 12, ("beat_001",))
    assert {str(c) for c in second.state} == {"player.established_in_the_tower",
                                              "world.tower_status == 'awake'"}
    assert [str(c) for c in second.npcs] == ["leory.state == 'watchful'"]
    assert third.requires_any == ("beat_002", "beat_004")
    assert third.all_choices == ("defy", "climb")
    assert {str(c) for c in third.state} == {"player.courage >= 2", "not player.cursed"}


def test_the_cli_validates_a_schema_form_campaign(tmp_path: Path):
    root = campaign(tmp_path / "tower", {"plot/beats.json": SCHEMA_BEATS})
    proc = cli("campaigns", "validate", str(root), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["ok"] is True


def test_both_forms_drive_the_beat_tracker_alike(tmp_path: Path):
    from_json = load_beats(campaign(tmp_path / "json", {"plot/beats.json": SCHEMA_BEATS}))
    from_yaml = load_beats(campaign(tmp_path / "yaml", YAML_BEATS))
    story = play(from_json)
    assert story == play(from_yaml)
    # The first trial at once, the realization once its window opens, the confrontation
    # the scene after the last of its two choices is made.
    assert story == [(1, ["beat_001"]), (2, []), (3, ["beat_002"]), (4, ["beat_003"]),
                     (5, []), (6, [])]


def test_a_beat_waits_for_its_player_state_and_every_choice(tmp_path: Path):
    beats = load_beats(campaign(tmp_path / "tower", {"plot/beats.json": SCHEMA_BEATS}))
    tracker = BeatTracker()
    unsettled = {**STATE, "player": {"courage": 3}}  # not yet established in the tower
    for scene, choice in [(1, ""), (2, "defy"), (3, ""), (4, "")]:
        tracker = transition(beats, tracker, scene, unsettled, choice=choice).tracker
    assert set(tracker.triggered) == {"beat_001"}
    assert "beat_003:0" in tracker.chosen and "beat_003:1" not in tracker.chosen
    again = BeatTracker.from_json(json.loads(json.dumps(tracker.to_json())))
    assert again == tracker  # the choices made so far survive the saved tracker


@pytest.mark.parametrize("conditions, field, message", [
    ({"scene_count": {"min": "two"}}, "beats[0].conditions.scene_count.min",
     "must be a whole scene number"),
    ({"scene_count": {"min": 1, "most": 3}}, "beats[0].conditions.scene_count.most",
     "unknown key; a scene window has min and max"),
    ({"scene_count": 5}, "beats[0].conditions.scene_count",
     "must be a mapping of min and max scene numbers"),
    ({"scene_count": {"min": 6, "max": 2}}, "beats[0].conditions.scene_count.min",
     "the window opens at scene 6, after it closes at scene 2"),
    ({"scene_count": {"min": 2}, "scene_count_min": 2}, "beats[0].conditions.scene_count.min",
     "write it once"),
    ({"requires_any_beat": ["beat_404"]}, "beats[0].conditions.requires_any_beat[0]",
     "requires beat 'beat_404', which no beat file defines"),
    ({"custom": {"expression": "player.courage >"}},
     "beats[0].conditions.custom.expression[0]", "cannot read 'player.courage >'"),
    ({"custom": {"rule": "x"}}, "beats[0].conditions.custom", "must be {expression:"),
])
def test_schema_form_mistakes_name_the_file_line_and_field(tmp_path: Path, conditions: dict,
                                                           field: str, message: str):
    doc = {"beats": [{"id": "beat_001", "title": "The First Trial",
                      "description": "A logic puzzle bars the tower door.",
                      "conditions": conditions}]}
    report = validate(campaign(tmp_path / "tower", {"plot/beats.json": doc}))
    [problem] = report.errors
    assert (problem.file, problem.field) == ("plot/beats.json", field), problem
    assert message in problem.message and problem.line > 1, problem


def test_text_consequences_are_read_and_anything_else_is_an_error(tmp_path: Path):
    doc = {"beats": [{"id": "beat_001", "title": "The First Trial",
                      "description": "A logic puzzle bars the tower door.",
                      "consequences": ["Leory notices", 7]}]}
    root = campaign(tmp_path / "tower", {"plot/beats.json": doc})
    proc = cli("campaigns", "validate", str(root))
    assert proc.returncode == 1
    assert "plot/beats.json:" in proc.stdout and "beats[0].consequences[1]" in proc.stdout
    assert "consequences[0]" not in proc.stdout, proc.stdout


# -- entity ids ------------------------------------------------------------------------

LEORY = """
    # Leory, Keeper of the Tower

    Leory is the gaunt wizard who built the tower of trials. He watches every climber
    from the shadows and speaks only in riddles.

    He keeps a brass astrolabe that hums whenever someone lies to him.
"""


def test_an_npc_file_headed_with_a_name_is_that_entity(tmp_path: Path):
    root = campaign(tmp_path / "tower", {"characters/npcs/skeleton.txt": LEORY})
    assert validate(root).ok
    proc = cli("campaigns", "related", str(root), "Leory", "--json")
    assert proc.returncode == 0, proc.stderr
    entity = json.loads(proc.stdout)["entity"]
    assert (entity["id"], entity["files"]) == ("leory", ["characters/npcs/skeleton.txt"])


def test_a_frontmatter_name_names_the_entity(tmp_path: Path):
    root = campaign(tmp_path / "tower", {"characters/npcs/draft.md": """
        ---
        name: Old Gareth
        ---

        A gruff smith who is secretly kind.
    """})
    proc = cli("campaigns", "related", str(root), "old_gareth", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["entity"]["id"] == "old_gareth"


def test_questions_about_leory_find_the_facts_of_its_file(tmp_path: Path):
    root = campaign(tmp_path / "tower", {"characters/npcs/skeleton.txt": LEORY})
    with PersistenceStore(tmp_path / "narratoria.duckdb", shared_local()) as store:
        result = ingest(root, store)
        scope = store.playthrough(lore_scope(result.campaign_id))
        facts = scope.exact_match("lore_chunk", {"npc_id": "leory"})
        assert {r.file_path for r in facts} == {"characters/npcs/skeleton.txt"}
        assert any("astrolabe" in r.content for r in facts)
        hits = scope.semantic_search("what does Leory keep that hums", "lore_chunk", 1)
        assert hits and hits[0].record.entity_ids == ["leory"]


def test_two_files_naming_one_id_is_an_error_naming_both(tmp_path: Path):
    root = campaign(tmp_path / "tower", {
        "characters/npcs/skeleton.txt": LEORY,
        "characters/character_leory.txt": "---\nentity_type: npc\n---\n\nLeory, again.\n",
    })
    report = validate(root)
    [problem] = report.errors
    assert (problem.file, problem.line, problem.field) == (
        "characters/npcs/skeleton.txt", 1, "entity_id")
    assert "'leory'" in problem.message and "characters/character_leory.txt" in problem.message
    proc = cli("campaigns", "validate", str(root))
    assert proc.returncode == 1 and "skeleton.txt:1: entity_id" in proc.stdout
    # Files that share the id on purpose say so, by entity_id or by their names.
    (root / "characters" / "npcs" / "skeleton.txt").write_text("---\nentity_id: leory\n---\n"
                                                                + textwrap.dedent(LEORY))
    (root / "characters" / "character_leory_backstory.txt").write_text(
        "# Leory's Youth\n\nHe was a clerk once.\n")
    assert validate(root).ok, validate(root).problems
