"""End to end: a real daemon (Ray, the real model, the real embedder, a DuckDB file)
on a temporary unix socket, driven through the gRPC API by the client library."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import pytest

from narratoria.clients.client import ClientError, NarratoriaClient
from narratoria.proto import narratoria_pb2 as pb
from narratoria.proto import narratoria_pb2_grpc as rpc

from conftest import process_alive
from support.daemon import (DAEMON_SKILLS, DICE_PLAN, HASH_EMBEDDER, Daemon, cli, daemon_token,
                            done_of, kinds, play)


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    yield d
    assert d.stop() == 0


def test_a_turn_streams_every_step_and_the_session_remembers_it(daemon):
    assert daemon.socket.stat().st_mode & 0o777 == 0o600  # only its owner may connect
    with daemon.client() as client:
        session = client.create_session(title="e2e")
        events = play(client, session.id, text="I roll 2d6 to climb the wall")
        seen = kinds(events)
        assert seen[0] == "started" and seen[-1] == "done"
        for kind in ("phase", "plan", "narration", "choices"):
            assert kind in seen, seen
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        narration = "".join(e.narration.text for e in events if e.WhichOneof("event") == "narration")
        done = done_of(events)
        assert done.narration.strip() and narration.strip() == done.narration.strip()
        choices = next(e.choices.options for e in events if e.WhichOneof("event") == "choices")
        assert 3 <= len(choices) <= 4
        assert set(done.timings_ms) >= {"recall", "plan", "execute", "narrate", "choices",
                                        "store", "total"}

        resumed = client.resume_session(session.id)
        assert resumed.turns == 1 and list(resumed.choices) == list(choices)
        assert resumed.last_narration == done.narration
        # A choice is the option's text as the next turn's input.
        second = play(client, session.id, choice=2)
        assert second[0].started.input == choices[1]
        assert done_of(second).turn_number == 2


def test_bad_requests_get_status_codes_that_say_what_was_wrong(daemon):
    with daemon.client() as client:
        with pytest.raises(ClientError) as err:
            client.resume_session("nope")
        assert err.value.code == "NOT_FOUND" and "nope" in str(err.value)
        session = client.create_session()
        with pytest.raises(ClientError) as err:
            play(client, session.id, choice=1)
        assert err.value.code == "INVALID_ARGUMENT" and "choice" in str(err.value)
        client.end_session(session.id)
        with pytest.raises(ClientError) as err:
            play(client, session.id, text="hello")
        assert err.value.code == "FAILED_PRECONDITION"
        assert session.id not in [s.id for s in client.list_sessions()]
        assert session.id in [s.id for s in client.list_sessions(include_ended=True)]


def test_two_clients_play_concurrently_on_one_model(daemon):
    results: dict[int, list[pb.TurnEvent]] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with daemon.client() as client:
                sid = client.create_session(title=f"client {i}").id
                results[i] = play(client, sid, text=f"I look around the {['harbour', 'forest'][i]}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    for i in range(2):
        assert done_of(results[i]).narration.strip()
    with daemon.client() as client:
        status = client.status()
    assert status.model_loads == 1  # one warm model served both
    assert {a.name for a in status.actors if a.alive} == {
        "coordinator", "planner", "embedder", "store", "supervisor"}
    assert status.live_skill_processes == 0


def test_a_client_that_disconnects_mid_turn_cancels_nothing(daemon):
    with daemon.client() as client:
        sid = client.create_session().id
    channel = grpc.insecure_channel(f"unix://{daemon.socket}")
    call = rpc.NarratoriaStub(channel).Turn(pb.TurnRequest(session_id=sid, text="I look around"),
                                            metadata=[("x-narratoria-token", daemon_token(daemon))])
    first = next(call)
    assert first.WhichOneof("event") == "started"
    call.cancel()
    channel.close()
    with daemon.client() as client:
        deadline = time.monotonic() + 120
        while client.resume_session(sid).turns < 1:  # the turn completed and was saved anyway
            assert time.monotonic() < deadline, "the abandoned turn never finished"
            time.sleep(0.5)
        assert done_of(play(client, sid, text="I wait")).turn_number == 2


def test_killing_the_planner_actor_mid_turn_ends_in_a_replan_and_the_daemon_serves_on(daemon):
    with daemon.client() as client:
        sid = client.create_session().id
        planner_pid = next(a.pid for a in client.status().actors if a.name == "planner")
        events: list[pb.TurnEvent] = []
        # A risky action: the router hands it to the model (a plain one never wakes it).
        for event in client.turn(sid, text="I roll 2d6 to climb the crumbling library wall"):
            events.append(event)
            if event.WhichOneof("event") == "phase" and event.phase.phase == "GENERATING" \
                    and event.phase.attempt == 1:
                time.sleep(0.3)  # let the plan request reach the model
                os.kill(planner_pid, signal.SIGKILL)
        done = done_of(events)
        assert done.narration.strip()
        assert "replan" in kinds(events) or done.fallback
        # Ray restarts the actor; the next turn plans and narrates with the model again.
        assert done_of(play(client, sid, text="I read the map")).narration.strip()
        status = client.status()
        planner = next(a for a in status.actors if a.name == "planner")
        assert planner.alive and planner.pid != planner_pid and planner.restarts >= 1


@pytest.fixture(scope="module")
def hanging_skill_daemon():
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir", str(DAEMON_SKILLS))
    yield d
    assert d.stop() == 0


def test_killing_a_skill_mid_turn_replans_and_the_daemon_serves_on(hanging_skill_daemon):
    with hanging_skill_daemon.client() as client:
        sid = client.create_session().id
        events: list[pb.TurnEvent] = []
        killed = []
        for event in client.turn(sid, text="I roll the dice"):
            events.append(event)
            if event.WhichOneof("event") == "tool_event" and "hanging pid=" in event.tool_event.event_json:
                pid = int(json.loads(event.tool_event.event_json)["message"].split("=")[1])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        assert killed and not process_alive(killed[0])
        finished = [e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished"]
        assert finished and not finished[0].ok
        assert "replan" in kinds(events)
        assert done_of(events).narration.strip()
        assert client.status().live_skill_processes == 0
        assert done_of(play(client, sid, text="I walk on")).narration.strip()


def test_a_skill_uses_the_store_service_with_its_token_in_its_playthrough_only(hanging_skill_daemon):
    with hanging_skill_daemon.client() as client:
        session = client.create_session()
        events = play(client, session.id, text="I try to remember the ferryman's name")
        logs = [json.loads(e.tool_event.event_json) for e in events
                if e.WhichOneof("event") == "tool_event" and "store-check" in e.tool_event.event_json]
        assert logs, kinds(events)
        check = logs[0]["fields"]
        assert check["playthroughId"] == session.playthrough_id  # bound by the token, not chosen
        assert check["hits"] and "ferryman" in check["hits"][0]
        assert check["forgedToken"] == "PERMISSION_DENIED"
        other = client.create_session()
        again = play(client, other.id, text="I try to remember anything at all")
        other_check = [json.loads(e.tool_event.event_json)["fields"] for e in again
                       if e.WhichOneof("event") == "tool_event" and "store-check" in e.tool_event.event_json][0]
        assert other_check["playthroughId"] == other.playthrough_id
        assert not any("ferryman" in h for h in other_check["hits"])  # another playthrough's memory
    # A token lives as long as its plan: afterwards, and without one, calls are refused.
    channel = grpc.insecure_channel(f"unix://{hanging_skill_daemon.socket}")
    for token in (check["token"], ""):
        with pytest.raises(grpc.RpcError) as err:
            rpc.StoreStub(channel).Get(pb.KeyRequest(data_type="memory_event", key="x"),
                                       metadata=[("x-narratoria-skill-token", token)])
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    channel.close()


def test_sigterm_stops_the_daemon_cleanly_and_sessions_resume_after_a_restart():
    first = Daemon("--planner", "pattern", *HASH_EMBEDDER)
    try:
        with first.client() as client:
            sid = client.create_session(title="persist").id
            done = done_of(play(client, sid, text="I light a lantern"))
            state = client.get_state(sid).state_json
    finally:
        assert first.stop() == 0
    assert not first.socket.exists()
    again = Daemon("--planner", "pattern", *HASH_EMBEDDER, folder=first.dir)
    try:
        with again.client() as client:
            session = client.resume_session(sid)
            assert session.turns == 1 and session.last_narration == done.narration
            assert client.get_state(sid).state_json == state
            assert done_of(play(client, sid, text="I walk on")).turn_number == 2
    finally:
        assert again.stop() == 0


# ---- the command line against a real daemon (pattern planner: deterministic plans;
# narration and choices still come from the model)

def test_cli_sessions_turns_and_json_events(pattern_daemon):
    assert "narratoria daemon" in cli(pattern_daemon, "status").stdout
    status = json.loads(cli(pattern_daemon, "status", "--json").stdout)
    assert status["model_loads"] == 1 and status["skill_process_limit"] >= 1
    # The shipped Q4_1 model runs as its cached Q8_0 copy, and status says so.
    assert status["model_quantization"] == "Q8_0 (from Q4_1)"
    assert status["model_file"].endswith(".Q8_0.gguf") and status["model_path"].endswith("Q4_1.gguf")
    new = cli(pattern_daemon, "session", "new")
    assert new.returncode == 0, new.stderr
    sid = new.stdout.strip()
    proc = cli(pattern_daemon, "turn", "--session", sid, "I roll 2d6 to leap the gap", "--json")
    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert docs[0]["kind"] == "started" and docs[-1]["kind"] == "done"
    rolled = [d for d in docs if d["kind"] == "tool_finished"]
    assert rolled and rolled[0]["tool_finished"]["ok"] is True
    human = cli(pattern_daemon, "turn", "--session", sid, "--choice", "1")
    assert human.returncode == 0 and "1." in human.stdout
    bad = cli(pattern_daemon, "turn", "--session", sid, "--choice", "9")
    assert bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr and "Traceback" not in bad.stderr
    shown = json.loads(cli(pattern_daemon, "session", "show", sid, "--json").stdout)
    assert shown["session"]["turns"] == 2
    missing = cli(pattern_daemon, "session", "show", "nope")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
    assert "ended" in cli(pattern_daemon, "session", "end", sid).stdout


def test_play_auto_and_piped_input(pattern_daemon):
    auto = cli(pattern_daemon, "play", "--auto", "--turns", "2")
    assert auto.returncode == 0, auto.stderr
    assert "2 turn(s) played" in auto.stdout
    piped = cli(pattern_daemon, "play", stdin="I look around\n1\n/state\n")
    assert piped.returncode == 0, piped.stderr
    assert "> I look around" in piped.stdout and "2 turn(s) played" in piped.stdout


# ---- NPC knowledge and branching: sessions are takes, scenes are moments

CAST = {"npcs": {"mara": {"name": "Mara"},
                 "tomas": {"name": "Tomas", "knows": ["The ferry leaves at dawn."]}},
        "location": "the quay"}


def npc_context(events: list[pb.TurnEvent]) -> dict[str, pb.NpcContext]:
    """The NPC knowledge the turn gave its narrator, by NPC id (its `knowledge` event)."""
    found = [e.knowledge for e in events if e.WhichOneof("event") == "knowledge"]
    assert len(found) <= 1
    return {n.npc_id: n for n in found[0].npcs} if found else {}


def known_text(npc: pb.NpcContext) -> str:
    return " ".join([*npc.facts, *npc.memories])


def test_a_secret_told_to_one_npc_is_not_in_another_npcs_context(pattern_daemon):
    with pattern_daemon.client() as client:
        session = client.create_session(title="secret", state=CAST)
        assert json.loads(client.get_state(session.id).state_json) == {"location": "the quay"}
        first = play(client, session.id, text="I whisper to Mara that the key is under the bell")
        assert list(npc_context(first)) == ["mara"]  # only whom the input names is present
        assert kinds(first).index("knowledge") < kinds(first).index("narration")

        second = play(client, session.id, text="I ask Tomas where the key is")
        tomas = npc_context(second)
        assert list(tomas) == ["tomas"]  # Mara is absent: her knowledge is not given
        assert "The ferry leaves at dawn." in tomas["tomas"].facts  # given by the campaign
        assert "bell" not in known_text(tomas["tomas"])  # he was not there

        third = play(client, session.id, text="I ask Mara and Tomas where the key is")
        both = npc_context(third)
        assert set(both) == {"mara", "tomas"}
        assert "the key is under the bell" in known_text(both["mara"])  # she witnessed it
        assert "The ferry leaves at dawn." not in known_text(both["mara"])
        assert done_of(third).turn_number == 3


def test_branch_errors_name_what_was_wrong(pattern_daemon):
    with pattern_daemon.client() as client:
        with pytest.raises(ClientError) as err:
            client.branch("nope")
        assert err.value.code == "NOT_FOUND" and "nope" in err.value.message
        fresh = client.create_session()
        with pytest.raises(ClientError) as err:
            client.branch(fresh.id)
        assert err.value.code == "INVALID_ARGUMENT" and "no scenes yet" in err.value.message
        play(client, fresh.id, text="I look around")
        with pytest.raises(ClientError) as err:
            client.branch(fresh.id, at_scene=2)
        assert err.value.code == "INVALID_ARGUMENT" and "at_scene: 2" in err.value.message
        with pytest.raises(ClientError) as err:
            client.create_session(state={"npcs": {"mara": {"name": ""}}})
        assert err.value.code == "INVALID_ARGUMENT" and "npcs.mara.name" in err.value.message


def test_cli_session_branch_rewinds_and_both_sessions_play_on(pattern_daemon, tmp_path):
    def turn(sid: str, text: str) -> list[dict]:
        proc = cli(pattern_daemon, "turn", "--session", sid, text, "--json")
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def mara_knows(docs: list[dict]) -> str:
        found = [d["knowledge"]["npcs"] for d in docs if d["kind"] == "knowledge"]
        return " ".join(m for n in found[0] if n["npc_id"] == "mara" for m in n["memories"])

    def show(sid: str) -> dict:
        return json.loads(cli(pattern_daemon, "session", "show", sid, "--json").stdout)["session"]

    state = tmp_path / "cast.json"
    state.write_text(json.dumps(CAST))
    trunk = cli(pattern_daemon, "session", "new", "--state", str(state)).stdout.strip()
    after_one = turn(trunk, "I tell Mara the password is heron")[-1]["done"]["narration"]
    turn(trunk, "I tell Mara the password is falcon")
    before = show(trunk)

    proc = cli(pattern_daemon, "session", "branch", "--session", trunk, "--at-scene", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    branch = json.loads(proc.stdout)
    assert branch["id"] != trunk and branch["parent_session_id"] == trunk
    assert (branch["branched_at_scene"], branch["turns"]) == (2, 1)
    assert branch["last_narration"] == after_one
    assert show(trunk) == before  # branching changed nothing in the old session

    # The branch plays scene 2 again: Mara knows scene 1, never the abandoned scene 2.
    retried = turn(branch["id"], "I tell Mara the password is osprey")
    assert retried[-1]["done"]["turn_number"] == 2
    assert "heron" in mara_knows(retried) and "falcon" not in mara_knows(retried)
    # The old session resumes where it was, and never hears of the branch's scene.
    resumed = turn(trunk, "I ask Mara what she heard")
    assert resumed[-1]["done"]["turn_number"] == 3
    assert "falcon" in mara_knows(resumed) and "osprey" not in mara_knows(resumed)

    # Default: retry the last scene. Human output: the new id on stdout.
    last = cli(pattern_daemon, "session", "branch", "--session", trunk)
    assert last.returncode == 0 and "scene 3" in last.stderr
    assert show(last.stdout.strip())["turns"] == 2 and show(trunk)["turns"] == 3
    assert "branched from" in cli(pattern_daemon, "session", "show", last.stdout.strip()).stdout
    bad = cli(pattern_daemon, "session", "branch", "--session", trunk, "--at-scene", "9")
    assert bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr and "at_scene: 9" in bad.stderr
    missing = cli(pattern_daemon, "session", "branch", "--session", "nope")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr and "Traceback" not in missing.stderr


def test_tcp_needs_the_daemon_token():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "narratoria.clients.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--data-dir", str(folder / "data"), "--json", "--planner", "pattern"],
        stdout=subprocess.PIPE, stderr=open(folder / "stderr.log", "wb"), text=True,
        start_new_session=True)
    d = Daemon.__new__(Daemon)
    d.dir, d.socket, d.proc = folder, folder / "unused.sock", proc
    d.ready = d._wait_ready()
    try:
        token = (folder / "data" / "daemon.token").read_text().strip()
        assert (folder / "data" / "daemon.token").stat().st_mode & 0o777 == 0o600
        with NarratoriaClient(f"127.0.0.1:{port}", token="wrong") as client:
            with pytest.raises(ClientError) as err:
                client.status()
            assert err.value.code == "UNAUTHENTICATED"
        with NarratoriaClient(f"127.0.0.1:{port}", token=token) as client:
            assert client.status().model_loads == 1
    finally:
        assert d.stop() == 0


def test_a_given_plan_runs_in_a_session_without_the_planner(pattern_daemon, tmp_path):
    with pattern_daemon.client() as client:
        sid = client.create_session(title="skill dev").id
        events = list(client.turn(sid, plan_json=json.dumps(DICE_PLAN), execute_only=True))
        plan = next(e.plan for e in events if e.WhichOneof("event") == "plan")
        assert plan.planner == "fixed" and json.loads(plan.plan_json)["requestId"] == "dev-plan-1"
        finished = [e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished"]
        assert [f.ok for f in finished] == [True]
        done = done_of(events)
        assert done.narration == "The dice decide." and not done.fallback
        assert "NARRATING" not in [e.phase.phase for e in events if e.WhichOneof("event") == "phase"]
        assert json.loads(done.state_json)["lastRoll"]["total"] >= 2  # the state was saved
        assert client.resume_session(sid).turns == 1

        # A bad plan is refused before anything runs, naming where it is wrong.
        with pytest.raises(ClientError) as bad:
            list(client.turn(sid, plan_json='{"requestId": "x", "tools": [}'))
        assert bad.value.code == "INVALID_ARGUMENT" and "plan_json" in str(bad.value)

    # The CLI: --plan FILE, with TEXT optional.
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(DICE_PLAN))
    out = cli(pattern_daemon, "turn", "--session", sid, "--plan", str(plan_file),
              "--execute-only", "--json")
    assert out.returncode == 0, out.stderr
    kinds_seen = [json.loads(line)["kind"] for line in out.stdout.splitlines()]
    assert kinds_seen[-1] == "done" and "tool_finished" in kinds_seen and "plan" in kinds_seen
    assert cli(pattern_daemon, "turn", "--session", sid, "--execute-only", "hi").returncode != 0


def test_a_turn_cancelled_in_flight_kills_its_skills_and_stores_nothing(pattern_daemon, tmp_path):
    import threading

    from conftest import process_alive

    sleep = "echo/sleep"  # the pattern daemon registers the test skills
    with pattern_daemon.client() as client:
        session = client.create_session(title="cancel me", state={"gold": 5})
        before = client.get_state(session.id)
        plan = {"requestId": "slow", "narrative": "x",
                "tools": [{"toolId": "s0", "toolPath": sleep, "input": {"seconds": 30}},
                          {"toolId": "s1", "toolPath": sleep, "input": {"seconds": 30},
                           "dependencies": ["s0"]}]}
        seen: list[pb.TurnEvent] = []
        failure: list[ClientError] = []

        def run() -> None:
            try:
                for event in client.turn(session.id, plan_json=json.dumps(plan),
                                         execute_only=True):
                    seen.append(event)
            except ClientError as exc:
                failure.append(exc)

        player = threading.Thread(target=run)
        player.start()
        deadline = time.monotonic() + 30
        while not any(e.WhichOneof("event") == "tool_started" for e in seen):
            assert time.monotonic() < deadline, kinds(seen)
            time.sleep(0.05)
        while client.status().live_skill_processes < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        reply = client.cancel_turn(session.id)
        assert reply.cancelled and reply.turn_id
        player.join(30)
        assert failure and failure[0].code == "CANCELLED"
        after = client.get_state(session.id)
        assert after.state_json == before.state_json and after.turns == before.turns
        assert client.resume_session(session.id).turns == 0
        assert not client.cancel_turn(session.id).cancelled  # nothing left to cancel
        # The skills' processes are gone (the supervisor reports none running).
        deadline = time.monotonic() + 10
        while client.status().live_skill_processes:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # And the session plays on.
        assert kinds(play(client, session.id, text="I look around"))[-1] == "done"
