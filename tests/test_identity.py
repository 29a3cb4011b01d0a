"""Sessions belong to the client that created them (runtime/host/identity.py), through a
real daemon: client tokens, the local user, and tokens nobody was given."""

from __future__ import annotations

import json

import pytest

from narratoria.clients.client import ClientError, NarratoriaClient
from narratoria.runtime.host.identity import ClientRegistry, IdentityError


def test_the_registry_keeps_only_hashes_and_knows_its_clients(tmp_path):
    clients = ClientRegistry(tmp_path)
    token = clients.add("web")
    assert clients.identify(token) == "client:web" and clients.identify("nope") is None
    assert token not in (tmp_path / "clients.json").read_text()
    assert (tmp_path / "clients.json").stat().st_mode & 0o777 == 0o600
    with pytest.raises(IdentityError, match="exists already"):
        clients.add("web")
    with pytest.raises(IdentityError, match="name: 'Web Page!'"):
        clients.add("Web Page!")
    # Another process's change is seen without a restart.
    assert ClientRegistry(tmp_path).remove("web")
    assert clients.identify(token) is None


def test_a_client_sees_and_plays_only_its_own_sessions(pattern_daemon):
    registry = ClientRegistry(pattern_daemon.dir / "data")
    alice, bob = registry.add("alice"), registry.add("bob")
    target = f"unix://{pattern_daemon.socket}"
    with NarratoriaClient(target, client_token=alice) as a, \
            NarratoriaClient(target, client_token=bob) as b, \
            NarratoriaClient(target) as local:
        mine = a.create_session(title="alice's")
        assert [s.id for s in a.list_sessions()] == [mine.id]
        assert mine.id not in [s.id for s in b.list_sessions()]
        assert mine.id not in [s.id for s in local.list_sessions()]
        for attempt in (lambda: b.resume_session(mine.id), lambda: b.get_state(mine.id),
                        lambda: list(b.turn(mine.id, text="I take over")),
                        lambda: b.branch(mine.id), lambda: b.end_session(mine.id),
                        lambda: b.cancel_turn(mine.id), lambda: local.get_state(mine.id)):
            with pytest.raises(ClientError) as refused:
                attempt()
            assert refused.value.code in ("PERMISSION_DENIED", "NOT_FOUND"), refused.value
        events = list(a.turn(mine.id, text="I look around"))
        assert events[-1].WhichOneof("event") == "done"
        assert json.loads(a.get_state(mine.id).state_json) is not None
    with NarratoriaClient(target, client_token="forged-token") as forged:
        with pytest.raises(ClientError) as unknown:
            forged.list_sessions()
        assert unknown.value.code == "UNAUTHENTICATED"
        with pytest.raises(ClientError) as unknown_stream:
            list(forged.turn(mine.id, text="hello"))
        assert unknown_stream.value.code == "UNAUTHENTICATED"


def test_one_client_identity_cannot_fill_the_model_with_turns(pattern_daemon):
    """A client identity has at most CLIENT_TURNS turns in flight across its sessions;
    past that its new turn is refused at once (RESOURCE_EXHAUSTED, saying why) and
    claims nothing: the refused session plays once a turn has ended."""
    from concurrent.futures import ThreadPoolExecutor

    from narratoria.actors.coordinator import CLIENT_TURNS

    token = ClientRegistry(pattern_daemon.dir / "data").add("flood")
    target = f"unix://{pattern_daemon.socket}"
    n = CLIENT_TURNS * 2
    with NarratoriaClient(target, client_token=token) as c:
        sessions = [c.create_session(title=f"flood {i}").id for i in range(n)]

    def one(sid: str) -> str:
        with NarratoriaClient(target, client_token=token) as client:
            try:
                events = list(client.turn(sid, text="I walk along the quay at dusk"))
            except ClientError as exc:
                assert exc.code == "RESOURCE_EXHAUSTED", exc
                assert "turns in flight" in exc.message, exc
                return "refused"
            return events[-1].WhichOneof("event")

    with ThreadPoolExecutor(n) as pool:
        ends = list(pool.map(one, sessions))
    assert ends.count("done") >= CLIENT_TURNS and ends.count("refused") >= 1, ends
    assert set(ends) <= {"done", "refused"}, ends
    refused = sessions[ends.index("refused")]
    with NarratoriaClient(target, client_token=token) as c:
        assert list(c.turn(refused, text="I try again"))[-1].WhichOneof("event") == "done"
