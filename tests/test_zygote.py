"""The zygote: a forked skill is indistinguishable from an exec'd one, only faster.

``test_process.py`` runs every hostile-script test through the zygote too; these
tests cover what is the zygote's own: what the child sees, exit statuses, which
scripts it takes, and what happens when the zygote itself dies.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import process_alive
from narratoria.runtime.skillrun.process import run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skillrun.zygote import Zygote, runs_with_python


@pytest.fixture
def zygote():
    z = Zygote(script_env(None, "zygote"))
    z.start()
    yield z
    z.close()


def script(folder: Path, name: str, body: str, shebang: str = "#!/usr/bin/env python3") -> Path:
    path = folder / name
    path.write_text(f"{shebang}\n{body}")
    path.chmod(0o755)
    return path


REPORT = """
import json, os, sys
payload = json.loads(sys.stdin.read())
facts = {"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ),
         "own_group": os.getpgid(0) == os.getpid(), "path0": sys.path[0],
         "grpc_preloaded": "grpc" in sys.modules, "payload": payload["input"],
         "name": __name__}
print(json.dumps({"version": "0", "type": "log", "level": "info", "message": json.dumps(facts)}))
print(json.dumps({"version": "0", "type": "done", "ok": True}))
"""


def run(path: Path, zygote: Zygote | None, env: dict | None = None, cwd: Path | None = None,
        payload: dict | None = None, **kwargs):
    stdin = tool_input("r", "t", path.name, payload or {})
    return asyncio.run(run_script(path, stdin, env=env if env is not None else script_env(None, "r"),
                                  cwd=cwd, zygote=zygote, **kwargs))


def facts(outcome) -> dict:
    assert outcome.ok, (outcome.error, outcome.stderr)
    return json.loads(outcome.events[0].event.message)


def test_a_forked_script_sees_what_an_execd_one_sees(tmp_path, zygote, monkeypatch):
    monkeypatch.setenv("DAEMON_SECRET", "hunter2")  # in the daemon's env, never a skill's
    path = script(tmp_path, "report", REPORT)
    env = {**script_env(None, "r"), "SKILL_OWN_KEY": "k1"}
    forked = facts(run(path, zygote, env=env, cwd=tmp_path, payload={"x": 1}))
    execd = facts(run(path, None, env=env, cwd=tmp_path, payload={"x": 1}))
    assert forked["grpc_preloaded"] and not execd["grpc_preloaded"]  # it did fork
    for key in ("argv", "cwd", "own_group", "path0", "payload", "name"):
        assert forked[key] == execd[key], key
    assert forked["env"] == env  # exactly the supervisor's environment, nothing else
    assert "DAEMON_SECRET" not in forked["env"]
    assert forked["argv"] == [str(path)] and forked["path0"] == str(tmp_path)


def test_exit_statuses_are_those_python_gives(tmp_path, zygote):
    done = 'print(\'{"version":"0","type":"done","ok":true}\', flush=True)\n'
    assert run(script(tmp_path, "three", done + "import sys; sys.exit(3)"), zygote).exit_code == 3
    crashed = run(script(tmp_path, "crash", "raise RuntimeError('boom')"), zygote)
    assert crashed.exit_code == 1 and "RuntimeError: boom" in crashed.stderr
    assert crashed.error.category == "process_error"
    message = run(script(tmp_path, "msg", done + "import sys; sys.exit('bad config')"), zygote)
    assert message.exit_code == 1 and "bad config" in message.stderr
    killed = run(script(tmp_path, "kill", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
                 zygote)
    assert killed.exit_code == -signal.SIGKILL and "SIGKILL" in killed.error.message


def test_only_scripts_that_would_run_this_python_are_forked(tmp_path, zygote):
    assert runs_with_python(script(tmp_path, "py", "pass"))
    assert runs_with_python(script(tmp_path, "abs", "pass", shebang=f"#!{os.sys.executable}"))
    assert not runs_with_python(script(tmp_path, "sh", "true", shebang="#!/bin/sh"))
    assert not runs_with_python(script(tmp_path, "opt", "pass", shebang="#!/usr/bin/env python3 -O"))
    not_executable = script(tmp_path, "noexec", "pass")
    not_executable.chmod(0o644)
    assert not runs_with_python(not_executable)
    shell = script(tmp_path, "shell", 'read _; echo \'{"version":"0","type":"done","ok":true}\'',
                   shebang="#!/bin/sh")
    assert run(shell, zygote).ok  # exec'd as before


def test_when_the_zygote_dies_scripts_still_run_and_it_comes_back(tmp_path, zygote):
    path = script(tmp_path, "report", REPORT)
    old = zygote.pid
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while zygote.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert facts(run(path, zygote))["payload"] == {}
    assert zygote.alive and zygote.pid != old  # restarted on demand
    assert facts(run(path, zygote))["grpc_preloaded"]


def test_closing_the_zygote_kills_what_it_forked(tmp_path, zygote):
    pid_file = tmp_path / "pid"
    hang = script(tmp_path, "hang", f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                                    "time.sleep(60)")

    async def main():
        stdin = tool_input("r", "t", "hang", {})
        task = asyncio.create_task(run_script(hang, stdin, env=script_env(None, "r"), zygote=zygote))
        for _ in range(250):
            await asyncio.sleep(0.02)
            if pid_file.exists() and pid_file.read_text():
                break
        pid = int(pid_file.read_text())
        assert process_alive(pid)
        await asyncio.get_running_loop().run_in_executor(None, zygote.close)
        outcome = await asyncio.wait_for(task, timeout=10)
        return pid, outcome

    pid, outcome = asyncio.run(main())
    assert not outcome.ok
    deadline = time.monotonic() + 3
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(pid)


def test_a_malformed_request_is_refused_and_the_zygote_keeps_serving(tmp_path, zygote):
    import socket

    for payload in (b"\x00\x00\x00\x05{", b"garbage", b"\xff\xff\xff\xff"):
        sock = zygote.connect()  # the supervisor's own channel: there is no other
        sock.setblocking(True)
        r, w = os.pipe()
        socket.send_fds(sock, [payload], [r, w, w])  # right fd count, bad body
        os.close(r)
        os.close(w)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        reply = sock.recv(4096)
        sock.close()
        assert b"error" in reply, payload
    assert facts(run(script(tmp_path, "report", REPORT), zygote))["grpc_preloaded"]


def test_a_start_failure_is_read_even_when_the_exit_is_seen_first():
    """A script that could not start writes why, then exits 127; under load the shim can
    see the exit before the words: they are still the spawn's error, not an exit code."""
    import socket

    from narratoria.runtime.skillrun.zygote import _wait_script

    status_r, status_w = os.pipe()
    wake_r, wake_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the script that never started
        os.write(status_w, b"exec failed: No such file or directory")
        os._exit(127)
    os.close(status_w)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    ours, theirs = socket.socketpair()
    failure: list[bytes] = []
    try:
        code = _wait_script(pid, ours, wake_r, [], status_r, failure)
    finally:
        for fd in (status_r, wake_r, wake_w):
            os.close(fd)
        ours.close()
        theirs.close()
    assert code == 127 and b"".join(failure) == b"exec failed: No such file or directory"
