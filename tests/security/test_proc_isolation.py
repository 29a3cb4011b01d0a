"""No skill reads other processes, against a real daemon.

A hostile skill (fixtures/proc-isolation/proc-snoop), run by the daemon once forked from
the zygote and once exec'd, tries to read the daemon's ``/proc/<pid>/environ`` (which
holds a secret the test gave the daemon), ``cmdline`` and ``status``, the supervisor's,
pid 1's, and Ray's auth token in ``~/.ray`` (a temporary HOME holding one): every read
is refused, while its own ``/proc/self/status`` works. Landlock does it
(``runtime/skillrun/sandbox.py``): a second layer, built in the child, allows ``/proc/<own pid>``
and no other process's folder, and ``~/.ray`` and ``/tmp/ray`` join the denied folders.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from narratoria.runtime.skillrun import sandbox
from skill_plans import finished, run_plan, tool_events
from support.daemon import Daemon

pytestmark = pytest.mark.skipif(not sandbox.available(), reason="this kernel has no Landlock")

ROOT = Path(__file__).resolve().parent / "fixtures" / "proc-isolation"
SECRET = "daemon-env-secret-4f1c"
RAY_SECRET = "ray-auth-token-9e2d"


@pytest.fixture
def snooping_daemon(tmp_path):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(RAY_SECRET)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("NARRATORIA_TEST_SECRET", SECRET)  # in the daemon's environment only
        d = Daemon("--planner", "pattern", "--embedding-backend", "hash",
                   "--skills-dir", str(ROOT))
    d.home = home
    yield d
    assert d.stop() == 0


def test_a_skill_reads_its_own_proc_and_nothing_of_other_processes(snooping_daemon):
    d = snooping_daemon
    with d.client() as client:
        [supervisor] = [a.pid for a in client.status().actors if a.name == "supervisor"]
        daemon = d.proc.pid
        targets = [f"/proc/{daemon}/environ", f"/proc/{daemon}/cmdline",
                   f"/proc/{daemon}/status", f"/proc/{supervisor}/cmdline",
                   f"/proc/{supervisor}/environ", "/proc/1/environ", "/proc/1/cmdline",
                   str(d.home / ".ray" / "auth_token")]
        # What a process outside the sandbox reads there: the secrets are really there.
        assert SECRET.encode() in Path(targets[0]).read_bytes()
        session = client.create_session(title="snoop")
        events = run_plan(client, session.id, *(
            {"toolId": script, "toolPath": f"proc-snoop/{script}",
             "input": {"read": targets, "secret": SECRET}}
            for script in ("snoop", "snoop-exec")))
    for script in ("snoop", "snoop-exec"):
        assert finished(events)[script].ok, finished(events)[script].error
        [log] = [e for e in tool_events(events, script) if e.get("message") == "snooped"]
        got = log["fields"]
        assert got["read"] == {t: "PermissionError" for t in targets}, (script, got["read"])
        # Its own folder, by /proc/self and by its pid, stays readable.
        assert got["self"]["pid"] == got["pid"] and got["ownByPid"] == "ok", (script, got)
        # The price: a child the skill starts may read the skill's folder, not its own.
        assert got["childOwnProc"] != 0, (script, got)


def test_the_supervisors_policy_keeps_rays_files_out(tmp_path, monkeypatch):
    """``~/.ray`` (the auth token) and ``/tmp/ray`` are denied whether or not they exist
    yet, beside the data dir and the daemon's own Ray folder."""
    from narratoria.actors.supervisor import skill_sandbox

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    policy = skill_sandbox(str(tmp_path / "data"), [str(ROOT)], str(tmp_path / "ray"))
    assert set(policy.denied) >= {str(tmp_path / "data"), str(tmp_path / "ray"),
                                  str(tmp_path / "home" / ".ray"), "/tmp/ray"}
