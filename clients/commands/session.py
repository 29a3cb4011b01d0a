"""`narratoria session new|list|show|branch|cancel|end|export|import`: daemon sessions, over gRPC."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from narratoria.clients.commands import local
from narratoria.clients.commands.options import positive_int
from narratoria.clients.commands.remote import daemon_command
from narratoria.clients.output import ExitCode, emit, fail, print_json


def _client():
    from narratoria.clients.client import NarratoriaClient

    return NarratoriaClient()


def _doc(message) -> dict:
    from narratoria.clients.client import message_to_dict

    return message_to_dict(message)


def cmd_session_new(args: argparse.Namespace) -> int:
    from narratoria.clients.client import campaign_ref

    initial = local.load_state(args.state).tree if args.state else None
    with _client() as client:
        session = client.create_session(campaign=campaign_ref(args.campaign or ""),
                                        title=args.title or "", character_id=args.character or "",
                                        state=initial)
    emit(_doc(session), args.json, session.id)
    return ExitCode.SUCCESS


def cmd_session_list(args: argparse.Namespace) -> int:
    from narratoria.clients.render import format_session_line

    with _client() as client:
        sessions = client.list_sessions(include_ended=args.all)
    if args.json:
        print_json({"sessions": [_doc(s) for s in sessions]})
    elif not sessions:
        print("no sessions" if args.all else "no active sessions (--all shows ended ones)")
    else:
        sys.stdout.write("".join(format_session_line(s) for s in sessions))
    return ExitCode.SUCCESS


def cmd_session_branch(args: argparse.Namespace) -> int:
    """Rewind: a new session retrying --session from scene --at-scene (default: the last)."""
    with _client() as client:
        session = client.branch(args.session, at_scene=args.at_scene or 0)
    emit(_doc(session), args.json, session.id)
    if not args.json:
        print(f"branched from {session.parent_session_id} at scene {session.branched_at_scene}: "
              f"scene {session.branched_at_scene} is next (the old session is unchanged)",
              file=sys.stderr)
    return ExitCode.SUCCESS


def cmd_session_cancel(args: argparse.Namespace) -> int:
    with _client() as client:
        reply = client.cancel_turn(args.id)
    emit(_doc(reply), args.json,
         f"turn {reply.turn_id} cancelled; session {args.id} is as it was before it"
         if reply.cancelled else f"nothing cancelled: {reply.reason}")
    return ExitCode.SUCCESS if reply.cancelled else ExitCode.FAILED


def cmd_session_end(args: argparse.Namespace) -> int:
    with _client() as client:
        session = client.end_session(args.id)
    emit(_doc(session), args.json, f"session {session.id} {session.status} after "
                                   f"{session.turns} turns")
    return ExitCode.SUCCESS


def cmd_session_show(args: argparse.Namespace) -> int:
    from narratoria.clients.render import format_session, format_state

    with _client() as client:
        session = client.resume_session(args.id)
        state = client.get_state(args.id)
    if args.json:
        print_json({"session": _doc(session), "state": _doc(state)})
    else:
        sys.stdout.write(format_session(session) + "\n" + format_state(state))
    return ExitCode.SUCCESS


EXPORT_FORMATS = ("full", "markdown", "sillytavern")


def _write_file(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` whole or not at all: a temporary file beside it, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _format_of(output: str) -> str:
    """The format a file name asks for when --format is not given."""
    suffix = Path(output).suffix.lower()
    return {".md": "markdown", ".markdown": "markdown", ".jsonl": "sillytavern"}.get(suffix, "full")


def cmd_session_export(args: argparse.Namespace) -> int:
    """A playthrough as a .narratorio-full archive, or its transcript (markdown, SillyTavern)."""
    from narratoria.runtime.sessions import export

    fmt = args.format or _format_of(args.output)
    with _client() as client:
        reply = client.export_session(args.id)
    data = reply.archive
    if fmt != "full":
        archive = export.read_archive(data)
        text = export.markdown(archive) if fmt == "markdown" else export.sillytavern(archive)
        data = text.encode("utf-8")
    target = Path(args.output).expanduser()
    try:
        _write_file(target, data)
    except OSError as exc:
        return fail(f"-o {args.output}: cannot write: {exc.strerror or exc}", ExitCode.FAILED)
    emit({"status": "exported", "id": reply.session_id, "format": fmt,
          "output": str(target), "bytes": len(data)}, args.json,
         f"session {reply.session_id} exported ({fmt}, {len(data)} bytes) to {target}")
    return ExitCode.SUCCESS


def cmd_session_import(args: argparse.Namespace) -> int:
    """Restore a .narratorio-full archive as a new session (checked here first, so a bad
    file is named before anything is sent; the daemon checks it again and writes it in
    one transaction)."""
    from narratoria.runtime.sessions import export

    try:
        data = Path(args.file).expanduser().read_bytes()
    except OSError as exc:
        return fail(f"{args.file}: cannot read: {exc.strerror or exc}", ExitCode.BAD_INPUT)
    from narratoria.runtime.host.field_caps import BYTES_CAPS

    if len(data) > BYTES_CAPS["archive"]:
        return fail(f"{args.file}: {len(data)} bytes; the daemon takes an archive of at most "
                    f"{BYTES_CAPS['archive']} bytes", ExitCode.BAD_INPUT)
    try:
        archive = export.read_archive(data)
    except export.ArchiveError as exc:
        return fail(f"{args.file}: {exc}; nothing was imported", ExitCode.BAD_INPUT)
    with _client() as client:
        reply = client.import_session(data)
    session = reply.session
    doc = {"status": "imported", "session": _doc(session), "renamed_from": reply.renamed_from,
           "memories": reply.memories, "moments": reply.moments,
           "campaign": archive.manifest.get("campaign", {})}
    renamed = (f" (session {reply.renamed_from} exists here: imported as {session.id})"
               if reply.renamed_from else "")
    emit(doc, args.json, session.id)
    if not args.json:
        print(f"imported {session.turns} turns, {reply.memories} memories{renamed}",
              file=sys.stderr)
    return ExitCode.SUCCESS


def register(sub: argparse._SubParsersAction) -> None:
    session = sub.add_parser(
        "session", help="daemon sessions: new, list, show, branch, cancel, end, export, import")
    session_sub = session.add_subparsers(dest="session_command", metavar="ACTION", required=True)
    new = session_sub.add_parser("new", help="create a session and print its id")
    new.add_argument("--campaign", metavar="ID|PATH",
                     help="a built-in or user campaign's id, or a folder or package")
    new.add_argument("--character", metavar="ID",
                     help="play as this fresh character, realised in the campaign")
    new.add_argument("--title", metavar="T")
    new.add_argument("--state", metavar="FILE",
                     help="initial state (JSON object); its \"npcs\" map declares the NPCs: "
                          "id -> {\"name\", \"traits\", \"voice\", \"knows\": [facts]}")
    new.add_argument("--json", action="store_true")
    new.set_defaults(func=daemon_command(cmd_session_new))
    branch = session_sub.add_parser(
        "branch", help="rewind: a new session retrying a session from one of its scenes",
        description="Create a new session as --session was after scene N-1, so that scene N "
                    "is played again (default: the last scene). NPCs remember only what "
                    "happened before scene N; the old session is unchanged and can be resumed. "
                    "Prints the new session's id.")
    branch.add_argument("--session", required=True, metavar="ID")
    branch.add_argument("--at-scene", type=positive_int, metavar="N",
                        help="the scene to play again (1-based; default: the last one)")
    branch.add_argument("--json", action="store_true")
    branch.set_defaults(func=daemon_command(cmd_session_branch))
    sls = session_sub.add_parser("list", help="active sessions (--all: ended ones too)")
    sls.add_argument("--all", action="store_true", help="include ended sessions")
    sls.add_argument("--json", action="store_true")
    sls.set_defaults(func=daemon_command(cmd_session_list))
    exp = session_sub.add_parser(
        "export", help="a playthrough as a .narratorio-full archive, or its transcript",
        description="Write the session to one file: --format full a "
                    ".narratorio-full archive (session, turns, memories, takes, the NPCs' "
                    "knowledge) that `session import` restores; markdown a readable "
                    "transcript; sillytavern a SillyTavern chat (JSONL).")
    exp.add_argument("id", metavar="ID")
    exp.add_argument("-o", "--output", required=True, metavar="FILE")
    exp.add_argument("--format", choices=EXPORT_FORMATS,
                     help="default: from FILE's suffix (.md markdown, .jsonl sillytavern), "
                          "else full")
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(func=daemon_command(cmd_session_export))
    imp = session_sub.add_parser(
        "import", help="restore a .narratorio-full archive as a new session",
        description="Restore a playthrough exported with `session export` in this daemon's "
                    "data dir, with its memories and NPC knowledge. All or nothing; an "
                    "existing session is never overwritten (a taken id gets a new one). "
                    "Prints the session's id.")
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(func=daemon_command(cmd_session_import))
    for action, text, func in (
            ("show", "a session's last narration, choices and state", cmd_session_show),
            ("cancel", "cancel the session's turn in flight (its skills are killed, nothing "
                       "is stored)", cmd_session_cancel),
            ("end", "end a session", cmd_session_end)):
        by_id = session_sub.add_parser(action, help=text)
        by_id.add_argument("id", metavar="ID")
        by_id.add_argument("--json", action="store_true")
        by_id.set_defaults(func=daemon_command(func))
