"""`narratoria characters` has one source of truth: the daemon when one answers, so a
character made on the command line is the one `play --character` and the web page see;
the local store (in ``--data-dir`` when given) only when none does.
Real daemon, real CLI subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from support.daemon import HASH_EMBEDDER, NARRATORIA, Daemon

WREN = ("Wren is a tideborn salvager from the mudflats, quick with a boathook and slow to "
        "trust anyone who wears a uniform.")


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(*HASH_EMBEDDER, "--planner", "pattern")
    yield d
    assert d.stop() == 0


@pytest.fixture
def home(tmp_path) -> dict[str, str]:
    """An environment whose XDG folders are empty and whose data dir is not set, so the
    commands find whatever they find only where these tests put it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NARRATORIA_DATA_DIR", "NARRATORIA_ADDRESS", "NARRATORIA_TOKEN",
                        "XDG_RUNTIME_DIR")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    return env


def portrait(tmp_path: Path) -> Path:
    path = tmp_path / "wren.png"
    Image.new("RGB", (48, 64), (90, 120, 140)).save(path, format="PNG")
    return path


def characters(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), "characters", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def xdg_characters(env: dict[str, str]) -> list[str]:
    folder = Path(env["XDG_DATA_HOME"]) / "narratoria" / "characters"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_character_made_on_the_command_line_is_the_daemons(daemon, home, tmp_path):
    env = {**home, "NARRATORIA_ADDRESS": daemon.address}
    made = characters(env, "create", "--description", WREN, "--portrait",
                      str(portrait(tmp_path)), "--name", "Wren", "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["via"] == "daemon" and doc["name"] == "Wren" and doc["has_portrait"]
    assert xdg_characters(home) == []  # nothing beside the daemon's store
    with daemon.client() as client:
        assert doc["id"] in [c.id for c in client.list_characters()]
        session = client.create_session(campaign="long_ebb", character_id=doc["id"])
        assert session.id  # not NOT_FOUND: the daemon plays the character just made

    # The other commands read the same store; --socket names the daemon without the env.
    listed = characters(home, "list", "--socket", str(daemon.socket), "--json")
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    assert found["via"] == "daemon" and doc["id"] in [c["id"] for c in found["characters"]]
    shown = characters(env, "show", doc["id"])
    assert shown.returncode == 0 and doc["id"] in shown.stdout and "long_ebb" in shown.stdout
    exported = characters(env, "export", doc["id"], "-o", str(tmp_path / "w.narratoria-character"))
    assert exported.returncode == 0, exported.stderr
    imported = characters(env, "import", str(tmp_path / "w.narratoria-character"), "--json")
    assert imported.returncode == 0, imported.stderr
    copy = json.loads(imported.stdout)
    assert copy["via"] == "daemon" and copy["description"] == WREN and copy["id"] != doc["id"]
    deleted = characters(env, "delete", copy["id"], "--json")
    assert deleted.returncode == 0 and json.loads(deleted.stdout)["via"] == "daemon"
    with daemon.client() as client:
        assert copy["id"] not in [c.id for c in client.list_characters()]
    assert characters(env, "show", copy["id"]).returncode == 1  # FAILED: no such character
    assert xdg_characters(home) == []


def test_without_a_daemon_the_data_dir_store_is_used(home, tmp_path):
    data = tmp_path / "D"
    made = characters(home, "create", "--description", WREN, "--portrait",
                      str(portrait(tmp_path)), "--data-dir", str(data), "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["via"] == "local"
    assert "no daemon answers" in made.stderr and str(data) in made.stderr
    assert (data / "characters" / f"{doc['id']}.json").is_file()
    assert Path(doc["portrait_file"]).parent == data / "characters"
    assert xdg_characters(home) == []
    listed = characters(home, "list", "--data-dir", str(data))
    assert listed.returncode == 0 and doc["id"] in listed.stdout


def test_a_named_daemon_that_does_not_answer_is_an_error_not_a_fallback(home, tmp_path):
    missing = tmp_path / "none.sock"
    made = characters(home, "create", "--description", WREN, "--portrait",
                      str(portrait(tmp_path)), "--socket", str(missing))
    assert made.returncode == 1
    assert str(missing) in made.stderr and "not running" in made.stderr
    assert xdg_characters(home) == []
