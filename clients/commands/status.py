"""`narratoria status`: the daemon's actors, model, skill processes and sessions."""

from __future__ import annotations

import argparse
import sys

from narratoria.clients.commands.remote import daemon_command
from narratoria.clients.output import ExitCode, print_json


def cmd_status(args: argparse.Namespace) -> int:
    from narratoria.clients.client import NarratoriaClient, message_to_dict
    from narratoria.clients.render import format_status

    with NarratoriaClient() as client:
        status = client.status()
    if args.json:
        print_json(message_to_dict(status))
    else:
        sys.stdout.write(format_status(status))
    return ExitCode.SUCCESS


def register(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="the daemon's actors, model, skill processes, sessions")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=daemon_command(cmd_status))
