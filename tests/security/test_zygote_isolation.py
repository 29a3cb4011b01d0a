"""The zygote serves only its supervisor.

Before: the zygote listened on a path socket in a temp folder, named on its own command
line; a skill found it, connected and asked for a child with ``"sandbox": false`` and no
limits, which read the database, listed the data dir and read the daemon token. Now the
zygote's only channel is a socketpair its supervisor made (no path, nothing on its command
line, not dumpable), and it refuses any request below the policy it was started with.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import struct
import time
from pathlib import Path

import pytest

from conftest import TESTS, process_alive
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.containment import Containment, ContainmentError
from narratoria.runtime.skillrun.limits import ResourceLimits
from narratoria.runtime.skillrun.process import script_env
from narratoria.runtime.skillrun.zygote import Zygote
from support.daemon import HASH_EMBEDDER, Daemon

ROOT = TESTS / "security" / "fixtures" / "containment"


# -- a hostile skill hunts for the zygote through a real daemon ---------------------------


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--planner", "pattern", *HASH_EMBEDDER, "--skills-dir", str(ROOT))
    yield d
    assert d.stop() == 0


def run_tool(daemon: Daemon, tool_path: str, payload: dict) -> tuple[bool, list[dict]]:
    plan = {"requestId": "hunt", "tools": [{"toolId": "t", "toolPath": tool_path,
                                             "input": payload, "timeoutMs": 60000}]}
    with daemon.client() as client:
        sid = client.create_session(title="zygote hunt").id
        events = list(client.turn(sid, plan_json=json.dumps(plan), execute_only=True))
    # The first: a failed tool is followed by the replan's.
    finished = next(e.tool_finished for e in events if e.WhichOneof("event") == "tool_finished")
    docs = [json.loads(e.tool_event.event_json) for e in events
            if e.WhichOneof("event") == "tool_event"]
    return finished.ok, docs


def test_a_skill_cannot_find_or_reach_the_zygote(daemon):
    data_dir = daemon.dir / "data"
    assert (data_dir / "daemon.token").is_file()  # what the old hole handed out
    ok, docs = run_tool(daemon, "zygote-hunter/hunt", {"dataDir": str(data_dir)})
    [hunt] = [d["fields"] for d in docs if d["type"] == "log" and d["message"] == "hunt"]
    assert ok, hunt
    assert not [p for p in hunt["socketPaths"] if "zygote" in p and p.endswith(".sock")], hunt
    assert hunt["connected"] == [] and hunt["answers"] == [], hunt
    assert hunt["grabbed"] == [], hunt
    assert hunt["escaped"] is None, hunt
    # The zygote serves on: the next skill still starts (and its orphan dies with it).
    ok, docs = run_tool(daemon, "escapee/orphan-maker", {"count": 1})
    [orphan] = json.loads(docs[0]["message"])["orphans"]
    assert ok and not process_alive(orphan)


def test_the_zygote_names_no_socket_and_listens_on_none():
    zygote = Zygote(script_env(None, "zygote"))
    zygote.start()
    try:
        pid = zygote.pid
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert not [a for a in cmdline[1:] if a.startswith(b"/") or b".sock" in a], cmdline
        # Every socket it holds is unnamed: none is in /proc/net/unix with a path.
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        assert inodes  # its channel
        named = {}
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 8:
                named[parts[6]] = parts[7]
        assert not [named[i] for i in inodes if i in named], named
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "nr-zygote"
    finally:
        zygote.close()


# -- requests over the real channel that would lower the policy are refused ----------------


def raw_request(zygote: Zygote, request: dict, extra_fds: list[int] = ()) -> dict:
    """Send one request as the supervisor's client does (over the channel only the
    supervisor has) and return the zygote's answer: an error, or the pid and (the
    connection held open until then: closing it ends the script) the exit."""
    sock = zygote.connect()
    sock.setblocking(True)
    r, w = os.pipe()
    try:
        body = json.dumps(request).encode()
        socket.send_fds(sock, [struct.pack(">I", len(body)) + body], [r, w, w, *extra_fds])
        sock.settimeout(10)
        data = b""
        while True:
            more = sock.recv(4096)
            if not more:
                break
            data += more
        answer: dict = {}
        for line in data.splitlines():
            answer.update(json.loads(line))
        return answer
    finally:
        os.close(r)
        os.close(w)
        sock.close()


@pytest.fixture
def strict_zygote(tmp_path):
    if not sandbox.available():
        pytest.skip("this kernel has no Landlock")
    ceiling = ResourceLimits().pairs()
    # Contained by a subreaper: this test is about the sandbox and the limits alone.
    z = Zygote(script_env(None, "zygote"), sandbox=True, rlimit_ceiling=ceiling,
               containment=Containment("subreaper"))
    z.start()
    yield z
    z.close()


def test_requests_that_turn_the_sandbox_or_the_limits_off_are_refused(strict_zygote, tmp_path):
    (tmp_path / "out").mkdir()
    marker = tmp_path / "out" / "ran"
    script = tmp_path / "payload"
    script.write_text(f"#!/usr/bin/env python3\nopen({str(marker)!r}, 'w').write('x')\n")
    script.chmod(0o755)
    limits = [list(p) for p in ResourceLimits().pairs()]
    base = {"path": str(script), "env": {}, "cwd": str(tmp_path)}
    policy = sandbox.SandboxPolicy(denied=(str(tmp_path / "vault" / "secret"),))
    (tmp_path / "vault" / "secret").mkdir(parents=True)

    refusals = {
        "no sandbox": raw_request(strict_zygote, {**base, "rlimits": limits, "sandbox": False}),
    }
    with sandbox.lease(policy, [str(tmp_path)]) as ruleset:
        sandboxed = {**base, "sandbox": True}
        refusals["no rlimits"] = raw_request(strict_zygote, {**sandboxed, "rlimits": []},
                                             [ruleset])
        refusals["memory above"] = raw_request(strict_zygote, {**sandboxed, "rlimits": [
            [r, v * 4 if r == resource.RLIMIT_AS else v] for r, v in limits]}, [ruleset])
        refusals["no process group"] = raw_request(
            strict_zygote, {**sandboxed, "rlimits": limits, "processGroup": False}, [ruleset])
        time.sleep(0.3)
        assert not marker.exists()  # none of them ran
        allowed = raw_request(strict_zygote, {**sandboxed, "rlimits": limits}, [ruleset])
    assert "pid" in allowed and allowed["exit"] == 0, allowed
    assert marker.exists()  # the same script, asked for within the policy, runs

    assert "sandboxed" in refusals["no sandbox"]["error"], refusals
    assert "sets no RLIMIT_" in refusals["no rlimits"]["error"], refusals
    assert "RLIMIT_AS" in refusals["memory above"]["error"], refusals
    assert "above this zygote's ceiling" in refusals["memory above"]["error"]
    assert "unknown request field(s): processGroup" in refusals["no process group"]["error"]
    assert all("pid" not in r for r in refusals.values())


def test_a_request_without_its_cgroup_is_refused(tmp_path):
    try:
        containment = Containment("cgroup")
    except ContainmentError as exc:
        pytest.skip(f"no writable cgroup: {exc}")
    zygote = Zygote(script_env(None, "zygote"), containment=containment)
    zygote.start()
    try:
        script = tmp_path / "payload"
        script.write_text("#!/usr/bin/env python3\n")
        script.chmod(0o755)
        answer = raw_request(zygote, {"path": str(script), "env": {}, "rlimits": [],
                                      "sandbox": False})
        assert "cgroup of its own" in answer.get("error", ""), answer
        # A folder that is not one of this zygote's cgroups is refused too.
        fd = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            answer = raw_request(zygote, {"path": str(script), "env": {}, "rlimits": [],
                                          "sandbox": False, "cells": 1}, [fd])
        finally:
            os.close(fd)
        assert "not beneath this zygote's cgroups" in answer.get("error", ""), answer
    finally:
        zygote.close()
        containment.close()
