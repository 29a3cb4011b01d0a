"""The load tester (`narratoria loadtest`, ``clients/commands/loadtest.py``): drive a
daemon with N concurrent sessions.

Each client is a thread with its own channel and its own session, playing M turns:
free-text turns planned by the daemon's planner (the prompts of ``bench turn``), or,
with ``--plan PLAN.json``, that fixed plan run ``execute_only`` (skills alone, no
model). What it reports:

- turns/s, and latency p50/p95/p99 of the whole turn (as the client saw it) and of
  each phase the coordinator timed (``TurnDone.timings_ms``: plan, execute,
  narrate, choices, store, total);
- skill invocations (``tool_finished`` events) per second, their duration and
  their queue wait (``queue_ms``: the wait for one of the supervisor's process
  slots, measured by the daemon per invocation and part of the duration); the queue
  depth is sampled from Status too (max and mean);
- failures by category: ``grpc:<CODE>`` (a refused or broken turn), ``noDone`` (a
  stream that ended without its done event), ``fallback`` (fallback events),
  ``toolFailed`` (tool_finished with ok false), ``errorEvent`` (a tool's protocol
  "error" event or an error log line);
- the supervisor's limits under load: Status is sampled every ~0.2 s for the live
  skill processes; their peak (sampled, and the daemon's own exact peak) must never
  exceed the limit. ``--skill-concurrency K`` is that limit, the daemon's
  ``serve --skill-limit`` (there is no per-call setting): passed on when the
  loadtest starts the daemon, else compared with the running daemon's;
- fairness: each client's median turn time (max/min) and the slowest single turn, so
  a session starved by the others shows; ``--flood F --flood-plan PLAN.json`` adds F
  sessions playing a heavy plan over and over while the N clients are measured;
- leaked processes, which must be 0: after the run the supervisor's live count must
  drop to 0, and /proc is scanned (when the daemon runs on this machine) by ancestry
  and cgroup, never by environment (a forked child need not carry any marker): the
  supervisor's descendants (the zygote itself excepted), the members of its skills'
  cgroups (``runtime/skillrun/containment.py``) wherever they were reparented, and, for a daemon
  the loadtest started, every orphan that left the daemon's process tree: the loadtest
  is the child subreaper of that tree, so orphans are reparented to it, not to init.

Every session the run opens is ended when it is over, however it ends (done, failed
or interrupted): a loadtest's sessions never stay in the user's ``session list``.

Progress goes to stderr; ``--json`` prints one final document.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from narratoria.bench.report import pct, say
from narratoria.bench.turn import PROMPTS

PHASES = ("plan", "execute", "narrate", "choices", "store", "total")
STATUS_INTERVAL_S = 0.2
LEAK_GRACE_S = 5.0
ZYGOTE_MARK = b"narratoria.runtime.skillrun.zygote import serve; serve()"


# -- figures ---------------------------------------------------------------------------

def _dist(values: list[float], digits: int = 1) -> dict[str, Any]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    return {"n": len(values), "p50": round(statistics.median(values), digits),
            "p95": round(pct(values, 0.95), digits), "p99": round(pct(values, 0.99), digits),
            "max": round(max(values), digits)}


class _Tally:
    """What the clients saw, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turn_ms: list[float] = []
        self.per_client: dict[int, list[float]] = {}
        self.phases: dict[str, list[float]] = {}
        self.tool_ms: list[float] = []
        self.queue_ms: list[float] = []
        self.tools_failed = 0
        self.failures: dict[str, int] = {}
        self.turns_ok = 0
        self.turns_done = 0  # finished one way or another

    def fail(self, category: str, n: int = 1) -> None:
        with self.lock:
            self.failures[category] = self.failures.get(category, 0) + n


class _Worker(threading.Thread):
    """A daemon thread whose end is an event, so that waiting for it survives a Ctrl-C:
    Python 3.11's ``Thread.join``, interrupted by KeyboardInterrupt while the thread
    runs, marks the thread stopped (the bpo-45274 fix), and ``is_alive()`` is False from
    then on though it plays on (seen: a client thread left inside a turn's stream)."""

    def __init__(self, name: str, target: Callable[..., None] | None = None,
                 args: tuple[Any, ...] = ()) -> None:
        super().__init__(name=name, daemon=True)
        self._work, self._work_args = target, args
        self.launched = False
        self.ended = threading.Event()

    def start(self) -> None:
        self.launched = True  # before start() waits: an interrupt there still ends it
        super().start()

    def run(self) -> None:
        try:
            self.work()
        finally:
            self.ended.set()

    def work(self) -> None:
        if self._work is not None:
            self._work(*self._work_args)


class _Sampler(_Worker):
    """Status every ``interval`` s: live skill processes, queue depth, limit; progress."""

    def __init__(self, client_factory: Callable[[], Any], tally: _Tally, total: int | None,
                 interval: float, progress: bool) -> None:
        super().__init__("loadtest-sampler")
        self.factory, self.tally, self.total = client_factory, tally, total
        self.interval, self.progress = interval, progress
        self.stop = threading.Event()
        self.live: list[int] = []
        self.depth: list[int] = []
        self.limit = 0
        self.daemon_peak = 0
        self.errors = 0
        self.started = time.perf_counter()

    def work(self) -> None:
        last_say = 0.0
        with self.factory() as client:
            while not self.stop.is_set():
                try:
                    st = client.status()
                    self.live.append(st.live_skill_processes)
                    self.depth.append(st.skill_queue_depth)
                    self.limit = st.skill_process_limit
                    self.daemon_peak = max(self.daemon_peak, st.peak_skill_processes)
                except Exception:  # noqa: BLE001 - a busy daemon may miss a sample
                    self.errors += 1
                now = time.perf_counter()
                if self.progress and now - last_say >= 1.0:
                    last_say = now
                    self._say(now)
                self.stop.wait(self.interval)

    def _say(self, now: float) -> None:
        t = self.tally
        with t.lock:
            done, failed = t.turns_done, sum(t.failures.values())
        total = f"/{self.total}" if self.total else ""
        live = f"{self.live[-1]}/{self.limit}" if self.live else "?"
        queue = self.depth[-1] if self.depth else "?"
        rate = done / max(now - self.started, 1e-9)
        say(True, f"turns {done}{total}, {rate:.2f} turns/s, skill processes {live}, "
                  f"queue {queue}, failures {failed}")


END_WAIT_S = 30.0  # a client's session end in flight, waited for when the run ends


class _Sessions:
    """The sessions a run opened, to end when it is over. Each client ends its own when
    it stops; ``end_all`` ends what is left (a run that failed or was interrupted) and
    turns away any session opened after it (a client still starting), and waits for the
    ends a client has begun: an interrupted run exits when they are done, not before."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)
        self.open: set[str] = set()
        self.opened = 0
        self.not_ended = 0
        self.errors: list[str] = []  # why, for each session not ended
        self.ending = 0   # ends a client thread has begun and not finished
        self.closed = False

    def add(self, client: Any, sid: str) -> bool:
        """Keep ``sid`` to end later; False (and ended now) once the run is over."""
        with self.lock:
            self.opened += 1
            if not self.closed:
                self.open.add(sid)
                return True
        self._end(client, sid)
        return False

    def end(self, client: Any, sid: str) -> None:
        with self.lock:
            if sid not in self.open:
                return
            self.open.discard(sid)
            self.ending += 1
        try:
            self._end(client, sid)
        finally:
            with self.lock:
                self.ending -= 1
                self.settled.notify_all()

    def end_all(self, client_factory: Callable[[], Any]) -> None:
        with self.lock:
            self.closed = True
            left = sorted(self.open)
            self.open.clear()
            # A client's own end in flight: the run (its threads are daemons) must not
            # exit under it and leave that session open.
            self.settled.wait_for(lambda: self.ending == 0, timeout=END_WAIT_S)
        if not left:
            return
        try:
            with client_factory() as client:
                for sid in left:
                    self._end(client, sid)
        except Exception as exc:  # noqa: BLE001 - no daemon to end them in: counted, reported
            with self.lock:
                self.not_ended += len(left)
                self.errors.append(f"{len(left)} sessions: {exc}")
        if self.errors:  # said here too: an interrupted run prints no report
            print(f"loadtest: {self.not_ended} sessions could not be ended "
                  f"(`narratoria session end ID`): {'; '.join(self.errors[:3])}", file=sys.stderr)

    def _end(self, client: Any, sid: str) -> None:
        # A turn still in flight (an interrupted run) does not stop the end: the daemon
        # lets it finish and starts no other.
        try:
            client.end_session(sid)
        except Exception as exc:  # noqa: BLE001 - counted, reported
            with self.lock:
                self.not_ended += 1
                self.errors.append(f"{sid}: {exc}")


# -- leaks -----------------------------------------------------------------------------

def proc_table() -> dict[int, tuple[int, bool]]:
    """pid -> (parent pid, alive); zombies count as dead."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry.name)] = (int(fields[1]), fields[0] != "Z")
    return table


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def leaked_processes(supervisor_pid: int, adopter: int | None = None,
                     keep: Iterable[int] = ()) -> list[dict[str, Any]]:
    """Live processes skills left, found by ancestry and cgroup: descendants of the
    supervisor (its zygote excepted, not the zygote's children), members of the
    supervisor's skill cgroups, and, with ``adopter`` (the child subreaper of the
    daemon's whole process tree), the adopter's children but ``keep`` (the daemon
    itself) and their descendants: orphans that left the daemon's tree."""
    from narratoria.runtime.skillrun.containment import base_folders, processes_in

    table = proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}

    def walk(roots: Iterable[int], why: str, skip_zygote: bool = False) -> None:
        stack = list(roots)
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, []))
            if skip_zygote and table.get(pid, (0,))[0] == supervisor_pid \
                    and ZYGOTE_MARK in _read(pid, "cmdline"):
                continue  # the zygote itself; its children are still walked
            if table.get(pid, (0, False))[1]:
                found.setdefault(pid, why)

    if supervisor_pid > 0:
        walk(children.get(supervisor_pid, []), "under the supervisor", skip_zygote=True)
        members = set().union(*(processes_in(f) for f in base_folders(supervisor_pid)))
        walk(sorted(members - set(found)), "in a skill cgroup")
    if adopter is not None:
        keep = set(keep)
        walk([p for p in children.get(adopter, []) if p not in keep],
             "orphan (reparented to the loadtest)")
    found.pop(os.getpid(), None)
    return [{"pid": pid, "why": why,
             "cmdline": _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")[:200]}
            for pid, why in sorted(found.items())]


def _check_leaks(client_factory: Callable[[], Any], grace_s: float,
                 adopter: int | None = None, keep: Iterable[int] = ()) -> dict[str, Any]:
    """After the run: the supervisor's live count reaches 0, and no process is left."""
    deadline = time.monotonic() + grace_s
    keep = set(keep)
    with client_factory() as client:
        while True:
            st = client.status()
            sup = next((a for a in st.actors if a.name == "supervisor"), None)
            pid = sup.pid if sup is not None else 0
            scan = bool(pid) and Path(f"/proc/{pid}").exists()
            procs = leaked_processes(pid, adopter, keep) if scan else []
            if (st.live_skill_processes == 0 and not procs) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    return {"count": max(st.live_skill_processes, len(procs)),
            "statusLive": st.live_skill_processes, "procScan": scan,
            "orphanScan": scan and adopter is not None, "processes": procs}


# -- the run ---------------------------------------------------------------------------

def _play_turn(client: Any, sid: str, i: int, t: int, plan_json: str | None,
               tally: _Tally) -> None:
    t0 = time.perf_counter()
    timings: dict[str, int] = {}
    done = False
    tools: list[float] = []
    queued: list[float] = []
    tool_failed = fallbacks = errors = 0
    try:
        if plan_json is not None:
            events = client.turn(sid, plan_json=plan_json, execute_only=True)
        else:
            events = client.turn(sid, text=PROMPTS[(i + t) % len(PROMPTS)])
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "tool_finished":
                tools.append(float(event.tool_finished.duration_ms))
                queued.append(float(event.tool_finished.queue_ms))
                tool_failed += not event.tool_finished.ok
            elif kind == "fallback":
                fallbacks += 1
            elif kind == "tool_event" and event.tool_event.type == "error":
                errors += 1
            elif kind == "log" and event.log.level == "error":
                errors += 1
            elif kind == "done":
                done = True
                timings = dict(event.done.timings_ms)
                if event.done.fallback and not fallbacks:
                    fallbacks = 1  # a fallback turn that sent no fallback event
    except Exception as exc:  # noqa: BLE001 - counted by category, reported
        code = getattr(exc, "code", None)
        tally.fail(f"grpc:{code}" if isinstance(code, str) else f"exception:{type(exc).__name__}")
    else:
        if not done:
            tally.fail("noDone")
    wall = (time.perf_counter() - t0) * 1000
    with tally.lock:
        tally.turns_done += 1
        tally.tool_ms.extend(tools)
        tally.queue_ms.extend(queued)
        tally.tools_failed += tool_failed
        for category, n in (("toolFailed", tool_failed), ("fallback", fallbacks),
                            ("errorEvent", errors)):
            if n:
                tally.failures[category] = tally.failures.get(category, 0) + n
        if done:
            tally.turns_ok += 1
            tally.turn_ms.append(wall)
            tally.per_client.setdefault(i, []).append(wall)
            for phase, ms in timings.items():
                tally.phases.setdefault(phase, []).append(float(ms))


JOIN_POLL_S = 0.2
STOP_WAIT_S = 30.0  # for the clients' turns in flight when a run is over


def _join(thread: _Worker) -> None:
    """Wait for ``thread`` in steps a Ctrl-C interrupts: the kernel may hand SIGINT to
    any thread (gRPC's among them), and then an untimed wait in the main thread does not
    wake to raise KeyboardInterrupt until the thread ends."""
    _join_all((thread,), float("inf"))


def _join_all(threads: Iterable[_Worker], timeout_s: float) -> None:
    """Wait for each started thread, all within ``timeout_s`` (a stuck one is left to
    the exit)."""
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        while thread.launched and not thread.ended.wait(JOIN_POLL_S) \
                and time.monotonic() < deadline:
            pass


def run_loadtest(client_factory: Callable[[], Any], clients: int, turns: int | None,
                 plan: dict[str, Any] | str | None = None, duration_s: float | None = None,
                 progress: bool = True, *, skill_concurrency: int | None = None,
                 status_interval_s: float = STATUS_INTERVAL_S,
                 leak_grace_s: float = LEAK_GRACE_S,
                 flood_plan: dict[str, Any] | str | None = None,
                 flood_clients: int = 0, adopter: int | None = None,
                 keep: Iterable[int] = ()) -> dict[str, Any]:
    """N clients (threads, each its own channel and session) playing ``turns`` turns each,
    or until ``duration_s`` has passed (whichever comes first when both are given).

    ``client_factory()`` returns a new NarratoriaClient (a context manager). ``plan``: a
    Plan JSON document (dict or text) run execute_only instead of text turns.
    ``flood_clients`` more sessions play ``flood_plan`` (execute_only) over and over
    while the N measured clients play: the measured figures then show whether their
    turns are starved by the flood (the report's ``flood`` says what it ran).
    ``adopter``/``keep``: this process is the child subreaper of the daemon's tree (it
    started the daemon, ``keep``), so the leak scan finds orphans reparented to it.
    """
    if turns is None and duration_s is None:
        raise ValueError("give turns, duration_s or both")
    if flood_clients and flood_plan is None:
        raise ValueError("flood_clients needs a flood_plan")
    plan_json = json.dumps(plan) if isinstance(plan, dict) else plan
    flood_json = json.dumps(flood_plan) if isinstance(flood_plan, dict) else flood_plan
    tally = _Tally()
    flood_tally = _Tally()
    flood_stop = threading.Event()
    stop = threading.Event()  # the run is over: no client starts another turn
    total = clients * turns if turns is not None and duration_s is None else None
    sampler = _Sampler(client_factory, tally, total, status_interval_s, progress)
    start_gate = threading.Barrier(clients + flood_clients + 1)
    deadline: list[float] = []
    sessions = _Sessions()

    def through_gate() -> bool:
        """False when the run stopped before it started (the gate was broken)."""
        try:
            start_gate.wait()
            return True
        except threading.BrokenBarrierError:
            return False

    def open_session(client: Any, title: str, into: Any) -> str | None:
        """A new session's id, or None with the failure counted (every thread still
        reaches the start gate, or the others would wait for it forever)."""
        try:
            sid = client.create_session(title=title).id
        except Exception as exc:  # noqa: BLE001
            code = getattr(exc, "code", None)
            into.fail(f"grpc:{code}" if isinstance(code, str) else
                      f"exception:{type(exc).__name__}")
            through_gate()
            return None
        return sid if sessions.add(client, sid) else None

    def flooder(i: int) -> None:
        with client_factory() as client:
            sid = open_session(client, f"loadtest flood {i}", flood_tally)
            if sid is None:
                return
            try:
                if not through_gate():
                    return
                t = 0
                while not flood_stop.is_set() and not stop.is_set():
                    _play_turn(client, sid, i, t, flood_json, flood_tally)
                    t += 1
            finally:
                sessions.end(client, sid)

    def player(i: int) -> None:
        with client_factory() as client:
            sid = open_session(client, f"loadtest {i}", tally)
            if sid is None:
                return
            try:
                if not through_gate():  # every session exists before the first turn
                    return
                t = 0
                while (turns is None or t < turns) and not stop.is_set() and (
                        not deadline or time.perf_counter() < deadline[0]):
                    _play_turn(client, sid, i, t, plan_json, tally)
                    t += 1
            finally:
                sessions.end(client, sid)

    threads = [_Worker(f"loadtest-client-{i}", player, (i,)) for i in range(clients)]
    flooders = [_Worker(f"loadtest-flood-{i}", flooder, (i,)) for i in range(flood_clients)]
    try:
        for th in threads + flooders:
            th.start()
        start_gate.wait()
        started = time.perf_counter()
        if duration_s is not None:
            deadline.append(started + duration_s)
        sampler.started = started
        sampler.start()
        for th in threads:
            _join(th)
        elapsed = time.perf_counter() - started
        with flood_tally.lock:
            flood_during = flood_tally.turns_done  # flood turns finished while the clients played
        flood_stop.set()
        for th in flooders:
            _join(th)  # each finishes the turn it is in
        sampler.stop.set()
        _join(sampler)
    finally:
        # However the run ends (an interrupt, a failure), its sessions end with it.
        stop.set()
        flood_stop.set()
        sampler.stop.set()
        start_gate.abort()  # clients still waiting to start leave
        sessions.end_all(client_factory)
        # Each client finishes the turn it is in and closes its channel: an interrupted
        # run does not exit with threads inside gRPC calls (the interpreter's exit can
        # wait on them for ever).
        _join_all([*threads, *flooders, sampler], STOP_WAIT_S)
    leaks = _check_leaks(client_factory, leak_grace_s, adopter, keep)
    with client_factory() as client:
        final = client.status()
    limit = final.skill_process_limit or sampler.limit
    peak = max(sampler.live, default=0)  # this run's, as sampled
    # The daemon's own peak is exact but counts since it started (other runs too): an
    # upper bound on this run's, so the limit check uses both.
    daemon_peak = max(sampler.daemon_peak, final.peak_skill_processes)
    invocations = len(tally.tool_ms)
    depth_mean = statistics.fmean(sampler.depth) if sampler.depth else 0.0
    rate = invocations / elapsed if elapsed else 0.0
    # Little's law wants every arrival at the queue, the flood's too.
    all_rate = (invocations + len(flood_tally.tool_ms)) / elapsed if elapsed else 0.0
    flood_errors = sum(n for c, n in flood_tally.failures.items()
                       if c.startswith(("grpc:", "exception:")) or c == "noDone")
    medians = [statistics.median(v) for v in tally.per_client.values() if v]
    worst = [max(v) for v in tally.per_client.values() if v]
    errors = sum(n for c, n in tally.failures.items() if c.startswith(("grpc:", "exception:"))
                 or c == "noDone")
    report: dict[str, Any] = {
        "mode": "plan" if plan_json is not None else "text",
        "clients": clients, "turnsPerClient": turns, "durationS": duration_s,
        "turns": tally.turns_done, "turnsOk": tally.turns_ok,
        "elapsedS": round(elapsed, 3),
        "turnsPerS": round(tally.turns_ok / elapsed, 4) if elapsed else 0.0,
        # ms: "turn" as the client saw it, the rest as the coordinator timed them.
        "latencyMs": {"turn": _dist(tally.turn_ms),
                      **{p: _dist(tally.phases[p]) for p in PHASES if p in tally.phases}},
        "skills": {
            "invocations": invocations, "failed": tally.tools_failed,
            "perS": round(rate, 3),
            "durationMs": _dist(tally.tool_ms),  # includes the wait for a process slot
            "queueWaitMs": _dist(tally.queue_ms),   # that wait, as the daemon measured it
            "limit": limit, "requestedConcurrency": skill_concurrency,
            "peakLive": peak, "peakLiveDaemon": daemon_peak,
            "limitHeld": bool(limit) and max(peak, daemon_peak) <= limit,
            "statusSamples": len(sampler.live), "statusErrors": sampler.errors,
            "queue": {"depthMax": max(sampler.depth, default=0),
                      "depthMean": round(depth_mean, 3),
                      # Little's law (mean wait = mean queue length / arrival rate): a
                      # cross-check of queueWaitMs from the sampled depth.
                      "estimatedWaitMs": round(depth_mean / all_rate * 1000, 1) if all_rate else None},
        },
        "failures": {"total": sum(tally.failures.values()), "turnErrors": errors,
                     "byCategory": dict(sorted(tally.failures.items()))},
        "fairness": {"clientTurnP50MsMin": round(min(medians), 1) if medians else None,
                     "clientTurnP50MsMax": round(max(medians), 1) if medians else None,
                     "ratio": round(max(medians) / min(medians), 3) if medians and min(medians)
                     else None,
                     # the slowest single turn of the most delayed client: a starved turn
                     "clientTurnMaxMs": round(max(worst), 1) if worst else None},
        "leaked": leaks,
        # every session the run opened is ended when it is over
        "sessions": {"opened": sessions.opened, "notEnded": sessions.not_ended},
        "flood": {"clients": flood_clients, "turns": flood_tally.turns_done,
                  "turnsWhileMeasured": flood_during, "turnsOk": flood_tally.turns_ok,
                  "invocations": len(flood_tally.tool_ms),
                  "turnMs": _dist(flood_tally.turn_ms),
                  "failures": dict(sorted(flood_tally.failures.items()))}
        if flood_clients else None,
    }
    report["ok"] = (errors == 0 and flood_errors == 0 and leaks["count"] == 0
                    and report["skills"]["limitHeld"] and tally.turns_ok > 0)
    report["summary"] = summary(report)
    return report


def summary(r: dict[str, Any]) -> list[str]:
    lat, sk = r["latencyMs"], r["skills"]
    phases = ", ".join(f"{p} {lat[p]['p50']}/{lat[p]['p95']}/{lat[p]['p99']}"
                       for p in ("plan", "execute", "narrate") if p in lat)
    return [
        f"{r['clients']} clients, {r['mode']} turns: {r['turnsOk']}/{r['turns']} ok in "
        f"{r['elapsedS']} s, {r['turnsPerS']} turns/s",
        f"turn ms p50/p95/p99 {lat['turn']['p50']}/{lat['turn']['p95']}/{lat['turn']['p99']}"
        + (f"; {phases}" if phases else ""),
        f"skills: {sk['invocations']} invocations, {sk['perS']}/s, duration p50 "
        f"{sk['durationMs']['p50']} ms, queue wait p50/p95 {sk['queueWaitMs']['p50']}/"
        f"{sk['queueWaitMs']['p95']} ms (max depth {sk['queue']['depthMax']}), "
        f"peak live {sk['peakLive']}/{sk['limit']} "
        f"(daemon's since start {sk['peakLiveDaemon']}; {'held' if sk['limitHeld'] else 'EXCEEDED'})",
        f"failures {r['failures']['total']} {r['failures']['byCategory'] or ''}".rstrip()
        + f"; fairness ratio {r['fairness']['ratio']}; leaked {r['leaked']['count']}"
        + ("" if r["leaked"]["procScan"] else " (supervisor count only, no /proc scan)")
        + (" (orphans outside the daemon's cgroups unseen: not a daemon it started)"
           if r["leaked"]["procScan"] and not r["leaked"].get("orphanScan") else ""),
        *([f"{r['sessions']['notEnded']} of its {r['sessions']['opened']} sessions could not be "
           "ended: `narratoria session end ID`"] if r.get("sessions", {}).get("notEnded") else []),
        *([f"flood: {r['flood']['clients']} sessions, {r['flood']['turns']} turns "
           f"({r['flood']['turnsWhileMeasured']} finished while the clients played), "
           f"{r['flood']['invocations']} invocations, turn p50 {r['flood']['turnMs']['p50']} ms, "
           f"failures {r['flood']['failures'] or 0}"] if r.get("flood") else []),
    ]


# -- the daemon it drives ----------------------------------------------------------------

def adopt_orphans(progress: bool) -> int | None:
    """Make this process the child subreaper of the daemon it is about to start, so a
    process that leaves the daemon's tree is reparented here and the leak scan sees it."""
    from narratoria.runtime.skillrun.containment import become_subreaper

    try:
        become_subreaper()
        return os.getpid()
    except OSError as exc:
        say(progress, f"note: cannot adopt orphans ({exc}): the leak scan sees the "
                      "supervisor's tree and cgroups only")
        return None


def daemon_running(address: str | None) -> bool:
    from narratoria.clients.client import ClientError, NarratoriaClient

    try:
        with NarratoriaClient(address, timeout_s=5) as client:
            client.status()
        return True
    except ClientError as exc:
        return exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


__all__ = ["adopt_orphans", "daemon_running", "leaked_processes", "run_loadtest"]
