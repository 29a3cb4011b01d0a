"""The skill supervisor keeps one executor per session (its skill health) only while the
session lives: ending the session releases it, so executors do not pile up for the
daemon's lifetime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.daemon import DICE_PLAN, HASH_EMBEDDER, Daemon, kinds

STATUS_QUERY = """
import json, logging, sys, ray
ray.init(address=sys.argv[1], namespace="narratoria", logging_level=logging.WARNING,
         log_to_driver=False)
supervisor = ray.get_actor("supervisor")
for line in sys.stdin:
    print(json.dumps(ray.get(supervisor.status.remote())), flush=True)
"""


class SupervisorStatus:
    """A driver of the daemon's own Ray cluster (a process of its own, so the test's
    process never joins Ray), answering the supervisor's status() on request."""

    def __init__(self, ray_dir: str) -> None:
        ports = list(Path(ray_dir).glob("session_*/gcs_server_port_*"))
        assert ports, f"no Ray session in {ray_dir}"
        address = f"127.0.0.1:{ports[0].read_text().strip()}"
        # The daemon's ray.init() made a new local cluster: with token auth (and a token
        # in ~/.ray) unless RAY_AUTH_MODE, which this process shares, says otherwise.
        env = {**os.environ}
        env.setdefault("RAY_AUTH_MODE", "token")
        self.proc = subprocess.Popen([sys.executable, "-c", STATUS_QUERY, address], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self) -> dict:
        self.proc.stdin.write("status\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the Ray driver querying the supervisor died"
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER)
    yield d
    assert d.stop() == 0


def executors_until(status: SupervisorStatus, want: int, timeout_s: float = 10.0) -> int:
    """The supervisor's executor count once it is ``want`` (the release is not awaited by
    EndSession), or whatever it is after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (count := status()["executors"]) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return count


def test_ending_a_session_releases_its_skill_executor(daemon):
    status = SupervisorStatus(daemon.ready["rayDir"])
    try:
        before = status()["executors"]
        with daemon.client() as client:
            sessions = [client.create_session(title=f"leak {i}").id for i in range(2)]
            for sid in sessions:
                # A given plan, its skill only: a skill runs, and no model is loaded.
                events = list(client.turn(sid, plan_json=json.dumps(DICE_PLAN),
                                          execute_only=True))
                finished = [e.tool_finished.ok for e in events
                            if e.WhichOneof("event") == "tool_finished"]
                assert finished == [True], kinds(events)
            assert status()["executors"] == before + 2
            client.end_session(sessions[0])
            assert executors_until(status, before + 1) == before + 1
            client.end_session(sessions[1])
            assert executors_until(status, before) == before
            # Ending a session that never ran a skill (so has no executor) is fine too.
            idle = client.create_session(title="idle").id
            assert client.end_session(idle).status == "ended"
            assert executors_until(status, before) == before
    finally:
        status.close()
