"""`serve --narration-mode` and `--narration-candidates`: bad values
are refused before anything starts, naming the flag."""

from __future__ import annotations

import subprocess
import sys


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "narratoria.clients.cli", "serve", "--socket",
         str(tmp_path / "d.sock"), "--data-dir", str(tmp_path / "data"), *args],
        capture_output=True, text=True, timeout=120)


def test_a_narration_mode_must_be_story_chat_or_auto(tmp_path) -> None:
    done = serve(tmp_path, "--narration-mode", "poem")
    assert done.returncode == 2
    assert "--narration-mode" in done.stderr and "story" in done.stderr


def test_narration_candidates_are_bounded(tmp_path) -> None:
    for bad in ("0", "many"):
        done = serve(tmp_path, "--narration-candidates", bad)
        assert done.returncode == 2 and "--narration-candidates" in done.stderr, done.stderr
    done = serve(tmp_path, "--narration-candidates", "9")
    assert done.returncode == 2
    assert "--narration-candidates: 9 is not between 1 and 8" in done.stderr, done.stderr
    assert not (tmp_path / "d.sock").exists()  # refused before anything started


def test_serve_documents_the_flags() -> None:
    done = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "serve", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert "--narration-mode" in done.stdout and "--narration-candidates" in done.stdout
