"""The database opener: vss from the package file, forward-only migrations."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from narratoria.runtime.db import (DatabaseError, Migration, connect, literal, migrate,
                                   schema_version, transaction)


def test_vss_is_loaded_from_the_package_and_hnsw_indexes_work(tmp_path):
    connect(tmp_path / "d" / "n.duckdb").close()  # creates the folder, loads vss on a file
    # HNSW on disk is experimental in vss (an index can be lost on a crash), so the
    # store keeps vectors authoritative in plain columns; an index lives in memory.
    con = connect()
    loaded = dict(con.execute(
        "SELECT extension_name, loaded FROM duckdb_extensions()").fetchall())
    assert loaded["vss"] is True
    con.execute("CREATE TABLE v (id INTEGER, e FLOAT[3])")
    con.execute("INSERT INTO v VALUES (1, [1, 0, 0]), (2, [0, 1, 0])")
    con.execute("CREATE INDEX ix ON v USING HNSW (e) WITH (metric = 'cosine')")
    top = con.execute("SELECT id FROM v ORDER BY array_cosine_distance(e, [1, 0.1, 0]::FLOAT[3]) "
                      "LIMIT 1").fetchone()
    assert top == (1,)


def _create(con):
    con.execute("CREATE TABLE things (id INTEGER)")


def _add_column(con):
    con.execute("ALTER TABLE things ADD COLUMN label VARCHAR DEFAULT 'x'")


def _broken(con):
    con.execute("CREATE TABLE half_done (id INTEGER)")
    raise RuntimeError("migration bug")


def test_migrations_apply_once_in_order_and_survive_reopen(tmp_path):
    path = tmp_path / "n.duckdb"
    con = connect(path)
    assert migrate(con, "demo", [Migration(1, "create", _create)]) == 1
    con.execute("INSERT INTO things VALUES (1)")
    con.close()
    con = connect(path)
    assert migrate(con, "demo", [Migration(1, "create", _create),
                                 Migration(2, "label", _add_column)]) == 2
    assert con.execute("SELECT id, label FROM things").fetchall() == [(1, "x")]
    assert migrate(con, "demo", [Migration(1, "create", _create),
                                 Migration(2, "label", _add_column)]) == 2
    assert schema_version(con, "other") == 0


def test_a_failed_migration_rolls_back_and_keeps_the_previous_version(tmp_path):
    con = connect(tmp_path / "n.duckdb")
    migrate(con, "demo", [Migration(1, "create", _create)])
    with pytest.raises(RuntimeError, match="migration bug"):
        migrate(con, "demo", [Migration(1, "create", _create), Migration(2, "bad", _broken)])
    assert schema_version(con, "demo") == 1
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "half_done" not in tables


def test_a_newer_database_is_refused(tmp_path):
    con = connect(tmp_path / "n.duckdb")
    migrate(con, "demo", [Migration(1, "create", _create), Migration(2, "label", _add_column)])
    with pytest.raises(DatabaseError, match="newer than this runtime"):
        migrate(con, "demo", [Migration(1, "create", _create)])


def test_migration_versions_must_increase(tmp_path):
    with pytest.raises(DatabaseError):
        migrate(connect(), "demo", [Migration(2, "b", _create), Migration(1, "a", _create)])


def test_a_transaction_commits_or_rolls_back_everything(tmp_path):
    con = connect(tmp_path / "n.duckdb")
    con.execute("CREATE TABLE things (id INTEGER)")
    with transaction(con) as cur:
        cur.execute("INSERT INTO things VALUES (1)")
    with pytest.raises(RuntimeError, match="halfway"):
        with transaction(con) as cur:
            cur.execute("INSERT INTO things VALUES (2)")
            raise RuntimeError("halfway")
    assert con.execute("SELECT id FROM things").fetchall() == [(1,)]


def test_a_failing_rollback_never_hides_the_error_that_ended_the_block(tmp_path, caplog):
    con = connect(tmp_path / "n.duckdb")
    con.execute("CREATE TABLE things (id INTEGER)")
    with pytest.raises(RuntimeError, match="the real failure") as raised:
        with transaction(con) as cur:
            cur.execute("INSERT INTO things VALUES (1)")
            con.close()  # ROLLBACK now fails too
            raise RuntimeError("the real failure")
    assert any("ROLLBACK failed too" in note for note in raised.value.__notes__)
    assert "ROLLBACK failed" in caplog.text
    con = connect(tmp_path / "n.duckdb")
    assert con.execute("SELECT count(*) FROM things").fetchone() == (0,)  # never committed


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                 st.floats(allow_nan=False, allow_infinity=False),
                 st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))))
def test_a_literal_reads_back_as_the_same_value(value):
    con = _literal_con()
    (got,) = con.execute(f"SELECT {literal(value)}").fetchone()
    assert got == value and type(got) is type(value)


def test_literals_refuse_what_sql_text_cannot_carry():
    for bad in ("a\x00b", "lone \ud800 surrogate", float("nan"), float("inf"), b"bytes", [1]):
        with pytest.raises(DatabaseError):
            literal(bad)


_CON: list[duckdb.DuckDBPyConnection] = []


def _literal_con() -> duckdb.DuckDBPyConnection:
    if not _CON:
        _CON.append(duckdb.connect())
    return _CON[0]
