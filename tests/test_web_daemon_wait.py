"""`narratoria web` started before the daemon (a script, a systemd pair) waits for it,
and outlives a daemon restart: the real ``narratoria web`` process and real daemons
(``narratoria serve``) on the same socket and data dir, over real HTTP."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from support.daemon import HASH_EMBEDDER, Daemon  # noqa: E402
from support.web_process import Reply, WebProcess  # noqa: E402

PATTERN = ("--planner", "pattern", *HASH_EMBEDDER)
RECONNECT_S = 15  # the link retries every 0.5-2 s and probes every 2 s


def _until(web: WebProcess, path: str, status: int, within_s: float) -> Reply:
    deadline = time.monotonic() + within_s
    while True:
        reply = web.request("GET", path, headers=web.bearer(), timeout=30)
        if reply.status == status or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


def _assert_waiting(web: WebProcess) -> None:
    reply = _until(web, "/api/status", 503, RECONNECT_S)
    assert reply.status == 503, (reply.status, reply.body[:300])
    doc = reply.json()
    assert doc["waiting"] is True and doc["error"]["code"] == "UNAVAILABLE", doc
    assert "waiting for the daemon" in doc["error"]["message"], doc
    assert reply.header("Retry-After")
    sessions = web.request("GET", "/api/sessions", headers=web.bearer())
    assert sessions.status == 503 and sessions.json()["waiting"] is True
    health = web.request("GET", "/api/health", headers=web.bearer())
    assert health.status == 200 and health.json()["daemon"] == "waiting", health.body


def test_the_gateway_waits_for_the_daemon_and_reconnects_after_a_restart():
    folder = Path(tempfile.mkdtemp(prefix="nw-", dir="/tmp"))
    started = time.monotonic()
    web = WebProcess(folder / "d.sock")
    daemon: Daemon | None = None
    try:
        time.sleep(max(0.0, 8 - (time.monotonic() - started)))
        assert web.proc.poll() is None, "".join(web.stderr)
        err = "".join(web.stderr)
        assert err.count("waiting for the daemon at") == 1, err  # said once, not per retry
        assert str(folder / "d.sock") in err
        _assert_waiting(web)
        # The page is served meanwhile (it shows the waiting banner itself).
        page = web.request("GET", "/", headers=web.bearer())
        assert page.status == 200 and b"daemon-wait" in page.body

        # No token file exists until the daemon starts: the gateway reads it then.
        assert not (folder / "d.sock").exists() and not (folder / "daemon.token").exists()
        daemon = Daemon(*PATTERN, folder=folder)
        reply = _until(web, "/api/status", 200, RECONNECT_S)
        assert reply.status == 200 and reply.json()["version"], reply.body[:300]
        assert "connected to the daemon at" in "".join(web.stderr)
        made = web.request("POST", "/api/sessions", {"campaign": "long_ebb", "title": "before-restart"},
                           headers=web.page_headers())
        assert made.status == 201, made.body[:300]
        health = web.request("GET", "/api/health", headers=web.bearer()).json()
        assert health["daemon"] == "connected" and health["waiting"] is False

        # The daemon goes away: the API says it waits, the gateway stays.
        assert daemon.stop() == 0
        _assert_waiting(web)
        assert web.proc.poll() is None
        # A restarted daemon may have a new token: the gateway must read it again.
        for token in (folder / "daemon.token", folder / "data" / "daemon.token"):
            token.unlink(missing_ok=True)
        daemon = Daemon(*PATTERN, folder=folder)
        reply = _until(web, "/api/sessions?all=1", 200, RECONNECT_S)
        assert reply.status == 200, reply.body[:300]
        assert "before-restart" in [s.get("title") for s in reply.json()["sessions"]]
        err = "".join(web.stderr)
        assert "lost the daemon at" in err and err.count("connected to the daemon at") == 2, err
        assert web.proc.poll() is None
    finally:
        web.stop()
        if daemon is not None:
            daemon.stop()


def test_wait_gives_up_when_asked_and_refuses_a_bad_value(tmp_path):
    socket = Path(tempfile.mkdtemp(prefix="nw-", dir="/tmp")) / "d.sock"
    base = [sys.executable, "-m", "narratoria.clients.cli", "web", "--listen", "127.0.0.1:0",
            "--socket", str(socket)]
    started = time.monotonic()
    done = subprocess.run([*base, "--wait", "1.5"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "waiting for the daemon" in done.stderr and "giving up" in done.stderr, done.stderr
    assert time.monotonic() - started < 30
    done = subprocess.run([*base, "--wait", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--wait" in done.stderr, done.stderr
