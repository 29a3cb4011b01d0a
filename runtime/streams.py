"""A producer's reports as a stream: items as the producer hands them over, then what
it returned.

A producer is a blocking function run on its own thread (the model writing narration,
a campaign being ingested) or a coroutine run as a task on the consumer's loop (a plan
being executed); it reports each item through ``put`` and returns its result. The
consumer reads the items in order, from an event loop (``async for``, or ``batches``
that gather what came in a short while) or, for a thread, from any thread (``for``),
then finds the return value in ``result``. The consumer reads inside ``async with``
(or ``with``), which stops the producer however the reading ends.

Invariants: every item put before the producer ended reaches the consumer, in order,
before the end; the producer's exception is raised in the consumer after those items;
a consumer that leaves early (breaks off, is closed, is cancelled) stops the producer
(sets its ``stop`` event, cancels its task) and an async consumer waits until it has
ended, so what it holds (the model, skill processes) is free when the consumer is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Put = Callable[[T], None]


@dataclass(frozen=True)
class _End:
    result: Any = None
    error: BaseException | None = None


class ProducerStream(Generic[T, R]):
    """Start one with :meth:`thread` or :meth:`task`; read it once."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._notify: Callable[[], None] | None = None  # wakes an async consumer
        self._end: _End | None = None  # taken by the consumer
        self.stop = threading.Event()  # the consumer is gone: a thread producer should stop
        self._task: asyncio.Task[None] | None = None
        self._thread_done: concurrent.futures.Future[None] | None = None

    # -- starting -----------------------------------------------------------------------

    @classmethod
    def thread(cls, produce: Callable[[Put[T], threading.Event], R],
               name: str = "producer") -> ProducerStream[T, R]:
        """Run ``produce(put, stop)`` on a new daemon thread; it should return soon after
        ``stop`` is set."""
        stream: ProducerStream[T, R] = cls()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        stream._thread_done = done

        def run() -> None:
            try:
                stream._finish(_End(result=produce(stream.put, stream.stop)))
            except BaseException as exc:  # noqa: BLE001 - raised in the consumer
                stream._finish(_End(error=exc))
            finally:
                done.set_result(None)

        threading.Thread(target=run, name=name, daemon=True).start()
        return stream

    @classmethod
    def task(cls, produce: Callable[[Put[T]], Awaitable[R]]) -> ProducerStream[T, R]:
        """Run ``produce(put)`` as a task on the running loop (cancelled to stop it)."""
        stream: ProducerStream[T, R] = cls()

        async def run() -> None:
            try:
                stream._finish(_End(result=await produce(stream.put)))
            except BaseException as exc:  # noqa: BLE001 - raised in the consumer
                stream._finish(_End(error=exc))

        stream._task = asyncio.get_running_loop().create_task(run())
        return stream

    # -- the producer's side ------------------------------------------------------------

    def put(self, item: T) -> None:
        """Hand ``item`` to the consumer (from any thread)."""
        self._queue.put(item)
        notify = self._notify
        if notify is not None:
            notify()

    def _finish(self, end: _End) -> None:
        self._queue.put(end)
        notify = self._notify
        if notify is not None:
            notify()

    # -- the consumer's side ------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the producer has not ended yet."""
        if self._task is not None:
            return not self._task.done()
        return self._thread_done is not None and not self._thread_done.done()

    @property
    def result(self) -> R:
        """What the producer returned (once the items are read to the end)."""
        if self._end is None:
            raise RuntimeError("the stream has not been read to its end")
        return self._end.result  # type: ignore[no-any-return]

    def cancel(self) -> None:
        """Ask the producer to stop: its ``stop`` event, its task cancelled."""
        self.stop.set()
        if self._task is not None:
            self._task.cancel()

    async def wait(self) -> None:
        """Until the producer has ended (items it still puts are dropped)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        elif self._thread_done is not None:
            await asyncio.shield(asyncio.wrap_future(self._thread_done))

    async def close(self) -> None:
        """Stop the producer if it still runs, and wait until it has ended."""
        if self.running:
            self.cancel()
            await self.wait()

    async def __aenter__(self) -> ProducerStream[T, R]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __enter__(self) -> ProducerStream[T, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.running:
            self.cancel()  # a blocking consumer does not wait: the thread ends on its own

    def _take(self) -> list[T]:
        """The items waiting, without blocking; notes the end when it comes."""
        items: list[T] = []
        while self._end is None:
            try:
                entry = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(entry, _End):
                self._end = entry
            else:
                items.append(entry)
        return items

    def _raise_error(self) -> None:
        assert self._end is not None
        if self._end.error is not None:
            raise self._end.error

    async def batches(self, flush_s: float = 0.0) -> AsyncIterator[list[T]]:
        """The items in lists: each what arrived by the time the consumer looked, and
        with ``flush_s`` what came within that long after the first of them (one
        message downstream instead of one per item)."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        self._notify = lambda: loop.call_soon_threadsafe(wake.set)
        try:
            while self._end is None:
                wake.clear()  # before looking: a put after the look sets it again
                items = self._take()
                if not items:
                    if self._end is None:
                        await wake.wait()
                    continue
                if flush_s > 0 and self._end is None:
                    await asyncio.sleep(flush_s)
                    items += self._take()
                yield items
            self._raise_error()
        finally:
            self._notify = None
            if self._end is None:  # the consumer was cancelled while it waited
                await self.close()

    async def __aiter__(self) -> AsyncIterator[T]:
        async for items in self.batches():
            for item in items:
                yield item

    def __iter__(self) -> Iterator[T]:
        """The items, read blocking (a thread producer only: a task would need the loop
        this blocks)."""
        if self._task is not None:
            raise TypeError("a task's stream is read with async for")
        try:
            while True:
                entry = self._queue.get()
                if isinstance(entry, _End):
                    self._end = entry
                    self._raise_error()
                    return
                yield entry
        finally:
            if self._end is None:
                self.cancel()
