"""One invocation of a real script: protocol semantics, limits, and no leaked processes.

Every test runs twice: the script exec'd, and forked from the zygote
(``runtime/skillrun/zygote.py``), which must keep exactly the same semantics.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from conftest import FIXTURE_SKILLS, TESTS, process_alive
from narratoria.runtime.skillrun.limits import ResourceLimits
from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import tool_input
from narratoria.runtime.skillrun.zygote import Zygote

HOSTILE = FIXTURE_SKILLS / "hostile" / "scripts"
ECHO = FIXTURE_SKILLS / "echo" / "scripts"


_ZYGOTE: list[Zygote | None] = [None]  # the spawner of the running test


@pytest.fixture(params=["exec", "zygote"], autouse=True)
def spawner(request, zygote):
    _ZYGOTE[0] = zygote if request.param == "zygote" else None
    yield request.param
    _ZYGOTE[0] = None


def invoke(script: Path, payload: dict | None = None, **limits):
    stdin = tool_input("req-1", "test", script.name, payload or {})
    return asyncio.run(run_script(script, stdin, limits=ProcessLimits(**limits),
                                  env=script_env(None, "req-1"), zygote=_ZYGOTE[0]))


def wait_dead(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_a_well_behaved_script_succeeds_with_all_its_events():
    out = invoke(ECHO / "echo", {"key": "k", "value": 1, "asset": True})
    assert out.ok and out.exit_code == 0
    assert [r.event.__struct_config__.tag for r in out.events] == [
        "log", "state_patch", "asset", "ui_event", "done"]
    assert out.done.summary == "echoed k"
    assert all(r.at_s >= 0 for r in out.events)


def test_crash_is_a_process_error_and_stderr_is_kept_as_diagnostics():
    out = invoke(HOSTILE / "crash")
    assert out.error.category == "process_error" and out.exit_code == 1
    assert "RuntimeError: boom" in out.stderr
    assert len(out.events) == 1  # the log before the crash was still streamed


def test_exit_code_wins_over_done_ok_true():
    out = invoke(HOSTILE / "exit-after-done")
    assert out.done is not None and out.done.ok
    assert not out.ok and out.error.category == "process_error" and "code 3" in out.error.message


def test_missing_done_with_exit_zero_is_a_failure():
    out = invoke(HOSTILE / "no-done")
    assert out.exit_code == 0 and out.error.code == "missing_done"


@pytest.mark.parametrize("script,code,line", [
    ("garbage", "invalid_json", 2),
    ("unknown-type", "unknown_event_type", 2),
    ("long-line", "line_too_long", 1),
    ("invalid-utf8", "invalid_utf8", 2),
    ("bad-event", "invalid_event", 1),
])
def test_protocol_violations_end_the_invocation_as_invalid_json(script, code, line):
    out = invoke(HOSTILE / script)
    assert out.error.category == "invalid_json"
    assert out.error.code == code and out.error.line == line
    assert f"line {line}" in out.error.message


def test_events_after_done_are_ignored_and_reported():
    out = invoke(HOSTILE / "events-after-done")
    assert out.ok and out.done.summary == "first"
    assert len(out.events) == 1
    assert len(out.warnings) == 2 and "after done" in str(out.warnings[0])


def test_hang_times_out_and_the_process_is_killed():
    started = time.monotonic()
    out = invoke(HOSTILE / "hang", timeout_s=0.5)
    assert out.timed_out and out.error.category == "timeout"
    assert time.monotonic() - started < 3
    assert out.exit_code is not None and out.exit_code < 0


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "pids"
    out = invoke(HOSTILE / "hang-with-child", {"pidFile": str(pid_file)}, timeout_s=1.0)
    assert out.timed_out
    child, parent = map(int, pid_file.read_text().split())
    assert wait_dead(parent) and wait_dead(child)


def test_children_do_not_outlive_a_successful_invocation(tmp_path):
    pid_file = tmp_path / "pid"
    out = invoke(HOSTILE / "fork-child", {"pidFile": str(pid_file)})
    assert out.ok
    assert wait_dead(int(pid_file.read_text()))


def test_flood_is_stopped_by_the_output_limit():
    out = invoke(HOSTILE / "flood", max_output_bytes=2 * 1024 * 1024, timeout_s=20)
    assert out.error.code in ("output_limit",) and out.error.category == "process_error"
    assert not out.timed_out


def test_flood_of_events_is_capped_by_the_event_limit():
    out = invoke(HOSTILE / "flood", max_events=500, timeout_s=20)
    assert out.error.code == "output_limit" and len(out.events) == 500


def test_a_script_that_lingers_after_done_is_killed_after_the_grace():
    started = time.monotonic()
    out = invoke(HOSTILE / "slow-exit", done_grace_s=0.3, timeout_s=10)
    assert out.error.code == "no_exit_after_done"
    assert time.monotonic() - started < 3


def test_missing_or_non_executable_scripts_are_process_errors(tmp_path):
    out = invoke(tmp_path / "nope")
    assert out.error.code == "spawn_failed" and "nope" in out.error.message
    out = invoke(HOSTILE / "not-executable-really")
    assert out.error.code == "spawn_failed" and out.error.category == "process_error"


def test_script_env_is_minimal_and_puts_the_interpreter_first(monkeypatch):
    monkeypatch.setenv("SECRET_API_KEY", "hunter2")
    env = script_env(None, "r")
    assert "SECRET_API_KEY" not in env
    assert env["NARRATORIA_REQUEST_ID"] == "r" and env["PYTHONUNBUFFERED"] == "1"


def test_cancellation_kills_the_process_group(tmp_path):
    pid_file = tmp_path / "pids"

    async def main():
        stdin = tool_input("r", "t", "o", {"pidFile": str(pid_file)})
        task = asyncio.create_task(run_script(HOSTILE / "hang-with-child", stdin,
                                              env=script_env(None, "r"), zygote=_ZYGOTE[0]))
        for _ in range(200):
            await asyncio.sleep(0.02)
            if pid_file.exists() and pid_file.read_text():
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    child, parent = map(int, pid_file.read_text().split())
    assert wait_dead(parent) and wait_dead(child)


# -- resource limits (setrlimit), exec'd and forked alike ---------------------------------

GREEDY = TESTS / "fixtures" / "limits" / "greedy" / "scripts"


def invoke_limited(script: Path, **resources):
    stdin = tool_input("req-1", "greedy", script.name, {})
    limits = ProcessLimits(timeout_s=20, resources=ResourceLimits(**resources))
    return asyncio.run(run_script(script, stdin, limits=limits, env=script_env(None, "req-1"),
                                  zygote=_ZYGOTE[0]))


def test_a_memory_hog_hits_its_address_space_limit():
    started = time.monotonic()
    out = invoke_limited(GREEDY / "memory-hog", memory_mb=512)
    assert out.error.category == "process_error" and out.done is None
    assert "MemoryError" in out.stderr
    assert time.monotonic() - started < 10 and not out.timed_out


def test_a_cpu_spinner_is_stopped_by_its_cpu_time_limit_before_the_timeout():
    started = time.monotonic()
    out = invoke_limited(GREEDY / "cpu-spin", cpu_s=1)
    assert not out.timed_out and out.exit_code is not None and out.exit_code < 0
    assert "SIGXCPU" in out.error.message or "SIGKILL" in out.error.message
    assert time.monotonic() - started < 10


def test_a_descriptor_leak_hits_its_open_files_limit():
    out = invoke_limited(GREEDY / "open-files", open_files=32)
    assert out.error.category == "process_error" and "Too many open files" in out.stderr


def test_within_its_limits_a_script_runs_as_before():
    out = invoke(ECHO / "echo", {"key": "k", "value": 1})
    assert out.ok
