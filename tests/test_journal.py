"""The memory journal: journaled writes survive SIGKILL, replay once, and a torn
or damaged journal is handled without losing acknowledged rows."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import struct
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from narratoria.runtime.db import connect
from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
from narratoria.runtime.narrative.journal import JournalError, JournalRow, MemoryJournal, journal_path

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""\
    import sys
    from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
    engine = NarrativeStateEngine(EngineConfig(db_path=sys.argv[1], embedding_backend="hash",
                                               vector_dimensions=16))
    engine.register_character("a", "A")
    take = engine.create_take()
    engine.create_moment("m1", 1)
    for i in range(int(sys.argv[2])):
        engine.embed_memory("a", f"memory {i}", "m1", take, "internal")
    print(take, flush=True)
    sys.stdin.read()  # wait to be killed
    """)


def _engine(path: Path) -> NarrativeStateEngine:
    return NarrativeStateEngine(EngineConfig(db_path=str(path), embedding_backend="hash",
                                             vector_dimensions=16))


def _killed_after(path: Path, writes: int) -> int:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(writes)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        take = int(child.stdout.readline())
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return take


def _stored_chunks(path: Path) -> list[str]:
    con = connect(str(path))
    try:
        return [r[0] for r in con.execute(
            "SELECT chunk FROM narrative_state.memories ORDER BY id").fetchall()]
    finally:
        con.close()


def _row(i: int) -> JournalRow:
    return JournalRow(i, "a", f"memory {i}", np.ones(4, dtype=np.float32).tobytes(), "hash",
                      "1", "m1", 1, 1, "internal", None)


def test_rows_only_in_the_journal_when_killed_are_replayed_once(tmp_path):
    path = tmp_path / "n.duckdb"
    take = _killed_after(path, 10)  # fewer than a batch: all ten live only in the journal
    assert journal_path(str(path)).stat().st_size > 0
    assert _stored_chunks(path) == []
    with _engine(path) as engine:
        state = engine.query_state("a", "m1", take, memory_limit=100)
        assert [m.chunk for m in state.memories] == [f"memory {i}" for i in range(10)]
    assert _stored_chunks(path) == [f"memory {i}" for i in range(10)]
    assert not journal_path(str(path)).exists()  # replayed and closed: nothing left to recover
    with _engine(path):
        pass
    assert len(_stored_chunks(path)) == 10  # a second open replays nothing twice


def test_a_crash_between_commit_and_truncation_does_not_duplicate(tmp_path):
    path = tmp_path / "n.duckdb"
    journal = journal_path(str(path))
    with _engine(path) as engine:
        engine.register_character("a", "A")
        take = engine.create_take()
        engine.create_moment("m1", 1)
        for i in range(3):
            engine.embed_memory("a", f"memory {i}", "m1", take, "said")
        leftover = journal.read_bytes()
    journal.write_bytes(leftover)  # the rows are committed, and also still journaled
    with _engine(path) as engine:
        assert len(engine.query_state("a", "m1", take).memories) == 3
    assert len(_stored_chunks(path)) == 3


def test_a_full_batch_moves_to_duckdb_and_empties_the_journal(tmp_path):
    path = tmp_path / "n.duckdb"
    with _engine(path) as engine:
        engine.register_character("a", "A")
        take = engine.create_take()
        engine.create_moment("m1", 1)
        for i in range(64):
            engine.embed_memory("a", f"memory {i}", "m1", take, "said")
        assert journal_path(str(path)).stat().st_size == 0
        engine.embed_memory("a", "one more", "m1", take, "said")
        assert journal_path(str(path)).stat().st_size > 0


def test_an_engine_on_a_shared_connection_writes_through(tmp_path):
    path = tmp_path / "n.duckdb"
    con = connect(str(path))
    engine = NarrativeStateEngine(EngineConfig(db_path=":ignored:", embedding_backend="hash",
                                               vector_dimensions=16), connection=con)
    engine.register_character("a", "A")
    take = engine.create_take()
    engine.create_moment("m1", 1)
    engine.embed_memory("a", "seen at once", "m1", take, "said")
    assert con.execute("SELECT chunk FROM narrative_state.memories").fetchall() == [("seen at once",)]
    assert not journal_path(str(path)).exists()
    engine.close()
    con.close()


def test_a_torn_last_frame_is_dropped_and_cut(tmp_path, caplog):
    path = tmp_path / "j"
    journal = MemoryJournal(path)
    journal.append([_row(1), _row(2)])
    journal.append([_row(3)])
    journal.close()
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:11])  # a frame that never finished
    with caplog.at_level(logging.WARNING, logger="narratoria.runtime.narrative.journal"):
        again = MemoryJournal(path)
    assert [r.id for r in again.pending] == [1, 2, 3]
    assert "torn last frame" in caplog.text
    assert path.read_bytes() == whole  # cut back, so the next frame appends cleanly
    again.append([_row(4)])
    again.close()
    assert [r.id for r in MemoryJournal(path).pending] == [1, 2, 3, 4]


def test_a_damaged_frame_before_others_is_refused_and_kept(tmp_path):
    path = tmp_path / "j"
    journal = MemoryJournal(path)
    journal.append([_row(1)])
    journal.append([_row(2)])
    journal.close()
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # inside the first frame's payload
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError, match=r"frame at byte 0 is damaged"):
        MemoryJournal(path)
    assert path.read_bytes() == bytes(data)  # nothing acknowledged is thrown away


def test_a_journal_that_is_not_rows_names_the_file(tmp_path):
    path = tmp_path / "j"
    payload = b"\x91\xa3bad"  # msgpack: ["bad"]
    path.write_bytes(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
    with pytest.raises(JournalError, match=str(path)):
        MemoryJournal(path)


def test_opening_the_database_elsewhere_is_still_refused(tmp_path):
    # The journal relies on the engine being the database's only writer.
    path = tmp_path / "n.duckdb"
    with _engine(path):
        other = subprocess.run([sys.executable, "-c", f"import duckdb; duckdb.connect({str(path)!r})"],
                               capture_output=True, text=True, cwd=REPO)
    assert other.returncode != 0
    assert "lock" in other.stderr.lower()
