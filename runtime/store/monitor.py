"""Query monitoring (docs/store.md, "Monitoring"): latency, result count and scope of every operation.

Each operation is kept in a bounded ring (the newest ``capacity``) for a status
page or a test to read, and logged: DEBUG normally, WARNING when a query took
longer than ``slow_ms`` (a 200 ms budget). Latency is what the caller
waited, embedding of the query text included; ``embed_ms`` says how much of it
was the embedder.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

log = logging.getLogger("narratoria.store")

# The operations the 200 ms latency budget is about; a bulk write may take longer.
QUERY_OPERATIONS = frozenset({"semantic_search", "exact_match", "get"})


@dataclass
class QueryStat:
    operation: str  # semantic_search, exact_match, get, store, store_many, update, ...
    data_type: str
    playthrough_id: str | None  # None: a run across playthroughs (retention)
    filters: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    result_count: int = 0
    latency_ms: float = 0.0
    embed_ms: float | None = None
    started_at: float = 0.0  # time.time()
    error: str | None = None


class QueryMonitor:
    def __init__(self, capacity: int = 1000, slow_ms: float = 200.0) -> None:
        self.slow_ms = slow_ms
        self._recent: deque[QueryStat] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    @contextmanager
    def measure(self, operation: str, data_type: str, playthrough_id: str | None,
                filters: dict[str, Any] | None = None, limit: int | None = None) -> Iterator[QueryStat]:
        """Time the block; the block sets ``result_count`` (and ``embed_ms``) on the stat."""
        stat = QueryStat(operation, data_type, playthrough_id, dict(filters or {}), limit,
                         started_at=time.time())
        start = time.perf_counter()
        try:
            yield stat
        except BaseException as exc:
            stat.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            stat.latency_ms = (time.perf_counter() - start) * 1000.0
            self._record(stat)

    def _record(self, stat: QueryStat) -> None:
        with self._lock:
            self._recent.append(stat)
        slow = stat.operation in QUERY_OPERATIONS and stat.latency_ms > self.slow_ms
        level = logging.WARNING if slow else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(level, "%s %s playthrough=%s filters=%s limit=%s -> %d results in %.1f ms%s%s",
                    stat.operation, stat.data_type, stat.playthrough_id, stat.filters, stat.limit,
                    stat.result_count, stat.latency_ms,
                    "" if stat.embed_ms is None else f" (embedding {stat.embed_ms:.1f} ms)",
                    "" if stat.error is None else f" failed: {stat.error}")

    def recent(self, operation: str | None = None) -> list[QueryStat]:
        """The ring's stats, oldest first, optionally of one operation."""
        with self._lock:
            stats = list(self._recent)
        return [s for s in stats if operation is None or s.operation == operation]

    def percentiles(self, operation: str, points: tuple[float, ...] = (50, 95)) -> dict[str, float]:
        """Latency percentiles (nearest rank) of one operation over the ring, e.g. {'p50': .., 'p95': ..}."""
        latencies = sorted(s.latency_ms for s in self.recent(operation) if s.error is None)
        if not latencies:
            return {}
        n = len(latencies)
        return {f"p{p:g}": latencies[min(n - 1, max(0, math.ceil(p / 100 * n) - 1))] for p in points}

    def clear(self) -> None:
        with self._lock:
            self._recent.clear()
