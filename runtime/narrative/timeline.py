"""The story's timeline: moments (when), takes (which telling) and branching.

A moment is a temporal marker with a unique ``sequence``; a take is one telling of the
story, a root or a branch of another take at a moment. Moments and a take's parent and
branch point never change (a take's status is the one update), so lookups are cached
and a cache is never wrong, only missing (another engine on the database may create
what this one has not seen: never a negative answer).

Visibility. For a query of take ``T_0`` at moment ``q``, walk the ancestry
``T_0, T_1 = parent(T_0), ..., T_k`` (the root). ``T_i`` branched from ``T_{i+1}``
at moment ``b_i``. A row written in ``T_i`` is visible iff::

    seq(row) <= seq(q)  and  (i == 0  or  seq(row) < min(seq(b_0), ..., seq(b_{i-1})))

so a branch inherits its parent's history strictly before the branch point and
never the parent's writes at or after it, and the cut compounds down a chain of
branches. ``Timeline.scope`` turns a take into ``(take_id, cutoff)`` pairs (one
recursive query, cached), and ``visibility`` keeps a row iff, in SQL::

    character_id = :character
    AND moment_seq <= CASE take_id WHEN :t0 THEN :max0 WHEN :t1 THEN :max1 ... END

with ``max_i = min(seq(q), cutoff_i - 1)`` (a take outside the ancestry gives
NULL: never visible). Rows carry their moment's sequence (``moment_seq``), so
this is a single-table range test.
"""

from __future__ import annotations

from typing import Any, Callable

import duckdb

from narratoria.runtime.narrative.checks import (BIGINT_MIN, check_choice, check_int,
                                                 check_optional_text, check_text, json_text, now)
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.models import (TAKE_STATUSES, DuplicateError, InvalidArgumentError,
                                                 Take, UnknownMomentError, UnknownTakeError)
from narratoria.runtime.narrative.schema import SCHEMA

Scope = tuple[tuple[int, "int | None"], ...]  # (take id, exclusive sequence cutoff), root first


def visibility(scope: Scope, moment_seq: int, first: int) -> tuple[Callable[[str], str], list[int]]:
    """The SQL condition "row visible at ``moment_seq`` in the take of ``scope``"
    for a table alias, numbering its parameters from ``$first`` (so that several
    tables of one statement share them), and those parameters."""
    params: list[int] = []
    whens = []
    for take_id, cutoff in scope:
        whens.append(f"WHEN ${first + len(params)} THEN ${first + len(params) + 1}")
        params += [take_id, moment_seq if cutoff is None else min(moment_seq, cutoff - 1)]
    cases = " ".join(whens)
    return (lambda alias: f"{alias}.moment_seq <= (CASE {alias}.take_id {cases} END)"), params


class Timeline:
    def __init__(self, connections: Connections) -> None:
        self._db = connections
        self._moment_seqs: dict[str, int] = {}
        self._scopes: dict[int, Scope] = {}

    # -- lookups: validated, cached, read through ``con`` (or a reader) on a miss

    def moment_seq(self, moment_id: Any, what: str = "moment",
                   con: duckdb.DuckDBPyConnection | None = None) -> int:
        seq = self._moment_seqs.get(moment_id) if isinstance(moment_id, str) else None
        if seq is not None:
            return seq
        check_text(moment_id, f"{what} id")
        row = self._db.fetch_one(con, f"SELECT sequence FROM {SCHEMA}.moments WHERE id = ?", [moment_id])
        if row is None:
            raise UnknownMomentError(f"unknown {what} {moment_id!r}: create_moment it first")
        self._moment_seqs[moment_id] = row[0]
        return row[0]

    def scope(self, take_id: Any, con: duckdb.DuckDBPyConnection | None = None) -> Scope:
        scope = self._scopes.get(take_id) if isinstance(take_id, int) and not isinstance(take_id, bool) \
            else None
        if scope is not None:
            return scope
        check_int(take_id, "take id")
        # The spec's recursive ancestry, carrying the compounding branch cutoff: a
        # take's parent is visible below the child's branch point only, the
        # grandparent below the lower of the two branch points, and so on.
        rows = self._db.fetch_all(con, f"""
            WITH RECURSIVE chain(depth, take_id, parent_id, branch_point, cutoff) AS (
                SELECT 0, id, parent_take_id, branch_point, CAST(NULL AS BIGINT)
                FROM {SCHEMA}.takes WHERE id = ?
              UNION ALL
                SELECT c.depth + 1, t.id, t.parent_take_id, t.branch_point,
                       CASE WHEN c.cutoff IS NULL THEN b.sequence
                            ELSE least(c.cutoff, b.sequence) END
                FROM chain c
                JOIN {SCHEMA}.moments b ON b.id = c.branch_point
                JOIN {SCHEMA}.takes t ON t.id = c.parent_id
            )
            SELECT take_id, cutoff FROM chain ORDER BY depth DESC""", [take_id])
        if not rows:
            raise UnknownTakeError(f"unknown take {take_id!r}: create_take it first")
        scope = tuple((int(t), None if c is None else int(c)) for t, c in rows)
        self._scopes[take_id] = scope
        return scope

    # -- writes and listings

    def create_moment(self, id: str, sequence: int, label: str | None,
                      metadata: dict[str, Any] | None) -> str:
        check_text(id, "moment id")
        if check_int(sequence, "moment sequence") == BIGINT_MIN:
            # The visibility bound of a branch at moment M is seq(M) - 1.
            raise InvalidArgumentError(f"moment sequence must be above {BIGINT_MIN}")
        check_optional_text(label, "moment label")
        metadata_text = json_text(metadata, "moment metadata")
        with self._db.writing() as con:
            if con.execute(f"SELECT 1 FROM {SCHEMA}.moments WHERE id = ?", [id]).fetchone():
                raise DuplicateError(f"moment {id!r} already exists")
            holder = con.execute(f"SELECT id FROM {SCHEMA}.moments WHERE sequence = ?",
                                 [sequence]).fetchone()
            if holder:
                raise DuplicateError(f"sequence {sequence} is already moment {holder[0]!r}")
            try:
                con.execute(f"INSERT INTO {SCHEMA}.moments VALUES (?, ?, ?, ?)",
                            [id, sequence, label, metadata_text])
            except duckdb.ConstraintException as exc:  # another engine on this database won
                raise DuplicateError(f"moment {id!r} or sequence {sequence} already exists") from exc
        self._moment_seqs[id] = sequence
        return id

    def create_root(self, notes: str | None) -> int:
        check_optional_text(notes, "take notes")
        with self._db.writing() as con:
            row = con.execute(
                f"INSERT INTO {SCHEMA}.takes (created_at, notes) VALUES (?, ?) RETURNING id",
                [now(), notes]).fetchone()
        return int(row[0])

    def branch(self, parent_take_id: int, branch_point: str, notes: str | None) -> int:
        if branch_point is None:
            raise InvalidArgumentError("a branch needs a branch point (the moment it retries from)")
        check_optional_text(notes, "take notes")
        with self._db.writing() as con:
            self.scope(parent_take_id, con)  # the parent exists
            self.moment_seq(branch_point, "branch point", con)
            row = con.execute(
                f"INSERT INTO {SCHEMA}.takes (parent_take_id, branch_point, created_at, notes) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                [parent_take_id, branch_point, now(), notes]).fetchone()
        return int(row[0])

    def list_takes(self, status: str | None, moment_id: str | None) -> list[Take]:
        check_choice(status, TAKE_STATUSES, "take status", optional=True)
        with self._db.reading() as con:
            if moment_id is not None:
                self.moment_seq(moment_id, con=con)
            rows = con.execute(
                f"SELECT id, parent_take_id, branch_point, created_at, status, notes FROM {SCHEMA}.takes "
                "WHERE (?::VARCHAR IS NULL OR status = ?) AND (?::VARCHAR IS NULL OR branch_point = ?) "
                "ORDER BY id", [status, status, moment_id, moment_id]).fetchall()
        return [Take(int(i), None if p is None else int(p), b, c.isoformat(), s, n)
                for i, p, b, c, s, n in rows]

    def set_take_status(self, take_id: int, status: str) -> None:
        check_choice(status, TAKE_STATUSES, "take status")
        with self._db.writing() as con:
            self.scope(take_id, con)
            con.execute(f"UPDATE {SCHEMA}.takes SET status = ? WHERE id = ?", [status, take_id])

    def ancestry(self, take_id: int) -> list[int]:
        self._db.ensure_open()
        return [t for t, _ in self.scope(take_id)]
