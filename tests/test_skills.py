"""Skill discovery, the registry (several roots, hot reload) and skill health."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import BUILTIN_SKILLS, FIXTURE_SKILLS
from narratoria.runtime.skills import (
    Health,
    SkillHealthTracker,
    SkillRegistry,
    discover,
    load_skill,
)
from narratoria.runtime.skills.discovery import SkillError


def make_skill(root: Path, name: str, front: str | None = None, body: str = "Guidance.",
               scripts: dict[str, str] | None = None) -> Path:
    folder = root / name
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    if front is None:
        front = f"name: {name}\ndescription: A skill called {name}."
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    for script, text in (scripts or {"run": "#!/bin/sh\necho '{\"version\":\"0\",\"type\":\"done\",\"ok\":true}'\n"}).items():
        path = folder / "scripts" / script
        path.write_text(text)
        path.chmod(0o755)
    return folder


def test_fixture_and_builtin_skills_load():
    found = discover([BUILTIN_SKILLS, FIXTURE_SKILLS])
    assert {"dice-roller", "echo", "hostile"} <= set(found.skills)
    echo = found.skills["echo"]
    assert echo.display_name == "Echo" and echo.priority == 10
    assert echo.capabilities == ["testing"]
    assert echo.scripts["echo"].timeout_ms == 5000
    assert echo.scripts["echo"].input_schema["type"] == "object"
    hostile = found.skills["hostile"]
    assert "not-executable-really" not in hostile.scripts
    assert any("not executable" in w for w in hostile.warnings)
    assert hostile.retry_policy.maxRetries == 0


def test_full_frontmatter_is_parsed(tmp_path):
    make_skill(tmp_path, "storyteller", front="""name: storyteller
description: Rich narrative.
license: MIT
compatibility: Python 3.11
metadata:
  author: Narratoria
  x-narratoria:
    displayName: Storyteller
    capabilities: [narration, prose]
    priority: 80
    retryPolicy: {maxRetries: 2, backoffMs: 50}""")
    skill = load_skill(tmp_path / "storyteller")
    assert (skill.license, skill.compatibility, skill.display_name) == (
        "MIT", "Python 3.11", "Storyteller")
    assert skill.capabilities == ["narration", "prose"] and skill.priority == 80
    assert (skill.retry_policy.maxRetries, skill.retry_policy.backoffMs) == (2, 50)


@pytest.mark.parametrize("front,reason", [
    ("description: no name", "name"),
    ("name: bad-skill", "description"),
    ("name: Bad_Skill\ndescription: d", "lowercase"),
    ("name: -bad\ndescription: d", "lowercase"),
    ("name: other\ndescription: d", "does not match folder"),
    ("name: bad\ndescription: ''", "must not be empty"),
    ("name: bad\ndescription: " + "x" * 1025, "max 1024"),
    ("name: bad\ndescription: d\ncompatibility: " + "y" * 501, "500"),
    ("name: bad\ndescription: d\nmetadata:\n  x-narratoria:\n    priority: 101", "priority"),
    ("name: bad\ndescription: d\nmetadata:\n  x-narratoria:\n    priority: high",
     "metadata.x-narratoria.priority"),
    ("name: bad\ndescription: d\nmetadata:\n  x-narratoria:\n    capabilities: narration",
     "metadata.x-narratoria.capabilities"),
    ("name: [unclosed\ndescription: d", "invalid YAML"),
    ("- just\n- a list", "mapping"),
])
def test_invalid_skills_are_skipped_with_the_file_and_reason(tmp_path, front, reason):
    folder_name = "bad" if "name: bad" in front or "name:" not in front else front.split()[1]
    make_skill(tmp_path, "bad", front=front)
    make_skill(tmp_path, "good")
    found = discover([tmp_path])
    assert set(found.skills) == {"good"}
    (skipped,) = found.skipped
    assert str(tmp_path / "bad" / "SKILL.md") in skipped.reason
    assert reason in skipped.reason, skipped.reason


def test_yaml_errors_carry_a_line_number(tmp_path):
    make_skill(tmp_path, "bad", front="name: bad\ndescription: d\nmetadata: {unclosed")
    with pytest.raises(SkillError, match=r"SKILL\.md:\d+: invalid YAML"):
        load_skill(tmp_path / "bad")


def test_missing_skill_file_and_unterminated_frontmatter(tmp_path):
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "open"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: open\ndescription: d\n")
    found = discover([tmp_path])
    reasons = sorted(s.reason for s in found.skipped)
    assert any("no SKILL.md" in r for r in reasons)
    assert any("not closed" in r for r in reasons)


def test_invalid_reference_json_names_file_and_line(tmp_path):
    folder = make_skill(tmp_path, "cfg")
    (folder / "references").mkdir()
    (folder / "references" / "config-schema.json").write_text('{\n  "type": "object",\n}')
    found = discover([tmp_path])
    assert "config-schema.json:3" in found.skipped[0].reason


def test_body_is_read_only_on_activation(tmp_path):
    folder = make_skill(tmp_path, "lazy", body="Original guidance.")
    skill = discover([tmp_path]).skills["lazy"]
    assert skill._body is None  # progressive disclosure: nothing but frontmatter yet
    text = (folder / "SKILL.md").read_text().replace("Original", "Edited")
    (folder / "SKILL.md").write_text(text)
    assert skill.behavioural_prompt() == "Edited guidance."


def test_later_roots_override_earlier_ones(tmp_path):
    builtin, user = tmp_path / "builtin", tmp_path / "user"
    make_skill(builtin, "shared", front="name: shared\ndescription: built-in")
    make_skill(user, "shared", front="name: shared\ndescription: user's own")
    make_skill(builtin, "only-builtin")
    found = discover([builtin, user])
    assert found.skills["shared"].description == "user's own"
    assert found.overridden == {"shared": [builtin / "shared"]}
    assert "only-builtin" in found.skills


def test_registry_hot_reloads_added_changed_and_removed_skills(tmp_path):
    registry = SkillRegistry([tmp_path])
    assert registry.skills == {} and registry.refresh() is False
    make_skill(tmp_path, "fresh")
    assert registry.refresh() is True and "fresh" in registry.skills
    assert registry.refresh() is False
    skill_md = tmp_path / "fresh" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("A skill called fresh.", "Changed."))
    os.utime(skill_md, ns=(1, 1))  # a different mtime even on coarse clocks
    assert registry.refresh() is True
    assert registry.skills["fresh"].description == "Changed."
    new_script = tmp_path / "fresh" / "scripts" / "second"
    new_script.write_text("#!/bin/sh\n")
    new_script.chmod(0o755)
    assert registry.refresh() and "second" in registry.skills["fresh"].scripts
    shutil.rmtree(tmp_path / "fresh")
    assert registry.refresh() and registry.skills == {}


def test_registry_resolves_skill_names_never_file_paths():
    registry = SkillRegistry([FIXTURE_SKILLS])
    by_ref = registry.resolve("echo/echo")
    assert by_ref is not None and by_ref.ref == "echo/echo"
    # The spec's relative forms name the same script.
    assert registry.resolve("echo/scripts/echo") == by_ref
    assert registry.resolve("skills/echo/scripts/echo") == by_ref
    # A file path is no name, even the path of that very script.
    assert registry.resolve(str(FIXTURE_SKILLS / "echo" / "scripts" / "echo")) is None
    assert registry.resolve("echo/missing") is None
    assert registry.resolve("nobody/none") is None


def test_health_transitions_exactly_as_specified():
    h = SkillHealthTracker()
    assert h.state("s") is Health.HEALTHY
    h.record_failure("s")
    h.record_failure("s")
    assert h.state("s") is Health.HEALTHY
    h.record_success("s")  # the count is of consecutive failures
    for _ in range(2):
        h.record_failure("s")
    assert h.state("s") is Health.HEALTHY
    assert h.record_failure("s") is Health.DEGRADED
    assert h.record_success("s") is Health.HEALTHY
    for _ in range(3):
        h.record_failure("s")
    assert h.state("s") is Health.DEGRADED
    h.record_failure("s")
    h.record_failure("s")
    assert h.record_failure("s") is Health.PERMANENT_FAILURE
    assert h.record_success("s") is Health.PERMANENT_FAILURE  # only a session restart heals
    assert h.disabled() == {"s"}
    h.reset()
    assert h.state("s") is Health.HEALTHY and h.disabled() == set()


def test_transient_failures_and_exhausted_retries():
    h = SkillHealthTracker()
    assert h.record_failure("net", transient=True) is Health.TEMPORARY_FAILURE
    assert h.record_success("net") is Health.HEALTHY
    h.record_failure("net", transient=True)
    assert h.record_retries_exhausted("net") is Health.PERMANENT_FAILURE
    # exhausting retries from healthy or degraded is not a transition of its own
    assert h.record_retries_exhausted("other") is Health.HEALTHY
    assert h.snapshot() == {"net": "permanentFailure", "other": "healthy"}
