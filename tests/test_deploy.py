"""deploy/: the systemd user unit, the Ray cluster config, the container file, and the
daemon options and client defaults they rely on (no daemon started here; the two-node
cluster is tests/test_ray_cluster.py)."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from narratoria.actors.daemon import (DRAIN_S, DaemonError, config_from_args, parse_resource,
                                      planner_names)
from narratoria.clients.cli import build_parser
from narratoria.runtime.host import endpoint

from conftest import REPO

DEPLOY = REPO / "deploy"
UNIT = DEPLOY / "systemd" / "narratoria.service"
NARRATORIA = Path(sys.executable).parent / "narratoria"


def _unit() -> configparser.ConfigParser:
    # systemd units are ini-like: keys are case-sensitive, `%` is a specifier (no
    # interpolation), and a key may repeat (strict=False keeps the last).
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def _duration_s(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|min|m)?", value.strip())
    assert match, value
    return float(match[1]) * (60 if match[2] in ("min", "m") else 1)


def test_the_systemd_unit_serves_on_the_runtime_dir_socket_and_stops_gracefully():
    unit = _unit()
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert Path(argv[0]).name == "narratoria" and argv[1] == "serve"
    socket = argv[argv.index("--socket") + 1]
    assert socket.startswith("%t/narratoria/"), socket
    assert service["RuntimeDirectory"] == "narratoria"  # %t/narratoria, made for it
    assert service["Restart"] == "on-failure"
    assert service.get("KillSignal", "SIGTERM") == "SIGTERM"
    assert service["KillMode"] == "mixed"  # SIGTERM to the daemon only: it drains turns
    assert _duration_s(service["TimeoutStopSec"]) >= DRAIN_S + 10
    assert unit["Install"]["WantedBy"] == "default.target"
    # The unit's arguments are ones `narratoria serve` accepts.
    args = build_parser().parse_args([a.replace("%t", "/run/user/1000") for a in argv[1:]])
    assert args.socket == "/run/user/1000/narratoria/daemon.sock"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path):
    # verify checks that ExecStart's program exists: point it at this checkout's command.
    text = UNIT.read_text()
    assert "%h/narratoria/.venv/bin/narratoria" in text
    unit = tmp_path / "narratoria.service"
    unit.write_text(text.replace("%h/narratoria/.venv/bin/narratoria", str(NARRATORIA)))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR") or str(runtime)}
    out = subprocess.run(["systemd-analyze", "verify", "--user", str(unit)],
                         capture_output=True, text=True, timeout=60, env=env)
    if out.returncode != 0 and "Failed to initialize manager" in out.stderr:
        pytest.skip(f"systemd-analyze cannot run a user manager here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    assert "narratoria.service" not in out.stderr, out.stderr  # no warnings about the unit


def test_clients_find_the_runtime_dir_socket_when_the_data_dir_has_none(tmp_path, monkeypatch):
    monkeypatch.delenv(endpoint.ADDRESS_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    data_socket = endpoint.default_socket()
    assert endpoint.client_endpoint().unix_path == data_socket  # nothing anywhere: as before
    runtime_socket = tmp_path / "run" / "narratoria" / "daemon.sock"
    runtime_socket.parent.mkdir(parents=True)
    runtime_socket.touch()
    assert endpoint.runtime_socket() == runtime_socket
    assert endpoint.client_endpoint().unix_path == runtime_socket
    data_socket.parent.mkdir(parents=True, exist_ok=True)
    data_socket.touch()  # the data dir's own socket wins
    assert endpoint.client_endpoint().unix_path == data_socket
    monkeypatch.setenv(endpoint.ADDRESS_ENV, "unix:///tmp/elsewhere.sock")
    assert endpoint.client_endpoint().unix_path == Path("/tmp/elsewhere.sock")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert endpoint.runtime_socket() is None


def test_serve_takes_planner_replicas_and_a_placement_resource():
    args = build_parser().parse_args(["serve", "--planner-replicas", "3",
                                      "--planner-resource", "narratoria_planner=0.5"])
    config = config_from_args(args)
    assert config.planner_replicas == 3 and config.planner_resource == "narratoria_planner=0.5"
    default = config_from_args(build_parser().parse_args(["serve"]))
    assert default.planner_replicas == 1 and default.planner_resource is None
    assert planner_names(1) == ["planner"]
    assert planner_names(3) == ["planner", "planner-1", "planner-2"]
    assert parse_resource("narratoria_planner") == ("narratoria_planner", 1.0)
    assert parse_resource("gpu_box=0.25") == ("gpu_box", 0.25)
    for bad in ("", "=1", "x=0", "x=-1", "x=lots"):
        with pytest.raises(DaemonError):
            parse_resource(bad)
    out = subprocess.run([str(NARRATORIA), "serve", "--planner-replicas", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--planner-replicas" in out.stderr


def test_the_ray_cluster_config_gives_every_node_a_planner_resource():
    config = yaml.safe_load((DEPLOY / "ray" / "cluster.yaml").read_text())
    assert config["provider"]["type"] == "local"
    assert config["provider"]["head_ip"] and len(config["provider"]["worker_ips"]) >= 1
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = " ".join(config[key])
        assert "ray start" in start and '"narratoria_planner": 1' in start, key
    assert "--head" in " ".join(config["head_start_ray_commands"])
    readme = (DEPLOY / "ray" / "README.md").read_text()
    for needed in ("RAY_ADDRESS=", "ray start --head", "ray start --address",
                   "--planner-replicas 2", "--planner-resource narratoria_planner"):
        assert needed in readme.replace("\\\n    ", ""), needed


def test_the_container_file_builds_the_daemon_from_setup_sh():
    text = (DEPLOY / "container" / "Containerfile").read_text()
    instructions = [line.split(None, 1) for line in text.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    assert instructions[0] == ["FROM", "python:3.11-slim"]
    assert any(i[0] == "RUN" and "deploy/setup.sh" in i[1] for i in instructions)
    assert not any(i[0] == "EXPOSE" for i in instructions)  # nothing published by default
    assert not any(i[0] == "COPY" and i[1].split()[-2:] == [".", "."] for i in instructions)
    entry = DEPLOY / "container" / "entrypoint.sh"
    assert os.access(entry, os.X_OK)
    script = entry.read_text()
    assert "narratoria serve --listen \"0.0.0.0:" in script and "daemon.token" in script
    sh = shutil.which("sh")
    if sh:
        assert subprocess.run([sh, "-n", str(entry)]).returncode == 0
    index = (DEPLOY / "README.md").read_text()
    for link in ("systemd/README.md", "ray/README.md", "container/Containerfile"):
        assert link in index


def test_the_coordinator_hands_turns_to_the_least_busy_replica_in_turn():
    from narratoria.runtime.planner.replicas import ReplicaPicker

    picker = ReplicaPicker(3)
    taken = [picker.take() for _ in range(3)]
    for index in taken:
        picker.release(index)
    assert taken + [picker.take()] == [0, 1, 2, 0]  # idle: in turn
    picker.busy = [1, 0, 2]
    assert picker.pick() == 1  # the least busy
    one = ReplicaPicker(1)
    assert [one.take() for _ in range(3)] == [0, 0, 0]  # one replica: always it
