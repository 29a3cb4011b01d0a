"""Flooding a real daemon with malformed gRPC requests, and measuring what it holds.

``tree_rss(pid)``: the resident memory of a process and all its descendants (the
daemon's driver, Ray's GCS and raylet, every actor's worker, the skill zygote), summed
from /proc. ``flood(target, token, count)``: ``count`` bad requests of every kind an
attacker with a client identity can send -- huge strings in every field, unknown ids,
JSON nested thousands deep, junk portraits, Store calls without a skill token -- each
answered with some status code (any code: what is measured is what stays in memory).

Run it by hand against a daemon (``python tests/support/soak.py SOCKET PID
[COUNT]``) to see memory per phase.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc

from narratoria.bench.loadtest import proc_table
from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc

MIB = 1 << 20
CALL_TIMEOUT_S = 60
# The largest request the daemon accepts at all (grpc.max_receive_message_length).
SERVER_MAX_MESSAGE = 8 * MIB


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (by parent pid)."""
    children: dict[int, list[int]] = {}
    for child, (ppid, _alive) in proc_table().items():
        children.setdefault(ppid, []).append(child)
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def rss_of(pid: int) -> int:
    """Resident bytes of one process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss(pid: int) -> int:
    return sum(rss_of(p) for p in descendants(pid))


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_report(pid: int) -> dict[str, tuple[int, int]]:
    """(private, shared) resident MiB by process (its command's last words), for a report
    of who grew: shared pages are mostly Ray's object store, mapped into several."""
    out: dict[str, tuple[int, int]] = {}
    for p in descendants(pid):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name = f"{p} {cmd.strip()[-60:]}"
        out[name] = (_status_kib(p, "RssAnon") // 1024, _status_kib(p, "RssShmem") // 1024)
    return out


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _junk_png(size: int, rng: random.Random) -> bytes:
    # A PNG signature and then noise: the decoder must read some of it before refusing.
    return b"\x89PNG\r\n\x1a\n" + rng.randbytes(size - 8)


def bad_requests(rng: random.Random, session_id: str) -> Iterator[tuple[str, str, object]]:
    """(service, method, request) forever: a rotation of malformed requests, big and small."""
    huge = lambda: "x" * rng.choice([MIB, 2 * MIB, 4 * MIB])  # noqa: E731
    unknown = lambda: f"sess_{rng.getrandbits(64):016x}"  # noqa: E731
    # Just under a field's cap: what passes the door and reaches the handlers and actors.
    long_id = lambda: f"sess_{rng.getrandbits(64):016x}".ljust(200, "z")  # noqa: E731
    not_a_plan = lambda: json.dumps({"requestId": "r", "tools": [  # noqa: E731
        {"toolId": "t", "toolPath": "/nonexistent/" + "p" * 900} for _ in range(200)]})
    makers: list[Callable[[], tuple[str, str, object]]] = [
        lambda: ("N", "GetState", pb.SessionRef(session_id=long_id())),
        lambda: ("N", "EndSession", pb.SessionRef(session_id=long_id())),
        lambda: ("N", "Branch", pb.BranchRequest(session_id=long_id(), at_scene=3)),
        lambda: ("N", "GetSessionView", pb.SessionRef(session_id=long_id())),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=long_id(), text="t" * 3999)),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=session_id, plan_json=not_a_plan())),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=session_id, plan_json=_deep(30_000))),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(
            state_json=json.dumps(["x" * 1000] * 900))),  # JSON, but no object
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(state_json=_deep(150_000))),
        lambda: ("N", "IngestCampaign", pb.IngestCampaignRequest(
            campaign="/nonexistent/" + "/".join(["c" * 200] * 19))),
        lambda: ("N", "GetAsset", pb.AssetRequest(session_id=session_id,
                                                  path="campaign/" + "a/" * 2000)),
        lambda: ("N", "SaveCharacter", pb.SaveCharacterRequest(
            description="a wandering bard with a lute", portrait=_junk_png(5 * MIB - 64, rng))),
        lambda: ("N", "GetCharacterPortrait", pb.CharacterRef(id="char_" + "0" * 195)),
        lambda: ("S", "Put", pb.PutRequest(data_type="memory_event",
                                           record_json="[" * (MIB - 1))),
        lambda: ("N", "GetState", pb.SessionRef(session_id=huge())),
        lambda: ("N", "GetState", pb.SessionRef(session_id=unknown())),
        lambda: ("N", "ResumeSession", pb.SessionRef(session_id=huge())),
        lambda: ("N", "EndSession", pb.SessionRef(session_id=huge())),
        lambda: ("N", "Branch", pb.BranchRequest(session_id=huge(), at_scene=1)),
        lambda: ("N", "GetSessionView", pb.SessionRef(session_id=unknown())),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(title=huge())),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(state_json=_deep(5000))),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(state_json="[" * 500_000)),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(campaign=huge())),
        lambda: ("N", "CreateSession", pb.CreateSessionRequest(campaign="demo",
                                                               character_id=huge())),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=huge(), text="hi")),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=unknown(), text=huge())),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=session_id, plan_json=_deep(20_000))),
        lambda: ("N", "Turn", pb.TurnRequest(session_id=session_id, plan_json=huge())),
        lambda: ("N", "CancelTurn", pb.SessionRef(session_id=huge())),
        lambda: ("N", "ListSkills", pb.ListSkillsRequest(session_id=huge())),
        lambda: ("N", "GetAsset", pb.AssetRequest(session_id=session_id, path=huge())),
        lambda: ("N", "GetAsset", pb.AssetRequest(session_id=huge(), path="campaign/x.png")),
        lambda: ("N", "GetSkillConfig", pb.SkillConfigRequest(skill=huge())),
        lambda: ("N", "SetSkillConfig", pb.SetSkillConfigRequest(
            skill="dice-roller", set={f"k{i}": "v" * 10_000 for i in range(200)})),
        lambda: ("N", "SaveCharacter", pb.SaveCharacterRequest(
            description="a wandering bard with a lute", portrait=_junk_png(5 * MIB - 64, rng))),
        lambda: ("N", "SaveCharacter", pb.SaveCharacterRequest(description=huge(),
                                                               name=huge())),
        lambda: ("N", "SaveCharacter", pb.SaveCharacterRequest(id=huge(), description="x" * 20)),
        lambda: ("N", "GetCharacterPortrait", pb.CharacterRef(id=huge())),
        lambda: ("N", "DeleteCharacter", pb.CharacterRef(id=huge())),
        lambda: ("N", "IngestCampaign", pb.IngestCampaignRequest(campaign=huge())),
        lambda: ("S", "Put", pb.PutRequest(data_type="memory_event", record_json=huge())),
        lambda: ("S", "ExactMatch", pb.ExactMatchRequest(data_type=huge(),
                                                         filters_json=_deep(5000))),
        lambda: ("M", "Narrate", pb.NarrateRequest(player_input=huge(), scene=huge())),
    ]
    while True:
        yield rng.choice(makers)()


def flood(target: str, token: str | None, count: int, session_id: str, seed: int = 19,
          on_progress: Callable[[int], None] | None = None,
          seconds: Counter[str] | None = None) -> Counter[str]:
    """Send ``count`` bad requests one after another; the status codes met, by name
    (and into ``seconds``, the time spent per method)."""
    rng = random.Random(seed)
    metadata = [("x-narratoria-token", token)] if token else []
    codes: Counter[str] = Counter()
    with grpc.insecure_channel(target, options=[
            ("grpc.max_send_message_length", 64 * MIB),
            ("grpc.max_receive_message_length", 64 * MIB)]) as channel:
        stubs = {"N": rpc.NarratoriaStub(channel), "S": rpc.StoreStub(channel),
                 "M": rpc.ModelStub(channel)}
        requests = bad_requests(rng, session_id)
        for i in range(count):
            service, method, request = next(requests)
            started = time.monotonic()
            try:
                answer = getattr(stubs[service], method)(request, metadata=metadata,
                                                         timeout=CALL_TIMEOUT_S)
                if hasattr(answer, "__next__"):
                    for _ in answer:
                        pass
                codes["OK"] += 1
            except grpc.RpcError as err:
                codes[err.code().name] += 1
            if seconds is not None:
                seconds[method] += time.monotonic() - started
            if on_progress is not None:
                on_progress(i + 1)
    return codes


def main(argv: list[str]) -> int:
    from narratoria.clients.client import NarratoriaClient
    from narratoria.runtime.host.endpoint import client_token, unix_endpoint

    socket, pid = argv[0], int(argv[1])
    count = int(argv[2]) if len(argv) > 2 else 5000
    token = client_token(unix_endpoint(socket))
    with NarratoriaClient(f"unix://{socket}") as client:
        session_id = client.create_session(title="soak").id
    start = time.monotonic()
    print(f"start: {tree_rss(pid) / MIB:.0f} MiB", flush=True)
    for name, (own, shared) in sorted(tree_report(pid).items(), key=lambda kv: -sum(kv[1]))[:8]:
        print(f"{own:6d} + {shared:5d} shared MiB  {name}")

    def progress(done: int) -> None:
        if done % 250 == 0:
            top = sorted(tree_report(pid).items(), key=lambda kv: -sum(kv[1]))[:5]
            print(f"{done} requests, {time.monotonic() - start:.0f} s: "
                  f"{tree_rss(pid) / MIB:.0f} MiB; "
                  + ", ".join(f"{n.split()[1][-18:]} {a}+{b}" for n, (a, b) in top), flush=True)

    seconds: Counter[str] = Counter()
    codes = flood(f"unix://{socket}", token, count, session_id, on_progress=progress,
                  seconds=seconds)
    print(dict(codes))
    print({m: round(t, 1) for m, t in seconds.most_common()})
    for name, (own, shared) in sorted(tree_report(pid).items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"{own:6d} + {shared:5d} shared MiB  {name}")
    time.sleep(5)
    print(f"5 s later: {tree_rss(pid) / MIB:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
