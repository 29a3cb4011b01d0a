"""Scratch folders of killed daemons are swept; a live daemon's never are."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from narratoria.runtime.host.stale_dirs import OWNER_FILE, claim, sweep

PREFIX = "nr-test-sweep-"


def _age(folder, seconds: float = 3600) -> None:
    past = time.time() - seconds
    os.utime(folder, (past, past))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_daemons_folder_is_swept_and_a_live_ones_kept(tmp_path):
    dead = claim(PREFIX, str(tmp_path))
    (dead / OWNER_FILE).write_text(str(_dead_pid()))
    (dead / "session_x").mkdir()
    live = claim(PREFIX, str(tmp_path))  # owned by this test process: alive
    for folder in (dead, live):
        _age(folder)
    assert sweep(PREFIX, str(tmp_path)) == [dead]
    assert not dead.exists() and live.exists()


def test_a_young_folder_is_never_swept_even_without_an_owner(tmp_path):
    young = tmp_path / f"{PREFIX}young"
    young.mkdir()  # its daemon may not have written its pid yet
    assert sweep(PREFIX, str(tmp_path)) == []
    assert young.exists()


def test_a_folder_a_live_process_still_names_is_kept(tmp_path):
    """A Ray process that outlived its daemon still uses the folder."""
    folder = claim(PREFIX, str(tmp_path))
    (folder / OWNER_FILE).write_text(str(_dead_pid()))
    _age(folder)
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(folder)])
    cmdline = Path(f"/proc/{survivor.pid}/cmdline")
    deadline = time.monotonic() + 10
    while str(folder).encode() not in cmdline.read_bytes():  # until its exec is done
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert sweep(PREFIX, str(tmp_path)) == []
        assert folder.exists()
    finally:
        survivor.kill()
        survivor.wait()
    assert sweep(PREFIX, str(tmp_path)) == [folder]


def test_other_folders_are_left_alone(tmp_path):
    other = tmp_path / "nr-other-1"
    other.mkdir()
    _age(other)
    assert sweep(PREFIX, str(tmp_path)) == []
    assert other.exists()
