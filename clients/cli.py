"""The `narratoria` command line.

Commands are thin: they parse arguments, call the runtime (local commands) or the
daemon over gRPC (``status``, ``session``, ``turn --session``, ``play``), and print
either a human summary or, with ``--json``, JSON on stdout: one document, or one
object a line for a streamed turn (``output.py``, with the exit codes). Each command
group is a module of ``commands/`` with a ``register(subparsers)``; this module only
puts them together and runs the one asked for.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from narratoria.clients.output import ExitCode

VERSION = "0.1.0"

# The modules of clients/commands/, in the order of `narratoria --help`'s command list.
GROUPS = ("plan", "turn", "status", "session", "play", "serve", "web", "skills", "campaigns",
          "characters", "identities", "loadtest", "bench", "eval", "train")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="narratoria",
        description="Narratoria runtime: plans, skills and the NDJSON tool protocol.",
        epilog="Start the daemon with `narratoria serve`, then `narratoria play`. Without it: "
               "`narratoria skills list`, `narratoria turn --local \"I roll the dice\"` or "
               "`narratoria plan run deploy/examples/demo-plan.json`.",
    )
    parser.add_argument("--version", action="version", version=f"narratoria {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        importlib.import_module(f"narratoria.clients.commands.{group}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return ExitCode.SUCCESS
    from narratoria.runtime.files import PRIVATE_UMASK

    # Local commands write the data dir without a daemon (campaigns ingest, characters,
    # clients): what they create is private, as what the daemon creates is.
    os.umask(PRIVATE_UMASK)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader (`| head`) went away: nothing left to say, and no traceback. Point
        # stdout at /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
