"""Fuzzing the NDJSON tool protocol (runtime/skillrun/protocol.py) and the plan decoder.

The contract under test: whatever bytes a skill writes to stdout, ``LineSplitter``
turns them into lines (or ``OverlongLine`` markers) and ``ProtocolReader.feed``
returns a valid event, ``None`` for a line to skip, or raises ``ProtocolViolation``
carrying a ``Violation`` with a code and the 1-based line number -- never another
exception and never a hang. How the bytes arrive (chunk boundaries) must not change
what is read. ``decode_plan`` returns a ``Plan`` or raises ``PlanError``.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from narratoria.runtime.skillrun.plan import Plan, PlanError, decode_plan
from narratoria.runtime.skillrun.protocol import (
    MAX_LINE_BYTES,
    AnyEvent,
    AssetEvent,
    DoneEvent,
    ErrorEvent,
    LineSplitter,
    LogEvent,
    OverlongLine,
    ProtocolReader,
    ProtocolViolation,
    StatePatchEvent,
    UiEvent,
    encode_event,
    event_to_dict,
    tool_input,
)

# The codes ProtocolReader documents by raising them; a new one must be added here.
CODES = {"line_too_long", "invalid_utf8", "unknown_event_type", "bad_version",
         "invalid_event", "invalid_json", "duplicate_asset_id"}
EVENT_CLASSES = (LogEvent, StatePatchEvent, AssetEvent, UiEvent, ErrorEvent, DoneEvent)
SMALL_LIMIT = 96  # a line limit small enough for hypothesis to cross it often

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

# -- strategies --------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                     allow_infinity=False) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(text, json_values, max_size=4)
non_empty = text.filter(bool)
mime = st.sampled_from(["image/png", "audio/ogg", "text/plain; charset=utf-8",
                        "application/vnd.narratoria+json"])
envelope = st.fixed_dictionaries({"version": st.just("0")}, optional={
    "requestId": text, "timestamp": text})


def _event(event_type: str, /, **fields: st.SearchStrategy) -> st.SearchStrategy:
    required = {k: v for k, v in fields.items() if not k.startswith("_")}
    optional = {k[1:]: v for k, v in fields.items() if k.startswith("_")}
    return st.builds(lambda env, body: {"type": event_type, **env, **body}, envelope,
                     st.fixed_dictionaries(required, optional=optional))


valid_events = st.one_of(
    _event("log", level=st.sampled_from(["debug", "info", "warn", "error"]), message=non_empty,
           _fields=json_objects),
    _event("state_patch", patch=json_objects),
    _event("asset", assetId=non_empty, kind=non_empty, mediaType=mime, path=non_empty,
           _metadata=json_objects),
    _event("ui_event", event=non_empty, _payload=json_objects),
    _event("error", errorCode=non_empty, errorMessage=non_empty, _details=json_objects),
    _event("done", ok=st.booleans(), _summary=text),
)


def deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + "1" + close * depth


@st.composite
def mutated_events(draw: st.DrawFn) -> bytes:
    """A valid event line with one or more random mutations applied."""
    doc = draw(valid_events)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["drop", "retype", "unknown", "huge", "nest", "version",
                                    "type"]))
        if how == "drop" and doc:
            doc.pop(draw(st.sampled_from(sorted(doc))))
        elif how == "retype" and doc:
            doc[draw(st.sampled_from(sorted(doc)))] = draw(json_values)
        elif how == "unknown":
            doc[draw(text)] = draw(json_values)
        elif how == "huge" and doc:
            doc[draw(st.sampled_from(sorted(doc)))] = "x" * draw(st.integers(1000, 200_000))
        elif how == "nest":
            key = draw(st.sampled_from(["patch", "fields", "payload", "metadata", "details", "x"]))
            doc[key] = "__DEEP__"
        elif how == "version":
            doc["version"] = draw(json_values)
        elif how == "type":
            doc["type"] = draw(json_values | st.sampled_from(["LOG", "Done", "", "done "]))
    line = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    if '"__DEEP__"' in line:  # built as text: json.dumps itself would recurse too deeply
        depth = draw(st.sampled_from([10, 200, 900, 2_000, 50_000]))
        brackets = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        line = line.replace('"__DEEP__"', deep(depth, *brackets), 1)
    raw = line.encode("utf-8", "surrogatepass")
    # Byte-level damage: truncation, inserted junk, NULs, invalid UTF-8, CR.
    for _ in range(draw(st.integers(0, 2))):
        damage = draw(st.sampled_from(["truncate", "insert", "nul", "badutf8", "crlf", "bom"]))
        at = draw(st.integers(0, len(raw)))
        if damage == "truncate":
            raw = raw[:at]
        elif damage == "insert":
            raw = raw[:at] + draw(st.binary(min_size=1, max_size=8)).replace(b"\n", b" ") + raw[at:]
        elif damage == "nul":
            raw = raw[:at] + b"\x00" + raw[at:]
        elif damage == "badutf8":
            raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88"])) + raw[at:]
        elif damage == "crlf":
            raw += b"\r"
        elif damage == "bom":
            raw = b"\xef\xbb\xbf" + raw
    return raw


lines = st.one_of(
    valid_events.map(lambda d: json.dumps(d).encode()),
    mutated_events(),
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b"\t\r", b"{}", b"[]", b"null", b"0", b'"done"', b"{", b"}",
                     b'{"type":"done"}', b'{"type":"done","version":0,"ok":true}',
                     b'{"type":"done","version":"0","ok":"yes"}', b"\x00" * 10,
                     b'{"type":"done","version":"0","ok":true}' * 2]),
)


# -- the contract ------------------------------------------------------------------

def check_event(event: AnyEvent) -> None:
    assert isinstance(event, EVENT_CLASSES)
    assert event.version == "0"
    # A decoded event is a valid one: it re-encodes and decodes to itself.
    assert ProtocolReader().feed(encode_event(event)) == event
    event_to_dict(event)


def read_line(reader: ProtocolReader, raw: "bytes | OverlongLine") -> tuple:
    before = reader.line_no
    try:
        event = reader.feed(raw)
    except ProtocolViolation as exc:
        v = exc.violation
        assert v.code in CODES, v
        assert v.message and v.line == before + 1 == reader.line_no and v.fatal
        assert str(exc).startswith(f"stdout line {v.line}: ")
        assert v.category == "invalid_json"
        return ("violation", v.code, v.line)
    assert reader.line_no == before + 1
    if event is None:
        return ("skip", reader.line_no)
    check_event(event)
    return ("event", type(event).__name__, msgspec.json.encode(event))


def read_stream(chunks: list[bytes], limit: int = SMALL_LIMIT) -> list[tuple]:
    splitter, reader = LineSplitter(limit), ProtocolReader(max_line_bytes=limit)
    out = []
    for chunk in chunks:
        pieces = splitter.feed(chunk)
        # Memory stays bounded: never more than a line limit held between chunks.
        assert len(splitter._buf) <= limit
        out += [read_line(reader, line) for line in pieces]
    out += [read_line(reader, line) for line in splitter.close()]
    assert splitter.close() == []  # closing twice yields nothing more
    return out


def reference_lines(data: bytes, limit: int) -> list[bytes | OverlongLine]:
    """What the splitter must produce, computed the obvious way on the whole input."""
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [OverlongLine(len(p)) if len(p) > limit else (p[:-1] if p.endswith(b"\r") else p)
            for p in parts]


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])] or [b""]


# -- ProtocolReader alone ----------------------------------------------------------

@FUZZ
@given(lines)
@example(b'{"type":"state_patch","version":"0","patch":{"a":' + b"[" * 5000 + b"]" * 5000 + b"}}")
@example(b'{"type":"log","version":"0","level":"info","message":"x","fields":'
         + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}")
@example(b'{"type":"state_patch","version":"0","patch":{"a":"\\ud800"}}')
@example(b'{"type":"state_patch","version":"0","patch":{"a":' + b"9" * 5000 + b"}}")
@example(b'{"type":"state_patch","version":"0","patch":{"a":1e999}}')
@example(b'{"type":"asset","version":"0","assetId":"a","kind":"k","path":"p","mediaType":"'
         + b"a/b;" * 20000 + b'"}')
def test_any_line_is_an_event_a_skip_or_a_violation(raw: bytes) -> None:
    read_line(ProtocolReader(), raw)


@FUZZ
@given(valid_events)
def test_valid_events_always_decode_to_their_type(doc: dict) -> None:
    result = read_line(ProtocolReader(), json.dumps(doc).encode())
    assert result[0] == "event", (result, doc)
    assert ProtocolReader().feed(json.dumps(doc).encode()).__struct_config__.tag == doc["type"]


@FUZZ
@given(st.lists(lines, max_size=12))
def test_a_stream_of_lines_reports_each_violation_at_its_line(batch: list[bytes]) -> None:
    reader = ProtocolReader()
    results = [read_line(reader, raw) for raw in batch]
    assert reader.line_no == len(batch)
    done_at = next((i for i, r in enumerate(results) if r[:2] == ("event", "DoneEvent")), None)
    if done_at is not None:  # everything after done is ignored, with a warning
        assert all(r[0] == "skip" for r in results[done_at + 1:])
        assert reader.events_after_done == len(reader.warnings)
        assert all(not w.fatal and w.code == "event_after_done" for w in reader.warnings)


def test_oversized_lines_are_violations_whatever_their_content() -> None:
    reader = ProtocolReader()
    with pytest.raises(ProtocolViolation) as err:
        reader.feed(b"x" * (MAX_LINE_BYTES + 1))
    assert err.value.violation.code == "line_too_long" and err.value.violation.line == 1
    with pytest.raises(ProtocolViolation) as err:
        reader.feed(OverlongLine(10 * MAX_LINE_BYTES))
    assert err.value.violation.code == "line_too_long" and err.value.violation.line == 2
    big = json.dumps({"type": "log", "version": "0", "level": "info",
                      "message": "m" * (MAX_LINE_BYTES - 100)}).encode()
    assert isinstance(reader.feed(big), LogEvent)  # just under the limit is fine


# -- LineSplitter + ProtocolReader: chunking invariance ----------------------------

streams = st.lists(lines, max_size=8).flatmap(lambda ls: st.tuples(
    st.just(ls), st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(ls), max_size=len(ls)),
    st.booleans()))


def join(ls: list[bytes], seps: list[bytes], trailing: bool) -> bytes:
    data = b"".join(line + sep for line, sep in zip(ls, seps))
    if ls and not trailing:
        data = data[: -len(seps[-1])]
    return data


@FUZZ
@given(streams, st.lists(st.integers(0, 10_000), max_size=20))
def test_chunking_never_changes_what_is_read(stream, cuts: list[int]) -> None:
    data = join(*stream)
    whole = read_stream([data])
    assert read_stream(chunked(data, cuts)) == whole
    # The splitter's lines are those of a plain split of the whole input.
    splitter = LineSplitter(SMALL_LIMIT)
    got = splitter.feed(data) + splitter.close()
    assert got == reference_lines(data, SMALL_LIMIT)


@settings(max_examples=40, deadline=None)
@given(streams)
def test_splitting_at_every_byte_boundary_reads_the_same(stream) -> None:
    data = join(*stream)[:600]
    whole = read_stream([data])
    assert read_stream([data[i:i + 1] for i in range(len(data))]) == whole
    for i in range(len(data) + 1):
        assert read_stream([data[:i], data[i:]]) == whole


@pytest.mark.parametrize("chunk", [1, 7, 4096, 65536, MAX_LINE_BYTES + 3])
def test_a_flood_without_newlines_is_one_overlong_line_held_in_bounded_memory(chunk: int) -> None:
    size = MAX_LINE_BYTES * 2 + 5 if chunk > 7 else MAX_LINE_BYTES + 5
    good = b'{"type":"done","version":"0","ok":true}\r\n'
    data = b"x" * size + b"\n" + good
    splitter, seen = LineSplitter(), []
    for start in range(0, len(data), chunk):
        seen += splitter.feed(data[start:start + chunk])
        assert len(splitter._buf) <= MAX_LINE_BYTES
    seen += splitter.close()
    assert seen == [OverlongLine(size), good[:-2]]
    reader = ProtocolReader()
    with pytest.raises(ProtocolViolation) as err:
        reader.feed(seen[0])
    assert err.value.violation.code == "line_too_long" and f"{size} bytes" in str(err.value)
    assert isinstance(reader.feed(seen[1]), DoneEvent)  # the stream reads on after it


def test_an_overlong_line_without_a_final_newline_is_reported_at_close() -> None:
    splitter = LineSplitter(10)
    assert splitter.feed(b"a" * 25) == []
    assert splitter.close() == [OverlongLine(25)]
    assert splitter.close() == []


# -- tool input (stdin) ------------------------------------------------------------

@FUZZ
@given(text, text, text, json_objects, st.none() | json_objects)
def test_tool_input_is_always_one_json_line(request_id, tool, operation, payload, extra) -> None:
    data = tool_input(request_id, tool, operation, payload, extra)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    doc = json.loads(data)
    assert doc["input"] == payload or "input" in (extra or {})


# -- decode_plan -------------------------------------------------------------------

valid_tools = st.lists(st.fixed_dictionaries(
    {"toolId": non_empty, "toolPath": non_empty},
    optional={"input": json_objects, "required": st.booleans(), "async": st.booleans(),
              "timeoutMs": st.integers(1, 10**6),
              "retryPolicy": st.fixed_dictionaries({}, optional={
                  "maxRetries": st.integers(0, 5), "backoffMs": st.integers(0, 1000)})}),
    max_size=4, unique_by=lambda t: t["toolId"])
valid_plans = st.fixed_dictionaries(
    {"requestId": non_empty, "tools": valid_tools},
    optional={"narrative": text, "parallel": st.booleans(), "disabledSkills": st.lists(text),
              "timeoutMs": st.integers(1, 10**7)})


@st.composite
def plan_inputs(draw: st.DrawFn) -> bytes | str:
    doc = draw(valid_plans)
    how = draw(st.sampled_from(["valid", "retype", "unknown", "tool", "deep", "bytes",
                                "truncate", "text", "surrogate"]))
    if how == "retype":
        doc[draw(st.sampled_from(sorted(doc) + ["metadata"]))] = draw(json_values)
    elif how == "unknown":
        doc[draw(text)] = draw(json_values)
    elif how == "tool" and doc["tools"]:
        tool = doc["tools"][0]
        tool[draw(st.sampled_from(["toolId", "toolPath", "input", "dependencies", "timeoutMs",
                                   "retryPolicy", "async"]))] = draw(json_values)
    elif how == "deep":
        depth = draw(st.sampled_from([50, 900, 3000, 100_000]))
        return ('{"requestId":"r","tools":[{"toolId":"a","toolPath":"p","input":{"x":'
                + deep(depth) + "}}]}")
    elif how == "bytes":
        return draw(st.binary(max_size=300))
    elif how == "text":
        return draw(st.text(max_size=100))
    elif how == "surrogate":
        return json.dumps(doc)[:-1] + ', "x": "\ud800"}'
    raw = json.dumps(doc)
    if how == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw if draw(st.booleans()) else raw.encode()


@FUZZ
@given(plan_inputs())
@example("\ud800")
@example('{"requestId":"r","tools":[],"narrative":"n","metadata":' + deep(5000, '{"a":', "}") + "}")
@example(b"\xff\xfe")
@example('{"requestId":"r","tools":[{"toolId":"a","toolPath":"p","dependencies":["a"]}]}')
def test_decode_plan_returns_a_plan_or_a_plan_error(data: bytes | str) -> None:
    try:
        plan = decode_plan(data, "fuzz.json")
    except PlanError as exc:
        assert str(exc).startswith("fuzz.json: ") or exc.code != "invalid_plan", str(exc)
        assert exc.category in ("invalid_json", "circular_dependency") and exc.code
        return
    assert isinstance(plan, Plan)
    assert plan.tools or (plan.narrative and plan.narrative.strip())
    assert len({t.toolId for t in plan.tools}) == len(plan.tools)


@FUZZ
@given(valid_plans)
def test_valid_plans_decode(doc: dict) -> None:
    assume(doc["tools"] or doc.get("narrative", "").strip())
    plan = decode_plan(json.dumps(doc))
    assert [t.toolId for t in plan.tools] == [t["toolId"] for t in doc["tools"]]
