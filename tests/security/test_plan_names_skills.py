"""Plans name skills, not programs, against a real daemon.

A plan's ``toolPath`` names a registered skill's script (``skill/script``, or the spec's
``skill/scripts/script`` and ``skills/skill/scripts/script``). Through the daemon's Turn
RPC (``plan_json``) and ``narratoria turn --plan``, a plan naming ``/bin/sh``, a relative
path out of the working directory, ``..`` after a skill name, a link in a skill folder to
``/bin/sh``, an executable of a skill folder that is no registered script, or even the
absolute path of a registered script is refused: its tool fails with an error naming the
toolPath (cut short when long), it is never started, and nothing of it ran. Each would
have left a marker: the shell through the ``$(touch ...)`` in its input (a shell reads
the tool input on stdin as a command line), the decoy executables themselves
(tests/security/fixtures/plan-paths/decoy). The markers go to ``/dev/shm``: the one folder
every skill process may write, whatever its working directory (a sandboxed one may write
only there, its working directory and its TMPDIR). Only ``narratoria plan run
--allow-script-paths``, a local command, runs a script file by its path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from conftest import FIXTURE_SKILLS
from skill_plans import finished, run_plan
from support.daemon import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "plan-paths"
NARRATORIA = Path(sys.executable).parent / "narratoria"


def install_decoy(root: Path) -> Path:
    """The decoy skill in the daemon's skill root, with ``scripts/shell`` -> /bin/sh."""
    decoy = Path(shutil.copytree(FIXTURES / "decoy", root / "decoy", dirs_exist_ok=True))
    link = decoy / "scripts" / "shell"
    if not link.is_symlink():
        link.symlink_to("/bin/sh")
    return decoy


SHM = Path("/dev/shm")
DECOY_MARKERS = "narratoria-decoy-ran-*"  # what the decoy's executables leave in SHM


def shm_marker() -> Path:
    for stale in SHM.glob(DECOY_MARKERS):  # of an earlier run
        stale.unlink(missing_ok=True)
    return SHM / f"narratoria-marker-{uuid.uuid4().hex[:10]}"


def markers(marker: Path) -> list[Path]:
    found = sorted(SHM.glob(DECOY_MARKERS)) + ([marker] if marker.exists() else [])
    marker.unlink(missing_ok=True)
    return found


def tool(tool_id: str, path: str, marker: Path) -> dict:
    return {"toolId": tool_id, "toolPath": path, "required": False,
            "retryPolicy": {"maxRetries": 0}, "input": {"cmd": f"$(touch {marker})"}}


# toolId -> (toolPath, what its error says); filled in with the daemon's folders below.
def refused_tools(decoy: Path) -> dict[str, tuple[str, str]]:
    return {
        "abs": ("/bin/sh", "is a file path"),
        "relative": ("../../bin/sh", "has an empty, '.' or '..' part"),
        "dotdot": ("echo/../../../bin/sh", "has an empty, '.' or '..' part"),
        "link": ("decoy/shell", "skill 'decoy' has no such script"),
        "hidden": ("decoy/_helper", "skill 'decoy' has no such script"),
        "hidden-path": (str(decoy / "scripts" / "_helper"), "is a file path"),
        "not-a-script": ("decoy/references/tool", "is not of the form skill/script"),
        "registered-path": (str(FIXTURE_SKILLS / "echo" / "scripts" / "echo"),
                            "is a file path"),
        "unknown": ("nobody/sh", "names no registered skill"),
    }


def test_a_plan_naming_a_program_runs_nothing(pattern_daemon):
    decoy = install_decoy(pattern_daemon.skills_root)
    marker = shm_marker()
    refused = refused_tools(decoy)
    tools = [tool(tid, path, marker) for tid, (path, _) in refused.items()]
    # The registered script, by each name form: the plan itself runs.
    tools += [tool("ok", "decoy/ok", marker), tool("ok-spec", "skills/decoy/scripts/ok", marker)]
    with pattern_daemon.client() as client:
        session = client.create_session(title="programs")
        events = run_plan(client, session.id, *tools)
        long = run_plan(client, session.id, tool("long", "x" * 5000 + "/y", marker))
    assert markers(marker) == []
    done = finished(events)
    started = {e.tool_started.tool_id for e in events if e.WhichOneof("event") == "tool_started"}
    assert started == {"ok", "ok-spec"}, started
    assert done["ok"].ok and done["ok-spec"].ok, (done["ok"].error, done["ok-spec"].error)
    for tool_id, (path, says) in refused.items():
        result = done[tool_id]
        assert not result.ok and says in result.error, (tool_id, result.error)
        assert repr(path) in result.error  # names the toolPath
    # A long toolPath is named, not echoed whole.
    error = finished(long)["long"].error
    assert len(error) < 300 and "5002 characters" in error, error
    # The link is not offered to planners either: discovery skipped it, saying why.
    with pattern_daemon.client() as client:
        [info] = [s for s in client.list_skills() if s.name == "decoy"]
    assert list(info.scripts) == ["decoy/ok"]


def test_narratoria_turn_plan_refuses_a_shell_too(pattern_daemon, tmp_path):
    marker = shm_marker()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"requestId": "shell", "narrative": "Nothing happens.",
                                "tools": [tool("sh", "/bin/sh", marker)]}))
    sid = cli(pattern_daemon, "session", "new").stdout.strip()
    out = cli(pattern_daemon, "turn", "--session", sid, "--plan", str(plan), "--execute-only",
              "--json")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    [finish] = [e["tool_finished"] for e in events if e["kind"] == "tool_finished"]
    assert not finish.get("ok") and "'/bin/sh' is a file path" in finish["error"], finish
    assert not any(e["kind"] == "tool_started" for e in events)
    assert markers(marker) == []


def test_only_plan_run_with_its_development_switch_runs_a_script_path(tmp_path):
    """The local command: a path is refused by default, and runs with the switch."""
    marker = tmp_path / "MARKER"
    script = tmp_path / "loose"
    script.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch {marker}\n"
                      """echo '{"version": "0", "type": "done", "ok": true}'\n""")
    script.chmod(0o755)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"requestId": "loose", "tools": [
        {"toolId": "t", "toolPath": str(script), "retryPolicy": {"maxRetries": 0}}]}))
    refused = subprocess.run([str(NARRATORIA), "plan", "run", str(plan), "--json"],
                             capture_output=True, text=True, timeout=120)
    assert not marker.exists()
    assert refused.returncode == 1, refused.stderr
    [result] = json.loads(refused.stdout)["toolResults"]
    assert result["state"] == "failed" and result["error"]["code"] == "tool_path_refused"
    allowed = subprocess.run([str(NARRATORIA), "plan", "run", str(plan), "--json",
                              "--allow-script-paths"], capture_output=True, text=True, timeout=120)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert marker.exists()
    helptext = subprocess.run([str(NARRATORIA), "plan", "run", "--help"], capture_output=True,
                              text=True, timeout=60).stdout
    assert "--allow-script-paths" in helptext
