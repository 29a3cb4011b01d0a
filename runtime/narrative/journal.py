"""The memory journal: a durable memory write for a fraction of a DuckDB commit.

Why it exists: inserting one memory row (a ``FLOAT[384]`` vector and ten other
columns) costs DuckDB ~1.5–2 ms per statement and commit, most of it fixed per
statement; the same rows inserted 64 to a statement cost ~0.4 ms each. So the engine
appends each write's rows to this journal as one frame, synced to disk before the
call returns, and moves the journaled rows into DuckDB in one statement when enough
are pending, before any query reads memories, and on close.

A frame is ``<length u32><crc32 u32><msgpack rows>``. Opening a journal reads the
frames left by a process that died before moving them: the engine inserts the rows
its table does not have yet (a crash between a move's commit and the journal's
truncation leaves rows in both places; the row id tells). A torn last frame can
only come from a write that never returned (the call was not acknowledged), so it
is dropped with a warning, and the file is cut back to the last whole frame.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import msgspec

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<II")  # payload length, crc32 of the payload


class JournalRow(msgspec.Struct, array_like=True, frozen=True):
    """One memory row exactly as it goes into ``narrative_state.memories``."""

    id: int
    character_id: str
    chunk: str
    vector: bytes            # float32, native order: the embedder's output as stored
    embedding_model: str
    embedding_version: str
    moment_id: str
    moment_seq: int
    take_id: int
    chunk_type: str
    tags: str | None


class JournalError(RuntimeError):
    """The journal file cannot be read or written; the message names the file."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[JournalRow])


def journal_path(db_path: str) -> Path | None:
    """The journal beside a database file; None for an in-memory database."""
    if not db_path or db_path.startswith(":memory:"):
        return None
    return Path(db_path + ".memories.journal")


class MemoryJournal:
    """Rows written but not yet in DuckDB. ``path=None`` keeps them in memory only
    (an in-memory database dies with its process anyway)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._rows: list[JournalRow] = []
        self._fd: int | None = None
        if path is not None:
            self._rows = self._recover(path)
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            except OSError as exc:
                raise JournalError(f"memory journal {path}: cannot open: {exc.strerror}") from None

    @property
    def pending(self) -> list[JournalRow]:
        return list(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def append(self, rows: list[JournalRow]) -> None:
        """Add ``rows`` as one frame (all or nothing), on disk when this returns."""
        if self._fd is not None:
            payload = _encoder.encode(rows)
            frame = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
            try:
                os.write(self._fd, frame)
                os.fdatasync(self._fd)
            except OSError as exc:
                raise JournalError(f"memory journal {self.path}: write failed: {exc.strerror}") from None
        self._rows.extend(rows)

    def clear(self) -> None:
        """Forget every row: call once they are committed in DuckDB."""
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                os.fdatasync(self._fd)
            except OSError as exc:
                raise JournalError(f"memory journal {self.path}: truncate failed: {exc.strerror}") from None
        self._rows.clear()

    def close(self) -> None:
        """Close the file; an empty journal is removed (nothing left to recover)."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        if not self._rows and self.path is not None:
            self.path.unlink(missing_ok=True)

    @staticmethod
    def _recover(path: Path) -> list[JournalRow]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise JournalError(f"memory journal {path}: cannot read: {exc.strerror}") from None
        rows: list[JournalRow] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, offset)
            end = offset + _HEADER.size + length
            payload = data[offset + _HEADER.size:end]
            if len(payload) < length or zlib.crc32(payload) != crc:
                if end < len(data):  # whole frames follow: not a torn write but damage
                    raise JournalError(f"memory journal {path}: frame at byte {offset} is damaged "
                                       "(checksum mismatch); the file is left as it is")
                break
            try:
                rows.extend(_decoder.decode(payload))
            except msgspec.ValidationError as exc:
                raise JournalError(f"memory journal {path}: frame at byte {offset} "
                                   f"is not a list of memory rows: {exc}") from None
            offset = end
        if offset < len(data):
            log.warning("memory journal %s: dropped a torn last frame (%d bytes at byte %d): "
                        "a write that never returned", path, len(data) - offset, offset)
            os.truncate(path, offset)
        return rows
