"""A turn's place in the model's queue, as its ``queued`` events tell it.

While a turn awaits the model (a plan, its narration, its choices), the coordinator asks
the planner about every ``QUEUE_POLL_S`` where the session's oldest waiting request
stands (``PlannerActor.queue_position``: ``{"position", "waitS", "kind"}``, or None when
none of its requests waits). :class:`QueueWatch` decides what the player hears of it:
one ``queued`` event when the wait starts and one each time the position changes, so a
front-end can show "waiting for the model: position 2" without a line every poll, and
nothing while the request decodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Often enough that a place gained shows within a moment; seldom enough that a handful
# of waiting turns cost the planner actor a few cheap calls a second.
QUEUE_POLL_S = 0.3


def queued_payload(position: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``queued`` event's payload (the proto's ``Queued`` fields) for one answer of
    ``queue_position``; None when the answer names no place (a malformed one included:
    the planner's side may be older or newer than this)."""
    try:
        place = int(position["position"])
        wait_s = float(position.get("waitS", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    if place < 1:
        return None
    return {"position": place, "wait_s": round(max(wait_s, 0.0), 3),
            "call": str(position.get("kind", ""))}


@dataclass
class QueueWatch:
    """What to emit for each poll of one turn's place in the model's queue."""

    # The position last told the player; None: not waiting (or not told yet).
    told: int | None = None
    call: str = ""

    def observe(self, position: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The ``queued`` payload to emit for this poll, or None (nothing to say)."""
        payload = queued_payload(position) if position is not None else None
        if payload is None:
            # Admitted (or not queued yet): a later wait, for the next call, is news again.
            self.told, self.call = None, ""
            return None
        if payload["position"] == self.told and payload["call"] == self.call:
            return None
        self.told, self.call = payload["position"], payload["call"]
        return payload
