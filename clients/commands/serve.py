"""`narratoria serve`: run the daemon (``actors/daemon.py``: Ray, the model, the store)."""

from __future__ import annotations

import argparse

from narratoria.clients.commands.options import add_skill_dirs, positive_int
from narratoria.clients.output import ExitCode, fail


def cmd_serve(args: argparse.Namespace) -> int:
    # Imported here: the daemon pulls in Ray and the model, which no other command needs.
    try:
        from narratoria.actors.daemon import serve_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("narratoria.actors.daemon", "narratoria.actors"):
            raise
        return fail("this build has no daemon (narratoria.actors.daemon is missing)",
                    ExitCode.FAILED)
    return serve_main(args)


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run the daemon")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help="unix socket to listen on (default: the data dir's daemon.sock)")
    where.add_argument("--listen", metavar="HOST:PORT",
                       help="listen on TCP instead (clients need the daemon token)")
    serve.add_argument("--data-dir", metavar="DIR", help="sessions, store, token, socket")
    serve.add_argument("--model", metavar="PATH", help="the GGUF model for planning and narration")
    add_skill_dirs(serve)
    serve.add_argument("--threads", type=positive_int, metavar="N",
                       help="CPU threads for the model (default: $NARRATORIA_THREADS, else every "
                            "core; fewer where other busy processes share the cores)")
    serve.add_argument("--seed", type=int, metavar="N",
                       help="the model's sampling seed (default 42; `eval narration --seed`)")
    serve.add_argument("--narration-mode", choices=("story", "chat", "auto"),
                       help="story: the model continues the scene as prose; chat: it answers "
                            "a chat request; auto (default): chat only for a model of 1B "
                            "parameters or more with a chat template")
    serve.add_argument("--narration-candidates", type=positive_int, metavar="N",
                       help="story mode keeps the best of N sentences written side by side "
                            "(default 3, at most 8)")
    serve.add_argument("--model-slots", type=positive_int, metavar="N",
                       help="model requests decoding side by side in one batch, from any "
                            "session (default 8, at most 32); more wait in a fair queue")
    serve.add_argument("--model-queue", type=positive_int, metavar="N",
                       help="model requests that may wait (default 64); past it a new turn is "
                            "refused with RESOURCE_EXHAUSTED")
    serve.add_argument("--skill-limit", type=int, metavar="N",
                       help="max concurrent skill processes")
    serve.add_argument("--max-skill-memory-mb", type=positive_int, metavar="MB",
                       help="the most address space a SKILL.md may ask for (default 4096)")
    serve.add_argument("--max-skill-cpu-s", type=positive_int, metavar="S",
                       help="the most CPU seconds a SKILL.md may ask for (default 300)")
    serve.add_argument("--max-skill-open-files", type=positive_int, metavar="N",
                       help="the most open files a SKILL.md may ask for (default 4096)")
    serve.add_argument("--max-tool-timeout-s", type=positive_int, metavar="S",
                       help="the longest timeout a plan's tool or a SKILL.md may ask for "
                            "(default 300)")
    serve.add_argument("--max-plan-timeout-s", type=positive_int, metavar="S",
                       help="the longest timeout a plan may ask for (default 600)")
    serve.add_argument("--max-concurrent-rpcs", type=positive_int, metavar="N",
                       help="gRPC calls in flight at once, a turn's stream included; past it "
                            "a call ends RESOURCE_EXHAUSTED (default 512)")
    serve.add_argument("--planner", choices=("model", "pattern"),
                       help="who plans turns: the model (default) or the pattern planner "
                            "(no model plans: tests, weak devices)")
    serve.add_argument("--embedding-backend", choices=("local", "hash", "openai"),
                       help="the store's embeddings (default: local MiniLM)")
    serve.add_argument("--planner-replicas", type=positive_int, metavar="N",
                       help="model (planner) actors to start, each with its own model; turns go "
                            "to the least busy (default: 1). On a Ray cluster (RAY_ADDRESS) they "
                            "spread over the nodes; see deploy/ray/README.md")
    serve.add_argument("--planner-resource", metavar="NAME[=AMOUNT]",
                       help="a custom Ray resource each planner replica needs, to pin replicas "
                            "to nodes started with `ray start --resources '{\"NAME\": 1}'`")
    serve.add_argument("--supervisor-resource", metavar="NAME[=AMOUNT]",
                       help="a custom Ray resource the skill supervisor needs: skill processes "
                            "then run on the node that offers it (see deploy/ray/README.md)")
    serve.add_argument("--skill-containment", choices=("auto", "cgroup", "subreaper", "off"),
                       help="how every process a skill starts dies with its invocation: a "
                            "cgroup per invocation where one is writable, else a subreaper "
                            "(auto, the default); 'off' keeps the process group alone, for "
                            "measurements only")
    serve.add_argument("--json", action="store_true")
    serve.set_defaults(func=cmd_serve)
