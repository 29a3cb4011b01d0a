"""The live session state: one JSON tree fed by ``state_patch`` events (docs/state.md).

``SessionState`` owns the tree, records every patch it applied (the history a
save file or a replay needs) and keeps campaign-declared stats inside their
ranges. Stats come from ``stats/*.stat.txt`` (``player.stats.<id>``) and
``stats/npc.<id>.*.stat.txt`` (``npcs.<id>.stats.<stat>``); a range can be
declared for one path or, with ``*`` segments, for every NPC at once.

Clamping is an invariant, not a view: every declared stat in the tree is in
range after ``__init__``, ``declare_stat``, ``apply_patch`` and ``set``. That
lets ``apply_patch`` check only the declared paths its patch touched. Mutating
``tree`` directly bypasses both clamping and the history, so don't.

Size is bounded by ``caps`` (``caps.py``): a patch past the patch cap, the patches
of one plan attempt (since ``copy``) past the turn cap, or a patch that would leave
the tree past the state cap and larger than it was, raises ``StateCapError`` and
changes nothing. Constructing a state never refuses one that is already too large
(a session saved before the caps): it reads, and plays on without growing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from narratoria.runtime.bounded import depth_of
from narratoria.runtime.state.caps import DEFAULT_CAPS, StateCapError, StateCaps, encoded_size
from narratoria.runtime.state.merge import deep_merge, json_copy
from narratoria.runtime.state.paths import WILDCARD, iter_matching, segments_match, split_path

__all__ = ["SessionState", "StatRange"]

Number = int | float


def _is_number(value: Any) -> bool:
    # bool is an int subclass, but a flag is not a stat value.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _round_half_away(value: float) -> int:
    """Round like a person (2.5 -> 3, -2.5 -> -3), not banker's rounding.

    Python's ``round`` maps 2.5 to 2, which looks like a bug on a stat gauge.
    """
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


@dataclass(frozen=True)
class StatRange:
    """Allowed range of one stat; ``None`` leaves that side open."""

    minimum: Number | None
    maximum: Number | None
    integer: bool = False

    def __post_init__(self) -> None:
        for name in ("minimum", "maximum"):
            bound = getattr(self, name)
            if bound is not None and (not _is_number(bound) or not math.isfinite(bound)):
                raise TypeError(f"StatRange.{name} must be a finite number or None, got {bound!r}")
        if not isinstance(self.integer, bool):
            raise TypeError(f"StatRange.integer must be a bool, got {self.integer!r}")
        low, high = self._bounds()
        if low is not None and high is not None and low > high:
            kind = "no integer in" if self.integer else "empty"
            raise ValueError(f"StatRange {kind} range [{self.minimum}, {self.maximum}]")

    def _bounds(self) -> tuple[Number | None, Number | None]:
        """Effective bounds: for integer stats, the integers inside the range.

        Clamping to ceil(min)/floor(max) before rounding keeps the rounded
        result inside the declared range even when the bounds are fractional.
        """
        if not self.integer:
            return self.minimum, self.maximum
        low = None if self.minimum is None else math.ceil(self.minimum)
        high = None if self.maximum is None else math.floor(self.maximum)
        return low, high

    def clamp(self, value: Any) -> Any:
        """Clamp a number into range; return anything else unchanged.

        Non-numbers (strings, bools, objects) pass through: the UI is
        responsible for showing invalid values, and guessing a number here
        would hide the skill bug that produced them.
        """
        if not _is_number(value):
            return value
        low, high = self._bounds()
        if low is not None and value < low:
            value = low
        elif high is not None and value > high:
            value = high
        if self.integer and not isinstance(value, int) and math.isfinite(value):
            value = _round_half_away(value)
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.minimum, "max": self.maximum, "integer": self.integer}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StatRange:
        if not isinstance(data, Mapping):
            raise TypeError(f"stat range must be an object, got {type(data).__name__}")
        return cls(data.get("min"), data.get("max"), data.get("integer", False))


def check_json(value: Any, path: str = "") -> None:
    """Raise ``TypeError`` naming the first location that is not plain JSON.

    Runs before a patch is merged so a bad patch fails without half-applying.
    NaN and infinities are refused too: JSON cannot encode them, so a save
    file would not round-trip.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"state value at {path or '<root>'!r} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"state key {key!r} under {path or '<root>'!r} is a {type(key).__name__}, not a str")
            check_json(item, f"{path}.{key}" if path else key)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json(item, f"{path}[{index}]")
        return
    raise TypeError(f"state value at {path or '<root>'!r} is a {type(value).__name__}, not a JSON value")


@dataclass(frozen=True)
class _Declaration:
    segments: tuple[str, ...]
    rng: StatRange
    wildcards: int
    order: int


class SessionState:
    """One play session's state tree, patch history and stat ranges."""

    def __init__(self, tree: dict[str, Any] | None = None, stats: Mapping[str, StatRange] | None = None) -> None:
        """Start from ``tree`` (copied; the caller's dict is never mutated) and declare ``stats``."""
        tree = {} if tree is None else tree
        if not isinstance(tree, dict):
            raise TypeError(f"state tree must be a dict, got {type(tree).__name__}")
        check_json(tree)
        self.tree: dict[str, Any] = json_copy(tree)
        self.patches: list[dict[str, Any]] = []
        self.caps: StateCaps = DEFAULT_CAPS
        self._turn_bytes = 0  # patch bytes applied since this state was made or copied
        self._size: int | None = None  # the tree's JSON size, while known
        self._declarations: dict[str, _Declaration] = {}
        self._next_order = 0
        for pattern, rng in (stats or {}).items():
            self.declare_stat(pattern, rng)

    # -- stat ranges -------------------------------------------------------

    @property
    def stats(self) -> dict[str, StatRange]:
        """Declared ranges by path or pattern, in declaration order (a copy)."""
        return {pattern: decl.rng for pattern, decl in self._declarations.items()}

    def declare_stat(self, path_or_pattern: str, rng: StatRange) -> None:
        """Declare (or redeclare) a range and clamp the values already present.

        When several declarations match one path, the most specific wins
        (fewest ``*`` segments), then the most recently declared; so
        ``npcs.merlin.stats.trust`` overrides ``npcs.*.stats.trust``.
        """
        if not isinstance(rng, StatRange):
            raise TypeError(f"stat range for {path_or_pattern!r} must be a StatRange, got {type(rng).__name__}")
        segments = tuple(split_path(path_or_pattern))
        self._declarations.pop(path_or_pattern, None)  # redeclaring moves it to the end
        self._declarations[path_or_pattern] = _Declaration(
            segments, rng, sum(segment == WILDCARD for segment in segments), self._next_order
        )
        self._next_order += 1
        for concrete, _ in list(iter_matching(self.tree, segments)):
            self._clamp_at(concrete)
        self._size = None

    def range_for(self, path: str | Sequence[str]) -> StatRange | None:
        """The range governing a concrete path, or ``None`` if it is not a declared stat."""
        segments = split_path(path) if isinstance(path, str) else path
        best: _Declaration | None = None
        for decl in self._declarations.values():
            if not segments_match(decl.segments, segments):
                continue
            if best is None or (decl.wildcards, -decl.order) < (best.wildcards, -best.order):
                best = decl
        return None if best is None else best.rng

    def _clamp_at(self, segments: Sequence[str]) -> None:
        """Clamp the tree value at a concrete path in place, if a range governs it."""
        rng = self.range_for(segments)
        if rng is None:
            return
        parent: Any = self.tree
        for segment in segments[:-1]:
            parent = parent.get(segment) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or segments[-1] not in parent:
            return
        current = parent[segments[-1]]
        clamped = rng.clamp(current)
        if clamped is not current:
            parent[segments[-1]] = clamped

    # -- updates -----------------------------------------------------------

    def apply_patch(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Deep-merge ``patch`` (docs/state.md, "Deep merge"), clamp the stats it touched,
        record it; return the tree.

        The patch is validated before anything changes, so an invalid patch
        leaves state and history as they were. History stores the patch as
        sent (a copy), not the clamped result: replaying it through a
        ``SessionState`` with the same ranges reproduces the same tree.
        """
        if not isinstance(patch, dict):
            raise TypeError(f"state patch must be a JSON object (dict), got {type(patch).__name__}")
        caps = self.caps
        if (depth := depth_of(patch, caps.depth)) > caps.depth:
            raise StateCapError("depth", depth, caps.depth, "state patch nesting")
        check_json(patch)
        size = encoded_size(patch)
        if size > caps.patch_bytes:
            raise StateCapError("patch", size, caps.patch_bytes, "state patch")
        if self._turn_bytes + size > caps.turn_bytes:
            raise StateCapError("turn", self._turn_bytes + size, caps.turn_bytes,
                                "state patches of this turn together")
        before = self.size()
        kept = json_copy(self.tree)  # to undo a merge the state cap refuses
        deep_merge(self.tree, patch)
        after = encoded_size(self.tree)
        if after > caps.state_bytes and after > before:
            self.tree.clear()
            self.tree.update(kept)
            raise StateCapError("state", after, caps.state_bytes, "session state after this patch")
        self._size = after
        self._turn_bytes += size
        # Only declared paths the patch reaches can have changed: a stat the
        # patch does not reach keeps its (already clamped) value, or vanished
        # because the patch replaced or deleted an ancestor.
        touched: dict[tuple[str, ...], list[str]] = {}
        for decl in self._declarations.values():
            for concrete, _ in iter_matching(patch, decl.segments):
                touched.setdefault(tuple(concrete), concrete)
        for concrete in touched.values():
            self._clamp_at(concrete)
        if touched:
            self._size = None  # a clamp may change a number's length
        self.patches.append(json_copy(patch))
        return self.tree

    def apply_patches(self, patches: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """``apply_patch`` each of ``patches`` in order, all or none: on any error the
        state, its history and its turn count are as before (one tool's patches)."""
        trial = self.copy()
        trial._turn_bytes = self._turn_bytes
        for patch in patches:
            trial.apply_patch(patch)
        self.tree.clear()
        self.tree.update(trial.tree)
        self.patches = trial.patches
        self._turn_bytes, self._size = trial._turn_bytes, trial._size
        return self.tree

    def size(self) -> int:
        """The tree's size as JSON text, in bytes (what GetState would send)."""
        if self._size is None:
            self._size = encoded_size(self.tree)
        return self._size

    def set(self, path: str, value: Any) -> dict[str, Any]:
        """Apply the patch ``{seg1: {seg2: ... value}}``; return the tree.

        This is patch shorthand, not raw assignment, so it is clamped and
        recorded like any skill patch and merges like one: ``None`` deletes the key,
        a dict is merged into an existing dict, and an ancestor holding a
        non-object is replaced by an object.
        """
        patch: Any = value
        for segment in reversed(split_path(path)):
            patch = {segment: patch}
        return self.apply_patch(patch)

    # -- reading -----------------------------------------------------------

    def get(self, path: str, default: Any = None) -> Any:
        """Value at ``path`` or ``default``; containers are live, use ``snapshot`` to keep one."""
        node: Any = self.tree
        for segment in split_path(path):
            if not isinstance(node, dict) or segment not in node:
                return default
            node = node[segment]
        return node

    def snapshot(self) -> dict[str, Any]:
        """An independent deep copy of the tree (for UI diffing, saves, prompts)."""
        return json_copy(self.tree)

    def copy(self) -> SessionState:
        """An independent copy (tree, history, ranges, caps) for a plan attempt that may be
        discarded; its turn count starts at 0."""
        other = SessionState.__new__(SessionState)
        other.tree = json_copy(self.tree)
        other.patches = [json_copy(patch) for patch in self.patches]
        other._declarations = dict(self._declarations)  # entries are immutable
        other._next_order = self._next_order
        other.caps = self.caps
        other._turn_bytes = 0  # the attempt counts its own patches against the turn cap
        other._size = self._size
        return other

    # -- persistence -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form with the spec's camelCase keys; shares nothing with ``self``."""
        return {
            "stateTree": json_copy(self.tree),
            "patches": [json_copy(patch) for patch in self.patches],
            "stats": {pattern: decl.rng.to_dict() for pattern, decl in self._declarations.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionState:
        """Rebuild from ``to_dict`` output; history is restored, not re-applied."""
        if not isinstance(data, Mapping):
            raise TypeError(f"session state must be an object, got {type(data).__name__}")
        stats_data = data.get("stats") or {}
        if not isinstance(stats_data, Mapping):
            raise TypeError(f"'stats' must be an object, got {type(stats_data).__name__}")
        patches = data.get("patches") or []
        if not isinstance(patches, list) or not all(isinstance(patch, dict) for patch in patches):
            raise TypeError("'patches' must be a list of objects")
        check_json(patches, "patches")
        state = cls(
            data.get("stateTree") or {},
            {pattern: StatRange.from_dict(rng) for pattern, rng in stats_data.items()},
        )
        state.patches = [json_copy(patch) for patch in patches]
        return state

    def __repr__(self) -> str:
        return f"SessionState(keys={list(self.tree)!r}, patches={len(self.patches)}, stats={list(self._declarations)!r})"
