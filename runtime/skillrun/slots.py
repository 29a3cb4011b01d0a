"""A global cap on live skill processes, shared by every plan the daemon runs.

Each plan keeps its own concurrency rules (the executor's permits); on top of them
every process start takes a slot here. Waiters are served first come, first
served (asyncio.Semaphore wakes them in order), so a flood from one session
queues behind the work already waiting instead of starving it: backpressure, not
failure.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator


class ProcessSlots:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the skill process limit must be >= 1, got {limit}")
        self.limit = limit
        self._sem = asyncio.Semaphore(limit)
        self.live = 0
        self.peak = 0
        self.waiting = 0
        self.started = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one slot; yields how long it was waited for, in seconds (the queue
        wait a tool reports)."""
        self.waiting += 1
        since = time.monotonic()
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
        waited = time.monotonic() - since
        self.live += 1
        self.started += 1
        self.peak = max(self.peak, self.live)
        try:
            yield waited
        finally:
            self.live -= 1
            self._sem.release()

    def snapshot(self) -> dict[str, int]:
        return {"live": self.live, "limit": self.limit, "waiting": self.waiting,
                "peak": self.peak, "started": self.started}
