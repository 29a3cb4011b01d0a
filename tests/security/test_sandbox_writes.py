"""A skill writes only its working directory and its TMPDIR, and signals only its own
processes.

A hostile skill (fixtures/sandbox-writes/vandal), forked from the zygote and exec'd,
through ``run_script`` and through a real daemon, tries to create files in another
skill's folder, the repository's ``runtime/``, the venv's ``site-packages`` (a ``.pth``
file there runs at every interpreter start), ``$HOME``, the skill settings folder and
``/tmp``; to append to, truncate, rename, hard-link and remove another skill's script,
another daemon's token file and the skill settings; to make folders in a skill root and
in ``~/.config``; to SIGKILL the daemon (and its process group), its actors, the zygote,
its own shim or parent and a bystander process of the user; to connect to another
process's abstract unix socket. Every attempt is refused and nothing changes, while it
still writes its working directory, its TMPDIR, ``/dev/null`` and ``/dev/shm``, calls
the Store, and kills a child of its own. Landlock does it (``runtime/skillrun/sandbox.py``): a
layer built in the child handles only the rights that change files and gives them back
to the working directory and TMPDIR, and the layer that keeps other processes' ``/proc``
out also scopes signals and abstract sockets to the skill's own domain (ABI 6).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO, process_alive
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.containment import Containment
from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skills.discovery import load_skill

pytestmark = pytest.mark.skipif(not sandbox.available(), reason="this kernel has no Landlock")

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sandbox-writes"
SCOPED = sandbox.available() >= 6  # signals and abstract sockets are scoped (Landlock ABI 6)
OTHER_TOKEN = b"another-daemons-token\n"
SETTINGS = b'{"disabled": []}\n'


@dataclass
class Targets:
    """What the vandal goes for, and what each held before."""

    create: list[Path]
    change: dict[Path, bytes]
    mkdir: list[Path]
    cleanup: list[Path] = field(default_factory=list)

    def input(self) -> dict:
        return {"create": [str(p) for p in self.create],
                "change": [str(p) for p in self.change],
                "mkdir": [str(p) for p in self.mkdir]}

    def assert_refused_and_unchanged(self, report: dict) -> None:
        assert report["create"] == {str(p): "PermissionError" for p in self.create}, report
        for path, ops in report["change"].items():
            # A hard link into its own folder lacks only the right to move across folders
            # (refer), which Landlock answers with EXDEV (an OSError) so that a program
            # falls back to copying: and a copy is only what it may read anyway.
            assert ops == {"append": "PermissionError", "truncate": "PermissionError",
                           "rename": "PermissionError", "link": "OSError",
                           "unlink": "PermissionError"}, (path, ops)
        assert report["mkdir"] == {str(p): "PermissionError" for p in self.mkdir}, report
        assert not [p for p in self.create + self.mkdir if p.exists()]
        assert {p: p.read_bytes() for p in self.change} == self.change

    def remove(self) -> None:
        """What a vandal got to do (on a kernel that let it), undone."""
        for path in self.create + self.mkdir:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)


def skill_root(folder: Path) -> Path:
    """A skill root holding copies of vandal and victim (the vandal goes for the victim's
    script: never the repository's own)."""
    for name in ("vandal", "victim"):
        shutil.copytree(FIXTURES / name, folder / name, ignore=shutil.ignore_patterns("data"))
    return folder


def targets(skills: Path, home: Path, config: Path) -> Targets:
    nonce = uuid.uuid4().hex[:10]
    other_daemon = Path(tempfile.mkdtemp(prefix="nd-other-", dir="/tmp"))
    token = other_daemon / "daemon.token"
    token.write_bytes(OTHER_TOKEN)
    config.mkdir(parents=True, exist_ok=True)
    (config / "skills.json").write_bytes(SETTINGS)
    victim = skills / "victim" / "scripts" / "greet"
    site = Path(sysconfig.get_paths()["purelib"])  # the venv the daemon runs from
    assert site.is_relative_to(sys.prefix) and site.is_dir()
    return Targets(
        create=[REPO / "runtime" / f"vandal_{nonce}.py", site / f"vandal_{nonce}.pth",
                home / f"vandal-{nonce}", config / f"vandal-{nonce}.json",
                victim.parent / f"vandal-{nonce}", Path("/tmp") / f"vandal-{nonce}"],
        change={victim: victim.read_bytes(), token: OTHER_TOKEN,
                config / "skills.json": SETTINGS},
        mkdir=[skills / f"evil-{nonce}", home / ".config" / f"autostart-{nonce}"],
        cleanup=[other_daemon])


@pytest.fixture
def abstract_listener():
    """Another process's abstract unix socket (this test's own)."""
    name = f"narratoria-test-{uuid.uuid4().hex[:10]}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen(4)
    yield name
    server.close()


@pytest.fixture
def bystander():
    """Another process of the user, the vandal's SIGKILL target."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def usr1_received():
    """SIGUSR1s this process (the runner: the supervisor's place) receives meanwhile."""
    got: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    yield got
    signal.signal(signal.SIGUSR1, old)


def vandal_report(events: list[dict]) -> dict:
    [report] = [e["fields"] for e in events if e.get("message") == "vandal-report"]
    return report


def assert_only_its_own(report: dict) -> None:
    """What a skill may still do: its cwd, its TMPDIR, /dev, its own child."""
    assert report["allowed"] == {"cwd": "ok", "tmpdir": "ok", "devnull": "ok", "lock": "ok",
                                 "shell": "ok", "child": "killed"}, report["allowed"]


# -- run_script: forked from the zygote, and exec'd -------------------------------------------


@pytest.mark.parametrize("spawner", ["zygote", "exec"])
def test_a_skill_changes_nothing_outside_its_folders_and_signals_none_but_its_own(
        tmp_path, zygote, spawner, abstract_listener, bystander, usr1_received):
    data = tmp_path / "data"
    data.mkdir()
    skills = skill_root(tmp_path / "skills")
    home = tmp_path / "home"
    goal = targets(skills, home, home / ".config" / "narratoria")
    script = load_skill(skills / "vandal").scripts["vandal" if spawner == "zygote" else
                                                   "vandal-exec"]
    kill = {"bystander": bystander.pid}
    if spawner == "zygote":
        kill["zygote"] = zygote.pid
    stdin = tool_input("r", "vandal", script.name, {
        **goal.input(), "kill": kill, "killParent": True,  # its parent: a shim either way
        "usr1": {"runner": os.getpid()}, "abstract": abstract_listener})
    cwd = skills / "vandal" / "data"
    cwd.mkdir()
    try:
        outcome = asyncio.run(run_script(
            script.path, stdin, env={**script_env(script, "r"), "HOME": str(home)}, cwd=cwd,
            limits=ProcessLimits(sandbox=sandbox.SandboxPolicy(denied=(str(data),))),
            zygote=zygote if spawner == "zygote" else None,
            containment=None if spawner == "zygote" else Containment("subreaper")))
        assert outcome.ok, (outcome.error, outcome.stderr[-2000:])
        report = vandal_report([{"message": getattr(r.event, "message", None),
                                 "fields": getattr(r.event, "fields", None)}
                                for r in outcome.events])
        goal.assert_refused_and_unchanged(report)
        assert_only_its_own(report)
        assert report["tmpdir"] != os.environ.get("TMPDIR")  # a scratch folder of its own
        if SCOPED:
            assert report["kill"] == {name: "PermissionError" for name in (*kill, "parent")}
            assert report["usr1"] == {"runner": "PermissionError"} and not usr1_received
            assert report["abstract"] == "PermissionError"
            assert process_alive(bystander.pid) and zygote.alive
    finally:
        goal.remove()


def test_on_a_kernel_without_scopes_writes_stay_confined_and_it_is_said_once(
        tmp_path, monkeypatch, caplog):
    """Landlock before ABI 6 has no scopes: the ruleset is made the short (ABI 1) way, a
    skill can then signal other processes (logged once), and writes stay confined."""
    data, mine = tmp_path / "data", tmp_path / "mine"
    data.mkdir()
    mine.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    program = (f"import os, signal\nfrom narratoria.runtime.skillrun import sandbox\n"
               f"sandbox._abi = min(sandbox.available(), 5)\n"
               f"sandbox.deny([{str(data)!r}], None, [{str(mine)!r}])\n"
               f"open({str(mine / 'ok')!r}, 'w').close()\n"
               f"try:\n    open({str(tmp_path / 'not-ok')!r}, 'w')\n"
               f"except PermissionError:\n    print('write refused')\n"
               f"os.kill({sleeper.pid}, signal.SIGKILL)\nprint('signalled')\n")
    try:
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["write", "refused", "signalled"]
        assert (mine / "ok").exists() and not (tmp_path / "not-ok").exists()
        assert sleeper.wait(10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()
    monkeypatch.setattr(sandbox, "_abi", 5)
    monkeypatch.setattr(sandbox, "_warned_scopes", False)
    policy = sandbox.SandboxPolicy(denied=(str(data),))
    for _ in range(2):
        with sandbox.lease(policy, [str(mine)]) as fd:
            assert fd is not None
    assert [r.message for r in caplog.records if "scope" in r.message] == [
        "this kernel's Landlock (ABI 5, scopes need 6) cannot scope signals: skill processes "
        "can signal the daemon and the user's other processes"]


# -- a real daemon ----------------------------------------------------------------------------


@pytest.fixture
def vandal_daemon(tmp_path, config_dir):
    from support.daemon import Daemon

    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    skills = skill_root(tmp_path / "skills")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        d = Daemon("--planner", "pattern", "--embedding-backend", "hash",
                   "--skills-dir", str(skills))
    d.home, d.skills = home, skills
    yield d
    assert d.stop() == 0


def zygote_of(supervisor: int) -> int | None:
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and (entry / "comm").read_text().strip() == "nr-zygote"
                    and f"\nPPid:\t{supervisor}\n" in (entry / "status").read_text()):
                return int(entry.name)
        except OSError:
            continue
    return None


def test_a_daemons_skill_changes_nothing_outside_its_folders_and_kills_nothing(
        vandal_daemon, config_dir, abstract_listener, bystander):
    from skill_plans import finished, run_plan, tool_events

    d = vandal_daemon
    goal = targets(d.skills, d.home, config_dir)
    try:
        with d.client() as client:
            actors = {f"actor {a.name}": a.pid for a in client.status().actors if a.pid}
            supervisor = actors["actor supervisor"]
            zygote = zygote_of(supervisor)
            assert zygote is not None
            kill = {"daemon": d.proc.pid, "zygote": zygote, "bystander": bystander.pid, **actors}
            session = client.create_session(title="vandal")
            # One after the other: where the first got through, the second never runs.
            events = run_plan(client, session.id, *(
                {"toolId": script, "toolPath": f"vandal/{script}", "dependencies": after,
                 "input": {**goal.input(), "kill": kill, "killParent": True,
                           "killGroup": {"daemon": os.getpgid(d.proc.pid)},
                           "abstract": abstract_listener, "store": True}}
                for script, after in (("vandal", []), ("vandal-exec", ["vandal"]))))
            for script in ("vandal", "vandal-exec"):
                assert finished(events)[script].ok, finished(events)[script].error
                report = vandal_report(tool_events(events, script))
                goal.assert_refused_and_unchanged(report)
                assert_only_its_own(report)
                assert report["store"] == "ok"  # the daemon's socket is still its way in
                if SCOPED:
                    assert report["kill"] == {n: "PermissionError" for n in (*kill, "parent")}
                    assert report["killGroup"] == {"daemon": "PermissionError"}
                    assert report["abstract"] == "PermissionError"
            if SCOPED:
                assert all(process_alive(pid) for pid in kill.values()), kill
                assert zygote_of(supervisor) == zygote
            # The victim's script is the same and still runs, as the daemon still does.
            greeted = run_plan(client, session.id, {"toolId": "g", "toolPath": "victim/greet",
                                                    "input": {}})
            assert finished(greeted)["g"].ok
            assert [e["message"] for e in tool_events(greeted, "g") if e["type"] == "log"] == [
                "hello"]
    finally:
        goal.remove()
