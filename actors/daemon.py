"""`narratoria serve`: start Ray (or join RAY_ADDRESS), the actors and the gRPC server.

Prints one ready line when every actor has answered and the endpoint is bound.
SIGTERM or SIGINT: stop taking turns, let turns in flight finish (5 s), cancel
what remains (the supervisor kills skill process groups), stop the server and Ray.

On a Ray cluster (``RAY_ADDRESS``, see deploy/ray/README.md): the store, embedder,
supervisor and coordinator stay on this node (they read the data dir and the
socket); ``--planner-replicas N`` starts N planner actors (``planner``,
``planner-1``, ...), spread over the nodes, or each on a node that offers the
custom resource ``--planner-resource`` names. The coordinator hands each turn to
the least busy replica. ``--supervisor-resource`` moves the skill supervisor (and
so every skill process) to a node offering that resource; skill processes there
dial the daemon's endpoint (the socket path on one machine, the daemon node's
address with ``--listen``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

DRAIN_S = 5.0
DEFAULT_SKILL_LIMIT = 8
# Calls in flight at once; past it a call ends RESOURCE_EXHAUSTED at once (no handler
# runs, its message is dropped). Each call may hold a request of up to 8 MiB (measured:
# ~9 MB of the daemon's memory per 4.7 MB portrait being saved; 600 at once reached
# 5.2 GB), and a turn's stream is a call for the whole turn: 512 keeps hundreds of
# sessions streaming and bounds that memory (serve --max-concurrent-rpcs sets it).
DEFAULT_MAX_CONCURRENT_RPCS = 512
RAY_DIR_PREFIX = "nr-ray-"
RESOURCE_WAIT_S = 15.0  # how long --planner-resource waits for nodes that offer it

# The actors are plain classes; here they become Ray actors, each with its options.
# num_cpus 0: none holds a CPU in Ray's accounting, so all of them fit on a small
# device (the model sizes its own threads). max_restarts -1: Ray starts a dead one
# again (the call in flight fails; the scene falls back). max_concurrency: calls in
# flight at once, most of them waiting (on a turn's stages, skills, the model's queue).
ACTOR_OPTIONS: dict[str, dict[str, Any]] = {
    "CoordinatorActor": {"num_cpus": 0, "max_restarts": -1, "max_concurrency": 1000},
    "SkillSupervisorActor": {"num_cpus": 0, "max_restarts": -1, "max_concurrency": 256},
    "PlannerActor": {"num_cpus": 0, "max_restarts": -1, "max_concurrency": 64},
    "EmbedderActor": {"num_cpus": 0, "max_restarts": -1, "max_concurrency": 64},
    # Threaded: DuckDB serves concurrent readers through per-thread cursors.
    "StoreActor": {"num_cpus": 0, "max_restarts": -1, "max_concurrency": 16},
}


@functools.cache
def remote(cls: type) -> Any:
    """``cls`` (one of ``narratoria.actors``' classes) as a Ray actor class with its
    ``ACTOR_OPTIONS``: ``remote(StoreActor).options(name="store").remote(data_dir)``."""
    import ray

    return ray.remote(**ACTOR_OPTIONS[cls.__name__])(cls)


@dataclass
class DaemonConfig:
    data_dir: Path
    socket: Path | None = None
    listen: str | None = None
    model: str | None = None
    skill_dirs: list[Path] = field(default_factory=list)
    skill_limit: int = DEFAULT_SKILL_LIMIT
    embedding_backend: str = "local"
    json_output: bool = False
    planner: str = "model"
    threads: int | None = None  # the model's CPU threads (None: every core)
    seed: int | None = None  # the model's sampling seed (None: the planner's default)
    # How the model narrates (runtime/planner/model.py NARRATION_MODES) and how many
    # candidate sentences story mode keeps the best of (None: the planner's default).
    narration_mode: str = "auto"
    narration_candidates: int | None = None
    # Model requests decoding side by side (runtime/planner/batching.py; None: its default).
    model_slots: int | None = None
    model_queue: int | None = None  # requests that may wait for the model (None: its default)
    planner_replicas: int = 1
    # A custom Ray resource each planner replica needs ("NAME" or "NAME=AMOUNT"):
    # replicas go only to nodes started with `ray start --resources '{"NAME": ...}'`.
    planner_resource: str | None = None
    # The same for the skill supervisor: skills then run on the node offering it.
    supervisor_resource: str | None = None
    # The most a SKILL.md or a plan may ask for (runtime/skillrun/limits.py SkillCaps), by field.
    skill_caps: dict[str, float] = field(default_factory=dict)
    # How a skill's descendants die with it (runtime/skillrun/containment.py MODES).
    skill_containment: str = "auto"
    # gRPC calls in flight at once (DEFAULT_MAX_CONCURRENT_RPCS).
    max_concurrent_rpcs: int = DEFAULT_MAX_CONCURRENT_RPCS


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    from narratoria.runtime.host.paths import default_data_dir

    return DaemonConfig(
        data_dir=Path(args.data_dir) if getattr(args, "data_dir", None) else default_data_dir(),
        socket=Path(args.socket) if getattr(args, "socket", None) else None,
        listen=getattr(args, "listen", None),
        model=getattr(args, "model", None),
        skill_dirs=[Path(p) for p in (getattr(args, "skills_dir", None) or [])],
        skill_limit=int(getattr(args, "skill_limit", None) or DEFAULT_SKILL_LIMIT),
        embedding_backend=getattr(args, "embedding_backend", None) or "local",
        json_output=bool(getattr(args, "json", False)),
        planner=getattr(args, "planner", None) or "model",
        threads=getattr(args, "threads", None),
        seed=getattr(args, "seed", None),
        narration_mode=getattr(args, "narration_mode", None) or "auto",
        narration_candidates=getattr(args, "narration_candidates", None),
        model_slots=getattr(args, "model_slots", None),
        model_queue=getattr(args, "model_queue", None),
        planner_replicas=int(getattr(args, "planner_replicas", None) or 1),
        planner_resource=getattr(args, "planner_resource", None),
        supervisor_resource=getattr(args, "supervisor_resource", None),
        skill_caps={cap: value for cap, flag in _CAP_FLAGS.items()
                    if (value := getattr(args, flag, None)) is not None},
        skill_containment=getattr(args, "skill_containment", None) or "auto",
        max_concurrent_rpcs=int(getattr(args, "max_concurrent_rpcs", None)
                                or DEFAULT_MAX_CONCURRENT_RPCS))


# SkillCaps field -> the serve argument that sets it (--max-skill-memory-mb...).
_CAP_FLAGS = {"memory_mb": "max_skill_memory_mb", "cpu_s": "max_skill_cpu_s",
              "open_files": "max_skill_open_files", "tool_timeout_s": "max_tool_timeout_s",
              "plan_timeout_s": "max_plan_timeout_s"}


def serve_main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        # Before Ray, the model or the database: a second daemon on this data dir is
        # refused in a Python start, not after Ray's start and DuckDB's lock error. Held
        # until serve() has shut Ray down; the kernel frees it if this process is killed.
        with _data_dir_lock(config.data_dir):
            return asyncio.run(serve(config))
    except DaemonError as exc:
        print(f"narratoria serve: {exc}", file=sys.stderr)
        return 2


class DaemonError(RuntimeError):
    pass


@contextlib.contextmanager
def _data_dir_lock(data_dir: Path) -> Iterator[None]:
    """The data dir's lock (runtime/host/data_lock.py) for the daemon's life, its
    refusal as a DaemonError."""
    from narratoria.runtime.files import PRIVATE_UMASK
    from narratoria.runtime.host import data_lock

    os.umask(PRIVATE_UMASK)  # the data dir may be created here: private from the start
    try:
        fd = data_lock.acquire(data_dir)
    except data_lock.DataDirInUse as exc:
        raise DaemonError(str(exc)) from None
    except OSError as exc:
        raise DaemonError(f"cannot lock data dir {data_dir} "
                          f"({data_lock.lock_path(data_dir)}): {exc.strerror or exc}") from None
    try:
        yield
    finally:
        data_lock.release(fd)


def _endpoint(config: DaemonConfig) -> Any:
    from narratoria.runtime.host.endpoint import EndpointError, default_socket, parse_address, unix_endpoint

    try:
        if config.listen:
            return parse_address(config.listen)
        return unix_endpoint(config.socket or default_socket(config.data_dir))
    except EndpointError as exc:
        raise DaemonError(str(exc)) from None


def _skill_roots(config: DaemonConfig) -> list[str]:
    from narratoria.runtime.skills.registry import builtin_skills_dir, user_skills_dir

    roots = [builtin_skills_dir(), user_skills_dir(), *config.skill_dirs]
    for root in config.skill_dirs:
        if not root.is_dir():
            raise DaemonError(f"--skills-dir {root}: not a directory")
    return [str(r) for r in roots]


def planner_names(replicas: int) -> list[str]:
    """The replicas' actor names: ``planner`` (what everything else looks up), then
    ``planner-1``, ``planner-2``, ..."""
    return ["planner", *(f"planner-{i}" for i in range(1, replicas))]


def parse_resource(spec: str, flag: str = "--planner-resource") -> tuple[str, float]:
    """``NAME`` or ``NAME=AMOUNT`` (a positive number; 1 when left out)."""
    name, sep, amount = spec.partition("=")
    name = name.strip()
    try:
        value = float(amount) if sep else 1.0
    except ValueError:
        value = -1.0
    if not name or value <= 0:
        raise DaemonError(f"{flag} {spec!r}: expected NAME or NAME=AMOUNT (AMOUNT > 0)")
    return name, value


def _local_node() -> dict[str, Any]:
    """Actor options that keep an actor on this node (when joined to a cluster: the
    store and coordinator read the data dir, skill processes dial the local socket)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}


def _planner_options(config: DaemonConfig, joined: bool) -> list[dict[str, Any]]:
    """Ray options for each planner replica, in name order."""
    import ray

    placement: dict[str, Any] = {}
    if config.planner_resource:
        name, amount = parse_resource(config.planner_resource)
        _await_resource("--planner-resource", name, amount * config.planner_replicas,
                        f"{config.planner_replicas} replica(s)")
        placement = {"resources": {name: amount}}
    elif config.planner_replicas > 1:
        placement = {"scheduling_strategy": "SPREAD"}
    elif joined:
        placement = _local_node()  # one replica, no placement asked: next to the daemon
    return [{"name": n, **placement} for n in planner_names(config.planner_replicas)]


def _await_resource(flag: str, name: str, need: float, who: str) -> None:
    """Wait until the cluster offers ``need`` of resource ``name`` (a node that was just
    started may still be joining), or say which nodes to start."""
    import ray

    deadline = time.monotonic() + RESOURCE_WAIT_S
    while (have := float(ray.cluster_resources().get(name, 0.0))) < need \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    if have < need:
        raise DaemonError(
            f"{flag} {name}: the Ray cluster offers {have:g} of it, {who} need {need:g} "
            f"(start nodes with `ray start --resources '{{\"{name}\": 1}}'`)")


def _supervisor_options(config: DaemonConfig, here: dict[str, Any]) -> dict[str, Any]:
    """Ray options of the skill supervisor: next to the daemon, or on a node that offers
    ``--supervisor-resource``."""
    if not config.supervisor_resource:
        return {"name": "supervisor", **here}
    name, amount = parse_resource(config.supervisor_resource, "--supervisor-resource")
    _await_resource("--supervisor-resource", name, amount, "the skill supervisor")
    return {"name": "supervisor", "resources": {name: amount}}


def _skill_target(endpoint: Any) -> str:
    """The address skill processes dial: a wildcard --listen host means "this node",
    which a supervisor on another node must reach by this node's address."""
    target = endpoint.grpc_target
    host, sep, port = target.rpartition(":")
    if endpoint.is_tcp and sep and host.strip("[]") in ("0.0.0.0", "::", ""):
        import ray

        return f"{ray.util.get_node_ip_address()}:{port}"
    return target


def actor_nodes(actors: dict[str, Any]) -> dict[str, str]:
    """Actor name -> the id of the Ray node it runs on ("" when Ray does not say)."""
    from ray._private import state

    nodes: dict[str, str] = {}
    for name, handle in actors.items():
        try:
            info = state.actors(actor_id=handle._actor_id.hex())
            nodes[name] = str(info.get("Address", {}).get("NodeID", ""))
        except Exception:  # noqa: BLE001 - placement is reported, never needed
            nodes[name] = ""
    return nodes


WORKER_NICENESS = 0
# Ray's GCS keeps every task's events (its error message included) for the dashboard and
# the state API, up to 100,000 tasks: a daemon polled for every turn's events, or flooded
# with bad requests, grew by hundreds of MB there. The daemon reads none of it.
RAY_SYSTEM_CONFIG = {"worker_niceness": WORKER_NICENESS, "task_events_report_interval_ms": 0}


def _start_ray(temp_dir: str) -> None:
    import ray

    address = os.environ.get("RAY_ADDRESS")
    # Ray's socket paths must fit 107 bytes, so its session folder lives under a short path.
    # Ray runs workers at nice 15 by default; the planner actor is the one doing the
    # work a player waits for, and at nice 15 every wake-up of the gRPC server, the
    # raylet or a client preempted llama.cpp's two threads (daemon narration decoded
    # at ~70 tokens/s against ~90 in a bare process on 2 cores).
    local = {"_temp_dir": temp_dir, "num_cpus": os.cpu_count() or 1,
             "_system_config": RAY_SYSTEM_CONFIG}
    ray.init(address=address or None, namespace="narratoria", include_dashboard=False,
             logging_level=logging.WARNING, log_to_driver=False, **({} if address else local))


async def serve(config: DaemonConfig) -> int:
    import grpc
    import ray

    from narratoria.proto import narratoria_pb2_grpc as rpc
    from narratoria.runtime.host.endpoint import TOKEN_ENV, ensure_token, publish_token, remove_token_beside
    from narratoria.runtime.host.identity import CLIENT_TOKEN_ENV
    from narratoria.runtime.files import PRIVATE_UMASK, make_private
    from narratoria.runtime.planner.model import (MAX_NARRATION_CANDIDATES, MAX_SLOTS, check_model_file,
                                                  default_model_path)

    from narratoria.actors.coordinator import CoordinatorActor
    from narratoria.actors.embedder import EmbedderActor
    from narratoria.actors.planner import PlannerActor
    from narratoria.runtime.host.identity import ClientRegistry
    from narratoria.runtime.host.stale_dirs import claim, sweep

    from narratoria.actors.server import (Daemon, IdentityInterceptor, ModelService, NarratoriaService,
                         RequestDecodeInterceptor, StoreService)
    from narratoria.actors.store import StoreActor
    from narratoria.actors.supervisor import SkillSupervisorActor

    started = time.monotonic()
    # A front-end's tokens in the shell that started the daemon are not the daemon's to
    # keep: its workers resolve skill settings from their environment (``${VAR}``,
    # ``x-env-var``), and a skill may name these.
    for name in (TOKEN_ENV, CLIENT_TOKEN_ENV):
        os.environ.pop(name, None)
    endpoint = _endpoint(config)
    roots = _skill_roots(config)
    model_path = Path(config.model) if config.model else default_model_path()
    try:
        check_model_file(model_path)
    except Exception as exc:  # noqa: BLE001 - a clear message before anything starts
        raise DaemonError(str(exc)) from None
    if config.narration_candidates is not None \
            and not 1 <= config.narration_candidates <= MAX_NARRATION_CANDIDATES:
        raise DaemonError(f"--narration-candidates: {config.narration_candidates} is not "
                          f"between 1 and {MAX_NARRATION_CANDIDATES}")
    if config.model_slots is not None and not 1 <= config.model_slots <= MAX_SLOTS:
        raise DaemonError(f"--model-slots: {config.model_slots} is not between 1 and {MAX_SLOTS}")
    # Private at creation for everything this process and its Ray workers (the store's
    # database and WAL, the journal, the token, clients.json, characters) write; a data
    # dir made before that is corrected once, here, before anything opens it.
    os.umask(PRIVATE_UMASK)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    if loosened := make_private(config.data_dir):
        shown = ", ".join(loosened[:5]) + (f" and {len(loosened) - 5} more" if len(loosened) > 5 else "")
        _progress(config, f"data dir {config.data_dir}: removed group/other access from "
                          f"{len(loosened)} path(s): {shown}")
    if endpoint.unix_path is not None:
        endpoint.unix_path.parent.mkdir(parents=True, exist_ok=True)
        if endpoint.unix_path.exists():
            _refuse_if_live(endpoint.unix_path)
            endpoint.unix_path.unlink()
    # Every endpoint needs the daemon token (skills can connect to the socket too); one
    # beside a socket outside the data dir lets clients that know only the socket find it.
    token = ensure_token(config.data_dir)
    if endpoint.unix_path is not None:
        try:
            publish_token(endpoint.unix_path, config.data_dir, token)
        except OSError as exc:
            raise DaemonError(f"cannot write the daemon token beside {endpoint.unix_path}: "
                              f"{exc.strerror or exc}") from None

    if config.planner_replicas < 1:
        raise DaemonError("--planner-replicas: at least 1")
    swept = sweep(RAY_DIR_PREFIX)  # left by daemons that were killed
    if swept:
        _progress(config, f"removed {len(swept)} stale Ray folder(s) of killed daemons")
    temp_dir = str(claim(RAY_DIR_PREFIX))
    _progress(config, "starting Ray" if not os.environ.get("RAY_ADDRESS")
              else f"joining the Ray cluster at {os.environ['RAY_ADDRESS']}")
    _start_ray(temp_dir)
    try:
        joined = bool(os.environ.get("RAY_ADDRESS"))
        here = _local_node() if joined else {}
        planner_opts = _planner_options(config, joined)
        _progress(config, "starting actors (model, embedder, store, supervisor)"
                  if len(planner_opts) == 1 else
                  f"starting actors ({len(planner_opts)} model replicas, embedder, store, supervisor)")
        try:
            embedder = remote(EmbedderActor).options(name="embedder", **here).remote(
                config.embedding_backend)
            planners = {o["name"]: remote(PlannerActor).options(**o).remote(
                str(model_path), config.threads, seed=config.seed,
                narration_mode=config.narration_mode,
                narration_candidates=config.narration_candidates, slots=config.model_slots,
                max_waiting=config.model_queue)
                        for o in planner_opts}
            store = remote(StoreActor).options(name="store", **here).remote(str(config.data_dir))
            supervisor = remote(SkillSupervisorActor).options(
                **_supervisor_options(config, here)).remote(
                roots, config.skill_limit, _skill_target(endpoint), str(config.data_dir),
                None if joined else temp_dir, caps=config.skill_caps,
                containment=config.skill_containment)
            coordinator = remote(CoordinatorActor).options(name="coordinator", **here).remote(
                str(config.data_dir / "analytics.jsonl"), planner_kind=config.planner,
                data_dir=str(config.data_dir),
                **({"planner_names": list(planners)} if len(planners) > 1 else {}))
        except ValueError as exc:  # a name taken: another daemon in this Ray namespace
            raise DaemonError(f"cannot create the actors: {exc}") from None
        planner = planners["planner"]
        actors = {"coordinator": coordinator, "planner": planner, "embedder": embedder,
                  "store": store, "supervisor": supervisor,
                  **{n: a for n, a in planners.items() if n != "planner"}}
        try:
            await asyncio.gather(*(a.status.remote() for a in actors.values()))
        except Exception as exc:  # noqa: BLE001
            raise DaemonError(f"an actor failed to start: {exc}") from None
        warm_s = 0.0
        if config.planner == "model":
            # ~1.5 s now instead of in the first player's turn (which has a 5 s plan budget).
            _progress(config, "reading the planning prompt into the model's cache")
            try:
                warm_s = max(await asyncio.gather(*(p.warm.remote(roots)
                                                    for p in planners.values())))
            except Exception:  # noqa: BLE001 - a cold first turn is not a reason to stop
                logging.getLogger(__name__).warning("warming the planner failed", exc_info=True)

        daemon = Daemon(actors, str(config.data_dir), str(model_path), token=token)
        server = grpc.aio.server(
            interceptors=[RequestDecodeInterceptor(),
                          IdentityInterceptor(token, ClientRegistry(config.data_dir))],
            # 8 MiB: a character's portrait (SaveCharacter) may be 5 MB
            # (docs/campaigns.md, "Player characters").
            options=[("grpc.max_receive_message_length", 8 << 20)],
            maximum_concurrent_rpcs=config.max_concurrent_rpcs)
        rpc.add_NarratoriaServicer_to_server(NarratoriaService(daemon), server)
        rpc.add_StoreServicer_to_server(StoreService(daemon), server)
        rpc.add_ModelServicer_to_server(ModelService(daemon), server)
        if server.add_insecure_port(endpoint.grpc_target) == 0:
            raise DaemonError(f"cannot listen on {endpoint.grpc_target}")
        await server.start()
        if endpoint.unix_path is not None:
            os.chmod(endpoint.unix_path, 0o600)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ready = {"event": "ready", "address": endpoint.grpc_target, "dataDir": str(config.data_dir),
                 "model": str(model_path), "pid": os.getpid(),
                 "startupS": round(time.monotonic() - started, 2), "warmS": round(warm_s, 2)}
        if not joined:
            ready["rayDir"] = temp_dir  # this daemon's own Ray folder (skills are kept out)
        if joined or len(planners) > 1:
            nodes = actor_nodes(planners)
            ready["rayAddress"] = os.environ.get("RAY_ADDRESS", "")
            ready["planners"] = [{"name": n, "node": nodes[n]} for n in planners]
            ready["supervisorNode"] = actor_nodes({"supervisor": supervisor})["supervisor"]
        if config.json_output:
            print(json.dumps(ready), flush=True)
        else:
            print(f"narratoria daemon ready on {endpoint.grpc_target} "
                  f"(data {config.data_dir}, pid {os.getpid()}, {ready['startupS']} s)", flush=True)
        await stop.wait()

        daemon.draining = True
        _progress(config, "draining turns in flight")
        left = await coordinator.drain.remote(DRAIN_S)
        cancelled = await supervisor.shutdown.remote()
        await server.stop(1.0)
        _progress(config, f"stopped ({left} turns unfinished, {cancelled} plans cancelled)")
        return 0
    finally:
        ray.shutdown()
        if endpoint.unix_path is not None:
            endpoint.unix_path.unlink(missing_ok=True)
            remove_token_beside(endpoint.unix_path, token)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _refuse_if_live(path: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return  # a stale socket from a daemon that died
    raise DaemonError(f"a daemon is already listening on {path}")


def _progress(config: DaemonConfig, text: str) -> None:
    print(f"narratoria serve: {text}", file=sys.stderr, flush=True)
