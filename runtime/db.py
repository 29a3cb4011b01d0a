"""Opening Narratoria's DuckDB database: the vss extension and schema migrations.

One database file per data directory holds everything the store remembers. The
vss extension is loaded from the file shipped in the `duckdb-extension-vss`
package, never fetched, and its version must match DuckDB's. Each component of
the store (the narrative state engine, the persistence layer) owns an ordered
list of migrations; ``migrate`` applies the ones a database has not seen yet, each
in its own transaction, so an old file moves forward on open and a failed
migration leaves the previous version intact.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import duckdb

DB_FILENAME = "narratoria.duckdb"

log = logging.getLogger(__name__)

if importlib.util.find_spec("pandas") is None:
    # DuckDB's binding tries to import pandas (twice) for every SQL parameter it
    # converts, ~0.5 ms a parameter when pandas is absent; a None entry fails fast.
    sys.modules.setdefault("pandas", None)  # type: ignore[arg-type]


class DatabaseError(RuntimeError):
    pass


class DatabaseLocked(DatabaseError):
    """Another process holds the database file (DuckDB allows one writer process).

    ``pid`` is the holder's process id when DuckDB's message names it, else None."""

    def __init__(self, path: str, pid: int | None, detail: str) -> None:
        self.path, self.pid, self.detail = path, pid, detail
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"{path}: the database is in use by {holder} (only one process may "
                         f"open it: is a narratoria daemon running on this data dir?)"
                         + ("" if pid is not None else f"; DuckDB said: {detail}"))

    def __reduce__(self) -> tuple:
        return (type(self), (self.path, self.pid, self.detail))


# DuckDB's message: 'IO Error: Could not set lock on file "<path>": Conflicting lock is
# held in <program> (PID <n>) by user <u>. See also ...'. Only the pid is taken from it;
# a message that does not match keeps its (bounded) text instead.
_LOCK_MESSAGE = re.compile(r"could not set lock on file", re.IGNORECASE)
_LOCK_HOLDER = re.compile(r"\(PID (\d{1,10})\)")
_DETAIL_MAX = 300


def lock_holder(message: str) -> int | None:
    """The pid DuckDB names as holding a file's lock, or None."""
    match = _LOCK_HOLDER.search(message)
    return int(match.group(1)) if match else None


def vss_extension_path() -> Path:
    spec = importlib.util.find_spec("duckdb_extension_vss")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseError("package duckdb-extension-vss is not installed (run deploy/setup.sh)")
    base = Path(next(iter(spec.submodule_search_locations)))
    path = base / "extensions" / f"v{duckdb.__version__}" / "vss.duckdb_extension"
    if not path.is_file():
        shipped = sorted(p.name for p in (base / "extensions").glob("v*"))
        raise DatabaseError(
            f"no vss extension for duckdb {duckdb.__version__} in {base} (found {shipped}); "
            "duckdb and duckdb-extension-vss versions must match"
        )
    return path


def connect(path: str | Path = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database with vss loaded and every network-reaching autoload off.

    DatabaseLocked (naming the file and the holder's pid) when another process has it open."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path), read_only=read_only, config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        })
    except duckdb.IOException as exc:
        message = str(exc)
        if not _LOCK_MESSAGE.search(message):
            raise
        raise DatabaseLocked(str(path), lock_holder(message), message[:_DETAIL_MAX]) from None
    con.execute(f"LOAD '{vss_extension_path()}'")
    return con


def literal(value: str | int | float | bool | None) -> str:
    """``value`` as a DuckDB SQL literal, for the few hot writes that skip parameters.

    A statement with parameters costs DuckDB a prepare and a bind besides the run:
    a one-row insert into the memories table took 2.8 ms with parameters and 1.5 ms
    as one literal statement. Strings are standard SQL literals (a quote doubled,
    nothing else special: DuckDB has no backslash escapes in '...'); NUL, which a
    literal cannot carry, is refused; only finite floats are written.
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise DatabaseError(f"cannot store the non-finite number {value!r}")
        return f"'{value!r}'::DOUBLE"  # a bare numeral parses as DECIMAL first and rounds
    if isinstance(value, str):
        if "\x00" in value:
            raise DatabaseError("text containing a NUL character cannot be stored")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DatabaseError(f"text is not valid Unicode at position {exc.start}") from None
        return "'" + value.replace("'", "''") + "'"
    raise DatabaseError(f"no SQL literal for a {type(value).__name__}")


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``con`` inside BEGIN ... COMMIT; any error (a failed COMMIT included) rolls back.

    The caller holds whatever lock makes ``con`` its own. The error that ended the
    block is always the one raised: a ROLLBACK that fails too (a failed COMMIT has
    already ended the transaction; a closed connection cannot roll back) is logged
    and noted on that error, never raised in its place.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException as exc:
        try:
            con.execute("ROLLBACK")
        except Exception as rollback_error:  # noqa: BLE001 - must not hide ``exc``
            log.warning("ROLLBACK failed after %r: %r", exc, rollback_error)
            exc.add_note(f"ROLLBACK failed too: {rollback_error!r}")
        raise


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[duckdb.DuckDBPyConnection], None]


def _ensure_ledger(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " component VARCHAR NOT NULL, version INTEGER NOT NULL, name VARCHAR NOT NULL,"
        " applied_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (component, version))"
    )


def schema_version(con: duckdb.DuckDBPyConnection, component: str) -> int:
    _ensure_ledger(con)
    row = con.execute(
        "SELECT max(version) FROM schema_migrations WHERE component = ?", [component]
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(con: duckdb.DuckDBPyConnection, component: str,
            migrations: list[Migration]) -> int:
    """Apply pending migrations in order; return the schema version reached."""
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)) or (versions and versions[0] < 1):
        raise DatabaseError(f"{component}: migration versions must be increasing from 1")
    current = schema_version(con, component)
    if versions and current > versions[-1]:
        raise DatabaseError(
            f"{component}: database schema v{current} is newer than this runtime "
            f"(v{versions[-1]}); upgrade Narratoria"
        )
    for migration in migrations:
        if migration.version <= current:
            continue
        with transaction(con):
            migration.apply(con)
            con.execute(
                "INSERT INTO schema_migrations (component, version, name) VALUES (?, ?, ?)",
                [component, migration.version, migration.name],
            )
        current = migration.version
    return current
