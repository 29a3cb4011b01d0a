"""When plot beats happen: the check at every scene transition (docs/campaigns.md, "Plot beats").

At the transition into scene N the tracker looks at every beat that has neither
happened nor been ruled out, with the state as the last scene left it:

- A beat whose conditions all hold (its scene window, its prerequisite beats
  having triggered in an earlier scene, its state, NPC and player-choice
  conditions) becomes *due*. Due is a promise: it triggers within 2 scenes
  even if the state moves on meanwhile, because "the conditions were
  met" is the event the author wrote the beat for.
- Each scene triggers the most important due beat (critical first, then the one
  due longest, then by id, so a replay gives the same story), and with it every
  due beat whose 2 scenes are up. One beat a scene keeps the story from lurching;
  the deadline is what turns "prioritised" into "guaranteed". More than one
  happens only when more than three beats fall due at once.
- A beat that can no longer happen is skipped, never waited on: its window has
  closed, or a prerequisite was skipped, or its prerequisites cannot all trigger
  before its window closes. ``skippable: false`` makes the window's end a target
  rather than a cutoff: such a beat triggers late rather than never.

A prerequisite that triggers in scene N lets its dependants trigger from scene
N+1: two beats in one scene would crowd the narration.

Everything is pure: ``transition`` takes the tracker and returns a new one, and
the tracker is a small JSON document the session saves with its turn. Branching
a session is restoring the tracker saved with the scene it branches from.

The tracker is saved by *replacement* (``replacing``), never by deep merge: a merge
cannot delete keys, so a beat that left ``due`` when it triggered stayed there and,
from the next transition on, triggered again at every scene.

A triggered beat happens only in a scene whose narration is told with its text; a
scene that cannot (a fallback, a skill's own narration) saves ``Transition.deferred``,
where the beat is still due.
"""

from __future__ import annotations

import graphlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from narratoria.runtime.campaign.beats import (FALSY, TRUTHY, Beat, NpcCondition, StateCondition,
                                               after_prerequisites, prerequisites)
from narratoria.runtime.state import SessionState
from narratoria.runtime.state.paths import get_path

DEADLINE_SCENES = 2   # a due beat triggers within this many scenes
TRACKER_VERSION = 1


@dataclass(frozen=True)
class BeatTracker:
    """Which beats happened, which are due, which are ruled out, as of ``scene``."""

    scene: int = 0                                             # the last scene transitioned into
    triggered: Mapping[str, int] = field(default_factory=dict)  # beat id -> scene it triggered in
    due: Mapping[str, int] = field(default_factory=dict)        # beat id -> scene it fell due
    skipped: Mapping[str, str] = field(default_factory=dict)    # beat id -> why it cannot happen
    # Beats whose player_choice condition a choice has met: choices are not state,
    # so the tracker remembers them rather than rereading history. A beat that needs
    # all of its player_choices has one entry "<beat id>:<n>" for each made so far.
    chosen: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready document (``json.dumps`` it, or keep it in a saved record)."""
        return {"version": TRACKER_VERSION, "scene": self.scene,
                "triggered": dict(sorted(self.triggered.items())),
                "due": dict(sorted(self.due.items())),
                "skipped": dict(sorted(self.skipped.items())),
                "chosen": sorted(self.chosen)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | str | None) -> BeatTracker:
        """The tracker ``to_json`` wrote (as a mapping or its JSON text); None: a new one."""
        if doc is None:
            return cls()
        if isinstance(doc, str):
            doc = json.loads(doc)
        if not isinstance(doc, Mapping) or doc.get("version") != TRACKER_VERSION:
            raise ValueError(f"not a beat tracker document (version {TRACKER_VERSION}): {doc!r}")
        return cls(scene=int(doc.get("scene", 0)),
                   triggered={str(k): int(v) for k, v in dict(doc.get("triggered", {})).items()},
                   due={str(k): int(v) for k, v in dict(doc.get("due", {})).items()},
                   skipped={str(k): str(v) for k, v in dict(doc.get("skipped", {})).items()},
                   chosen=frozenset(str(c) for c in doc.get("chosen", [])))

    def settled(self, beat_id: str) -> bool:
        """True once the beat has triggered or been skipped: nothing more will happen to it."""
        return beat_id in self.triggered or beat_id in self.skipped


@dataclass(frozen=True)
class Skip:
    beat_id: str
    reason: str


@dataclass(frozen=True)
class Transition:
    """What the transition into ``scene`` decided; persist ``tracker`` with the turn."""

    scene: int
    triggered: tuple[Beat, ...]      # to bring about in this scene, most important first
    skipped: tuple[Skip, ...]        # ruled out at this transition
    tracker: BeatTracker
    # The scene each triggered beat fell due in: what ``deferred`` puts back.
    fell_due: Mapping[str, int] = field(default_factory=dict)

    @property
    def deferred(self) -> BeatTracker:
        """The tracker after this transition with its triggered beats still due: save
        it when the scene could not tell them (its narration was not the narrator's),
        so their consequences wait for a scene that tells them (the deadline holds)."""
        now = {b.id for b in self.triggered}
        after = self.tracker
        return BeatTracker(after.scene, {k: v for k, v in after.triggered.items() if k not in now},
                           {**after.due, **{k: self.fell_due.get(k, self.scene) for k in now}},
                           after.skipped, after.chosen)

    @property
    def guidance(self) -> tuple[str, ...]:
        """One line per triggered beat for the planner's and narrator's context."""
        return tuple(f"{b.title}: {b.guidance}" if b.guidance != b.title else b.title
                     for b in self.triggered)

    @property
    def state_patch(self) -> dict[str, Any]:
        """The triggered beats' ``state_patch`` consequences, merged in trigger order."""
        merged: dict[str, Any] = {}
        for beat in self.triggered:
            _merge(merged, beat.state_patch)
        return merged

    @property
    def ending(self) -> bool:
        """A triggered beat is an ending: the narrator should steer toward a conclusion."""
        return any(b.ending for b in self.triggered)


NpcValues = Mapping[str, Mapping[str, Any]]


def transition(beats: Sequence[Beat], tracker: BeatTracker, scene: int,
               state: Mapping[str, Any] | SessionState, npcs: NpcValues | None = None,
               choice: str = "") -> Transition:
    """The beats to trigger in ``scene``, the beats ruled out, and the tracker after.

    ``state`` is the session state tree as the previous scene left it;
    ``npcs`` maps an NPC id to its values (``{"merlin": {"perception": 35.0}}``),
    looked up before the tree's ``npcs.<id>.stats.<attr>`` and ``npcs.<id>.<attr>``;
    ``choice`` is the choice the player made to enter the scene.
    """
    if scene <= tracker.scene:
        raise ValueError(f"scene {scene} does not follow scene {tracker.scene}: transitions go "
                         "forward (restore the tracker saved with an earlier scene to go back)")
    tree = state.tree if isinstance(state, SessionState) else state
    by_id = {b.id: b for b in beats}
    triggered = {k: v for k, v in tracker.triggered.items() if k in by_id}
    due = {k: v for k, v in tracker.due.items() if k in by_id}
    skipped = {k: v for k, v in tracker.skipped.items() if k in by_id}
    chosen = {c for c in tracker.chosen if c.split(":", 1)[0] in by_id}

    def open_(beat: Beat) -> bool:
        return beat.id not in triggered and beat.id not in due and beat.id not in skipped

    for beat in beats:
        if open_(beat) and beat.choices and beat.id not in chosen and _said(beat.choices, choice):
            chosen.add(beat.id)
        if open_(beat):
            chosen.update(f"{beat.id}:{n}" for n, phrase in enumerate(beat.all_choices)
                          if _said([phrase], choice))
    for beat in beats:
        if open_(beat) and eligible(beat, scene, triggered, tree, npcs or {}, beat.id in chosen,
                                    all_chosen=_all_chosen(beat, chosen)):
            due[beat.id] = scene

    ranked = sorted(due, key=lambda i: (-by_id[i].priority, due[i], i))
    now = ranked[:1] + [i for i in ranked[1:] if scene - due[i] >= DEADLINE_SCENES]
    fell_due = {i: due[i] for i in now}
    for beat_id in now:
        triggered[beat_id] = scene
        del due[beat_id]

    newly = _unreachable(beats, scene, triggered, due, skipped)
    skipped.update((s.beat_id, s.reason) for s in newly)
    after = BeatTracker(scene, triggered, due, skipped, frozenset(chosen))
    return Transition(scene, tuple(by_id[i] for i in now), tuple(newly), after, fell_due)


def eligible(beat: Beat, scene: int, triggered: Mapping[str, int], state: Mapping[str, Any],
             npcs: NpcValues, chosen: bool, *, all_chosen: bool = True) -> bool:
    """Whether every condition of ``beat`` holds at the transition into ``scene``
    (``chosen``: one of its ``choices`` was made; ``all_chosen``: all its ``all_choices``)."""
    if beat.scene_min is not None and scene < beat.scene_min:
        return False
    if beat.scene_max is not None and scene > beat.scene_max and beat.skippable:
        return False
    if any(triggered.get(need, scene) >= scene for need in beat.requires):
        return False
    if beat.requires_any and all(triggered.get(n, scene) >= scene for n in beat.requires_any):
        return False
    if beat.choices and not chosen:
        return False
    if beat.all_choices and not all_chosen:
        return False
    return (all(holds(c, get_path(state, c.path)) for c in beat.state)
            and all(holds(c, npc_value(c, state, npcs)) for c in beat.npcs))


def holds(condition: StateCondition | NpcCondition, actual: Any) -> bool:
    op, expected = condition.op, condition.value
    if op == TRUTHY:
        return bool(actual)
    if op == FALSY:
        return not actual
    if actual is None and expected is not None:
        return False  # unset is neither equal nor unequal yet: the story has not decided
    if op in ("==", "!="):
        return _same(actual, expected) == (op == "==")
    if not _number(actual):
        return False
    return {"<": actual < expected, "<=": actual <= expected,
            ">": actual > expected, ">=": actual >= expected}[op]


def npc_value(condition: NpcCondition, state: Mapping[str, Any], npcs: NpcValues) -> Any:
    given = npcs.get(condition.npc)
    if isinstance(given, Mapping):
        value = get_path(dict(given), condition.attribute)
        if value is not None:
            return value
    for path in (f"npcs.{condition.npc}.stats.{condition.attribute}",
                 f"npcs.{condition.npc}.{condition.attribute}"):
        value = get_path(state, path)
        if value is not None:
            return value
    return None


def _all_chosen(beat: Beat, chosen: set[str]) -> bool:
    return all(f"{beat.id}:{n}" in chosen for n in range(len(beat.all_choices)))


def _said(phrases: Sequence[str], choice: str) -> bool:
    text = " ".join(choice.lower().split())
    return bool(text) and any(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text) for p in phrases)


def _unreachable(beats: Sequence[Beat], scene: int, triggered: Mapping[str, int],
                 due: Mapping[str, int], skipped: Mapping[str, str]) -> list[Skip]:
    """Open beats that can no longer trigger, found in prerequisite order so that a
    skipped beat's dependants are skipped in the same pass."""
    by_id = {b.id: b for b in beats}
    order = graphlib.TopologicalSorter(
        {b.id: [n for n in prerequisites(b) if n in by_id] for b in beats}).static_order()
    # The first scene each beat can trigger in from the next one on: inf when never.
    earliest: dict[str, float] = {}
    found: list[Skip] = []
    for beat_id in order:
        beat = by_id[beat_id]
        if beat_id in triggered:
            earliest[beat_id] = triggered[beat_id]
            continue
        if beat_id in due:
            earliest[beat_id] = scene + 1
            continue
        if beat_id in skipped:
            earliest[beat_id] = math.inf
            continue
        lost = [n for n in beat.requires if earliest.get(n, math.inf) == math.inf]
        if beat.requires_any and all(earliest.get(n, math.inf) == math.inf
                                     for n in beat.requires_any):
            lost.append(" or ".join(beat.requires_any))
        at = max([float(scene + 1), float(beat.scene_min or 0)]
                 + after_prerequisites(beat, earliest))
        reason = None
        if lost:
            reason = f"prerequisite {lost[0]!r} will never trigger"
        elif beat.skippable and beat.scene_max is not None and at > beat.scene_max:
            reason = (f"its window closed after scene {beat.scene_max}"
                      if scene + 1 > beat.scene_max else
                      f"its prerequisites cannot all trigger before its window closes "
                      f"after scene {beat.scene_max}")
        if reason is None:
            earliest[beat_id] = at
        else:
            earliest[beat_id] = math.inf
            found.append(Skip(beat_id, reason))
    return found


def replacing(old: Any, new: Mapping[str, Any]) -> dict[str, Any]:
    """A state patch that, deep-merged onto ``old``, leaves exactly ``new``: every key
    of ``old`` that ``new`` lacks is deleted (``null`` deletes a key), at every depth."""
    patch: dict[str, Any] = {}
    before = old if isinstance(old, Mapping) else {}
    for key in before:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(before.get(key), Mapping):
            patch[key] = replacing(before[key], value)
        else:
            patch[key] = json.loads(json.dumps(value))
    return patch


def _same(actual: Any, expected: Any) -> bool:
    # true is not 1 here: a flag and a count are different things to an author.
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if _number(actual) and _number(expected):
        return float(actual) == float(expected)
    return actual == expected


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _merge(into: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = json.loads(json.dumps(value))  # a copy: beats are shared


__all__ = ["DEADLINE_SCENES", "BeatTracker", "Skip", "Transition", "eligible", "holds",
           "npc_value", "replacing", "transition"]
