"""Landlock (runtime/skillrun/sandbox.py): a skill process cannot open the daemon's files, and
can still do everything a skill does. Real processes, the real kernel: the rules
alone, a skill run by exec and forked from the zygote, and a real daemon's skill."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURE_SKILLS
from narratoria.runtime.db import DB_FILENAME
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.executor import _working_dir
from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skillrun.zygote import Zygote
from narratoria.runtime.skills.discovery import load_skill

pytestmark = pytest.mark.skipif(not sandbox.available(), reason="this kernel has no Landlock")

SNOOP = FIXTURE_SKILLS / "snoop" / "scripts" / "snoop"


def run_denied(denied: Path, code: str, extra: dict | None = None) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter that first gives up ``denied``."""
    program = (f"from narratoria.runtime.skillrun.sandbox import deny\n"
               f"deny([{str(denied)!r}], {extra or {}!r})\n" + code)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)


def outcomes(code: str) -> str:
    """A program that reports, as JSON, what each ``name: action`` in CHECKS did."""
    return textwrap.dedent("""
        import json, os, subprocess, sys
        def attempt(action):
            try:
                action()
                return "ok"
            except PermissionError:
                return "refused"
        def read(path):
            with open(path, "rb") as f:
                return f.read()
        facts = {}
    """) + textwrap.dedent(code) + "\nprint(json.dumps(facts))\n"


def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "characters").mkdir(parents=True)
    (data / DB_FILENAME).write_text("the database")
    (data / "characters" / "mara.json").write_text("{}")
    (data / "daemon.token").write_text("secret")
    return data


# ------------------------------------------------------------------------ the rules alone


def test_the_denied_folder_is_closed_and_the_rest_stays_open(tmp_path):
    data = data_dir(tmp_path)
    (tmp_path / "beside.txt").write_text("fine")
    out = run_denied(data, outcomes(f"""
        facts["db"] = attempt(lambda: read({str(data / DB_FILENAME)!r}))
        facts["token"] = attempt(lambda: read({str(data / "daemon.token")!r}))
        facts["character"] = attempt(lambda: read({str(data / "characters" / "mara.json")!r}))
        facts["list"] = attempt(lambda: os.listdir({str(data)!r}))
        facts["create"] = attempt(lambda: open({str(data / "new")!r}, "w"))
        facts["truncate"] = attempt(lambda: os.truncate({str(data / DB_FILENAME)!r}, 0))
        facts["unlink"] = attempt(lambda: os.unlink({str(data / DB_FILENAME)!r}))
        facts["beside"] = attempt(lambda: read({str(tmp_path / "beside.txt")!r}))
        facts["etc"] = attempt(lambda: read("/etc/hostname"))
        child = subprocess.run([sys.executable, "-c",
                                "open({str(data / DB_FILENAME)!r}).read()"],
                               capture_output=True, text=True)
        facts["child"] = "refused" if "PermissionError" in child.stderr else "ok"
        import grpc  # the imports a skill needs still work
    """))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "db": "refused", "token": "refused", "character": "refused", "list": "refused",
        "create": "refused", "truncate": "refused", "unlink": "refused",
        "beside": "ok", "etc": "ok", "child": "refused"}
    assert (data / DB_FILENAME).read_text() == "the database"


def test_the_daemons_open_database_is_not_reachable_through_proc(tmp_path):
    """/proc/PID/fd/N of a process holding the database open leads to the same file."""
    data = data_dir(tmp_path)
    with open(data / DB_FILENAME) as held:
        link = f"/proc/{os.getpid()}/fd/{held.fileno()}"
        out = run_denied(data, outcomes(f"""
            facts["fd"] = attempt(lambda: read({link!r}))
            facts["root"] = attempt(lambda: read("/proc/{os.getpid()}/root{data / DB_FILENAME}"))
        """))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"fd": "refused", "root": "refused"}


def test_folders_beneath_the_denied_one_can_be_let_back_in(tmp_path):
    """Skills installed in the data dir: their code readable, their data/ writable."""
    data = data_dir(tmp_path)
    skill = data / "skills" / "mine"
    (skill / "scripts").mkdir(parents=True)
    (skill / "data").mkdir()
    (skill / "scripts" / "run").write_text("code")
    (data / "skills" / "other").mkdir()
    out = run_denied(data, outcomes(f"""
        facts["code"] = attempt(lambda: read({str(skill / "scripts" / "run")!r}))
        facts["code_write"] = attempt(lambda: open({str(skill / "scripts" / "x")!r}, "w"))
        facts["data_write"] = attempt(lambda: open({str(skill / "data" / "x")!r}, "w").close())
        facts["db"] = attempt(lambda: read({str(data / DB_FILENAME)!r}))
        facts["skills_list"] = attempt(lambda: os.listdir({str(data / "skills")!r}))
    """), extra={str(skill): sandbox.READ_ONLY, str(skill / "data"): -1})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"code": "ok", "code_write": "refused", "data_write": "ok",
                                      "db": "refused", "skills_list": "refused"}


def test_a_socket_in_the_denied_folder_can_still_be_reached(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(data / "d.sock"))
    server.listen(1)
    try:
        out = run_denied(data, "import socket\ns = socket.socket(socket.AF_UNIX)\n"
                               f"s.connect({str(data / 'd.sock')!r})\nprint('connected')")
    finally:
        server.close()
    assert out.stdout.strip() == "connected", out.stderr


def test_a_symlink_to_an_ancestor_does_not_open_the_way_again(tmp_path):
    data = data_dir(tmp_path)
    (tmp_path / "up").symlink_to(tmp_path)
    (tmp_path / "in").symlink_to(data)
    out = run_denied(data, outcomes(f"""
        facts["up"] = attempt(lambda: read({str(tmp_path / "up" / "data" / DB_FILENAME)!r}))
        facts["in"] = attempt(lambda: read({str(tmp_path / "in" / DB_FILENAME)!r}))
    """))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"up": "refused", "in": "refused"}


def test_the_ruleset_is_kept_and_rebuilt_when_an_ancestor_changes(tmp_path):
    ruleset = sandbox.Ruleset([str(data_dir(tmp_path))])
    try:
        first = ruleset.fd()
        assert ruleset.fd() == first  # nothing changed: the same ruleset
        with ruleset.lease() as leased:
            (tmp_path / "later").mkdir()  # a new entry beside the data dir
            second = ruleset.fd()
            assert second != first
            os.fstat(leased)  # a leased fd stays open through a rebuild...
            (tmp_path / "later2").mkdir()
            assert ruleset.fd() not in (first, second)
            os.fstat(leased)
        assert leased == first
        with pytest.raises(OSError):
            os.fstat(leased)  # ...and is closed once given back
    finally:
        ruleset.close()


def test_nothing_denied_is_nothing_restricted():
    sandbox.deny([])  # in this process: must be a no-op
    assert Path("/etc/hostname").read_text()
    with sandbox.lease(sandbox.SandboxPolicy(denied=())) as fd:
        assert fd is None


# ------------------------------------------------- a skill run by exec or by the zygote


def snoop(tmp_path: Path, policy: sandbox.SandboxPolicy | None, zygote: Zygote | None,
          payload: dict, cwd: Path | None = None, env: dict | None = None) -> dict:
    script = load_skill(FIXTURE_SKILLS / "snoop").scripts["snoop"]
    stdin = tool_input("r", "snoop", "snoop", payload)
    with _working_dir(script) as skill_cwd:
        outcome = asyncio.run(run_script(
            script.path, stdin, limits=ProcessLimits(sandbox=policy),
            env=env or script_env(script, "r"), cwd=cwd or skill_cwd, zygote=zygote))
    assert outcome.ok, (outcome.error, outcome.stderr)
    [log] = [r.event for r in outcome.events if getattr(r.event, "message", "") == "snoop"]
    return log.fields


@pytest.mark.parametrize("spawner", ["exec", "zygote"])
def test_a_skill_cannot_open_the_database_and_still_works(tmp_path, zygote, spawner):
    data = data_dir(tmp_path)
    (tmp_path / "notes.txt").write_text("fine")
    (tmp_path / "beside").mkdir()
    policy = sandbox.SandboxPolicy(denied=(str(data),))
    payload = {"read": [str(data / DB_FILENAME), str(data / "daemon.token"),
                        str(tmp_path / "notes.txt"), str(SNOOP)],
               "list": [str(data), str(data / "characters"), str(tmp_path / "beside"),
                        str(tmp_path)],
               "write": [str(data), str(tmp_path / "beside"), str(tmp_path)]}
    got = snoop(tmp_path, policy, zygote if spawner == "zygote" else None, payload)
    assert got["read"] == {str(data / DB_FILENAME): "PermissionError",
                           str(data / "daemon.token"): "PermissionError",
                           str(tmp_path / "notes.txt"): "ok", str(SNOOP): "ok"}
    # The folders on the way to the data dir can be neither listed nor written right in
    # (their entries can: every one but the data dir).
    assert got["list"] == {str(data): "PermissionError", str(data / "characters"): "PermissionError",
                           str(tmp_path / "beside"): "ok", str(tmp_path): "PermissionError"}
    # It writes nowhere but its working directory and its TMPDIR (not even a folder it
    # may list: tests/security/test_sandbox_writes.py).
    assert got["write"] == {str(data): "PermissionError", str(tmp_path / "beside"): "PermissionError",
                            str(tmp_path): "PermissionError"}
    assert got["scratch"] == "ok" and got["cwd"] == "ok"  # its TMPDIR, its data/ folder
    # Without the policy the same skill reads the database: the policy is what refuses.
    free = snoop(tmp_path, None, zygote if spawner == "zygote" else None, payload)
    assert free["read"][str(data / DB_FILENAME)] == "ok"


@pytest.mark.parametrize("spawner", ["exec", "zygote"])
def test_a_tmpdir_on_the_way_to_the_data_dir_becomes_a_scratch_folder(tmp_path, zygote, spawner):
    """The daemon's TMPDIR holds the data dir: no entry may be made right in it, so the
    skill gets a TMPDIR of its own, removed afterwards; its skill data/ folder inside the
    data dir (user skills live in <data>/skills) is its own to write."""
    data = data_dir(tmp_path)
    skill = data / "skills" / "snoop"
    (skill / "scripts").mkdir(parents=True)
    (skill / "data").mkdir()
    copy = skill / "scripts" / "snoop"
    copy.write_bytes(SNOOP.read_bytes())
    copy.chmod(0o755)
    policy = sandbox.SandboxPolicy(denied=(str(data),), readable=(str(data / "skills"),))
    env = {**script_env(None, "r"), "TMPDIR": str(tmp_path)}
    stdin = tool_input("r", "snoop", "snoop", {"read": [str(data / DB_FILENAME)],
                                                "write": [str(tmp_path), str(skill / "scripts")]})
    outcome = asyncio.run(run_script(copy, stdin, limits=ProcessLimits(sandbox=policy), env=env,
                                     cwd=skill / "data",
                                     zygote=zygote if spawner == "zygote" else None))
    assert outcome.ok, (outcome.error, outcome.stderr)
    got = outcome.events[0].event.fields
    assert got["read"] == {str(data / DB_FILENAME): "PermissionError"}
    assert got["write"] == {str(tmp_path): "PermissionError", str(skill / "scripts"): "PermissionError"}
    assert got["scratch"] == "ok" and got["cwd"] == "ok"
    assert Path(got["tmpdir"]).parent == Path(sandbox.scratch_root())
    assert not Path(got["tmpdir"]).exists()


# ----------------------------------------------------------------------- a real daemon


def test_a_daemons_skill_cannot_read_the_database_but_reaches_the_store(pattern_daemon):
    from skill_plans import finished, run_plan, tool_events

    d = pattern_daemon  # the test skills (snoop among them) are registered in it
    data = Path(d.ready["dataDir"])
    ray_dir = Path(d.ready["rayDir"])
    assert (data / DB_FILENAME).is_file() and (ray_dir / "session_latest").exists()
    with d.client() as client:
        session = client.create_session(title="snoop")
        tool = {"toolId": "s", "toolPath": "snoop/snoop",
                "input": {"read": [str(data / DB_FILENAME)],
                          "list": [str(data), str(ray_dir / "session_latest")],
                          "store": True}}
        events = run_plan(client, session.id, tool)
    assert finished(events)["s"].ok, [e for e in events]
    [log] = [e for e in tool_events(events, "s") if e.get("message") == "snoop"]
    got = log["fields"]
    assert got["read"] == {str(data / DB_FILENAME): "PermissionError"}
    # Nor its Ray folder, whose session files name the cluster's address.
    assert got["list"] == {str(data): "PermissionError",
                           str(ray_dir / "session_latest"): "PermissionError"}
    assert got["store"] == "ok"  # its Store calls go over the daemon's socket as before
    assert got["scratch"] == "ok" and got["cwd"] == "ok"


def test_without_landlock_a_skill_runs_as_before_and_it_is_said_once(tmp_path, monkeypatch,
                                                                     caplog):
    data = data_dir(tmp_path)
    monkeypatch.setattr(sandbox, "_abi", 0)  # what available() found on such a kernel
    monkeypatch.setattr(sandbox, "_warned", False)
    policy = sandbox.SandboxPolicy(denied=(str(data),))
    for _ in range(2):
        got = snoop(tmp_path, policy, None, {"read": [str(data / DB_FILENAME)]})
        assert got["read"] == {str(data / DB_FILENAME): "ok"} and got["scratch"] == "ok"
    assert [r.message for r in caplog.records if "Landlock" in r.message] == [
        "this kernel has no Landlock: skill processes can read the data dir and write "
        "anywhere the user can"]
