"""A second `narratoria serve` on a data dir a daemon is using: one line naming
the running daemon's pid, no traceback, exit 2, at once (before Ray starts); the running
daemon is untouched. A SIGKILLed daemon leaves no lock behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from support.daemon import HASH_EMBEDDER, NARRATORIA, Daemon, cli

pytestmark = pytest.mark.daemon

# Refused before Ray or the model: a Python start (~2 s is the goal; a loaded machine
# gets room). A serve that is not refused takes far longer; it is stopped at this bound.
REFUSED_WITHIN_S = 10.0
GIVE_UP_S = 180.0


def _serve(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`narratoria serve ARGS` to its end (its process group killed past GIVE_UP_S: a
    serve that was not refused must not outlive the test with its Ray)."""
    started = time.monotonic()
    proc = subprocess.Popen([str(NARRATORIA), "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=GIVE_UP_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return (subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
            time.monotonic() - started)


def test_a_second_serve_on_a_data_dir_in_use_names_the_daemon_and_exits_2():
    daemon = Daemon(*HASH_EMBEDDER, "--planner", "pattern")
    data_dir = daemon.dir / "data"
    try:
        pid = daemon.ready["pid"]
        second, took = _serve("--data-dir", str(data_dir), *HASH_EMBEDDER, "--planner", "pattern")
        assert second.returncode == 2, (second.returncode, second.stderr[-3000:])
        assert "Traceback" not in second.stderr and "\x1b[" not in second.stderr, second.stderr
        lines = second.stderr.strip().splitlines()
        assert lines == [f"narratoria serve: data dir {data_dir} in use by pid {pid} (another "
                         "narratoria serve); stop it or pass --data-dir"], second.stderr
        assert second.stdout == ""
        assert took < REFUSED_WITHIN_S, took
        # The running daemon is untouched.
        assert cli(daemon, "status").returncode == 0

        # Killed outright, it leaves no lock: the next serve on the data dir gets past it
        # (to its model check, which a missing model fails: no second daemon to start).
        os.kill(pid, signal.SIGKILL)
        daemon.proc.wait(30)
        third, _ = _serve("--data-dir", str(data_dir), "--model", str(daemon.dir / "none.gguf"))
        assert third.returncode == 2, third.stderr[-3000:]
        assert "in use" not in third.stderr and "none.gguf does not exist" in third.stderr, \
            third.stderr
    finally:
        daemon.stop()
        daemon._kill()  # what the SIGKILLed serve left in its process group (Ray)
