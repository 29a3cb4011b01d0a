"""The daemon bounds the gRPC calls in flight.

Before: ``grpc.aio.server`` had no bound, so any number of calls could each hold a request
of up to 8 MiB at once (measured: ~9 MB of the daemon's memory per 4.7 MB portrait being
saved; 600 concurrent saves took the serve process to 5.2 GB). Now at most
``DEFAULT_MAX_CONCURRENT_RPCS`` (512; ``serve --max-concurrent-rpcs``) are in flight;
the next caller gets RESOURCE_EXHAUSTED at once, and is served again once calls end.

Calls are held open for real over the daemon's socket: a turn's stream is in flight
while its plan runs (here a skill that never finishes, behind ``--skill-limit 1``). A call
whose request message has not fully arrived is not (gRPC hands the daemon a call only with
its message): the bound does not reach what the transport buffers before that.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import grpc

from conftest import FIXTURE_SKILLS
from narratoria.actors import daemon as daemon_module
from narratoria.proto import narratoria_pb2 as pb
from narratoria.proto import narratoria_pb2_grpc as rpc
from support.daemon import Daemon, daemon_token

DEFAULT_MAX_CONCURRENT_RPCS = 512  # actors/daemon.py's, checked below
# A turn whose plan runs a skill that never finishes: with --skill-limit 1 the first runs
# it and the others wait for the slot, each a stream in flight until it is cancelled.
HANG_PLAN = json.dumps({"requestId": "slow", "narrative": "Time passes.", "tools": [
    {"toolId": "h", "toolPath": "hostile/hang", "timeoutMs": 120_000, "required": False,
     "retryPolicy": {"maxRetries": 0}, "input": {}}]})


def hanging_daemon(tmp_path: Path, *extra: str) -> Daemon:
    skills = tmp_path / "skills"
    shutil.copytree(FIXTURE_SKILLS / "hostile", skills / "hostile")
    return Daemon("--planner", "pattern", "--embedding-backend", "hash", "--skills-dir",
                  str(skills), "--skill-limit", "1", *extra)


async def status_code(target: str, token: str) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(target) as channel:
        try:
            await rpc.NarratoriaStub(channel).Status(
                pb.StatusRequest(), metadata=(("x-narratoria-token", token),), timeout=30)
            return grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            assert exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or (
                "Concurrent RPC limit exceeded" in (exc.details() or "")), exc.details()
            return exc.code()


async def until_status(target: str, token: str, wanted: grpc.StatusCode,
                       within_s: float = 60.0) -> bool:
    deadline = time.monotonic() + within_s
    while await status_code(target, token) != wanted:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def streaming_turns(target: str, token: str, count: int, channels: int = 8) -> dict:
    """``count`` turns streaming at once (each has had its first event), then a Status
    call, then the turns cancelled: what each step got."""
    md = (("x-narratoria-token", token),)
    opened = [grpc.aio.insecure_channel(target) for _ in range(channels)]
    stubs = [rpc.NarratoriaStub(c) for c in opened]
    try:
        sessions = []
        step = max(1, min(64, count // 8))  # a few at a time: they too take slots
        for batch in range(0, count, step):
            sessions += await asyncio.gather(*(
                stubs[i % channels].CreateSession(pb.CreateSessionRequest(title=f"s{i}"),
                                                  metadata=md, timeout=60)
                for i in range(batch, min(count, batch + step))))
        calls = [stubs[i % channels].Turn(pb.TurnRequest(session_id=s.id, plan_json=HANG_PLAN,
                                                         execute_only=True),
                                          metadata=md, timeout=300)
                 for i, s in enumerate(sessions)]
        firsts = await asyncio.gather(*(call.read() for call in calls), return_exceptions=True)
        streaming = sum(1 for f in firsts if isinstance(f, pb.TurnEvent)
                        and f.WhichOneof("event") == "started")
        past = await status_code(target, token)
        for call in calls:
            call.cancel()
        return {"streaming": streaming, "past": past,
                "refusedTurns": sum(1 for f in firsts if isinstance(f, grpc.aio.AioRpcError)
                                    and f.code() == grpc.StatusCode.RESOURCE_EXHAUSTED),
                "again": await until_status(target, token, grpc.StatusCode.OK)}
    finally:
        for channel in opened:
            await channel.close()


def test_a_daemon_served_without_the_flag_has_the_default_bound():
    """Plain ``narratoria serve`` bounds calls at 512. (That the bound reaches the gRPC
    server and refuses the next caller is shown end to end below with a bound of 3: 512
    real streams cost 80 s of the suite for no more proof.)"""
    from narratoria.clients.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert daemon_module.config_from_args(args).max_concurrent_rpcs == DEFAULT_MAX_CONCURRENT_RPCS
    assert daemon_module.DEFAULT_MAX_CONCURRENT_RPCS == DEFAULT_MAX_CONCURRENT_RPCS


def test_serve_sets_the_bound(tmp_path):
    """``--max-concurrent-rpcs 3``: three streaming turns take every slot; a fourth
    caller, a fourth turn included, is refused."""
    d = hanging_daemon(tmp_path, "--max-concurrent-rpcs", "3")
    try:
        got = asyncio.run(streaming_turns(f"unix://{d.socket}", daemon_token(d), 4))
    finally:
        assert d.stop() == 0
    assert got["streaming"] == 3 and got["refusedTurns"] == 1, got
    assert got["past"] == grpc.StatusCode.RESOURCE_EXHAUSTED, got
    assert got["again"], got
