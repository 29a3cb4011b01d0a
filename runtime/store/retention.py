"""Retention policies (docs/store.md, "Retention"): drop what a policy names, within one playthrough, nothing else.

A policy names one data type and any of three limits, each applied per
playthrough:

- ``max_age``: drop records whose time column is older than ``now - max_age``;
- ``max_count``: keep the newest ``max_count`` records, drop the rest;
- ``max_bytes``: keep the newest records while their estimated size adds up to at
  most ``max_bytes``, drop the rest. The estimate is the stored text's UTF-8
  bytes, 8 per number, timestamp or flag, and 4 per vector dimension — what the
  row costs before compression, so the limit is predictable, not DuckDB's page
  accounting.

"Newest" orders by the time column, then by key, so ties are dropped in a
stable order. Nothing runs by itself: ``PersistenceStore.apply_retention`` runs
policies when asked, and ``run_idle_maintenance`` is what an idle loop calls.
Every statement is scoped by ``scoped_where`` to one playthrough and one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from narratoria.runtime.store.filters import Filters, scoped_where
from narratoria.runtime.store.records import DataType, parse_data_type
from narratoria.runtime.store.schema import SPECS, TableSpec


@dataclass(frozen=True)
class RetentionPolicy:
    data_type: DataType
    max_age: timedelta | None = None
    max_count: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_type", parse_data_type(self.data_type))
        if self.max_age is None and self.max_count is None and self.max_bytes is None:
            raise ValueError("a retention policy needs max_age, max_count or max_bytes")
        if self.max_age is not None and self.max_age <= timedelta(0):
            raise ValueError(f"max_age: must be positive, got {self.max_age}")
        for name in ("max_count", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name}: must be an int >= 0, got {value!r}")


@dataclass(frozen=True)
class RetentionResult:
    data_type: DataType
    playthrough_id: str
    rule: str  # max_age | max_count | max_bytes
    deleted: int


def row_bytes_sql(spec: TableSpec, dimensions: int) -> str:
    """SQL for one row's estimated size, from the table's column types."""
    terms = []
    for column, sql_type in spec.sql_types.items():
        if sql_type == "VARCHAR":
            terms.append(f'coalesce(strlen("{column}"), 0)')
        elif sql_type == "VARCHAR[]":
            terms.append(f'coalesce(list_sum(list_transform("{column}", x -> strlen(x))), 0)')
        else:
            terms.append("8")
    if spec.text_field is not None:
        terms.append(str(4 * dimensions))
    return " + ".join(terms)


def apply_policy(cur: duckdb.DuckDBPyConnection, policy: RetentionPolicy, playthrough_id: str,
                 now: datetime, dimensions: int) -> list[RetentionResult]:
    """Run one policy in one playthrough; the caller holds the write transaction."""
    spec = SPECS[policy.data_type]
    results = []
    if policy.max_age is not None:
        where, params = scoped_where(spec.data_type, playthrough_id, Filters(until=now - policy.max_age))
        results.append(_delete(cur, spec, playthrough_id, "max_age",
                               f"DELETE FROM {spec.table} WHERE {where}", params))
    if policy.max_count is not None:
        results.append(_delete_beyond(cur, spec, playthrough_id, "max_count",
                                      "row_number() OVER newest", policy.max_count, dimensions))
    if policy.max_bytes is not None:
        results.append(_delete_beyond(cur, spec, playthrough_id, "max_bytes",
                                      f"sum({row_bytes_sql(spec, dimensions)}) OVER newest",
                                      policy.max_bytes, dimensions))
    return results


def _delete_beyond(cur: duckdb.DuckDBPyConnection, spec: TableSpec, playthrough_id: str, rule: str,
                   running: str, limit: int, dimensions: int) -> RetentionResult:
    """Delete the rows whose running total, newest first, exceeds ``limit``."""
    where, params = scoped_where(spec.data_type, playthrough_id)
    newest = f'ORDER BY "{spec.time_column}" DESC, "{spec.key}" DESC'
    doomed = (f'SELECT "{spec.key}" FROM (SELECT "{spec.key}", {running} AS running'
              f" FROM {spec.table} WHERE {where} WINDOW newest AS ({newest}"
              f" ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) WHERE running > ?")
    return _delete(cur, spec, playthrough_id, rule,
                   f'DELETE FROM {spec.table} WHERE {where} AND "{spec.key}" IN ({doomed})',
                   params + params + [limit])


def _delete(cur: duckdb.DuckDBPyConnection, spec: TableSpec, playthrough_id: str, rule: str,
            sql: str, params: list) -> RetentionResult:
    deleted = cur.execute(sql, params).fetchone()[0]
    return RetentionResult(spec.data_type, playthrough_id, rule, int(deleted))
