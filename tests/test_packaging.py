"""The wheel is a real package: built from the checkout and installed into a fresh venv,
it runs from a folder outside the checkout with every subpackage, the built-in skills
and the built-in campaigns.

The fresh venv borrows the dependencies (ray, torch, llama-cpp…) from this one by a plain
path line, which adds the folder but runs none of its .pth files, so the checkout's
editable install is not on its path: only the wheel can answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

BUILTIN_SKILLS = {"character-portraits", "dice-roller", "memory", "npc-perception",
                  "player-choices", "reputation", "storyteller"}
BUILTIN_CAMPAIGNS = {"long_ebb", "ninth_milestone"}


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "NARRATORIA_", "VIRTUAL_ENV"))}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv, the built wheel)."""
    work = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps",
                  "--no-build-isolation", "-q", "-w", str(work / "dist")], cwd=work)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (work / "dist").glob("narratoria-*.whl")
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work)
    assert made.returncode == 0, made.stderr
    site = Path(_run([str(venv / "bin" / "python"), "-c",
                      "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=work).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=work)
    assert pip.returncode == 0, pip.stderr[-2000:]
    return venv, wheel


def test_the_wheel_holds_every_subpackage_and_the_built_ins(installed):
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    packages = {str(p.parent.relative_to(REPO)) for p in REPO.glob("*/**/__init__.py")
                if p.parts[len(REPO.parts)] in ("runtime", "actors", "clients", "proto")}
    assert packages, "no subpackage found in the checkout"
    for package in packages:
        assert f"narratoria/{package}/__init__.py" in names, package
    for skill in BUILTIN_SKILLS:
        assert f"narratoria/skills/{skill}/SKILL.md" in names, skill
    for campaign in BUILTIN_CAMPAIGNS:
        assert any(n.startswith(f"narratoria/campaigns/{campaign}/") for n in names), campaign
    assert "narratoria/runtime/planner/data/deed_sense.npz" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_installed_wheel_runs_from_outside_the_checkout(installed, tmp_path):
    venv, _ = installed
    narratoria = str(venv / "bin" / "narratoria")
    where = _run([str(venv / "bin" / "python"), "-c",
                  "import narratoria.runtime as r; print(r.__file__)"], cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    version = _run([narratoria, "--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("narratoria "), version

    skills = _run([narratoria, "skills", "list", "--json"], cwd=tmp_path)
    assert skills.returncode == 0, skills.stderr[-2000:]
    listed = json.loads(skills.stdout)
    assert {s["name"] for s in listed["skills"]} == BUILTIN_SKILLS
    assert Path(listed["roots"][0]).is_relative_to(venv)

    campaigns = _run([narratoria, "campaigns", "list", "--json"], cwd=tmp_path)
    assert campaigns.returncode == 0, campaigns.stderr[-2000:]
    found = json.loads(campaigns.stdout)
    builtin = {c["id"]: c for c in found["campaigns"] if c["source"] == "builtin"}
    assert set(builtin) == BUILTIN_CAMPAIGNS
    assert all(c["valid"] for c in builtin.values()), builtin
    assert Path(found["builtinDir"]).is_relative_to(venv)
