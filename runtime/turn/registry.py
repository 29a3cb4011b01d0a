"""The turns of a daemon's sessions: each turn's buffer of events, which a client reads
(and after a lost connection reads again) by long-polling from the last ``seq`` it saw,
and the rules of who may start, cancel and end what.

Invariants: a session has at most one turn in flight, claimed before anything of it
is awaited; a turn's events are numbered from 1 in the order emitted and stay
readable ``retention_s`` after it ends; a turn can be cancelled until its scene
starts storing its outcome (the ``STORING`` phase), never after; a session ended
while its turn is in flight has its resources released when that turn is over, not
before (the turn may still start a plan). Plain asyncio: the coordinator actor
holds one registry.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from narratoria.runtime.turn.events import STORING_PHASE, TurnEventKind

TURN_RETENTION_S = 120.0  # a finished turn's events stay readable this long
POLL_WAIT_S = 10.0


class TurnBusy(RuntimeError):
    """The session already has a turn in flight."""


class TurnLimit(RuntimeError):
    """The caller already has as many turns in flight as it may (one identity's many
    sessions must not fill the model's queue for everyone else)."""


@dataclass
class Turn:
    id: str
    session_id: str
    owner: str | None = None
    clock: Callable[[], float] = time.monotonic
    started: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    finished_at: float | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    # Set when the scene starts storing (memory, then the turn): from then on the
    # turn is committed and can no longer be cancelled.
    committed: bool = False

    def __post_init__(self) -> None:
        self.started = self.started or self.clock()

    def emit(self, kind: TurnEventKind, payload: dict[str, Any]) -> None:
        if kind == TurnEventKind.PHASE and payload.get("phase") == STORING_PHASE:
            self.committed = True
        self.events.append({"kind": kind, "seq": len(self.events) + 1,
                            "at_ms": int((self.clock() - self.started) * 1000), **payload})
        self.changed.set()


class TurnRegistry:
    def __init__(self, retention_s: float = TURN_RETENTION_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.retention_s = retention_s
        self.clock = clock
        self.turns: dict[str, Turn] = {}
        self.active: dict[str, str] = {}  # session id -> turn id in flight
        # Sessions ended while their turn was in flight: released when that turn is over.
        self.ending: set[str] = set()
        self.turns_done = 0

    @property
    def in_flight(self) -> int:
        return len(self.active)

    def open(self, session_id: str, owner: str | None = None,
             limit: int | None = None) -> Turn:
        """A new turn of ``session_id``, claimed at once (TurnBusy if it has one;
        TurnLimit if ``owner`` already has ``limit`` turns in flight)."""
        self._forget_old()
        if session_id in self.active:
            raise TurnBusy(f"session {session_id!r} already has a turn in flight")
        if limit is not None and self.in_flight_of(owner) >= limit:
            raise TurnLimit(f"{owner} already has {limit} turns in flight (the most one "
                            "client may have); wait for one to end")
        turn = Turn(id=uuid.uuid4().hex[:12], session_id=session_id, owner=owner,
                    clock=self.clock)
        self.turns[turn.id] = turn
        self.active[session_id] = turn.id
        return turn

    def in_flight_of(self, owner: str | None) -> int:
        """Turns of ``owner``'s sessions in flight now."""
        return sum(1 for turn_id in self.active.values()
                   if (turn := self.turns.get(turn_id)) is not None and turn.owner == owner)

    def abandon(self, turn: Turn) -> bool:
        """The turn could not start: forget it. True: its session ended meanwhile, and
        its resources are to be released now."""
        self.active.pop(turn.session_id, None)
        self.turns.pop(turn.id, None)
        return self._ended(turn.session_id)

    async def run(self, turn: Turn, play: Awaitable[Any]) -> bool:
        """Await the turn's scene; how it ended goes into its events (``cancelled``,
        ``error``: the client must hear it). True: its session ended meanwhile, and its
        resources are to be released now."""
        try:
            await play
        except asyncio.CancelledError:
            turn.emit(TurnEventKind.CANCELLED,
                      {"message": "the turn was cancelled; nothing of it was stored"})
        except Exception as exc:  # noqa: BLE001 - the client must hear how its turn ended
            turn.emit(TurnEventKind.ERROR, {"message": f"{type(exc).__name__}: {exc}"})
        finally:
            turn.done = True
            turn.finished_at = self.clock()
            turn.changed.set()
            self.active.pop(turn.session_id, None)
            self.turns_done += 1
        return self._ended(turn.session_id)

    def end_session(self, session_id: str) -> bool:
        """The session has ended. True: release its resources now; False: its turn in
        flight will (``run`` or ``abandon`` says so)."""
        if session_id in self.active:
            self.ending.add(session_id)
            return False
        return True

    def _ended(self, session_id: str) -> bool:
        if session_id in self.ending:
            self.ending.discard(session_id)
            return True
        return False

    async def cancel(self, session_id: str) -> tuple[bool, str]:
        """Cancel the session's turn in flight and wait until it is over: (True, its id),
        or (False, why not) when there is none or it is already storing its outcome."""
        turn_id = self.active.get(session_id)
        turn = self.turns.get(turn_id) if turn_id is not None else None
        if turn is None or turn.task is None or turn.done:
            return False, "no turn in flight"
        if turn.committed:
            return False, "too late: the turn is already being stored"
        turn.task.cancel()
        await asyncio.gather(turn.task, return_exceptions=True)
        return True, turn.id

    async def events(self, turn_id: str, after: int = 0,
                     wait_s: float = POLL_WAIT_S) -> tuple[list[dict[str, Any]], bool]:
        """Events after ``after`` (waiting up to ``wait_s`` for one), and whether the turn
        is over. KeyError for a turn unknown or forgotten."""
        turn = self.turns.get(turn_id)
        if turn is None:
            raise KeyError(f"no turn {turn_id!r} (finished turns are kept {self.retention_s:g} s)")
        deadline = time.monotonic() + wait_s
        while len(turn.events) <= after and not turn.done:
            turn.changed.clear()
            try:
                await asyncio.wait_for(turn.changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        return turn.events[after:], turn.done

    async def drain(self, timeout_s: float) -> int:
        """Wait for turns in flight (shutdown); return how many were still running."""
        tasks = [t.task for t in self.turns.values() if t.task is not None and not t.done]
        if not tasks:
            return 0
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        return len(pending)

    def _forget_old(self) -> None:
        now = self.clock()
        for turn_id in [t.id for t in self.turns.values()
                        if t.done and t.finished_at is not None
                        and now - t.finished_at > self.retention_s]:
            del self.turns[turn_id]
