"""`narratoria clients`: the front-ends allowed their own sessions (runtime/host/identity.py).

Local commands: they edit ``clients.json`` in the data directory, which a running
daemon re-reads on its next call. ``add`` prints the new client's token once; give
it to that front-end as ``NARRATORIA_CLIENT_TOKEN``.
"""

from __future__ import annotations

import argparse
import json
import sys

from narratoria.runtime.host.identity import CLIENT_TOKEN_ENV, ClientRegistry, IdentityError
from narratoria.runtime.host.paths import default_data_dir


def _registry(args: argparse.Namespace) -> ClientRegistry:
    return ClientRegistry(default_data_dir())


def cmd_add(args: argparse.Namespace) -> int:
    token = _registry(args).add(args.name)
    if args.json:
        print(json.dumps({"name": args.name, "token": token, "env": CLIENT_TOKEN_ENV}))
    else:
        print(token)
        print(f"give this token to the front-end as {CLIENT_TOKEN_ENV}; it is not shown again",
              file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    names = _registry(args).names()
    if args.json:
        print(json.dumps({"clients": names}))
    else:
        print("\n".join(names) if names else "no clients (every caller is the local user)")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    if not _registry(args).remove(args.name):
        print(f"narratoria: no client {args.name!r}", file=sys.stderr)
        return 1
    print(f"client {args.name} removed; its token no longer works")
    return 0


def _run(command):
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except IdentityError as exc:
            print(f"narratoria: {exc}", file=sys.stderr)
            return 2
    return run


def add_clients_parser(sub: argparse._SubParsersAction) -> None:
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
