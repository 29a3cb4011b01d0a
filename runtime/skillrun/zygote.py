"""A pre-imported Python that forks skill processes: a skill starts in milliseconds.

A Python skill script started by exec pays for the interpreter and its imports on
every invocation: ~25 ms for the interpreter, ~70 ms more for grpc and the Store
stubs, which is most of the 100 ms a reputation query may take. The zygote is one
long-lived interpreter that has imported those modules once; each invocation is a
``fork()`` of it that runs the script with ``runpy``, as ``python3 SCRIPT`` would. A
script that does not run with this Python is ``execve``'d by the same child once it has
confined itself, so every invocation has the same parentage and the same confinement.

Only its supervisor can talk to it. The zygote has no socket anyone could find: its
stdin is one end of a socketpair the supervisor made (``SOCK_SEQPACKET``), nothing names
it on the zygote's command line, and the zygote is not dumpable (no process of the same
user but root may ptrace it or take its fds). The supervisor sends each invocation its
own connection over that channel (SCM_RIGHTS); a skill would need an fd it can never get.

Per invocation, on its connection: the client sends a 4-byte big-endian length and a
JSON request ``{"path", "env", "cwd", "rlimits", "sandbox", "cells"}`` (nothing else)
with the fds attached: the child's stdin, stdout and stderr; when ``sandbox`` is true the
Landlock ruleset the child restricts itself with (``runtime/skillrun/sandbox.py``); then ``cells``
cgroup folders the child joins (``runtime/skillrun/containment.py``). The zygote checks it against
the policy it was started with (:class:`ZygotePolicy`): no request may turn the sandbox
off, leave out or raise a resource limit past its ceiling, or leave out its cgroup; the
process group is not the request's to choose. It answers ``{"error": why}`` or, from the
invocation's shim, ``{"pid": N, "shim": M}`` at once and then ``{"exit": code}``
(negative: the signal) once the script has exited *and* every process it left has been
killed, or ``{"error": why}`` when it never started (an exec that failed, a confinement
the kernel refused: a spawn error, as ``subprocess`` raises one).

Per invocation the zygote forks a shim, the parent of the script, a child subreaper:
orphans the script leaves (``fork(); setsid(); fork()``) are reparented to it, and once
the script has exited it kills them all (``containment.kill_children``; with a cgroup,
``cgroup.kill`` first). The zygote is a subreaper too and kills anything but a shim that
falls to it (a shim the skill killed). A shim kills its script when its connection
closes (the supervisor is gone) or its zygote dies. The script child gets, as an exec'd
skill would:

- its own process group (``setpgid`` in the child *and* in the shim, so the group exists
  before the supervisor learns the pid and can kill it);
- exactly the environment the supervisor built (the zygote itself starts with a
  scrubbed one, so no secret is in the memory a child inherits), its working
  directory, and the pipes the supervisor made as fds 0-2; every other fd closed;
- default signal dispositions, ``sys.argv == [script]``, the script's folder first
  on ``sys.path``, exit status from ``sys.exit`` or 1 with a traceback on stderr.

The zygote exits when its channel closes (the supervisor is gone), and its shims kill
their scripts when it does: it never outlives its owner. Without a zygote (a local run,
or the zygote down) ``runtime/skillrun/process.py`` exec's the script, or, where containment needs
a subreaper, runs one invocation through :func:`spawn_once`: a one-shot shim process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NoReturn, Sequence

from narratoria.runtime.skillrun import containment as contain
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.containment import Containment, default_containment
from narratoria.runtime.skillrun.limits import apply_resource_limits

# What the built-in skills import at start (skillkit.py and the Store stubs).
PRELOAD = ("json", "grpc", "narratoria.proto.narratoria_pb2",
           "narratoria.proto.narratoria_pb2_grpc", "narratoria.skillkit")
READY = b"zygote ready\n"
SERVE_COMMAND = "from narratoria.runtime.skillrun.zygote import serve; serve()"
ONCE_COMMAND = "from narratoria.runtime.skillrun.zygote import serve_once; serve_once()"
ZYGOTE_NAME, SHIM_NAME = "nr-zygote", "nr-shim"  # their comm, for ps and leak checks
_LENGTH = struct.Struct(">I")
MAX_REQUEST_BYTES = 4 * 1024 * 1024
READ_CHUNK = 64 * 1024
MAX_ERROR_CHARS = 300
REQUEST_FIELDS = frozenset({"path", "env", "cwd", "rlimits", "sandbox", "cells"})
_RLIMIT_NAMES = {getattr(resource, n): n for n in dir(resource) if n.startswith("RLIMIT_")}


class SpawnError(OSError):
    """The zygote (or the script's own child) refused or failed to start the script:
    starting it another way would not do better."""


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


@dataclass(frozen=True)
class ZygotePolicy:
    """What every child of one zygote gets, whatever a request says.

    ``sandbox``: every request carries a Landlock ruleset. ``rlimits``: (resource,
    ceiling) pairs every request must set, each at most its ceiling (a request may add
    others and may only tighten). ``containment``: ``cgroup`` (every request names its
    cells, beneath ``cgroup_bases``; shims are subreapers), ``subreaper``, or ``off``
    (no subreaper: the process group alone)."""

    sandbox: bool = False
    rlimits: tuple[tuple[int, int], ...] = ()
    containment: str = "subreaper"
    cgroup_bases: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"sandbox": self.sandbox, "rlimits": [list(p) for p in self.rlimits],
                "containment": self.containment, "cgroupBases": list(self.cgroup_bases)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "ZygotePolicy":
        return cls(bool(doc.get("sandbox")),
                   tuple((int(r), int(v)) for r, v in doc.get("rlimits") or ()),
                   str(doc.get("containment") or "subreaper"),
                   tuple(str(b) for b in doc.get("cgroupBases") or ()))


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "..."


def _line(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc).encode() + b"\n"


# ------------------------------------------------------------------- the zygote server


def serve() -> None:
    """The zygote's main loop (its channel is fd 0): single-threaded, so ``fork()`` is safe."""
    import importlib
    import runpy  # noqa: F401 - imported before any fork, used by the children

    control = socket.socket(fileno=0)
    setup = json.loads(control.recv(READ_CHUNK) or b"{}")
    policy = ZygotePolicy.from_json(setup.get("policy") or {})
    contain.set_name(ZYGOTE_NAME)
    with contextlib.suppress(OSError):
        contain.set_dumpable(False)
    if policy.containment != "off":
        contain.become_subreaper()
    for module in setup.get("preload") or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:  # a missing optional module costs speed, not function
            print(f"zygote: cannot preload {module}: {exc}", file=sys.stderr)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector
    shims: set[int] = set()
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "owner")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "owner":
                    try:
                        data, fds, _, _ = socket.recv_fds(control, 16, 4)
                    except OSError:
                        return
                    if not data and not fds:
                        return  # the supervisor is gone
                    for fd in fds:
                        _start(socket.socket(fileno=fd), policy, shims)
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, READ_CHUNK)
            _reap(shims, policy)
    finally:
        # Each shim kills its script when it gets SIGTERM (or sees this process die).
        for pid in shims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)


def _start(conn: socket.socket, policy: ZygotePolicy, shims: set[int]) -> None:
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        request, fds = _receive(conn)
        _check(request, fds, policy)
        pid = os.fork()
        if pid == 0:
            _shim(request, conn, fds, policy, zygote=os.getppid())  # never returns
        shims.add(pid)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(_line({"error": _short(str(exc))}))
    finally:
        conn.close()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, READ_CHUNK, 16)
    fds = list(fds)
    try:
        if len(fds) < 3:
            raise ValueError(f"a request comes with at least 3 fds (stdin, stdout, stderr), "
                             f"got {len(fds)}")
        return _read_request(conn, data), fds
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def _read_request(conn: socket.socket, data: bytes) -> dict:
    while len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
        if len(data) >= _LENGTH.size and _LENGTH.unpack_from(data)[0] > MAX_REQUEST_BYTES:
            raise ValueError(f"request too large (over {MAX_REQUEST_BYTES} bytes)")
        more = conn.recv(READ_CHUNK)
        if not more:
            raise ValueError("truncated request")
        data += more
    (length,) = _LENGTH.unpack_from(data)
    try:
        request = json.loads(data[_LENGTH.size:_LENGTH.size + length])
    except (ValueError, RecursionError):
        raise ValueError("the request is not JSON") from None
    if not isinstance(request, dict) or not isinstance(request.get("path"), str):
        raise ValueError("request must be an object with a path")
    return request


def _check(request: dict, fds: list[int], policy: ZygotePolicy) -> None:
    """Refuse a request the policy does not allow, or one that is malformed."""
    unknown = sorted(str(k)[:40] for k in set(request) - REQUEST_FIELDS)
    if unknown:
        raise ValueError(f"unknown request field(s): {', '.join(unknown[:5])}")
    sandboxed, cells = request.get("sandbox", False), request.get("cells", 0)
    if not isinstance(sandboxed, bool) or not isinstance(cells, int) or not 0 <= cells <= 4:
        raise ValueError("'sandbox' must be true or false and 'cells' a count of 0 to 4")
    if len(fds) != 3 + sandboxed + cells:
        raise ValueError(f"expected {3 + sandboxed + cells} fds (stdio, "
                         f"{int(sandboxed)} ruleset, {cells} cgroup(s)), got {len(fds)}")
    if not isinstance(request.get("env") or {}, dict) or not isinstance(
            request.get("cwd") or "", str):
        raise ValueError("'env' must be an object and 'cwd' a string")
    if policy.sandbox and not sandboxed:
        raise ValueError("refused: this zygote runs every script sandboxed (Landlock) and "
                         "the request has no ruleset")
    limits: dict[int, int] = {}
    for pair in request.get("rlimits") or ():
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
                or pair[0] not in _RLIMIT_NAMES or pair[1] < 0):
            raise ValueError("'rlimits' must be [resource, value] pairs of known resources "
                             "and values of at least 0")
        limits[pair[0]] = min(pair[1], limits.get(pair[0], pair[1]))
    for res, ceiling in policy.rlimits:
        name = _RLIMIT_NAMES.get(res, f"resource {res}")
        if res not in limits:
            raise ValueError(f"refused: the request sets no {name}; this zygote requires "
                             f"one of at most {ceiling}")
        if limits[res] > ceiling:
            raise ValueError(f"refused: {name} {limits[res]} is above this zygote's "
                             f"ceiling of {ceiling}")
    if policy.containment == "cgroup" and not cells:
        raise ValueError("refused: this zygote runs every script in a cgroup of its own "
                         "and the request names none")
    for fd in fds[3 + sandboxed:]:
        where = os.readlink(f"/proc/self/fd/{fd}")
        if not any(where.startswith(base.rstrip("/") + "/") for base in policy.cgroup_bases):
            raise ValueError("refused: a cgroup of the request is not beneath this "
                             "zygote's cgroups")


def _reap(shims: set[int], policy: ZygotePolicy) -> None:
    """Reap what ended; anything that is not a shim (fallen to us when its shim died)
    is killed: it belongs to an invocation whose shim can no longer end it."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        shims.discard(pid)
    if policy.containment != "off":
        for pid in contain.children():
            if pid not in shims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _shim(request: dict, conn: socket.socket, fds: list[int], policy: ZygotePolicy,
          zygote: int | None) -> NoReturn:
    """The parent of one invocation's script: reports its pid and, once it has exited
    and whatever it left is dead, its exit status. ``zygote``: the pid this shim dies
    with (None: a one-shot shim, whose connection is its only tie)."""
    try:
        signal.set_wakeup_fd(-1)
        cells = fds[3 + bool(request.get("sandbox")):]
        _close_all_but({conn.fileno(), 2, *fds})
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1):
            if null != target:
                os.dup2(null, target)
        if null > 1:
            os.close(null)
        with contextlib.suppress(OSError):  # a one-shot shim leads a session already
            os.setpgid(0, 0)  # signals to the zygote's group never reach it
        contain.set_name(SHIM_NAME)
        terminate: list[bool] = []
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: terminate.append(True))
        if zygote is not None:
            contain.die_with_parent(signal.SIGTERM)
            if os.getppid() != zygote:
                terminate.append(True)  # it died before the line above
        if policy.containment != "off":
            contain.become_subreaper()
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(status_r)
            _script(request, fds, cells, status_w)  # never returns
        os.close(status_w)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        for fd in fds[:len(fds) - len(cells)]:
            os.close(fd)
        conn.settimeout(None)
        # At once: the script sets itself up meanwhile (a failure comes as the end).
        conn.sendall(_line({"pid": pid, "shim": os.getpid()}))
        failure: list[bytes] = []
        code = _wait_script(pid, conn, wake_r, terminate, status_r, failure)
        _clean_up(cells, policy)
        end = ({"error": _short(b"".join(failure).decode(errors="replace"))} if failure
               else {"exit": code})
        with contextlib.suppress(OSError):  # gone: the supervisor stopped listening
            conn.sendall(_line(end))
    except BaseException:  # noqa: BLE001 - the shim must end, whatever happened
        import traceback
        traceback.print_exc()
    finally:
        os._exit(0)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_script(pid: int, conn: socket.socket, wake_r: int, terminate: list[bool],
                 status_r: int, failure: list[bytes]) -> int:
    """The script's exit code; what it wrote on ``status_r`` before it could start goes
    to ``failure``. Its group is killed when the connection closes or the shim is told
    to end; orphans that end meanwhile are reaped on the way."""
    selector = selectors.DefaultSelector()
    selector.register(conn, selectors.EVENT_READ, "conn")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    selector.register(status_r, selectors.EVENT_READ, "status")
    while True:
        while True:
            try:
                done, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return -signal.SIGKILL
            if done == 0:
                break
            if done == pid:
                # Its exit can be seen before what it wrote: read that first, to its end
                # (only the script held the pipe's write end, and it has exited).
                while chunk := os.read(status_r, READ_CHUNK):
                    failure.append(chunk)
                return os.waitstatus_to_exitcode(status)
        if terminate:
            _kill_group(pid)
        for key, _ in selector.select():
            if key.data == "conn":
                try:
                    data = conn.recv(READ_CHUNK)
                except OSError:
                    data = b""
                if not data:  # the supervisor is gone or gave up on the script
                    selector.unregister(conn)
                    terminate.append(True)
            elif key.data == "status":
                chunk = os.read(status_r, READ_CHUNK)
                if chunk:
                    failure.append(chunk)
                else:  # started (closed before the script ran, or on exec)
                    selector.unregister(status_r)
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, READ_CHUNK)


def _clean_up(cells: Sequence[int], policy: ZygotePolicy) -> None:
    """Kill whatever the script left: its cgroup at once, then every child of this
    subreaper (orphans included), until none is left."""
    for fd in cells:
        with contextlib.suppress(OSError):  # a v1 pids cell has none: the loop below
            kill = os.open("cgroup.kill", os.O_WRONLY | os.O_CLOEXEC, dir_fd=fd)
            try:
                os.write(kill, b"1")
            finally:
                os.close(kill)
    if policy.containment != "off":
        contain.kill_children()


def _script(request: dict, fds: list[int], cells: Sequence[int], status_w: int) -> NoReturn:
    """Become the script: ``python3 SCRIPT`` without the exec, or the exec. Until the
    script runs, a failure goes to ``status_w`` (the shim reports it as the spawn's)."""
    code = 127
    started = False
    try:
        signal.set_wakeup_fd(-1)
        os.setpgid(0, 0)
        contain.join(cells)  # first: whatever it starts is born in its cell
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        if request.get("sandbox"):
            # Before the script or anything it names is touched; fails: it never runs.
            # It may change files only in its working directory and its TMPDIR.
            sandbox.restrict(fds[3], sandbox.writable_for(request.get("cwd"),
                                                          request.get("env")))
        _close_all_but({0, 1, 2, status_w})
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
        if not runs_with_python(path):
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess restores them
                signal.signal(sig, signal.SIG_DFL)
            os.execve(path, [path], dict(os.environ))  # status_w is close-on-exec
        contain.set_dumpable(True)  # its own /proc/self is its own again
        contain.set_name(os.path.basename(path))
        sys.argv = [path]
        sys.path[0] = os.path.dirname(path)
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        import runpy
        os.close(status_w)
        started = True
        runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code) if started else 127
    except BaseException as exc:  # noqa: BLE001 - the script's own failure, reported as python does
        if not started:
            with contextlib.suppress(OSError):
                os.write(status_w, _short(getattr(exc, "strerror", None) or str(exc)
                                          or type(exc).__name__).encode())
        else:
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


def serve_once() -> None:
    """A one-shot zygote (its connection is fd 0): one invocation without a zygote, where
    containment needs a subreaper. Like the zygote it forks the invocation's shim and is
    a subreaper itself, so a shim its skill kills leaves nothing behind either; it exits
    once the script and everything it left are gone."""
    conn = socket.socket(fileno=os.dup(0))  # fd 0 stays open until the shim: fds come >= 3
    fds: list[int] = []
    policy = ZygotePolicy(containment="subreaper")
    try:
        contain.become_subreaper()
        request, fds = _receive(conn)
        _check(request, fds, policy)
        shim = os.fork()
        if shim == 0:
            _shim(request, conn, fds, policy, zygote=os.getppid())  # never returns
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(_line({"error": _short(str(exc))}))
        os._exit(0)
    conn.close()
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(shim, 0)
    contain.kill_children()  # what fell to us from a shim its skill killed
    os._exit(0)


# ------------------------------------------------------------------ the client side


@dataclass
class ForkedProcess:
    """A shim's script, shaped like the ``asyncio.subprocess.Process`` the runner uses."""

    pid: int
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    exited: asyncio.Event
    returncode: int | None = None
    shim: int | None = None
    _transports: list[asyncio.BaseTransport] = field(default_factory=list)
    # The control connection's writer (a StreamWriter closes its transport when it is
    # collected) and the task reading the exit status from it.
    control: asyncio.StreamWriter | None = None
    watcher: asyncio.Task[None] | None = None
    helper: asyncio.subprocess.Process | None = None  # a one-shot shim's process
    spawn_error: str | None = None  # why the script never started, if it did not

    def close_pipes(self) -> None:
        for transport in self._transports:
            transport.close()

    def kill_shim(self) -> None:
        """End a shim that does not answer (stopped by its skill): its connection is still
        open, so it has not exited and its pid is its own."""
        if self.shim is not None and not self.exited.is_set():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.shim, signal.SIGKILL)

    async def finish(self) -> None:
        if self.helper is not None:
            await self.helper.wait()


class Zygote:
    """The supervisor's handle on one zygote process.

    The process is started with ``subprocess`` rather than asyncio so that one
    zygote serves any event loop (the supervisor's, a test's); ``spawn`` restarts it
    when it has died. ``containment``: how its invocations are contained (default: this
    process's own); ``sandbox`` and ``rlimit_ceiling`` complete its policy."""

    def __init__(self, env: Mapping[str, str], preload: tuple[str, ...] = PRELOAD, *,
                 containment: Containment | None = None, sandbox: bool = False,
                 rlimit_ceiling: Sequence[tuple[int, int]] = ()) -> None:
        self._env = dict(env)
        self._preload = preload
        self.containment = containment if containment is not None else default_containment()
        self.policy = ZygotePolicy(sandbox, tuple((int(r), int(v)) for r, v in rlimit_ceiling),
                                   self.containment.mode, self.containment.bases)
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()

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
            self._stop()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-c", SERVE_COMMAND], stdin=theirs, stdout=subprocess.PIPE,
                    env=self._env, cwd="/")
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            self._control = ours
            ours.sendall(json.dumps({"policy": self.policy.to_json(),
                                     "preload": list(self._preload)}).encode())
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline()
            if line != READY:
                self._stop()
                raise OSError(f"the zygote did not start: {line[:200]!r}")
            ours.setblocking(False)

    def connect(self) -> socket.socket:
        """A new invocation's connection to the zygote (blocking, non-blocking socket)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._send_lock:
                control = self._control
                if control is None or not self.alive:
                    raise ConnectionRefusedError("the zygote is not running")
                socket.send_fds(control, [b"c"], [theirs.fileno()], socket.MSG_NOSIGNAL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        return ours

    async def spawn(self, path: Path | str, env: Mapping[str, str] | None,
                    cwd: Path | str | None, rlimits: Sequence[tuple[int, int]] = (),
                    ruleset: int | None = None, cells: Sequence[int] = ()) -> ForkedProcess:
        """Fork a child that runs ``path``; raises SpawnError when the zygote refuses or the
        script cannot start, another OSError when the zygote cannot be reached.

        ``ruleset``: a Landlock ruleset fd (the caller's, not closed here) the child
        restricts itself with; ``cells``: cgroup folder fds it joins (the caller's too)."""
        if not self.alive:
            await asyncio.get_running_loop().run_in_executor(None, self.start)
        try:
            sock = self.connect()
        except BlockingIOError as exc:  # its channel is full: it is stuck
            raise OSError(f"the zygote does not keep up: {exc}") from exc
        return await _request(sock, path, env, cwd, rlimits, ruleset, cells)

    def close(self) -> None:
        """Stop the zygote; its shims kill their scripts as it exits."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        control, self._control = self._control, None
        if control is not None:
            control.close()
        if proc is not None and proc.poll() is None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()


async def spawn_once(path: Path | str, env: Mapping[str, str] | None,
                     cwd: Path | str | None, rlimits: Sequence[tuple[int, int]] = (),
                     ruleset: int | None = None) -> ForkedProcess:
    """One invocation through a one-shot shim process (``serve_once``): a subreaper of
    its own where there is no zygote and no cgroup. Costs an interpreter start."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        helper = await asyncio.create_subprocess_exec(
            sys.executable, "-c", ONCE_COMMAND, stdin=theirs, stdout=subprocess.DEVNULL,
            env=dict(env or {}), cwd="/", start_new_session=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    try:
        forked = await _request(ours, path, env, cwd, rlimits, ruleset, ())
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            helper.kill()
        await helper.wait()
        raise
    forked.helper = helper
    return forked


async def _request(sock: socket.socket, path: Path | str, env: Mapping[str, str] | None,
                   cwd: Path | str | None, rlimits: Sequence[tuple[int, int]],
                   ruleset: int | None, cells: Sequence[int]) -> ForkedProcess:
    """Send one invocation's request on its connection and attach to the child."""
    loop = asyncio.get_running_loop()
    child_ends: list[int] = []
    ours: list[int] = []
    try:
        try:
            for direction in ("in", "out", "err"):
                r, w = os.pipe()
                child_ends.append(r if direction == "in" else w)
                ours.append(w if direction == "in" else r)
            body = json.dumps({"path": os.path.abspath(path), "env": dict(env or {}),
                               "cwd": None if cwd is None else str(cwd),
                               "rlimits": [list(p) for p in rlimits],
                               "sandbox": ruleset is not None, "cells": len(cells)}).encode()
            sock.setblocking(True)  # a local write of a few KB: immediate
            socket.send_fds(sock, [_LENGTH.pack(len(body)) + body],
                            child_ends + ([ruleset] if ruleset is not None else []) + list(cells))
            sock.setblocking(False)
        except BaseException:
            sock.close()
            for fd in ours:
                os.close(fd)
            raise
    finally:
        for fd in child_ends:
            os.close(fd)
    return await _attach(loop, sock, ours)


async def _attach(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                  fds: list[int]) -> ForkedProcess:
    """Wrap our pipe ends as streams and wait for the child's pid."""
    stdin_w, stdout_r, stderr_r = fds
    unowned = set(fds)  # fds no transport has taken over yet: ours to close on failure
    transports: list[asyncio.BaseTransport] = []
    try:
        reader, control = await asyncio.open_unix_connection(sock=sock)
        transports.append(control.transport)
        try:
            first = json.loads(await reader.readline() or b"{}")
        except ValueError:
            first = {}
        if "pid" not in first:
            if first.get("error"):
                raise SpawnError(str(first["error"])[:MAX_ERROR_CHARS])
            raise OSError("the zygote closed the connection")
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
    shim = first.get("shim")
    proc = ForkedProcess(int(first["pid"]), stdin, out, err, asyncio.Event(),
                         shim=int(shim) if isinstance(shim, int) else None,
                         _transports=transports, control=control)
    proc.watcher = loop.create_task(_watch_exit(reader, proc))
    return proc


async def _watch_exit(reader: asyncio.StreamReader, proc: ForkedProcess) -> None:
    try:
        line = await reader.readline()
        if line:
            end = json.loads(line)
            if "error" in end:
                proc.spawn_error = str(end["error"])[:MAX_ERROR_CHARS]
                proc.returncode = 127
            else:
                proc.returncode = int(end.get("exit", -signal.SIGKILL))
    except (OSError, ValueError):
        pass
    finally:
        # A shim that died takes the exit status with it: the runner kills the group.
        if proc.returncode is None:
            proc.returncode = -signal.SIGKILL
        proc.exited.set()
