"""The data dir is private to its user.

Another local user read a secret from the database's WAL (data dir 0755, files 0644).
A real daemon creates everything private (folders 0700, files 0600), corrects a data
dir made with loose modes when it starts, and never follows a link out of it; the
CLI commands that write the data dir without a daemon create it private too.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from support.daemon import HASH_EMBEDDER, Daemon

CLI = [sys.executable, "-m", "narratoria.clients.cli"]


def loose(root: Path) -> list[str]:
    """Every path under ``root`` (itself included) that group or others may access; links
    are not followed and not counted (their own mode means nothing on Linux)."""
    found = []
    for folder, dirs, files in os.walk(root):
        for path in [Path(folder)] + [Path(folder) / name for name in files]:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or stat.S_ISSOCK(info.st_mode):
                continue
            if stat.S_IMODE(info.st_mode) & 0o077:
                found.append(f"{path.relative_to(root)} {oct(stat.S_IMODE(info.st_mode))}")
    return found


def written(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def play_a_turn(daemon: Daemon) -> None:
    with daemon.client() as client:
        session = client.create_session(title="private", state={"secret": "hunter2"})
        events = list(client.turn(session.id, text="I look around"))
        assert events[-1].WhichOneof("event") == "done"


def test_a_daemon_keeps_its_data_dir_private_and_corrects_a_loose_one():
    folder = Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
    data = folder / "data"
    outside = folder / "outside"  # not the daemon's: must keep its modes
    outside.mkdir(mode=0o755)
    outside.chmod(0o755)
    (outside / "file.txt").write_text("someone else's")
    (outside / "file.txt").chmod(0o644)

    daemon = Daemon("--planner", "pattern", *HASH_EMBEDDER, folder=folder)
    try:
        play_a_turn(daemon)
        files = written(data)
        assert {"narratoria.duckdb", "narratoria.duckdb.wal", "daemon.token"} <= files, files
        assert loose(data) == []  # fresh: private at creation, WAL included
    finally:
        assert daemon.stop() == 0

    # A data dir written with loose modes (an older daemon, a careless copy), with a
    # link out of it that the correction must not follow.
    for path in [data, *data.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    (data / "notes").mkdir(mode=0o755)
    (data / "notes" / "campaign.txt").write_text("a user's notes")
    (data / "notes" / "campaign.txt").chmod(0o664)
    (data / "notes" / "outside").symlink_to(outside / "file.txt")
    (data / "outside-dir").symlink_to(outside)
    assert len(loose(data)) >= 5

    daemon = Daemon("--planner", "pattern", *HASH_EMBEDDER, folder=folder)
    try:
        play_a_turn(daemon)
        assert loose(data) == []
        assert stat.S_IMODE(outside.stat().st_mode) == 0o755
        assert stat.S_IMODE((outside / "file.txt").stat().st_mode) == 0o644
        assert "removed group/other access" in (folder / "stderr.log").read_text()
    finally:
        assert daemon.stop() == 0


def test_cli_commands_that_write_the_data_dir_create_it_private(tmp_path: Path):
    data = tmp_path / "fresh"
    env = {**os.environ, "NARRATORIA_DATA_DIR": str(data)}
    proc = subprocess.run([*CLI, "clients", "add", "web"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (data / "clients.json").is_file()
    assert loose(data) == []
    # A campaign ingested without a daemon: the database it creates is private too.
    tiny = Path(__file__).resolve().parents[1] / "fixtures" / "campaigns" / "tiny"
    proc = subprocess.run([*CLI, "campaigns", "ingest", str(tiny), "--data-dir", str(data)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "narratoria.duckdb" in written(data)
    assert loose(data) == []
