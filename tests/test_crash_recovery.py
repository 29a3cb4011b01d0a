"""Crash recovery: the whole daemon (serve and every Ray process) SIGKILLed under a
write load, restarted on the same data dir: every write a client saw acknowledged is
there, nothing is half-written, sessions play on, and nothing of the killed daemon
(Ray, the zygote, a skill) is left running. Two cycles of `narratoria bench crash`."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from narratoria.bench.crash import (CrashDaemon, marked_processes, run_crash_bench,
                                            write_plan, write_skill)
from narratoria.clients.client import NarratoriaClient

from conftest import process_alive
from support.daemon import HASH_EMBEDDER

pytestmark = pytest.mark.daemon


def test_two_sigkill_cycles_lose_no_acknowledged_write_and_leave_no_process():
    report = run_crash_bench(cycles=2, writers=3, progress=False, seed=1234,
                             kill_after_s=(0.3, 1.5))
    detail = json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=1)[:6000]
    assert report["cycles"] == 2
    assert report["acknowledged"] > 0, detail
    assert report["lost"] == 0 and report["halfWritten"] == 0, detail
    assert report["found"] == report["acknowledged"], detail
    final = report["finalCheck"]
    assert final["lost"] == 0 and final["halfWritten"] == 0, detail
    assert report["resumed"] == report["resumeTried"] > 0, detail
    assert not report["anomalies"], detail
    # Nothing of a killed daemon survives it: no Ray process, no zygote, no skill.
    assert report["survivors"] == 0, detail
    for row in report["perCycle"]:
        assert row["processesKilled"] >= 3, detail  # serve, gcs_server, raylet at least
    assert report["cleanStopExit"] == 0 and report["leftAfterCleanStop"] == 0, detail
    # The database file agrees: one scene memory per saved turn, none of an unsaved one.
    memories = report["sceneMemories"]
    assert memories["turns"] >= report["acknowledged"] and memories["memories"] == memories["turns"]
    assert memories["memoriesOfUnsavedTurns"] == memories["turnsWithoutMemory"] == 0, detail
    assert report["passed"], detail


def test_a_skill_running_at_the_kill_dies_with_the_daemon():
    """A skill mid-invocation when the daemon is SIGKILLed (the bench does not kill it):
    it must not outlive the daemon."""
    folder = Path(tempfile.mkdtemp(prefix="nk-", dir="/tmp"))
    skills = write_skill(folder / "skills")
    sleeper = skills / "crashwrite" / "scripts" / "sleep"
    # In its working directory (its skill's data/ folder): a sandboxed skill may write
    # there and in its TMPDIR only (runtime/skillrun/sandbox.py).
    pid_file = skills / "crashwrite" / "data" / "sleeper.pid"
    sleeper.write_text("#!/usr/bin/env python3\nimport json, os, sys, time\n"
                       "req = json.load(sys.stdin)\n"
                       "open(req['input']['pidFile'], 'w').write(str(os.getpid()))\n"
                       "time.sleep(120)\n")
    sleeper.chmod(0o755)
    daemon = CrashDaemon(folder, skills, folder / "t", extra=HASH_EMBEDDER)
    try:
        with NarratoriaClient(daemon.address, timeout_s=30) as client:
            sid = client.create_session().id
            plan = {"requestId": "sleepy", "narrative": "z",
                    "tools": [{"toolId": "s", "toolPath": "crashwrite/sleep",
                               "input": {"pidFile": pid_file.name}}]}

            def play() -> None:
                try:
                    for _ in client.turn(sid, plan_json=json.dumps(plan), execute_only=True):
                        pass
                except Exception:  # noqa: BLE001 - the daemon is killed under it
                    pass

            player = threading.Thread(target=play, daemon=True)
            player.start()
            deadline = time.monotonic() + 30
            while not (pid_file.exists() and pid_file.read_text().strip()):
                assert time.monotonic() < deadline, "the sleeping skill never started"
                time.sleep(0.05)
            skill_pid = int(pid_file.read_text())
            assert process_alive(skill_pid)
            killed = daemon.kill()
        player.join(30)
        assert not killed["survivors"], killed
        assert not process_alive(skill_pid)
        assert not marked_processes(str(folder / "t"))
        # And the data dir serves again: the session is there, the cancelled turn is not.
        again = CrashDaemon(folder, skills, folder / "t")
        try:
            with NarratoriaClient(again.address, timeout_s=30) as client:
                assert client.resume_session(sid).turns == 0
                events = list(client.turn(sid, plan_json=write_plan(sid, 1, "v1"),
                                          execute_only=True))
                assert events[-1].WhichOneof("event") == "done"
                assert json.loads(client.get_state(sid).state_json)["writes"] == {"t1": "v1"}
        finally:
            assert again.stop() == 0
    finally:
        if daemon.proc.poll() is None:
            daemon.kill()
        shutil.rmtree(folder, ignore_errors=True)
