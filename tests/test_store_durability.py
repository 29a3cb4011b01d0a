"""Durability and concurrency of the persistence layer (docs/store.md,
"Durability and concurrency").

A real child process writes to a real file and is SIGKILLed mid-stream; readers
in real threads query while a real writer writes.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import numpy as np

from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import MemoryEvent, PersistenceStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
BATCH = 25

# Writes forever, printing each id only after the call that stored it returned:
# two single stores, then a batch of BATCH in one transaction, and again.
CHILD = r"""
import sys
from datetime import datetime, timedelta, timezone
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.store import MemoryEvent, PersistenceStore

path, run, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
pt = PersistenceStore(path, make_backend(EmbeddingSettings(backend="hash"))).playthrough("durable")
t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

def event(i, k=None):
    label = f"{run} single {i}" if k is None else f"{run} batch {i} item {k}"
    return MemoryEvent(summary=label, timestamp=t0 + timedelta(seconds=i), session_id=f"{run}-{i}",
                       character_ids=["aldric", f"c{i}"], semantic_tags=["durable"], location=f"loc{i}")

i = 0
while True:
    if i % 3 == 2:
        ids = [r.id for r in pt.store_many("memory_event", [event(i, k) for k in range(batch)])]
    else:
        ids = [pt.store("memory_event", event(i)).id]
    sys.stdout.write("".join(f"{x}\n" for x in ids))
    sys.stdout.flush()
    i += 1
"""


def _write_then_kill(path, run: str, kill_after: int) -> list[str]:
    """Start the writer, SIGKILL it once ``kill_after`` ids are printed; every id it printed."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), run, str(BATCH)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed: list[str] = []
    try:
        while len(printed) < kill_after:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"the writer died on its own: {proc.stderr.read()}")
            printed.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # Lines already in the pipe were printed before the kill, so they count too.
    printed += [line for line in proc.stdout.read().splitlines() if len(line) == 32]
    proc.stderr.close()
    return printed


def test_sigkill_right_after_writes_returned_loses_nothing(tmp_path):
    hasher = make_backend(EmbeddingSettings(backend="hash"))
    path = tmp_path / "narratoria.duckdb"
    printed: list[str] = []
    for run, kill_after in (("r1", 40), ("r2", 57), ("r3", 81)):
        printed += _write_then_kill(path, run, kill_after)
        with PersistenceStore(path, hasher) as store:  # reopening replays the write-ahead log
            pt = store.playthrough("durable")
            rows = {r.id: r for r in pt.exact_match("memory_event")}
            assert set(printed) <= set(rows), f"lost {len(set(printed) - set(rows))} returned writes"
            for record in rows.values():  # every stored record is whole, committed or not printed
                run_, kind, i, *rest = record.summary.split()
                assert record.session_id == f"{run_}-{i}" and record.location == f"loc{i}"
                assert record.character_ids == ["aldric", f"c{i}"] and record.semantic_tags == ["durable"]
                assert record.timestamp == T0 + timedelta(seconds=int(i))
            sizes = collections.Counter(r.session_id for r in rows.values() if " batch " in r.summary)
            assert set(sizes.values()) <= {BATCH}, "a batch was half-written"
            vectors = store._reader().execute(
                "SELECT summary, embedding FROM persistence.memory_events").fetchall()
            for summary, vector in vectors:  # bit for bit what the embedder made
                assert np.array_equal(np.array(vector, dtype=np.float32), hasher.embed(summary))


def _memories(prefix: str, n: int, session: str) -> list[MemoryEvent]:
    return [MemoryEvent(summary=f"{prefix} {i} of the blacksmith and the forge", session_id=session,
                        timestamp=T0 + timedelta(seconds=i), semantic_tags=[prefix]) for i in range(n)]


def test_readers_are_not_blocked_by_an_open_write_transaction(tmp_path):
    hasher = make_backend(EmbeddingSettings(backend="hash"))
    with PersistenceStore(tmp_path / "n.duckdb", hasher) as store:
        pt = store.playthrough("p1")
        pt.store_many("memory_event", _memories("settled", 100, "s1"))
        expected = pt.exact_match("memory_event", {"sessionId": "s1"})
        answers: list[tuple[int, int]] = []
        with store._transaction() as cur:  # a write in progress, not yet committed
            cur.execute("INSERT INTO persistence.memory_events SELECT * REPLACE "
                        "('pending-' || id AS id, 'pending' AS session_id, "
                        "nextval('persistence.embedding_seq') AS embedding_seq) FROM persistence.memory_events")
            second_writer = threading.Thread(
                target=lambda: pt.store("memory_event", _memories("late", 1, "s2")[0]))
            second_writer.start()

            def read() -> None:
                exact = pt.exact_match("memory_event", {"sessionId": "s1"})
                hits = pt.semantic_search("the blacksmith", "memory_event", 200, min_score=-1.0)
                assert exact == expected
                answers.append((len(exact), len(hits)))

            readers = [threading.Thread(target=read) for _ in range(8)]
            for thread in readers:
                thread.start()
            for thread in readers:
                thread.join(timeout=10)
            # All eight readers answered while the write was open, and saw none of it...
            assert answers == [(100, 100)] * 8
            # ...while the second writer waits its turn: writes are serialised.
            second_writer.join(timeout=0.3)
            assert second_writer.is_alive()
        second_writer.join(timeout=10)
        assert not second_writer.is_alive()
        assert len(pt.exact_match("memory_event", {"sessionId": "pending"})) == 100
        assert len(pt.exact_match("memory_event", {"sessionId": "s2"})) == 1


def test_concurrent_readers_and_a_writer_see_only_whole_writes(tmp_path):
    """Eight threads query while one writes; answers stay correct, batches appear whole."""
    hasher = make_backend(EmbeddingSettings(backend="hash"))
    with PersistenceStore(tmp_path / "n.duckdb", hasher) as store:
        pt, other = store.playthrough("p1"), store.playthrough("p2")
        pt.store_many("memory_event", _memories("settled", 2000, "s1"))
        expected_exact = pt.exact_match("memory_event", {"sessionId": "s1"}, limit=20)
        expected_hits = pt.semantic_search("settled 7 of the blacksmith", "memory_event", 5,
                                           {"sessionId": "s1"})
        stop = threading.Event()
        errors: list[BaseException] = []
        read_ms: list[float] = []
        write_ms: list[float] = []

        def writer() -> None:
            k = 0
            while not stop.is_set():
                started = time.perf_counter()
                if k % 2:
                    other.store("memory_event", _memories("single", 1, f"w{k}")[0])
                    pt.store("memory_event", _memories("single", 1, f"w{k}")[0])
                else:
                    pt.store_many("memory_event", _memories("batch", 200, f"w{k}"))
                write_ms.append((time.perf_counter() - started) * 1000)
                k += 1

        def reader() -> None:
            try:
                while not stop.is_set():
                    started = time.perf_counter()
                    assert pt.exact_match("memory_event", {"sessionId": "s1"}, limit=20) == expected_exact
                    assert pt.semantic_search("settled 7 of the blacksmith", "memory_event", 5,
                                              {"sessionId": "s1"}) == expected_hits
                    seen = collections.Counter(r.session_id for r in pt.exact_match(
                        "memory_event", {"tags": ["batch"]}))
                    assert set(seen.values()) <= {200}, f"a half-written batch: {seen}"
                    assert all(r.playthrough_id == "p1" for r in pt.exact_match(
                        "memory_event", {"tags": ["single"]}))
                    read_ms.append((time.perf_counter() - started) * 1000 / 4)
            except BaseException as exc:  # surfaced below; a thread's assert is otherwise lost
                errors.append(exc)
                stop.set()

        threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(3.0)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert not errors, errors[0]
        assert len(read_ms) >= 8 and len(write_ms) >= 2
        print(f"\n8 readers + 1 writer: {len(read_ms) * 4} queries, p50 {np.median(read_ms):.1f} ms, "
              f"p95 {np.percentile(read_ms, 95):.1f} ms; {len(write_ms)} writes, "
              f"longest {max(write_ms):.1f} ms")
