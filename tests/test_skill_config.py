"""Skill configuration: `narratoria skills config|enable|disable`, run as a player runs
them, against skill folders copied into tmp_path (never the real home or repo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILTIN_SKILLS, REPO
from narratoria.runtime.skills import SkillRegistry, load_skill
from narratoria.runtime.skills.config import (
    MASK,
    ConfigError,
    config_path,
    resolved_config,
)

NARRATORIA = Path(sys.executable).parent / "narratoria"
SECRET = "sk-very-secret-0123456789"

SCHEMA = {
    "type": "object",
    "properties": {
        "provider": {"type": "string", "enum": ["ollama", "claude", "openai"],
                     "default": "ollama", "description": "Who writes the prose."},
        "model": {"type": "string", "default": "phi-4", "description": "Model identifier."},
        "apiKey": {"type": "string", "x-sensitive": True, "description": "Hosted API key."},
        "style": {"type": "string", "enum": ["terse", "vivid", "poetic"], "default": "vivid"},
        "maxTokens": {"type": "integer", "minimum": 16, "maximum": 4096, "default": 512},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 0.7},
        "stream": {"type": "boolean", "default": True},
    },
    "required": ["apiKey"],
    "additionalProperties": False,
}


def make_storyteller(root: Path) -> Path:
    folder = root / "storyteller"
    (folder / "scripts").mkdir(parents=True)
    (folder / "references").mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: storyteller\ndescription: Rich narration.\n---\nWrite well.\n")
    script = folder / "scripts" / "narrate"
    script.write_text("#!/bin/sh\necho '{\"version\":\"0\",\"type\":\"done\",\"ok\":true}'\n")
    script.chmod(0o755)
    (folder / "references" / "config-schema.json").write_text(json.dumps(SCHEMA))
    return folder


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A player's environment inside tmp_path; also applied to this process, so the
    registry the tests build reads the same settings the CLI writes."""
    values = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "NARRATORIA_BUILTIN_SKILLS": str(tmp_path / "builtin"),
    }
    shutil.copytree(BUILTIN_SKILLS / "dice-roller", tmp_path / "builtin" / "dice-roller")
    monkeypatch.delenv("NARRATORIA_CONFIG_DIR", raising=False)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **values}


@pytest.fixture
def skills(tmp_path) -> Path:
    root = tmp_path / "user-skills"
    make_storyteller(root)
    return root


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def config_cmd(env, skills, *args):
    return cli(env, "skills", "config", "storyteller", "--skills-dir", str(skills), *args)


def rows(doc: dict) -> dict[str, dict]:
    return {row["name"]: row for row in doc["fields"]}


def test_show_fills_defaults_and_reports_missing_required(env, skills):
    proc = config_cmd(env, skills, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    fields = rows(doc)
    assert list(fields) == list(SCHEMA["properties"])
    assert (fields["maxTokens"]["value"], fields["maxTokens"]["source"]) == (512, "default")
    assert fields["temperature"]["value"] == 0.7 and fields["temperature"]["type"] == "number"
    assert fields["stream"]["value"] is True and fields["stream"]["type"] == "boolean"
    assert fields["style"]["enum"] == ["terse", "vivid", "poetic"]
    assert fields["provider"]["description"] == "Who writes the prose."
    assert fields["apiKey"]["value"] is None and fields["apiKey"]["source"] == "unset"
    assert doc["problems"] == ["apiKey: required"]
    assert doc["configPath"] == str(skills / "storyteller" / "config.json")
    assert doc["enabled"] is True

    human = config_cmd(env, skills)
    assert human.returncode == 0
    assert "maxTokens = 512" in human.stdout and "integer [16..4096]" in human.stdout
    assert 'style = "vivid"' in human.stdout and "terse | vivid | poetic" in human.stdout
    assert "Model identifier." in human.stdout
    assert "problem: apiKey: required" in human.stdout
    assert not (skills / "storyteller" / "config.json").exists()  # showing writes nothing


def test_set_parses_by_type_saves_and_masks_secrets(env, skills):
    proc = config_cmd(env, skills, "--set", f"apiKey={SECRET}", "--set", "maxTokens=1024",
                      "--set", "temperature=1.25", "--set", "stream=false",
                      "--set", "style=poetic")
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((skills / "storyteller" / "config.json").read_text())
    assert saved == {"apiKey": SECRET, "maxTokens": 1024, "temperature": 1.25,
                     "stream": False, "style": "poetic"}
    assert (skills / "storyteller" / "config.json").stat().st_mode & 0o777 == 0o600
    assert SECRET not in proc.stdout + proc.stderr
    assert f"apiKey = {MASK}" in proc.stdout
    assert "stream = false" in proc.stdout and "maxTokens = 1024" in proc.stdout

    shown = config_cmd(env, skills, "--json")
    assert SECRET not in shown.stdout + shown.stderr
    fields = rows(json.loads(shown.stdout))
    assert fields["apiKey"]["value"] == MASK and fields["apiKey"]["sensitive"] is True
    assert fields["apiKey"]["source"] == "set"
    assert fields["temperature"]["value"] == 1.25 and fields["stream"]["value"] is False
    assert json.loads(shown.stdout)["problems"] == []
    # Changing one field keeps the others, and --unset goes back to the default.
    again = config_cmd(env, skills, "--set", "model=phi-4-mini", "--unset", "style", "--json")
    assert again.returncode == 0 and SECRET not in again.stdout + again.stderr
    saved = json.loads((skills / "storyteller" / "config.json").read_text())
    assert saved["model"] == "phi-4-mini" and "style" not in saved and saved["apiKey"] == SECRET
    assert rows(json.loads(again.stdout))["style"]["value"] == "vivid"
    assert [p.name for p in (skills / "storyteller").iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(("assignment", "message"), [
    ("maxTokens=9000", "maxTokens: must be <= 4096, got 9000"),
    ("maxTokens=8", "maxTokens: must be >= 16, got 8"),
    ("maxTokens=many", "maxTokens: must be an integer, got 'many'"),
    ("maxTokens=1.5", "maxTokens: must be an integer, got '1.5'"),
    ("temperature=hot", "temperature: must be a number, got 'hot'"),
    ("temperature=2.5", "temperature: must be <= 2, got 2.5"),
    ("temperature=-1", "temperature: must be >= 0, got -1"),
    ("temperature=nan", "temperature: must be a finite number, got 'nan'"),
    ("stream=maybe", "stream: must be true or false, got 'maybe'"),
    ("style=loud", "style: must be one of terse, vivid, poetic, got 'loud'"),
    ("provider=gemini", "provider: must be one of ollama, claude, openai, got 'gemini'"),
    ("apiKey=", "apiKey: required"),
    ("colour=red", "colour: unknown setting (known: provider, model, apiKey, style, "
                   "maxTokens, temperature, stream)"),
])
def test_each_rule_names_field_and_saves_nothing(env, skills, assignment, message):
    path = skills / "storyteller" / "config.json"
    path.write_text('{"apiKey": "key-1", "maxTokens": 100}\n')
    before = path.read_bytes()
    proc = config_cmd(env, skills, "--set", assignment, "--set", "model=changed")
    assert proc.returncode == 2
    assert message in proc.stderr.splitlines()[0] or message in proc.stderr
    assert "nothing saved" in proc.stderr
    assert path.read_bytes() == before  # not even the valid model=changed
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "SKILL.md", "config.json", "references", "scripts"]  # no temp file left


def test_required_without_a_file_and_every_problem_reported(env, skills):
    proc = config_cmd(env, skills, "--set", "maxTokens=9000", "--set", "stream=maybe")
    assert proc.returncode == 2
    assert "stream: must be true or false, got 'maybe'" in proc.stderr
    assert "maxTokens: must be <= 4096, got 9000" in proc.stderr
    assert "apiKey: required" in proc.stderr
    assert not (skills / "storyteller" / "config.json").exists()


def test_sensitive_values_are_masked_in_errors_too(env, skills):
    schema = json.loads((skills / "storyteller/references/config-schema.json").read_text())
    schema["properties"]["apiKey"]["enum"] = ["only-this"]
    (skills / "storyteller/references/config-schema.json").write_text(json.dumps(schema))
    proc = config_cmd(env, skills, "--set", f"apiKey={SECRET}")
    assert proc.returncode == 2
    assert SECRET not in proc.stdout + proc.stderr
    assert f"apiKey: must be one of only-this, got {MASK}" in proc.stderr


def test_env_references_are_stored_as_written_and_resolved_at_use(env, skills):
    proc = config_cmd(env, skills, "--set", "apiKey=${STORY_KEY}",
                      "--set", "maxTokens=${STORY_TOKENS}", "--set", "model=${STORY_MODEL}-q4")
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((skills / "storyteller" / "config.json").read_text())
    assert saved == {"apiKey": "${STORY_KEY}", "maxTokens": "${STORY_TOKENS}",
                     "model": "${STORY_MODEL}-q4"}
    fields = rows(json.loads(config_cmd(env, skills, "--json").stdout))
    assert fields["apiKey"]["value"] == MASK and fields["apiKey"]["envVars"] == ["STORY_KEY"]
    assert fields["model"]["value"] == "${STORY_MODEL}-q4"

    skill = load_skill(skills / "storyteller")
    values = resolved_config(skill, {"STORY_KEY": SECRET, "STORY_TOKENS": "2048",
                                     "STORY_MODEL": "phi"})
    assert values == {"provider": "ollama", "model": "phi-q4", "apiKey": SECRET,
                      "style": "vivid", "maxTokens": 2048, "temperature": 0.7, "stream": True}

    with pytest.raises(ConfigError) as missing:
        resolved_config(skill, {"STORY_TOKENS": "2048", "STORY_MODEL": "phi"})
    assert missing.value.problems == [
        "apiKey: environment variable STORY_KEY is not set (the value refers to ${STORY_KEY})"]
    with pytest.raises(ConfigError) as bad:
        resolved_config(skill, {"STORY_KEY": "k", "STORY_TOKENS": "9000", "STORY_MODEL": "m"})
    assert bad.value.problems == ["maxTokens: must be <= 4096, got 9000"]
    # The CLI names the unset variable as a problem, without failing the listing.
    shown = config_cmd(env, skills)
    assert shown.returncode == 0
    assert "environment variable STORY_KEY is not set" in shown.stdout


def test_changes_are_seen_on_the_next_use(env, skills):
    skill = load_skill(skills / "storyteller")
    assert config_cmd(env, skills, "--set", "apiKey=a", "--set", "style=terse").returncode == 0
    assert resolved_config(skill)["style"] == "terse"
    assert config_cmd(env, skills, "--set", "style=poetic").returncode == 0
    assert resolved_config(skill)["style"] == "poetic"


def test_builtin_skill_config_goes_to_the_per_user_folder(env, tmp_path):
    builtin = tmp_path / "builtin" / "dice-roller"
    proc = cli(env, "skills", "config", "dice-roller", "--set", "randomSource=pseudo",
               "--set", "showIndividualRolls=no", "--json")
    assert proc.returncode == 0, proc.stderr
    where = tmp_path / "config" / "narratoria" / "skills" / "dice-roller" / "config.json"
    assert json.loads(proc.stdout)["configPath"] == str(where)
    assert json.loads(where.read_text()) == {"randomSource": "pseudo",
                                             "showIndividualRolls": False}
    assert not (builtin / "config.json").exists()
    assert config_path(load_skill(builtin)) == where
    bad = cli(env, "skills", "config", "dice-roller", "--set", "randomSource=dice")
    assert bad.returncode == 2
    assert "randomSource: must be one of crypto, pseudo, got 'dice'" in bad.stderr
    unknown = cli(env, "skills", "config", "no-such-skill")
    # A name that names nothing is FAILED (1), as an unknown campaign or character is.
    assert unknown.returncode == 1 and "unknown skill 'no-such-skill'" in unknown.stderr


def scripts_offered(registry: SkillRegistry) -> set[str]:
    registry.refresh()
    return {s.ref for s in registry.scripts()}


def test_disable_and_enable_persist_and_reach_a_running_registry(env, skills, tmp_path):
    # Built before the change, as the daemon's supervisor is: it must notice without restart.
    registry = SkillRegistry([tmp_path / "builtin", skills])
    assert scripts_offered(registry) == {"dice-roller/roll-dice", "storyteller/narrate"}

    proc = cli(env, "skills", "disable", "storyteller", "--skills-dir", str(skills))
    assert proc.returncode == 0, proc.stderr
    assert "storyteller disabled" in proc.stdout
    settings = tmp_path / "config" / "narratoria" / "skills.json"
    assert json.loads(settings.read_text()) == {"disabled": ["storyteller"], "enabled": []}
    assert scripts_offered(registry) == {"dice-roller/roll-dice"}
    assert "storyteller" in registry.skills  # still listed and configurable
    assert {s.ref for s in registry.scripts(include_disabled=True)} == {
        "dice-roller/roll-dice", "storyteller/narrate"}
    assert {s.skill for s in SkillRegistry([tmp_path / "builtin", skills]).scripts()} == {
        "dice-roller"}
    shown = json.loads(config_cmd(env, skills, "--json").stdout)
    assert shown["enabled"] is False

    again = cli(env, "skills", "disable", "storyteller", "--skills-dir", str(skills), "--json")
    assert json.loads(again.stdout)["changed"] is False
    proc = cli(env, "skills", "enable", "storyteller", "--skills-dir", str(skills))
    assert proc.returncode == 0 and "storyteller enabled" in proc.stdout
    assert json.loads(settings.read_text()) == {"disabled": [], "enabled": ["storyteller"]}
    assert scripts_offered(registry) == {"dice-roller/roll-dice", "storyteller/narrate"}
    missing = cli(env, "skills", "disable", "nope")
    assert missing.returncode == 1 and "unknown skill 'nope'" in missing.stderr


def listed(env, skills) -> dict[str, bool]:
    """Each skill's enabled state as `skills list --json` reports it."""
    proc = cli(env, "skills", "list", "--skills-dir", str(skills), "--json")
    assert proc.returncode == 0, proc.stderr
    return {s["name"]: s["enabled"] for s in json.loads(proc.stdout)["skills"]}


def test_skills_list_shows_whether_each_skill_is_enabled(env, skills, tmp_path):
    assert listed(env, skills) == {"dice-roller": True, "storyteller": True}
    assert cli(env, "skills", "disable", "storyteller", "--skills-dir", str(skills)).returncode == 0
    assert listed(env, skills) == {"dice-roller": True, "storyteller": False}
    text = cli(env, "skills", "list", "--skills-dir", str(skills)).stdout
    assert "storyteller (storyteller, priority 50, disabled)" in text, text
    assert "dice-roller (Dice Roller, priority 60, enabled)" in text, text
    assert cli(env, "skills", "enable", "storyteller", "--skills-dir", str(skills)).returncode == 0
    assert listed(env, skills) == {"dice-roller": True, "storyteller": True}
    text = cli(env, "skills", "list", "--skills-dir", str(skills)).stdout
    assert "storyteller (storyteller, priority 50, enabled)" in text, text
    # Shipped off and never enabled (no settings file at all): disabled.
    (tmp_path / "config" / "narratoria" / "skills.json").unlink()
    (skills / "storyteller" / "SKILL.md").write_text(
        "---\nname: storyteller\ndescription: Rich narration.\nmetadata:\n"
        "  x-narratoria:\n    defaultEnabled: false\n---\nWrite well.\n")
    assert listed(env, skills) == {"dice-roller": True, "storyteller": False}


def test_a_skill_that_ships_off_is_offered_only_once_enabled(env, skills, tmp_path):
    skill_md = skills / "storyteller" / "SKILL.md"
    skill_md.write_text("---\nname: storyteller\ndescription: Rich narration.\nmetadata:\n"
                        "  x-narratoria:\n    defaultEnabled: false\n---\nWrite well.\n")
    registry = SkillRegistry([tmp_path / "builtin", skills])
    assert scripts_offered(registry) == {"dice-roller/roll-dice"}
    assert json.loads(config_cmd(env, skills, "--json").stdout)["enabled"] is False
    assert cli(env, "skills", "enable", "storyteller", "--skills-dir", str(skills)).returncode == 0
    assert scripts_offered(registry) == {"dice-roller/roll-dice", "storyteller/narrate"}
    assert cli(env, "skills", "disable", "storyteller", "--skills-dir", str(skills)).returncode == 0
    assert scripts_offered(registry) == {"dice-roller/roll-dice"}
    # The shipped ones: the dice and the deed skills are on in a fresh install (the
    # engine decides when a deed skill is called), the rest off until enabled.
    fresh = SkillRegistry([REPO / "skills"])
    assert {s.skill for s in fresh.scripts()} == {"dice-roller", "npc-perception", "reputation"}
    assert {"memory", "storyteller", "player-choices", "character-portraits"} <= set(fresh.skills)


def test_the_daemon_supervisor_does_not_offer_a_disabled_skill(env, skills, tmp_path):
    from narratoria.actors.supervisor import SkillSupervisorActor

    # A plain class (Ray wraps it in daemon.py): `available` is what the coordinator plans with.
    supervisor = SkillSupervisorActor([str(tmp_path / "builtin"), str(skills)], 2,
                                      "unix:///nowhere")
    assert "dice-roller/roll-dice" in {s.ref for s in supervisor.available()}
    assert cli(env, "skills", "disable", "dice-roller").returncode == 0
    assert {s.ref for s in supervisor.available()} == {"storyteller/narrate"}
    assert cli(env, "skills", "enable", "dice-roller").returncode == 0
    assert "dice-roller/roll-dice" in {s.ref for s in supervisor.available()}


def test_local_turn_never_plans_a_disabled_skill(env, tmp_path):
    def planned() -> list[str]:
        proc = cli(env, "turn", "--local", "I roll the dice", "--json",
                   "--analytics-log", str(tmp_path / "analytics.jsonl"))
        assert proc.returncode == 0, proc.stderr
        return [t["toolPath"] for t in json.loads(proc.stdout)["plan"]["tools"]]

    assert planned() == ["dice-roller/roll-dice"]
    assert cli(env, "skills", "disable", "dice-roller").returncode == 0
    assert planned() == []


def test_a_skill_runs_with_the_players_settings(env, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"requestId": "cfg", "tools": [
        {"toolId": "roll", "toolPath": "dice-roller/roll-dice", "input": {"formula": "3d6"}}]}))

    def roll_event() -> dict:
        proc = cli(env, "plan", "run", str(plan), "--json")
        assert proc.returncode == 0, proc.stderr
        ui = json.loads(proc.stdout)["uiEvents"]
        return next(u for u in ui if u.get("event") == "dice_roll")

    assert "rolls" in roll_event()["payload"]["dice"][0]  # the default: every die shown
    assert cli(env, "skills", "config", "dice-roller", "--set",
               "showIndividualRolls=false").returncode == 0
    assert "rolls" not in roll_event()["payload"]["dice"][0]  # the player's setting, applied
