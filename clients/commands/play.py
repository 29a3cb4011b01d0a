"""`narratoria play`: the terminal front-end (``clients/play.py``) on a daemon session."""

from __future__ import annotations

import argparse
from pathlib import Path

from narratoria.clients.commands.remote import daemon_command
from narratoria.clients.output import ExitCode, fail

DEFAULT_AUTO_TURNS = 3


def cmd_play(args: argparse.Namespace) -> int:
    bad = ExitCode.BAD_INPUT
    if args.turns is not None and args.turns < 1:
        return fail("--turns must be at least 1", bad)
    if args.session and (args.campaign or args.title or args.character):
        return fail("--campaign, --title and --character are for a new session, "
                    "not with --session", bad)
    if args.script and not Path(args.script).is_file():
        return fail(f"--script {args.script}: no such file", bad)
    if args.auto and args.turns is None:
        args.turns = DEFAULT_AUTO_TURNS
    from narratoria.clients import play

    return play.cmd_play(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="play in the terminal (a daemon session)",
                       description="Create (or --session resume) a session and play it: "
                                   "a number picks a choice, other text is free text; "
                                   "/state, /retry, /rewind N, /help, /quit. Reads the terminal, a pipe, "
                                   "--script FILE, or nothing with --auto.")
    p.add_argument("--session", metavar="ID",
                   help="resume this session (default: a new one); an ended one is not "
                        "played: play says so and offers a branch or a new session")
    p.add_argument("--campaign", metavar="ID|PATH",
                   help="the new session's campaign: a built-in or user campaign's id "
                        "(`narratoria campaigns list`), or a folder or package")
    p.add_argument("--title", metavar="T", help="the new session's title")
    p.add_argument("--character", metavar="ID",
                   help="play as this fresh character (`narratoria characters list`), "
                        "realised in the --campaign")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--auto", action="store_true",
                        help="no input: always pick choice 1 (\"look around\" while there are "
                             f"no choices); plays --turns turns, {DEFAULT_AUTO_TURNS} by default")
    source.add_argument("--script", metavar="FILE",
                        help="read the player's lines from FILE (# starts a comment line)")
    p.add_argument("--turns", type=int, metavar="N", help="stop after N turns")
    p.add_argument("--end", action="store_true", help="end the session when leaving")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show phases, plans, tool starts and logs")
    p.add_argument("--json", action="store_true",
                   help="one JSON object a line: the session, then every turn event")
    p.set_defaults(func=daemon_command(cmd_play))
