"""A pre-imported Python that forks skill processes: a skill starts in milliseconds.

A Python skill script started by exec pays for the interpreter and its imports on
every invocation: ~25 ms for the interpreter, ~70 ms more for grpc and the Store
stubs, which is most of SC-008's 100 ms for a reputation query. The zygote is one
long-lived interpreter that has imported those modules once; each invocation is a
``fork()`` of it that runs the script with ``runpy``, as ``python3 SCRIPT`` would.

What an exec'd skill gets, a forked one gets too:

- its own process group (``setpgid`` in the child *and* in the zygote, so the group
  exists before the supervisor learns the pid and can kill it);
- exactly the environment the supervisor built (the zygote itself starts with a
  scrubbed one, so no secret is in the memory a child inherits), its working
  directory, and the pipes the supervisor made as fds 0-2; every other fd closed;
- default signal dispositions, ``sys.argv == [script]``, the script's folder first
  on ``sys.path``, exit status from ``sys.exit`` or 1 with a traceback on stderr.

Only scripts whose shebang names Python go through the zygote; others, and every
script when the zygote is down, are exec'd as before (``runtime/process.py``).

Wire format on the zygote's Unix socket (one connection per invocation): the
client sends a 4-byte big-endian length and a JSON request ``{"path", "env",
"cwd", "rlimits", "sandbox"}`` with the three child fds attached (SCM_RIGHTS) and,
when ``sandbox`` is true, a fourth: the Landlock ruleset the child restricts itself
with before anything of the script runs (``runtime/sandbox.py``); the zygote answers
``{"pid": N}`` and, when the child ends, ``{"exit": code}`` (negative: the
signal), one JSON line each. The zygote exits, killing its children's groups, when
its stdin (a pipe from the supervisor) closes: it never outlives its owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from . import sandbox
from .limits import apply_resource_limits

# What the built-in skills import at start (clients/skillkit.py and the Store stubs).
PRELOAD = ("json", "grpc", "narratoria.proto.narratoria_pb2",
           "narratoria.proto.narratoria_pb2_grpc", "narratoria.clients.skillkit")
READY = b"zygote ready\n"
_LENGTH = struct.Struct(">I")
MAX_REQUEST_BYTES = 4 * 1024 * 1024
READ_CHUNK = 64 * 1024


def runs_with_python(path: Path | str) -> bool:
    """Whether exec'ing the script would run this interpreter: an executable file whose
    shebang is ``/usr/bin/env python3`` (the supervisor puts this interpreter first on
    PATH) or names this interpreter itself."""
    try:
        if not os.access(path, os.X_OK):
            return False
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    words = [w.decode(errors="replace") for w in first[2:].split()]
    if len(words) == 2 and Path(words[0]).name == "env":
        return words[1] in ("python", "python3")
    return len(words) == 1 and os.path.realpath(words[0]) == os.path.realpath(sys.executable)


# ------------------------------------------------------------------- the zygote server


def serve(socket_path: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """The zygote's main loop: single-threaded, so ``fork()`` is safe."""
    import importlib
    import runpy  # noqa: F401 - imported before any fork, used by the children

    for module in preload:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # a missing optional module costs speed, not function
            print(f"zygote: cannot preload {module}: {exc}", file=sys.stderr)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "owner")
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "owner":
                    if not os.read(sys.stdin.fileno(), READ_CHUNK):
                        return  # the supervisor is gone
                elif key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, READ_CHUNK)
                    _reap(children)
                else:
                    conn, _ = listener.accept()
                    _start(conn, children)
            _reap(children)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def _start(conn: socket.socket, children: dict[int, socket.socket]) -> None:
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        request, fds = _receive(conn)
        pid = os.fork()
        if pid == 0:
            _child(request, fds)  # never returns
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        children[pid] = conn
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"error": str(exc)}).encode() + b"\n")
        conn.close()
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, READ_CHUNK, 4)
    if len(fds) not in (3, 4):
        for fd in fds:
            os.close(fd)
        raise ValueError(f"expected 3 or 4 fds, got {len(fds)}")
    fds = list(fds)
    try:
        return _read_request(conn, data, fds)
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def _read_request(conn: socket.socket, data: bytes, fds: list[int]) -> tuple[dict, list[int]]:
    while len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
        if len(data) >= _LENGTH.size and _LENGTH.unpack_from(data)[0] > MAX_REQUEST_BYTES:
            raise ValueError("request too large")
        more = conn.recv(READ_CHUNK)
        if not more:
            raise ValueError("truncated request")
        data += more
    (length,) = _LENGTH.unpack_from(data)
    request = json.loads(data[_LENGTH.size:_LENGTH.size + length])
    if not isinstance(request, dict) or not isinstance(request.get("path"), str):
        raise ValueError("request must be an object with a path")
    if bool(request.get("sandbox")) != (len(fds) == 4):
        raise ValueError("a sandboxed request comes with its ruleset fd, and only then")
    return request, fds


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode()
                             + b"\n")
            conn.close()


def _child(request: dict, fds: list[int]) -> None:
    """Become the script: ``python3 SCRIPT`` without the exec."""
    code = 1
    try:
        os.setpgid(0, 0)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        if len(fds) == 4:
            # Before the script or anything it names is touched; fails: it never runs.
            sandbox.restrict(fds[3])
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        env: Mapping[str, str] = request.get("env") or {}
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        if request.get("cwd"):
            os.chdir(request["cwd"])
        apply_resource_limits(request.get("rlimits") or [])
        path = os.path.abspath(request["path"])
        sys.argv = [path]
        sys.path[0] = os.path.dirname(path)
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        import runpy
        runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - the script's own failure, reported as python does
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


# ------------------------------------------------------------------ the client side


@dataclass
class ForkedProcess:
    """A zygote child, shaped like the ``asyncio.subprocess.Process`` the runner uses."""

    pid: int
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    exited: asyncio.Event
    returncode: int | None = None
    _transports: list[asyncio.BaseTransport] = field(default_factory=list)
    # The control connection's writer (a StreamWriter closes its transport when it is
    # collected) and the task reading the exit status from it.
    control: asyncio.StreamWriter | None = None
    watcher: asyncio.Task[None] | None = None

    def close_pipes(self) -> None:
        for transport in self._transports:
            transport.close()


class Zygote:
    """The supervisor's handle on one zygote process.

    The process is started with ``subprocess`` rather than asyncio so that one
    zygote serves any event loop (the supervisor's, a test's); ``spawn`` restarts it
    when it has died.
    """

    def __init__(self, env: Mapping[str, str], preload: tuple[str, ...] = PRELOAD) -> None:
        self._env = dict(env)
        self._preload = preload
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None
        self._lock = threading.Lock()

    @property
    def socket_path(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "zygote.sock")

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.alive and self._proc is not None else None

    def start(self) -> None:
        """Start the zygote (blocking: ~0.3 s of imports) unless it is running."""
        with self._lock:
            if self.alive:
                return
            self._dir = self._dir or tempfile.mkdtemp(prefix="narratoria-zygote-")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
            self._proc = subprocess.Popen(
                [sys.executable, "-c",
                 "import sys; from narratoria.runtime.zygote import serve; "
                 "serve(sys.argv[1], tuple(sys.argv[2].split(',')))",
                 self.socket_path, ",".join(self._preload)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self._env, cwd="/")
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline()
            if line != READY:
                self._stop()
                raise OSError(f"the zygote did not start: {line!r}")

    async def spawn(self, path: Path | str, env: Mapping[str, str] | None,
                    cwd: Path | str | None, rlimits: Sequence[tuple[int, int]] = (),
                    ruleset: int | None = None) -> ForkedProcess:
        """Fork a child that runs ``path``; raises OSError when the zygote cannot.

        ``ruleset``: a Landlock ruleset fd (the caller's, not closed here) the child
        restricts itself with."""
        if not self.alive:
            await asyncio.get_running_loop().run_in_executor(None, self.start)
        loop = asyncio.get_running_loop()
        child_ends: list[int] = []
        ours: list[int] = []
        try:
            for direction in ("in", "out", "err"):
                r, w = os.pipe()
                child_ends.append(r if direction == "in" else w)
                ours.append(w if direction == "in" else r)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, self.socket_path)
                body = json.dumps({"path": str(path), "env": dict(env or {}),
                                   "cwd": None if cwd is None else str(cwd),
                                   "rlimits": [list(p) for p in rlimits],
                                   "sandbox": ruleset is not None}).encode()
                sock.setblocking(True)  # a local write of a few KB: immediate
                socket.send_fds(sock, [_LENGTH.pack(len(body)) + body],
                                child_ends + ([ruleset] if ruleset is not None else []))
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        return await _attach(loop, sock, ours)

    def close(self) -> None:
        """Stop the zygote; it kills its children's process groups as it exits."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._dir is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)
            with contextlib.suppress(OSError):
                os.rmdir(self._dir)
            self._dir = None


async def _attach(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                  fds: list[int]) -> ForkedProcess:
    """Wrap our pipe ends as streams and wait for the child's pid."""
    stdin_w, stdout_r, stderr_r = fds
    unowned = set(fds)  # fds no transport has taken over yet: ours to close on failure
    transports: list[asyncio.BaseTransport] = []
    try:
        reader, control = await asyncio.open_unix_connection(sock=sock)
        transports.append(control.transport)
        first = json.loads(await reader.readline() or b"{}")
        if "pid" not in first:
            raise OSError(first.get("error") or "the zygote closed the connection")
        out, err = asyncio.StreamReader(limit=READ_CHUNK), asyncio.StreamReader(limit=READ_CHUNK)
        for stream, fd in ((out, stdout_r), (err, stderr_r)):
            unowned.discard(fd)
            transport, _ = await loop.connect_read_pipe(
                lambda s=stream: asyncio.StreamReaderProtocol(s), os.fdopen(fd, "rb", 0))
            transports.append(transport)
        unowned.discard(stdin_w)
        w_transport, w_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(stdin_w, "wb", 0))
        transports.append(w_transport)
    except BaseException:
        sock.close()
        for t in transports:
            t.close()
        for fd in unowned:
            os.close(fd)
        raise
    stdin = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
    proc = ForkedProcess(int(first["pid"]), stdin, out, err, asyncio.Event(),
                         _transports=transports, control=control)
    proc.watcher = loop.create_task(_watch_exit(reader, proc))
    return proc


async def _watch_exit(reader: asyncio.StreamReader, proc: ForkedProcess) -> None:
    try:
        line = await reader.readline()
        if line:
            proc.returncode = int(json.loads(line).get("exit", -signal.SIGKILL))
    except (OSError, ValueError):
        pass
    finally:
        # A zygote that died takes the exit status with it: the runner kills the group.
        if proc.returncode is None:
            proc.returncode = -signal.SIGKILL
        proc.exited.set()
