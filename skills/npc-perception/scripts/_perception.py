"""Shared code of the npc-perception scripts (tool protocol v0).

Not a script itself: discovery skips files in scripts/ whose names start with "_".
Each script imports it from its own folder, reads one JSON request on stdin and
writes NDJSON events on stdout; every failure is an ``error`` event followed by
``done`` ok:false, exit code 0, never a bare traceback.

The store is the daemon's Store gRPC service (proto/narratoria.proto), reached
through ``NARRATORIA_ADDRESS`` with the per-invocation ``NARRATORIA_SKILL_TOKEN``
sent as metadata ``x-narratoria-skill-token``. The token binds every call to the
session's playthrough, so NPC ids are per playthrough.
"""

import json
import math
import os
import sys
from datetime import datetime, timedelta, timezone

PROTOCOL_VERSION = "0"
DATA_TYPE = "npc_perception"
FACTION_DATA_TYPE = "faction_reputation"
TOKEN_METADATA = "x-narratoria-skill-token"
STORE_TIMEOUT_S = 5.0

SCORE_MIN, SCORE_MAX = -100.0, 100.0
MAX_ID_LENGTH = 128
MAX_NAME_LENGTH = 200
MAX_NOTE_LENGTH = 200
MAX_EVENT_LENGTH = 64
RECENT_EVENTS = 5

# Attitude bands and dice modifiers (architecture §4.2.3): neutral is -30..+30
# inclusive (no modifier); beyond it the modifier grows one step per tier, the
# middle boundary being the store's "strong impression" threshold (±50).
#   score > 70          devoted     +3
#   50 < score <= 70    friendly    +2
#   30 < score <= 50    friendly    +1
#   -30 <= score <= 30  neutral      0
#   -50 <= score < -30  unfriendly  -1
#   -70 <= score < -50  unfriendly  -2
#   score < -70         hostile     -3
# skills/dice-roller/scripts/roll-dice repeats these numbers: keep them in step.
NEUTRAL_LIMIT = 30.0
STRONG_LIMIT = 50.0
EXTREME_LIMIT = 70.0

# Config defaults (references/config-schema.json).
DEFAULT_CONFIG = {"variance": 100.0, "factionInfluenceWeight": 0.5, "historyLimit": 50}


class SkillError(Exception):
    """A controlled failure, reported as an ``error`` event plus ``done ok:false``."""

    def __init__(self, code, message, details=None):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or {}


def invalid(field, problem):
    name = "input." + field
    return SkillError("invalid_input", "%s: %s" % (name, problem), {"field": name})


# -- attitude ------------------------------------------------------------------------

def attitude(score):
    """The attitude band of a (decayed) score."""
    if score > EXTREME_LIMIT:
        return "devoted"
    if score > NEUTRAL_LIMIT:
        return "friendly"
    if score >= -NEUTRAL_LIMIT:
        return "neutral"
    if score >= -EXTREME_LIMIT:
        return "unfriendly"
    return "hostile"


def dice_modifier(score):
    """The dice modifier of a (decayed) score: 0 when neutral, else ±1..±3."""
    size = abs(score)
    if size <= NEUTRAL_LIMIT:
        return 0
    tier = 1 if size <= STRONG_LIMIT else 2 if size <= EXTREME_LIMIT else 3
    return tier if score > 0 else -tier


def clamp(score):
    return min(SCORE_MAX, max(SCORE_MIN, score))


def rounded(score):
    return round(score, 2) + 0.0  # + 0.0 turns -0.0 into 0.0


# -- values --------------------------------------------------------------------------

def describe(value):
    """``<JSON type> <JSON text>`` of a bad value, shortened, for error messages."""
    try:
        shown = json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        shown = "..."
    if len(shown) > 64:
        shown = shown[:64] + "..."
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string",
             list: "array", dict: "object", type(None): "null"}
    return "%s %s" % (kinds.get(type(value), type(value).__name__), shown)


def is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def number(params, field, low, high, default=None):
    value = params.get(field)
    if value is None:
        return default
    if not is_number(value):
        raise invalid(field, "expected a number, got %s" % describe(value))
    if not low <= value <= high:
        raise invalid(field, "%s out of range %g..%g" % (value, low, high))
    return float(value)


def integer(params, field):
    value = params.get(field)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise invalid(field, "expected an integer, got %s" % describe(value))
    return value


def boolean(params, field, default=False):
    value = params.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(field, "expected true or false, got %s" % describe(value))
    return value


def text(params, field, max_length, required=False):
    value = params.get(field)
    if value is None:
        if required:
            raise invalid(field, "required")
        return None
    if not isinstance(value, str):
        raise invalid(field, "expected a string, got %s" % describe(value))
    value = value.strip()
    if not value:
        raise invalid(field, "must not be empty")
    if len(value) > max_length:
        raise invalid(field, "longer than %d characters" % max_length)
    if any(ord(c) < 32 for c in value):
        raise invalid(field, "control characters are not allowed")
    return value


def npc_id(params, field="npcId", required=True):
    return text(params, field, MAX_ID_LENGTH, required=required)


def strings(params, field, max_items, max_length):
    value = params.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(field, "expected an array of strings, got %s" % describe(value))
    if len(value) > max_items:
        raise invalid(field, "more than %d items" % max_items)
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise invalid("%s[%d]" % (field, i), "expected a string, got %s" % describe(item))
        out.append(text({"%s[%d]" % (field, i): item}, "%s[%d]" % (field, i), max_length,
                        required=True))
    return out


def timestamp(params, field):
    """An ISO-8601 timestamp with a time zone, as an aware UTC datetime (None when absent)."""
    value = params.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(field, "expected an ISO-8601 timestamp string, got %s" % describe(value))
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise invalid(field, "not an ISO-8601 timestamp: %s" % describe(value)) from None
    if parsed.tzinfo is None:
        raise invalid(field, "needs a time zone (e.g. 2026-01-01T12:00:00Z)")
    parsed = parsed.astimezone(timezone.utc)
    if parsed > now() + timedelta(minutes=1):
        raise invalid(field, "is in the future")
    return parsed


def now():
    return datetime.now(timezone.utc)


def iso(moment):
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def warn_unknown(params, known, warnings):
    unknown = sorted(k for k in params if k not in known)
    if unknown:
        warnings.append("ignoring unknown input fields: %s" % ", ".join(unknown))


# -- config --------------------------------------------------------------------------

def load_config(warnings):
    """The player's settings: $NARRATORIA_SKILL_CONFIG (resolved by the runtime), else
    config.json in the skill root; a broken setting only warns and its default is used."""
    if os.environ.get("NARRATORIA_SKILL_CONFIG_ERROR"):
        warnings.append("settings ignored: %s" % os.environ["NARRATORIA_SKILL_CONFIG_ERROR"])
    config = dict(DEFAULT_CONFIG)
    given = os.environ.get("NARRATORIA_SKILL_CONFIG")
    root = os.environ.get("NARRATORIA_SKILL_DIR") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        if given is not None:
            data = json.loads(given)
        else:
            with open(os.path.join(root, "config.json"), "rb") as fh:
                data = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return config
    except (OSError, ValueError) as exc:
        warnings.append("config.json ignored: %s" % exc)
        return config
    if not isinstance(data, dict):
        warnings.append("config.json ignored: not a JSON object")
        return config
    checks = {
        "decayRate": lambda v: is_number(v) and 0 <= v <= 1,
        "variance": lambda v: is_number(v) and 0 <= v <= 100,
        "factionInfluenceWeight": lambda v: is_number(v) and 0 <= v <= 1,
        "historyLimit": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1000,
    }
    for key, ok in checks.items():
        if key in data and ok(data[key]):
            config[key] = data[key]
        elif key in data and data[key] is not None:
            warnings.append("config: %s=%s is out of range or of the wrong type; default used"
                            % (key, describe(data[key])))
    return config


# -- the store -----------------------------------------------------------------------

class Store:
    """The daemon's Store service, bound to this invocation's playthrough by its token."""

    def __init__(self):
        address = os.environ.get("NARRATORIA_ADDRESS", "")
        token = os.environ.get("NARRATORIA_SKILL_TOKEN", "")
        if not address or not token:
            raise SkillError(
                "store_unavailable",
                "no store: NARRATORIA_ADDRESS and NARRATORIA_SKILL_TOKEN must be set "
                "(the daemon sets them for skill invocations)")
        try:
            import grpc
            from narratoria.proto import narratoria_pb2 as pb
            from narratoria.proto import narratoria_pb2_grpc as rpc
        except ImportError as exc:
            raise SkillError("store_unavailable", "no gRPC client library: %s" % exc) from None
        self.grpc, self.pb = grpc, pb
        self.address = address
        self.channel = grpc.insecure_channel(address)
        self.stub = rpc.StoreStub(self.channel)
        self.metadata = [(TOKEN_METADATA, token)]

    def _call(self, method, request):
        try:
            return getattr(self.stub, method)(request, metadata=self.metadata,
                                              timeout=STORE_TIMEOUT_S)
        except self.grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            name = code.name if code is not None else "UNKNOWN"
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            if name in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
                raise SkillError("store_denied", "store refused the skill token (%s): %s"
                                 % (name, detail), {"grpcCode": name}) from None
            if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"):
                raise SkillError("store_unavailable", "store at %s unreachable (%s): %s"
                                 % (self.address, name, detail), {"grpcCode": name}) from None
            raise SkillError("store_error", "store %s failed (%s): %s" % (method, name, detail),
                             {"grpcCode": name}) from None

    def get(self, data_type, key):
        reply = self._call("Get", self.pb.KeyRequest(data_type=data_type, key=key))
        return json.loads(reply.record_json) if reply.record_json else None

    def put(self, data_type, record):
        reply = self._call("Put", self.pb.PutRequest(data_type=data_type,
                                                     record_json=json.dumps(record)))
        return json.loads(reply.record_json)

    def update(self, data_type, key, changes):
        reply = self._call("Update", self.pb.UpdateRequest(data_type=data_type, key=key,
                                                           changes_json=json.dumps(changes)))
        return json.loads(reply.record_json)

    def close(self):
        self.channel.close()


def current_score(record):
    """A stored record's score as of now: the store's decayedScore, else the stored one."""
    score = record.get("decayedScore")
    if not is_number(score):
        score = record.get("perceptionScore", 0.0)
    return float(score)


def view(record, name=None):
    """What the scripts report about one NPC (state patch entry, log fields)."""
    score = current_score(record)
    out = {"score": rounded(score), "storedScore": rounded(float(record["perceptionScore"])),
           "attitude": attitude(score), "modifier": dice_modifier(score),
           "lastInteraction": record.get("lastInteraction"),
           "recentEvents": list(record.get("eventHistory") or [])[-RECENT_EVENTS:]}
    if name:
        out["name"] = name
    return out


def who(npc, name=None):
    return "%s (%s)" % (name, npc) if name and name != npc else npc


# -- protocol ------------------------------------------------------------------------

def _dumps(value):
    return json.dumps(value, separators=(",", ":"))


def parse_request(raw_bytes):
    """Decode stdin into (request_id, input_dict). Empty stdin means {}."""
    try:
        decoded = raw_bytes.decode("utf-8")
        request = json.loads(decoded) if decoded.strip() else {}
    except UnicodeDecodeError as exc:
        raise SkillError("invalid_input", "stdin: not valid UTF-8 (%s)" % exc) from None
    except (ValueError, RecursionError) as exc:
        raise SkillError("invalid_input", "stdin: not valid JSON (%s)" % exc) from None
    if not isinstance(request, dict):
        raise SkillError("invalid_input", "stdin: expected a JSON object, got %s"
                         % describe(request))
    request_id = request.get("requestId")
    params = {} if request.get("input") is None else request["input"]
    if not isinstance(params, dict):
        raise SkillError("invalid_input", "input: expected an object, got %s" % describe(params),
                         {"field": "input"})
    return (request_id if isinstance(request_id, str) else None), params


def _failure(exc):
    error = {"type": "error", "errorCode": exc.code, "errorMessage": exc.message}
    if exc.details:
        error["details"] = exc.details
    return [error, {"type": "done", "ok": False, "summary": exc.message}]


def _write(events, request_id):
    echo = {} if request_id is None else {"requestId": request_id}
    lines = "".join(_dumps({"version": PROTOCOL_VERSION, **e, **echo}) + "\n" for e in events)
    sys.stdout.buffer.write(lines.encode("utf-8"))
    sys.stdout.buffer.flush()


def main(name, operation):
    """Run ``operation(params, config, warnings) -> (events, summary)`` under the protocol."""
    request_id = None
    try:
        warnings = []
        try:
            stdin = sys.stdin.buffer.read() if sys.stdin is not None else b""
            request_id, params = parse_request(stdin)
            events, summary = operation(params, load_config(warnings), warnings)
            events = [{"type": "log", "level": "warn", "message": w} for w in warnings] + events
            events.append({"type": "done", "ok": True, "summary": summary})
        except SkillError as exc:
            events = [{"type": "log", "level": "warn", "message": w} for w in warnings]
            events += _failure(exc)
        except Exception as exc:  # a bug: still report it in protocol, never a traceback
            message = "%s: unexpected %s: %s" % (name, type(exc).__name__, exc)
            events = _failure(SkillError("internal_error", message))
        _write(events, request_id)
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except Exception:
            pass
    return 0
