"""Shared fixtures: the test skill roots and process-liveness checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURE_SKILLS = TESTS / "fixtures" / "skills"
BUILTIN_SKILLS = REPO / "skills"


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie awaiting its reaper counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def fixture_skills() -> Path:
    return FIXTURE_SKILLS


@pytest.fixture(autouse=True)
def _isolated_data(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # The user skill folder and data dir live in the home directory; tests never touch them.
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
