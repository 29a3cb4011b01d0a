"""Skill settings cannot fish the daemon's environment.

Settings resolve in the daemon, from the daemon's environment: ``${VAR}`` in a saved value
(the player's) and ``x-env-var`` in a skill's ``config-schema.json`` (the skill author's).
A hostile skill (fixtures/settings-env/fisher) asks by ``x-env-var`` for
``NARRATORIA_TEST_SECRET`` (a variable of the runtime's own kind the test gives the
daemon) and ``RAY_JOB_ID`` (Ray sets it in the worker where settings resolve): through a
real daemon it receives neither, only an error naming both settings, while a harmless
variable still reaches another skill (greeter). ``narratoria skills list`` and ``skills
config`` show which variables a skill's settings read, and ``skills config --set`` refuses
a ``${VAR}`` naming one of the runtime's own (``runtime/skills/config.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from narratoria.runtime.skills import config as skill_config
from narratoria.runtime.skills.discovery import load_skill
from skill_plans import finished, run_plan, tool_events
from support.daemon import Daemon

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "settings-env"
NARRATORIA = Path(sys.executable).parent / "narratoria"
SECRET = "runtime-secret-7c1e9"
GREETING = "hello from the user's shell"
REFUSED = "is one of the runtime's own environment variables"


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    for name in ("fisher", "greeter"):
        shutil.copytree(FIXTURES / name, root / name)
        (root / name / "config.json").write_text("{}\n")  # saved settings: none
    return root


def settings_report(events: list, tool_id: str) -> dict:
    [report] = [e["fields"] for e in tool_events(events, tool_id)
                if e.get("message") == "settings-report"]
    return report


def test_a_daemons_skill_receives_no_variable_of_the_runtimes_own(skills, config_dir):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NARRATORIA_TEST_SECRET", SECRET)  # the daemon's environment only
        env.setenv("FISHER_GREETING", GREETING)
        d = Daemon("--planner", "pattern", "--embedding-backend", "hash",
                   "--skills-dir", str(skills))
    try:
        with d.client() as client:
            session = client.create_session(title="fishing")
            events = run_plan(client, session.id,
                              {"toolId": "fish", "toolPath": "fisher/report", "input": {}},
                              {"toolId": "greet", "toolPath": "greeter/report", "input": {}})
    finally:
        assert d.stop() == 0
    assert finished(events)["fish"].ok and finished(events)["greet"].ok
    fish = settings_report(events, "fish")
    assert SECRET not in json.dumps(fish), fish["config"]
    assert fish["config"] is None  # no settings at all: they do not resolve
    error = fish["configError"]
    assert f"secret: x-env-var NARRATORIA_TEST_SECRET {REFUSED}" in error, error
    assert f"ray: x-env-var RAY_JOB_ID {REFUSED}" in error, error
    # A variable of the user's, which `skills list` shows the skill reads, still arrives.
    assert json.loads(settings_report(events, "greet")["config"]) == {"greeting": GREETING}


def test_a_saved_value_naming_a_runtime_variable_is_refused_at_use(skills):
    """A ``${VAR}`` saved before this rule (or written by hand) fails at use, naming the
    field and the variable, and a name too long to echo is cut."""
    greeter = load_skill(skills / "greeter")
    for name in ("NARRATORIA_TOKEN", "RAY_ADDRESS", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
                 "HF_TOKEN", "narratoria_client_token"):
        skill_config.config_path(greeter).write_text(json.dumps({"greeting": f"${{{name}}}"}))
        with pytest.raises(skill_config.ConfigError) as refused:
            skill_config.resolved_config(greeter, {name: SECRET})
        assert refused.value.problems == [
            f"greeting: the value refers to ${{{name}}} {REFUSED} (NARRATORIA_*, RAY_*, "
            "GRPC_*, HF_*, HUGGING_FACE_*), which no skill setting may read"]
    long = "NARRATORIA_" + "X" * 5000
    skill_config.config_path(greeter).write_text(json.dumps({"greeting": f"${{{long}}}"}))
    with pytest.raises(skill_config.ConfigError) as refused:
        skill_config.resolved_config(greeter, {long: SECRET})
    assert len(str(refused.value)) < 300 and SECRET not in str(refused.value)
    # Other names resolve as before.
    skill_config.config_path(greeter).write_text(json.dumps({"greeting": "${MY_GREETING}"}))
    assert skill_config.resolved_config(greeter, {"MY_GREETING": "hi"}) == {"greeting": "hi"}


def narratoria(*args: str, config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NARRATORIA_CONFIG_DIR": str(config)}
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_skills_list_and_config_show_which_variables_a_skill_reads(skills, tmp_path):
    config = tmp_path / "config"
    fisher_reads = ("reads environment: NARRATORIA_TEST_SECRET (secret, x-env-var; refused: "
                    "one of the runtime's own), RAY_JOB_ID (ray, x-env-var; refused: one of "
                    "the runtime's own), FISHER_GREETING (greeting, x-env-var)")
    listed = narratoria("skills", "list", "--skills-dir", str(skills), config=config)
    assert listed.returncode == 0, listed.stderr
    assert fisher_reads in listed.stdout, listed.stdout
    assert "reads environment: FISHER_GREETING (greeting, x-env-var)" in listed.stdout
    as_json = json.loads(narratoria("skills", "list", "--skills-dir", str(skills), "--json",
                                    config=config).stdout)
    [fisher] = [s for s in as_json["skills"] if s["name"] == "fisher"]
    assert fisher["envReads"] == [
        {"name": "NARRATORIA_TEST_SECRET", "field": "secret", "via": "x-env-var", "refused": True},
        {"name": "RAY_JOB_ID", "field": "ray", "via": "x-env-var", "refused": True},
        {"name": "FISHER_GREETING", "field": "greeting", "via": "x-env-var", "refused": False}]

    shown = narratoria("skills", "config", "fisher", "--skills-dir", str(skills), config=config)
    assert shown.returncode == 0, shown.stderr
    assert "  " + fisher_reads in shown.stdout, shown.stdout
    assert f"problem: secret: x-env-var NARRATORIA_TEST_SECRET {REFUSED}" in shown.stdout

    # The player cannot point a setting at one either; any other name is saved and listed.
    saved = (skills / "greeter" / "config.json").read_text()
    refused = narratoria("skills", "config", "greeter", "--skills-dir", str(skills),
                         "--set", "greeting=${NARRATORIA_TOKEN}", config=config)
    assert refused.returncode == 2
    assert f"greeting: the value refers to ${{NARRATORIA_TOKEN}} {REFUSED}" in refused.stderr
    assert (skills / "greeter" / "config.json").read_text() == saved
    ok = narratoria("skills", "config", "greeter", "--skills-dir", str(skills),
                    "--set", "greeting=${MY_GREETING}", "--json", config=config)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["envReads"] == [
        {"name": "FISHER_GREETING", "field": "greeting", "via": "x-env-var", "refused": False},
        {"name": "MY_GREETING", "field": "greeting", "via": "setting", "refused": False}]
