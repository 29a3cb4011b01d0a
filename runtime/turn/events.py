"""The kinds of a turn's events: one name for each, shared by the scene that emits them,
the coordinator that buffers them and the gRPC server that sends them.

Each kind's value is the field name of the proto's ``TurnEvent`` oneof
(``proto/narratoria.proto``), and events travel as ``{"kind": kind, ...payload}``
dicts, so a ``StrEnum`` keeps the wire strings what they are: ``kind == "done"`` and
JSON encoders see the plain string. ``ERROR`` and ``CANCELLED`` have no oneof field:
the server ends the stream with a status code instead.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any


class TurnEventKind(enum.StrEnum):
    STARTED = "started"
    PHASE = "phase"
    PLAN = "plan"
    TOOL_STARTED = "tool_started"
    TOOL_EVENT = "tool_event"
    TOOL_FINISHED = "tool_finished"
    REPLAN = "replan"
    FALLBACK = "fallback"
    NARRATION = "narration"
    CHOICES = "choices"
    DONE = "done"
    KNOWLEDGE = "knowledge"
    LOG = "log"
    CHECK = "check"
    # The turn waits for a model slot (turn/queueing.py): its place in the model's queue.
    QUEUED = "queued"
    # The turn ended without a ``done``: it failed, or the player cancelled it.
    ERROR = "error"
    CANCELLED = "cancelled"


# The phase the scene enters when it starts storing its outcome: from its ``phase``
# event on, the turn is committed and can no longer be cancelled (turn/registry.py).
STORING_PHASE = "STORING"

# How the scene reports an event: its kind and its payload (the oneof message's fields).
Emit = Callable[[TurnEventKind, dict[str, Any]], None]
