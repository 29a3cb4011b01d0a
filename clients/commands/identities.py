"""`narratoria clients add|list|remove`: the front-ends allowed their own sessions
(``runtime/host/identity.py``).

Local commands: they edit ``clients.json`` in the data directory, which a running
daemon re-reads on its next call. ``add`` prints the new client's token once; give
it to that front-end as ``NARRATORIA_CLIENT_TOKEN``. Exit status: ``FAILED`` for a
client that is not there, ``BAD_INPUT`` for a name or file the registry refuses.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from narratoria.clients.output import Command, Expected, ExitCode, emit, fail, reporting

if TYPE_CHECKING:
    from narratoria.runtime.host.identity import ClientRegistry


def _registry(args: argparse.Namespace) -> ClientRegistry:
    from narratoria.runtime.host.identity import ClientRegistry
    from narratoria.runtime.host.paths import default_data_dir

    return ClientRegistry(default_data_dir())


def cmd_add(args: argparse.Namespace) -> int:
    from narratoria.runtime.host.identity import CLIENT_TOKEN_ENV

    token = _registry(args).add(args.name)
    emit({"name": args.name, "token": token, "env": CLIENT_TOKEN_ENV}, args.json, token)
    if not args.json:
        print(f"give this token to the front-end as {CLIENT_TOKEN_ENV}; it is not shown again",
              file=sys.stderr)
    return ExitCode.SUCCESS


def cmd_list(args: argparse.Namespace) -> int:
    names = _registry(args).names()
    emit({"clients": names}, args.json,
         names or "no clients (every caller is the local user)")
    return ExitCode.SUCCESS


def cmd_remove(args: argparse.Namespace) -> int:
    if not _registry(args).remove(args.name):
        return fail(f"no client {args.name!r}", ExitCode.FAILED)
    print(f"client {args.name} removed; its token no longer works")
    return ExitCode.SUCCESS


def _identity_errors() -> list[Expected]:
    from narratoria.runtime.host.identity import IdentityError

    return [(IdentityError, ExitCode.BAD_INPUT)]


def _run(command: Command) -> Command:
    return reporting(command, _identity_errors)


def register(sub: argparse._SubParsersAction) -> None:
    clients = sub.add_parser("clients", help="front-ends with their own sessions (client tokens)")
    actions = clients.add_subparsers(dest="clients_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="a new client; prints its token once")
    add.add_argument("name")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=_run(cmd_add))
    ls = actions.add_parser("list", help="the clients' names")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_run(cmd_list))
    rm = actions.add_parser("remove", help="revoke a client's token")
    rm.add_argument("name")
    rm.set_defaults(func=_run(cmd_remove))
