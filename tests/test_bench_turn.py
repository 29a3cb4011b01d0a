"""`bench turn`'s clients (bench/turn.py) through a real daemon: the one-client baseline
plays as many sessions as the run it is compared with, one after another."""

from __future__ import annotations

from narratoria.bench.turn import bench_clients


def test_one_client_plays_every_session_of_the_run_in_turn(pattern_daemon):
    with pattern_daemon.client() as client:
        before = {s.id for s in client.list_sessions()}
    run = bench_clients(pattern_daemon.address, 1, 1, progress=False, sessions=2)
    assert run["failures"] == [] and run["turns"] == 2
    with pattern_daemon.client() as client:
        made = [s for s in client.list_sessions() if s.id not in before]
    assert sorted(s.title for s in made) == ["bench 0", "bench 1"]


def test_concurrent_clients_play_a_session_each(pattern_daemon):
    run = bench_clients(pattern_daemon.address, 2, 1, progress=False)
    assert run["failures"] == [] and (run["clients"], run["turns"]) == (2, 2)
