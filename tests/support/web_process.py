"""Helpers for the web gateway attack tests: the real ``narratoria web`` process, raw
HTTP over a real loopback socket (headers a browser would never let a page set), and
the process's memory from ``/proc``."""

from __future__ import annotations

import http.client
import json
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60
TOKEN_IN_URL = re.compile(r"\?token=([A-Za-z0-9_\-]+)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)

    def header(self, name: str) -> str:
        return self.headers.get(name) or ""


@dataclass
class WebProcess:
    """``narratoria web`` against a daemon's socket, on a free loopback port. The token
    is the one it printed (None from a gateway that prints none)."""

    socket_path: Path
    extra: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    token: str | None = None
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "narratoria.clients.cli", "web", "--listen",
             f"127.0.0.1:{self.port}", "--socket", str(self.socket_path), *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        for stream, lines in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=lambda s=stream, out=lines: out.extend(iter(s.readline, "")),
                             daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any("serving http" in line for line in self.stderr):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("narratoria web did not start:\n" + "".join(self.stderr))
            time.sleep(0.05)
        found = TOKEN_IN_URL.search("".join(self.stderr))
        self.token = found.group(1) if found else None
        while True:  # listening (an older gateway prints before it binds)
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the gateway never listened"
                time.sleep(0.05)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.host}"

    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def page_headers(self) -> dict[str, str]:
        """What the gateway's own page sends with a JSON POST (plus the token)."""
        return {**self.bearer(), "Content-Type": "application/json", "Origin": self.origin}

    def request(self, method: str, path: str, body: bytes | dict | None = None,
                headers: dict[str, str] | None = None, timeout: float = 60) -> Reply:
        """One request; headers given replace the defaults (Host: this gateway)."""
        sent = {"Host": self.host, **(headers or {})}
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=sent)
            res = conn.getresponse()
            return Reply(res.status, res.headers, res.read())
        finally:
            conn.close()

    def sessions_titled(self, title: str) -> list[dict]:
        reply = self.request("GET", "/api/sessions?all=1", headers=self.bearer())
        assert reply.status == 200, reply.body[:300]
        return [s for s in reply.json()["sessions"] if s.get("title") == title]

    def rss_kib(self) -> int:
        return _status_kib(self.proc.pid, "VmRSS")

    def reset_peak(self) -> bool:
        """Reset VmHWM (``5`` > clear_refs, Linux 4.0+); False where that is refused."""
        try:
            Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")
            return True
        except OSError:
            return False

    def peak_kib(self) -> int:
        return _status_kib(self.proc.pid, "VmHWM")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


@dataclass
class Upload:
    """What a streamed upload saw: the answer's status (None if none came), how many body
    bytes had left this side when the answer began, and the answer's bytes."""

    status: int | None
    sent: int
    answer: bytes
    seconds: float


def stream_upload(port: int, head: str, total: int, chunked: bool = True,
                  chunk: int = 64 * 1024, timeout: float = 120) -> Upload:
    """Send ``head`` (request line and headers, no blank line) then up to ``total`` body
    bytes, chunk by chunk, reading the answer the moment one arrives; stops sending
    then (a server that answered early does not want the rest)."""
    payload = b"x" * chunk
    frame = (f"{chunk:x}\r\n".encode() + payload + b"\r\n") if chunked else payload
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(head.encode() + b"\r\n\r\n")
    sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    sent, answer, pending, ended = 0, b"", b"", False
    started = time.monotonic()
    deadline = started + timeout
    try:
        while time.monotonic() < deadline:
            writing = bool(pending) or not ended
            selector.modify(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0))
            events = selector.select(timeout=1.0)
            if not events and not writing and not answer:
                continue
            for _, mask in events:
                if mask & selectors.EVENT_READ:
                    try:
                        data = sock.recv(65536)
                    except (ConnectionResetError, BlockingIOError):
                        data = b""
                    if not data:
                        return Upload(_status(answer), sent, answer, time.monotonic() - started)
                    answer += data
                    if b"\r\n\r\n" in answer:
                        return Upload(_status(answer), sent, _drain(sock, answer),
                                      time.monotonic() - started)
                elif mask & selectors.EVENT_WRITE:
                    if not pending:
                        if sent >= total:
                            pending, ended = (b"0\r\n\r\n" if chunked else b""), True
                            if not pending:
                                continue
                        else:
                            pending = frame
                            sent += chunk
                    try:
                        pending = pending[sock.send(pending):]
                    except (BrokenPipeError, ConnectionResetError):
                        sock.setblocking(True)
                        sock.settimeout(5)
                        return Upload(_status(_drain(sock, answer)), sent, answer,
                                      time.monotonic() - started)
        return Upload(_status(answer), sent, answer, time.monotonic() - started)
    finally:
        selector.close()
        sock.close()


def _drain(sock: socket.socket, answer: bytes) -> bytes:
    sock.setblocking(True)
    sock.settimeout(2)
    try:
        while len(answer) < 1 << 20:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    except OSError:
        pass
    return answer


def _status(answer: bytes) -> int | None:
    match = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return int(match.group(1)) if match else None


def body_of(answer: bytes) -> bytes:
    return answer.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answer else b""
