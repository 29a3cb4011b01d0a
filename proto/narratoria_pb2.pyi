from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NarrateRequest(_message.Message):
    __slots__ = ("player_input", "scene", "outcomes", "style")
    PLAYER_INPUT_FIELD_NUMBER: _ClassVar[int]
    SCENE_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    STYLE_FIELD_NUMBER: _ClassVar[int]
    player_input: str
    scene: str
    outcomes: _containers.RepeatedScalarFieldContainer[str]
    style: str
    def __init__(self, player_input: _Optional[str] = ..., scene: _Optional[str] = ..., outcomes: _Optional[_Iterable[str]] = ..., style: _Optional[str] = ...) -> None: ...

class NarrateResponse(_message.Message):
    __slots__ = ("text", "model")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    text: str
    model: str
    def __init__(self, text: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("id", "campaign", "status", "created_at_ms", "updated_at_ms", "turns", "playthrough_id", "last_narration", "choices", "title", "parent_session_id", "branched_at_scene")
    ID_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    PLAYTHROUGH_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_NARRATION_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    PARENT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BRANCHED_AT_SCENE_FIELD_NUMBER: _ClassVar[int]
    id: str
    campaign: str
    status: str
    created_at_ms: int
    updated_at_ms: int
    turns: int
    playthrough_id: str
    last_narration: str
    choices: _containers.RepeatedScalarFieldContainer[str]
    title: str
    parent_session_id: str
    branched_at_scene: int
    def __init__(self, id: _Optional[str] = ..., campaign: _Optional[str] = ..., status: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., turns: _Optional[int] = ..., playthrough_id: _Optional[str] = ..., last_narration: _Optional[str] = ..., choices: _Optional[_Iterable[str]] = ..., title: _Optional[str] = ..., parent_session_id: _Optional[str] = ..., branched_at_scene: _Optional[int] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("campaign", "title", "state_json", "character_id")
    CAMPAIGN_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    CHARACTER_ID_FIELD_NUMBER: _ClassVar[int]
    campaign: str
    title: str
    state_json: str
    character_id: str
    def __init__(self, campaign: _Optional[str] = ..., title: _Optional[str] = ..., state_json: _Optional[str] = ..., character_id: _Optional[str] = ...) -> None: ...

class CancelTurnResponse(_message.Message):
    __slots__ = ("cancelled", "turn_id", "reason")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    turn_id: str
    reason: str
    def __init__(self, cancelled: _Optional[bool] = ..., turn_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class IngestCampaignRequest(_message.Message):
    __slots__ = ("campaign",)
    CAMPAIGN_FIELD_NUMBER: _ClassVar[int]
    campaign: str
    def __init__(self, campaign: _Optional[str] = ...) -> None: ...

class IngestProgress(_message.Message):
    __slots__ = ("phase", "done", "total", "result_json")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    phase: str
    done: int
    total: int
    result_json: str
    def __init__(self, phase: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., result_json: _Optional[str] = ...) -> None: ...

class BranchRequest(_message.Message):
    __slots__ = ("session_id", "at_scene")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_SCENE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    at_scene: int
    def __init__(self, session_id: _Optional[str] = ..., at_scene: _Optional[int] = ...) -> None: ...

class SessionRef(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionArchive(_message.Message):
    __slots__ = ("session_id", "archive")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    archive: bytes
    def __init__(self, session_id: _Optional[str] = ..., archive: _Optional[bytes] = ...) -> None: ...

class ImportSessionRequest(_message.Message):
    __slots__ = ("archive",)
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    archive: bytes
    def __init__(self, archive: _Optional[bytes] = ...) -> None: ...

class ImportSessionResponse(_message.Message):
    __slots__ = ("session", "renamed_from", "memories", "moments")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    RENAMED_FROM_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    session: Session
    renamed_from: str
    memories: int
    moments: int
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., renamed_from: _Optional[str] = ..., memories: _Optional[int] = ..., moments: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("include_ended",)
    INCLUDE_ENDED_FIELD_NUMBER: _ClassVar[int]
    include_ended: bool
    def __init__(self, include_ended: _Optional[bool] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class SessionState(_message.Message):
    __slots__ = ("session_id", "state_json", "stats_json", "turns")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    state_json: str
    stats_json: str
    turns: int
    def __init__(self, session_id: _Optional[str] = ..., state_json: _Optional[str] = ..., stats_json: _Optional[str] = ..., turns: _Optional[int] = ...) -> None: ...

class TurnRequest(_message.Message):
    __slots__ = ("session_id", "text", "choice", "plan_json", "execute_only")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    PLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_ONLY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    text: str
    choice: int
    plan_json: str
    execute_only: bool
    def __init__(self, session_id: _Optional[str] = ..., text: _Optional[str] = ..., choice: _Optional[int] = ..., plan_json: _Optional[str] = ..., execute_only: _Optional[bool] = ...) -> None: ...

class TurnEvent(_message.Message):
    __slots__ = ("turn_id", "seq", "at_ms", "started", "phase", "plan", "tool_started", "tool_event", "tool_finished", "replan", "fallback", "narration", "choices", "done", "knowledge", "log", "check", "queued")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    TOOL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_EVENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    REPLAN_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    NARRATION_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    KNOWLEDGE_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    seq: int
    at_ms: int
    started: TurnStarted
    phase: PhaseChanged
    plan: PlanGenerated
    tool_started: ToolStarted
    tool_event: ToolOutput
    tool_finished: ToolFinished
    replan: Replan
    fallback: Fallback
    narration: NarrationToken
    choices: Choices
    done: TurnDone
    knowledge: NpcKnowledge
    log: LogLine
    check: Check
    queued: Queued
    def __init__(self, turn_id: _Optional[str] = ..., seq: _Optional[int] = ..., at_ms: _Optional[int] = ..., started: _Optional[_Union[TurnStarted, _Mapping]] = ..., phase: _Optional[_Union[PhaseChanged, _Mapping]] = ..., plan: _Optional[_Union[PlanGenerated, _Mapping]] = ..., tool_started: _Optional[_Union[ToolStarted, _Mapping]] = ..., tool_event: _Optional[_Union[ToolOutput, _Mapping]] = ..., tool_finished: _Optional[_Union[ToolFinished, _Mapping]] = ..., replan: _Optional[_Union[Replan, _Mapping]] = ..., fallback: _Optional[_Union[Fallback, _Mapping]] = ..., narration: _Optional[_Union[NarrationToken, _Mapping]] = ..., choices: _Optional[_Union[Choices, _Mapping]] = ..., done: _Optional[_Union[TurnDone, _Mapping]] = ..., knowledge: _Optional[_Union[NpcKnowledge, _Mapping]] = ..., log: _Optional[_Union[LogLine, _Mapping]] = ..., check: _Optional[_Union[Check, _Mapping]] = ..., queued: _Optional[_Union[Queued, _Mapping]] = ...) -> None: ...

class Queued(_message.Message):
    __slots__ = ("position", "wait_s", "call")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    position: int
    wait_s: float
    call: str
    def __init__(self, position: _Optional[int] = ..., wait_s: _Optional[float] = ..., call: _Optional[str] = ...) -> None: ...

class Check(_message.Message):
    __slots__ = ("deed", "stat", "difficulty", "roll", "modifier", "total", "outcome", "cost", "formula", "source", "patch_json")
    DEED_FIELD_NUMBER: _ClassVar[int]
    STAT_FIELD_NUMBER: _ClassVar[int]
    DIFFICULTY_FIELD_NUMBER: _ClassVar[int]
    ROLL_FIELD_NUMBER: _ClassVar[int]
    MODIFIER_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    FORMULA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    deed: str
    stat: str
    difficulty: int
    roll: int
    modifier: int
    total: int
    outcome: str
    cost: str
    formula: str
    source: str
    patch_json: str
    def __init__(self, deed: _Optional[str] = ..., stat: _Optional[str] = ..., difficulty: _Optional[int] = ..., roll: _Optional[int] = ..., modifier: _Optional[int] = ..., total: _Optional[int] = ..., outcome: _Optional[str] = ..., cost: _Optional[str] = ..., formula: _Optional[str] = ..., source: _Optional[str] = ..., patch_json: _Optional[str] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("level", "message", "source")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    level: str
    message: str
    source: str
    def __init__(self, level: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class NpcKnowledge(_message.Message):
    __slots__ = ("npcs",)
    NPCS_FIELD_NUMBER: _ClassVar[int]
    npcs: _containers.RepeatedCompositeFieldContainer[NpcContext]
    def __init__(self, npcs: _Optional[_Iterable[_Union[NpcContext, _Mapping]]] = ...) -> None: ...

class NpcContext(_message.Message):
    __slots__ = ("npc_id", "name", "facts", "memories")
    NPC_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    npc_id: str
    name: str
    facts: _containers.RepeatedScalarFieldContainer[str]
    memories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, npc_id: _Optional[str] = ..., name: _Optional[str] = ..., facts: _Optional[_Iterable[str]] = ..., memories: _Optional[_Iterable[str]] = ...) -> None: ...

class TurnStarted(_message.Message):
    __slots__ = ("session_id", "turn_number", "input")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn_number: int
    input: str
    def __init__(self, session_id: _Optional[str] = ..., turn_number: _Optional[int] = ..., input: _Optional[str] = ...) -> None: ...

class PhaseChanged(_message.Message):
    __slots__ = ("phase", "attempt")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    phase: str
    attempt: int
    def __init__(self, phase: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class PlanGenerated(_message.Message):
    __slots__ = ("attempt", "planner", "plan_json", "skills", "generation_ms")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PLANNER_FIELD_NUMBER: _ClassVar[int]
    PLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_MS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    planner: str
    plan_json: str
    skills: _containers.RepeatedScalarFieldContainer[str]
    generation_ms: int
    def __init__(self, attempt: _Optional[int] = ..., planner: _Optional[str] = ..., plan_json: _Optional[str] = ..., skills: _Optional[_Iterable[str]] = ..., generation_ms: _Optional[int] = ...) -> None: ...

class ToolStarted(_message.Message):
    __slots__ = ("tool_id", "tool_path", "attempt")
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_PATH_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    tool_id: str
    tool_path: str
    attempt: int
    def __init__(self, tool_id: _Optional[str] = ..., tool_path: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ToolOutput(_message.Message):
    __slots__ = ("tool_id", "type", "event_json", "attempt")
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_JSON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    tool_id: str
    type: str
    event_json: str
    attempt: int
    def __init__(self, tool_id: _Optional[str] = ..., type: _Optional[str] = ..., event_json: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ToolFinished(_message.Message):
    __slots__ = ("tool_id", "ok", "error", "duration_ms", "output_json", "attempt", "queue_ms")
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    tool_id: str
    ok: bool
    error: str
    duration_ms: int
    output_json: str
    attempt: int
    queue_ms: int
    def __init__(self, tool_id: _Optional[str] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., duration_ms: _Optional[int] = ..., output_json: _Optional[str] = ..., attempt: _Optional[int] = ..., queue_ms: _Optional[int] = ...) -> None: ...

class Replan(_message.Message):
    __slots__ = ("attempt", "reason", "failed_tools", "disabled_skills")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FAILED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_SKILLS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    reason: str
    failed_tools: _containers.RepeatedScalarFieldContainer[str]
    disabled_skills: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, attempt: _Optional[int] = ..., reason: _Optional[str] = ..., failed_tools: _Optional[_Iterable[str]] = ..., disabled_skills: _Optional[_Iterable[str]] = ...) -> None: ...

class Fallback(_message.Message):
    __slots__ = ("attempts", "reason")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    reason: str
    def __init__(self, attempts: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class NarrationToken(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class Choices(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, options: _Optional[_Iterable[str]] = ...) -> None: ...

class TurnDone(_message.Message):
    __slots__ = ("turn_number", "narration", "fallback", "timings_ms", "state_json", "outcome")
    class TimingsMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TURN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    NARRATION_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    turn_number: int
    narration: str
    fallback: bool
    timings_ms: _containers.ScalarMap[str, int]
    state_json: str
    outcome: str
    def __init__(self, turn_number: _Optional[int] = ..., narration: _Optional[str] = ..., fallback: _Optional[bool] = ..., timings_ms: _Optional[_Mapping[str, int]] = ..., state_json: _Optional[str] = ..., outcome: _Optional[str] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SkillInfo(_message.Message):
    __slots__ = ("name", "description", "scripts", "health", "path", "enabled", "has_settings")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SCRIPTS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HAS_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    scripts: _containers.RepeatedScalarFieldContainer[str]
    health: str
    path: str
    enabled: bool
    has_settings: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., scripts: _Optional[_Iterable[str]] = ..., health: _Optional[str] = ..., path: _Optional[str] = ..., enabled: _Optional[bool] = ..., has_settings: _Optional[bool] = ...) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ("skills",)
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    skills: _containers.RepeatedCompositeFieldContainer[SkillInfo]
    def __init__(self, skills: _Optional[_Iterable[_Union[SkillInfo, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ActorStatus(_message.Message):
    __slots__ = ("name", "alive", "restarts", "pid")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    name: str
    alive: bool
    restarts: int
    pid: int
    def __init__(self, name: _Optional[str] = ..., alive: _Optional[bool] = ..., restarts: _Optional[int] = ..., pid: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("version", "actors", "model_path", "model_loads", "model_load_seconds", "model_queue_depth", "live_skill_processes", "skill_process_limit", "skill_queue_depth", "peak_skill_processes", "sessions", "turns_in_flight", "uptime_s", "data_dir", "model_file", "model_quantization", "model_slots_used", "model_slots_max", "model_waiting")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    MODEL_PATH_FIELD_NUMBER: _ClassVar[int]
    MODEL_LOADS_FIELD_NUMBER: _ClassVar[int]
    MODEL_LOAD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MODEL_QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    LIVE_SKILL_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    SKILL_PROCESS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SKILL_QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    PEAK_SKILL_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    TURNS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FILE_FIELD_NUMBER: _ClassVar[int]
    MODEL_QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    MODEL_SLOTS_USED_FIELD_NUMBER: _ClassVar[int]
    MODEL_SLOTS_MAX_FIELD_NUMBER: _ClassVar[int]
    MODEL_WAITING_FIELD_NUMBER: _ClassVar[int]
    version: str
    actors: _containers.RepeatedCompositeFieldContainer[ActorStatus]
    model_path: str
    model_loads: int
    model_load_seconds: float
    model_queue_depth: int
    live_skill_processes: int
    skill_process_limit: int
    skill_queue_depth: int
    peak_skill_processes: int
    sessions: int
    turns_in_flight: int
    uptime_s: float
    data_dir: str
    model_file: str
    model_quantization: str
    model_slots_used: int
    model_slots_max: int
    model_waiting: _containers.RepeatedCompositeFieldContainer[ModelWait]
    def __init__(self, version: _Optional[str] = ..., actors: _Optional[_Iterable[_Union[ActorStatus, _Mapping]]] = ..., model_path: _Optional[str] = ..., model_loads: _Optional[int] = ..., model_load_seconds: _Optional[float] = ..., model_queue_depth: _Optional[int] = ..., live_skill_processes: _Optional[int] = ..., skill_process_limit: _Optional[int] = ..., skill_queue_depth: _Optional[int] = ..., peak_skill_processes: _Optional[int] = ..., sessions: _Optional[int] = ..., turns_in_flight: _Optional[int] = ..., uptime_s: _Optional[float] = ..., data_dir: _Optional[str] = ..., model_file: _Optional[str] = ..., model_quantization: _Optional[str] = ..., model_slots_used: _Optional[int] = ..., model_slots_max: _Optional[int] = ..., model_waiting: _Optional[_Iterable[_Union[ModelWait, _Mapping]]] = ...) -> None: ...

class ModelWait(_message.Message):
    __slots__ = ("session_id", "kind", "position", "wait_s")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    kind: str
    position: int
    wait_s: float
    def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[str] = ..., position: _Optional[int] = ..., wait_s: _Optional[float] = ...) -> None: ...

class ListCampaignsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CampaignInfo(_message.Message):
    __slots__ = ("id", "title", "description", "path", "builtin", "free_text", "valid", "errors", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    FREE_TEXT_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    description: str
    path: str
    builtin: bool
    free_text: bool
    valid: bool
    errors: _containers.RepeatedScalarFieldContainer[str]
    version: str
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., path: _Optional[str] = ..., builtin: _Optional[bool] = ..., free_text: _Optional[bool] = ..., valid: _Optional[bool] = ..., errors: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ...) -> None: ...

class ListCampaignsResponse(_message.Message):
    __slots__ = ("campaigns",)
    CAMPAIGNS_FIELD_NUMBER: _ClassVar[int]
    campaigns: _containers.RepeatedCompositeFieldContainer[CampaignInfo]
    def __init__(self, campaigns: _Optional[_Iterable[_Union[CampaignInfo, _Mapping]]] = ...) -> None: ...

class SessionView(_message.Message):
    __slots__ = ("session_id", "campaign", "free_text", "state_json", "stats_json", "icons_json", "inventory_json", "npcs_json", "choices", "last_narration", "turns", "title", "status")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_FIELD_NUMBER: _ClassVar[int]
    FREE_TEXT_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    ICONS_JSON_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_JSON_FIELD_NUMBER: _ClassVar[int]
    NPCS_JSON_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    LAST_NARRATION_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    campaign: str
    free_text: bool
    state_json: str
    stats_json: str
    icons_json: str
    inventory_json: str
    npcs_json: str
    choices: _containers.RepeatedScalarFieldContainer[str]
    last_narration: str
    turns: int
    title: str
    status: str
    def __init__(self, session_id: _Optional[str] = ..., campaign: _Optional[str] = ..., free_text: _Optional[bool] = ..., state_json: _Optional[str] = ..., stats_json: _Optional[str] = ..., icons_json: _Optional[str] = ..., inventory_json: _Optional[str] = ..., npcs_json: _Optional[str] = ..., choices: _Optional[_Iterable[str]] = ..., last_narration: _Optional[str] = ..., turns: _Optional[int] = ..., title: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class AssetInfo(_message.Message):
    __slots__ = ("path", "kind", "media_type", "title", "keywords", "size_bytes")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    kind: str
    media_type: str
    title: str
    keywords: _containers.RepeatedScalarFieldContainer[str]
    size_bytes: int
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[str] = ..., media_type: _Optional[str] = ..., title: _Optional[str] = ..., keywords: _Optional[_Iterable[str]] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ListAssetsResponse(_message.Message):
    __slots__ = ("assets",)
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    assets: _containers.RepeatedCompositeFieldContainer[AssetInfo]
    def __init__(self, assets: _Optional[_Iterable[_Union[AssetInfo, _Mapping]]] = ...) -> None: ...

class AssetRequest(_message.Message):
    __slots__ = ("session_id", "path")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class Asset(_message.Message):
    __slots__ = ("path", "media_type", "data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    media_type: str
    data: bytes
    def __init__(self, path: _Optional[str] = ..., media_type: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class SkillConfigRequest(_message.Message):
    __slots__ = ("skill",)
    SKILL_FIELD_NUMBER: _ClassVar[int]
    skill: str
    def __init__(self, skill: _Optional[str] = ...) -> None: ...

class SetSkillConfigRequest(_message.Message):
    __slots__ = ("skill", "set", "unset")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SKILL_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    UNSET_FIELD_NUMBER: _ClassVar[int]
    skill: str
    set: _containers.ScalarMap[str, str]
    unset: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, skill: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., unset: _Optional[_Iterable[str]] = ...) -> None: ...

class SetSkillEnabledRequest(_message.Message):
    __slots__ = ("skill", "enabled")
    SKILL_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    skill: str
    enabled: bool
    def __init__(self, skill: _Optional[str] = ..., enabled: _Optional[bool] = ...) -> None: ...

class FieldProblem(_message.Message):
    __slots__ = ("field", "message")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    field: str
    message: str
    def __init__(self, field: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class SkillConfigView(_message.Message):
    __slots__ = ("skill", "description", "enabled", "view_json", "saved", "problems")
    SKILL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    VIEW_JSON_FIELD_NUMBER: _ClassVar[int]
    SAVED_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    skill: str
    description: str
    enabled: bool
    view_json: str
    saved: bool
    problems: _containers.RepeatedCompositeFieldContainer[FieldProblem]
    def __init__(self, skill: _Optional[str] = ..., description: _Optional[str] = ..., enabled: _Optional[bool] = ..., view_json: _Optional[str] = ..., saved: _Optional[bool] = ..., problems: _Optional[_Iterable[_Union[FieldProblem, _Mapping]]] = ...) -> None: ...

class ListCharactersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CharacterInfo(_message.Message):
    __slots__ = ("id", "name", "description", "fresh", "campaigns", "created_at_ms", "updated_at_ms", "has_portrait")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FRESH_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGNS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_PORTRAIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    description: str
    fresh: bool
    campaigns: _containers.RepeatedScalarFieldContainer[str]
    created_at_ms: int
    updated_at_ms: int
    has_portrait: bool
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., fresh: _Optional[bool] = ..., campaigns: _Optional[_Iterable[str]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., has_portrait: _Optional[bool] = ...) -> None: ...

class ListCharactersResponse(_message.Message):
    __slots__ = ("characters",)
    CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    characters: _containers.RepeatedCompositeFieldContainer[CharacterInfo]
    def __init__(self, characters: _Optional[_Iterable[_Union[CharacterInfo, _Mapping]]] = ...) -> None: ...

class CharacterRef(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class SaveCharacterRequest(_message.Message):
    __slots__ = ("id", "description", "name", "portrait")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PORTRAIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    name: str
    portrait: bytes
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., name: _Optional[str] = ..., portrait: _Optional[bytes] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("data_type", "record_json", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    record_json: str
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., record_json: _Optional[str] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("data_type", "key", "changes_json", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CHANGES_JSON_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    key: str
    changes_json: str
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., key: _Optional[str] = ..., changes_json: _Optional[str] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class AdjustScoreRequest(_message.Message):
    __slots__ = ("data_type", "key", "delta", "event", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    key: str
    delta: float
    event: str
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., key: _Optional[str] = ..., delta: _Optional[float] = ..., event: _Optional[str] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class ScoreDelta(_message.Message):
    __slots__ = ("key", "delta", "minimum", "maximum", "decay_rate")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    DECAY_RATE_FIELD_NUMBER: _ClassVar[int]
    key: str
    delta: float
    minimum: float
    maximum: float
    decay_rate: float
    def __init__(self, key: _Optional[str] = ..., delta: _Optional[float] = ..., minimum: _Optional[float] = ..., maximum: _Optional[float] = ..., decay_rate: _Optional[float] = ...) -> None: ...

class AdjustScoresRequest(_message.Message):
    __slots__ = ("data_type", "changes", "event", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    changes: _containers.RepeatedCompositeFieldContainer[ScoreDelta]
    event: str
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., changes: _Optional[_Iterable[_Union[ScoreDelta, _Mapping]]] = ..., event: _Optional[str] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class KeyRequest(_message.Message):
    __slots__ = ("data_type", "key", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    key: str
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., key: _Optional[str] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ("record_json",)
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    record_json: str
    def __init__(self, record_json: _Optional[str] = ...) -> None: ...

class RecordsResponse(_message.Message):
    __slots__ = ("records_json",)
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    records_json: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, records_json: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class SemanticSearchRequest(_message.Message):
    __slots__ = ("data_type", "query", "limit", "filters_json", "min_score", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTERS_JSON_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    query: str
    limit: int
    filters_json: str
    min_score: float
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., filters_json: _Optional[str] = ..., min_score: _Optional[float] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class ExactMatchRequest(_message.Message):
    __slots__ = ("data_type", "filters_json", "limit", "skill_scope")
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILTERS_JSON_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SKILL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    data_type: str
    filters_json: str
    limit: int
    skill_scope: bool
    def __init__(self, data_type: _Optional[str] = ..., filters_json: _Optional[str] = ..., limit: _Optional[int] = ..., skill_scope: _Optional[bool] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("record_json", "score")
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    record_json: str
    score: float
    def __init__(self, record_json: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits",)
    HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ...) -> None: ...
