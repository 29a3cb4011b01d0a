"""`narratoria bench crash`: SIGKILL the whole daemon (Ray included) under a write load.

One data dir, ``cycles`` times over:

1. a daemon (``serve --planner pattern``, a small write skill of this bench's own) is
   up; ``writers`` client threads each create sessions and play execute-only turns of
   a fixed plan whose one tool writes the turn into the session state (two state
   patches: ``writes.tN = <random token>`` and ``lastTurn = N``). A turn counts as
   acknowledged when its ``done`` event reached the client (session, turn number,
   token);
2. at a random moment of the load the whole daemon is killed with SIGKILL: the
   ``serve`` process group and every Ray process it started (gcs_server, raylet,
   workers, agents: every process carrying this daemon's environment), all at once.
   Skill processes and the skill zygote are *not* killed by the bench: they must
   end by themselves. A few seconds later nothing of the daemon may be left
   (``survivors``); what is left is reported, then killed;
3. the daemon is started again on the same data dir (the restart time is measured
   from exec to its ready line) and every session ever acknowledged is checked:
   - every acknowledged turn is there: ``ResumeSession.turns >= N`` and GetState's
     ``writes.tN`` is the acknowledged token (else it is *lost*);
   - nothing is half-written: the turn count, the written keys ``t1..tT``,
     ``lastTurn`` and the last narration agree (a turn is all there or not at all);
     a turn stored but not acknowledged (in flight at the kill) is allowed and counted;
   - sessions resume: a few of the cycle's sessions play one more turn.

The restarted daemon carries the next cycle's load. Lost and half-written must be 0.
After a clean stop at the end, the database file itself is read: every saved turn has
exactly one scene memory and no memory is of a turn that was not saved (the two are
stored in one transaction).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narratoria.bench.daemon import ServeDaemon
from narratoria.bench.report import say

START_TIMEOUT_S = 180.0
SURVIVOR_GRACE_S = 5.0
RESUME_PER_CYCLE = 3
SKILL = "crashwrite"
ZYGOTE_MARK = "narratoria.runtime.skillrun.zygote import serve"  # the zygote and its forks
RAY_DIR = re.compile(r"/tmp/nr-ray-[A-Za-z0-9_]+")

WRITE_SCRIPT = """#!/usr/bin/env python3
# Writes turn N into the session state as two patches (a half-applied turn would show).
import json, sys
req = json.load(sys.stdin)
inp = req.get("input", {})
n = int(inp["turn"])
print(json.dumps({"version": "0", "type": "state_patch",
                  "patch": {"writes": {f"t{n}": inp["value"]}}}), flush=True)
print(json.dumps({"version": "0", "type": "state_patch", "patch": {"lastTurn": n}}), flush=True)
print(json.dumps({"version": "0", "type": "done", "ok": True, "summary": f"wrote t{n}"}),
      flush=True)
"""


def write_skill(root: Path) -> Path:
    """The bench's write skill under ``root`` (a --skills-dir); returns ``root``."""
    skill = root / SKILL
    (skill / "scripts").mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {SKILL}\ndescription: Crash bench only - writes the turn number into "
        "the session state.\n---\n# crashwrite\n")
    script = skill / "scripts" / "write"
    script.write_text(WRITE_SCRIPT)
    script.chmod(0o755)
    return root


def narrative(session_id: str, turn: int) -> str:
    return f"wrote turn {turn} of {session_id}"


def write_plan(session_id: str, turn: int, value: str) -> str:
    return json.dumps({
        "requestId": f"crash-{session_id[:8]}-{turn}", "narrative": narrative(session_id, turn),
        "tools": [{"toolId": "w", "toolPath": f"{SKILL}/write",
                   "input": {"turn": turn, "value": value}, "retryPolicy": {"maxRetries": 0}}]})


# ---------------------------------------------------------------- processes


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    stat = _read(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def marked_processes(marker: str) -> dict[int, str]:
    """Live processes whose environment has ``TMPDIR=marker``: the daemon, everything
    Ray started for it (they inherit its environment) and the skill processes (the
    supervisor passes TMPDIR on). pid -> command line."""
    want = f"TMPDIR={marker}".encode()
    me = os.getpid()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        if want in _read(pid, "environ").split(b"\0") and _alive(pid):
            found[pid] = _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")
    return found


def _is_skill(cmdline: str, skills_dir: Path) -> bool:
    """A skill invocation (exec'd from the skill folder or forked by the zygote), or the
    zygote itself: the daemon's crash must take these down without the bench's help."""
    return str(skills_dir) in cmdline or ZYGOTE_MARK in cmdline


def _kind(cmdline: str, skills_dir: Path) -> str:
    if ZYGOTE_MARK in cmdline:
        return "zygote or zygote fork"
    if str(skills_dir) in cmdline:
        return "skill"
    return "ray or daemon"


# ---------------------------------------------------------------- the daemon


def _sigkill(pids: list[int] | dict[int, str]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class CrashDaemon(ServeDaemon):
    """``narratoria serve --planner pattern`` on ``folder``'s socket and data dir, in its
    own session, with TMPDIR set to ``marker`` so that every process of it can be found."""

    start_timeout_s = START_TIMEOUT_S

    def __init__(self, folder: Path, skills_dir: Path, marker: Path,
                 extra: tuple[str, ...] = ()) -> None:
        self.skills_dir, self.marker = skills_dir, marker
        marker.mkdir(parents=True, exist_ok=True)
        super().__init__(folder, "--planner", "pattern", "--skills-dir", str(skills_dir), *extra,
                         env={**os.environ, "TMPDIR": str(marker)})

    def kill(self) -> dict[str, Any]:
        """SIGKILL the serve process group and every Ray process of this daemon at once;
        then wait for the rest (skills, zygote) to end by themselves. Returns what was
        killed and what survived (survivors are killed afterwards)."""
        procs = marked_processes(str(self.marker))
        ray_dirs = sorted({m for cmd in procs.values() for m in RAY_DIR.findall(cmd)})
        victims = [pid for pid, cmd in procs.items() if not _is_skill(cmd, self.skills_dir)]
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _sigkill(victims)
        # A worker Ray was starting at that instant: a second sweep.
        for _ in range(3):
            more = [pid for pid, cmd in marked_processes(str(self.marker)).items()
                    if not _is_skill(cmd, self.skills_dir)]
            _sigkill(more)
            if not more:
                break
            time.sleep(0.05)
        self.proc.wait()
        deadline = time.monotonic() + SURVIVOR_GRACE_S
        while (left := marked_processes(str(self.marker))) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [{"pid": pid, "kind": _kind(cmd, self.skills_dir), "cmdline": cmd[:200]}
                     for pid, cmd in sorted(left.items())]
        _sigkill(left)  # reported; cleaned up so that the next cycle starts clean
        left_dirs = [d for d in ray_dirs if Path(d).exists()]
        left_mb = sum(_du(Path(d)) for d in left_dirs) / 1e6
        for d in left_dirs:
            shutil.rmtree(d, ignore_errors=True)
        return {"killed": len(victims), "processes": len(procs), "survivors": survivors,
                "rayTempDirsLeft": len(left_dirs), "rayTempMbLeft": round(left_mb, 1)}

    def _kill(self) -> None:
        """A daemon that does not stop (or start) in time goes as a crash does: all of it."""
        self.kill()


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


# ---------------------------------------------------------------- load and checks


@dataclass
class Ledger:
    """What the clients saw acknowledged: session id -> {turn: token}."""
    acked: dict[str, dict[int, str]] = field(default_factory=dict)
    cycle_of: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def session(self, sid: str, cycle: int) -> None:
        with self.lock:
            self.acked.setdefault(sid, {})
            self.cycle_of[sid] = cycle

    def ack(self, sid: str, turn: int, value: str) -> None:
        with self.lock:
            self.acked[sid][turn] = value

    def count(self, cycle: int | None = None) -> int:
        with self.lock:
            return sum(len(t) for s, t in self.acked.items()
                       if cycle is None or self.cycle_of[s] == cycle)


def play_write(client: Any, ledger: Ledger, sid: str, turn: int, rng: random.Random) -> bool:
    """One write turn; True when its ``done`` came back (then it is in the ledger)."""
    value = f"{rng.getrandbits(64):016x}"
    done = None
    for event in client.turn(sid, plan_json=write_plan(sid, turn, value), execute_only=True):
        if event.WhichOneof("event") == "done":
            done = event.done
    if done is None:
        return False
    if done.turn_number != turn or done.fallback:
        with ledger.lock:  # the write tool failed, or the daemon numbered the turn otherwise
            ledger.anomalies.append(f"{sid}: turn {turn} acknowledged as {done.turn_number}"
                                    f"{' (fallback: the write failed)' if done.fallback else ''}")
    ledger.ack(sid, done.turn_number, value)
    return True


def _writer(address: str, ledger: Ledger, cycle: int, index: int, stop: threading.Event,
            seed: int, turns_per_session: int) -> None:
    from narratoria.clients.client import NarratoriaClient

    rng = random.Random(seed)
    try:
        with NarratoriaClient(address, timeout_s=30, turn_timeout_s=120) as client:
            while not stop.is_set():
                sid = client.create_session(title=f"crash c{cycle} w{index}").id
                ledger.session(sid, cycle)
                for turn in range(1, turns_per_session + 1):
                    if stop.is_set() or not play_write(client, ledger, sid, turn, rng):
                        return
    except Exception:  # noqa: BLE001 - the daemon was killed under it: expected
        return


def verify(client: Any, ledger: Ledger) -> dict[str, Any]:
    """Every acknowledged write present, nothing half-written, per session."""
    found = lost = half = unacked_stored = 0
    problems: list[str] = []
    with ledger.lock:
        snapshot = {s: dict(t) for s, t in ledger.acked.items()}
    for sid, turns in snapshot.items():
        try:
            session = client.resume_session(sid)
            state = client.get_state(sid)
        except Exception as exc:  # noqa: BLE001 - a missing session loses its writes
            lost += len(turns)
            problems.append(f"{sid}: {type(exc).__name__}: {exc}"[:300])
            continue
        count = state.turns
        tree = json.loads(state.state_json or "{}")
        writes = tree.get("writes", {}) or {}
        for turn, value in turns.items():
            if turn <= count and writes.get(f"t{turn}") == value:
                found += 1
            else:
                lost += 1
                problems.append(f"{sid}: acknowledged turn {turn} missing "
                                f"(turns {count}, written {writes.get(f't{turn}')!r})")
        # Consistency: turns, written keys, lastTurn and the narration tell one story.
        keys = {f"t{n}" for n in range(1, count + 1)}
        consistent = (session.turns == count and set(writes) == keys
                      and tree.get("lastTurn", 0) == count
                      and session.last_narration == (narrative(sid, count) if count else ""))
        if not consistent:
            half += 1
            problems.append(f"{sid}: inconsistent (resume turns {session.turns}, state turns "
                            f"{count}, keys {sorted(writes)}, lastTurn {tree.get('lastTurn')}, "
                            f"narration {session.last_narration!r})"[:400])
        unacked_stored += sum(1 for n in range(1, count + 1) if n not in turns)
    return {"sessions": len(snapshot), "found": found, "lost": lost, "halfWritten": half,
            "storedUnacknowledged": unacked_stored, "problems": problems[:20]}


def memory_check(db_path: Path) -> dict[str, int]:
    """Scene memories against saved turns, read from the database file once the daemon
    has stopped: each saved turn N of a session has exactly one scene memory tagged
    ``scene:N``, and no memory names a turn that was not saved (a crash between the two
    writes would leave one or the other)."""
    from narratoria.runtime.db import connect
    from narratoria.runtime.sessions.store import SCHEMA as SESSIONS
    from narratoria.runtime.store.schema import SCHEMA as STORE

    con = connect(db_path, read_only=True)
    try:
        turns = con.execute(f"SELECT id, turns FROM {SESSIONS}.sessions").fetchall()
        tags = con.execute(
            f"SELECT session_id, tag FROM {STORE}.memory_events, unnest(semantic_tags) AS t(tag) "
            "WHERE action_type = 'scene' AND tag LIKE 'scene:%'").fetchall()
    finally:
        con.close()
    remembered: dict[str, list[int]] = {}
    for session_id, tag in tags:
        remembered.setdefault(session_id, []).append(int(tag.split(":", 1)[1]))
    phantom = missing = doubled = 0
    for session_id, saved in turns:
        scenes = remembered.pop(session_id, [])
        phantom += sum(1 for n in scenes if n > saved)
        missing += sum(1 for n in range(1, saved + 1) if n not in scenes)
        doubled += len(scenes) - len(set(scenes))
    return {"turns": sum(t for _, t in turns), "memories": len(tags),
            "memoriesOfUnsavedTurns": phantom + sum(len(v) for v in remembered.values()),
            "turnsWithoutMemory": missing, "doubledMemories": doubled}


def resume_some(client: Any, ledger: Ledger, cycle: int, rng: random.Random) -> tuple[int, int]:
    """Play one more write turn on up to RESUME_PER_CYCLE of the cycle's sessions."""
    with ledger.lock:
        sids = [s for s, c in ledger.cycle_of.items() if c == cycle]
    tried = ok = 0
    for sid in rng.sample(sids, min(RESUME_PER_CYCLE, len(sids))):
        tried += 1
        try:
            turn = client.get_state(sid).turns + 1
            ok += play_write(client, ledger, sid, turn, rng)
        except Exception as exc:  # noqa: BLE001 - counted
            with ledger.lock:
                ledger.anomalies.append(f"{sid}: resume failed: {type(exc).__name__}: {exc}"[:300])
    return tried, ok


def run_crash_bench(cycles: int = 20, writers: int = 4, progress: bool = True, seed: int | None = None,
                    kill_after_s: tuple[float, float] = (0.5, 4.0),
                    turns_per_session: int = 8, keep: Path | None = None) -> dict[str, Any]:
    """See the module docstring. ``kill_after_s``: the kill comes this long (uniform)
    after the cycle's first acknowledged write."""
    from narratoria.clients.client import NarratoriaClient

    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="nc-", dir="/tmp"))
    skills = write_skill(tmp / "skills")
    marker = tmp / "t"
    ledger = Ledger()
    per_cycle: list[dict[str, Any]] = []
    restart_s: list[float] = []
    started = time.monotonic()
    clean_stop = None
    say(progress, f"starting the daemon in {tmp} (seed {seed})")
    daemon = CrashDaemon(tmp, skills, marker)
    first_start_s = daemon.start_s
    try:
        for cycle in range(1, cycles + 1):
            stop = threading.Event()
            threads = [threading.Thread(target=_writer, daemon=True, args=(
                daemon.address, ledger, cycle, i, stop, rng.randrange(1 << 30), turns_per_session))
                for i in range(writers)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 60
            while ledger.count(cycle) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            delay = rng.uniform(*kill_after_s)
            time.sleep(delay)
            acked_at_kill = ledger.count(cycle)
            killed = daemon.kill()
            stop.set()
            for t in threads:
                t.join(60)
            acked = ledger.count(cycle)  # acks already on the wire at the kill included
            daemon = CrashDaemon(tmp, skills, marker)
            restart_s.append(daemon.start_s)
            with NarratoriaClient(daemon.address, timeout_s=60, turn_timeout_s=120) as client:
                cycle_sessions = {s for s, c in ledger.cycle_of.items() if c == cycle}
                checked = verify(client, ledger)
                mine = verify(client, _only(ledger, cycle_sessions))
                tried, resumed = resume_some(client, ledger, cycle, rng)
            row = {"cycle": cycle, "killAfterS": round(delay, 2), "ackedAtKill": acked_at_kill,
                   "acknowledged": acked, "found": mine["found"], "lost": mine["lost"],
                   "halfWritten": mine["halfWritten"],
                   "storedUnacknowledged": mine["storedUnacknowledged"],
                   "sessions": len(cycle_sessions), "allSessionsLost": checked["lost"],
                   "allSessionsHalfWritten": checked["halfWritten"],
                   "problems": checked["problems"], "resumeTried": tried, "resumed": resumed,
                   "processesKilled": killed["killed"], "survivors": killed["survivors"],
                   "rayTempDirsLeft": killed["rayTempDirsLeft"],
                   "rayTempMbLeft": killed["rayTempMbLeft"],
                   "restartS": round(daemon.start_s, 2),
                   "restartStartupS": daemon.ready.get("startupS")}
            per_cycle.append(row)
            say(progress, f"cycle {cycle}/{cycles}: killed after {delay:.2f} s "
                          f"({killed['killed']} processes), acknowledged {acked}, found "
                          f"{mine['found']}, lost {mine['lost']}, half-written "
                          f"{mine['halfWritten']}, in flight but stored "
                          f"{mine['storedUnacknowledged']}, survivors {len(killed['survivors'])}, "
                          f"resumed {resumed}/{tried}, restart {daemon.start_s:.1f} s")
        with NarratoriaClient(daemon.address, timeout_s=60) as client:
            final = verify(client, ledger)
    finally:
        clean_stop = daemon.stop()
        from narratoria.runtime.db import DB_FILENAME

        memories = memory_check(tmp / "data" / DB_FILENAME) if clean_stop == 0 else None
        leftover = marked_processes(str(marker))
        _sigkill(leftover)
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    from narratoria.bench.report import machine

    totals = {k: sum(r[k] for r in per_cycle) for k in
              ("acknowledged", "found", "lost", "halfWritten", "storedUnacknowledged",
               "resumeTried", "resumed", "rayTempDirsLeft")}
    survivors = [s for r in per_cycle for s in r["survivors"]]
    report = {
        "machine": machine(), "seed": seed, "cycles": len(per_cycle), "writers": writers,
        "turnsPerSession": turns_per_session, "killAfterS": list(kill_after_s),
        **totals,
        "sessions": final["sessions"],
        "finalCheck": {k: final[k] for k in ("found", "lost", "halfWritten", "problems")},
        "survivors": len(survivors), "survivorKinds": sorted({s["kind"] for s in survivors}),
        "anomalies": ledger.anomalies[:20],
        "firstStartS": round(first_start_s, 2),
        "restartMedianS": round(statistics.median(restart_s), 2) if restart_s else None,
        "restartMaxS": round(max(restart_s), 2) if restart_s else None,
        "rayTempMbLeftPerCrash": round(statistics.median(
            [r["rayTempMbLeft"] for r in per_cycle]), 1) if per_cycle else None,
        "cleanStopExit": clean_stop, "leftAfterCleanStop": len(leftover),
        "sceneMemories": memories,
        "wallS": round(time.monotonic() - started, 1),
        "perCycle": per_cycle,
    }
    ok = (report["lost"] == 0 and report["halfWritten"] == 0 and final["lost"] == 0
          and final["halfWritten"] == 0 and not survivors and report["resumed"] == report["resumeTried"]
          and not ledger.anomalies and memories is not None
          and memories["memoriesOfUnsavedTurns"] == memories["turnsWithoutMemory"]
          == memories["doubledMemories"] == 0)
    report["passed"] = ok
    report["summary"] = [
        f"{report['cycles']} SIGKILL cycles of the whole daemon (serve + Ray), {writers} writers: "
        f"{report['acknowledged']} writes acknowledged, {report['found']} found after restart, "
        f"lost {report['lost']}, half-written {report['halfWritten']} "
        f"({report['storedUnacknowledged']} in flight at the kill were stored too)",
        f"final check of all {final['sessions']} sessions: found {final['found']}, lost "
        f"{final['lost']}, half-written {final['halfWritten']}",
        f"sessions resumed {report['resumed']}/{report['resumeTried']}; processes surviving "
        f"the kill {len(survivors)}; restart median {report['restartMedianS']} s "
        f"(max {report['restartMaxS']} s, first start {report['firstStartS']} s)",
        f"scene memories: {memories['memories']} for {memories['turns']} saved turns; of "
        f"unsaved turns {memories['memoriesOfUnsavedTurns']}, turns without one "
        f"{memories['turnsWithoutMemory']}, doubled {memories['doubledMemories']}"
        if memories else "scene memories: not checked (the daemon did not stop cleanly)",
        f"Ray temp dirs left per crash: {report['rayTempDirsLeft']} in all, median "
        f"{report['rayTempMbLeftPerCrash']} MB each (removed by the bench); clean stop exit "
        f"{clean_stop} — {'PASS' if ok else 'FAIL'}",
    ]
    return report


def _only(ledger: Ledger, sessions: set[str]) -> Ledger:
    part = Ledger()
    with ledger.lock:
        part.acked = {s: dict(t) for s, t in ledger.acked.items() if s in sessions}
        part.cycle_of = {s: c for s, c in ledger.cycle_of.items() if s in sessions}
    return part


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    lines = [f"\n## crash — {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n", f"- command: `{command}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
             f"- {report['cycles']} cycles on one data dir: {report['writers']} writer clients "
             "play execute-only write turns (a fixed plan whose tool writes `writes.tN` and "
             "`lastTurn` into the state); at a random moment "
             f"({report['killAfterS'][0]}–{report['killAfterS'][1]} s after the cycle's first "
             "acknowledged write) the serve process group and every Ray process of the daemon "
             "get SIGKILL at once; skills and the zygote must die by themselves; restart on the "
             "same data dir; every acknowledged write (a `done` the client received) checked "
             "with ResumeSession + GetState; a few sessions play on",
             f"- seed {report['seed']}, wall {report['wallS']} s\n",
             "| writes acknowledged | writes found | lost | half-written | stored, unacknowledged "
             "| sessions resumed | survivors | restart median s | restart max s |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| {report['acknowledged']} | {report['found']} | {report['lost']} | "
             f"{report['halfWritten']} | {report['storedUnacknowledged']} | "
             f"{report['resumed']}/{report['resumeTried']} | {report['survivors']} | "
             f"{report['restartMedianS']} | {report['restartMaxS']} |",
             "", *report["summary"]]
    with path.open("a") as fh:
        fh.write("\n".join(lines) + "\n")


__all__ = ["CrashDaemon", "marked_processes", "run_crash_bench", "write_markdown"]

if __name__ == "__main__":  # pragma: no cover - use `narratoria bench crash`
    print(json.dumps(run_crash_bench(cycles=int(sys.argv[1]) if len(sys.argv) > 1 else 2),
                     indent=2))
