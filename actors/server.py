"""The gRPC services (grpc.aio) in the daemon's driver process, over the actors.

Handlers only translate: proto in, an actor call, proto out. Errors raised in an
actor arrive as exceptions of their own class (Ray re-raises the cause), and map
onto status codes with the actor's message, which names what was wrong.

Invariants, before any handler runs: a request with a field over its cap
(``runtime/host/field_caps.py``) is refused INVALID_ARGUMENT naming the field and its size;
a call to the front-end service carries an identity (IdentityInterceptor: the daemon
token, the device's owner, or a registered client token), on every endpoint. The
Store and Model services take only a live skill token. Error messages sent back are
bounded (``bounded``): none carries a caller's megabytes back. No answer of the
front-end service carries a hidden stat (``session_view.HiddenStats``): GetState, the
Turn stream's events and GetSessionView are filtered here, so every client is safe. The one
exception is ExportSession, the save file itself (its state whole, to be restored): only the
device's owner, who holds the database file anyway, may call it.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from pathlib import Path
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import msgspec
import ray

from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.characters import (CharacterForbidden, CharacterNotFound, CharacterStore,
                                           FreshCharacter)
from narratoria.runtime.host import frontend
from narratoria.runtime.host.endpoint import SKILL_TOKEN_METADATA, TOKEN_METADATA
from narratoria.runtime.host.field_caps import oversized
from narratoria.runtime.host.identity import CLIENT_TOKEN_METADATA, LOCAL_OWNER, ClientRegistry
from narratoria.runtime.planner.narration import NARRATION_STYLES, NarrationContext
from narratoria.runtime.sessions.store import SessionEnded, SessionForbidden, SessionNotFound, SessionRecord
from narratoria.runtime.sessions.view import HiddenStats, session_view
from narratoria.runtime.skills import config as skill_config
from narratoria.runtime.skills.discovery import Skill, SkillError, load_skill
from narratoria.runtime.store import RecordError, RecordNotFound, StoreError
from narratoria.runtime.turn.compose import BadChoice
from narratoria.runtime.turn.events import TurnEventKind as Kind
from narratoria.runtime.turn.registry import TurnBusy, TurnLimit
from narratoria.runtime.planner.batching import QueueFull

STREAMING_METHODS = ("/Turn", "/IngestCampaign")

_CODES: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (SessionNotFound, grpc.StatusCode.NOT_FOUND),
    (frontend.AssetNotFound, grpc.StatusCode.NOT_FOUND),
    (frontend.AssetTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (QueueFull, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (TurnLimit, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (CharacterNotFound, grpc.StatusCode.NOT_FOUND),
    (RecordNotFound, grpc.StatusCode.NOT_FOUND),
    (SessionForbidden, grpc.StatusCode.PERMISSION_DENIED),
    (CharacterForbidden, grpc.StatusCode.PERMISSION_DENIED),
    (SessionEnded, grpc.StatusCode.FAILED_PRECONDITION),
    (TurnBusy, grpc.StatusCode.FAILED_PRECONDITION),
    (BadChoice, grpc.StatusCode.INVALID_ARGUMENT),
    (RecordError, grpc.StatusCode.INVALID_ARGUMENT),
    (StoreError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
    # Only a request's JSON nested thousands deep makes a decoder recurse this far.
    (RecursionError, grpc.StatusCode.INVALID_ARGUMENT),
    (KeyError, grpc.StatusCode.NOT_FOUND),
    (ray.exceptions.RayActorError, grpc.StatusCode.UNAVAILABLE),
]


MESSAGE_MAX = 2000  # characters of an error message a caller gets back


def bounded(message: str, limit: int = MESSAGE_MAX) -> str:
    """``message``, cut to ``limit`` characters with a note of how long it was: an error
    that quotes what a caller sent must not send megabytes back."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message)} characters in all)"


def _status_of(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    cause = getattr(exc, "cause", None) or exc
    for kind, code in _CODES:
        if isinstance(cause, kind) or isinstance(exc, kind):
            message = str(cause.args[0]) if cause.args else str(cause)
            return code, bounded(message)
    return grpc.StatusCode.INTERNAL, bounded(f"{type(cause).__name__}: {cause}")


async def _call(context: grpc.aio.ServicerContext, awaitable: Awaitable[Any]) -> Any:
    try:
        return await awaitable
    except Exception as exc:  # noqa: BLE001 - every failure becomes a status code
        code, message = _status_of(exc)
        await context.abort(code, message)


NAME_MAX_BYTES = 255  # the longest file name (one path component) Linux accepts


def campaign_ref_problem(ref: str) -> str | None:
    """Why ``ref`` can name no campaign at all, or None: no file system call could take it
    (a NUL character; a path component longer than a file name may be)."""
    if "\0" in ref:
        return "campaign: must not contain a NUL character"
    longest = max((len(part.encode()) for part in ref.split("/")), default=0)
    if longest > NAME_MAX_BYTES:
        return (f"campaign: a path component of {longest} bytes; a file name is at most "
                f"{NAME_MAX_BYTES}")
    return None


def json_problem(name: str, text: str) -> str | None:
    """Why the optional JSON field ``name`` is no JSON, or None (empty is fine)."""
    if not text:
        return None
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        return f"{name}: not valid JSON: {exc}"
    except RecursionError:
        return f"{name}: JSON nested too deeply"
    return None


def session_pb(record: SessionRecord) -> pb.Session:
    return pb.Session(id=record.id, campaign=record.campaign, title=record.title,
                      status=record.status, turns=record.turns,
                      playthrough_id=record.playthrough_id,
                      created_at_ms=int(record.created_at.timestamp() * 1000),
                      updated_at_ms=int(record.updated_at.timestamp() * 1000),
                      last_narration=record.last_narration, choices=record.choices,
                      parent_session_id=record.parent_id, branched_at_scene=record.branch_scene)


# Each kind's message in the TurnEvent oneof, whose field is named as the kind is.
_EVENT_FIELDS: dict[Kind, Any] = {
    Kind.STARTED: pb.TurnStarted, Kind.PHASE: pb.PhaseChanged, Kind.PLAN: pb.PlanGenerated,
    Kind.TOOL_STARTED: pb.ToolStarted, Kind.TOOL_EVENT: pb.ToolOutput,
    Kind.TOOL_FINISHED: pb.ToolFinished, Kind.REPLAN: pb.Replan, Kind.FALLBACK: pb.Fallback,
    Kind.NARRATION: pb.NarrationToken, Kind.CHOICES: pb.Choices, Kind.DONE: pb.TurnDone,
    Kind.KNOWLEDGE: pb.NpcKnowledge, Kind.LOG: pb.LogLine, Kind.CHECK: pb.Check,
    Kind.QUEUED: pb.Queued}


def turn_event_pb(turn_id: str, event: dict[str, Any]) -> pb.TurnEvent | None:
    payload = {k: v for k, v in event.items() if k not in ("kind", "seq", "at_ms")}
    message = _EVENT_FIELDS.get(event["kind"])
    if message is None:
        return None
    return pb.TurnEvent(turn_id=turn_id, seq=event["seq"], at_ms=event["at_ms"],
                        **{str(event["kind"]): message(**payload)})


def model_waits_pb(planner: dict[str, Any]) -> list[pb.ModelWait]:
    """The planner's waiting model requests (its status' ``waiting``), next first; an
    entry it cannot read is left out, never the whole status."""
    waits = []
    for wait in planner.get("waiting") or ():
        try:
            waits.append(pb.ModelWait(session_id=str(wait.get("session", "")),
                                      kind=str(wait.get("kind", "")),
                                      position=int(wait.get("position", 0)),
                                      wait_s=round(float(wait.get("waitS", 0.0)), 3)))
        except (AttributeError, TypeError, ValueError):
            continue
    return sorted(waits, key=lambda w: w.position)


def model_slots(planner: dict[str, Any]) -> tuple[int, int]:
    """(used, max) of the planner's status' ``slots``; (0, 0) when it reports none."""
    slots = planner.get("slots")
    if not isinstance(slots, dict):
        return 0, 0
    try:
        return int(slots.get("used", 0)), int(slots.get("max", 0))
    except (TypeError, ValueError):
        return 0, 0


class Daemon:
    """What the services need: the actor handles and a little bookkeeping."""

    def __init__(self, actors: dict[str, Any], data_dir: str, model_path: str,
                 token: str = "") -> None:
        self.actors = actors
        self.data_dir = data_dir
        self.model_path = model_path
        self.token = token  # the daemon token: the device owner's (IdentityInterceptor)
        self.started = time.monotonic()
        self.restarts: dict[str, int] = {name: 0 for name in actors}
        self.pids: dict[str, int] = {}
        self.draining = False


def _ms(moment: Any) -> int:
    return int(moment.timestamp() * 1000)


def character_pb(character: FreshCharacter) -> pb.CharacterInfo:
    return pb.CharacterInfo(id=character.id, name=character.name or "",
                            description=character.description,
                            fresh=character.status == "fresh",
                            campaigns=[r.campaign_id for r in character.realizations],
                            created_at_ms=_ms(character.created_at),
                            updated_at_ms=_ms(character.updated_at),
                            has_portrait=bool(character.portrait_path))


def _has_settings(skill: Skill) -> bool:
    return bool(skill_config.fields(skill.config_schema))


def _load_skills(paths: list[str]) -> dict[str, Skill]:
    """The skills at ``paths`` (the supervisor's), by folder; one that no longer loads is left out."""
    out: dict[str, Skill] = {}
    for path in paths:
        try:
            out[path] = load_skill(Path(path))
        except (SkillError, OSError):
            continue
    return out


class NarratoriaService(rpc.NarratoriaServicer):
    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon
        self.store = daemon.actors["store"]
        self.coordinator = daemon.actors["coordinator"]
        self.clients = ClientRegistry(Path(daemon.data_dir))
        # The front-end calls read campaigns here, in the driver: the same index of
        # started campaigns (data dir campaigns.json) the coordinator keeps, and each
        # campaign (with its icon index, docs/campaigns.md, "Icons") read once per
        # change of its files.
        self.campaigns = CampaignLibrary(Path(daemon.data_dir))
        self.characters = CharacterStore(Path(daemon.data_dir))

    def _owner(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's identity: a known client's token, else the device's user, whose
        daemon token IdentityInterceptor checked before this runs (it refuses a call
        with neither, or with a token nobody was given)."""
        token = dict(context.invocation_metadata() or ()).get(CLIENT_TOKEN_METADATA, "")
        return (self.clients.identify(str(token)) if token else None) or LOCAL_OWNER

    async def _need_device_owner(self, context: grpc.aio.ServicerContext, what: str) -> None:
        """Abort PERMISSION_DENIED unless the caller is the device's owner: the daemon
        token and no client token (a client identity acts as itself even when its
        front-end also holds the daemon token)."""
        owner = self._owner(context)
        if owner != LOCAL_OWNER or not holds_daemon_token(context, self.d.token):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"{what}: only the device's owner (the daemon token, no client "
                                f"token) may change them; this call acts as {owner}")

    async def CreateSession(self, request: pb.CreateSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.Session:
        for name, value in (("campaign", request.campaign), ("title", request.title)):
            if len(value) > 200:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"{name}: {len(value)} characters; at most 200")
        if len(request.state_json) > 1 << 20:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"state_json: {len(request.state_json)} characters; at most 1 MiB")
        if request.character_id and not request.campaign:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "character_id: a character is realised in a campaign; name one")
        if problem := campaign_ref_problem(request.campaign):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        if problem := json_problem("state_json", request.state_json):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        owner = self._owner(context)
        if request.character_id:  # only the caller's own character may be played
            await _call(context, asyncio.to_thread(self.characters.get, request.character_id,
                                                   owner))
        record = await _call(context, self.coordinator.create_session.remote(
            owner, request.campaign, request.title, request.state_json, request.character_id))
        return session_pb(record)

    async def IngestCampaign(self, request: pb.IngestCampaignRequest,
                             context: grpc.aio.ServicerContext) -> AsyncIterator[pb.IngestProgress]:
        if not request.campaign.strip() or len(request.campaign) > 4096:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "campaign: a campaign id or path of 1-4096 characters")
        if problem := campaign_ref_problem(request.campaign):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        path = await _call(context, self.coordinator.locate_campaign.remote(request.campaign))
        stream = self.store.ingest_campaign.options(num_returns="streaming").remote(path)
        try:
            async for ref in stream:
                item = await ref
                if isinstance(item, tuple):
                    phase, done, total = item
                    yield pb.IngestProgress(phase=phase, done=done, total=total)
                else:
                    await self.coordinator.remember_campaign.remote(item.campaign_id, path)
                    yield pb.IngestProgress(phase="complete", done=item.text_chunks,
                                            total=item.text_chunks,
                                            result_json=msgspec.json.encode(item).decode())
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status code
            code, message = _status_of(exc)
            await context.abort(code, message)

    async def Branch(self, request: pb.BranchRequest,
                     context: grpc.aio.ServicerContext) -> pb.Session:
        await self._need_id(request, context)
        if request.at_scene < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"at_scene: {request.at_scene}; scenes are numbered from 1 (0: the last)")
        record = await _call(context, self.store.branch_session.remote(
            request.session_id, self._owner(context), request.at_scene))
        return session_pb(record)

    async def ExportSession(self, request: pb.SessionRef,
                            context: grpc.aio.ServicerContext) -> pb.SessionArchive:
        # The archive carries hidden stats: only the device's owner takes one away.
        owner = self._owner(context)
        if owner != LOCAL_OWNER or not holds_daemon_token(context, self.d.token):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                "an archive carries the whole state, hidden stats included: "
                                "only the device's owner (the daemon token, no client token) "
                                f"may export a session; this call acts as {owner}")
        record = await self._session(request, context)
        campaign = await self._campaign_of(record)
        version = str(campaign.manifest.version) if campaign is not None else ""
        data = await _call(context, self.store.export_session.remote(
            record.id, self._owner(context), version))
        return pb.SessionArchive(session_id=record.id, archive=data)

    async def ImportSession(self, request: pb.ImportSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.ImportSessionResponse:
        if not request.archive:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "archive: empty")
        record, imported = await _call(context, self.store.import_session.remote(
            request.archive, self._owner(context)))
        return pb.ImportSessionResponse(session=session_pb(record),
                                        renamed_from=imported.renamed_from or "",
                                        memories=imported.memories, moments=imported.moments)

    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        records = await _call(context, self.store.list_sessions.remote(
            self._owner(context), request.include_ended))
        return pb.ListSessionsResponse(sessions=[session_pb(r) for r in records])

    async def ResumeSession(self, request: pb.SessionRef,
                            context: grpc.aio.ServicerContext) -> pb.Session:
        await self._need_id(request, context)
        record = await _call(context, self.store.get_session.remote(request.session_id,
                                                                    self._owner(context)))
        return session_pb(record)

    async def EndSession(self, request: pb.SessionRef,
                         context: grpc.aio.ServicerContext) -> pb.Session:
        await self._need_id(request, context)
        # Through the coordinator: it releases the session's skill executor too.
        record = await _call(context, self.coordinator.end_session.remote(request.session_id,
                                                                          self._owner(context)))
        return session_pb(record)

    async def GetState(self, request: pb.SessionRef,
                       context: grpc.aio.ServicerContext) -> pb.SessionState:
        await self._need_id(request, context)
        record = await _call(context, self.store.get_session.remote(request.session_id,
                                                                    self._owner(context)))
        hidden = await self._hidden(record)  # hidden stats never reach a front-end
        return pb.SessionState(session_id=record.id, turns=record.turns,
                               state_json=msgspec.json.encode(hidden.scrub(record.state)).decode(),
                               stats_json=msgspec.json.encode(hidden.scrub(record.stats)).decode())

    async def Turn(self, request: pb.TurnRequest,
                   context: grpc.aio.ServicerContext) -> AsyncIterator[pb.TurnEvent]:
        await self._need_id(request, context)
        if self.d.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the daemon is shutting down")
        action = request.WhichOneof("action")
        if action is None and not request.plan_json:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "action: give text or choice")
        turn_id = await _call(context, self.coordinator.start_turn.remote(
            request.session_id, self._owner(context),
            request.text if action == "text" else None,
            request.choice if action == "choice" else None,
            request.plan_json or None, request.execute_only))
        hidden = await self._hidden(await _call(context, self.store.get_session.remote(
            request.session_id, self._owner(context))))
        after, done = 0, False
        while not done:
            # Long-poll: a client that leaves stops this loop; the turn runs on.
            events, done = await _call(context, self.coordinator.events.remote(turn_id, after))
            for event in events:
                after = max(after, event["seq"])
                event = hidden.event(event)  # patches, plans, outputs, the final state
                if event["kind"] == Kind.ERROR:
                    await context.abort(grpc.StatusCode.INTERNAL, event["message"])
                if event["kind"] == Kind.CANCELLED:
                    await context.abort(grpc.StatusCode.CANCELLED, event["message"])
                message = turn_event_pb(turn_id, event)
                if message is not None:
                    yield message

    async def CancelTurn(self, request: pb.SessionRef,
                         context: grpc.aio.ServicerContext) -> pb.CancelTurnResponse:
        await self._need_id(request, context)
        cancelled, detail = await _call(context, self.coordinator.cancel_turn.remote(
            request.session_id, self._owner(context)))
        return pb.CancelTurnResponse(cancelled=cancelled,
                                     turn_id=detail if cancelled else "",
                                     reason="" if cancelled else detail)

    async def ListSkills(self, request: pb.ListSkillsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListSkillsResponse:
        skills = await _call(context, self.d.actors["supervisor"].skills.remote(
            request.session_id or None))
        loaded = await asyncio.to_thread(_load_skills, [s["path"] for s in skills])
        infos = []
        for s in skills:
            skill = loaded.get(s["path"])
            infos.append(pb.SkillInfo(
                name=s["name"], description=s["description"] or "", scripts=s["scripts"],
                health=s["health"], path=s["path"],
                enabled=skill is not None and skill_config.is_enabled(skill),
                has_settings=skill is not None and _has_settings(skill)))
        return pb.ListSkillsResponse(skills=infos)

    async def Status(self, request: pb.StatusRequest,
                     context: grpc.aio.ServicerContext) -> pb.StatusResponse:
        statuses = await asyncio.gather(*(self._actor_status(n) for n in self.d.actors))
        by_name = dict(zip(self.d.actors, statuses))
        planner = by_name["planner"] or {}
        supervisor = by_name["supervisor"] or {}
        coordinator = by_name["coordinator"] or {}
        sessions = await _call(context, self.store.session_count.remote())
        slots_used, slots_max = model_slots(planner)
        waiting = await self._own_waits(model_waits_pb(planner), context)
        return pb.StatusResponse(
            version=_version(),
            actors=[pb.ActorStatus(name=n, alive=s is not None, restarts=self.d.restarts[n],
                                   pid=int((s or {}).get("pid", 0))) for n, s in by_name.items()],
            model_path=str(planner.get("model", self.d.model_path)),
            model_file=str(planner.get("loadedFile", "")),
            model_quantization=str(planner.get("quantization", "")),
            model_loads=int(planner.get("loads", 0)) + self.d.restarts["planner"],
            model_load_seconds=float(planner.get("loadSeconds", 0.0)),
            model_queue_depth=int(planner.get("queueDepth", 0)),
            model_slots_used=slots_used, model_slots_max=slots_max,
            model_waiting=waiting,
            live_skill_processes=int(supervisor.get("live", 0)),
            skill_process_limit=int(supervisor.get("limit", 0)),
            skill_queue_depth=int(supervisor.get("waiting", 0)),
            peak_skill_processes=int(supervisor.get("peak", 0)),
            sessions=int(sessions), turns_in_flight=int(coordinator.get("turnsInFlight", 0)),
            uptime_s=round(time.monotonic() - self.d.started, 3), data_dir=self.d.data_dir)

    async def _own_waits(self, waits: list[pb.ModelWait],
                         context: grpc.aio.ServicerContext) -> list[pb.ModelWait]:
        """``waits`` as this caller may see them: the device's owner sees every session;
        a client identity sees only its own sessions' ids (the others' places stay, as
        the queue it waits in)."""
        owner = self._owner(context)
        if not waits or (owner == LOCAL_OWNER and holds_daemon_token(context, self.d.token)):
            return waits
        records = await _call(context, self.store.list_sessions.remote(owner, False))
        own = {r.id for r in records}
        for wait in waits:
            if wait.session_id not in own:
                wait.session_id = ""
        return waits

    async def _actor_status(self, name: str) -> dict[str, Any] | None:
        actor = self.d.actors[name]
        try:
            status = await asyncio.wait_for(asyncio.wrap_future(actor.status.remote().future()), 5.0)
        except Exception:  # noqa: BLE001 - a dead or busy actor reports as not alive
            return None
        pid = int(status.get("pid", 0)) if isinstance(status, dict) else 0
        known = self.d.pids.get(name)
        if pid and known and pid != known:
            self.d.restarts[name] += 1  # Ray restarted it since we last looked
        if pid:
            self.d.pids[name] = pid
        return status if isinstance(status, dict) else {}

    @staticmethod
    async def _need_id(request: Any, context: grpc.aio.ServicerContext) -> None:
        if not request.session_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "session_id: required")

    # -- front-end data ---------------------------------------------------------------

    async def ListCampaigns(self, request: pb.ListCampaignsRequest,
                            context: grpc.aio.ServicerContext) -> pb.ListCampaignsResponse:
        found = await _call(context, asyncio.to_thread(frontend.campaign_summaries))
        return pb.ListCampaignsResponse(campaigns=[pb.CampaignInfo(
            id=c.id, title=c.title, description=c.description, path=c.path, builtin=c.builtin,
            free_text=c.free_text, valid=c.valid, errors=c.errors, version=c.version)
            for c in found])

    async def _session(self, request: Any, context: grpc.aio.ServicerContext) -> SessionRecord:
        """The caller's own session (NOT_FOUND / PERMISSION_DENIED as GetState)."""
        await self._need_id(request, context)
        if len(request.session_id) > 200:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"session_id: {len(request.session_id)} characters; at most 200")
        return await _call(context, self.store.get_session.remote(request.session_id,
                                                                  self._owner(context)))

    async def _hidden(self, record: SessionRecord) -> HiddenStats:
        """What of the session's stats no front-end may see: its campaign's hidden stats."""
        campaign = await self._campaign_of(record)
        return HiddenStats.of(campaign.stats if campaign is not None else None)

    async def _campaign_of(self, record: SessionRecord) -> Any:
        """The session's LoadedCampaign, or None (no campaign, or lore without its files)."""
        if not record.campaign:
            return None
        try:
            return await asyncio.to_thread(self.campaigns.load, record.campaign)
        except (CampaignNotFound, CampaignError, OSError):
            return None

    async def GetSessionView(self, request: pb.SessionRef,
                             context: grpc.aio.ServicerContext) -> pb.SessionView:
        record = await self._session(request, context)
        campaign = await self._campaign_of(record)
        if campaign is not None:
            await asyncio.to_thread(lambda: campaign.icons)  # built once per load, off the loop
        view = session_view(record.state,
                            campaign.stats if campaign is not None else None,
                            campaign.icons if campaign is not None else None,
                            items=campaign.items if campaign is not None else None,
                            cast=campaign.cast if campaign is not None else record.cast)
        encode = lambda doc: msgspec.json.encode(doc).decode()  # noqa: E731
        return pb.SessionView(
            session_id=record.id, campaign=record.campaign, title=record.title,
            status=record.status,
            free_text=(campaign is None
                       or frontend.free_text_allowed(campaign.manifest.fields)),
            state_json=encode(view["state"]), stats_json=encode(view["stats"]),
            icons_json=encode(view["icons"]), inventory_json=encode(view["inventory"]),
            npcs_json=encode(view["npcs"]), choices=record.choices,
            last_narration=record.last_narration, turns=record.turns)

    def _data_folder(self, record: SessionRecord) -> Path | None:
        try:
            return frontend.playthrough_dir(Path(self.d.data_dir), record.playthrough_id)
        except frontend.AssetNotFound:
            return None

    async def ListAssets(self, request: pb.SessionRef,
                         context: grpc.aio.ServicerContext) -> pb.ListAssetsResponse:
        record = await self._session(request, context)
        campaign = await self._campaign_of(record)

        def listing() -> list[frontend.AssetSummary]:
            return frontend.list_assets(campaign.assets if campaign is not None else (),
                                        self._data_folder(record))

        assets = await _call(context, asyncio.to_thread(listing))
        return pb.ListAssetsResponse(assets=[pb.AssetInfo(
            path=a.path, kind=a.kind, media_type=a.media_type, title=a.title,
            keywords=a.keywords, size_bytes=a.size_bytes) for a in assets])

    async def GetAsset(self, request: pb.AssetRequest,
                       context: grpc.aio.ServicerContext) -> pb.Asset:
        record = await self._session(request, context)
        campaign = await self._campaign_of(record)

        def read() -> bytes:
            target = frontend.resolve_asset(
                request.path, campaign.root if campaign is not None else None,
                (a.path for a in campaign.assets) if campaign is not None else (),
                self._data_folder(record))
            return frontend.read_asset(target, request.path)

        data = await _call(context, asyncio.to_thread(read))
        return pb.Asset(path=request.path, media_type=frontend.media_type(request.path), data=data)

    # -- skill settings -----------------------------------------------------------------

    async def _skill(self, name: str, context: grpc.aio.ServicerContext) -> Skill:
        if not name or len(name) > 200:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "skill: a skill name of 1-200 characters")
        skills = await _call(context, self.d.actors["supervisor"].skills.remote(None))
        path = next((s["path"] for s in skills if s["name"] == name), None)
        skill = (await asyncio.to_thread(_load_skills, [path])).get(path) if path else None
        if skill is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"skill: no skill named {name!r} (see ListSkills)")
        return skill

    @staticmethod
    def _config_view(skill: Skill, saved: bool = False,
                     problems: tuple[tuple[str, str], ...] | list[tuple[str, str]] = ()
                     ) -> pb.SkillConfigView:
        view = skill_config.describe(skill)
        return pb.SkillConfigView(
            skill=skill.name, description=skill.description, enabled=bool(view["enabled"]),
            view_json=msgspec.json.encode(view).decode(), saved=saved,
            problems=[pb.FieldProblem(field=f, message=m) for f, m in problems])

    async def GetSkillConfig(self, request: pb.SkillConfigRequest,
                             context: grpc.aio.ServicerContext) -> pb.SkillConfigView:
        skill = await self._skill(request.skill, context)
        return await _call(context, asyncio.to_thread(self._config_view, skill))

    async def SetSkillConfig(self, request: pb.SetSkillConfigRequest,
                             context: grpc.aio.ServicerContext) -> pb.SkillConfigView:
        # Settings hold the owner's secrets and apply to every player's turns.
        await self._need_device_owner(context, "skill settings")
        skill = await self._skill(request.skill, context)
        assignments = sorted(request.set.items())
        unset = list(request.unset)

        def save() -> pb.SkillConfigView:
            try:
                skill_config.update_config(skill, assignments, unset)
            except skill_config.ConfigError as exc:  # nothing was written
                named = [*skill_config.fields(skill.config_schema), *request.set, *unset]
                return self._config_view(skill, False,
                                         frontend.field_problems(exc.problems, named))
            return self._config_view(skill, True)

        return await _call(context, asyncio.to_thread(save))

    async def SetSkillEnabled(self, request: pb.SetSkillEnabledRequest,
                              context: grpc.aio.ServicerContext) -> pb.SkillConfigView:
        # A switch applies to every player's turns.
        await self._need_device_owner(context, "skill switches")
        skill = await self._skill(request.skill, context)

        def switch() -> pb.SkillConfigView:
            skill_config.set_enabled(skill.name, request.enabled)
            return self._config_view(skill, True)

        return await _call(context, asyncio.to_thread(switch))

    # -- characters ------------------------------------------------------------------------

    async def ListCharacters(self, request: pb.ListCharactersRequest,
                             context: grpc.aio.ServicerContext) -> pb.ListCharactersResponse:
        found = await _call(context, asyncio.to_thread(self.characters.list,
                                                       self._owner(context)))
        return pb.ListCharactersResponse(characters=[character_pb(c) for c in found])

    async def GetCharacterPortrait(self, request: pb.CharacterRef,
                                   context: grpc.aio.ServicerContext) -> pb.Asset:
        owner = self._owner(context)

        def read() -> bytes:
            character = self.characters.get(request.id, owner)
            path = self.characters.portrait_file(character)
            if path is None or not path.is_file():
                raise CharacterNotFound(f"portrait: character {request.id!r} has none")
            return path.read_bytes()

        data = await _call(context, asyncio.to_thread(read))
        return pb.Asset(path=f"character/{request.id}/portrait.png", media_type="image/png",
                        data=data)

    async def SaveCharacter(self, request: pb.SaveCharacterRequest,
                            context: grpc.aio.ServicerContext) -> pb.CharacterInfo:
        owner = self._owner(context)

        def save() -> FreshCharacter:
            if not request.id:
                return self.characters.create(request.description, request.portrait or None,
                                              request.name or None, owner=owner)
            return self.characters.edit(request.id, description=request.description or None,
                                        portrait=request.portrait or None,
                                        name=request.name or None, owner=owner)

        return character_pb(await _call(context, asyncio.to_thread(save)))

    async def DeleteCharacter(self, request: pb.CharacterRef,
                              context: grpc.aio.ServicerContext) -> pb.CharacterInfo:
        return character_pb(await _call(context, asyncio.to_thread(
            self.characters.delete, request.id, self._owner(context))))


async def _skill_playthrough(supervisor: Any, context: grpc.aio.ServicerContext) -> str:
    """The playthrough of the skill invocation whose token the call carries, or abort."""
    token = dict(context.invocation_metadata() or ()).get(SKILL_TOKEN_METADATA, "")
    playthrough = await supervisor.check_token.remote(token) if token else None
    if playthrough is None:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                            f"{SKILL_TOKEN_METADATA}: missing, expired or unknown skill token")
    return playthrough


SKILL_SCOPE_PREFIX = "skill:"


def skill_scope(skill: str) -> str:
    """The store scope (playthrough id) of ``skill``'s own records, shared by every
    playthrough; only the skill's own invocations reach it (``skill_scope`` requests)."""
    return f"{SKILL_SCOPE_PREFIX}{skill}"


class StoreService(rpc.StoreServicer):
    """The persistence layer for skill processes, bound to the caller's playthrough, or
    with ``skill_scope`` to the calling skill's own records shared across playthroughs.
    Both come from the token, never from the request: no call names another scope."""

    def __init__(self, daemon: Daemon) -> None:
        self.store = daemon.actors["store"]
        self.supervisor = daemon.actors["supervisor"]

    async def _playthrough(self, request: Any, context: grpc.aio.ServicerContext) -> str:
        """The scope the call works in: the token's playthrough, or ``skill:<name>`` of
        the token's skill when the request sets ``skill_scope``."""
        token = dict(context.invocation_metadata() or ()).get(SKILL_TOKEN_METADATA, "")
        bound = await self.supervisor.token_scope.remote(token) if token else None
        if bound is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"{SKILL_TOKEN_METADATA}: missing, expired or unknown skill token")
        playthrough, skill = bound
        if not request.skill_scope:
            return playthrough
        if not skill:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                "skill_scope: this invocation runs no registered skill (the plan "
                                "named a script path outside every skill), so it has no skill "
                                "scope; only the playthrough's records are open to it")
        return skill_scope(skill)

    async def Put(self, request: pb.PutRequest, context: grpc.aio.ServicerContext) -> pb.RecordResponse:
        pt = await self._playthrough(request, context)
        return pb.RecordResponse(record_json=await _call(context, self.store.put.remote(
            pt, request.data_type, request.record_json)))

    async def Update(self, request: pb.UpdateRequest,
                     context: grpc.aio.ServicerContext) -> pb.RecordResponse:
        pt = await self._playthrough(request, context)
        return pb.RecordResponse(record_json=await _call(context, self.store.update.remote(
            pt, request.data_type, request.key, request.changes_json)))

    async def AdjustScore(self, request: pb.AdjustScoreRequest,
                          context: grpc.aio.ServicerContext) -> pb.RecordResponse:
        pt = await self._playthrough(request, context)
        return pb.RecordResponse(record_json=await _call(context, self.store.adjust_score.remote(
            pt, request.data_type, request.key, request.delta, request.event)))

    async def AdjustScores(self, request: pb.AdjustScoresRequest,
                           context: grpc.aio.ServicerContext) -> pb.RecordsResponse:
        pt = await self._playthrough(request, context)
        changes = [{"key": c.key, "delta": c.delta,
                    **{f: getattr(c, f) for f in ("minimum", "maximum", "decay_rate") if c.HasField(f)}}
                   for c in request.changes]
        return pb.RecordsResponse(records_json=await _call(context, self.store.adjust_scores.remote(
            pt, request.data_type, changes, request.event)))

    async def Delete(self, request: pb.KeyRequest,
                     context: grpc.aio.ServicerContext) -> pb.DeleteResponse:
        pt = await self._playthrough(request, context)
        return pb.DeleteResponse(deleted=await _call(context, self.store.delete.remote(
            pt, request.data_type, request.key)))

    async def Get(self, request: pb.KeyRequest, context: grpc.aio.ServicerContext) -> pb.RecordResponse:
        pt = await self._playthrough(request, context)
        return pb.RecordResponse(record_json=await _call(context, self.store.get.remote(
            pt, request.data_type, request.key)))

    async def SemanticSearch(self, request: pb.SemanticSearchRequest,
                             context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        pt = await self._playthrough(request, context)
        hits = await _call(context, self.store.semantic_search.remote(
            pt, request.data_type, request.query, request.limit, request.filters_json,
            request.min_score or None))
        return pb.SearchResponse(hits=[pb.SearchHit(record_json=r, score=s) for r, s in hits])

    async def ExactMatch(self, request: pb.ExactMatchRequest,
                         context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        pt = await self._playthrough(request, context)
        records = await _call(context, self.store.exact_match.remote(
            pt, request.data_type, request.filters_json, request.limit))
        return pb.SearchResponse(hits=[pb.SearchHit(record_json=r, score=0.0) for r in records])


class ModelService(rpc.ModelServicer):
    """The warm model for skill processes: narration through the planner actor's queue."""

    def __init__(self, daemon: Daemon) -> None:
        self.planner = daemon.actors["planner"]
        self.supervisor = daemon.actors["supervisor"]
        self.model_path = daemon.model_path

    async def Narrate(self, request: pb.NarrateRequest,
                      context: grpc.aio.ServicerContext) -> pb.NarrateResponse:
        await _skill_playthrough(self.supervisor, context)
        if not request.player_input.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "player_input: must not be empty")
        if request.style not in NARRATION_STYLES:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"style: must be one of {', '.join(s for s in NARRATION_STYLES if s)} "
                                f"or empty, got {request.style!r}")
        narration = NarrationContext(player_input=request.player_input, scene=request.scene,
                                     outcomes=tuple(request.outcomes), style=request.style)
        pieces: list[str] = []
        stream = self.planner.narrate.options(num_returns="streaming").remote(narration)
        async for ref in stream:
            item = await _call(context, ref)
            if isinstance(item, str):
                pieces.append(item)
        return pb.NarrateResponse(text="".join(pieces).strip(), model=self.model_path)


def holds_daemon_token(context: grpc.aio.ServicerContext, token: str) -> bool:
    given = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA, "")
    return bool(token) and hmac.compare_digest(str(given).encode(), token.encode())


FRONT_END_SERVICE = "/narratoria.v1.Narratoria/"
NO_IDENTITY = (f"no client identity: send the daemon token as {TOKEN_METADATA} (the daemon's "
               "daemon.token, in its data dir and beside its socket; the client library finds "
               f"it) or a client token as {CLIENT_TOKEN_METADATA} (`narratoria clients add`)")


class IdentityInterceptor(grpc.aio.ServerInterceptor):
    """Every call to the front-end service carries a client identity, on every endpoint:
    the daemon token (the device owner) or a registered client token. A skill process
    can connect to the daemon's socket but holds neither (only its Store token, which
    the Store and Model services check themselves). A token that is sent must be right:
    a wrong one is refused, never taken as no token."""

    def __init__(self, token: str, clients: ClientRegistry) -> None:
        self.token = token.encode()
        self.clients = clients
        self._denials: dict[str, tuple[Any, Any]] = {}

    def _deny(self, message: str, streaming: bool) -> Any:
        if message not in self._denials:
            async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

            self._denials[message] = (grpc.unary_unary_rpc_method_handler(deny),
                                      grpc.unary_stream_rpc_method_handler(deny))
        return self._denials[message][1 if streaming else 0]

    def refusal(self, metadata: dict[str, Any]) -> str | None:
        """Why a call with ``metadata`` may not use the front-end service, or None."""
        given = str(metadata.get(TOKEN_METADATA, ""))
        client = str(metadata.get(CLIENT_TOKEN_METADATA, ""))
        if given and not hmac.compare_digest(given.encode(), self.token):
            return f"{TOKEN_METADATA}: wrong daemon token"
        if client and self.clients.identify(client) is None:
            return (f"{CLIENT_TOKEN_METADATA}: unknown client token "
                    "(see `narratoria clients list`)")
        return None if given or client else NO_IDENTITY

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> Any:
        if not details.method.startswith(FRONT_END_SERVICE):
            return await continuation(details)  # Store, Model: the skill token, checked there
        problem = self.refusal(dict(details.invocation_metadata or ()))
        if problem is None:
            return await continuation(details)
        return self._deny(problem, details.method.endswith(STREAMING_METHODS))


class _Undecodable:
    """Stands for a request whose bytes are no valid message of the method's type."""

    def __init__(self, message: str) -> None:
        self.message = message


class RequestDecodeInterceptor(grpc.aio.ServerInterceptor):
    """A request that is no valid protobuf ends INVALID_ARGUMENT, naming the method and
    the request type, instead of grpc's own UNKNOWN ("Unexpected DecodeError"); so does
    one with a field over its cap (``runtime/host/field_caps.py``), naming the field and its
    size. Either is dropped as it is decoded: no handler, actor or error keeps it."""

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        decode = getattr(handler, "request_deserializer", None)
        if decode is None or not (handler.unary_unary or handler.unary_stream):
            return handler
        method = details.method

        def checked(data: bytes) -> Any:
            try:
                request = decode(data)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the client's
                return _Undecodable(bounded(f"request: not a valid {method} request message: "
                                            f"{exc}"))
            problem = oversized(request)
            return request if problem is None else _Undecodable(problem)

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
                return await inner(request, context)

            return handler._replace(request_deserializer=checked, unary_unary=unary)
        inner_stream = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            async for item in inner_stream(request, context):
                yield item

        return handler._replace(request_deserializer=checked, unary_stream=stream)


def _version() -> str:
    from importlib.metadata import version

    try:
        return version("narratoria")
    except Exception:  # noqa: BLE001
        return "0"
