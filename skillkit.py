"""The SDK for skill authors: tool protocol v0 I/O, input checks, settings and the Store.

A skill script runs with the project's interpreter, so it imports this module as
``narratoria.skillkit`` (the built-in memory, reputation, perception, choices and
portrait skills do) instead of each carrying a copy. It speaks only the protocol and
the daemon's gRPC Store service, like every client. What it offers:

- ``run(script, body)``: reads the request on stdin and calls ``body(out, input)``;
  ``out`` is an :class:`Emitter` (``emit``, ``log``; ``done`` is the body's last event);
- input checks that name the offending field: ``text``, ``strings``, ``number``,
  ``integer``, ``boolean``, ``timestamp``, ``warn_unknown``; ``invalid`` builds a
  :class:`SkillFailure` of your own;
- the player's settings: ``load_config`` (what ``narratoria skills config`` saved) and
  ``config_value``;
- :class:`Store`: the session's (or, ``shared=True``, the skill's own) records: ``put``,
  ``get``, ``update``, ``delete``, ``adjust_score(s)``, ``semantic_search``,
  ``exact_match``.

Every failure a script can foresee is a ``SkillFailure``: ``run`` turns it into an
``error`` event plus ``done`` with ``ok: false`` and exit code 0. Anything else (a
bug) becomes an ``internal_error`` the same way, never a bare traceback. A script::

    #!/usr/bin/env python3
    from narratoria import skillkit as kit

    def body(out, params):
        name = kit.text(params.get("name"), "name", max_length=80, required=True)
        out.emit({"type": "done", "ok": True, "summary": f"hello, {name}"})

    raise SystemExit(kit.run("hello/greet", body))
"""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import datetime, timezone
from typing import Any, Callable

PROTOCOL_VERSION = "0"
DATA_TYPE_MEMORY = "memory_event"
DATA_TYPE_REPUTATION = "faction_reputation"
ADDRESS_ENV = "NARRATORIA_ADDRESS"
TOKEN_ENV = "NARRATORIA_SKILL_TOKEN"
TOKEN_METADATA = "x-narratoria-skill-token"
# Per Store call. The store answers in milliseconds when it is up, but a daemon is ready
# before MiniLM has loaded (~5 s on 2 quiet cores, over 10 s beside another busy process)
# and a skill's first write waits for it (a first Put failed at 10 s so); under the
# executor's 30 s tool cap, so a store that never answers is still reported in protocol.
STORE_TIMEOUT_S = 25.0

UTC = timezone.utc


class SkillFailure(Exception):
    """A controlled failure: reported as an ``error`` event and ``done ok:false``."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or {}


# -- protocol output ----------------------------------------------------------------------

class Emitter:
    """Writes events as they happen, each stamped with the version and the requestId."""

    def __init__(self) -> None:
        self.request_id: str | None = None
        self.done = False

    def emit(self, event: dict[str, Any]) -> None:
        doc = {"version": PROTOCOL_VERSION, **event}
        if self.request_id is not None:
            doc["requestId"] = self.request_id
        # ASCII-only JSON: valid UTF-8 whatever the input held (lone surrogates included).
        sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        if event.get("type") == "done":
            self.done = True

    def log(self, message: str, level: str = "info", **fields: Any) -> None:
        event: dict[str, Any] = {"type": "log", "level": level, "message": message}
        if fields:
            event["fields"] = fields
        self.emit(event)

    def fail(self, failure: SkillFailure) -> None:
        error: dict[str, Any] = {"type": "error", "errorCode": failure.code,
                                 "errorMessage": failure.message}
        if failure.details:
            error["details"] = failure.details
        self.emit(error)
        self.emit({"type": "done", "ok": False, "summary": failure.message})


def run(script: str, body: Callable[[Emitter, dict[str, Any]], None]) -> int:
    """Read the request, run ``body(out, input)``, and report every failure in protocol."""
    out = Emitter()
    try:
        try:
            out.request_id, params = read_request(sys.stdin.buffer.read() if sys.stdin else b"")
            body(out, params)
        except SkillFailure as failure:
            out.fail(failure)
        except Exception as exc:  # a bug: still an error event and done, never a traceback
            out.fail(SkillFailure("internal_error", f"{script}: unexpected {type(exc).__name__}: {exc}"))
        if not out.done:  # body must end with done; a missing one is a bug of ours
            out.fail(SkillFailure("internal_error", f"{script}: finished without a result"))
    except BrokenPipeError:
        # The reader went away: nothing left to report to. Quiet the final flush.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    return 0


def read_request(raw: bytes) -> tuple[str | None, dict[str, Any]]:
    """stdin → (requestId, input). Empty stdin means an empty input."""
    try:
        text = raw.decode("utf-8")
        request = json.loads(text) if text.strip() else {}
    except UnicodeDecodeError as exc:  # a ValueError too, so caught first
        raise SkillFailure("invalid_input", f"stdin: not valid UTF-8 ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise SkillFailure("invalid_input", f"stdin: not valid JSON ({exc})") from None
    if not isinstance(request, dict):
        raise SkillFailure("invalid_input", f"stdin: expected a JSON object, got {describe(request)}")
    request_id = request.get("requestId")
    params = {} if request.get("input") is None else request["input"]
    if not isinstance(params, dict):
        raise SkillFailure("invalid_input", f"input: expected an object, got {describe(params)}",
                           {"field": "input"})
    return (request_id if isinstance(request_id, str) else None), params


# -- input checks: every message starts with the offending field -----------------------------

def describe(value: Any) -> str:
    """``<JSON type> <JSON text>`` of a bad value, shortened, for error messages."""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        shown = "..."
    if len(shown) > 64:
        shown = shown[:64] + "..."
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string",
             list: "array", dict: "object", type(None): "null"}
    return f"{kinds.get(type(value), type(value).__name__)} {shown}"


def invalid(field: str, problem: str) -> SkillFailure:
    return SkillFailure("invalid_input", f"{field}: {problem}", {"field": field})


def text(value: Any, field: str, *, max_length: int, required: bool = False) -> str | None:
    """A non-blank string (stripped), or None when absent/null and not required."""
    if value is None:
        if required:
            raise invalid(field, "required (a non-empty string)")
        return None
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, f"expected a non-empty string, got {describe(value)}")
    value = value.strip()
    if len(value) > max_length:
        raise invalid(field, f"longer than {max_length} characters ({len(value)})")
    return value


def strings(value: Any, field: str, *, max_items: int, max_length: int) -> list[str]:
    """A list of non-blank strings (stripped, duplicates dropped); a lone string is a list of one."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise invalid(field, f"expected an array of strings, got {describe(value)}")
    if len(value) > max_items:
        raise invalid(field, f"at most {max_items} items, got {len(value)}")
    out: list[str] = []
    for i, item in enumerate(value):
        item = text(item, f"{field}[{i}]", max_length=max_length, required=True)
        if item not in out:
            out.append(item)
    return out


def number(value: Any, field: str, *, low: float | None = None, high: float | None = None,
           required: bool = False) -> float | None:
    if value is None:
        if required:
            raise invalid(field, "required (a number)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid(field, f"expected a finite number, got {describe(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise invalid(field, f"must be between {low:g} and {high:g}, got {value:g}")
    return float(value)


def integer(value: Any, field: str, *, low: int, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # JSON 5.0 is an integer
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, f"expected an integer, got {describe(value)}")
    if not low <= value <= high:
        raise invalid(field, f"must be between {low} and {high}, got {value}")
    return value


def boolean(value: Any, field: str, *, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(field, f"expected true or false, got {describe(value)}")
    return value


def timestamp(value: Any, field: str) -> datetime | None:
    """An ISO 8601 date or date-time (``Z`` or an offset; none means UTC), as aware UTC."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(field, f"expected an ISO 8601 date-time string, got {describe(value)}")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        raise invalid(field, f"not an ISO 8601 date-time: {value[:64]!r}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def now() -> datetime:
    return datetime.now(UTC)


def warn_unknown(out: Emitter, params: dict[str, Any], known: set[str], where: str = "input") -> None:
    unknown = sorted(k for k in params if k not in known)
    if unknown:
        out.log(f"ignoring unknown {where} fields: {', '.join(unknown)}", "warn")


def shorten(value: str, length: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= length else value[: length - 1].rstrip() + "…"


# -- configuration ---------------------------------------------------------------------------

def load_config(out: Emitter) -> dict[str, Any]:
    """The player's settings: $NARRATORIA_SKILL_CONFIG (resolved by the runtime), else
    config.json in the skill root ($NARRATORIA_SKILL_DIR, else the parent of the script's
    ``scripts/``). A broken file only warns: the defaults apply."""
    if os.environ.get("NARRATORIA_SKILL_CONFIG_ERROR"):
        out.log(f"settings ignored: {os.environ['NARRATORIA_SKILL_CONFIG_ERROR']}", "warn")
        return {}
    given = os.environ.get("NARRATORIA_SKILL_CONFIG")
    # The skill root: the runtime names it; a script run by hand is SKILL/scripts/NAME.
    root = os.environ.get("NARRATORIA_SKILL_DIR") or os.path.dirname(
        os.path.dirname(os.path.abspath(sys.argv[0])))
    try:
        if given is not None:
            data = json.loads(given)
        else:
            with open(os.path.join(root, "config.json"), "rb") as fh:
                data = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        out.log(f"config ignored: {exc}", "warn")
        return {}
    if not isinstance(data, dict):
        out.log("config ignored: not a JSON object", "warn")
        return {}
    return data


def config_value(out: Emitter, config: dict[str, Any], key: str, check: Callable[[Any], Any],
                 default: Any) -> Any:
    """``check(config[key])`` or, when absent or invalid (a warning), ``default``."""
    if key not in config or config[key] is None:
        return default
    try:
        return check(config[key])
    except SkillFailure as exc:
        out.log(f"config {key} ignored ({exc.message}); using {default!r}", "warn")
        return default


# -- the daemon's Store service ------------------------------------------------------------

_STATUS_CODES = {
    "UNAVAILABLE": "store_unavailable",
    "DEADLINE_EXCEEDED": "store_unavailable",
    "PERMISSION_DENIED": "store_forbidden",
    "UNAUTHENTICATED": "store_forbidden",
    "INVALID_ARGUMENT": "store_rejected",
    "NOT_FOUND": "store_not_found",
}


class Store:
    """The Store gRPC service, bound to this invocation's playthrough by its token.

    The supervisor gives each invocation ``NARRATORIA_ADDRESS`` and a token that is
    valid while its plan runs; without them the script is not running under the
    daemon and there is no store to talk to.

    Every call takes ``shared=True`` to work instead on this skill's own records,
    shared by every playthrough (the daemon's ``skill:<skill name>`` scope, which it
    derives from the token: a skill reaches its own shared records and no other
    skill's). A script the plan ran by a bare path, outside every skill, has no
    shared records: such a call fails ``store_forbidden``.
    """

    def __init__(self) -> None:
        address = os.environ.get(ADDRESS_ENV, "").strip()
        token = os.environ.get(TOKEN_ENV, "").strip()
        missing = [name for name, value in ((ADDRESS_ENV, address), (TOKEN_ENV, token)) if not value]
        if missing:
            raise SkillFailure(
                "store_unavailable",
                f"no store: {' and '.join(missing)} not set (the daemon sets them when it runs "
                "this skill in a session)", {"missing": missing})
        try:
            import grpc
            from narratoria.proto import narratoria_pb2 as pb
            from narratoria.proto import narratoria_pb2_grpc as rpc
        except ImportError as exc:
            raise SkillFailure("store_unavailable", f"no store client: {exc}") from None
        self._grpc, self.pb = grpc, pb
        self._channel = grpc.insecure_channel(address)
        self._stub = rpc.StoreStub(self._channel)
        self._metadata = [(TOKEN_METADATA, token)]

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, metadata=self._metadata,
                                               timeout=STORE_TIMEOUT_S)
        except self._grpc.RpcError as exc:
            status = exc.code().name if hasattr(exc, "code") and exc.code() else "UNKNOWN"
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            where = " (shared)" if getattr(request, "skill_scope", False) else ""
            raise SkillFailure(_STATUS_CODES.get(status, "store_error"),
                               f"store {method}{where}: {status}: {detail}",
                               {"grpcStatus": status}) from None

    @staticmethod
    def _record(record_json: str) -> dict[str, Any] | None:
        return json.loads(record_json) if record_json else None

    def put(self, data_type: str, record: dict[str, Any], *, shared: bool = False) -> dict[str, Any]:
        reply = self._call("Put", self.pb.PutRequest(data_type=data_type, record_json=json.dumps(record),
                                                     skill_scope=shared))
        return self._record(reply.record_json) or {}

    def update(self, data_type: str, key: str, changes: dict[str, Any], *,
               shared: bool = False) -> dict[str, Any]:
        reply = self._call("Update", self.pb.UpdateRequest(data_type=data_type, key=key,
                                                           changes_json=json.dumps(changes),
                                                           skill_scope=shared))
        return self._record(reply.record_json) or {}

    def adjust_score(self, data_type: str, key: str, delta: float,
                     event: str | None = None, *, shared: bool = False) -> dict[str, Any]:
        """Add ``delta`` to the score decayed to now, clamped, in one store transaction
        (a key not stored yet starts from 0); ``event`` joins an NPC's history."""
        reply = self._call("AdjustScore", self.pb.AdjustScoreRequest(
            data_type=data_type, key=key, delta=delta, event=event or "", skill_scope=shared))
        return self._record(reply.record_json) or {}

    def adjust_scores(self, data_type: str, changes: list[dict[str, Any]], event: str | None = None,
                      *, shared: bool = False) -> list[dict[str, Any]]:
        """``adjust_score`` for several keys in ONE store transaction: every score moves or
        none does. ``changes``: ``{key, delta, minimum?, maximum?, decay_rate?}`` each; the
        bounds are the caller's scale (the current score is read as clamped into it, and
        the new one is clamped into it), ``decay_rate`` is stored on the record. Returns
        the records as written, one per change, in order."""
        deltas = []
        for change in changes:
            extra = {f: change[f] for f in ("minimum", "maximum", "decay_rate")
                     if change.get(f) is not None}
            deltas.append(self.pb.ScoreDelta(key=change["key"], delta=change["delta"], **extra))
        reply = self._call("AdjustScores", self.pb.AdjustScoresRequest(
            data_type=data_type, changes=deltas, event=event or "", skill_scope=shared))
        return [json.loads(r) for r in reply.records_json]

    def delete(self, data_type: str, key: str, *, shared: bool = False) -> bool:
        return bool(self._call("Delete", self.pb.KeyRequest(data_type=data_type, key=key,
                                                            skill_scope=shared)).deleted)

    def get(self, data_type: str, key: str, *, shared: bool = False) -> dict[str, Any] | None:
        return self._record(self._call("Get", self.pb.KeyRequest(
            data_type=data_type, key=key, skill_scope=shared)).record_json)

    def semantic_search(self, data_type: str, query: str, limit: int, filters: dict[str, Any],
                        min_score: float | None = None, *,
                        shared: bool = False) -> list[tuple[dict[str, Any], float]]:
        reply = self._call("SemanticSearch", self.pb.SemanticSearchRequest(
            data_type=data_type, query=query, limit=limit,
            filters_json=json.dumps(filters) if filters else "", min_score=min_score or 0.0,
            skill_scope=shared))
        return [(json.loads(hit.record_json), hit.score) for hit in reply.hits]

    def exact_match(self, data_type: str, filters: dict[str, Any] | None = None,
                    limit: int = 0, *, shared: bool = False) -> list[dict[str, Any]]:
        reply = self._call("ExactMatch", self.pb.ExactMatchRequest(
            data_type=data_type, filters_json=json.dumps(filters) if filters else "", limit=limit,
            skill_scope=shared))
        return [json.loads(hit.record_json) for hit in reply.hits]
