"""How large a session's state may grow, and how fast: no session may be bricked by its
own state (docs/state.md, "Caps").

A skill's ``state_patch`` events (or a client's plan running skills) once grew a
session's state by megabytes a turn until no client could read it back ("message
larger than max"). Sizes are of the state as it travels: its JSON text, the
``state_json`` of GetState, GetSessionView and the Turn stream's last event.

Defaults, by measurement:

- what the built-ins produce: the largest built-in campaign's initial state is
  449 bytes of JSON (``long_ebb``; 1.4 KB of cast beside it), and every built-in
  skill's patch is under 1 KB and replaces rather than accumulates;
- what carries it: gRPC's default receive limit is 4 MiB (our client raises its
  own to 64 MiB; another front-end may not), the daemon receives at most 8 MiB,
  and GetSessionView sends the state beside views derived from it (inventory,
  NPCs) and the campaign's icons, so the state must stay well under a quarter of
  4 MiB; a skill's event line is at most 1 MiB (``protocol.MAX_LINE_BYTES``).

So a session's state may be 1 MiB, a turn's patches 512 KiB together (two turns
cannot double it past a client's limit) and one patch 256 KiB: hundreds of times
what the built-ins need. Nesting is bounded as everywhere else untrusted JSON is
(``bounded.MAX_DEPTH``).

A session already past the state cap (saved before the cap existed) stays
readable and playable: a patch is refused only if it leaves the state both past
the cap and larger than it was. Branching it at an earlier scene
(``narratoria session branch``) repairs it explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from narratoria.runtime.bounded import MAX_DEPTH

__all__ = ["DEFAULT_CAPS", "StateCapError", "StateCaps", "encoded_size"]

_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class StateCaps:
    patch_bytes: int = 256 << 10   # one state_patch event's patch
    turn_bytes: int = 512 << 10    # every patch applied in one plan attempt, together
    state_bytes: int = 1 << 20     # the session's state tree
    depth: int = MAX_DEPTH         # levels of nesting in a patch


DEFAULT_CAPS = StateCaps()


class StateCapError(ValueError):
    """A patch refused for a cap: ``cap`` names which, ``size`` and ``limit`` say by how much."""

    def __init__(self, cap: str, size: int, limit: int, what: str) -> None:
        self.cap, self.size, self.limit, self.what = cap, size, limit, what
        if cap == "depth":  # depth is counted only until it passes the cap
            super().__init__(f"{what}: more than {limit} levels deep; the depth cap is {limit}")
        else:
            super().__init__(f"{what}: {size} bytes; the {cap} cap is {limit}, {size - limit} over")

    def __reduce__(self) -> tuple:
        return (type(self), (self.cap, self.size, self.limit, self.what))


def encoded_size(value: Any) -> int:
    """Bytes of ``value`` as JSON text, the form in which a state travels."""
    return len(_encode(value))
