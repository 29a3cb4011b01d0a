"""Tool protocol v0: the NDJSON events a skill script writes on stdout.

Every line a script prints is one JSON object tagged by ``type``. This module
decodes and validates one line at a time (``ProtocolReader``) so the executor can
stream events while the process runs, and so the conformance checker can keep
going after a violation to report all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

import msgspec

PROTOCOL_VERSION = "0"
MAX_LINE_BYTES = 1024 * 1024
EVENT_TYPES = ("log", "state_patch", "asset", "ui_event", "error", "done")

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]

# RFC 6838 restricted-name characters for type and subtype, optional parameters.
_MIME = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
    r"(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=(\"[^\"]*\"|[A-Za-z0-9!#$&^_.+-]+))*$"
)


def is_mime_type(value: str) -> bool:
    return bool(_MIME.match(value))


class Event(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Envelope fields shared by every event; unknown fields are ignored."""

    version: Literal["0"]
    requestId: str | None = None
    timestamp: str | None = None


class LogEvent(Event, tag="log"):
    level: Literal["debug", "info", "warn", "error"]
    message: NonEmpty
    fields: dict[str, Any] | None = None


class StatePatchEvent(Event, tag="state_patch"):
    patch: dict[str, Any]


class AssetEvent(Event, tag="asset"):
    assetId: NonEmpty
    kind: NonEmpty
    mediaType: NonEmpty
    path: NonEmpty
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not is_mime_type(self.mediaType):
            raise ValueError(f"mediaType {self.mediaType!r} is not a valid MIME type")


class UiEvent(Event, tag="ui_event"):
    event: NonEmpty
    payload: dict[str, Any] | None = None


class ErrorEvent(Event, tag="error"):
    errorCode: NonEmpty
    errorMessage: NonEmpty
    details: dict[str, Any] | None = None


class DoneEvent(Event, tag="done"):
    ok: bool
    summary: str | None = None


AnyEvent = Union[LogEvent, StatePatchEvent, AssetEvent, UiEvent, ErrorEvent, DoneEvent]

_decoder = msgspec.json.Decoder(AnyEvent)
_encoder = msgspec.json.Encoder()


def encode_event(event: AnyEvent) -> bytes:
    return _encoder.encode(event)


def event_to_dict(event: AnyEvent) -> dict[str, Any]:
    return msgspec.to_builtins(event)


@dataclass(frozen=True)
class Violation:
    """One breach of the protocol, located by stdout line number (1-based)."""

    code: str
    message: str
    line: int
    fatal: bool = True

    @property
    def category(self) -> str:
        # Every malformed or undecodable line is reported under the executor's
        # `invalid_json` category; the code says what exactly was wrong.
        return "invalid_json"

    def __str__(self) -> str:
        return f"stdout line {self.line}: {self.message}"


class ProtocolViolation(Exception):
    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


def _decode_error(exc: msgspec.ValidationError, line_no: int) -> Violation:
    text = str(exc)
    if text.startswith("Invalid value") and text.endswith("at `$.type`"):
        return Violation("unknown_event_type", f"unknown event type: {text}", line_no)
    if "at `$.version`" in text:
        return Violation("bad_version", f"version must be \"0\": {text}", line_no)
    return Violation("invalid_event", text, line_no)


@dataclass
class ProtocolReader:
    """Validates a script's stdout line by line and tracks invocation-level rules.

    ``feed`` returns the decoded event, ``None`` for a line to skip, or raises
    ``ProtocolViolation``. Non-fatal findings (events after ``done``) are kept in
    ``warnings`` rather than raised, because the spec says they are ignored.
    """

    max_line_bytes: int = MAX_LINE_BYTES
    line_no: int = 0
    done: DoneEvent | None = None
    events_after_done: int = 0
    warnings: list[Violation] = field(default_factory=list)
    _asset_ids: set[str] = field(default_factory=set)

    def feed(self, raw: "bytes | OverlongLine") -> AnyEvent | None:
        self.line_no += 1
        size = raw.size if isinstance(raw, OverlongLine) else len(raw)
        if size > self.max_line_bytes:
            raise ProtocolViolation(
                Violation(
                    "line_too_long",
                    f"line of {size} bytes exceeds the {self.max_line_bytes}-byte limit",
                    self.line_no,
                )
            )
        if not raw.strip():
            return None
        if self.done is not None:
            self.events_after_done += 1
            self.warnings.append(
                Violation("event_after_done", "event after done ignored", self.line_no, fatal=False)
            )
            return None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolViolation(
                Violation("invalid_utf8", f"invalid UTF-8 at byte {exc.start}", self.line_no)
            ) from None
        try:
            event = _decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise ProtocolViolation(_decode_error(exc, self.line_no)) from None
        except msgspec.DecodeError as exc:
            raise ProtocolViolation(
                Violation("invalid_json", f"invalid JSON: {exc}", self.line_no)
            ) from None
        except RecursionError:
            # msgspec recurses per nesting level; a line of a few thousand brackets
            # would otherwise escape as a RecursionError instead of a violation.
            raise ProtocolViolation(
                Violation("invalid_json", "invalid JSON: nested too deeply", self.line_no)
            ) from None
        if isinstance(event, AssetEvent):
            if event.assetId in self._asset_ids:
                raise ProtocolViolation(
                    Violation(
                        "duplicate_asset_id",
                        f"assetId {event.assetId!r} already used in this invocation",
                        self.line_no,
                    )
                )
            self._asset_ids.add(event.assetId)
        elif isinstance(event, DoneEvent):
            self.done = event
        return event


@dataclass(frozen=True)
class OverlongLine:
    """Stands for a line that was discarded, unread, for exceeding the limit."""

    size: int


class LineSplitter:
    """Splits a byte stream into lines, never buffering more than the line limit.

    A line over the limit is dropped as it streams in and reported as an
    ``OverlongLine`` so a flood of bytes without a newline cannot exhaust memory.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_line_bytes
        self._dropped = 0

    def feed(self, chunk: bytes) -> list[bytes | OverlongLine]:
        lines: list[bytes | OverlongLine] = []
        self._buf += chunk
        start = 0
        while (nl := self._buf.find(b"\n", start)) >= 0:
            lines.append(self._line(self._buf[start:nl]))
            start = nl + 1
        del self._buf[:start]
        if len(self._buf) > self._max:
            self._dropped += len(self._buf)
            self._buf.clear()
        return lines

    def close(self) -> list[bytes | OverlongLine]:
        if not self._buf and not self._dropped:
            return []
        line = self._line(self._buf)
        self._buf.clear()
        return [line]

    def _line(self, data: bytearray) -> bytes | OverlongLine:
        size = self._dropped + len(data)
        self._dropped = 0
        if size > self._max:
            return OverlongLine(size)
        return bytes(data[:-1] if data.endswith(b"\r") else data)


def tool_input(request_id: str, tool: str, operation: str, payload: dict[str, Any],
               extra: dict[str, Any] | None = None) -> bytes:
    """The single JSON object written to a script's stdin (docs/protocol.md, "Input")."""
    doc: dict[str, Any] = {
        "requestId": request_id,
        "tool": tool,
        "operation": operation,
        "input": payload,
    }
    if extra:
        doc.update(extra)
    return _encoder.encode(doc) + b"\n"
