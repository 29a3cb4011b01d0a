"""Who may call what, against a real daemon.

Item 3: a skill holds only its Store token. A hostile skill (fixtures/identity/intruder),
run by the daemon in a plan, dials the daemon's own socket and calls the front-end
service with no token, with its skill token in every slot, and with every token file
it can find: every call is refused and the other player's session is untouched. Calls
without an identity are refused on the unix socket too; the client library finds the
daemon token (beside the socket, in the data dir) so front-ends need no change.

Item 10: characters belong to their creator, and skill settings and switches to the
device's owner, between two real client identities (``narratoria clients add``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import pytest
from PIL import Image

from narratoria.clients.client import ClientError, NarratoriaClient
from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
from narratoria.runtime.host.endpoint import TOKEN_NAME, client_token, unix_endpoint

from support.daemon import HASH_EMBEDDER, Daemon

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "identity"
NARRATORIA = Path(sys.executable).parent / "narratoria"
DESCRIPTION = "A lighthouse keeper's daughter who reads the tides like a book."


# The daemon token as a user might have it in the shell that starts the daemon (to reach
# a TCP daemon, say): the daemon must not pass it on to skills that ask for it.
SHELL_TOKEN = "the-daemon-token-as-exported-in-the-users-shell"


@pytest.fixture(scope="module")
def daemon(config_dir, tmp_path_factory):
    skills = tmp_path_factory.mktemp("skills")
    shutil.copytree(FIXTURES / "intruder", skills / "intruder")  # it writes its folder
    folder = Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
    (folder / "data").mkdir(mode=0o700)
    (folder / "data" / TOKEN_NAME).write_text(SHELL_TOKEN + "\n")
    (folder / "data" / TOKEN_NAME).chmod(0o600)
    saved = os.environ.get("NARRATORIA_TOKEN")
    os.environ["NARRATORIA_TOKEN"] = SHELL_TOKEN  # inherited by the daemon only
    try:
        d = Daemon("--planner", "pattern", *HASH_EMBEDDER,
                   "--skills-dir", str(skills), folder=folder)
    finally:
        if saved is None:
            del os.environ["NARRATORIA_TOKEN"]
        else:
            os.environ["NARRATORIA_TOKEN"] = saved
    yield d
    assert d.stop() == 0


def narratoria(daemon: Daemon, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The real CLI, pointed at ``daemon``'s socket and data dir."""
    environ = {**os.environ, "NARRATORIA_ADDRESS": f"unix://{daemon.socket}",
               "NARRATORIA_DATA_DIR": str(daemon.dir / "data")}
    environ.pop("NARRATORIA_TOKEN", None)  # found beside the socket, unless a test says
    environ.update(env)
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True, timeout=120,
                          env=environ)


def add_client(daemon: Daemon, name: str) -> str:
    done = narratoria(daemon, "clients", "add", name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["token"]


@pytest.fixture(scope="module")
def identities(daemon) -> dict[str, str]:
    return {"alice": add_client(daemon, "alice"), "bob": add_client(daemon, "bob")}


def as_client(daemon: Daemon, token: str) -> NarratoriaClient:
    return NarratoriaClient(f"unix://{daemon.socket}", client_token=token)


def error_of(call) -> ClientError:
    with pytest.raises(ClientError) as err:
        call()
    return err.value


def png(color=(20, 120, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 60), color).save(out, format="PNG")
    return out.getvalue()


# -- item 3: the daemon token ------------------------------------------------------------

def test_the_client_library_finds_the_token_in_order(tmp_path, monkeypatch):
    data, beside = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    beside.mkdir()
    monkeypatch.setenv("NARRATORIA_DATA_DIR", str(data))
    monkeypatch.delenv("NARRATORIA_TOKEN", raising=False)
    endpoint = unix_endpoint(beside / "d.sock")
    assert client_token(endpoint) is None
    (data / TOKEN_NAME).write_text("from-the-data-dir\n")
    assert client_token(endpoint) == "from-the-data-dir"
    (beside / TOKEN_NAME).write_text("from-beside-the-socket\n")
    assert client_token(endpoint) == "from-beside-the-socket"
    assert client_token(None) == "from-the-data-dir"  # no socket to look beside
    monkeypatch.setenv("NARRATORIA_TOKEN", " from-the-environment ")
    assert client_token(endpoint) == "from-the-environment"
    with NarratoriaClient(endpoint, token="explicit") as client:
        assert ("x-narratoria-token", "explicit") in client._metadata


def test_the_daemon_leaves_its_token_beside_its_socket_and_front_ends_find_it(daemon):
    beside, own = daemon.socket.parent / TOKEN_NAME, daemon.dir / "data" / TOKEN_NAME
    assert beside.read_text() == own.read_text() and beside.read_text().strip()
    assert beside.stat().st_mode & 0o777 == 0o600
    with NarratoriaClient(f"unix://{daemon.socket}") as client:
        assert client.status().sessions >= 0
    done = narratoria(daemon, "status", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["sessions"] >= 0, done.stderr
    wrong = narratoria(daemon, "status", NARRATORIA_TOKEN="not-the-token")
    assert wrong.returncode != 0 and "UNAUTHENTICATED" in wrong.stderr, wrong.stderr


FRONT_END_CALLS = {
    "ListSessions": lambda s: s.ListSessions(pb.ListSessionsRequest(), timeout=30),
    "GetState": lambda s: s.GetState(pb.SessionRef(session_id="x"), timeout=30),
    "EndSession": lambda s: s.EndSession(pb.SessionRef(session_id="x"), timeout=30),
    "CreateSession": lambda s: s.CreateSession(pb.CreateSessionRequest(), timeout=30),
    "Turn": lambda s: list(s.Turn(pb.TurnRequest(session_id="x", text="hi"), timeout=30)),
    "Status": lambda s: s.Status(pb.StatusRequest(), timeout=30),
    "ListCharacters": lambda s: s.ListCharacters(pb.ListCharactersRequest(), timeout=30),
    "SetSkillEnabled": lambda s: s.SetSkillEnabled(
        pb.SetSkillEnabledRequest(skill="intruder", enabled=False), timeout=30),
}


def test_a_call_without_an_identity_is_refused_on_the_unix_socket(daemon):
    with grpc.insecure_channel(f"unix://{daemon.socket}") as channel:
        for metadata in ([], [("x-narratoria-token", "wrong")],
                         [("x-narratoria-client-token", "nobody's")]):
            stub = rpc.NarratoriaStub(channel)
            for name, call in FRONT_END_CALLS.items():
                with pytest.raises(grpc.RpcError) as err:
                    call(_with_metadata(stub, metadata))
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, (name, metadata)
        with pytest.raises(grpc.RpcError) as err:
            rpc.NarratoriaStub(channel).Status(pb.StatusRequest(), timeout=30)
        # The message says what to send and where the token is.
        assert "x-narratoria-token" in err.value.details() and "daemon.token" in err.value.details()
    with NarratoriaClient(f"unix://{daemon.socket}", token="wrong") as client:
        assert error_of(client.status).code == "UNAUTHENTICATED"


class _with_metadata:
    """A stub whose every call carries ``metadata``."""

    def __init__(self, stub: rpc.NarratoriaStub, metadata: list[tuple[str, str]]) -> None:
        self.stub, self.metadata = stub, metadata

    def __getattr__(self, name: str):
        method = getattr(self.stub, name)
        return lambda request, **kw: method(request, metadata=self.metadata, **kw)


def test_a_skill_cannot_act_as_a_front_end_nor_find_the_daemon_token(daemon, identities):
    with NarratoriaClient(f"unix://{daemon.socket}") as owner:
        victim = owner.create_session(title="the owner's own")
        list(owner.turn(victim.id, text="I light the lamp"))
        before = owner.get_state(victim.id)
    token_files = [str(daemon.socket.parent / TOKEN_NAME), str(daemon.dir / "data" / TOKEN_NAME)]
    probe = {"toolPath": "intruder/probe", "input": {"victim": victim.id, "tokenFiles": token_files}}
    # Twice: the second invocation runs with the settings the first one wrote.
    plan = {"requestId": "intruder", "narrative": "Someone tries the doors.",
            "tools": [{"toolId": "probe", **probe},
                      {"toolId": "again", **probe, "dependencies": ["probe"]}]}
    with as_client(daemon, identities["bob"]) as bob:
        sid = bob.create_session(title="bob's").id
        events = list(bob.turn(sid, plan_json=json.dumps(plan), execute_only=True))
    reports = [json.loads(e.tool_event.event_json)["fields"] for e in events
               if e.WhichOneof("event") == "tool_event"
               and "intruder-report" in e.tool_event.event_json]
    assert len(reports) == 2, [e.WhichOneof("event") for e in events]
    for report in reports:
        assert report["calls"] and set(report["calls"].values()) == {"UNAUTHENTICATED"}, report
    assert not [k for r in reports for k in r["reads"] if k.startswith("settings: ")], reports
    # Nor can it write its own settings file (the sandbox: its data/ folder and TMPDIR only).
    assert [r["reads"]["settings file"] for r in reports] == ["PermissionError"] * 2, reports
    report = reports[1]
    # (It may find other daemons' token files under /tmp: they open no door here, as the
    # calls above show; the sandbox keeps this daemon's own two out.)
    for path in token_files:
        assert report["reads"][path] == "PermissionError", report["reads"]  # it exists
        assert report["reads"].get(path + " (hard link)") != "READ", report["reads"]
    assert not {"$NARRATORIA_TOKEN", "$NARRATORIA_CLIENT_TOKEN"} & set(report["reads"])
    with NarratoriaClient(f"unix://{daemon.socket}") as owner:
        after = owner.resume_session(victim.id)
        assert after.status == "active" and after.turns == before.turns
        assert owner.get_state(victim.id).state_json == before.state_json
        assert next(s for s in owner.list_skills() if s.name == "intruder").enabled


# -- item 10: ownership ----------------------------------------------------------------------

def test_characters_belong_to_their_creator(daemon, identities):
    with as_client(daemon, identities["alice"]) as alice, \
            as_client(daemon, identities["bob"]) as bob, \
            NarratoriaClient(f"unix://{daemon.socket}") as owner:
        made = alice.save_character(DESCRIPTION, png(), name="Wren")
        assert made.id in [c.id for c in alice.list_characters()]
        assert made.id not in [c.id for c in bob.list_characters()]
        assert made.id not in [c.id for c in owner.list_characters()]
        for attempt in (lambda: bob.get_character_portrait(made.id),
                        lambda: bob.save_character(name="Stolen", character_id=made.id),
                        lambda: bob.save_character(portrait=png((1, 2, 3)), character_id=made.id),
                        lambda: bob.delete_character(made.id),
                        lambda: owner.delete_character(made.id)):
            err = error_of(attempt)
            assert err.code == "PERMISSION_DENIED" and made.id in err.message, err
        kept = next(c for c in alice.list_characters() if c.id == made.id)
        assert kept.name == "Wren" and kept.updated_at_ms == made.updated_at_ms
        assert alice.get_character_portrait(made.id).data
        record = json.loads((daemon.dir / "data" / "characters" / f"{made.id}.json").read_text())
        assert record["owner"] == "client:alice"
        # Through the daemon the device owner sees only their own characters; the data
        # dir's own store (--local) shows every identity's, this one marked as alice's.
        assert made.id not in narratoria(daemon, "characters", "list").stdout
        listed = narratoria(daemon, "characters", "list", "--local")
        assert any(made.id in line and "client:alice's" in line
                   for line in listed.stdout.splitlines()), listed.stdout
        assert alice.delete_character(made.id).id == made.id


def test_a_character_from_before_owners_is_the_local_users(daemon, identities):
    with NarratoriaClient(f"unix://{daemon.socket}") as owner, \
            as_client(daemon, identities["alice"]) as alice:
        made = owner.save_character(DESCRIPTION, png(), name="Old Tom")
        path = daemon.dir / "data" / "characters" / f"{made.id}.json"
        record = json.loads(path.read_text())
        assert record.pop("owner") == "local"
        path.write_text(json.dumps(record))  # as written before owners were kept
        assert made.id in [c.id for c in owner.list_characters()]
        assert made.id not in [c.id for c in alice.list_characters()]
        assert error_of(lambda: alice.delete_character(made.id)).code == "PERMISSION_DENIED"
        assert owner.save_character(name="Old Tom Jr", character_id=made.id).name == "Old Tom Jr"


def test_a_session_starts_only_with_the_callers_own_character(daemon, identities):
    with as_client(daemon, identities["alice"]) as alice, \
            as_client(daemon, identities["bob"]) as bob:
        made = alice.save_character(DESCRIPTION, png(), name="Wren")
        sessions = [s.id for s in bob.list_sessions()]
        err = error_of(lambda: bob.create_session(campaign="long_ebb", character_id=made.id))
        assert err.code == "PERMISSION_DENIED" and made.id in err.message, err
        assert [s.id for s in bob.list_sessions()] == sessions
        assert next(c for c in alice.list_characters() if c.id == made.id).fresh


def test_skill_settings_and_switches_are_the_owners_alone(daemon, identities):
    with as_client(daemon, identities["alice"]) as alice, \
            NarratoriaClient(f"unix://{daemon.socket}") as owner:
        for attempt in (lambda: alice.set_skill_enabled("intruder", False),
                        lambda: alice.set_skill_config("intruder", {"anything": "x"})):
            err = error_of(attempt)
            assert err.code == "PERMISSION_DENIED", err
            assert "owner" in err.message and "client:alice" in err.message, err
        assert next(s for s in alice.list_skills() if s.name == "intruder").enabled
        assert alice.get_skill_config("intruder").enabled  # reading is fine
        try:
            assert not owner.set_skill_enabled("intruder", False).enabled
            assert not next(s for s in alice.list_skills() if s.name == "intruder").enabled
        finally:
            assert owner.set_skill_enabled("intruder", True).enabled
