"""CoordinatorActor: sessions and turns, many at once, each turn a scene pipeline.

An async actor: every turn is an asyncio task, so a slow session never blocks
another's turn. Clients read a turn's events by long-polling ``events`` (each
call returns what happened since the last one), so a client that goes away
simply stops asking: its turn still completes and is saved. The turns' buffers and
rules are ``runtime/turn/registry.py``'s; the turn's input, ``runtime/turn/compose.py``'s.

The other actors are restartable (``max_restarts=-1``, ``daemon.py``): when one dies, Ray starts
it again and the call in flight fails with an actor error, which the scene turns
into a failed attempt (a replan, with the pattern planner) or its fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import ray

from narratoria.runtime.campaign import CampaignError
from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
from narratoria.runtime.campaign.loaded import LoadedCampaign
from narratoria.runtime.characters import CharacterStore
from narratoria.runtime.characters.realize import load_campaign_context, realize
from narratoria.runtime.files import PRIVATE_UMASK
from narratoria.runtime.host.identity import LOCAL_OWNER
from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.planner.choices import SceneFacts, fallback_choices
from narratoria.runtime.planner.deeds import session_entities
from narratoria.runtime.planner.fixed import FixedPlanner
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.pattern import PatternPlanner
from narratoria.runtime.planner.batching import QueueFull
from narratoria.runtime.planner.replicas import ReplicaPicker
from narratoria.runtime.sessions.compose import compose_session, player_part, requested_state
from narratoria.runtime.sessions.store import SessionEnded, SessionRecord
from narratoria.runtime.sessions.storyline import OpenScene
from narratoria.runtime.skillrun.executor import ExecutorEvent
from narratoria.runtime.skillrun.plan import ExecutionResult, Plan, decode_plan
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import MemoryEvent
from narratoria.runtime.turn.analytics import AnalyticsLog
from narratoria.runtime.turn.canon import Canon
from narratoria.runtime.turn.compose import player_input, scene_input
from narratoria.runtime.turn.events import Emit, TurnEventKind
from narratoria.runtime.turn.queueing import QUEUE_POLL_S, QueueWatch
from narratoria.runtime.turn.registry import POLL_WAIT_S, Turn, TurnRegistry
from narratoria.runtime.turn.scene import SceneInput, SceneServices, run_scene, scene_summary
from narratoria.runtime.turn.scene_world import campaign_world, going_to, opening_text, scene_facts

log = logging.getLogger(__name__)

# Turns one client identity may have in flight: a web page with a few tabs plays on, and
# one identity's many sessions cannot fill the model's queue for everyone else (the
# device's owner, who starts loadtests, is not bounded).
CLIENT_TURNS = 4


class _QueueShown:
    """A turn's place in the model's queue, shown as ``queued`` events while it awaits
    a model call (turn/queueing.py decides what to emit)."""

    def __init__(self, actor: Any, session_id: str, emit: Emit) -> None:
        self.actor, self.session_id, self.emit = actor, session_id, emit

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Poll while the body awaits the model; the body's end (admitted, done, failed
        or cancelled) ends the polling."""
        task = asyncio.create_task(self._poll())
        try:
            yield
        finally:
            task.cancel()

    async def _poll(self) -> None:
        watch = QueueWatch()
        while True:
            await asyncio.sleep(QUEUE_POLL_S)
            try:
                position = await self.actor.queue_position.remote(self.session_id)
            except Exception:  # noqa: BLE001 - a planner without a queue, or gone: the call says
                log.debug("session %s: no queue position", self.session_id, exc_info=True)
                return
            if (payload := watch.observe(position)) is not None:
                self.emit(TurnEventKind.QUEUED, payload)


class _RemotePlanner:
    name = "model"

    def __init__(self, actor: Any, queue: _QueueShown | None = None) -> None:
        self.actor, self.queue = actor, queue

    async def generate(self, request: PlanRequest) -> Plan:
        ref = self.actor.plan.remote(request)
        try:
            async with self.queue.waiting() if self.queue else contextlib.nullcontext():
                return await ref
        except asyncio.CancelledError:
            ray.cancel(ref)  # past the budget: stop the model, free it for the next attempt
            raise


class _RemoteExecutor:
    def __init__(self, actor: Any, session_id: str, playthrough_id: str) -> None:
        self.actor, self.session_id, self.playthrough_id = actor, session_id, playthrough_id

    async def execute(self, plan: Plan, state: Any = None,
                      on_event: Callable[[ExecutorEvent], None] | None = None) -> ExecutionResult:
        stream = self.actor.execute.options(num_returns="streaming").remote(
            self.session_id, self.playthrough_id, plan, state)
        result: ExecutionResult | None = None
        try:
            async for ref in stream:
                item = await ref
                if isinstance(item, ExecutionResult):
                    result = item
                elif on_event is not None:
                    on_event(item)
        except asyncio.CancelledError:
            ray.cancel(stream)  # the supervisor kills the plan's process groups
            raise
        if result is None:
            raise RuntimeError("the skill supervisor ended the plan without a result")
        return result


class _RemoteNarrator:
    """One turn's narrator. The planner writes the choices right after the narration,
    while it still holds the model and the narration's KV state (asked separately,
    another session's narration queued in between would make it read everything
    again); ``choices`` hands them over, or asks when there are none."""

    def __init__(self, actor: Any, facts: SceneFacts | None = None,
                 queue: _QueueShown | None = None,
                 going: tuple[str, SceneFacts] | None = None) -> None:
        self.actor = actor
        self.facts = facts  # what the menu may name (scene_world.py); None: the story's words
        self.queue = queue
        self.going = going  # where the action may take the player, and the menu's world there
        self._menu: tuple[NarrationContext, list[str]] | None = None

    def _facts(self, context: NarrationContext) -> SceneFacts | None:
        """The menu's world: the place the turn took the player to, else this scene's."""
        if self.going is not None and context.moved_to == self.going[0]:
            return self.going[1]
        return self.facts

    async def narrate(self, context: NarrationContext) -> AsyncIterator[str]:
        stream = self.actor.narrate.options(num_returns="streaming").remote(
            context, True, self._facts(context))
        # Watched the whole stream: its first pieces can come before the model takes it
        # (the player's words retold), and its candidates may queue one after another.
        async with self.queue.waiting() if self.queue else contextlib.nullcontext():
            async for ref in stream:
                item = await ref
                if isinstance(item, list):
                    self._menu = (context, item)
                else:
                    yield item

    async def choices(self, context: NarrationContext, narration: str) -> list[str]:
        if self._menu is not None and self._menu[0] is context:
            return self._menu[1]
        async with self.queue.waiting() if self.queue else contextlib.nullcontext():
            return await self.actor.choices.remote(context, narration, self._facts(context))


class _RemoteMemory:
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def recall(self, playthrough_id: str, query: str, limit: int) -> list[str]:
        return await self.actor.recall.remote(playthrough_id, query, limit)


class CoordinatorActor:
    """Holds the sessions' turns (``TurnRegistry``) and the handles of the other actors;
    a plain class, made a Ray actor in ``daemon.py``."""

    def __init__(self, analytics_path: str, generation_budget_s: float = 5.0,
                 planner_kind: str = "model", data_dir: str | None = None,
                 planner_names: list[str] | None = None) -> None:
        # The daemon sets this umask before starting Ray; a worker of a cluster joined
        # through RAY_ADDRESS was started without it (this actor writes analytics, characters).
        os.umask(PRIVATE_UMASK)
        self.planner_kind = planner_kind  # "pattern": no model plans (tests, weak devices)
        # By name: a restarted coordinator finds the others without stored handles.
        self.planner, self.supervisor, self.store = (
            ray.get_actor(n) for n in ("planner", "supervisor", "store"))
        # Planner replicas (`serve --planner-replicas`): each turn plans and narrates on
        # the one with the fewest turns in flight. One replica: always self.planner.
        names = [n for n in (planner_names or []) if n != "planner"]
        self.planners: list[Any] = [self.planner, *(ray.get_actor(n) for n in names)]
        self.replicas = ReplicaPicker(len(self.planners))
        self.analytics = AnalyticsLog(analytics_path)
        self.generation_budget_s = generation_budget_s
        self.turns = TurnRegistry()
        self.campaigns = CampaignLibrary(Path(data_dir or os.path.dirname(analytics_path)))

    def status(self) -> dict[str, Any]:
        status = {"pid": os.getpid(), "turnsInFlight": self.turns.in_flight,
                  "turnsDone": self.turns.turns_done}
        if self.replicas.count > 1:
            status["plannerTurns"] = list(self.replicas.turns)
        return status

    # campaigns --------------------------------------------------------------------------

    async def create_session(self, owner: str, campaign: str, title: str,
                             state_json: str = "", character_id: str = "") -> SessionRecord:
        """A new session; with a campaign (an id or a path), the campaign is ingested
        (incrementally: an unchanged one in well under a second) and the session starts
        from its state, stat ranges and cast. The request's state and NPCs are laid over
        the campaign's."""
        if not campaign:
            return await self.store.create_session.remote(owner, "", title, state_json)
        try:
            path = await asyncio.to_thread(self.campaigns.locate, campaign)
        except CampaignNotFound:
            if await self.store.has_lore.remote(campaign):
                # Lore stored without a folder to read (ingested elsewhere): grounding only.
                return await self.store.create_session.remote(owner, campaign, title, state_json)
            raise
        async for ref in self.store.ingest_campaign.options(num_returns="streaming").remote(
                str(path)):
            await ref
        loaded = await asyncio.to_thread(self.campaigns.load, str(path))
        self.campaigns.remember(loaded.id, path)
        request = requested_state(state_json)
        player = await self._realize(character_id, loaded) if character_id else None
        start = compose_session(loaded, request, player)
        record = await self.store.create_session.remote(
            owner, loaded.id, title, json.dumps(start.state), loaded.ranges(), start.cast)
        return await self._open(record, loaded, start.state)

    async def _open(self, record: SessionRecord, campaign: LoadedCampaign,
                    state: dict[str, Any]) -> SessionRecord:
        """Scene 0 told before the player types: the campaign's opening and its first
        choices (scene_world.py), stored with the session, so ResumeSession (and every
        front-end's first view) shows them. A failure costs the session its opening,
        never the session; a model that cannot rank costs the choices their ranking."""
        try:
            world = await asyncio.to_thread(campaign_world, campaign)
            text = opening_text(world, state)
            if not text:
                return record
            facts = scene_facts(world, state, [text])
        except Exception:  # noqa: BLE001
            log.warning("campaign %s: no opening", campaign.id, exc_info=True)
            return record
        try:
            choices = await self.planner.choices.remote(NarrationContext(player_input=""), text,
                                                        facts)
        except Exception:  # noqa: BLE001
            log.warning("campaign %s: opening choices unranked", campaign.id, exc_info=True)
            choices = fallback_choices(facts.beat[:1], facts.person_names())
        return await self.store.set_opening.remote(record.id, text, choices)

    async def _realize(self, character_id: str, campaign: LoadedCampaign) -> dict[str, Any]:
        """The player's part of the initial state for a fresh character realised in
        ``campaign`` (by the model, under the campaign's constraints; reused when done
        before), its chunks added to the campaign's lore as the player's."""
        planner = self.planner

        def generate(prompt: str) -> str:
            return ray.get(planner.complete.remote(prompt))

        store = CharacterStore(self.campaigns.data_dir)
        context = load_campaign_context(campaign.root)
        realization = await asyncio.to_thread(realize, character_id, context, generate, store=store)
        await self.store.add_player_chunks.remote(realization)
        return player_part(realization.player_state)

    async def locate_campaign(self, ref: str) -> str:
        """The folder or package a campaign id or path names (CampaignNotFound)."""
        return str(await asyncio.to_thread(self.campaigns.locate, ref))

    def remember_campaign(self, campaign_id: str, path: str) -> None:
        self.campaigns.remember(campaign_id, Path(path))

    async def _campaign(self, campaign_id: str) -> LoadedCampaign | None:
        """The session's campaign, or None (no campaign, or lore without its files)."""
        if not campaign_id:
            return None
        try:
            return await asyncio.to_thread(self.campaigns.load, campaign_id)
        except (CampaignNotFound, CampaignError) as exc:
            log.warning("campaign %s: plays without beats or stat guidance: %s", campaign_id, exc)
            return None

    @staticmethod
    async def _canon(campaign: LoadedCampaign | None) -> Canon | None:
        """The campaign's names (read once per load); None costs the turn only its
        name corrections."""
        if campaign is None:
            return None
        try:
            return await asyncio.to_thread(lambda: campaign.canon)
        except Exception:  # noqa: BLE001
            log.warning("campaign %s: names unavailable", campaign.id, exc_info=True)
            return None

    @staticmethod
    async def _entities(campaign: LoadedCampaign | None,
                        session: SessionRecord) -> tuple[Any, ...]:
        """Whom a deed can be done to (planner/deeds.py): the campaign's NPCs and factions
        and the session's cast. A failure costs the turn only its first names and
        factions' short names (the planner then reads names from the words)."""
        root = campaign.root if campaign is not None else None
        try:
            return await asyncio.to_thread(session_entities, root, session.cast)
        except Exception:  # noqa: BLE001
            log.warning("session %s: campaign entities unavailable", session.id, exc_info=True)
            return ()

    async def end_session(self, session_id: str, owner: str | None) -> SessionRecord:
        """End the session (no turn can start after this) and release its skill
        executor in the supervisor: now, or when its turn in flight is over."""
        record: SessionRecord = await self.store.end_session.remote(session_id, owner)
        if self.turns.end_session(session_id):
            self._release(session_id)
        return record

    def _release(self, session_id: str) -> None:
        """Drop the session's executor in the supervisor, without waiting for it; a
        failure costs only that executor's memory, never the session's end."""
        try:
            self.supervisor.reset_session.remote(session_id)
        except Exception:  # noqa: BLE001
            log.warning("session %s: skill executor not released", session_id, exc_info=True)

    async def start_turn(self, session_id: str, owner: str | None, text: str | None,
                         choice: int | None, plan_json: str | None = None,
                         execute_only: bool = False) -> str:
        """Open a turn and return its id; the turn runs on without the caller. With
        ``plan_json`` the turn runs that plan instead of planning one."""
        plan = decode_plan(plan_json, "plan_json") if plan_json is not None else None
        # Claimed before the awaits below: one at a time per session, and a client
        # identity (not the device's owner) has at most CLIENT_TURNS in flight.
        turn = self.turns.open(session_id, owner,
                               None if owner in (None, LOCAL_OWNER) else CLIENT_TURNS)
        try:
            session: SessionRecord = await self.store.get_session.remote(session_id, owner)
            if session.status != "active":
                raise SessionEnded(f"session {session_id!r} has ended")
            said = player_input(session, text, choice, plan)
            await self._check_model_room()
            available = await self.supervisor.available.remote(session_id)
            opened = await self._open_scene(session_id, session.turns + 1, said)
        except BaseException:
            if self.turns.abandon(turn):
                self._release(session_id)
            raise
        state = session.session_state()
        campaign = await self._campaign(session.campaign)
        guidance = (campaign.guidance(session.turns + 1, state, said)
                    if campaign is not None else None)
        menu, going = await self._scene_facts(campaign, state, guidance,
                                              [said, session.last_narration])
        # The campaign's rules and names are read on first use (the files: off the loop).
        scene = scene_input(session, said, opened, state, available=available,
                            campaign=campaign, guidance=guidance,
                            canon=await self._canon(campaign),
                            entities=await self._entities(campaign, session),
                            execute_only=execute_only,
                            destination=going[0] if going is not None else "")
        turn.task = asyncio.create_task(self._run(turn, scene, opened.moment_id, plan, menu,
                                                  going))
        return turn.id

    async def _check_model_room(self) -> None:
        """QueueFull (RESOURCE_EXHAUSTED to the caller) when every model's queue is at its
        bound: the turn is refused at once rather than queued behind it."""
        rooms = await asyncio.gather(*(p.has_room.remote() for p in self.planners),
                                     return_exceptions=True)
        if rooms and all(room is False for room in rooms):
            raise QueueFull("the model's queue is full (too many turns waiting); "
                            "try again shortly")

    @staticmethod
    async def _scene_facts(campaign: LoadedCampaign | None, state: SessionState, guidance: Any,
                           story: list[str]
                           ) -> tuple[SceneFacts | None, tuple[str, SceneFacts] | None]:
        """What the turn's menu may name: the campaign's people, places and items in
        this scene and the way toward its plot beat (scene_world.py), the tracker as
        this scene's transition left it; and, where the action (``story[0]``) takes the
        player (movement.py), that place's id and what the menu may name there. None
        (the story's words alone; nowhere to go) without a campaign, or when the
        campaign cannot be read."""
        if campaign is None:
            return None, None
        # The tracker document itself: state_patch holds it as a replacing patch (nulls).
        tracker = guidance.tracker if guidance is not None and guidance.tracker else None
        known: dict[str, Any] = {
            "tracker": tracker if isinstance(tracker, dict) else None,
            "triggered": guidance.triggered if guidance is not None else ()}
        try:
            world = await asyncio.to_thread(campaign_world, campaign)
            return (scene_facts(world, state.tree, story, **known),
                    going_to(world, state.tree, story[0], **known))
        except Exception:  # noqa: BLE001
            log.warning("campaign %s: choices without its world", campaign.id, exc_info=True)
            return None, None

    async def _open_scene(self, session_id: str, scene: int, player_input: str) -> OpenScene:
        """The scene's moment, and what each NPC the input names knows at it. A failure
        costs the scene its NPC knowledge (and its branch point), never the turn."""
        try:
            return await self.store.open_scene.remote(session_id, scene, player_input)
        except Exception:  # noqa: BLE001
            log.warning("session %s scene %d: NPC knowledge unavailable", session_id, scene,
                        exc_info=True)
            return OpenScene(None)

    async def _run(self, turn: Turn, scene: SceneInput, moment_id: str | None,
                   plan: Plan | None = None, menu: SceneFacts | None = None,
                   going: tuple[str, SceneFacts] | None = None) -> None:
        async def save_turn(session_id: str, state: SessionState, narration: str,
                            choices: list[str], memory: MemoryEvent) -> None:
            # The scene's moment goes into the history (a branch point); the NPCs it
            # names witnessed the scene and remember its summary.
            await self.store.save_turn.remote(
                session_id, state, narration, choices, scene.player_input, moment_id,
                [v.npc_id for v in scene.npcs],
                scene_summary(scene.turn_number, scene.player_input, narration),
                (scene.playthrough_id, memory))

        replica = self.replicas.take()
        model = self.planners[replica]
        queue = _QueueShown(model, scene.session_id, turn.emit)
        planner: Any = (FixedPlanner(plan) if plan is not None
                        else PatternPlanner() if self.planner_kind == "pattern"
                        else _RemotePlanner(model, queue))
        services = SceneServices(
            planner=planner,
            executor=_RemoteExecutor(self.supervisor, scene.session_id, scene.playthrough_id),
            narrator=_RemoteNarrator(model, menu, queue, going), memory=_RemoteMemory(self.store),
            save_turn=save_turn, fallback_planner=None if plan is not None else PatternPlanner(),
            analytics=self.analytics, generation_budget_s=self.generation_budget_s)
        try:
            ended = await self.turns.run(turn, run_scene(services, scene, turn.emit))
        finally:
            self.replicas.release(replica)
        if ended:
            self._release(scene.session_id)

    async def cancel_turn(self, session_id: str, owner: str | None) -> tuple[bool, str]:
        """Cancel the session's turn in flight: its skills are killed and nothing
        of it is stored, so the session is exactly as before the turn. (False, why)
        when there is none, or it is already storing its outcome."""
        await self.store.get_session.remote(session_id, owner)  # exists, and is the caller's
        return await self.turns.cancel(session_id)

    async def events(self, turn_id: str, after: int = 0,
                     wait_s: float = POLL_WAIT_S) -> tuple[list[dict[str, Any]], bool]:
        """Events after ``after`` (waiting up to ``wait_s`` for one), and whether the turn is over."""
        return await self.turns.events(turn_id, after, wait_s)

    async def drain(self, timeout_s: float) -> int:
        """Wait for turns in flight (shutdown); return how many were still running."""
        return await self.turns.drain(timeout_s)
