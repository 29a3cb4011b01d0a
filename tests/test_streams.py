"""A producer's reports as a stream (runtime/streams.py): thread and task producers,
read from an event loop or blocking; items in order, then the result or the error; a
consumer that leaves stops the producer."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from narratoria.runtime.streams import ProducerStream


def test_a_thread_producers_items_reach_an_async_consumer_in_order_then_its_result():
    def produce(put, stop):
        for i in range(200):
            put(i)
            if i % 50 == 0:
                time.sleep(0.01)  # the consumer waits for some, finds others waiting
        return "done"

    async def read():
        async with ProducerStream.thread(produce) as stream:
            return [item async for item in stream], stream.result

    items, result = asyncio.run(read())
    assert items == list(range(200)) and result == "done"


def test_batches_gather_what_comes_within_the_flush_window():
    def produce(put, stop):
        for word in ("a", "b", "c"):
            put(word)
        time.sleep(0.3)
        put("d")

    async def read():
        async with ProducerStream.thread(produce) as stream:
            return [batch async for batch in stream.batches(flush_s=0.1)]

    batches = asyncio.run(read())
    assert batches == [["a", "b", "c"], ["d"]]


def test_the_producers_error_is_raised_after_the_items_it_put():
    def produce(put, stop):
        put(1)
        put(2)
        raise OSError("the disk is gone")

    async def read():
        seen = []
        async with ProducerStream.thread(produce) as stream:
            with pytest.raises(OSError, match="the disk is gone"):
                async for item in stream:
                    seen.append(item)
        return seen

    assert asyncio.run(read()) == [1, 2]


def test_a_consumer_that_leaves_early_stops_the_thread_and_waits_for_it():
    ended = threading.Event()

    def produce(put, stop):
        try:
            while not stop.is_set():
                put("piece")
                time.sleep(0.005)
        finally:
            time.sleep(0.05)  # tidying up (the model's state) before the thread ends
            ended.set()

    async def read_two():
        async with ProducerStream.thread(produce) as stream:
            async for _ in stream:
                break
        return ended.is_set()

    assert asyncio.run(read_two()) is True  # the thread was over when the consumer left


def test_a_cancelled_consumer_stops_the_thread():
    stopped = threading.Event()

    def produce(put, stop):
        stop.wait(10)
        stopped.set()

    async def main():
        async def read():
            async with ProducerStream.thread(produce) as stream:
                async for _ in stream:
                    pass

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.05)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        return stopped.is_set()

    assert asyncio.run(main()) is True


def test_a_task_producer_reports_from_the_loop_and_is_cancelled_when_left():
    cancelled = []

    async def produce(put):
        put("started")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)  # the executor kills its processes here
            raise
        return "never"

    async def main():
        async with ProducerStream.task(produce) as stream:
            async for event in stream:
                assert event == "started"
                break
        return stream.running

    assert asyncio.run(main()) is False
    assert cancelled == [True]


def test_a_task_producers_events_then_result():
    async def produce(put):
        for i in range(3):
            put(i)
            await asyncio.sleep(0)
        return {"ok": True}

    async def main():
        async with ProducerStream.task(produce) as stream:
            return [e async for e in stream], stream.result

    assert asyncio.run(main()) == ([0, 1, 2], {"ok": True})


def test_cancel_ends_a_task_producer_and_its_reader_hears_it():
    async def produce(put):
        await asyncio.sleep(10)

    async def main():
        stream = ProducerStream.task(produce)

        async def read():
            async with stream:
                return [e async for e in stream]

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.01)
        stream.cancel()  # shutdown: every plan still running
        await stream.wait()
        with pytest.raises(asyncio.CancelledError):
            await reader
        return stream.running

    assert asyncio.run(main()) is False


def test_a_blocking_consumer_reads_a_thread_producer_without_a_loop():
    def produce(put, stop):
        for phase in ("reading", "embedding"):
            put((phase, 1, 2))
        return "result"

    with ProducerStream.thread(produce) as stream:
        assert list(stream) == [("reading", 1, 2), ("embedding", 1, 2)]
        assert stream.result == "result"


def test_the_result_is_not_there_before_the_end():
    with ProducerStream.thread(lambda put, stop: stop.wait(10)) as stream:
        with pytest.raises(RuntimeError, match="not been read to its end"):
            stream.result  # noqa: B018
