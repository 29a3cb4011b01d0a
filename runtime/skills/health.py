"""Skill health per session (docs/plans.md, "Skill health").

    healthy ──[timeout/network error]──▶ temporaryFailure
    healthy ──[3 consecutive failures]──▶ degraded
    degraded ──[success]──▶ healthy
    degraded ──[3 more failures]──▶ permanentFailure
    temporaryFailure ──[retry success]──▶ healthy
    temporaryFailure ──[max retries exceeded]──▶ permanentFailure
    permanentFailure ──[session restart]──▶ healthy
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Health(str, Enum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    TEMPORARY_FAILURE = "temporaryFailure"
    PERMANENT_FAILURE = "permanentFailure"


FAILURES_TO_DEGRADE = 3
FAILURES_TO_DISABLE = 3


@dataclass
class _Record:
    state: Health = Health.HEALTHY
    failures: int = 0  # consecutive failures counted toward the next transition


@dataclass
class SkillHealthTracker:
    """Health of every skill in one session; ``reset`` is the session restart."""

    _records: dict[str, _Record] = field(default_factory=dict)

    def state(self, skill: str) -> Health:
        return self._records.get(skill, _Record()).state

    def _record(self, skill: str) -> _Record:
        return self._records.setdefault(skill, _Record())

    def record_success(self, skill: str) -> Health:
        rec = self._record(skill)
        if rec.state is not Health.PERMANENT_FAILURE:
            rec.state = Health.HEALTHY
            rec.failures = 0
        return rec.state

    def record_failure(self, skill: str, *, transient: bool = False) -> Health:
        """One failed attempt; ``transient`` for a timeout or a network error."""
        rec = self._record(skill)
        if rec.state is Health.HEALTHY:
            if transient:
                rec.state, rec.failures = Health.TEMPORARY_FAILURE, 0
            else:
                rec.failures += 1
                if rec.failures >= FAILURES_TO_DEGRADE:
                    rec.state, rec.failures = Health.DEGRADED, 0
        elif rec.state is Health.DEGRADED:
            rec.failures += 1
            if rec.failures >= FAILURES_TO_DISABLE:
                rec.state, rec.failures = Health.PERMANENT_FAILURE, 0
        return rec.state

    def record_retries_exhausted(self, skill: str) -> Health:
        rec = self._record(skill)
        if rec.state is Health.TEMPORARY_FAILURE:
            rec.state, rec.failures = Health.PERMANENT_FAILURE, 0
        return rec.state

    def disabled(self) -> set[str]:
        return {n for n, r in self._records.items() if r.state is Health.PERMANENT_FAILURE}

    def snapshot(self) -> dict[str, str]:
        return {name: rec.state.value for name, rec in sorted(self._records.items())}

    def reset(self) -> None:
        self._records.clear()
