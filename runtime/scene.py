"""One turn of the scene pipeline (architecture §7.1), as typed events.

player input → context (session state, recalled memories, last scene) → plan →
execute → aggregate (state patches, assets, ui events) → narration (streamed) →
3–4 choices → scene summary stored as a memory event → session saved → done.
NPCs the player's input names get their own knowledge into the narration context
(``SceneInput.npcs``, from ``storyline.open_scene``; a ``knowledge`` event says which).

The services are injected (plain Python here; the daemon's coordinator passes
adapters over its actors), so the pipeline runs the same in a test, a CLI and the
daemon. Whatever fails — planner, executor, narrator, memory — the player still
gets narration and choices: the replan loop handles plan failures, and every later
step has a fallback. Events are ``(kind, payload)`` pairs whose kinds and fields are
the proto's ``TurnEvent`` oneof (``proto/narratoria.proto``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from .analytics import AnalyticsLog
from .executor import ExecutorEvent
from .grounding import GroundingReport, facts_for_narration, report
from .npcs import NpcView
from .plan import ExecutionResult, Plan, ToolError
from .planner.base import Planner
from .planner.choices import clean_choices, fallback_choices
from .planner.context import Fragment
from .planner.narration import NarrationContext
from .replan import Executor, ReplanLoop, TurnOutcome, success_narration
from .skills.discovery import SkillScript
from .state import SessionState
from .store import MemoryEvent
from .storyline import scene_tag

Emit = Callable[[str, dict[str, Any]], None]
log = logging.getLogger(__name__)

RECALL_LIMIT = 3
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
    # Skills only: no model narration or choices (a fixed plan loading a skill alone).
    execute_only: bool = False
    # The campaign's asks for this scene (campaign/loaded.py): beats due, stat prompts;
    # and, for the authors' log, the beats triggered and skipped (id, why).
    guidance: tuple[str, ...] = ()
    beats_triggered: tuple[str, ...] = ()
    beats_skipped: tuple[tuple[str, str], ...] = ()


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
            emit("phase", {"phase": data["state"], "attempt": data["attempt"]})
        elif kind == "plan":
            emit("plan", {"attempt": data["attempt"], "planner": data.get("planner", ""),
                          "plan_json": _json(data["plan"]), "skills": data.get("skills", []),
                          "generation_ms": data.get("generationMs", 0)})
        elif kind == "executor":
            _tool_event(emit, data["event"])
        elif kind == "attempt_failed":
            emit("replan", {"attempt": data["attempt"],
                            "reason": data.get("error") or data.get("outcome") or "failed",
                            "failed_tools": data.get("failedTools", []),
                            "disabled_skills": data.get("disabledSkills", [])})

    return on_loop


def _tool_event(emit: Emit, event: ExecutorEvent) -> None:
    if event.kind in ("tool_started", "tool_retry"):
        path = (event.event or {}).get("toolPath", "")
        emit("tool_started", {"tool_id": event.tool_id, "tool_path": path, "attempt": event.attempt})
    elif event.kind == "tool_event" and event.event is not None:
        emit("tool_event", {"tool_id": event.tool_id, "type": str(event.event.get("type", "")),
                            "event_json": _json(event.event), "attempt": event.attempt})
    elif event.kind == "tool_finished" and event.result is not None:
        result = event.result
        emit("tool_finished", {"tool_id": event.tool_id, "ok": result.state == "success",
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
    emit("started", {"session_id": scene.session_id, "turn_number": scene.turn_number,
                     "input": scene.player_input})
    memories = await _recall(services.memory, scene)
    _log_beats(emit, scene)
    if scene.npcs:
        # Which NPC knowledge the narrator is given, for clients and tests: never the prose.
        emit("knowledge", {"npcs": [{"npc_id": v.npc_id, "name": v.name, "facts": list(v.facts),
                                     "memories": list(v.memories)} for v in scene.npcs]})
        log.info("session %s scene %d: NPC knowledge of %s", scene.session_id, scene.turn_number,
                 ", ".join(f"{v.npc_id} ({len(v.facts)} facts, {len(v.memories)} memories)"
                           for v in scene.npcs))

    loop = ReplanLoop(services.planner, _GuardedExecutor(services.executor),
                      fallback_planner=services.fallback_planner, analytics=services.analytics,
                      generation_budget_s=services.generation_budget_s)
    outcome = await loop.run(scene.player_input, scene.available, scene.state,
                             session_id=scene.session_id, on_event=_forward(emit))
    clock.timings["plan"] = sum(a.generation_ms for a in outcome.attempts)
    clock.timings["execute"] = sum(a.execution_ms for a in outcome.attempts)
    for refused in _refused_patches(outcome):  # an optional tool's, or the plan would have failed
        emit("log", {"level": "warning", "message": refused, "source": "state"})

    state = scene.state
    context = NarrationContext(player_input=scene.player_input)
    if outcome.fallback:
        emit("fallback", {"attempts": len(outcome.attempts),
                          "reason": (outcome.attempts[-1].error or outcome.attempts[-1].outcome)
                          if outcome.attempts else "no attempt"})
        narration = outcome.narration
        emit("narration", {"text": narration})
    elif told := _skill_narration(outcome):
        # A storyteller skill in the plan narrated the turn: its prose is the narration.
        assert outcome.result is not None
        state = SessionState(outcome.result.aggregatedState, scene.state.stats)
        narration = told
        emit("narration", {"text": narration})
    elif scene.execute_only:
        assert outcome.result is not None and outcome.plan is not None
        state = SessionState(outcome.result.aggregatedState, scene.state.stats)
        narration = outcome.plan.narrative or success_narration(outcome.plan, outcome.result)
        emit("narration", {"text": narration})
    else:
        assert outcome.result is not None
        state = SessionState(outcome.result.aggregatedState, scene.state.stats)
        emit("phase", {"phase": "NARRATING", "attempt": len(outcome.attempts)})
        since = time.monotonic()
        facts = facts_for_narration(scene.facts) if scene.facts else None
        context = NarrationContext(
            facts=facts.text if facts else "",
            player_input=scene.player_input, scene=scene.last_narration,
            outcomes=_outcomes(outcome), memories=_beyond(memories, scene.last_narration),
            state=_narratable(state),
            npc_knowledge=tuple(v.line() for v in scene.npcs),
            npc_perception={v.name: v.perception for v in scene.npcs if v.perception is not None},
            player_stats=player_stats(state), guidance=scene.guidance)
        narration = await _narrate(services.narrator, context, emit)
        if not narration.strip():
            narration = success_narration(outcome.plan, outcome.result) if outcome.plan else ""
            emit("narration", {"text": narration})
        clock.add("narrate", since)
        if facts is not None:
            _log_grounding(emit, scene, report(narration, facts.kept))

    emit("phase", {"phase": "CHOOSING", "attempt": len(outcome.attempts)})
    since = time.monotonic()
    choices = _skill_choices(outcome) or (
        fallback_choices() if scene.execute_only else
        await _choose(services.narrator, context, narration))
    clock.add("choices", since)
    emit("choices", {"options": choices})

    emit("phase", {"phase": "STORING", "attempt": len(outcome.attempts)})
    since = time.monotonic()
    await services.save_turn(scene.session_id, state, narration, choices,
                             _scene_memory(scene, narration, state))
    clock.add("store", since)

    timings = clock.total()
    emit("done", {"turn_number": scene.turn_number, "narration": narration,
                  "fallback": outcome.fallback, "timings_ms": timings,
                  "state_json": _json(state.tree), "outcome": outcome.state.value})
    return SceneResult(narration, choices, state, outcome.fallback, timings)


def _log_beats(emit: Emit, scene: SceneInput) -> None:
    for beat in scene.beats_triggered:
        emit("log", {"level": "info", "message": f"plot beat triggered: {beat}", "source": "plot"})
    for beat, why in scene.beats_skipped:
        emit("log", {"level": "info", "message": f"plot beat skipped: {beat} ({why})",
                     "source": "plot"})


def _log_grounding(emit: Emit, scene: SceneInput, grounding: GroundingReport) -> None:
    """What the narration took from the campaign and what it made up, for authors."""
    for line in grounding.log_events():
        emit("log", {**line, "source": "narrator"})
        log.log(logging.DEBUG if line["level"] == "debug" else logging.INFO,
                "session %s scene %d: %s", scene.session_id, scene.turn_number, line["message"])


def _beyond(memories: list[str], last_narration: str) -> list[str]:
    """Memories other than the last scene's own summary, which the narrator already has
    as the scene (read twice it costs ~0.1 s of prompt and is copied, not continued)."""
    opening = " ".join(last_narration.split())[:60]
    return [m for m in memories if not opening or opening not in " ".join(m.split())]


async def _recall(memory: Memory, scene: SceneInput) -> list[str]:
    try:
        return await memory.recall(scene.playthrough_id, scene.player_input, RECALL_LIMIT)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - a turn without memories is still a turn
        log.warning("session %s: recall failed", scene.session_id, exc_info=True)
        return []


async def _narrate(narrator: Narrator, context: NarrationContext, emit: Emit) -> str:
    pieces: list[str] = []
    try:
        async for piece in narrator.narrate(context):
            pieces.append(piece)
            emit("narration", {"text": piece})
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - the narrator died: keep what it said, if anything
        log.warning("narration failed after %d pieces", len(pieces), exc_info=True)
    return "".join(pieces).strip()


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
