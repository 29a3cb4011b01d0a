"""Tool protocol v0: event validation and the line reader."""

from __future__ import annotations

import json

import pytest

from narratoria.runtime.skillrun.protocol import (
    MAX_LINE_BYTES,
    AssetEvent,
    DoneEvent,
    LineSplitter,
    LogEvent,
    OverlongLine,
    ProtocolReader,
    ProtocolViolation,
    StatePatchEvent,
    UiEvent,
    ErrorEvent,
    is_mime_type,
    tool_input,
)


def line(**doc) -> bytes:
    return json.dumps({"version": "0", **doc}).encode()


def feed(raw: bytes):
    return ProtocolReader().feed(raw)


def violation(raw: bytes) -> str:
    with pytest.raises(ProtocolViolation) as info:
        feed(raw)
    return info.value.violation.code


def test_each_event_type_decodes_to_its_struct():
    assert isinstance(feed(line(type="log", level="info", message="hi")), LogEvent)
    assert isinstance(feed(line(type="state_patch", patch={"a": 1})), StatePatchEvent)
    asset = feed(line(type="asset", assetId="a1", kind="image", mediaType="image/png", path="/x"))
    assert isinstance(asset, AssetEvent)
    assert isinstance(feed(line(type="ui_event", event="narrative_choice",
                                payload={"choices": ["a", "b"]})), UiEvent)
    assert isinstance(feed(line(type="error", errorCode="E", errorMessage="bad")), ErrorEvent)
    done = feed(line(type="done", ok=True, summary="fine"))
    assert isinstance(done, DoneEvent) and done.ok and done.summary == "fine"


def test_unknown_fields_are_ignored_and_envelope_fields_kept():
    ev = feed(line(type="done", ok=False, requestId="r1", timestamp="2026-01-01T00:00:00Z",
                   futureField={"x": 1}))
    assert ev.requestId == "r1" and ev.ok is False


@pytest.mark.parametrize("raw,code", [
    (line(type="teleport"), "unknown_event_type"),
    (json.dumps({"version": "1", "type": "done", "ok": True}).encode(), "bad_version"),
    (json.dumps({"version": 0, "type": "done", "ok": True}).encode(), "bad_version"),
    (json.dumps({"type": "done", "ok": True}).encode(), "invalid_event"),
    (line(type="log", level="loud", message="x"), "invalid_event"),
    (line(type="log", level="info", message=""), "invalid_event"),
    (line(type="log", level="info"), "invalid_event"),
    (line(type="state_patch", patch=None), "invalid_event"),
    (line(type="state_patch", patch=[1, 2]), "invalid_event"),
    (line(type="state_patch", patch="x"), "invalid_event"),
    (line(type="asset", assetId="", kind="image", mediaType="image/png", path="/x"), "invalid_event"),
    (line(type="asset", assetId="a", kind="image", mediaType="png", path="/x"), "invalid_event"),
    (line(type="asset", assetId="a", kind="image", mediaType="image/png", path=""), "invalid_event"),
    (line(type="ui_event", event=""), "invalid_event"),
    (line(type="error", errorCode="", errorMessage="m"), "invalid_event"),
    (line(type="error", errorCode="c", errorMessage=""), "invalid_event"),
    (line(type="done", ok="yes"), "invalid_event"),
    (line(type="done", ok=1), "invalid_event"),
    (line(type="done"), "invalid_event"),
    (b"not json", "invalid_json"),
    (b'{"version":"0","type":"done","ok":tru', "invalid_json"),
    (b"[1,2,3]", "invalid_event"),
    (b'{"version":"0","type":"log","level":"info","message":"\xff"}', "invalid_utf8"),
])
def test_validation_rules(raw: bytes, code: str):
    assert violation(raw) == code


def test_violations_name_the_line_number_and_category():
    reader = ProtocolReader()
    reader.feed(line(type="log", level="info", message="one"))
    reader.feed(b"")
    with pytest.raises(ProtocolViolation) as info:
        reader.feed(b"garbage")
    v = info.value.violation
    assert v.line == 3 and v.category == "invalid_json" and "line 3" in str(v)


def test_mime_types():
    for ok in ("image/png", "audio/ogg", "application/vnd.narratoria+json",
               "text/plain; charset=utf-8"):
        assert is_mime_type(ok), ok
    for bad in ("png", "image/", "/png", "image png", "", "image/png/x"):
        assert not is_mime_type(bad), bad


def test_duplicate_asset_id_in_one_invocation_is_a_violation():
    reader = ProtocolReader()
    asset = line(type="asset", assetId="a", kind="image", mediaType="image/png", path="/x")
    reader.feed(asset)
    with pytest.raises(ProtocolViolation) as info:
        reader.feed(asset)
    assert info.value.violation.code == "duplicate_asset_id"


def test_events_after_done_are_ignored_and_reported():
    reader = ProtocolReader()
    reader.feed(line(type="done", ok=True))
    assert reader.feed(line(type="done", ok=False)) is None
    assert reader.feed(b"not even json") is None
    assert reader.done.ok is True
    assert reader.events_after_done == 2
    assert [w.code for w in reader.warnings] == ["event_after_done"] * 2


def test_splitter_reassembles_lines_across_chunks_and_strips_cr():
    s = LineSplitter()
    assert s.feed(b'{"a":') == []
    assert s.feed(b'1}\r\n{"b"') == [b'{"a":1}']
    assert s.feed(b":2}\n") == [b'{"b":2}']
    assert s.close() == []
    s.feed(b"tail without newline")
    assert s.close() == [b"tail without newline"]


def test_splitter_drops_an_overlong_line_without_buffering_it():
    s = LineSplitter(max_line_bytes=100)
    out = []
    for _ in range(50):
        out += s.feed(b"x" * 64)
    assert out == []
    assert len(s._buf) <= 100 + 64
    out = s.feed(b"xx\nnext\n")
    assert isinstance(out[0], OverlongLine) and out[0].size == 50 * 64 + 2
    assert out[1] == b"next"


def test_reader_reports_an_overlong_line_with_its_line_number():
    reader = ProtocolReader()
    reader.feed(line(type="log", level="info", message="x"))
    with pytest.raises(ProtocolViolation) as info:
        reader.feed(OverlongLine(MAX_LINE_BYTES + 1))
    assert info.value.violation.code == "line_too_long" and info.value.violation.line == 2


def test_tool_input_document():
    doc = json.loads(tool_input("r1", "dice-roller", "roll-dice", {"formula": "1d6"},
                                {"dependencyResults": {}}))
    assert doc == {"requestId": "r1", "tool": "dice-roller", "operation": "roll-dice",
                   "input": {"formula": "1d6"}, "dependencyResults": {}}
