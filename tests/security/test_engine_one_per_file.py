"""One narrative state engine per database file.

A second engine on a file this process already has open would replay the first's
memory journal (rows stored twice) and truncate it under the first (acknowledged rows
lost on a crash). A file another process holds is refused with that process's pid.
Memory ids are unique in the table, and a database that already holds duplicated
rows (written by the old code) is repaired when it is opened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from conftest import REPO
from narratoria.runtime.db import connect, migrate
from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
from narratoria.runtime.narrative.models import NarrativeStateError
from narratoria.runtime.narrative.schema import COMPONENT, SCHEMA, migrations

DIMS = 32


def engine_on(path: Path | str) -> NarrativeStateEngine:
    return NarrativeStateEngine(EngineConfig(db_path=str(path), embedding_backend="hash",
                                             vector_dimensions=DIMS))


def world(engine: NarrativeStateEngine) -> int:
    engine.register_character("a", "A")
    engine.create_moment("m1", 1)
    return engine.create_take()


def all_memories(engine: NarrativeStateEngine, take: int) -> list[tuple[int, str]]:
    state = engine.query_state("a", "m1", take, memory_limit=1_000_000)
    return sorted((m.id, m.chunk) for m in state.memories)


def test_a_second_engine_on_the_same_file_is_refused_and_nothing_is_doubled(tmp_path: Path):
    path = tmp_path / "n.duckdb"
    first = engine_on(path)
    take = world(first)
    written = [first.embed_memory("a", f"memory {i}", "m1", take, "internal") for i in range(5)]
    # The same file under another spelling is the same file.
    (tmp_path / "link").symlink_to(tmp_path)
    for spelling in (path, tmp_path / "link" / "n.duckdb", tmp_path / "." / "n.duckdb"):
        with pytest.raises(NarrativeStateError) as refused:
            engine_on(spelling)
        assert str(spelling) in str(refused.value)
        assert "another narrative state engine of this process" in str(refused.value)
    # The first engine is untouched: its journaled writes are still its own.
    written += [first.embed_memory("a", f"late {i}", "m1", take, "internal") for i in range(3)]
    assert [i for i, _ in all_memories(first, take)] == written
    first.close()
    with engine_on(path) as again:  # once closed, the file can be opened again
        rows = all_memories(again, take)
    assert [i for i, _ in rows] == written and len({c for _, c in rows}) == 8


def test_an_in_memory_engine_never_conflicts():
    with engine_on(":memory:") as a, engine_on(":memory:") as b:
        assert world(a) == world(b)


HOLDER = textwrap.dedent("""\
    import sys, time
    from narratoria.runtime.narrative import EngineConfig, NarrativeStateEngine
    engine = NarrativeStateEngine(EngineConfig(db_path=sys.argv[1], embedding_backend="hash",
                                               vector_dimensions=32))
    print("ready", flush=True)
    time.sleep(120)
    """)


@pytest.fixture
def held_file(tmp_path: Path):
    """A database file another process (a live engine) has open; that process."""
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "ready"
        yield path, holder
    finally:
        holder.kill()
        holder.wait()


def test_a_file_held_by_another_process_names_that_process(held_file):
    from narratoria.runtime.db import DatabaseLocked

    path, holder = held_file
    with pytest.raises(NarrativeStateError) as refused:
        engine_on(path)
    message = str(refused.value)
    assert str(path) in message and f"process {holder.pid}" in message
    assert "Traceback" not in message and len(message) < 400
    # The daemon's store opens the same way: the same error, before any schema is touched.
    with pytest.raises(DatabaseLocked) as locked:
        connect(path)
    assert locked.value.pid == holder.pid and str(path) in str(locked.value)
    # The refused engine left no claim behind: once the holder is gone, it opens.
    holder.kill()
    holder.wait()
    with engine_on(path) as engine:
        world(engine)


def test_memory_ids_are_unique_in_the_table(tmp_path: Path):
    path = tmp_path / "n.duckdb"
    with engine_on(path) as engine:
        take = world(engine)
        memory = engine.embed_memory("a", "the blue door", "m1", take, "perceived")
    con = connect(path)
    try:
        with pytest.raises(duckdb.ConstraintException):
            con.execute(f"INSERT INTO {SCHEMA}.memories SELECT * FROM {SCHEMA}.memories "
                        "WHERE id = ?", [memory])
    finally:
        con.close()


def test_a_database_with_duplicated_memories_is_repaired_on_open(tmp_path: Path):
    """A file written before v2 (schema v1), holding the rows the journal replay doubled."""
    path = tmp_path / "old.duckdb"
    con = connect(path)
    migrate(con, COMPONENT, migrations(DIMS)[:1])
    con.close()
    with engine_on(path) as engine:  # migrates on open; write through the engine
        take = world(engine)
        ids = [engine.embed_memory("a", f"memory {i}", "m1", take, "internal") for i in range(3)]
    con = connect(path)
    try:  # roll the file back to v1 and double every row, as the old code could
        con.execute(f"DROP INDEX {SCHEMA}.memories_id_unique")
        con.execute("DELETE FROM schema_migrations WHERE component = ? AND version >= 2",
                    [COMPONENT])
        con.execute(f"INSERT INTO {SCHEMA}.memories SELECT * FROM {SCHEMA}.memories")
        assert con.execute(f"SELECT count(*) FROM {SCHEMA}.memories").fetchone()[0] == 6
    finally:
        con.close()
    with engine_on(path) as engine:
        rows = all_memories(engine, take)
    assert [i for i, _ in rows] == ids
    con = connect(path)
    try:
        assert con.execute(f"SELECT count(*) FROM {SCHEMA}.memories").fetchone()[0] == 3
    finally:
        con.close()
