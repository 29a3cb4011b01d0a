"""`narratoria bench long`: one session played to turn N through a real daemon.

What a long session must keep (``runtime/sessions/summaries.py``, ``runtime/turn/history.py``):
turn N costs what turn 10 did, and the start is not forgotten. The daemon plans with
the pattern planner and narrates with one candidate per sentence (the model's cost
per turn is not what is measured here: how it grows with N is). The session plants
facts at turns 3, 5 and 7, plays ordinary actions, and asks about each fact in its
last turns. Each turn's ``memory`` log lines (the scene pipeline's) say how many
tokens of history the narrator got and what they were.

Reported: turn latency p50 and the history's tokens p50, each over turns 6-15 and over
the last ten (each ratio must stay <= ``MAX_TOKEN_RATIO``), and
whether each planted fact was in the history the question turn was given.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narratoria.bench.daemon import ServeDaemon
from narratoria.bench.report import append_section, machine, say

MAX_TOKEN_RATIO = 1.2  # turn N against turn 10: history tokens, and turn p50 alike
MIN_TURNS = 16  # turn 10's window, three planted facts and three questions
DAEMON_ARGS = ("--planner", "pattern", "--narration-candidates", "1")


@dataclass(frozen=True)
class Fact:
    turn: int
    plant: str                 # the player's action that plants it
    question: str              # asked in the session's last turns
    words: tuple[str, ...]     # what the history must hold for it to count as recalled


FACTS = (
    Fact(3, "I hide the brass compass under the third floorboard",
         "Where did I hide the brass compass?", ("brass compass", "floorboard")),
    Fact(5, "I give the silver key to Old Marta the ferrywoman",
         "Who did I give the silver key to?", ("silver key", "Marta")),
    Fact(7, "I carve the name Ilsabet into the lighthouse door",
         "What name did I carve into the lighthouse door?", ("Ilsabet",)),
)
# Ordinary actions between: none names a planted fact's words, and none is a pattern
# the planner sends to a skill (talk, look, roll, remember), so every turn costs alike.
FILLERS = (
    "I walk down to the harbour", "I buy bread at the bakery", "I mend the torn sail",
    "I follow the gulls along the shore", "I sit by the fire and rest", "I light a lantern",
    "I sharpen my knife", "I wait for the tide to turn", "I cross the old stone bridge",
    "I feed the stray dog", "I fix the broken fence", "I count my coins",
    "I sweep the chapel steps", "I row out past the breakwater", "I pick apples in the orchard",
    "I wash my shirt in the stream", "I visit the smithy", "I write a letter home",
    "I carry water to the well house", "I patch the leaking roof", "I watch the fishing boats",
    "I gather driftwood for the fire", "I walk the cliff path at dusk", "I help unload a cart",
)
_HISTORY = re.compile(r"history: (\d+) of (\d+) tokens")


@dataclass
class TurnSeen:
    turn: int
    text: str
    seconds: float
    tokens: int | None = None
    budget: int | None = None
    parts: list[str] = field(default_factory=list)   # "recalled: ...", "summary: ...", ...


def script(turns: int) -> list[str]:
    """The player's actions for turns 1..``turns``: the facts planted, fillers, and the
    questions last."""
    if turns < MIN_TURNS:
        raise ValueError(f"--turns: at least {MIN_TURNS}, got {turns}")
    planted = {f.turn: f.plant for f in FACTS}
    actions = [planted.get(t) or FILLERS[(t - 1) % len(FILLERS)]
               for t in range(1, turns - len(FACTS) + 1)]
    return actions + [f.question for f in FACTS]


def play(address: str, turns: int, progress: Callable[[TurnSeen], None] | None = None,
         title: str = "bench long") -> list[TurnSeen]:
    """Play ``script(turns)`` in a new session of the daemon at ``address``; each turn
    as its client saw it. The session is ended afterwards."""
    from narratoria.clients.client import NarratoriaClient

    seen: list[TurnSeen] = []
    with NarratoriaClient(address, timeout_s=600) as client:
        sid = client.create_session(title=title).id
        try:
            for number, text in enumerate(script(turns), start=1):
                turn = TurnSeen(number, text, 0.0)
                started = time.perf_counter()
                for event in client.turn(sid, text=text):
                    if event.WhichOneof("event") == "log" and event.log.source == "memory":
                        _read_log(turn, event.log.level, event.log.message)
                turn.seconds = time.perf_counter() - started
                seen.append(turn)
                if progress is not None:
                    progress(turn)
        finally:
            client.end_session(sid)
    return seen


def _read_log(turn: TurnSeen, level: str, message: str) -> None:
    if level == "info" and (m := _HISTORY.search(message)):
        turn.tokens, turn.budget = int(m.group(1)), int(m.group(2))
    elif level == "debug":
        turn.parts.append(message)


def recalled(fact: Fact, turn: TurnSeen) -> bool:
    """Whether the history ``turn`` was given holds every one of the fact's words."""
    history = " ".join(turn.parts).lower()
    return all(word.lower() in history for word in fact.words)


def p50(seen: list[TurnSeen], first: int, last: int, of: str = "seconds") -> float | None:
    """The median of a figure (``seconds`` or ``tokens``) over turns ``first``..``last``."""
    window = [getattr(t, of) for t in seen
              if first <= t.turn <= last and getattr(t, of) is not None]
    return round(statistics.median(window), 3) if window else None


def report_of(seen: list[TurnSeen]) -> dict[str, Any]:
    """The figures of a played session (``play``)."""
    n = len(seen)
    at = {t.turn: t for t in seen}
    # Medians over the same windows as the latency: turn 10 alone may still be on the
    # ramp before the budget fills (seen where the model told shorter scenes).
    tokens_10, tokens_n = p50(seen, 6, 15, "tokens"), p50(seen, n - 9, n, "tokens")
    ratio = round(tokens_n / tokens_10, 3) if tokens_10 and tokens_n is not None else None
    asked = {f.question: t for t in seen for f in FACTS if t.text == f.question}
    recall = [{"plantedAt": f.turn, "fact": f.plant, "askedAt": asked[f.question].turn,
               "question": f.question, "recalled": recalled(f, asked[f.question]),
               "history": [p for p in asked[f.question].parts
                           if any(w.lower() in p.lower() for w in f.words)][:3]}
              for f in FACTS]
    summaries = sum(p.startswith("summary: ") for p in at[n].parts)
    early, late = p50(seen, 6, 15), p50(seen, n - 9, n)
    slower = round(late / early, 3) if early and late is not None else None
    passed = (ratio is not None and ratio <= MAX_TOKEN_RATIO and slower is not None
              and slower <= MAX_TOKEN_RATIO and all(r["recalled"] for r in recall))
    return {
        "turns": n,
        "latency": {"aroundTurn10": {"turns": [6, 15], "p50S": early},
                    "aroundTurnN": {"turns": [n - 9, n], "p50S": late}, "ratio": slower},
        "contextTokens": {"aroundTurn10": {"turns": [6, 15], "p50": tokens_10},
                          "aroundTurnN": {"turns": [n - 9, n], "p50": tokens_n},
                          "turn10": at[10].tokens, "turnN": at[n].tokens, "ratio": ratio,
                          "max": max((t.tokens or 0) for t in seen), "budget": at[n].budget,
                          "maxRatio": MAX_TOKEN_RATIO},
        "summariesAtTurnN": summaries,
        "recall": recall,
        "passed": passed,
    }


def run_long_bench(turns: int, progress: bool = True) -> dict[str, Any]:
    script(turns)  # a bad --turns fails before the daemon starts
    every = 1 if turns <= 50 else 10

    def show(turn: TurnSeen) -> None:
        if turn.turn % every == 0 or turn.turn <= 10 or turn.turn > turns - len(FACTS):
            say(progress, f"turn {turn.turn}/{turns}: {turn.seconds:.2f} s, history "
                          f"{turn.tokens} tokens ({turn.text[:50]})")

    with tempfile.TemporaryDirectory(prefix="nb-", dir="/tmp") as tmp:
        say(progress, f"starting the daemon ({' '.join(DAEMON_ARGS)})")
        daemon = ServeDaemon(Path(tmp), *DAEMON_ARGS)
        try:
            started = time.perf_counter()
            seen = play(daemon.address, turns, show)
            elapsed = time.perf_counter() - started
        finally:
            daemon.stop()
    report = report_of(seen)
    early = report["latency"]["aroundTurn10"]["p50S"]
    late = report["latency"]["aroundTurnN"]["p50S"]
    tokens = report["contextTokens"]
    kept = sum(r["recalled"] for r in report["recall"])
    return {
        "machine": machine(), **report, "daemonArgs": list(DAEMON_ARGS),
        "elapsedS": round(elapsed, 1), "daemonStartupS": daemon.ready.get("startupS"),
        "summary": [
            f"{turns} turns in one session, {elapsed:.0f} s",
            f"turn p50: {early} s around turn 10, {late} s around turn {turns} "
            f"(ratio {report['latency']['ratio']}, at most {MAX_TOKEN_RATIO})",
            f"history tokens p50: {tokens['aroundTurn10']['p50']} around turn 10, "
            f"{tokens['aroundTurnN']['p50']} around turn {turns} "
            f"(ratio {tokens['ratio']}, at most {MAX_TOKEN_RATIO}; budget {tokens['budget']})",
            f"planted facts recalled when asked: {kept}/{len(FACTS)}",
            "PASSED" if report["passed"] else "FAILED",
        ],
    }


def write_markdown(path: Path, report: dict[str, Any], command: str) -> None:
    m = report["machine"]
    tokens = report["contextTokens"]
    lines = [f"\n## long — {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n", f"- command: `{command}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}",
             f"- daemon: `serve {' '.join(report['daemonArgs'])}`; one session, "
             f"{report['turns']} turns in {report['elapsedS']} s\n",
             "| | around turn 10 | around turn N |", "|---|---|---|",
             f"| turn p50 s | {report['latency']['aroundTurn10']['p50S']} | "
             f"{report['latency']['aroundTurnN']['p50S']} |",
             f"| history tokens p50 | {tokens['aroundTurn10']['p50']} | "
             f"{tokens['aroundTurnN']['p50']} |", "",
             "| planted at | fact | asked at | recalled |", "|---|---|---|---|"]
    lines += [f"| {r['plantedAt']} | {r['fact']} | {r['askedAt']} | "
              f"{'yes' if r['recalled'] else 'no'} |" for r in report["recall"]]
    lines += ["", *report["summary"]]
    append_section(path, "\n".join(lines) + "\n")


__all__ = ["FACTS", "MAX_TOKEN_RATIO", "play", "report_of", "run_long_bench", "script",
           "write_markdown"]
