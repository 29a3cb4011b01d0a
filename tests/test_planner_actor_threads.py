"""The planner actor holds as many requests in the model's batch as its slots allow,
whatever the machine's core count.

Each request waits for its result in a thread (``asyncio.to_thread``); the event loop's
default pool has ``cpu_count + 4`` threads, so on a 2-core machine the seventh of eight
concurrent plans used to wait for a thread, its 5 s budget running, before the model
saw it (loadtest: one plan in 24 fell back). Real model, the actor's own class, its own
event loop as Ray would run it.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from narratoria.actors.planner import PlannerActor

pytestmark = pytest.mark.model

# More concurrent requests than the default pool has threads, within the slot limit.
CONCURRENT = min(32, (os.cpu_count() or 1) + 4 + 2)


def test_every_concurrent_request_reaches_the_batch_at_once():
    actor = PlannerActor(slots=CONCURRENT)

    async def main() -> list[str]:
        prompts = [f"Write one sentence about lighthouse number {i}." for i in range(CONCURRENT)]
        return await asyncio.gather(*(actor.complete(p, max_tokens=24) for p in prompts))

    try:
        answers = asyncio.run(main())
        status = actor.planner.status()
    finally:
        actor.planner.close()
    assert len(answers) == CONCURRENT and all(isinstance(a, str) for a in answers)
    # Every request decoded side by side: none waited for a thread to be submitted.
    assert status["peakRunning"] == CONCURRENT, status
