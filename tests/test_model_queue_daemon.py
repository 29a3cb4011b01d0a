"""A queue you can see, end to end: a real daemon whose model decodes one request at a
time (``serve --model-slots 1``), two sessions playing a turn at once. The turn the
model takes second waits, and hears where it stands (``queued`` events, before its
narration); ``narratoria status`` shows the slot in use and the waiting request."""

from __future__ import annotations

import json
import re
import threading
import time

from narratoria.clients.render import format_status
from narratoria.proto import narratoria_pb2 as pb

import pytest

from support.daemon import HASH_EMBEDDER, Daemon, cli, done_of, kinds, play

TURN_TIMEOUT_S = 300
STATUS_POLL_S = 0.2


@pytest.fixture(scope="module")
def daemon():
    # The pattern planner plans without the model: both turns reach their narration
    # within moments of each other, and the one model slot makes the second wait.
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--model-slots", "1")
    yield d
    assert d.stop() == 0


def _play_both(daemon: Daemon, sessions: list[str]
               ) -> tuple[dict[str, list[pb.TurnEvent]], list[pb.StatusResponse]]:
    """Both sessions' turns at once; the daemon's status, polled while they run."""
    results: dict[str, list[pb.TurnEvent]] = {}
    errors: list[BaseException] = []

    def one(sid: str, text: str) -> None:
        try:
            with daemon.client() as client:
                results[sid] = play(client, sid, text=text)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(sid, text)) for sid, text in
               zip(sessions, ("I look around the harbour", "I listen at the forest's edge"))]
    for t in threads:
        t.start()
    statuses: list[pb.StatusResponse] = []
    deadline = time.monotonic() + TURN_TIMEOUT_S
    with daemon.client() as client:
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            statuses.append(client.status())
            time.sleep(STATUS_POLL_S)
    for t in threads:
        t.join(5)
    assert not errors, errors
    return results, statuses


def test_the_turn_that_waits_for_the_model_hears_its_place_and_status_shows_it(daemon):
    with daemon.client() as client:
        sessions = [client.create_session(title=f"queue {i}").id for i in range(2)]
    results, statuses = _play_both(daemon, sessions)
    for sid in sessions:
        assert done_of(results[sid]).narration.strip()

    waited = {sid: [e for e in results[sid] if e.WhichOneof("event") == "queued"]
              for sid in sessions}
    assert any(waited.values()), {sid: kinds(events) for sid, events in results.items()}
    for sid, queued in waited.items():
        if not queued:
            continue
        seen = kinds(results[sid])
        assert all(e.queued.position >= 1 and e.queued.wait_s >= 0 for e in queued)
        assert all(e.queued.call in ("plan", "narration", "choices") for e in queued)
        # Told while the turn waits (before its choices; its narration may already have
        # retold the player's words, which need no model), not once a poll (3 a second).
        assert seen.index("queued") < seen.index("choices") < seen.index("done"), seen
        waited_s = max(e.queued.wait_s for e in queued)
        assert len(queued) <= 2 + waited_s, [(e.queued.position, e.queued.wait_s) for e in queued]

    assert all(s.model_slots_max == 1 and 0 <= s.model_slots_used <= 1 for s in statuses)
    queued_statuses = [s for s in statuses if s.model_waiting]
    assert queued_statuses, "status never showed a waiting model request"
    shown = queued_statuses[0]
    assert shown.model_slots_used == 1 and shown.model_queue_depth >= 1
    wait = shown.model_waiting[0]
    # The device's owner sees whose request waits.
    assert wait.position == 1 and wait.session_id in sessions and wait.wait_s >= 0
    assert wait.kind in ("plan", "narration", "choices")
    text = format_status(shown)
    assert "model slots 1/1 · queue" in text and f"#1 {wait.session_id[:8]}" in text

    # The CLI reports the slots too, its --json whole (idle now: nothing waits).
    proc = cli(daemon, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["model_slots_max"] == 1 and doc["model_waiting"] == []
    proc = cli(daemon, "status")
    assert proc.returncode == 0 and re.search(r"model slots [01]/1 · queue \d", proc.stdout), (
        proc.stdout)
