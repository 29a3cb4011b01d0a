"""Fuzzing the daemon's gRPC handlers: malformed, oversized and truncated requests.

Against a real daemon (the pattern planner), every request -- random or oversized
strings in every field, plan JSON that is random JSON or no JSON at all, campaign
paths that do not exist or are no campaigns, Store calls without, with a forged and
with a real skill token, and bytes that are not protobuf at all -- must either
succeed or end with a status code other than UNKNOWN/INTERNAL and a message that
says what was wrong; no call may hang. Afterwards the daemon still answers Status
and plays a normal turn.

A real skill token comes from a tiny script run by a fixed plan (a bare script path,
so no skill scope) that writes its token to a file and waits until released.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
from conftest import HELD

SKILL_TOKEN = "x-narratoria-skill-token"
BAD_CODES = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
CALL_TIMEOUT_S = 60  # a call still running after this counts as a hang
TURN_TIMEOUT_S = 120  # a whole turn, on a shared and busy test machine
MIB = 1 << 20

# No shrinking: each example costs a round trip through the daemon, and a failure's
# example is printed as generated. No example database: runs do not replay each other.
FUZZ = settings(max_examples=40, deadline=None, database=None,
                phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
FEW = settings(FUZZ, max_examples=15)

# -- strategies --------------------------------------------------------------------

valid_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
oversized = st.sampled_from([201, 4097, 70_000, MIB + 1, 3 * MIB]).flatmap(
    lambda n: st.sampled_from(["x" * n, "é" * (n // 2 + 1), "\x00" * n, "../" * (n // 3 + 1)]))
odd = st.sampled_from(["", " ", "\x00", "\n", "\t\r\n", "..", "../", "../../../../etc/passwd",
                       "/", "~", "~root", "\u202e", "nul\x00byte", "%s%n", "' OR 1=1 --",
                       "a" * 256, "é" * 300, "/" + "a" * 300 + "/b", "\ufeff", "😀" * 50])
strings = st.one_of(valid_text, odd, oversized)
short_strings = st.one_of(valid_text, odd)


def _outside_existing_folder(ref: str) -> bool:
    """False for a ref naming an existing file or folder (\"/\", \"~\", \"..\"): the daemon
    would validate and ingest it as a campaign, walking and reading the whole tree (see
    the report: a folder without a manifest is read in full before it is refused)."""
    try:
        return not Path(ref.strip()).expanduser().exists() and ref.strip() not in ("~", "~root")
    except (OSError, ValueError, RuntimeError):  # RuntimeError: "~nobody-here" has no home
        return True


campaign_refs = st.one_of(valid_text, odd, oversized).filter(_outside_existing_folder)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | valid_text
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(valid_text, inner, max_size=4), max_leaves=10)


def deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


json_texts = st.one_of(
    json_values.map(json.dumps),
    st.dictionaries(valid_text, json_values, max_size=5).map(json.dumps),
    st.sampled_from(["{", "}", "[", "null", "nan", "NaN", "Infinity", "1e999", "9" * 5000,
                     '{"a":', '{"a":1,}', "{'a': 1}", '"\\ud800"', deep(50), deep(3000),
                     "[" * 100_000, "\x00", "{}" * 3]),
    strings,
)

DATA_TYPES = ["memory_event", "lore_chunk", "faction_reputation", "npc_perception",
              "character_portrait", "player_choice"]
data_types = st.sampled_from(DATA_TYPES) | short_strings | oversized


@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    """Plan JSON that is almost valid, plausibly valid, or no JSON at all; tools only
    ever name paths that do not exist (a fuzz run must not execute real programs)."""
    kind = draw(st.sampled_from(["random", "plan", "plan", "truncated"]))
    if kind == "random":
        return draw(json_texts)
    tool = draw(st.fixed_dictionaries(
        {"toolId": st.sampled_from(["a", "b", ""]) | short_strings,
         "toolPath": st.sampled_from(["/nonexistent/fuzz-tool", "../../nonexistent",
                                      "nope/nothing", "", "."]) | short_strings},
        optional={"input": json_values, "dependencies": st.lists(st.sampled_from(["a", "b", "x"])),
                  "required": json_values | st.booleans(), "async": st.booleans(),
                  "timeoutMs": st.sampled_from([0, -1, 1, 500, 10**30, 10**400, 1.5, "5"]),
                  "retryPolicy": st.fixed_dictionaries({}, optional={
                      "maxRetries": st.sampled_from([0, 1, -1, 10**30, "3"]),
                      "backoffMs": st.sampled_from([0, 1, -1, 10**30, 10**400])})}))
    doc = draw(st.fixed_dictionaries(
        {"requestId": st.sampled_from(["fuzz", ""]) | short_strings,
         "tools": st.lists(st.just(tool), max_size=2) | json_values},
        optional={"narrative": short_strings | json_values, "parallel": json_values,
                  "timeoutMs": st.sampled_from([0, 1, 2000, 10**30, 10**400, -5]),
                  "metadata": json_values, draw(valid_text): json_values}))
    text = json.dumps(doc)
    return text[: draw(st.integers(0, len(text)))] if kind == "truncated" else text


# -- checking calls ----------------------------------------------------------------

SEEN: Counter[str] = Counter()  # status codes met, printed at the end (pytest -s)


def outcome(call: Callable[[], object]) -> grpc.StatusCode:
    code = _outcome(call)
    SEEN[code.name] += 1
    return code


def _outcome(call: Callable[[], object]) -> grpc.StatusCode:
    """Run one call (a unary call, or a stream drained to its end) and check how it
    ended: OK, or a status that is not UNKNOWN/INTERNAL with a non-empty message."""
    started = time.monotonic()
    try:
        result = call()
        if isinstance(result, Iterator) or hasattr(result, "__next__"):
            for _ in result:
                pass
    except grpc.RpcError as err:
        code, details = err.code(), err.details() or ""
        assert code not in BAD_CODES, f"{code.name}: {details}"
        assert code != grpc.StatusCode.DEADLINE_EXCEEDED, \
            f"no answer in {time.monotonic() - started:.0f}s: {details}"
        assert details.strip(), f"{code.name} without a message"
        return code
    return grpc.StatusCode.OK


# -- fixtures ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def channel(pattern_daemon):
    with grpc.insecure_channel(f"unix://{pattern_daemon.socket}", options=[
            ("grpc.max_send_message_length", 64 * MIB),
            ("grpc.max_receive_message_length", 64 * MIB)]) as ch:
        yield ch


class _WithToken:
    """A Narratoria stub whose every call carries the daemon token: the daemon refuses
    front-end calls without an identity (tests/security/test_identities.py)."""

    def __init__(self, stub: rpc.NarratoriaStub, token: str | None) -> None:
        self.stub, self.metadata = stub, [("x-narratoria-token", token or "")]

    def __getattr__(self, name: str) -> Callable[..., object]:
        method = getattr(self.stub, name)
        return lambda request, **kw: method(request, metadata=self.metadata, **kw)


@pytest.fixture(scope="module")
def narratoria(channel, pattern_daemon):
    from narratoria.runtime.host.endpoint import client_token, unix_endpoint

    return _WithToken(rpc.NarratoriaStub(channel), client_token(unix_endpoint(pattern_daemon.socket)))


@pytest.fixture(scope="module")
def session_id(narratoria) -> str:
    sid = narratoria.CreateSession(pb.CreateSessionRequest(title="fuzz"), timeout=CALL_TIMEOUT_S).id
    # One normal turn first: the daemon's first turn warms what later ones reuse.
    events = list(narratoria.Turn(pb.TurnRequest(session_id=sid, text="I look around"), timeout=300))
    assert events[-1].WhichOneof("event") == "done", events
    return sid


def plan(timeout_ms=None, **tool) -> str:
    doc = {"requestId": "fuzz-plan", "narrative": "So be it.",
           "tools": [{"toolId": "a", "toolPath": "/nonexistent/fuzz-tool", **tool}]}
    return json.dumps(doc | ({"timeoutMs": timeout_ms} if timeout_ms is not None else {}))


@pytest.fixture(scope="module")
def skill_token(pattern_daemon, narratoria):
    """A live skill token: a skill's script run by a fixed plan holds its invocation open
    (within the daemon's default cap on a tool's timeout, 300 s)."""
    from skill_plans import install_skill

    ref = install_skill(pattern_daemon.skills_root, "token-holder", "hold", f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
here = Path.cwd()  # the skill's data folder: the one place besides TMPDIR it may write
sys.stdin.read()
(here / "pids").write_text(f"{{os.getpid()}} {{os.getppid()}}")  # itself and its shim
(here / "token.tmp").write_text(os.environ.get("NARRATORIA_SKILL_TOKEN", ""))
os.replace(here / "token.tmp", here / "token")
deadline = time.monotonic() + 280
while not (here / "release").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({{"version": "0", "type": "done", "ok": True}}), flush=True)
""")
    folder = pattern_daemon.skills_root / "token-holder" / "data"
    sid = narratoria.CreateSession(pb.CreateSessionRequest(title="token holder"),
                                   timeout=CALL_TIMEOUT_S).id
    plan = {"requestId": "fuzz-token-holder", "narrative": "Held.", "timeoutMs": 400_000,
            "tools": [{"toolId": "hold", "toolPath": ref, "timeoutMs": 300_000,
                       "retryPolicy": {"maxRetries": 0}}]}
    events: list = []
    turn = threading.Thread(target=lambda: events.extend(narratoria.Turn(pb.TurnRequest(
        session_id=sid, plan_json=json.dumps(plan), execute_only=True), timeout=420)), daemon=True)
    turn.start()
    deadline = time.monotonic() + 60
    while not (folder / "token").exists():
        assert time.monotonic() < deadline and turn.is_alive(), events
        time.sleep(0.05)
    token = (folder / "token").read_text()
    assert token
    held = {int(pid) for pid in (folder / "pids").read_text().split()}
    HELD.update(held)  # alive across this module's tests on purpose: no leak
    yield token
    (folder / "release").write_text("")
    turn.join(60)
    HELD.difference_update(held)
    assert not turn.is_alive()
    finished = [e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished"]
    assert finished and finished[0].ok, events


# -- the Narratoria service --------------------------------------------------------

@FUZZ
@given(campaign=campaign_refs, title=strings, state_json=json_texts,
       character_id=short_strings)
def test_create_session(narratoria, campaign, title, state_json, character_id):
    request = pb.CreateSessionRequest(campaign=campaign, title=title, state_json=state_json,
                                      character_id=character_id)
    outcome(lambda: narratoria.CreateSession(request, timeout=CALL_TIMEOUT_S))


@FUZZ
@given(title=short_strings, state_json=json_texts)
@example(title="deep", state_json=deep(3000))
@example(title="deep", state_json="[" * 100_000)
@example(title="nan", state_json='{"a": NaN}')
def test_create_session_without_a_campaign_checks_its_state(narratoria, title, state_json):
    request = pb.CreateSessionRequest(title=title, state_json=state_json)
    outcome(lambda: narratoria.CreateSession(request, timeout=CALL_TIMEOUT_S))


@FUZZ
@given(session=st.tuples(st.booleans(), strings).map(lambda t: "REAL" if t[0] else t[1]),
       text=strings, plan_json=plan_texts(),
       execute_only=st.booleans(), mode=st.sampled_from(["text", "choice", "plan", "none"]),
       choice=st.integers(-2**31, 2**31 - 1))
@example(session="REAL", text="", plan_json=plan(10**400), execute_only=True, mode="plan", choice=0)
@example(session="REAL", text="", plan_json=plan(10**30), execute_only=True, mode="plan", choice=0)
@example(session="REAL", text="", plan_json=plan(timeoutMs=10**400), execute_only=True,
         mode="plan", choice=0)
@example(session="REAL", text="", plan_json=plan(retryPolicy={"maxRetries": 1, "backoffMs": 10**400}),
         execute_only=True, mode="plan", choice=0)
@example(session="REAL", text="", plan_json=plan(2000, retryPolicy={"maxRetries": 10**30,
                                                                    "backoffMs": 0}),
         execute_only=True, mode="plan", choice=0)
@example(session="REAL", text="", plan_json=plan(input={"x": json.loads("[" * 500 + "]" * 500)}),
         execute_only=True, mode="plan", choice=0)
@example(session="REAL", text="", plan_json='{"requestId":"r","narrative":"n","tools":[{"toolId":'
         '"a","toolPath":"p","input":{"x":' + "[" * 5000 + "]" * 5000 + "}}]}",
         execute_only=False, mode="plan", choice=0)
def test_turn(narratoria, session_id, session, text, plan_json, execute_only, mode, choice):
    # A text turn the daemon accepts is narrated by the model (seconds each on 2 cores);
    # what is fuzzed here is the request handling, so accepted text turns skip narration
    # (model-narrated turns are test_daemon's).
    if session == "REAL" and mode == "text":
        execute_only = True
    request = pb.TurnRequest(session_id=session_id if session == "REAL" else session,
                             execute_only=execute_only)
    if mode == "text":
        request.text = text
    elif mode == "choice":
        request.choice = choice
    elif mode == "plan":
        request.plan_json = plan_json
    outcome(lambda: narratoria.Turn(request, timeout=TURN_TIMEOUT_S))


@FUZZ
@given(session=strings, at_scene=st.integers(-2**31, 2**31 - 1), real=st.booleans())
def test_session_calls(narratoria, session_id, session, at_scene, real):
    sid = session_id if real else session
    outcome(lambda: narratoria.GetState(pb.SessionRef(session_id=sid), timeout=CALL_TIMEOUT_S))
    outcome(lambda: narratoria.ResumeSession(pb.SessionRef(session_id=sid), timeout=CALL_TIMEOUT_S))
    outcome(lambda: narratoria.Branch(pb.BranchRequest(session_id=sid, at_scene=at_scene),
                                      timeout=CALL_TIMEOUT_S))
    outcome(lambda: narratoria.ListSkills(pb.ListSkillsRequest(session_id=session),
                                          timeout=CALL_TIMEOUT_S))
    if not real:
        outcome(lambda: narratoria.EndSession(pb.SessionRef(session_id=sid), timeout=CALL_TIMEOUT_S))


@pytest.fixture(scope="module")
def not_campaigns(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("not-campaigns")
    (root / "empty").mkdir()
    (root / "junk").mkdir()
    (root / "junk" / "notes.txt").write_text("not a campaign")
    (root / "junk" / "manifest.json").write_text("{ not json")
    (root / "fake.narratoria").write_bytes(b"PK\x03\x04 not really a zip")
    (root / "fake.zip").write_bytes(b"")
    (root / "file.txt").write_text("a file")
    return [str(root / "empty"), str(root / "junk"), str(root / "fake.narratoria"),
            str(root / "fake.zip"), str(root / "file.txt"), str(root / "missing"),
            str(root / "empty" / ".." / "missing"), str(root / "junk" / "notes.txt" / "x"),
            str(root / "empty") + "/../../../nonexistent-" + "z" * 8]


@FUZZ
@given(data=st.data())
def test_ingest_campaign(narratoria, not_campaigns, data):
    campaign = data.draw(st.sampled_from(not_campaigns) | campaign_refs)
    outcome(lambda: narratoria.IngestCampaign(pb.IngestCampaignRequest(campaign=campaign),
                                              timeout=CALL_TIMEOUT_S))
    # The same refs as a session's campaign (at most 200 characters there).
    if _outside_existing_folder(campaign[:200]):
        outcome(lambda: narratoria.CreateSession(pb.CreateSessionRequest(campaign=campaign[:200]),
                                                 timeout=CALL_TIMEOUT_S))


# -- the Store and Model services --------------------------------------------------

def refusals(request: object) -> tuple[grpc.StatusCode, ...]:
    """How a call without a valid skill token may end: refused for the token, too large
    for gRPC, or (a field over its cap, runtime/host/field_caps.py) refused before the token
    is looked at."""
    from narratoria.runtime.host.field_caps import oversized

    too_big = (grpc.StatusCode.INVALID_ARGUMENT,) if oversized(request) else ()
    return (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.RESOURCE_EXHAUSTED, *too_big)


store_calls = st.sampled_from(["Put", "Update", "AdjustScore", "AdjustScores", "Delete", "Get",
                               "SemanticSearch", "ExactMatch"])
floats = st.floats() | st.sampled_from([0.0, 1e308, -1e308])
limits = st.integers(-2**31, 2**31 - 1)


@st.composite
def store_requests(draw: st.DrawFn) -> tuple[str, object]:
    name = draw(store_calls)
    dt, key, scope = draw(data_types), draw(strings), draw(st.booleans())
    if name == "Put":
        return name, pb.PutRequest(data_type=dt, record_json=draw(json_texts), skill_scope=scope)
    if name == "Update":
        return name, pb.UpdateRequest(data_type=dt, key=key, changes_json=draw(json_texts),
                                      skill_scope=scope)
    if name == "AdjustScore":
        return name, pb.AdjustScoreRequest(data_type=dt, key=key, delta=draw(floats),
                                           event=draw(strings), skill_scope=scope)
    if name == "AdjustScores":
        changes = [pb.ScoreDelta(key=draw(short_strings), delta=draw(floats),
                                 **draw(st.fixed_dictionaries({}, optional={
                                     "minimum": floats, "maximum": floats, "decay_rate": floats})))
                   for _ in range(draw(st.integers(0, 3)))]
        return name, pb.AdjustScoresRequest(data_type=dt, changes=changes, event=draw(strings),
                                            skill_scope=scope)
    if name in ("Delete", "Get"):
        return name, pb.KeyRequest(data_type=dt, key=key, skill_scope=scope)
    if name == "SemanticSearch":
        return name, pb.SemanticSearchRequest(data_type=dt, query=draw(strings), limit=draw(limits),
                                              filters_json=draw(json_texts),
                                              min_score=draw(floats), skill_scope=scope)
    return name, pb.ExactMatchRequest(data_type=dt, filters_json=draw(json_texts),
                                      limit=draw(limits), skill_scope=scope)


tokens = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=80)


@FUZZ
@given(call=store_requests(), token=tokens, send=st.booleans())
def test_store_without_a_valid_token_is_refused(channel, call, token, send):
    name, request = call
    metadata = [(SKILL_TOKEN, token)] if send else []
    code = outcome(lambda: getattr(rpc.StoreStub(channel), name)(request, metadata=metadata,
                                                                 timeout=CALL_TIMEOUT_S))
    assert code in refusals(request), code


@settings(FUZZ, max_examples=80)
@given(call=store_requests())
@example(call=("Put", pb.PutRequest(data_type="memory_event", record_json=deep(3000))))
@example(call=("Update", pb.UpdateRequest(data_type="memory_event", key="k",
                                          changes_json="[" * 100_000)))
@example(call=("ExactMatch", pb.ExactMatchRequest(data_type="memory_event", filters_json=deep(3000))))
@example(call=("SemanticSearch", pb.SemanticSearchRequest(
    data_type="memory_event", query="x", filters_json=deep(3000), limit=-1)))
@example(call=("AdjustScore", pb.AdjustScoreRequest(data_type="faction_reputation", key="k",
                                                    delta=float("nan"))))
def test_store_with_a_real_token_and_random_data(channel, skill_token, call):
    name, request = call
    outcome(lambda: getattr(rpc.StoreStub(channel), name)(
        request, metadata=[(SKILL_TOKEN, skill_token)], timeout=CALL_TIMEOUT_S))


@FEW
@given(token=tokens, player_input=strings, scene=strings, style=short_strings,
       outcomes=st.lists(short_strings, max_size=3))
def test_narrate_with_a_bad_token(channel, token, player_input, scene, style, outcomes):
    request = pb.NarrateRequest(player_input=player_input, scene=scene, style=style,
                                outcomes=outcomes)
    code = outcome(lambda: rpc.ModelStub(channel).Narrate(
        request, metadata=[(SKILL_TOKEN, token)], timeout=CALL_TIMEOUT_S))
    assert code in refusals(request), code


@FEW
@given(player_input=st.sampled_from(["", " ", "\n"]) | short_strings,
       style=st.sampled_from(["", "terse", "vivid", "poetic"]) | short_strings)
def test_narrate_with_a_real_token_checks_its_input(channel, skill_token, player_input, style):
    # Only requests refused before the model runs: the pattern daemon loads no model.
    if player_input.strip() and style in ("", "terse", "vivid", "poetic"):
        style = style + "?"
    request = pb.NarrateRequest(player_input=player_input, style=style)
    code = outcome(lambda: rpc.ModelStub(channel).Narrate(
        request, metadata=[(SKILL_TOKEN, skill_token)], timeout=CALL_TIMEOUT_S))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


# -- bytes that are no protobuf at all ---------------------------------------------

UNARY = ["/narratoria.v1.Narratoria/" + m for m in (
    "CreateSession", "ListSessions", "ResumeSession", "EndSession", "Branch", "GetState",
    "ListSkills", "Status")] + ["/narratoria.v1.Store/" + m for m in (
        "Put", "Update", "AdjustScore", "AdjustScores", "Delete", "Get", "SemanticSearch",
        "ExactMatch")] + ["/narratoria.v1.Model/Narrate"]
STREAMING = ["/narratoria.v1.Narratoria/Turn", "/narratoria.v1.Narratoria/IngestCampaign"]

garbage = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"\xff" * 10, b"\x0a\x05ab", b"\x0a\x7f", b"\x0a\x02\xff\xfe",
                     b"\x12\x03\xc3\x28x", b"\x08", b"\x0f\x0f\x0f", b"\x80" * 11]),
    st.binary(min_size=1, max_size=16).map(lambda b: b * 4096),
)


def _raw(channel, method: str, streaming: bool):
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)


@settings(FUZZ, max_examples=60)
@given(method=st.sampled_from(UNARY + STREAMING), payload=garbage)
def test_bytes_that_are_no_protobuf(channel, narratoria, skill_token, method, payload):
    streaming = method in STREAMING
    metadata = [(SKILL_TOKEN, skill_token), *narratoria.metadata]
    outcome(lambda: _raw(channel, method, streaming)(payload, metadata=metadata,
                                                     timeout=CALL_TIMEOUT_S))


def test_a_request_that_is_no_protobuf_is_an_invalid_argument(channel, narratoria):
    for method in UNARY + STREAMING:
        call = _raw(channel, method, method in STREAMING)
        with pytest.raises(grpc.RpcError) as err:
            result = call(b"\x0a\x05ab", timeout=CALL_TIMEOUT_S,  # a truncated string field
                          metadata=narratoria.metadata)
            list(result) if method in STREAMING else None
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.value)
        assert "request" in err.value.details(), err.value.details()


# -- afterwards --------------------------------------------------------------------

def test_the_daemon_still_serves_after_the_fuzzing(narratoria):
    print(f"fuzzed calls by status: {dict(SEEN)}")
    status = narratoria.Status(pb.StatusRequest(), timeout=CALL_TIMEOUT_S)
    assert all(a.alive for a in status.actors), status
    sid = narratoria.CreateSession(pb.CreateSessionRequest(title="after fuzz"),
                                   timeout=CALL_TIMEOUT_S).id
    events = list(narratoria.Turn(pb.TurnRequest(session_id=sid, text="I look around"),
                                  timeout=CALL_TIMEOUT_S))
    assert events[-1].WhichOneof("event") == "done", events
    assert events[-1].done.narration.strip()
    state = narratoria.GetState(pb.SessionRef(session_id=sid), timeout=CALL_TIMEOUT_S)
    assert state.turns == 1
