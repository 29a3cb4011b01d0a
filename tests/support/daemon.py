"""A real daemon for the tests that need one: started on a temporary unix socket with the
real Ray, model, embedder and DuckDB file (``narratoria serve``), and the helpers that
drive it through the gRPC API, the client library and the CLI. Tests that start one are
marked ``daemon`` (``tests/conftest.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from narratoria.clients.client import NarratoriaClient
from narratoria.proto import narratoria_pb2 as pb

from conftest import REPO

DAEMON_SKILLS = REPO / "tests" / "fixtures" / "daemon-skills"
START_TIMEOUT_S = 120
# For a daemon whose tests do not depend on what embeddings mean (sandboxes, caps,
# containment, files): the shipped hash backend spares the suite MiniLM's load (~5 s of
# CPU on 2 cores) in each of them. Turns, memory and grounding keep the real embedder.
HASH_EMBEDDER = ("--embedding-backend", "hash")


class Daemon:
    def __init__(self, *extra: str, folder: Path | None = None) -> None:
        # Under /tmp, short: a unix socket path must fit 107 bytes.
        self.dir = folder or Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
        self.socket = self.dir / "d.sock"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "narratoria.clients.cli", "serve", "--socket", str(self.socket),
             "--data-dir", str(self.dir / "data"), "--json", *extra],
            stdout=subprocess.PIPE, stderr=open(self.dir / "stderr.log", "ab"), text=True,
            start_new_session=True)
        self.ready = self._wait_ready()

    def _wait_ready(self) -> dict:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not line or not line[0].strip():
            self.stop()
            raise RuntimeError(f"daemon did not start:\n{(self.dir / 'stderr.log').read_text()[-3000:]}")
        return json.loads(line[0])

    def client(self) -> NarratoriaClient:
        return NarratoriaClient(f"unix://{self.socket}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def play(client: NarratoriaClient, session_id: str, text: str | None = None,
         choice: int | None = None) -> list[pb.TurnEvent]:
    return list(client.turn(session_id, text=text, choice=choice))


def daemon_token(daemon: Daemon) -> str:
    """What a raw stub sends as x-narratoria-token (the client library finds it itself)."""
    from narratoria.runtime.host.endpoint import client_token, unix_endpoint

    return client_token(unix_endpoint(daemon.socket)) or ""


def kinds(events: list[pb.TurnEvent]) -> list[str]:
    return [e.WhichOneof("event") for e in events]


def done_of(events: list[pb.TurnEvent]) -> pb.TurnDone:
    assert kinds(events)[-1] == "done", kinds(events)
    return events[-1].done


NARRATORIA = Path(sys.executable).parent / "narratoria"



def cli(daemon: Daemon, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "NARRATORIA_ADDRESS": f"unix://{daemon.socket}"}
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True, input=stdin,
                          timeout=300, env=env)


DICE_PLAN = {"requestId": "dev-plan-1", "narrative": "The dice decide.",
             "tools": [{"toolId": "roll", "toolPath": "dice-roller/roll-dice",
                        "input": {"formula": "2d6", "seed": 7, "randomSource": "pseudo"}}]}
