"""The data dir lock (runtime/host/data_lock.py): a second holder is refused, naming the
first's pid; the lock dies with its holder, SIGKILL included, even when the holder's
children live on."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from narratoria.runtime.host.data_lock import DataDirInUse, acquire, hold, lock_path, release

# A process that takes the lock, starts a child that outlives it (as Ray's processes
# may), says so, and waits to be killed.
HOLDER = """
import subprocess, sys, time
from pathlib import Path
from narratoria.runtime.host.data_lock import acquire
acquire(Path(sys.argv[1]))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
print(child.pid, flush=True)
time.sleep(60)
"""


def _start_holder(data_dir: Path) -> tuple[subprocess.Popen, int]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir)],
                              stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    return holder, child


def test_a_second_process_is_refused_with_the_first_ones_pid_until_it_is_killed(tmp_path):
    data_dir = tmp_path / "data"
    holder, child = _start_holder(data_dir)
    try:
        with pytest.raises(DataDirInUse) as refused:
            acquire(data_dir)
        assert refused.value.pid == holder.pid
        assert f"data dir {data_dir} in use by pid {holder.pid}" in str(refused.value)

        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        # Its child inherited nothing that holds the lock: the data dir is free at once.
        fd = acquire(data_dir)
        assert lock_path(data_dir).read_text().strip() == str(os.getpid())
        release(fd)
    finally:
        holder.kill()
        holder.wait()
        os.kill(child, signal.SIGKILL)


def test_a_released_lock_is_free_and_names_no_one(tmp_path):
    with hold(tmp_path) as fd:
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
        with pytest.raises(DataDirInUse):  # flock: a second descriptor conflicts too
            acquire(tmp_path)
    assert lock_path(tmp_path).read_text() == ""
    with hold(tmp_path):
        pass


def test_a_lock_file_naming_no_one_is_refused_without_a_pid(tmp_path):
    """A holder that has locked but not yet written its pid: the refusal waits briefly,
    then names no pid rather than a wrong one."""
    import fcntl

    fd = os.open(lock_path(tmp_path), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        with pytest.raises(DataDirInUse) as refused:
            acquire(tmp_path)
        assert refused.value.pid is None and "in use by another process" in str(refused.value)
        assert time.monotonic() - started < 5
    finally:
        os.close(fd)
