"""Plan JSON and the Execution Result trace (docs/plans.md, "Plan JSON", "Execution result").

Wire documents are msgspec structs with the spec's camelCase field names, so
decoding a plan validates its types and names the offending field on error.
"""

from __future__ import annotations

import copy
import graphlib
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

# Bounds keep every number a plan gives convertible to float seconds (an unbounded
# integer overflows ``timeoutMs / 1000`` and the backoff) and its retries finite in practice.
MAX_MS = 24 * 60 * 60 * 1000  # a day, for any timeout or backoff
MAX_RETRIES = 100

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(gt=0)]
Millis = Annotated[int, msgspec.Meta(gt=0, le=MAX_MS)]

ToolState = Literal["success", "failed", "skipped", "timeout"]
ErrorCategory = Literal[
    "tool_failure", "circular_dependency", "timeout", "invalid_json", "process_error"
]

MAX_GENERATION_ATTEMPTS = 5


class RetryPolicy(msgspec.Struct, kw_only=True, omit_defaults=True):
    maxRetries: Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)] = 3
    backoffMs: Annotated[int, msgspec.Meta(ge=0, le=MAX_MS)] = 100

    def delay_s(self, attempt: int) -> float:
        """Delay before retry number ``attempt`` (1-based): backoffMs × 2^(attempt−1)."""
        return self.backoffMs * (2 ** (attempt - 1)) / 1000.0


class ToolInvocation(msgspec.Struct, kw_only=True, omit_defaults=True):
    toolId: NonEmpty
    toolPath: NonEmpty
    input: dict[str, Any] = {}
    dependencies: list[NonEmpty] = []
    required: bool = True
    # ``async`` is a Python keyword; the wire name stays ``async``.
    is_async: bool = msgspec.field(default=False, name="async")
    # None means "not set by the plan": the skill's policy or the default applies.
    retryPolicy: RetryPolicy | None = None
    timeoutMs: Millis | None = None


class PlanMetadata(msgspec.Struct, kw_only=True):
    generationAttempt: Annotated[int, msgspec.Meta(ge=1, le=MAX_GENERATION_ATTEMPTS)] = 1
    parentPlanId: str | None = None


class Plan(msgspec.Struct, kw_only=True, omit_defaults=True):
    requestId: NonEmpty
    tools: list[ToolInvocation]
    narrative: str | None = None
    parallel: bool = False
    disabledSkills: list[str] = []
    metadata: PlanMetadata = msgspec.field(default_factory=PlanMetadata)
    timeoutMs: Millis | None = None


def new_plan_id() -> str:
    return str(uuid.uuid4())


class ToolError(msgspec.Struct, kw_only=True, omit_defaults=True):
    code: str
    message: str
    category: ErrorCategory
    line: int | None = None


def _kept(value: Any) -> Any:
    """A default that ``omit_defaults`` still writes.

    msgspec leaves out a field equal to a constant default, or an empty collection
    made by ``list``/``dict`` themselves, but never a value from another factory.
    The Execution Result always carries its counts and collections, while an absent
    ``output`` or ``error`` is left out: the original schema wants an object there or
    no key, never ``null``.
    """
    return msgspec.field(default_factory=lambda: copy.deepcopy(value))


class ToolResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    toolId: str
    state: ToolState
    skill: str | None = None
    output: dict[str, Any] | None = None
    events: list[dict[str, Any]] = _kept([])
    executionTimeMs: int = _kept(0)
    retryCount: int = _kept(0)
    error: ToolError | None = None
    exitCode: int | None = None
    stderr: str = ""
    warnings: list[str] = []


class ExecutionResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    planId: str
    success: bool
    canReplan: bool
    failedTools: list[str] = _kept([])
    disabledSkills: list[str] = _kept([])
    toolResults: list[ToolResult] = _kept([])
    aggregatedState: dict[str, Any] = _kept({})
    aggregatedAssets: list[dict[str, Any]] = _kept([])
    uiEvents: list[dict[str, Any]] = _kept([])
    executionTimeMs: int = _kept(0)
    attemptNumber: int = _kept(1)
    error: ToolError | None = None


class PlanError(ValueError):
    """A plan that cannot be executed; ``category`` is one of the five ``ErrorCategory`` values."""

    def __init__(self, message: str, category: ErrorCategory = "invalid_json",
                 code: str = "invalid_plan") -> None:
        super().__init__(message)
        self.category = category
        self.code = code


def _line_col(data: bytes, byte_offset: int) -> tuple[int, int]:
    before = data[:byte_offset]
    line = before.count(b"\n") + 1
    col = byte_offset - (before.rfind(b"\n") + 1) + 1
    return line, col


def decode_plan(data: bytes | str, source: str = "<plan>", *, check_graph: bool = True) -> Plan:
    """Decode and validate Plan JSON; errors name the source, line or field.

    ``check_graph=False`` checks the document only, leaving its tools' graph (duplicate
    ids, unknown dependencies, cycles) to the executor, which answers such a plan with
    an Execution Result rather than an exception.
    """
    try:
        raw = data.encode() if isinstance(data, str) else data
    except UnicodeEncodeError as exc:  # a lone surrogate: no JSON text can hold it
        raise PlanError(f"{source}: not valid Unicode at character {exc.start}") from None
    try:
        plan = msgspec.json.decode(raw, type=Plan)
    except msgspec.ValidationError as exc:
        raise PlanError(f"{source}: {exc}") from None
    except RecursionError:
        raise PlanError(f"{source}: JSON nested too deeply") from None
    except msgspec.DecodeError as exc:
        message = str(exc)
        marker = "(byte "
        if marker in message:
            offset = int(message.rsplit(marker, 1)[1].rstrip(")"))
            line, col = _line_col(raw, offset)
            message = f"{message} at line {line}, column {col}"
        raise PlanError(f"{source}: {message}") from None
    if check_graph:
        validate_plan(plan)
    return plan


def load_plan(path: Path, *, check_graph: bool = True) -> Plan:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}", code="unreadable") from None
    return decode_plan(data, str(path), check_graph=check_graph)


def encode(doc: msgspec.Struct) -> bytes:
    return msgspec.json.encode(doc)


def validate_plan(plan: Plan) -> list[str]:
    """Reject duplicate ids, unknown dependencies and cycles; return a topological order.

    The order is deterministic: among tools that are ready together, plan order wins.
    """
    if not plan.tools and not (plan.narrative and plan.narrative.strip()):
        raise PlanError("tools: a plan without tools must carry a narrative", code="empty_plan")
    ids: dict[str, int] = {}
    for index, tool in enumerate(plan.tools):
        if tool.toolId in ids:
            raise PlanError(
                f"tools[{index}].toolId: duplicate toolId {tool.toolId!r}", code="duplicate_tool_id"
            )
        ids[tool.toolId] = index
    for index, tool in enumerate(plan.tools):
        for dep in tool.dependencies:
            if dep not in ids:
                raise PlanError(
                    f"tools[{index}].dependencies: unknown toolId {dep!r}",
                    code="unknown_dependency",
                )
    return topological_order(plan)


def topological_order(plan: Plan) -> list[str]:
    position = {tool.toolId: i for i, tool in enumerate(plan.tools)}
    sorter = graphlib.TopologicalSorter({t.toolId: t.dependencies for t in plan.tools})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise PlanError(
            f"circular dependency: {cycle}", category="circular_dependency", code="cycle"
        ) from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return order
