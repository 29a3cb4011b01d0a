"""One turn of the scene pipeline (docs/scene.md, "Pipeline"), as typed events.

player input → context (session state, the session's history: recent scenes, rolling
summaries and recalled memories under a token budget, ``history.py``) → plan →
execute → aggregate (state patches, assets, ui events) → narration (streamed) →
3–4 choices → scene summary stored as a memory event → session saved → done.
NPCs the player's input names get their own knowledge into the narration context
(``SceneInput.npcs``, from ``storyline.open_scene``; a ``knowledge`` event says which).

The engine decides, the model narrates (docs/scene.md, "The engine decides"): a
risky action is resolved here (``resolution.py``) once the plan has run — a
``check`` event, the cost's state patch — and the narration's first sentence, the
*lead*, is the engine's; a plot beat's consequences are applied only in a scene
whose narration is handed the beat's text (else the beat stays due); the
narrator's stream reaches the client through the campaign's name relay
(``canon.py``), so a misspelt name is never shown.

The services are injected (plain Python here; the daemon's coordinator passes
adapters over its actors), so the pipeline runs the same in a test, a CLI and the
daemon. Whatever fails — planner, executor, narrator, memory — the player still
gets narration and choices: the replan loop handles plan failures, and every later
step has a fallback. Events are ``(kind, payload)`` pairs whose kinds (``TurnEventKind``,
``events.py``) and fields are the proto's ``TurnEvent`` oneof (``proto/narratoria.proto``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from narratoria.runtime.planner.base import Planner
from narratoria.runtime.planner.choices import clean_choices, fallback_choices
from narratoria.runtime.planner.context import Fragment
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.story import second_person
from narratoria.runtime.planner.narration_scores import excerpt, meta_talk, out_of_fiction
from narratoria.runtime.skillrun.executor import ExecutorEvent
from narratoria.runtime.skillrun.plan import ExecutionResult, Plan, ToolError
from narratoria.runtime.turn.analytics import AnalyticsLog
from narratoria.runtime.turn.canon import Canon, NameRelay, correct, recased
from narratoria.runtime.turn.handover import handed_over, handover_patch
from narratoria.runtime.turn.movement import location_patch
from narratoria.runtime.turn.events import STORING_PHASE, Emit, TurnEventKind
from narratoria.runtime.turn.grounding import GroundingReport, facts_for_narration, report
from narratoria.runtime.turn.history import History, bounded_history
from narratoria.runtime.turn.npcs import NpcView
from narratoria.runtime.turn.replan import Executor, ReplanLoop, TurnOutcome, success_narration
from narratoria.runtime.turn.scene_world import carried
from narratoria.runtime.turn.resolution import Check, Deed, Roll, Rules, choose_lead, classify, engine_roll, resolve, \
    roller_roll
from narratoria.runtime.sessions.storyline import scene_tag
from narratoria.runtime.skills.discovery import SkillScript
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import MemoryEvent
from narratoria.runtime.turn.second_person import deed_phrase
from narratoria.runtime.turn.standing import standing_answer

log = logging.getLogger(__name__)

DICE_SKILL = "dice-roller"
RECALL_LIMIT = 8  # candidates: the history keeps the best that fit its budget
CHOICES_BUDGET_S = 10.0
SUMMARY_MAX = 400


class Narrator(Protocol):
    def narrate(self, context: NarrationContext) -> AsyncIterator[str]: ...

    async def choices(self, context: NarrationContext, narration: str) -> list[str]: ...


class Memory(Protocol):
    async def recall(self, playthrough_id: str, query: str, limit: int) -> list[str]: ...


# (session id, state, narration, choices, the scene's memory): the turn and its memory
# are saved together, in one store transaction.
SaveTurn = Callable[[str, SessionState, str, list[str], MemoryEvent], Awaitable[None]]


@dataclass
class SceneServices:
    planner: Planner
    executor: Executor
    narrator: Narrator
    memory: Memory
    save_turn: SaveTurn
    fallback_planner: Planner | None = None
    analytics: AnalyticsLog | None = None
    generation_budget_s: float = 5.0


@dataclass
class SceneInput:
    session_id: str
    playthrough_id: str
    turn_number: int
    player_input: str
    state: SessionState
    last_narration: str = ""
    available: tuple[SkillScript, ...] = ()
    # What each NPC the input names knows (storyline.open_scene): its own view only.
    npcs: tuple[NpcView, ...] = ()
    # The campaign's lore nearest the input (storyline.open_scene), for grounding.
    facts: tuple[Fragment, ...] = ()
    # The session's past beyond recall (storyline.open_scene): its last scenes as their
    # scene memories read (oldest first), the newest rolling summary of each level.
    recent: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    # Skills only: no model narration or choices (a fixed plan loading a skill alone).
    execute_only: bool = False
    # The campaign's asks for this scene (campaign/loaded.py): beats due, stat prompts;
    # and, for the authors' log, the beats triggered and skipped (id, why).
    guidance: tuple[str, ...] = ()
    beats_triggered: tuple[str, ...] = ()
    beats_skipped: tuple[tuple[str, str], ...] = ()
    # The triggered beats' consequences with the tracker (applied only when the scene is
    # narrated with their text), the tracker with them still due (applied otherwise),
    # and their descriptions as story prose for the lead (campaign/loaded.py).
    beat_patch: dict[str, Any] = field(default_factory=dict)
    beat_deferred_patch: dict[str, Any] = field(default_factory=dict)
    beat_sentences: tuple[str, ...] = ()
    # The campaign's rules for checks and its names (resolution.py, canon.py), and the
    # canonical names of what is in this scene (canon.scene_names).
    rules: Rules = field(default_factory=Rules)
    canon: Canon | None = None
    names: tuple[str, ...] = ()
    # The campaign's NPCs and factions and the session's cast (planner/deeds.Entity):
    # whom the planner can read a deed as done to, by the ids the skills store.
    entities: tuple[Any, ...] = ()
    # The place the action goes to (movement.py), "" when it goes nowhere: the player is
    # there after the scene unless its check fails.
    destination: str = ""

    @functools.cached_property
    def out_of_fiction(self) -> bool:
        """Is the action one the engine neither retells nor rolls for ("are you an AI?",
        beyond the campaign's rating)? Judged once a scene; without a campaign there is
        no rating to judge by: meta talk only."""
        if self.canon is None:
            return bool(meta_talk(self.player_input))
        return out_of_fiction(self.player_input, self.canon.rating, self.canon.lexicon)


@dataclass
class SceneResult:
    narration: str
    choices: list[str]
    state: SessionState
    fallback: bool
    timings_ms: dict[str, int] = field(default_factory=dict)


class _GuardedExecutor:
    """An executor whose crash (a dead supervisor, say) is a failed attempt, not a crashed turn."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner

    async def execute(self, plan: Plan, state: Any = None,
                      on_event: Callable[[ExecutorEvent], None] | None = None) -> ExecutionResult:
        try:
            return await self.inner.execute(plan, state, on_event=on_event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the attempt's failure
            error = ToolError(code="executor_unavailable", category="execution_error",
                              message=f"skill supervisor failed: {type(exc).__name__}: {exc}")
            return ExecutionResult(planId=plan.requestId, success=False, canReplan=True,
                                   failedTools=[t.toolId for t in plan.tools], error=error)


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode() if value is not None else ""


def _forward(emit: Emit) -> Callable[[str, dict[str, Any]], None]:
    """Translate the replan loop's events into the proto's turn events."""

    def on_loop(kind: str, data: dict[str, Any]) -> None:
        if kind == "state":
            emit(TurnEventKind.PHASE, {"phase": data["state"], "attempt": data["attempt"]})
        elif kind == "plan":
            emit(TurnEventKind.PLAN, {
                "attempt": data["attempt"], "planner": data.get("planner", ""),
                "plan_json": _json(data["plan"]), "skills": data.get("skills", []),
                "generation_ms": data.get("generationMs", 0)})
        elif kind == "executor":
            _tool_event(emit, data["event"])
        elif kind == "attempt_failed":
            emit(TurnEventKind.REPLAN, {
                "attempt": data["attempt"],
                "reason": data.get("error") or data.get("outcome") or "failed",
                "failed_tools": data.get("failedTools", []),
                "disabled_skills": data.get("disabledSkills", [])})

    return on_loop


def _tool_event(emit: Emit, event: ExecutorEvent) -> None:
    if event.kind in ("tool_started", "tool_retry"):
        path = (event.event or {}).get("toolPath", "")
        emit(TurnEventKind.TOOL_STARTED, {"tool_id": event.tool_id, "tool_path": path,
                                          "attempt": event.attempt})
    elif event.kind == "tool_event" and event.event is not None:
        emit(TurnEventKind.TOOL_EVENT, {
            "tool_id": event.tool_id, "type": str(event.event.get("type", "")),
            "event_json": _json(event.event), "attempt": event.attempt})
    elif event.kind == "tool_finished" and event.result is not None:
        result = event.result
        emit(TurnEventKind.TOOL_FINISHED, {
            "tool_id": event.tool_id, "ok": result.state == "success",
            "error": result.error.message if result.error else "",
            "duration_ms": result.executionTimeMs,
            "queue_ms": int((event.event or {}).get("queueMs", 0)),
            "output_json": _json(result.output), "attempt": result.retryCount})


def _outcomes(outcome: TurnOutcome) -> list[str]:
    if outcome.result is None:
        return []
    return [str(r.output["summary"]) for r in outcome.result.toolResults
            if r.state == "success" and r.output and r.output.get("summary")]


def _refused_patches(outcome: TurnOutcome) -> list[str]:
    """Why the executor kept tools' state patches out of the session (a cap, caps.py)."""
    if outcome.result is None:
        return []
    return [r.error.message for r in outcome.result.toolResults
            if r.error is not None and r.error.code in ("state_cap", "bad_state_patch")]


def _payload(ui: dict[str, Any]) -> dict[str, Any]:
    """A ui_event's payload (protocol v0), or {} when it has none."""
    payload = ui.get("payload")
    return payload if isinstance(payload, dict) else {}


def _skill_narration(outcome: TurnOutcome) -> str:
    """The prose of a skill's ``ui_event narration`` (the storyteller's), if any."""
    if outcome.result is None:
        return ""
    for ui in outcome.result.uiEvents:
        text = _payload(ui).get("text") if ui.get("event") == "narration" else None
        if isinstance(text, str) and text.strip():
            return text.strip()
    return ""


def _skill_choices(outcome: TurnOutcome) -> list[str]:
    """Options from a skill's ``ui_event narrative_choice``, if one offered any."""
    if outcome.result is None:
        return []
    for ui in outcome.result.uiEvents:
        if ui.get("event") != "narrative_choice":
            continue
        data = _payload(ui)
        raw = data.get("choices") or data.get("options") or []
        texts = [c.get("text") or c.get("label") or "" if isinstance(c, dict) else c for c in raw]
        if cleaned := clean_choices(texts):
            return cleaned
    return []


def _narratable(state: SessionState) -> dict[str, Any]:
    """The few state facts worth telling the narrator: small models copy JSON they see."""
    return {k: v for k, v in state.tree.items()
            if k in ("location", "time", "weather") and isinstance(v, (str, int, float))}


def player_stats(state: SessionState) -> dict[str, float]:
    """The numeric stats by their last path segment: declared stats first, then a
    ``stats`` map at the top of the tree ("player.charisma" and "stats.charisma" both
    give "charisma")."""
    found: dict[str, float] = {}
    paths = [p for p in state.stats if "*" not in p]
    tree_stats = state.tree.get("stats")
    if isinstance(tree_stats, dict):
        paths += [f"stats.{k}" for k in tree_stats]
    for path in paths:
        value = state.get(path)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found.setdefault(path.rsplit(".", 1)[-1].lower(), float(value))
    return found


def scene_summary(turn_number: int, player_input: str, narration: str) -> str:
    story = " ".join(narration.split())
    return f"Turn {turn_number}: {' '.join(player_input.split())}. {story}"[:SUMMARY_MAX]


class _Clock:
    def __init__(self) -> None:
        self.timings: dict[str, int] = {}
        self._started = time.monotonic()

    def add(self, name: str, since: float) -> None:
        self.timings[name] = self.timings.get(name, 0) + int((time.monotonic() - since) * 1000)

    def total(self) -> dict[str, int]:
        return {**self.timings, "total": int((time.monotonic() - self._started) * 1000)}


async def run_scene(services: SceneServices, scene: SceneInput, emit: Emit) -> SceneResult:
    clock = _Clock()
    emit(TurnEventKind.STARTED, {"session_id": scene.session_id,
                                 "turn_number": scene.turn_number, "input": scene.player_input})
    # Recalled memories are the narrator's alone: the recall (an embedding and a vector
    # search, slow while the model decodes for other players) runs beside the planning.
    recall = asyncio.create_task(_recall(services.memory, scene, clock))
    _log_beats(emit, scene)
    if scene.npcs:
        # Which NPC knowledge the narrator is given, for clients and tests: never the prose.
        emit(TurnEventKind.KNOWLEDGE, {"npcs": [
            {"npc_id": v.npc_id, "name": v.name, "facts": list(v.facts),
             "memories": list(v.memories)} for v in scene.npcs]})
        log.info("session %s scene %d: NPC knowledge of %s", scene.session_id, scene.turn_number,
                 ", ".join(f"{v.npc_id} ({len(v.facts)} facts, {len(v.memories)} memories)"
                           for v in scene.npcs))

    loop = ReplanLoop(services.planner, _GuardedExecutor(services.executor),
                      fallback_planner=services.fallback_planner, analytics=services.analytics,
                      generation_budget_s=services.generation_budget_s)
    try:
        outcome = await loop.run(scene.player_input, _offered(scene), scene.state,
                                 session_id=scene.session_id, on_event=_forward(emit),
                                 entities=scene.entities)
    except BaseException:
        recall.cancel()
        raise
    history = bounded_history(scene.recent, scene.summaries, await recall)
    _log_history(emit, scene, history)
    clock.timings["plan"] = sum(a.generation_ms for a in outcome.attempts)
    clock.timings["execute"] = sum(a.execution_ms for a in outcome.attempts)
    for refused in _refused_patches(outcome):  # an optional tool's, or the plan would have failed
        emit(TurnEventKind.LOG, {"level": "warning", "message": refused, "source": "state"})

    state = scene.state
    told = "" if outcome.fallback else _skill_narration(outcome)
    if not outcome.fallback:
        assert outcome.result is not None
        state = SessionState(outcome.result.aggregatedState, scene.state.stats)
    # The engine decides a risky action; a skill that told the turn itself, or a
    # skills-only turn, is not narrated by the engine and resolves nothing.
    check = None if (scene.execute_only or told) else _resolve(scene, outcome, state, emit)
    # An action out of the fiction is not told, so nothing it says happens: no roll
    # decided it, and no item or place changes by it ("go to the chapel, you dumb AI").
    done = (check is None or check.outcome != "failure") and not scene.out_of_fiction
    if done:
        _hand_over(scene, state, emit)
    narrated = not (outcome.fallback or told or scene.execute_only)
    _settle_beats(emit, scene, state, narrated=narrated)
    # After the beats: one that sets the scene somewhere sets where it starts, and the
    # player's own going is what happens in it.
    moved_to = _go(scene, state, emit) if done else ""
    context = NarrationContext(player_input=scene.player_input, moved_to=moved_to)
    if outcome.fallback:
        emit(TurnEventKind.FALLBACK, {
            "attempts": len(outcome.attempts),
            "reason": (outcome.attempts[-1].error or outcome.attempts[-1].outcome)
            if outcome.attempts else "no attempt"})
        narration = _lead(scene, check, state, beats=False) or outcome.narration
        emit(TurnEventKind.NARRATION, {"text": narration})
    elif told:
        # A storyteller skill in the plan narrated the turn: its prose is the narration.
        narration = told
        emit(TurnEventKind.NARRATION, {"text": narration})
    elif scene.execute_only:
        assert outcome.result is not None and outcome.plan is not None
        narration = outcome.plan.narrative or success_narration(outcome.plan, outcome.result)
        emit(TurnEventKind.NARRATION, {"text": narration})
    else:
        assert outcome.result is not None
        emit(TurnEventKind.PHASE, {"phase": "NARRATING", "attempt": len(outcome.attempts)})
        since = time.monotonic()
        facts = facts_for_narration(scene.facts) if scene.facts else None
        canon = scene.canon
        context = NarrationContext(
            facts=facts.text if facts else "",
            player_input=recased(canon, scene.player_input) if canon is not None
            else scene.player_input, scene=scene.last_narration,
            outcomes=_outcomes(outcome),
            memories=_beyond(list(history.parts), scene.last_narration),
            state=_narratable(state),
            npc_knowledge=tuple(v.line() for v in scene.npcs),
            npc_perception={v.name: v.perception for v in scene.npcs if v.perception is not None},
            player_stats=player_stats(state), guidance=scene.guidance,
            lead=_lead(scene, check, state, beats=True, answer=_answer(scene, outcome)),
            outcome=check.outcome if check is not None else "",
            names=_names_after(scene, moved_to),
            rating=canon.rating if canon is not None else "",
            forbid_new_names=canon.forbid_new_names if canon is not None else False,
            session=scene.session_id, carried=tuple(carried(state.tree)), moved_to=moved_to,
            told_back=not scene.out_of_fiction)
        relay = NameRelay(canon, _allowed_names(scene, state)) if canon is not None else None
        narration = await _narrate(services.narrator, context, emit, relay)
        if relay is not None:
            _log_names(emit, scene, relay)
        if not narration.strip():
            narration = success_narration(outcome.plan, outcome.result) if outcome.plan else ""
            emit(TurnEventKind.NARRATION, {"text": narration})
        clock.add("narrate", since)
        if facts is not None:
            _log_grounding(emit, scene, report(narration, facts.kept))

    emit(TurnEventKind.PHASE, {"phase": "CHOOSING", "attempt": len(outcome.attempts)})
    since = time.monotonic()
    choices = _skill_choices(outcome) or (
        fallback_choices() if scene.execute_only else
        await _choose(services.narrator, context, narration))
    clock.add("choices", since)
    emit(TurnEventKind.CHOICES, {"options": choices})

    emit(TurnEventKind.PHASE, {"phase": STORING_PHASE, "attempt": len(outcome.attempts)})
    since = time.monotonic()
    await services.save_turn(scene.session_id, state, narration, choices,
                             _scene_memory(scene, narration, state))
    clock.add("store", since)

    timings = clock.total()
    emit(TurnEventKind.DONE, {"turn_number": scene.turn_number, "narration": narration,
                              "fallback": outcome.fallback, "timings_ms": timings,
                              "state_json": _json(state.tree), "outcome": outcome.state.value})
    return SceneResult(narration, choices, state, outcome.fallback, timings)


def _log_history(emit: Emit, scene: SceneInput, history: History) -> None:
    """What the narrator is told of the past, for clients, tests and the long-session
    bench: its size (info), and each recalled memory and summary (debug; the recent
    scenes are the ones the player just read). A session's first scene has no past:
    nothing is said."""
    if not history.parts:
        return
    message = (f"history: {history.tokens} of {history.budget} tokens: "
               f"{len(history.recent)} recent scenes, {len(history.summaries)} summaries, "
               f"{len(history.recalled)} recalled")
    emit(TurnEventKind.LOG, {"level": "info", "message": message, "source": "memory"})
    log.debug("session %s scene %d: %s", scene.session_id, scene.turn_number, message)
    for kind, parts in (("recalled", history.recalled), ("summary", history.summaries)):
        for part in parts:
            emit(TurnEventKind.LOG, {"level": "debug", "message": f"{kind}: {part}",
                                     "source": "memory"})


def _log_beats(emit: Emit, scene: SceneInput) -> None:
    for beat, why in scene.beats_skipped:
        emit(TurnEventKind.LOG, {"level": "info", "message": f"plot beat skipped: {beat} ({why})",
                                 "source": "plot"})


def _settle_beats(emit: Emit, scene: SceneInput, state: SessionState, narrated: bool) -> None:
    """The scene's beats happen when it is narrated with their text (consequences and
    tracker); otherwise they stay due for a later scene (the tracker alone)."""
    patch = scene.beat_patch if narrated else scene.beat_deferred_patch
    if patch:
        try:
            state.apply_patch(patch)
        except (ValueError, TypeError) as exc:  # a cap: the story goes on without the beat
            log.warning("session %s scene %d: plot beats not saved: %s", scene.session_id,
                        scene.turn_number, exc)
            return
    for beat in scene.beats_triggered:
        message = (f"plot beat triggered: {beat}" if narrated else
                   f"plot beat deferred: {beat} (this scene is not told by the narrator)")
        emit(TurnEventKind.LOG, {"level": "info", "message": message, "source": "plot"})


def _hand_over(scene: SceneInput, state: SessionState, emit: Emit) -> None:
    """What the player hands over leaves the inventory (handover.py)."""
    items = handed_over(scene.player_input, scene.canon, state.tree)
    patch = handover_patch(items, state.tree)
    if not patch:
        return
    try:
        state.apply_patch(patch)
    except (ValueError, TypeError) as exc:  # a cap refused it: the story goes on
        log.warning("session %s scene %d: the handover was not saved: %s",
                    scene.session_id, scene.turn_number, exc)
        return
    message = f"handed over: {', '.join(items)}"
    emit(TurnEventKind.LOG, {"level": "info", "message": message, "source": "items"})
    log.info("session %s scene %d: %s", scene.session_id, scene.turn_number, message)


def _go(scene: SceneInput, state: SessionState, emit: Emit) -> str:
    """The player is where the action went (movement.py): the place's id, or ""."""
    if not scene.destination:
        return ""
    try:
        state.apply_patch(location_patch(scene.destination, state.tree))
    except (ValueError, TypeError) as exc:  # a cap refused it: the story goes on
        log.warning("session %s scene %d: the move was not saved: %s",
                    scene.session_id, scene.turn_number, exc)
        return ""
    name = scene.canon.name_of(scene.destination) if scene.canon is not None else None
    message = f"moved to: {name or scene.destination}"
    emit(TurnEventKind.LOG, {"level": "info", "message": message, "source": "world"})
    log.info("session %s scene %d: %s", scene.session_id, scene.turn_number, message)
    return scene.destination


def _names_after(scene: SceneInput, moved_to: str) -> tuple[str, ...]:
    """The scene's canonical names, with the place the player went to."""
    name = scene.canon.name_of(moved_to) if moved_to and scene.canon is not None else None
    return tuple(dict.fromkeys((*scene.names, *([name] if name else []))))


def _plan_roll(outcome: TurnOutcome) -> Roll | None:
    """The dice-roller's last roll in the plan, if it rolled."""
    if outcome.result is None:
        return None
    found = None
    for ui in outcome.result.uiEvents:
        if ui.get("event") == "dice_roll":
            found = roller_roll(_payload(ui)) or found
    return found


def _target(scene: SceneInput) -> tuple[str | None, float | None, str]:
    """The NPC a deed is aimed at: (id, its perception of the player, its name)."""
    if scene.npcs:
        npc = scene.npcs[0]
        return npc.npc_id, npc.perception, npc.name
    if scene.canon is not None:
        for mention in scene.canon.lexicon.named_in(scene.player_input):
            entity = scene.canon.lexicon.get(mention.entity)
            if entity is not None and entity.kind == "npc":
                return entity.id, None, entity.name
    return None, None, ""


def _offered(scene: SceneInput) -> tuple[SkillScript, ...]:
    """The skills the plan may call: no dice for an action out of the fiction, whose
    roll would decide nothing the story tells."""
    if not scene.out_of_fiction:
        return scene.available
    return tuple(s for s in scene.available if s.skill != DICE_SKILL)


def _resolve(scene: SceneInput, outcome: TurnOutcome, state: SessionState,
             emit: Emit) -> Check | None:
    """Resolve a risky action (resolution.py): the ``check`` event and the cost's patch."""
    if scene.out_of_fiction:
        return None
    rolled = _plan_roll(outcome)
    deed = classify(scene.player_input)
    if deed is None and rolled is None:
        return None
    if deed is None:  # the plan rolled for it: the roll must decide something
        deed = Deed("chance", deed_phrase(scene.player_input), False)
    npc, perception, _ = _target(scene)
    roll = rolled or engine_roll(scene.session_id, scene.turn_number)
    check = resolve(deed, scene.rules, state.tree, roll, npc, perception)
    if check.patch:
        try:
            state.apply_patch(dict(check.patch))
        except (ValueError, TypeError) as exc:  # a cap refused it: the outcome still stands
            log.warning("session %s scene %d: the check's cost was not applied: %s",
                        scene.session_id, scene.turn_number, exc)
    emit(TurnEventKind.CHECK, check.event())
    log.info("session %s scene %d: %s check, %s %d%+d=%d vs %d: %s (cost: %s)",
             scene.session_id, scene.turn_number, check.deed, check.formula, check.roll,
             check.modifier, check.total, check.difficulty, check.outcome, check.cost)
    return check


def _lead(scene: SceneInput, check: Check | None, state: SessionState, beats: bool,
          answer: Sequence[str] = ()) -> str:
    """The narration's first sentence(s), the engine's: the check's outcome and cost, or
    the answer to a standing question (standing.py), then (``beats``) the triggered
    beats as story prose, after the action when neither."""
    canon = scene.canon

    def fix(text: str) -> str:
        return correct(canon, text) if canon is not None else text

    # The action as the narrator tells it (a deed, or the player's words quoted), where
    # the engine's own sentences would not: a beat alone, or a bare "You make your
    # attempt", read as the story ignoring what the player did.
    said = recased(canon, scene.player_input) if canon is not None else scene.player_input
    told = "" if scene.out_of_fiction else fix(second_person(said))
    parts: list[str] = []
    if check is not None:
        _, _, name = _target(scene)
        phrase = deed_phrase(scene.player_input)
        if phrase is None and told:
            parts.append(told)
        parts.append(choose_lead(check, phrase, f"{scene.session_id}:{scene.turn_number}",
                                 scene.last_narration, fix, check.category, name))
    elif answer:
        parts += answer
    if beats and scene.beat_sentences:
        if not parts and told:
            parts.append(told)
        parts += scene.beat_sentences
    return " ".join(parts)


def _answer(scene: SceneInput, outcome: TurnOutcome) -> list[str]:
    """The engine's answer to a standing question, from the turn's query calls."""
    if outcome.plan is None or outcome.result is None:
        return []
    names = {e.id: e.name for e in scene.entities if getattr(e, "id", None)}
    names |= {v.npc_id: v.name for v in scene.npcs}
    return standing_answer(scene.player_input, outcome.plan.tools,
                           outcome.result.toolResults, names)


def _allowed_names(scene: SceneInput, state: SessionState) -> frozenset[str]:
    """Capitalised words never taken for invented people: the action's own, the player's
    name."""
    words = set(re.findall(r"\b[A-Z][A-Za-z'’-]+", scene.player_input))
    name = state.get("player.name")
    if isinstance(name, str):
        words |= set(name.split())
    return frozenset(w.lower() for w in words)


def _log_names(emit: Emit, scene: SceneInput, relay: NameRelay) -> None:
    for fix in relay.changes:
        was = excerpt(fix.was, budget=40)
        message = (f"name corrected: {was!r} -> {fix.text!r}" if fix.why != "invented" else
                   f"invented name removed: {was!r}")
        emit(TurnEventKind.LOG, {"level": "info", "message": message, "source": "names"})
        log.info("session %s scene %d: %s", scene.session_id, scene.turn_number, message)


def _log_grounding(emit: Emit, scene: SceneInput, grounding: GroundingReport) -> None:
    """What the narration took from the campaign and what it made up, for authors."""
    for line in grounding.log_events():
        emit(TurnEventKind.LOG, {**line, "source": "narrator"})
        log.log(logging.DEBUG if line["level"] == "debug" else logging.INFO,
                "session %s scene %d: %s", scene.session_id, scene.turn_number, line["message"])


def _beyond(memories: list[str], last_narration: str) -> list[str]:
    """Memories other than the last scene's own summary, which the narrator already has
    as the scene (read twice it costs ~0.1 s of prompt and is copied, not continued)."""
    opening = " ".join(last_narration.split())[:60]
    return [m for m in memories if not opening or opening not in " ".join(m.split())]


async def _recall(memory: Memory, scene: SceneInput, clock: _Clock) -> list[str]:
    since = time.monotonic()
    try:
        return await memory.recall(scene.playthrough_id, scene.player_input, RECALL_LIMIT)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - a turn without memories is still a turn
        log.warning("session %s: recall failed", scene.session_id, exc_info=True)
        return []
    finally:
        clock.add("recall", since)


async def _narrate(narrator: Narrator, context: NarrationContext, emit: Emit,
                   relay: NameRelay | None = None) -> str:
    """The narrator's stream, shown as it comes: it begins with the engine's lead (the
    lead is put first when the narrator did not begin with it), and the model's words
    pass through the name relay (the lead is the engine's own, already spelled right)."""
    shown: list[str] = []
    received = 0

    def show(text: str, engine: bool = False) -> None:
        if relay is not None:
            text = relay.verbatim(text) if engine else relay.feed(text)
        if text:
            shown.append(text)
            emit(TurnEventKind.NARRATION, {"text": text})

    lead = context.lead.strip()
    head, started = "", not lead
    try:
        async for piece in narrator.narrate(context):
            received += 1
            if started:
                show(piece)
                continue
            head += piece
            begun = head.lstrip()
            if begun.startswith(lead):
                started = True
                show(lead, engine=True)
                show(begun[len(lead):])
            elif not lead.startswith(begun):
                started = True  # the narrator wrote its own opening: the lead goes first
                show(lead + ("" if begun[:1] in ("\n", "") else " "), engine=True)
                show(begun)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - the narrator died: keep what it said, if anything
        log.warning("narration failed after %d pieces", received, exc_info=True)
    if not started:
        show(lead, engine=True)  # nothing past the lead (or only part of it): the lead alone
    if relay is not None and (rest := relay.flush()):
        shown.append(rest)
        emit(TurnEventKind.NARRATION, {"text": rest})
    return "".join(shown).strip()


async def _choose(narrator: Narrator, context: NarrationContext, narration: str) -> list[str]:
    try:
        options = await asyncio.wait_for(narrator.choices(context, narration),
                                         CHOICES_BUDGET_S)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - stock choices beat none
        log.warning("choice generation failed", exc_info=True)
        options = []
    return fallback_choices(options)


def _scene_memory(scene: SceneInput, narration: str, state: SessionState) -> MemoryEvent:
    location = state.tree.get("location")
    return MemoryEvent(summary=scene_summary(scene.turn_number, scene.player_input, narration),
                       timestamp=datetime.now(UTC), session_id=scene.session_id,
                       action_type="scene", semantic_tags=[scene_tag(scene.turn_number)],
                       location=location if isinstance(location, str) and location else None)
