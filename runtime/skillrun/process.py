"""One skill invocation: a script run as an isolated OS process speaking protocol v0.

The script gets its own process group, and every process it starts is contained
(``runtime/skillrun/containment.py``): in a cgroup of the invocation's own, or under a shim that
is their subreaper. A timeout, a protocol violation or the end of the invocation kills
the group, the cgroup and whatever the shim holds: no process outlives its invocation,
not even one that left the group (``fork(); setsid(); fork()``).

Every script starts through the zygote when there is one (``runtime/skillrun/zygote.py``: Python
scripts forked, others exec'd by a child that has confined itself first); otherwise it is
exec'd here, joining its cgroup between fork and exec, or, where containment needs a
subreaper, through a one-shot shim (``zygote.spawn_once``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from narratoria.runtime.skillrun import containment as contain
from narratoria.runtime.skillrun import sandbox
from narratoria.runtime.skillrun.containment import Cell, Containment, default_containment
from narratoria.runtime.skillrun.limits import ResourceLimits, apply_resource_limits
from narratoria.runtime.skillrun.plan import ToolError
from narratoria.runtime.skillrun.zygote import ForkedProcess, SpawnError, Zygote, spawn_once
if TYPE_CHECKING:
    from narratoria.runtime.skills.discovery import SkillScript

from narratoria.runtime.skillrun.protocol import (
    MAX_LINE_BYTES,
    AnyEvent,
    DoneEvent,
    ErrorEvent,
    LineSplitter,
    OverlongLine,
    ProtocolReader,
    ProtocolViolation,
    Violation,
)

READ_CHUNK = 64 * 1024
EXIT_DRAIN_S = 2.0
# How long a shim may take to report its script's exit after the group was killed (it
# kills what the script left first: a thousand processes take well under a second).
SHIM_EXIT_S = 5.0


@dataclass(frozen=True)
class ProcessLimits:
    timeout_s: float = 30.0
    # A script that said `done` but keeps running is killed after this grace.
    done_grace_s: float = 5.0
    max_line_bytes: int = MAX_LINE_BYTES
    max_output_bytes: int = 16 * 1024 * 1024
    max_events: int = 10_000
    max_stderr_bytes: int = 64 * 1024
    resources: ResourceLimits = ResourceLimits()
    # Folders the script may not open (Landlock, ``runtime/skillrun/sandbox.py``): the daemon's
    # data dir. None: no file-system confinement.
    sandbox: sandbox.SandboxPolicy | None = None


@dataclass
class ReceivedEvent:
    at_s: float  # seconds since the invocation started
    event: AnyEvent


@dataclass
class InvocationOutcome:
    events: list[ReceivedEvent] = field(default_factory=list)
    done: DoneEvent | None = None
    exit_code: int | None = None
    stderr: str = ""
    violation: Violation | None = None
    # Only filled in keep-going mode (conformance checks): every violation seen.
    violations: list[Violation] = field(default_factory=list)
    warnings: list[Violation] = field(default_factory=list)
    timed_out: bool = False
    failure: ToolError | None = None  # set when the process itself misbehaved
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error(self) -> ToolError | None:
        """The invocation's failure per the protocol semantics, or None on success."""
        if self.failure is not None:
            return self.failure
        if self.violation is not None:
            v = self.violation
            return ToolError(code=v.code, message=str(v), category="invalid_json", line=v.line)
        if self.timed_out:
            return ToolError(code="timeout", message="script timed out", category="timeout")
        if self.exit_code != 0:
            return ToolError(
                code="exit_code", message=_describe_exit(self.exit_code), category="process_error"
            )
        if self.done is None:
            return ToolError(
                code="missing_done",
                message="script exited 0 without a done event",
                category="process_error",
            )
        if not self.done.ok:
            last_error = next(
                (r.event for r in reversed(self.events) if isinstance(r.event, ErrorEvent)), None
            )
            if last_error is not None:
                return ToolError(
                    code=last_error.errorCode,
                    message=last_error.errorMessage,
                    category="tool_failure",
                )
            return ToolError(
                code="done_not_ok",
                message=self.done.summary or "script reported done ok:false",
                category="tool_failure",
            )
        return None


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "script did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"script was killed by {name}"
    return f"script exited with code {code}"


class _OutputLimit(Exception):
    pass


def script_env(script: "SkillScript | None", request_id: str,
               extra: Mapping[str, str] = {}) -> dict[str, str]:
    """A minimal environment: skills are untrusted and get none of the daemon's secrets.

    The interpreter's folder comes first on PATH so `#!/usr/bin/env python3`
    scripts run with the project's Python.
    """
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "HOME": os.environ.get("HOME", "/"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NARRATORIA_PROTOCOL_VERSION": "0",
        "NARRATORIA_REQUEST_ID": request_id,
    }
    if script is not None:
        root = script.path.parent.parent
        env["NARRATORIA_SKILL"] = script.skill
        env["NARRATORIA_SKILL_DIR"] = str(root)
        env["NARRATORIA_SKILL_DATA_DIR"] = str(root / "data")
        env.update(_skill_config_env(root))
    env.update(extra)
    return env


def _skill_config_env(root: Path) -> dict[str, str]:
    """The player's settings for the skill at ``root`` (``narratoria skills config``),
    resolved here — ``${VAR}`` from the daemon's environment, which the skill does not
    get — as JSON in NARRATORIA_SKILL_CONFIG; a setting that does not resolve is
    NARRATORIA_SKILL_CONFIG_ERROR instead, for the skill to report."""
    from narratoria.runtime.skills import config as skill_config
    from narratoria.runtime.skills.discovery import SkillError, load_skill

    try:
        skill = load_skill(root)
        if not skill_config.config_path(skill).is_file():
            return {}
        return {"NARRATORIA_SKILL_CONFIG": json.dumps(skill_config.resolved_config(skill))}
    except skill_config.ConfigError as exc:
        return {"NARRATORIA_SKILL_CONFIG_ERROR": str(exc)}
    except (OSError, SkillError):
        return {}


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_script(
    path: Path | str,
    stdin: bytes,
    *,
    limits: ProcessLimits = ProcessLimits(),
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    on_event: Callable[[AnyEvent], None] | None = None,
    keep_going: bool = False,
    zygote: Zygote | None = None,
    containment: Containment | None = None,
) -> InvocationOutcome:
    """Run one script to completion and return what it said and how it ended.

    With a ``zygote``, the script starts from it (``runtime/skillrun/zygote.py``); the supervision
    is the same. ``containment``: the zygote's, else this process's own (``auto``).
    Never raises for anything the script does; cancellation kills the process group
    and everything contained with it before propagating.
    """
    outcome = InvocationOutcome()
    started = time.monotonic()
    if containment is None:
        containment = zygote.containment if zygote is not None else default_containment()
    with contextlib.ExitStack() as scratch:
        try:
            with contextlib.ExitStack() as leased:  # the ruleset: until the child has it
                env, ruleset = await _confine(limits.sandbox, env, cwd, scratch, leased)
                processes = limits.resources.processes
                cell = scratch.enter_context(containment.cell(processes))
                rlimits = (limits.resources.pairs()
                           + containment.nproc_pairs(processes, cell))
                proc, exited = await _start(path, env, cwd, zygote, rlimits, ruleset, cell,
                                            containment)
        except OSError as exc:
            outcome.failure = ToolError(
                code="spawn_failed",
                message=f"cannot start {path}: {exc.strerror or exc}",
                category="process_error",
            )
            return outcome

        session = _Session(proc, exited, limits, outcome, started, on_event, keep_going, cell)
        try:
            await session.run(stdin)
        finally:
            await session.reap()
            outcome.duration_s = time.monotonic() - started
        if isinstance(proc, ForkedProcess) and proc.spawn_error is not None:
            outcome.failure = ToolError(code="spawn_failed",
                                        message=f"cannot start {path}: {proc.spawn_error}",
                                        category="process_error")
    return outcome


async def _confine(policy: sandbox.SandboxPolicy | None, env: dict[str, str] | None,
                   cwd: Path | str | None, scratch: contextlib.ExitStack,
                   leased: contextlib.ExitStack) -> tuple[dict[str, str] | None, int | None]:
    """The environment and the Landlock ruleset fd (None: unconfined) of one invocation.

    A confined script may change files only in its working directory and its
    ``TMPDIR`` (a layer the child adds itself: ``sandbox.restrict``), and the daemon's
    ``TMPDIR`` is shared with other programs: the invocation gets a scratch ``TMPDIR``
    of its own, removed when it ends."""
    if policy is None or not policy.denied:
        return env, None
    base = os.environ if env is None else env
    writable = [str(cwd)] if cwd else []
    if sandbox.needs_scratch(policy):
        env = {**base, "TMPDIR": scratch.enter_context(sandbox.scratch_dir())}
        writable.append(sandbox.scratch_root())  # one rule (and ruleset) for every scratch folder
    # In a thread: rebuilding the ruleset lists folders (milliseconds for /tmp).
    fd = await asyncio.to_thread(leased.enter_context, sandbox.lease(policy, writable))
    return env, fd


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Signals the moment the script itself exits.

    ``Process.wait()`` resolves only once every pipe is closed too, so a child
    that inherited stdout would keep it waiting; the supervisor needs the exit.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def _start(path: Path | str, env: dict[str, str] | None, cwd: Path | str | None,
                 zygote: Zygote | None, rlimits: list[tuple[int, int]],
                 ruleset: int | None, cell: Cell | None, containment: Containment
                 ) -> tuple[asyncio.subprocess.Process | ForkedProcess, asyncio.Event]:
    cells = cell.fds if cell is not None else []
    if zygote is not None:
        try:
            forked = await zygote.spawn(path, env, cwd, rlimits, ruleset, cells)
            return forked, forked.exited
        except SpawnError:
            raise  # refused, or the script cannot start: exec would not do better
        except OSError as exc:
            # Slower, never wrong: start the script as if there were no zygote.
            print(f"zygote unavailable ({exc}); starting {path} without it", file=sys.stderr)
    if containment.mode == "subreaper":
        forked = await spawn_once(path, env, cwd, rlimits, ruleset)
        return forked, forked.exited
    return await _spawn(path, env, cwd, rlimits, ruleset, cells)


async def _spawn(path: Path | str, env: dict[str, str] | None, cwd: Path | str | None,
                 rlimits: list[tuple[int, int]] = (), ruleset: int | None = None,
                 cells: list[int] = ()) -> tuple[asyncio.subprocess.Process, asyncio.Event]:
    loop = asyncio.get_running_loop()
    writable = sandbox.writable_for(cwd, env)

    def confine() -> None:
        # An open and a write into the cgroup, setrlimit, prctl, landlock_restrict_self
        # (pre-resolved C calls): no locks, no allocation worth the name between fork
        # and exec.
        contain.join(cells)
        apply_resource_limits(list(rlimits))
        if ruleset is not None:
            sandbox.restrict(ruleset, writable)

    try:
        # The ruleset fd is used in the child before subprocess closes every fd (and it
        # is close-on-exec): nothing of it reaches the script.
        transport, protocol = await loop.subprocess_exec(
            lambda: _ExitAwareProtocol(READ_CHUNK, loop),
            str(path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=env,
            cwd=cwd,
            preexec_fn=confine if rlimits or ruleset is not None or cells else None,
        )
    except subprocess.SubprocessError as exc:  # preexec_fn failed: the script never ran
        raise OSError(f"cannot confine the script: {exc}") from exc
    return asyncio.subprocess.Process(transport, protocol, loop), protocol.exited


class _Session:
    """The supervision of one running process; see ``run_script``."""

    def __init__(self, proc: asyncio.subprocess.Process | ForkedProcess, exited: asyncio.Event,
                 limits: ProcessLimits,
                 outcome: InvocationOutcome, started: float,
                 on_event: Callable[[AnyEvent], None] | None,
                 keep_going: bool = False, cell: Cell | None = None) -> None:
        self.proc = proc
        self.cell = cell
        self.exited = exited
        self.keep_going = keep_going
        self.limits = limits
        self.outcome = outcome
        self.started = started
        self.on_event = on_event
        self.reader = ProtocolReader(max_line_bytes=limits.max_line_bytes)
        self.done_seen = asyncio.Event()
        self.done_at = 0.0
        self.stderr_tail = bytearray()
        self.tasks: list[asyncio.Task] = []

    async def run(self, stdin: bytes) -> None:
        proc, limits = self.proc, self.limits
        stderr_task = asyncio.create_task(self._read_stderr())
        stdout_task = asyncio.create_task(self._read_stdout())
        # Order matters to reap(): [writer, stderr reader, stdout reader, ...].
        self.tasks += [asyncio.create_task(self._write_stdin(stdin)), stderr_task, stdout_task]
        wait_task = asyncio.create_task(self.exited.wait())
        done_task = asyncio.create_task(self.done_seen.wait())
        self.tasks += [wait_task, done_task]
        deadline = self.started + limits.timeout_s
        exited_at: float | None = None

        while True:
            now = time.monotonic()
            limit = deadline
            if self.done_seen.is_set():
                limit = min(deadline, self.done_at + limits.done_grace_s)
            if exited_at is not None:
                # Output still buffered in the pipe takes milliseconds to read; only a
                # descendant that escaped the process group can hold stdout open longer.
                limit = min(limit, exited_at + EXIT_DRAIN_S)
            watch = {t for t in (stdout_task, wait_task, done_task) if not t.done()}
            if not watch:
                break
            finished, _ = await asyncio.wait(
                watch, timeout=max(0.0, limit - now), return_when=asyncio.FIRST_COMPLETED
            )
            if stdout_task in finished and stdout_task.exception() is not None:
                self._record_stdout_failure(stdout_task.exception())
                return
            if wait_task.done() and stdout_task.done():
                return
            if wait_task in finished:
                # The script exited; children still holding stdout die with the group
                # and the cell, so the pipe reaches EOF and the rest of its output is read.
                self._kill()
                exited_at = time.monotonic()
                continue
            if not finished:
                if exited_at is not None:
                    return
                if self.done_seen.is_set() and time.monotonic() < deadline:
                    self.outcome.failure = ToolError(
                        code="no_exit_after_done",
                        message=f"script still running {limits.done_grace_s:g}s after done",
                        category="process_error",
                    )
                else:
                    self.outcome.timed_out = True
                return

    def _record_stdout_failure(self, exc: BaseException) -> None:
        if isinstance(exc, ProtocolViolation):
            self.outcome.violation = exc.violation
        elif isinstance(exc, _OutputLimit):
            self.outcome.failure = ToolError(
                code="output_limit", message=str(exc), category="process_error"
            )
        else:
            self.outcome.failure = ToolError(
                code="read_error", message=f"reading stdout failed: {exc}", category="process_error"
            )

    async def _write_stdin(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the script may ignore its input and exit early
        finally:
            try:
                stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass

    async def _read_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        cap = self.limits.max_stderr_bytes
        while chunk := await stream.read(READ_CHUNK):
            self.stderr_tail += chunk
            if len(self.stderr_tail) > cap:
                del self.stderr_tail[: len(self.stderr_tail) - cap]

    async def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        splitter = LineSplitter(self.limits.max_line_bytes)
        total = 0
        while chunk := await stream.read(READ_CHUNK):
            total += len(chunk)
            if total > self.limits.max_output_bytes:
                raise _OutputLimit(
                    f"script wrote more than {self.limits.max_output_bytes} bytes to stdout"
                )
            for line in splitter.feed(chunk):
                self._handle_line(line)
        for line in splitter.close():
            self._handle_line(line)

    def _handle_line(self, line: bytes | OverlongLine) -> None:
        try:
            event = self.reader.feed(line)
        except ProtocolViolation as exc:
            if not self.keep_going:
                raise
            self.outcome.violations.append(exc.violation)
            if self.outcome.violation is None:
                self.outcome.violation = exc.violation
            return
        if event is None:
            return
        events = self.outcome.events
        if len(events) >= self.limits.max_events:
            raise _OutputLimit(f"script emitted more than {self.limits.max_events} events")
        events.append(ReceivedEvent(time.monotonic() - self.started, event))
        if isinstance(event, DoneEvent):
            self.outcome.done = event
            self.done_at = time.monotonic()
            self.done_seen.set()
        if self.on_event is not None:
            self.on_event(event)

    def _kill(self) -> None:
        kill_group(self.proc.pid)
        if self.cell is not None:
            self.cell.kill()

    async def _settle(self) -> None:
        """The script's exit, then its cell empty. After SIGKILL to the group the exit is
        certain and prompt; a shim that does not report it (stopped by its own skill) is
        killed, which reports it."""
        proc = self.proc
        try:
            await asyncio.wait_for(asyncio.shield(self.exited.wait()), SHIM_EXIT_S)
        except TimeoutError:
            if isinstance(proc, ForkedProcess):
                proc.kill_shim()
            await self.exited.wait()
        if isinstance(proc, ForkedProcess):
            await proc.finish()
        if self.cell is not None:
            deadline = time.monotonic() + contain.EMPTY_WAIT_S
            while not self.cell.empty() and time.monotonic() < deadline:
                self.cell.kill()
                await asyncio.sleep(0.001)

    async def reap(self) -> None:
        """Kill whatever is left of the group and the cell, reap the process, stop the
        readers."""
        proc = self.proc
        self._kill()
        settled = asyncio.ensure_future(self._settle())
        try:
            await asyncio.shield(settled)
        except asyncio.CancelledError:
            await settled
            raise
        finally:
            self.outcome.exit_code = proc.returncode
            # With the group dead the pipes reach EOF at once: let the readers take the
            # last bytes (a crash's traceback is the end of stderr) before stopping them.
            readers = [t for t in self.tasks[1:3] if not t.done()]
            if readers:
                await asyncio.wait(readers, timeout=EXIT_DRAIN_S / 4)
            # A descendant that left the process group may still hold the pipes;
            # closing our ends releases the transport without waiting for it.
            if isinstance(proc, ForkedProcess):
                proc.close_pipes()
            else:
                proc._transport.close()  # noqa: SLF001 - no public way to drop the pipes
            for task in self.tasks:
                if not task.done():
                    task.cancel()
            for task in self.tasks:
                try:
                    await task
                except BaseException:  # noqa: BLE001 - readers end however they end
                    pass
            self.outcome.warnings = list(self.reader.warnings)
            self.outcome.stderr = self.stderr_tail.decode("utf-8", "replace")
