"""A real daemon in a folder of its own: ``narratoria serve --json`` on ``FOLDER/d.sock``
with its data in ``FOLDER/data``, started as a child process in a session of its own.

The benchmarks (``turn``, ``skills``, ``ingest_load``, ``crash``, ``loadtest``), ``eval
narration`` and the tests' ``tests/support/daemon.py`` all start theirs through
:class:`ServeDaemon`. It is ready when it has printed its ready line (one JSON object:
``startupS``, the planners, ...); its stderr goes to ``FOLDER/<log_name>``. Ray-free: the
daemon is a child process, this is only ``subprocess``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 60.0  # a clean stop waits this long for the daemon, then kills its group


class ServeDaemon:
    """``narratoria serve`` with ``extra`` arguments (and ``env``, default: this one's)."""

    log_name = "daemon.log"
    start_timeout_s = 180.0

    def __init__(self, folder: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.dir = folder
        self.socket = folder / "d.sock"
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "narratoria.clients.cli", "serve", "--socket", str(self.socket),
             "--data-dir", str(folder / "data"), "--json", *extra],
            stdout=subprocess.PIPE, stderr=open(self.log, "ab"), text=True,
            start_new_session=True, env=env)
        self.ready: dict[str, Any] = self._wait_ready()
        self.start_s = time.monotonic() - started  # from exec to the ready line

    @property
    def log(self) -> Path:
        return self.dir / self.log_name

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    def _wait_ready(self) -> dict[str, Any]:
        """The ready line, read on a thread so that a daemon that hangs cannot hang us."""
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(self.start_timeout_s)
        if not line or not line[0].strip():
            self.stop()
            raise RuntimeError("the daemon did not start:\n"
                               + self.log.read_text(errors="replace")[-3000:])
        return json.loads(line[0])

    def stop(self) -> int:
        """SIGTERM (a clean stop); :meth:`_kill` after ``STOP_TIMEOUT_S``. Its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        return self.proc.returncode

    def _kill(self) -> None:
        """SIGKILL of the serve process group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
