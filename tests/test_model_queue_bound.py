"""The model's queue has a bound (``serve --model-queue``): with the one slot busy and
the queue full, a new turn is refused at once with RESOURCE_EXHAUSTED, saying why, and
is played once the queue has room again."""

from __future__ import annotations

import threading
import time

import pytest

from narratoria.clients.client import ClientError

from support.daemon import HASH_EMBEDDER, Daemon, done_of, play

TURN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--model-slots", "1",
               "--model-queue", "1")
    yield d
    assert d.stop() == 0


def test_a_turn_past_the_queues_bound_is_refused_then_played(daemon):
    with daemon.client() as client:
        sessions = [client.create_session(title=f"bound {i}").id for i in range(3)]
    results: dict[str, object] = {}

    def one(sid: str) -> None:
        with daemon.client() as client:
            results[sid] = play(client, sid, text="I walk along the quay at dusk")

    threads = [threading.Thread(target=one, args=(sid,)) for sid in sessions[:2]]
    for t in threads:
        t.start()
    refused = None
    deadline = time.monotonic() + TURN_TIMEOUT_S
    with daemon.client() as client:
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            if client.status().model_queue_depth >= 1:
                try:
                    play(client, sessions[2], text="I knock on the chapel door")
                except ClientError as exc:
                    refused = exc
                    break
            time.sleep(0.05)
    for t in threads:
        t.join(TURN_TIMEOUT_S)
    assert refused is not None, "the queue was never seen full"
    assert refused.code == "RESOURCE_EXHAUSTED" and "queue is full" in refused.message
    for sid in sessions[:2]:
        assert done_of(results[sid]).narration.strip()
    with daemon.client() as client:  # room again: the refused session plays
        assert done_of(play(client, sessions[2], text="I knock on the chapel door")).narration
