"""storyteller/narrate through a real daemon: the daemon's model by default, and a hosted
provider that fails or hangs falls back to it within 10 s, logging why."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from conftest import REPO
from support.daemon import HASH_EMBEDDER, Daemon, done_of, kinds

NARRATE = REPO / "skills" / "storyteller" / "scripts" / "narrate"


def plan(**inputs: object) -> str:
    return json.dumps({"requestId": "story", "tools": [
        {"toolId": "tell", "toolPath": "storyteller/narrate", "input": inputs}]})


def tool_events(events, kind: str) -> list[dict]:
    return [json.loads(e.tool_event.event_json) for e in events
            if e.WhichOneof("event") == "tool_event" and e.tool_event.type == kind]


@pytest.fixture(scope="module")
def story_daemon():
    folder = Path(tempfile.mkdtemp(prefix="ns-", dir="/tmp"))
    config = folder / "config"
    saved = {k: os.environ.get(k) for k in ("XDG_CONFIG_HOME", "NARRATORIA_CONFIG_DIR")}
    os.environ["XDG_CONFIG_HOME"] = str(config)  # the daemon and its skills read settings here
    os.environ.pop("NARRATORIA_CONFIG_DIR", None)
    try:
        d = Daemon("--planner", "pattern", *HASH_EMBEDDER, folder=folder)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    d.settings = config / "narratoria" / "skills" / "storyteller" / "config.json"
    yield d
    assert d.stop() == 0


def configure(daemon: Daemon, **settings: object) -> None:
    daemon.settings.parent.mkdir(parents=True, exist_ok=True)
    daemon.settings.write_text(json.dumps(settings))


def play(daemon: Daemon, plan_json: str) -> list:
    with daemon.client() as client:
        sid = client.create_session(title="story").id
        return list(client.turn(sid, text="I open the cellar door", plan_json=plan_json))


def test_the_local_provider_narrates_with_the_daemons_model(story_daemon):
    configure(story_daemon, provider="local", style="terse")
    events = play(story_daemon, plan(playerInput="I open the cellar door",
                                     outcomes=["You rolled 9 (2d6): partial success."]))
    [told] = [u for u in tool_events(events, "ui_event") if u["event"] == "narration"]
    payload = told["payload"]
    assert payload["provider"] == "local" and payload["style"] == "terse" and not payload["fallback"]
    assert payload["text"].strip() and payload["model"].endswith(".gguf")
    done = done_of(events)
    assert done.narration == payload["text"]  # the skill's prose is the turn's narration
    phases = [e.phase.phase for e in events if e.WhichOneof("event") == "phase"]
    assert "NARRATING" not in phases  # the turn was not narrated twice
    assert len(done.narration) > 0 and "choices" in kinds(events)


def test_a_failing_hosted_provider_falls_back_to_local_and_says_why(story_daemon):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    configure(story_daemon, provider="ollama", endpoint=f"http://127.0.0.1:{closed}")
    events = play(story_daemon, plan(playerInput="I light a torch"))
    [told] = [u for u in tool_events(events, "ui_event") if u["event"] == "narration"]
    assert told["payload"]["provider"] == "local" and told["payload"]["fallback"] is True
    [warning] = [log for log in tool_events(events, "log") if log["level"] == "warn"]
    assert "ollama" in warning["message"] and "local model instead" in warning["message"]
    assert done_of(events).narration == told["payload"]["text"]


def test_a_hosted_provider_that_hangs_is_abandoned_within_its_timeout(story_daemon):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    try:
        configure(story_daemon, provider="openai", apiKey="sk-test",
                  endpoint=f"http://127.0.0.1:{server.getsockname()[1]}/v1", timeoutS=1)
        events = play(story_daemon, plan(playerInput="I wait for the ferry"))
    finally:
        server.close()
        for conn in held:
            conn.close()
    [warning] = [log for log in tool_events(events, "log") if log["level"] == "warn"]
    assert "openai" in warning["message"] and warning["fields"]["afterS"] < 10
    assert [u["payload"]["fallback"] for u in tool_events(events, "ui_event")] == [True]


def test_bad_input_is_an_error_event_never_a_traceback(story_daemon):
    configure(story_daemon, provider="local")
    events = play(story_daemon, plan(playerInput="I sing", style="operatic"))
    finished = [e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished"]
    assert finished and not any(f.ok for f in finished)  # every attempt of the fixed plan
    assert "style" in finished[0].error
    # Run directly, without a daemon: the same clear errors.
    for stdin, message in ((b"not json", "not valid JSON"), (b'{"input": {}}', "playerInput"),
                           (b'{"input": {"playerInput": "I wait"}}', "needs the daemon")):
        proc = subprocess.run([str(NARRATE)], input=stdin, capture_output=True, timeout=30,
                              env={"PATH": os.environ["PATH"]})
        docs = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        assert [d["type"] for d in docs] == ["error", "done"] and docs[1]["ok"] is False
        assert message in docs[0]["errorMessage"] and b"Traceback" not in proc.stderr
