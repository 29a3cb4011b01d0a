"""`narratoria loadtest` against a real daemon (pattern planner, skill limit 2): concurrent
sessions running a fixed plan of parallel sleeps never exceed the supervisor's limit
and leave no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

import pytest

from conftest import FIXTURE_SKILLS
from narratoria.clients.client import NarratoriaClient
from narratoria.bench.loadtest import leaked_processes, run_loadtest
from support.daemon import HASH_EMBEDDER, Daemon

LIMIT = 2
SLEEP_PLAN = {"requestId": "load-1", "narrative": "Three sleepers.", "parallel": True,
              "tools": [{"toolId": f"s{i}", "toolPath": "echo/sleep", "async": True,
                         "input": {"seconds": 0.2, "key": f"s{i}"}} for i in range(3)]}


@pytest.fixture(scope="module")
def limited_daemon():
    # Spelt with "/./": the daemon's own command line must not name the fixture skills, or
    # conftest's leak check would take the daemon for a skill process (the skills' command
    # lines still do: the registry's paths are normalised).
    skills = f"{FIXTURE_SKILLS.parent}/./{FIXTURE_SKILLS.name}"
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER,
               "--skill-limit", str(LIMIT), "--skills-dir", skills)
    yield d
    assert d.stop() == 0


def test_concurrent_fixed_plans_hold_the_limit_and_leak_nothing(limited_daemon):
    def factory() -> NarratoriaClient:
        return NarratoriaClient(f"unix://{limited_daemon.socket}", timeout_s=120)

    report = run_loadtest(factory, clients=4, turns=3, plan=SLEEP_PLAN, progress=False)
    assert report["failures"] == {"total": 0, "turnErrors": 0, "byCategory": {}}, report
    assert report["turns"] == report["turnsOk"] == 12 and report["turnsPerS"] > 0
    skills = report["skills"]
    assert skills["invocations"] == 36 and skills["failed"] == 0 and skills["perS"] > 0
    assert skills["limit"] == LIMIT and skills["limitHeld"]
    assert 1 <= skills["peakLive"] <= skills["peakLiveDaemon"] <= LIMIT
    assert skills["peakLiveDaemon"] == LIMIT  # 4 sessions x 3 parallel tools fill both slots
    assert skills["statusSamples"] > 0 and skills["queue"]["depthMax"] >= 1
    # The daemon measures each invocation's wait for a slot: 12 sleeps of 0.2 s asking
    # for 2 slots at once, so most wait at least one sleep; none waits longer than it ran.
    wait = skills["queueWaitMs"]
    assert wait["n"] == 36 and wait["max"] >= 190, wait
    assert wait["max"] <= skills["durationMs"]["max"]
    assert report["leaked"]["count"] == 0 and report["leaked"]["statusLive"] == 0
    assert report["leaked"]["procScan"] and report["leaked"]["processes"] == []
    lat = report["latencyMs"]
    assert {"turn", "plan", "execute", "store", "total"} <= set(lat)
    assert lat["turn"]["n"] == 12 and lat["turn"]["p50"] <= lat["turn"]["p95"] <= lat["turn"]["p99"]
    # Three 0.2 s sleeps through two slots take at least two rounds.
    assert lat["execute"]["p50"] >= 400
    fair = report["fairness"]
    assert fair["ratio"] >= 1.0 and fair["clientTurnMaxMs"] >= fair["clientTurnP50MsMax"]
    assert report["ok"]
    assert len(report["summary"]) == 4


def test_a_flood_of_parallel_tools_does_not_starve_another_sessions_turns(limited_daemon):
    def factory() -> NarratoriaClient:
        return NarratoriaClient(f"unix://{limited_daemon.socket}", timeout_s=120)

    flood = {"requestId": "flood", "parallel": True,
             "tools": [{"toolId": f"f{i}", "toolPath": "echo/sleep", "async": True,
                        "input": {"seconds": 0.2, "key": f"f{i}"}} for i in range(8)]}
    one = {"requestId": "one", "tools": [{"toolId": "s", "toolPath": "echo/sleep",
                                          "input": {"seconds": 0.1, "key": "s"}}]}
    report = run_loadtest(factory, clients=1, turns=3, plan=one, progress=False,
                          flood_plan=flood, flood_clients=2)
    assert report["ok"] and report["turnsOk"] == 3 and report["failures"]["total"] == 0
    assert report["flood"]["clients"] == 2 and report["flood"]["turnsOk"] >= 2
    assert report["flood"]["failures"] == {} and report["skills"]["limitHeld"]
    # The measured session's one tool waits for a slot, never for a whole flood plan.
    assert report["latencyMs"]["turn"]["max"] < report["flood"]["turnMs"]["p50"], report
    assert report["leaked"]["count"] == 0 and len(report["summary"]) == 5


def loadtest_sessions(daemon) -> list:
    """The loadtest's sessions this daemon still holds active (none)."""
    with NarratoriaClient(f"unix://{daemon.socket}") as client:
        return [s for s in client.list_sessions() if s.title.startswith("loadtest")]


def test_the_loadtest_ends_every_session_it_opened(limited_daemon):
    def factory() -> NarratoriaClient:
        return NarratoriaClient(f"unix://{limited_daemon.socket}", timeout_s=120)

    one = {"requestId": "one", "tools": [{"toolId": "s", "toolPath": "echo/sleep",
                                          "input": {"seconds": 0.05, "key": "s"}}]}
    report = run_loadtest(factory, clients=2, turns=1, plan=one, progress=False,
                          flood_plan=one, flood_clients=1)
    assert report["ok"] and report["sessions"] == {"opened": 3, "notEnded": 0}, report
    assert loadtest_sessions(limited_daemon) == []
    with NarratoriaClient(f"unix://{limited_daemon.socket}") as client:
        ended = [s for s in client.list_sessions(include_ended=True)
                 if s.title in ("loadtest 0", "loadtest 1", "loadtest flood 0")]
    assert len(ended) >= 3 and {s.status for s in ended} == {"ended"}


# The CLI as a terminal starts it, with Ctrl-C at its default. A shell without job control
# starts a background command (`./.ci/run &`, a CI runner's step) with SIGINT ignored, its
# children inherit that, and Python then installs no KeyboardInterrupt handler: the run
# went on for its whole duration (seen on a clean clone, the stacks showing no interrupt).
AS_IN_A_TERMINAL = ("import runpy, signal, sys; "
                    "signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "sys.argv[0] = 'narratoria'; "
                    "runpy.run_module('narratoria.clients.cli', run_name='__main__')")


def test_an_interrupted_loadtest_ends_its_sessions_too(limited_daemon, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SLEEP_PLAN))
    env = {**os.environ, "NARRATORIA_ADDRESS": f"unix://{limited_daemon.socket}"}
    proc = subprocess.Popen(
        # -X faulthandler: a run that hangs after its SIGINT is sent SIGABRT, and the
        # failure shows where every thread of it waited.
        [sys.executable, "-X", "faulthandler", "-c", AS_IN_A_TERMINAL, "loadtest",
         "--clients", "2", "--duration", "120", "--plan", str(plan)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(loadtest_sessions(limited_daemon)) < 2:  # both playing
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        time.sleep(1.0)  # turns in flight
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"no exit within 60 s of SIGINT; its threads:\n{err}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert loadtest_sessions(limited_daemon) == [], err


def test_an_interrupted_run_stops_its_clients_before_it_returns(limited_daemon):
    """A Ctrl-C (SIGALRM raising KeyboardInterrupt in the main thread, as SIGINT does) ends
    the run's sessions and its clients' turns: no client thread is left playing, in a
    gRPC call, when the interpreter exits."""
    def factory() -> NarratoriaClient:
        return NarratoriaClient(f"unix://{limited_daemon.socket}", timeout_s=120)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    earlier = {s.id for s in loadtest_sessions(limited_daemon)}  # another test's, if it failed
    before = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 5.0)  # the clients are playing by then
    try:
        with pytest.raises(KeyboardInterrupt):
            run_loadtest(factory, clients=2, turns=None, duration_s=120, plan=SLEEP_PLAN,
                         progress=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    # (a thread's `ended` is set once its work and its channel are done; it may still be
    # listed for an instant after)
    left = [t for t in threading.enumerate()
            if t.name.startswith("loadtest-") and not t.ended.is_set()]
    assert left == [], "".join(f"{t.name} at:\n{''.join(traceback.format_stack(frames[t.ident]))}"
                               for frames in [sys._current_frames()] for t in left
                               if t.ident in frames)
    assert [s for s in loadtest_sessions(limited_daemon) if s.id not in earlier] == []


def test_the_leak_scan_finds_a_process_under_the_supervisor():
    # A child of this process stands in for a skill left under the supervisor.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = {p["pid"]: p for p in leaked_processes(os.getpid())}
        assert found[child.pid]["why"] == "under the supervisor"
        assert "time.sleep(30)" in found[child.pid]["cmdline"]
    finally:
        child.kill()
        child.wait()
    # (The module's daemon is a child of this process too: only the stand-in is checked.)
    assert child.pid not in {p["pid"] for p in leaked_processes(os.getpid())}
    # Orphans anywhere else, with no marker at all, are found by ancestry too: see
    # tests/security/test_containment.py (the loadtest is their subreaper).


def test_cli_json_report(limited_daemon, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SLEEP_PLAN))
    env = {**os.environ, "NARRATORIA_ADDRESS": f"unix://{limited_daemon.socket}"}
    out = subprocess.run(
        # -X faulthandler: a run that hangs after its SIGINT is sent SIGABRT, and the
        # failure shows where every thread of it waited.
        [sys.executable, "-X", "faulthandler", "-m", "narratoria.clients.cli", "loadtest",
         "--clients", "2",
         "--turns", "2", "--plan", str(plan), "--skill-concurrency", str(LIMIT), "--json"],
        capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["startedDaemon"] is False and doc["mode"] == "plan" and doc["clients"] == 2
    assert doc["turnsOk"] == 4 and doc["skills"]["invocations"] == 12
    assert doc["skills"]["requestedConcurrency"] == doc["skills"]["limit"] == LIMIT
    assert doc["skills"]["limitHeld"] and doc["leaked"]["count"] == 0 and doc["ok"]
    assert {"turnsPerS", "latencyMs", "failures", "fairness", "machine"} <= set(doc)

    # Without --json: live progress on stderr, the summary on stdout.
    out = subprocess.run(
        [sys.executable, "-m", "narratoria.clients.cli", "loadtest", "--clients", "1",
         "--turns", "1", "--plan", str(plan)], capture_output=True, text=True, timeout=120,
        env=env)
    assert out.returncode == 0, out.stderr
    assert "1 clients, plan turns: 1/1 ok" in out.stdout and "leaked 0" in out.stdout
    assert "skill limit 2" in out.stderr

    bad = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "loadtest", "--plan",
                          str(tmp_path / "missing.json")], capture_output=True, text=True,
                         timeout=60, env=env)
    assert bad.returncode == 2 and "--plan" in bad.stderr
