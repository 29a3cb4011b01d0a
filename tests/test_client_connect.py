"""The client's connection to a daemon that is slow to answer: a busy machine (another
daemon's model, a test suite beside it) can take well over 100 ms between accepting a
connection and sending HTTP/2's SETTINGS. The client waits for that, up to its call's
deadline; it does not report a live daemon as "not answering"."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from narratoria.clients.client import ClientError, NarratoriaClient

DELAY_S = 0.6  # several times what gRPC allowed a connection attempt before the fix


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nrc-", dir="/tmp"))  # a socket path fits 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def slow_relay(listen_at: Path, target: Path | None, stop: threading.Event) -> threading.Thread:
    """A unix socket at ``listen_at`` that accepts, waits DELAY_S, then relays each
    connection to ``target`` byte for byte (None: holds it open, never answering)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(listen_at))
    server.listen(16)
    server.settimeout(0.2)

    def serve() -> None:
        held = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)
            time.sleep(DELAY_S)
            if target is None:
                continue
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(str(target))
            held.append(upstream)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()
        for s in (*held, server):
            s.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_daemon_slow_to_open_the_connection_is_waited_for(pattern_daemon, short_dir):
    relay = short_dir / "slow.sock"
    # The relay's address has no token beside it: the daemon's own is sent.
    token = (pattern_daemon.dir / "data" / "daemon.token").read_text().strip()
    stop = threading.Event()
    thread = slow_relay(relay, pattern_daemon.socket, stop)
    try:
        with NarratoriaClient(f"unix://{relay}", token=token, timeout_s=30) as client:
            started = time.monotonic()
            status = client.status()
            assert time.monotonic() - started >= DELAY_S
            assert status.actors  # the real daemon answered, through the delay
    finally:
        stop.set()
        thread.join(5)


def test_a_listener_that_never_answers_fails_at_the_calls_deadline(short_dir):
    relay = short_dir / "mute.sock"
    stop = threading.Event()
    thread = slow_relay(relay, None, stop)
    try:
        with NarratoriaClient(f"unix://{relay}", token="t", timeout_s=2.0) as client:
            started = time.monotonic()
            with pytest.raises(ClientError) as info:
                client.status()
            waited = time.monotonic() - started
    finally:
        stop.set()
        thread.join(5)
    # The whole deadline, then the deadline's error: not "not answering" after 100 ms.
    assert waited >= 1.5 and info.value.code == "DEADLINE_EXCEEDED", (waited, str(info.value))
