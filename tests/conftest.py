"""Shared fixtures: the test skill roots and process-liveness checks."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURE_SKILLS = TESTS / "fixtures" / "skills"
BUILTIN_SKILLS = REPO / "skills"

# Skill processes get TMPDIR from the runtime (and their children inherit it), so a
# TMPDIR of this run's own marks every process this run started: the leak check
# below must never count, or kill, the processes of another test run on the machine.
RUN_TMPDIR = tempfile.mkdtemp(prefix="narratoria-tests-")
os.environ["TMPDIR"] = RUN_TMPDIR

# The suite's workers and their daemons share the machine's cores: a model that
# decoded on every core would stall at llama.cpp's barriers whenever another worker
# took one (runtime/cores.py), several times slower than on one thread.
os.environ.setdefault("NARRATORIA_THREADS", "1")


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie awaiting its reaper counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or the read
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# A zygote's forks (the shims, the Python skills and whatever they fork without exec)
# keep the zygote's command line and environment; only the zygote itself has its name.
ZYGOTE_CMDLINE = b"narratoria.runtime.skillrun.zygote import serve"
ZYGOTE_COMM = b"nr-zygote\n"
# Pids of skill processes a fixture keeps running across tests on purpose (a live store
# token), until it ends their invocation itself: not leaks.
HELD: set[int] = set()


def fixture_processes() -> list[tuple[int, str]]:
    """Live processes of this run's skills: exec'd from the test skills (their command
    lines name them), or forked by a zygote (any skill: the zygote's own command line),
    with this run's TMPDIR (or a scratch folder in it) in their environment."""
    marker = str(FIXTURE_SKILLS).encode()
    ours = f"TMPDIR={RUN_TMPDIR}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), *HELD):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            forked = ZYGOTE_CMDLINE in cmdline and (entry / "comm").read_bytes() != ZYGOTE_COMM
            if not (marker in cmdline or forked) or not any(
                    e.startswith(ours) for e in (entry / "environ").read_bytes().split(b"\0")):
                continue
        except OSError:
            continue
        if process_alive(int(entry.name)):
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


@pytest.fixture(autouse=True)
def no_leaked_processes():
    """After every test, no process of a test skill may survive its invocation."""
    yield
    deadline = time.monotonic() + 3.0
    while (left := fixture_processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid, _ in left:  # clean up so one leak does not fail every later test
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"skill processes outlived their invocation: {left}"


@pytest.fixture
def fixture_skills() -> Path:
    return FIXTURE_SKILLS


@pytest.fixture(autouse=True)
def _isolated_data(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # The user skill folder and data dir live in the home directory; tests never touch them.
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture(autouse=True)
def _umask_restored():
    # `narratoria` run in-process (main()) sets the private umask for the whole process;
    # a later test in the same worker would create files other users cannot read.
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)


def linked_test_skills(folder: Path) -> Path:
    """``folder`` as a skill root holding the test skills (links to FIXTURE_SKILLS' own),
    for a daemon that outlives a test: a daemon whose command line named FIXTURE_SKILLS
    would count as a leaked skill process (``fixture_processes``)."""
    for skill in FIXTURE_SKILLS.iterdir():
        if skill.is_dir() and not (folder / skill.name).exists():
            (folder / skill.name).symlink_to(skill)
    return folder


@pytest.fixture(scope="session")
def pattern_daemon(tmp_path_factory: pytest.TempPathFactory):
    """A daemon with the pattern planner (no model load), shared by the modules that need
    nothing else of it (each starts ~14 s on this machine). Tests make their own sessions
    and never assume the daemon is fresh. Plans name registered skills only: the test
    skills are registered, and a test's own skill goes into ``d.skills_root`` (the
    daemon picks it up at the next plan)."""
    from support.daemon import Daemon

    own = linked_test_skills(tmp_path_factory.mktemp("pattern-skills"))
    d = Daemon("--planner", "pattern", "--skills-dir", str(own))
    d.skills_root = own
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory):
    """A module's daemon saves skill settings here, never in the user's own config folder
    (set before the daemon starts: the daemon reads NARRATORIA_CONFIG_DIR)."""
    folder = tmp_path_factory.mktemp("config")
    old = os.environ.get("NARRATORIA_CONFIG_DIR")
    os.environ["NARRATORIA_CONFIG_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("NARRATORIA_CONFIG_DIR", None)
    else:
        os.environ["NARRATORIA_CONFIG_DIR"] = old


@pytest.fixture(scope="module")
def zygote():
    """A skill zygote of the module's own (runtime/skillrun/zygote.py)."""
    from narratoria.runtime.skillrun.process import script_env
    from narratoria.runtime.skillrun.zygote import Zygote

    z = Zygote(script_env(None, "zygote"))
    z.start()
    yield z
    z.close()


@pytest.fixture(scope="module")
def routed():
    """The routed planner the daemon runs: the real model behind the MiniLM router, every
    built-in skill registered (a module that needs other skills defines its own)."""
    from narratoria.runtime.embedding import shared_local
    from narratoria.runtime.planner.model import ModelPlanner
    from narratoria.runtime.planner.routed import routed_planner
    from narratoria.runtime.skills.registry import SkillRegistry

    registry = SkillRegistry([BUILTIN_SKILLS])
    return routed_planner(ModelPlanner(skills=registry.get), shared_local())


@pytest.fixture(scope="module")
def every() -> tuple:
    """Every built-in skill script, the disabled ones too: what a plan request offers."""
    from narratoria.runtime.skills.registry import SkillRegistry

    return tuple(SkillRegistry([BUILTIN_SKILLS]).scripts(include_disabled=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of a module that starts daemons (it holds :class:`support.daemon.Daemon`), or
    that uses a daemon fixture (every one is named so), is a ``daemon`` test: the fast
    subset (``-m "not daemon and not model and not browser"``) leaves it out."""
    from support.daemon import Daemon

    for item in items:
        module = getattr(item, "module", None)
        if getattr(module, "Daemon", None) is Daemon or any(
                "daemon" in name for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.daemon)
