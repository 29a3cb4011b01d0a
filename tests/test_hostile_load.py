"""Hostile skills under load: concurrent sessions whose plans call scripts that crash,
hang, flood, fork children that would outlive them, hog memory, spin the CPU, print
garbage or linger after `done`, mixed with a well-behaved tool, through one daemon.

Every turn ends with a `done` that carries narration, the daemon's processes (serve
and its actors) keep a bounded RSS, the daemon serves on unhurt, and no process a
skill started survives its invocation (children included)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from narratoria.clients.client import NarratoriaClient
from narratoria.bench.loadtest import leaked_processes

from conftest import FIXTURE_SKILLS, REPO, fixture_processes, process_alive
from support.daemon import HASH_EMBEDDER, Daemon

LIMITS = REPO / "tests" / "fixtures" / "limits"
THREADS = 6
ROUNDS = 2
NORMAL_TURNS = 6
RSS_BOUND_MB = 1536  # per process: generous, a leak of what floods through is far more
GROWTH_BOUND_MB = 512  # per process, over the run


# Where fork-child and hang-with-child write their pid files under the daemon: their
# working directory (the skill's data/ folder), the one folder of theirs a sandboxed
# skill may write besides its TMPDIR.
PID_DIR = FIXTURE_SKILLS / "hostile" / "data"


def hostile_tools(prefix: str, tag: str) -> dict[str, dict]:
    """Hostile tool invocations by name (each plan also gets a well-behaved echo)."""
    return {
        "crash": {"toolPath": "hostile/crash"},
        "hang": {"toolPath": "hostile/hang", "timeoutMs": 800},
        "hang-with-child": {"toolPath": "hostile/hang-with-child", "timeoutMs": 800,
                            "required": False,  # one attempt: its pid file stays its own
                            "input": {"pidFile": f"{prefix}hwc-{tag}"}},
        "flood": {"toolPath": "hostile/flood", "timeoutMs": 20_000},
        "fork-child": {"toolPath": "hostile/fork-child", "required": False,
                       "input": {"pidFile": f"{prefix}fork-{tag}"}},
        "garbage": {"toolPath": "hostile/garbage"},
        "slow-exit": {"toolPath": "hostile/slow-exit", "timeoutMs": 3000},
        "memory-hog": {"toolPath": "greedy/memory-hog", "timeoutMs": 20_000},
        "cpu-spin": {"toolPath": "greedy/cpu-spin", "timeoutMs": 20_000},
    }


def plan_for(name: str, tool: dict | None, index: int) -> str:
    tools = [{"toolId": "e", "toolPath": "echo/echo",
              "input": {"key": f"k{index}", "value": name}}]
    if tool is not None:
        tools.insert(0, {"toolId": "h", "retryPolicy": {"maxRetries": 0}, "input": {}, **tool})
    return json.dumps({"requestId": f"hostile-{name}-{index}", "narrative": f"{name} turn {index}",
                       "tools": tools})


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class RssSampler(threading.Thread):
    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.first: dict[str, float] = {}
        self.peak: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for name, pid in self.pids.items():
                value = rss_mb(pid)
                if value is not None:
                    self.first.setdefault(name, value)
                    self.peak[name] = max(self.peak.get(name, 0.0), value)
            self.stop.wait(0.2)


@pytest.fixture(scope="module")
def hostile_daemon():
    # One skill root of links to the fixture skills: the daemon's own command line must
    # not name FIXTURE_SKILLS, or the leak check (conftest) would take it for a skill's.
    root = Path(tempfile.mkdtemp(prefix="nh-", dir="/tmp"))
    for skill in (FIXTURE_SKILLS / "hostile", FIXTURE_SKILLS / "echo", LIMITS / "greedy"):
        (root / skill.name).symlink_to(skill)
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir", str(root))
    yield d
    assert d.stop() == 0
    shutil.rmtree(root, ignore_errors=True)


def test_hostile_skills_under_load_end_every_turn_and_leave_nothing(hostile_daemon):
    daemon = hostile_daemon
    prefix = f"load-{os.getpid()}-"
    with daemon.client() as client:
        status = client.status()
    pids = {a.name: a.pid for a in status.actors if a.pid}
    pids["serve"] = daemon.proc.pid
    supervisor_pid = pids["supervisor"]
    sampler = RssSampler(pids)
    sampler.start()

    work: queue.Queue[tuple[str, dict | None, int]] = queue.Queue()
    index = 0
    for round_ in range(ROUNDS):
        for name, tool in hostile_tools(prefix, f"{round_}").items():
            index += 1
            work.put((name, tool, index))
    for _ in range(NORMAL_TURNS):
        index += 1
        work.put(("normal", None, index))
    results: dict[int, tuple[str, list]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with NarratoriaClient(f"unix://{daemon.socket}", timeout_s=60,
                              turn_timeout_s=180) as client:
            while True:
                try:
                    name, tool, i = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    sid = client.create_session(title=f"hostile {name}").id
                    events = list(client.turn(sid, plan_json=plan_for(name, tool, i),
                                              execute_only=True))
                    with lock:
                        results[i] = (name, events)
                except Exception as exc:  # noqa: BLE001 - reported below
                    with lock:
                        errors.append(f"{name}: {type(exc).__name__}: {exc}")

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    elapsed = time.monotonic() - started
    assert not any(t.is_alive() for t in threads), "a turn never ended"
    assert not errors, errors
    assert len(results) == index

    outcomes: dict[str, list[str]] = {}
    for i, (name, events) in sorted(results.items()):
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds and kinds[-1] == "done", (name, kinds[-12:])
        done = events[-1].done
        narration = "".join(e.narration.text for e in events if e.WhichOneof("event") == "narration")
        assert done.narration.strip() and narration.strip() == done.narration.strip(), name
        outcomes.setdefault(name, []).append(done.outcome + (" (fallback)" if done.fallback else ""))
        if name == "normal":
            assert not done.fallback and json.loads(done.state_json)[f"k{i}"] == "normal"

    # Nothing a skill started survives: the supervisor's count, its descendants (the
    # zygote excepted) and the members of its skill cgroups, and the children whose pids
    # fork-child and hang-with-child wrote down.
    deadline = time.monotonic() + 10
    while True:
        with daemon.client() as client:
            live = client.status().live_skill_processes
        leaked = leaked_processes(supervisor_pid)
        if (live == 0 and not leaked) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert live == 0 and not leaked, (live, leaked)
    pid_files = sorted(PID_DIR.glob(prefix + "*"))
    recorded = [int(p) for f in pid_files for p in f.read_text().split()]
    for f in pid_files:
        f.unlink()
    assert len(recorded) >= 2 * ROUNDS, [p.name for p in pid_files]
    deadline = time.monotonic() + 5
    while (alive := [p for p in recorded if process_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, f"children of skills outlived their invocation: {alive}"
    assert not fixture_processes()

    sampler.stop.set()
    sampler.join(5)
    # The daemon's memory stays bounded while output floods through it.
    summary = {n: (round(sampler.first.get(n, 0)), round(sampler.peak.get(n, 0)))
               for n in sorted(sampler.peak)}
    print(f"\nhostile load: {index} turns in {elapsed:.1f} s; outcomes {outcomes}; "
          f"RSS MB (first, peak) {summary}")
    for name, (first, peak) in summary.items():
        assert peak < RSS_BOUND_MB, summary
        assert peak - first < GROWTH_BOUND_MB, summary

    # And the daemon serves on, unhurt: same supervisor, every actor alive, a normal turn.
    with daemon.client() as client:
        after = client.status()
        assert {a.name for a in after.actors if a.alive} >= {
            "coordinator", "planner", "embedder", "store", "supervisor"}
        assert next(a.pid for a in after.actors if a.name == "supervisor") == supervisor_pid
        sid = client.create_session().id
        events = list(client.turn(sid, plan_json=plan_for("after", None, 0), execute_only=True))
        assert events[-1].WhichOneof("event") == "done" and not events[-1].done.fallback
