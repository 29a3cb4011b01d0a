"""`narratoria play --session ID` on a session that has ended: play
says so in one line, naming the branch command and a new session, before any prompt
opens; unattended it exits FAILED at once, at a terminal it offers a branch, a new
session or quitting. The daemon's FAILED_PRECONDITION for each line never shows."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

from narratoria.clients.output import ExitCode
from narratoria.clients.play import ended_choice
from support.daemon import DICE_PLAN, NARRATORIA, cli


def ended_session(daemon, title: str, scenes: int) -> str:
    """A session with ``scenes`` scenes played (fixed plans, no model), then ended."""
    with daemon.client() as client:
        sid = client.create_session(title=title).id
        for _ in range(scenes):
            list(client.turn(sid, plan_json=json.dumps(DICE_PLAN), execute_only=True))
        assert client.end_session(sid).status == "ended"
    return sid


def test_playing_an_ended_session_says_so_and_names_branch(pattern_daemon):
    sid = ended_session(pattern_daemon, "the drowned bell", scenes=1)
    branch = f"narratoria session branch --session {sid}"
    for extra, stdin in (([], ""), ([], "I look around\n1\n"), (["--auto"], ""),
                         (["--json"], "hello\n")):
        started = time.monotonic()
        out = cli(pattern_daemon, "play", "--session", sid, *extra, stdin=stdin)
        said = out.stdout + out.stderr
        assert out.returncode == ExitCode.FAILED, (extra, said)
        assert time.monotonic() - started < 60, extra  # at once, not a turn per line
        ended = [line for line in out.stderr.splitlines() if "has ended" in line]
        assert len(ended) == 1, said
        assert sid in ended[0] and "the drowned bell" in ended[0]
        assert branch in ended[0] and "narratoria play`" in ended[0]
        assert "FAILED_PRECONDITION" not in said and "> " not in out.stdout
        assert "Traceback" not in said

    # What it names works: the branch is a new session that plays on.
    branched = cli(pattern_daemon, "session", "branch", "--session", sid)
    assert branched.returncode == 0, branched.stderr


def test_an_ended_session_with_no_scene_offers_only_a_new_one(pattern_daemon):
    sid = ended_session(pattern_daemon, "", scenes=0)
    out = cli(pattern_daemon, "play", "--session", sid)
    assert out.returncode == ExitCode.FAILED
    assert f"session {sid} has ended" in out.stderr and "`narratoria play`" in out.stderr
    assert "branch" not in out.stderr  # nothing to branch from
    assert "FAILED_PRECONDITION" not in out.stdout + out.stderr


def test_at_a_terminal_an_ended_session_can_be_branched_and_played_on(pattern_daemon):
    sid = ended_session(pattern_daemon, "tty", scenes=1)
    primary, secondary = os.openpty()
    env = {**os.environ, "NARRATORIA_ADDRESS": f"unix://{pattern_daemon.socket}"}
    proc = subprocess.Popen([str(NARRATORIA), "play", "--session", sid], stdin=secondary,
                            stdout=secondary, stderr=secondary, env=env, close_fds=True)
    os.close(secondary)
    seen = b""

    def read_until(marker: bytes, timeout_s: float = 120) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout_s
        while marker not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([primary], [], [], 1)
            if ready:
                try:
                    seen += os.read(primary, 4096)
                except OSError:  # the terminal closed: the process is gone
                    break
        assert marker in seen, seen.decode(errors="replace")

    try:
        read_until(b"[b]ranch from its last scene, [n]ew session, [q]uit? ")
        os.write(primary, b"x\n")  # not an answer: asked again
        os.write(primary, b"b\n")
        read_until(b"> ")
        os.write(primary, b"/quit\n")
        read_until(b"turn(s) played")
        assert proc.wait(timeout=60) == ExitCode.SUCCESS
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
    text = seen.decode(errors="replace")
    assert f"session {sid} “tty” has ended" in text and f"branched from {sid}" in text
    assert "FAILED_PRECONDITION" not in text
    with pattern_daemon.client() as client:
        branches = [s for s in client.list_sessions() if s.parent_session_id == sid]
    assert len(branches) == 1 and branches[0].status == "active"


def test_the_ended_prompt_reads_a_word_or_its_first_letters():
    assert ended_choice("b", True) == ended_choice(" Branch\n", True) == "branch"
    assert ended_choice("n", True) == ended_choice("new", False) == "new"
    assert ended_choice("q", False) == "quit"
    assert ended_choice("b", False) is None  # nothing to branch from
    assert ended_choice("", True) is None and ended_choice("x", True) is None
