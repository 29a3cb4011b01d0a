"""Decay of reputation and perception toward neutral, computed when read (docs/store.md, "Decay").

Stored scores are never rewritten by decay: a read computes the decayed value
from the stored score and the time since it was last set. That keeps reads
read-only (no write lock, no write amplification) and makes decay exact however
rarely a value is read.

The rule: below the strong-opinion threshold (|score| < 50) a score loses
``rate`` (10%) of itself per time unit; at or above it, ``rate * strong_factor``
(5%). A strong opinion therefore fades slowly until it reaches the threshold,
then at the neutral rate — continuously, with no jump at the boundary:

    u  = elapsed / time_unit                     (elapsed < 0 counts as 0)
    rs = rate * strong_factor
    |s| <  T:  s(u) = s * (1 - rate)^u
    |s| >= T:  u1   = ln(T / |s|) / ln(1 - rs)   (time to fade to T)
               s(u) = s * (1 - rs)^u                     for u <= u1
               s(u) = sign(s) * T * (1 - rate)^(u - u1)  for u >  u1
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class DecayPolicy:
    time_unit: timedelta = timedelta(days=1)
    rate: float = 0.10  # fraction lost per time unit by an ordinary opinion
    strong_threshold: float = 50.0  # |score| at which an opinion counts as strong
    strong_factor: float = 0.5  # strong opinions decay at rate * strong_factor

    def __post_init__(self) -> None:
        if self.time_unit <= timedelta(0):
            raise ValueError(f"time_unit: must be positive, got {self.time_unit}")
        if not 0.0 <= self.rate < 1.0:
            raise ValueError(f"rate: must be in [0, 1), got {self.rate}")
        if self.strong_threshold <= 0:
            raise ValueError(f"strong_threshold: must be positive, got {self.strong_threshold}")
        if not 0.0 <= self.strong_factor <= 1.0:
            raise ValueError(f"strong_factor: must be in [0, 1], got {self.strong_factor}")


def decayed(score: float, elapsed: timedelta, policy: DecayPolicy,
            rate: float | None = None) -> float:
    """``score`` after ``elapsed``; ``rate`` overrides the policy's (a record's own decayRate)."""
    rate = policy.rate if rate is None else min(rate, 1.0)
    units = max(elapsed / policy.time_unit, 0.0)
    if score == 0 or units == 0 or rate == 0:
        return score
    if rate >= 1.0:
        return 0.0
    threshold = policy.strong_threshold
    if abs(score) < threshold:
        return score * (1.0 - rate) ** units
    strong_rate = rate * policy.strong_factor
    if strong_rate == 0:
        return score  # strong opinions were configured never to fade
    to_threshold = math.log(threshold / abs(score)) / math.log(1.0 - strong_rate)
    if units <= to_threshold:
        return score * (1.0 - strong_rate) ** units
    return math.copysign(threshold, score) * (1.0 - rate) ** (units - to_threshold)
