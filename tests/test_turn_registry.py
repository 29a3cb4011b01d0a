"""The turns of a daemon's sessions (runtime/turn/registry.py): one turn in flight per
session, events a client reads from the last seq it saw, cancellation until the scene
stores, resources of a session ended mid-turn released when the turn is over."""

from __future__ import annotations

import asyncio

import pytest

from narratoria.runtime.turn.events import STORING_PHASE, TurnEventKind as Kind
from narratoria.runtime.turn.registry import TurnBusy, TurnLimit, TurnRegistry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_has_one_turn_in_flight_and_another_after_it():
    async def main():
        registry = TurnRegistry()
        turn = registry.open("s1")
        with pytest.raises(TurnBusy, match="already has a turn in flight"):
            registry.open("s1")
        other = registry.open("s2")  # another session is not held up
        assert registry.in_flight == 2
        assert await registry.run(turn, asyncio.sleep(0)) is False
        assert registry.open("s1").id != turn.id
        registry.abandon(other)
        assert registry.in_flight == 1 and other.id not in registry.turns
        assert registry.turns_done == 1

    asyncio.run(main())


def test_one_identity_has_at_most_its_limit_of_turns_in_flight():
    async def main():
        registry = TurnRegistry()
        mine = [registry.open(f"m{i}", "client:web", limit=2) for i in range(2)]
        with pytest.raises(TurnLimit, match="client:web already has 2 turns in flight"):
            registry.open("m2", "client:web", limit=2)
        assert "m2" not in registry.active  # the refused turn claimed nothing
        # Another identity, and the device's owner (no limit), are not held up.
        registry.open("o1", "client:phone", limit=2)
        for i in range(5):
            registry.open(f"local{i}", "local")
        assert registry.in_flight_of("client:web") == 2 and registry.in_flight_of("local") == 5
        await registry.run(mine[0], asyncio.sleep(0))  # one ends: room for one more
        registry.open("m2", "client:web", limit=2)
        registry.abandon(mine[1])
        assert registry.in_flight_of("client:web") == 1

    asyncio.run(main())


def test_events_are_numbered_and_read_again_from_any_seq():
    async def main():
        registry = TurnRegistry()
        turn = registry.open("s1")

        async def scene():
            turn.emit(Kind.STARTED, {"turn_number": 1})
            turn.emit(Kind.NARRATION, {"text": "The tide turns."})
            turn.emit(Kind.DONE, {"turn_number": 1})

        await registry.run(turn, scene())
        events, done = await registry.events(turn.id, 0, wait_s=0)
        assert done and [(e["kind"], e["seq"]) for e in events] == [
            ("started", 1), ("narration", 2), ("done", 3)]  # the wire strings
        assert events[1]["text"] == "The tide turns." and events[0]["at_ms"] >= 0
        again, _ = await registry.events(turn.id, 1, wait_s=0)  # a client that reconnects
        assert [e["seq"] for e in again] == [2, 3]

    asyncio.run(main())


def test_a_poll_waits_for_the_next_event_and_returns_when_it_comes():
    async def main():
        registry = TurnRegistry()
        turn = registry.open("s1")
        go = asyncio.Event()

        async def scene():
            await go.wait()
            turn.emit(Kind.NARRATION, {"text": "A gull cries."})
            await asyncio.sleep(10)

        turn.task = asyncio.create_task(registry.run(turn, scene()))
        empty, done = await registry.events(turn.id, 0, wait_s=0.05)
        assert (empty, done) == ([], False)  # nothing yet: the poll times out
        poll = asyncio.create_task(registry.events(turn.id, 0, wait_s=5))
        await asyncio.sleep(0.01)
        go.set()
        events, done = await asyncio.wait_for(poll, 1)
        assert [e["text"] for e in events] == ["A gull cries."] and not done
        turn.task.cancel()
        await turn.task

    asyncio.run(main())


def test_a_turn_can_be_cancelled_until_it_stores():
    async def main():
        registry = TurnRegistry()
        assert await registry.cancel("s1") == (False, "no turn in flight")
        turn = registry.open("s1")
        turn.task = asyncio.create_task(registry.run(turn, asyncio.sleep(10)))
        await asyncio.sleep(0)
        assert await registry.cancel("s1") == (True, turn.id)
        events, done = await registry.events(turn.id, 0, wait_s=0)
        assert done and [e["kind"] for e in events] == [Kind.CANCELLED]
        assert "nothing of it was stored" in events[0]["message"]
        assert registry.in_flight == 0

        storing = registry.open("s1")
        release = asyncio.Event()

        async def scene():
            storing.emit(Kind.PHASE, {"phase": "NARRATING", "attempt": 1})
            storing.emit(Kind.PHASE, {"phase": STORING_PHASE, "attempt": 1})
            await release.wait()
            storing.emit(Kind.DONE, {})

        storing.task = asyncio.create_task(registry.run(storing, scene()))
        await asyncio.sleep(0)
        assert await registry.cancel("s1") == (False, "too late: the turn is already being stored")
        release.set()
        await storing.task
        events, _ = await registry.events(storing.id, 0, wait_s=0)
        assert events[-1]["kind"] == Kind.DONE  # it ran to its end

    asyncio.run(main())


def test_a_failed_scene_ends_its_turn_with_an_error_event():
    async def main():
        registry = TurnRegistry()
        turn = registry.open("s1")

        async def scene():
            raise LookupError("the store is gone")

        await registry.run(turn, scene())
        events, done = await registry.events(turn.id, 0, wait_s=0)
        assert done and events[-1]["kind"] == Kind.ERROR
        assert events[-1]["message"] == "LookupError: the store is gone"

    asyncio.run(main())


def test_a_session_ended_mid_turn_is_released_when_the_turn_is_over():
    async def main():
        registry = TurnRegistry()
        assert registry.end_session("idle") is True  # no turn: release now
        turn = registry.open("s1")
        assert registry.end_session("s1") is False  # its turn may still start a plan
        assert await registry.run(turn, asyncio.sleep(0)) is True  # now
        assert registry.end_session("s1") is True

        started = registry.open("s2")
        registry.end_session("s2")
        assert registry.abandon(started) is True  # a turn that never started releases too

    asyncio.run(main())


def test_finished_turns_are_forgotten_after_their_retention():
    async def main():
        clock = Clock()
        registry = TurnRegistry(retention_s=120, clock=clock)
        turn = registry.open("s1")
        turn.emit(Kind.STARTED, {})
        clock.now += 2.5
        turn.emit(Kind.DONE, {})
        await registry.run(turn, asyncio.sleep(0))
        assert [e["at_ms"] for e in turn.events] == [0, 2500]
        clock.now += 119
        registry.open("s2")  # opening a turn tidies up old ones
        assert turn.id in registry.turns
        clock.now += 2
        registry.open("s3")
        with pytest.raises(KeyError, match="finished turns are kept 120 s"):
            await registry.events(turn.id, 0)

    asyncio.run(main())


def test_drain_waits_for_turns_in_flight_and_counts_the_rest():
    async def main():
        registry = TurnRegistry()
        quick, slow = registry.open("a"), registry.open("b")
        quick.task = asyncio.create_task(registry.run(quick, asyncio.sleep(0.01)))
        slow.task = asyncio.create_task(registry.run(slow, asyncio.sleep(10)))
        assert await registry.drain(0.2) == 1
        assert quick.done and not slow.done
        slow.task.cancel()
        await asyncio.gather(slow.task, return_exceptions=True)
        assert await registry.drain(0.2) == 0

    asyncio.run(main())
