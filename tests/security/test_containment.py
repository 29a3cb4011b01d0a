"""Every process a skill starts dies with its invocation.

``fork(); setsid(); fork()`` leaves the process group; before containment such orphans
outlived their invocation, and ``narratoria loadtest`` counted none of them (its scan
looked for environment variables that a forked child need not carry). Now each
invocation runs in a cgroup of its own where one is writable, else under a shim that is
its orphans' subreaper (``runtime/skillrun/containment.py``), with a process-count limit; the
leak scan finds orphans by ancestry and cgroup.

Hostile skills: ``tests/security/fixtures/containment/escapee`` (``orphan-maker``: orphans
that become ``sleep 300`` with an empty environment; ``fork-children``: a thousand
children, each its own session) and ``zygote-hunter/cgroup-escape``. Both mechanisms run
through ``run_script`` (from the zygote and exec'd) and through a real daemon.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, TESTS, process_alive
from narratoria.clients.client import NarratoriaClient
from narratoria.bench.loadtest import run_loadtest
from narratoria.runtime.skillrun.containment import Containment, ContainmentError, own_folders
from narratoria.runtime.skillrun.limits import ResourceLimits
from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skillrun.zygote import Zygote
from support.daemon import HASH_EMBEDDER, Daemon

ROOT = TESTS / "security" / "fixtures" / "containment"
ESCAPEE = ROOT / "escapee" / "scripts"
ESCAPE = ROOT / "zygote-hunter" / "scripts" / "cgroup-escape"


def wait_dead(pids: list[int], within: float = 2.0) -> list[int]:
    """The pids still alive after ``within`` seconds (zombies count as dead)."""
    deadline = time.monotonic() + within
    while (alive := [p for p in pids if process_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def report(outcome, key: str) -> dict:
    """The JSON a fixture script put in its first log event."""
    logs = [r.event for r in outcome.events if r.event.__struct_config__.tag == "log"]
    assert logs, (outcome.error, outcome.stderr)
    return json.loads(logs[0].message) if key != "fields" else logs[0].fields


# -- run_script: both mechanisms, from the zygote and exec'd ------------------------------

_CONTAINMENTS: dict[str, Containment] = {}
_ZYGOTES: dict[str, Zygote] = {}


def _containment(mode: str) -> Containment:
    if mode not in _CONTAINMENTS:
        try:
            _CONTAINMENTS[mode] = Containment(mode)
        except ContainmentError as exc:
            pytest.skip(f"no writable cgroup on this machine: {exc}")
    return _CONTAINMENTS[mode]


@pytest.fixture(scope="module", autouse=True)
def _close_spawners():
    yield
    for zygote in _ZYGOTES.values():
        zygote.close()
    for containment in _CONTAINMENTS.values():
        containment.close()


@pytest.fixture(params=["cgroup", "subreaper"])
def mode(request) -> str:
    return request.param


@pytest.fixture(params=["zygote", "exec"])
def spawner(request, mode) -> tuple[Containment, Zygote | None]:
    containment = _containment(mode)
    if request.param == "exec":
        return containment, None
    if mode not in _ZYGOTES:
        _ZYGOTES[mode] = Zygote(script_env(None, "zygote"), containment=containment)
        _ZYGOTES[mode].start()
    return containment, _ZYGOTES[mode]


def invoke(script: Path, payload: dict, spawner, timeout_s: float = 20.0,
           resources: ResourceLimits = ResourceLimits()):
    containment, zygote = spawner
    stdin = tool_input("req-1", "escapee", script.name, payload)
    return asyncio.run(run_script(script, stdin, env=script_env(None, "req-1"), zygote=zygote,
                                  containment=containment,
                                  limits=ProcessLimits(timeout_s=timeout_s, resources=resources)))


def test_double_forked_orphans_die_with_their_invocation(spawner):
    out = invoke(ESCAPEE / "orphan-maker", {"count": 3}, spawner)
    orphans = report(out, "message")["orphans"]
    try:
        assert out.ok, (out.error, out.stderr)
        assert len(orphans) == 3
        # Dead by the time run_script returns: the end of the invocation killed them.
        assert not [p for p in orphans if process_alive(p)]
    finally:
        kill_all(orphans)


def test_orphans_of_a_script_that_times_out_or_is_cancelled_die_too(spawner, tmp_path):
    out = invoke(ESCAPEE / "orphan-maker", {"count": 2, "hang": True}, spawner, timeout_s=1.5)
    orphans = report(out, "message")["orphans"]
    try:
        assert out.timed_out
        assert not [p for p in orphans if process_alive(p)]
    finally:
        kill_all(orphans)

    containment, zygote = spawner
    pid_file = tmp_path / "pids"

    async def cancelled() -> None:
        stdin = tool_input("r", "escapee", "orphan-maker",
                           {"count": 2, "hang": True, "pidFile": str(pid_file)})
        task = asyncio.create_task(run_script(ESCAPEE / "orphan-maker", stdin,
                                              env=script_env(None, "r"), zygote=zygote,
                                              containment=containment))
        for _ in range(500):
            await asyncio.sleep(0.02)
            if pid_file.exists() and len(pid_file.read_text().split()) == 2:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    orphans = [int(p) for p in pid_file.read_text().split()]
    try:
        assert len(orphans) == 2 and not [p for p in orphans if process_alive(p)]
    finally:
        kill_all(orphans)


def test_a_thousand_children_all_die_and_a_cgroup_bounds_them(spawner):
    containment, _ = spawner
    out = invoke(ESCAPEE / "fork-children", {"count": 1000}, spawner, timeout_s=60,
                 resources=ResourceLimits(processes=50))
    got = report(out, "message")
    try:
        assert out.ok, (out.error, out.stderr)
        if containment.counts_by_cgroup:
            # pids.max 50 counts the script itself: 49 children at most, then EAGAIN.
            assert got["forked"] <= 49 and got["refused"], got["forked"]
        else:
            assert got["forked"] >= 1
        assert not [p for p in got["pids"] if process_alive(p)]
    finally:
        kill_all(got["pids"])


def test_a_skill_that_kills_its_shim_leaves_nothing_behind(mode):
    # The shim is the orphans' subreaper; killed, what it held falls to the zygote (or
    # the one-shot zygote), which kills it. (Exec'd with a cgroup, a script's parent is
    # the runner itself: that case has no shim to kill.)
    containment = _containment(mode)
    spawners = [(containment, _ZYGOTES.get(mode))] if mode in _ZYGOTES else []
    if not spawners:
        _ZYGOTES[mode] = Zygote(script_env(None, "zygote"), containment=containment)
        _ZYGOTES[mode].start()
        spawners = [(containment, _ZYGOTES[mode])]
    if mode == "subreaper":
        spawners.append((containment, None))  # through the one-shot zygote
    for spawner in spawners:
        out = invoke(ESCAPEE / "orphan-maker", {"count": 2, "killShim": True}, spawner)
        orphans = report(out, "message")["orphans"]
        try:
            assert not out.ok and len(orphans) == 2
            assert not wait_dead(orphans), spawner
        finally:
            kill_all(orphans)


def test_without_containment_the_orphans_would_survive():
    # What the tests above guard against, shown with containment off (the process group
    # alone, as before): the fixture's orphans really do escape it.
    off = Containment("off")
    zygote = Zygote(script_env(None, "zygote"), containment=off)
    zygote.start()
    orphans: list[int] = []
    try:
        for spawner in ((off, zygote), (off, None)):
            out = invoke(ESCAPEE / "orphan-maker", {"count": 1}, spawner)
            assert out.ok
            orphans += report(out, "message")["orphans"]
        time.sleep(0.3)
        assert [p for p in orphans if process_alive(p)] == orphans
    finally:
        kill_all(orphans)
        zygote.close()


def test_the_process_limit_falls_back_to_rlimit_nproc_for_a_normal_user():
    """Without a pids controller (forced subreaper mode), RLIMIT_NPROC bounds the
    children: run as ``nobody`` (the kernel exempts root from RLIMIT_NPROC)."""
    python = Path("/usr/bin/python3.11")
    setpriv = shutil.which("setpriv")
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if os.geteuid() != 0 or not setpriv or not python.exists() or sys.version_info[:2] != (3, 11):
        pytest.skip("needs root (to become nobody), setpriv and /usr/bin/python3.11")
    folder = Path(tempfile.mkdtemp(prefix="nproc-", dir="/tmp"))  # nobody can read it
    folder.chmod(0o755)
    # The system Python reads no .pth of the venv's (the editable install's finder), so
    # the checkout is put on its path as the package it is.
    (folder / "src").mkdir()
    (folder / "src").chmod(0o755)  # whatever the process's umask: nobody reads it
    (folder / "src" / "narratoria").symlink_to(REPO)
    harness = folder / "harness.py"
    harness.write_text(textwrap.dedent(f"""
        import asyncio, json, site, sys
        site.addsitedir({str(site)!r})
        from narratoria.runtime.skillrun.containment import Containment, user_tasks
        from narratoria.runtime.skillrun.limits import ResourceLimits
        from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
        from narratoria.runtime.skillrun.protocol import tool_input
        c = Containment("subreaper")
        env = {{**script_env(None, "r"), "PYTHONPATH": {f"{site}:{folder / 'src'}"!r}}}
        before = user_tasks()
        out = asyncio.run(run_script({str(ESCAPEE / 'fork-children')!r},
            tool_input("r", "escapee", "fork-children", {{"count": 1000}}), env=env,
            containment=c, limits=ProcessLimits(timeout_s=60,
                                                resources=ResourceLimits(processes=50))))
        logs = [r.event.message for r in out.events if r.event.__struct_config__.tag == "log"]
        print(json.dumps({{"ok": out.ok, "error": str(out.error), "stderr": out.stderr[-500:],
                           "report": json.loads(logs[0]) if logs else None,
                           "before": before, "limit": c.describe()["processLimit"]}}))
    """))
    harness.chmod(0o644)
    proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                           str(python), str(harness)], capture_output=True, text=True,
                          timeout=120, cwd="/tmp", env={"PATH": os.environ["PATH"],
                                                        "TMPDIR": "/tmp"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    shutil.rmtree(folder, ignore_errors=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    got = result["report"]
    try:
        assert result["ok"], result
        assert result["limit"] == "RLIMIT_NPROC"
        # The user's tasks when the limit was set plus 50: a few more at most, not 1000.
        assert got["refused"] and got["forked"] <= result["before"] + 50, got["forked"]
        assert not [p for p in got["pids"] if process_alive(p)]
    finally:
        kill_all(got["pids"] if got else [])


# -- a real daemon: auto (a cgroup here) and the subreaper fallback -----------------------


@pytest.fixture(scope="module", params=["auto", "subreaper"])
def daemon(request):
    # The subreaper daemon also has a memory cap below the 2 GiB default: the default
    # comes down to it (the zygote refuses anything past its caps).
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir", str(ROOT),
               *(["--skill-containment", request.param, "--max-skill-memory-mb", "1024"]
                 if request.param != "auto" else []))
    d.mode = request.param
    yield d
    assert d.stop() == 0


def run_tool(daemon: Daemon, tool_path: str, payload: dict) -> tuple[dict, list[dict]]:
    plan = {"requestId": "contain", "tools": [{"toolId": "t", "toolPath": tool_path,
                                                "input": payload, "timeoutMs": 60000}]}
    with daemon.client() as client:
        sid = client.create_session(title="containment").id
        events = list(client.turn(sid, plan_json=json.dumps(plan), execute_only=True))
    # The first: a failed tool is followed by the replan's.
    finished = next(e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished")
    logs = [json.loads(e.tool_event.event_json) for e in events
            if e.WhichOneof("event") == "tool_event"
            and json.loads(e.tool_event.event_json)["type"] == "log"]
    return {"ok": finished.ok, "error": finished.error}, logs


def test_through_a_daemon_orphans_and_a_thousand_children_die(daemon):
    result, logs = run_tool(daemon, "escapee/orphan-maker", {"count": 3})
    orphans = json.loads(logs[0]["message"])["orphans"]
    try:
        assert result["ok"], result
        assert not wait_dead(orphans, within=0.5)
    finally:
        kill_all(orphans)
    result, logs = run_tool(daemon, "escapee/fork-children", {"count": 1000})
    got = json.loads(logs[0]["message"])
    try:
        assert result["ok"], result
        if daemon.mode == "auto" and any(
                p for p in own_folders().values() if os.access(p, os.W_OK)):
            # The daemon's limit (ResourceLimits.processes, 128) held: pids.max here.
            assert got["forked"] < 128 and got["refused"], got["forked"]
        assert not wait_dead(got["pids"], within=0.5)
    finally:
        kill_all(got["pids"])


def test_a_cap_below_a_default_limit_lowers_the_default(daemon):
    if daemon.mode == "auto":
        pytest.skip("the daemon with --max-skill-memory-mb 1024 is the subreaper one")
    result, logs = run_tool(daemon, "escapee/orphan-maker", {"count": 0})
    assert result["ok"], result


def test_a_skill_cannot_move_out_of_its_cgroup_or_raise_its_limit(daemon):
    if daemon.mode != "auto" or not any(os.access(p, os.W_OK) for p in own_folders().values()):
        pytest.skip("a cgroup per invocation needs a writable cgroup hierarchy")
    result, logs = run_tool(daemon, "zygote-hunter/cgroup-escape", {})
    fields = logs[0]["fields"]
    assert result["ok"] and fields["attempts"], fields
    assert all(v != "ok" for v in fields["attempts"].values()), fields["attempts"]
    assert "narratoria-skills-" in fields["cgroupAfter"]  # still in its cell


ORPHAN_PLAN = {"requestId": "orphans", "tools": [
    {"toolId": "o", "toolPath": "escapee/orphan-maker", "input": {"count": 1}}]}


def orphan_plan(name: str) -> tuple[dict, Path]:
    """The orphan-maker's plan, its pids written to ``name`` in its working directory
    (the one place besides its TMPDIR a sandboxed skill may write), and that file."""
    plan = json.loads(json.dumps(ORPHAN_PLAN))
    plan["tools"][0]["input"]["pidFile"] = name
    pid_file = ROOT / "escapee" / "data" / name
    pid_file.unlink(missing_ok=True)
    return plan, pid_file


def test_loadtest_with_the_orphan_maker_leaks_nothing(daemon):
    plan, pid_file = orphan_plan(f"orphans-{daemon.mode}-{os.getpid()}")
    report_ = run_loadtest(lambda: NarratoriaClient(f"unix://{daemon.socket}", timeout_s=120),
                           clients=2, turns=2, plan=plan, progress=False)
    orphans = [int(p) for p in pid_file.read_text().split()]
    pid_file.unlink()
    try:
        assert len(orphans) == 4 and report_["turnsOk"] == 4
        assert report_["leaked"]["count"] == 0 and report_["ok"], report_["leaked"]
        assert not wait_dead(orphans, within=0.5)
    finally:
        kill_all(orphans)


# -- the leak scan: by ancestry, not by environment --------------------------------------


def test_the_leak_scan_finds_an_orphan_that_carries_no_marker(tmp_path):
    # A process that starts the orphan-maker as its child subreaper (as the loadtest is
    # for the daemon it starts) finds the orphan, a `sleep` with an empty environment,
    # among its children; without being the subreaper it cannot (the orphan went to init).
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent(f"""
        import json, subprocess, sys
        from narratoria.bench.loadtest import leaked_processes
        from narratoria.runtime.skillrun.containment import become_subreaper
        if sys.argv[1] == "adopt":
            become_subreaper()
        stdin = json.dumps({{"input": {{"count": 1}}}})
        out = subprocess.run([{str(ESCAPEE / 'orphan-maker')!r}], input=stdin,
                             capture_output=True, text=True, timeout=30)
        orphan = json.loads(json.loads(out.stdout.splitlines()[0])["message"])["orphans"][0]
        found = leaked_processes(-1, adopter=__import__("os").getpid())
        print(json.dumps({{"orphan": orphan, "found": found}}))
    """))
    seen = {}
    for how in ("adopt", "no"):
        proc = subprocess.run([sys.executable, str(probe), how], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        seen[how] = json.loads(proc.stdout)
        kill_all([seen[how]["orphan"]])
    adopted = {p["pid"]: p for p in seen["adopt"]["found"]}
    orphan = seen["adopt"]["orphan"]
    assert adopted[orphan]["why"] == "orphan (reparented to the loadtest)"
    assert adopted[orphan]["cmdline"].startswith("sleep 300")
    assert seen["no"]["orphan"] not in {p["pid"] for p in seen["no"]["found"]}


def test_loadtest_reports_the_orphans_a_daemon_without_containment_leaves(tmp_path):
    """``narratoria loadtest`` with the orphan-maker against a daemon it starts with
    containment off: the orphans (no marker in their environment) are reported."""
    plan, pid_file = orphan_plan(f"orphans-off-{os.getpid()}")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    proc = subprocess.run(
        [sys.executable, "-m", "narratoria.clients.cli", "loadtest", "--start-daemon",
         "--planner", "pattern", "--skills-dir", str(ROOT), "--skill-containment", "off",
         "--clients", "2", "--turns", "2", "--plan", str(plan_file), "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    orphans = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
    pid_file.unlink(missing_ok=True)
    try:
        assert proc.returncode == 1, proc.stderr[-3000:]  # a leak fails the run
        result = json.loads(proc.stdout)
        leaked = {p["pid"]: p["why"] for p in result["leaked"]["processes"]}
        assert len(orphans) == 4 and result["turnsOk"] == 4
        assert result["leaked"]["orphanScan"] and result["leaked"]["count"] >= 4
        assert all(leaked.get(p) == "orphan (reparented to the loadtest)" for p in orphans), \
            (orphans, leaked)
    finally:
        kill_all(orphans)
