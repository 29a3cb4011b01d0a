"""Scaling out on Ray: a two-node local cluster (``ray start --head`` and a second
``ray start`` on this machine, each offering one ``narratoria_planner``), a daemon
that joins it through ``RAY_ADDRESS`` with two planner replicas pinned by that
resource, and a check that the replicas run on different nodes and both take turns.
The skill supervisor is pinned to the second node (``--supervisor-resource``, a
resource only that node offers): its skills run there and still reach the Store.

Only this test's own Ray processes are stopped: every port is chosen free, each node
has its own temp dir, and teardown signals the two ``ray start --block`` processes
(then kills, by pid, whatever still names those temp dirs). ``ray stop`` is never
used: it would stop every Ray on the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import TESTS
from narratoria.clients.client import NarratoriaClient
from skill_plans import finished, run_plan, tool_events

pytestmark = pytest.mark.daemon

RAY = Path(sys.executable).parent / "ray"
RESOURCE = "narratoria_planner"
SKILLS = "narratoria_skills"  # offered by the second node only
PROBE_SKILLS = TESTS / "fixtures" / "store-scope" / "skills"
NODE_START_S = 60
DAEMON_START_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_ports() -> list[str]:
    return ["--dashboard-agent-listen-port", str(_free_port()),
            "--dashboard-agent-grpc-port", str(_free_port()),
            "--runtime-env-agent-port", str(_free_port()),
            "--metrics-export-port", str(_free_port()),
            "--node-manager-port", str(_free_port()),
            "--object-manager-port", str(_free_port())]


class Node:
    """One ``ray start --block`` (its own session, temp dir and log)."""

    def __init__(self, temp_dir: Path, args: list[str], env: dict[str, str],
                 resources: dict[str, float] | None = None) -> None:
        self.temp_dir = temp_dir
        self.log = temp_dir.with_suffix(".log")
        self.proc = subprocess.Popen(
            [str(RAY), "start", "--block", "--temp-dir", str(temp_dir), "--num-cpus", "1",
             "--resources", json.dumps(resources or {RESOURCE: 1}), "--object-store-memory", str(100 << 20),
             "--min-worker-port", "0", "--max-worker-port", "0", "--disable-usage-stats",
             *_node_ports(), *args],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env,
            start_new_session=True)

    def wait_started(self) -> None:
        deadline = time.monotonic() + NODE_START_S
        while time.monotonic() < deadline:
            if "Ray runtime started" in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"ray start did not start:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # `ray start --block` stops its node
            try:
                self.proc.wait(45)
            except subprocess.TimeoutExpired:
                pass
        for pid in _pids_naming(str(self.temp_dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _pids_naming(marker: str) -> list[int]:
    """Live processes whose command line names ``marker`` (this test's temp dirs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def cluster():
    if not RAY.exists():
        pytest.skip(f"no `ray` command next to {sys.executable}: cannot start a Ray cluster")
    root = Path(tempfile.mkdtemp(prefix="nrc-", dir="/tmp"))  # short: Ray's socket paths
    port = _free_port()
    # A token of this cluster's own (Ray 2.5x enables token auth on `ray start --head`);
    # the daemon and both nodes get it from the environment, ~/.ray is not touched.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = Node(root / "h", ["--head", "--port", str(port), "--include-dashboard", "false",
                             "--dashboard-port", str(_free_port()),
                             "--ray-client-server-port", str(_free_port())], env)
    nodes = [head]
    try:
        try:
            head.wait_started()
        except RuntimeError as exc:
            pytest.skip(f"`ray start --head` is impossible here: {exc}")
        worker = Node(root / "w", ["--address", f"127.0.0.1:{port}"], env,
                      resources={RESOURCE: 1, SKILLS: 1})
        nodes.append(worker)
        worker.wait_started()
        yield {**env, "RAY_ADDRESS": f"127.0.0.1:{port}"}
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)


def kinds_of(events: list) -> list[str]:
    return [e.WhichOneof("event") for e in events]


def _ray_query(env: dict[str, str], code: str) -> object:
    """Run ``code`` (it prints one JSON value) as a driver of the test's cluster."""
    prelude = ("import json, logging, ray\n"
               "ray.init(namespace='narratoria', logging_level=logging.WARNING, "
               "log_to_driver=False)\n")
    out = subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_planner_replicas_and_the_skill_supervisor_are_placed_by_configuration(cluster):
    folder = Path(tempfile.mkdtemp(prefix="nrd-", dir="/tmp"))
    sock = folder / "d.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "narratoria.clients.cli", "serve", "--socket", str(sock),
         "--data-dir", str(folder / "data"), "--json", "--planner", "pattern",
         "--embedding-backend", "hash", "--threads", "1",
         "--planner-replicas", "2", "--planner-resource", RESOURCE,
         "--supervisor-resource", SKILLS, "--skills-dir", str(PROBE_SKILLS)],
        stdout=subprocess.PIPE, stderr=open(folder / "stderr.log", "ab"), text=True,
        env=cluster, start_new_session=True)
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(DAEMON_START_S)
        assert line and line[0].strip(), (folder / "stderr.log").read_text()[-3000:]
        ready = json.loads(line[0])

        # The daemon says where its replicas went, and Ray agrees.
        placed = {p["name"]: p["node"] for p in ready["planners"]}
        assert set(placed) == {"planner", "planner-1"}
        assert all(placed.values()) and len(set(placed.values())) == 2, placed
        seen = _ray_query(cluster, (
            "from ray._private import state\n"
            "nodes = {n['NodeID'] for n in ray.nodes() if n['Alive']}\n"
            "where = {a['Name']: a['Address']['NodeID'] for a in state.actors().values()\n"
            "         if a['State'] == 'ALIVE' and a['Name']}\n"
            "print(json.dumps({'nodes': sorted(nodes), 'where': where}))\n"))
        assert len(seen["nodes"]) == 2
        assert {seen["where"]["planner"], seen["where"]["planner-1"]} == set(seen["nodes"])
        # The data dir's actors stay on the daemon's node (the head, here); the skill
        # supervisor went to the node that offers its resource (the second one).
        local = {seen["where"][n] for n in ("store", "coordinator", "embedder")}
        assert len(local) == 1, seen["where"]
        assert seen["where"]["supervisor"] not in local, seen["where"]
        assert seen["where"]["supervisor"] in seen["nodes"]
        assert ready["supervisorNode"] == seen["where"]["supervisor"]

        with NarratoriaClient(f"unix://{sock}") as client:
            status = client.status()
            alive = {a.name: a.alive for a in status.actors}
            assert alive.get("planner") and alive.get("planner-1"), alive
            for text in ("I look around the square", "I walk to the well"):
                session = client.create_session(title="cluster")
                events = list(client.turn(session.id, text=text))
                kinds = [e.WhichOneof("event") for e in events]
                assert kinds[-1] == "done", kinds
                assert events[-1].done.narration.strip()

        # Round-robin on idle replicas: one turn each.
        turns = _ray_query(cluster, (
            "print(json.dumps(ray.get(ray.get_actor('coordinator').status.remote())))\n"))
        assert turns["plannerTurns"] == [1, 1], turns

        with NarratoriaClient(f"unix://{sock}") as client:
            # A skill run by the supervisor over there stores and reads back through
            # the daemon's Store service.
            session = client.create_session(title="remote skills")
            record = {"characterId": "remote", "imagePath": "/nonexistent/remote.png",
                      "description": "drawn on another node", "generatedAt": "2026-01-01T00:00:00Z"}
            ops = [{"op": "put", "shared": False, "dataType": "character_portrait", "record": record},
                   {"op": "get", "shared": False, "dataType": "character_portrait", "key": "remote"}]
            events = run_plan(client, session.id, {"toolId": "probe", "toolPath": "scope-probe/probe",
                                                   "input": {"ops": ops}})
            assert finished(events)["probe"].ok, kinds_of(events)
            logged = [e for e in tool_events(events, "probe") if e.get("message") == "probe"]
            put, got = logged[0]["fields"]["results"]
            assert put["ok"] and got["ok"] and got["value"]["description"] == "drawn on another node"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
    assert proc.returncode == 0
