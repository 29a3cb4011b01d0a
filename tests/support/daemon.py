"""A real daemon for the tests that need one: started on a temporary unix socket with the
real Ray, model, embedder and DuckDB file (``narratoria serve``, started as the benchmarks
start theirs: ``narratoria.bench.daemon``), and the helpers that drive it through the gRPC
API, the client library and the CLI. Tests that start one are marked ``daemon``
(``tests/conftest.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from narratoria.bench.daemon import ServeDaemon
from narratoria.clients.client import NarratoriaClient
from narratoria.proto import narratoria_pb2 as pb

from conftest import REPO

DAEMON_SKILLS = REPO / "tests" / "fixtures" / "daemon-skills"
START_TIMEOUT_S = 120
# For a daemon whose tests do not depend on what embeddings mean (sandboxes, caps,
# containment, files): the shipped hash backend spares the suite MiniLM's load (~5 s of
# CPU on 2 cores) in each of them. Turns, memory and grounding keep the real embedder.
HASH_EMBEDDER = ("--embedding-backend", "hash")


class Daemon(ServeDaemon):
    """A daemon in ``folder`` (default: a new one under /tmp), its stderr in stderr.log."""

    log_name = "stderr.log"
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, *extra: str, folder: Path | None = None) -> None:
        # Under /tmp, short: a unix socket path must fit 107 bytes.
        super().__init__(folder or Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp")), *extra)

    def client(self) -> NarratoriaClient:
        return NarratoriaClient(self.address)


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
