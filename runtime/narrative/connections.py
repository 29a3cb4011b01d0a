"""The narrative state engine's connections: one writer under a lock, a pool of readers.

Concurrency and durability. DuckDB connections are not thread-safe, so the engine
writes through one connection under a lock and reads through a pool of cursors
(each a connection of its own to the same database): readers never wait for
each other, and DuckDB's MVCC shows them only committed rows. Every write call
commits before it returns (autocommit for one statement, an explicit transaction
for several), and a commit is in DuckDB's write-ahead log, so a process killed
right after a call returned loses nothing.

One engine per database file. An engine that opens its file refuses to start while
another engine of the same process has that file open (its memory journal would be
replayed and truncated under the other's feet), and a file another process holds is
refused with DuckDB's lock holder named: both are a ``NarrativeStateError`` naming the
file. An engine on a shared connection (``connection=``) claims no file: the
connection's owner opened it once.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import duckdb

from narratoria.runtime.db import DatabaseLocked, connect
from narratoria.runtime.narrative.models import NarrativeStateError

# Database files an engine of this process has open (real paths), so that a second engine
# on the same file is refused: it would replay the first's memory journal (rows the
# first still holds as pending, inserted twice) and truncate it under the first (rows
# the first acknowledged, lost on a crash). DuckDB itself lets one process open a file
# twice, so only this registry can tell.
_open_files: set[str] = set()
_open_files_lock = threading.Lock()


def _claim_file(db_path: str) -> str | None:
    """Register ``db_path`` as this engine's; None for an in-memory database.

    NarrativeStateError naming the file if another engine of this process has it."""
    if not db_path or db_path.startswith(":memory:"):
        return None
    key = os.path.realpath(db_path)
    with _open_files_lock:
        if key in _open_files:
            raise NarrativeStateError(
                f"{db_path}: another narrative state engine of this process (pid {os.getpid()}) "
                "has this database file open; close it first, or share its connection "
                "(NarrativeStateEngine(..., connection=...))")
        _open_files.add(key)
    return key


def _release_file(key: str | None) -> None:
    if key is not None:
        with _open_files_lock:
            _open_files.discard(key)


class Connections:
    """The writer and the readers of one engine; opens (and claims) ``db_path`` unless
    given an open ``connection``, which it then leaves open on ``close``."""

    def __init__(self, db_path: str, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self.owns_connection = connection is None
        self._file = _claim_file(db_path) if connection is None else None
        try:
            self._root = connection if connection is not None else connect(db_path)
        except DatabaseLocked as exc:
            _release_file(self._file)
            raise NarrativeStateError(str(exc)) from None
        except BaseException:
            _release_file(self._file)
            raise
        self._closed = False
        self._write_lock = threading.RLock()
        self._pool_lock = threading.Lock()
        self._idle_readers: list[duckdb.DuckDBPyConnection] = []
        self._all_readers: list[duckdb.DuckDBPyConnection] = []
        self._writer: duckdb.DuckDBPyConnection | None = None
        self._factory: duckdb.DuckDBPyConnection | None = None
        try:
            self._writer = self._root.cursor()
            self._factory = self._root.cursor()  # makes the readers' cursors
        except BaseException:
            self._close_all()
            raise

    @property
    def writer(self) -> duckdb.DuckDBPyConnection:
        """The writer, for the engine's start-up (migrations, journal replay) only."""
        assert self._writer is not None
        return self._writer

    def close(self, last_write: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> None:
        """Run ``last_write`` with the writer (once), then close every connection (and the
        database, if opened here). Idempotent."""
        with self._write_lock, self._pool_lock:
            if self._closed:
                return
            try:
                if last_write is not None:
                    last_write(self.writer)
            finally:
                self._closed = True
                self._close_all()

    def _close_all(self) -> None:
        for cursor in [*self._all_readers, self._factory, self._writer]:
            if cursor is not None:
                cursor.close()
        if self.owns_connection:
            try:
                self._root.close()  # closing the database checkpoints it
            finally:
                _release_file(self._file)
                self._file = None

    def ensure_open(self) -> None:
        if self._closed:
            raise NarrativeStateError("the narrative state engine is closed")

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._pool_lock:
            self.ensure_open()
            if self._idle_readers:
                cursor = self._idle_readers.pop()
            else:
                cursor = self._factory.cursor()
                self._all_readers.append(cursor)
        try:
            yield cursor
        finally:
            with self._pool_lock:
                if not self._closed:
                    self._idle_readers.append(cursor)

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._write_lock:
            self.ensure_open()
            yield self.writer

    def fetch_one(self, con: duckdb.DuckDBPyConnection | None, sql: str, params: list[Any]) -> Any:
        """One row through ``con`` (a caller's writer or reader), else a pooled reader."""
        if con is not None:
            return con.execute(sql, params).fetchone()
        with self.reading() as cursor:
            return cursor.execute(sql, params).fetchone()

    def fetch_all(self, con: duckdb.DuckDBPyConnection | None, sql: str, params: list[Any]) -> list[Any]:
        if con is not None:
            return con.execute(sql, params).fetchall()
        with self.reading() as cursor:
            return cursor.execute(sql, params).fetchall()
