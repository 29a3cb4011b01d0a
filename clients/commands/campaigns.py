"""`narratoria campaigns validate|ingest|pack|list` (and ``related``, ``assets``:
``campaign_queries.py``): campaign folders and packages from the command line.

Local commands: the campaign folder is read here, the runtime imported when used, so
the other commands do not pay for tiktoken, DuckDB or the embedder. ``ingest`` goes
through a running daemon when one answers (it holds the database), else writes the
data dir's database itself. An invalid campaign is a failed check (``FAILED``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narratoria.clients.commands import campaign_import, campaign_queries
from narratoria.clients.output import ExitCode, err, fail, print_json

if TYPE_CHECKING:
    from narratoria.clients.client import NarratoriaClient


def _problem_docs(problems) -> list[dict[str, Any]]:
    return [campaign_queries.problem_doc(p) for p in problems]


def cmd_campaigns_validate(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import validate
    from narratoria.runtime.campaign.library import CampaignNotFound
    from narratoria.runtime.host.paths import default_data_dir

    try:  # a path as typed (problems print relative to it), else the id's folder or package
        root = _locate(args.path, default_data_dir())
    except CampaignNotFound as exc:
        return fail(str(exc.args[0]), ExitCode.FAILED)
    report = validate(root)
    if args.json:
        m = report.manifest
        print_json({"ok": report.ok, "path": str(report.root),
                     "campaign": None if m is None else {"id": m.id, "title": m.title,
                                                         "version": m.version},
                     "files": len(report.files), "problems": _problem_docs(report.problems)})
    else:
        for problem in report.problems:  # paths from here, so an editor can jump to them
            print(f"{root / problem.file}:{problem.line}: {problem.field}: "
                  f"{problem.message}" + (" (warning)" if problem.severity == "warning" else ""))
        verdict = "valid" if report.ok else "invalid"
        print(f"{root}: {verdict}: {len(report.errors)} error(s), "
              f"{len(report.warnings)} warning(s), {len(report.files)} file(s)",
              file=sys.stderr if report.problems else sys.stdout)
    return ExitCode.SUCCESS if report.ok else ExitCode.FAILED


def cmd_campaigns_ingest(args: argparse.Namespace) -> int:
    from narratoria.clients.client import ClientError, NarratoriaClient

    if not args.data_dir:
        # A running daemon holds the database: it ingests, and reports its progress.
        try:
            with NarratoriaClient(timeout_s=2) as client:
                client.status()
                return _ingest_through(client, args)
        except ClientError as exc:
            if exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                return fail(str(exc), ExitCode.FAILED)
    return _ingest_here(args)


def _ingest_through(client: NarratoriaClient, args: argparse.Namespace) -> int:
    from narratoria.clients.client import ClientError

    path = Path(args.path)
    ref = str(path.resolve()) if path.exists() else args.path  # else: a campaign id
    try:
        for progress in client.ingest_campaign(ref):
            if progress.result_json:
                result = json.loads(progress.result_json)
            elif progress.phase in ("files", "embedding") or progress.done == progress.total:
                print(f"  {progress.phase}: {progress.done}/{progress.total}", file=sys.stderr)
    except ClientError as exc:
        if args.json:
            print_json({"status": "invalid" if exc.code == "INVALID_ARGUMENT" else "error",
                         "message": exc.message})
        return fail(exc.message, ExitCode.FAILED)
    if args.json:
        print_json({**result, "via": "daemon"})
    else:
        print(f"{result['campaignId']} {result['version']}: {result['totalFiles']} file(s), "
              f"{result['textChunks']} chunk(s) ({result['chunksEmbedded']} embedded, "
              f"{result['chunksReused']} reused, {result['chunksRemoved']} removed), "
              f"{result['binaryAssets']} asset(s) in {result['totalIngestionMs']:.0f} ms "
              "(by the running daemon)")
    return ExitCode.SUCCESS


def _locate(ref: str, data_dir: Path) -> Path:
    """A folder or package path as given; else a built-in or user campaign's id
    (``CampaignLibrary.locate``, as every command that takes an id); CampaignNotFound."""
    from narratoria.runtime.campaign.library import CampaignLibrary

    if Path(ref).exists():
        return Path(ref)
    return CampaignLibrary(data_dir).locate(ref)


def _campaign_path(ref: str, data_dir: Path) -> Path:
    """:func:`_locate`, or exit FAILED naming what names nothing."""
    from narratoria.runtime.campaign.library import CampaignNotFound

    try:
        return _locate(ref, data_dir)
    except CampaignNotFound as exc:
        raise SystemExit(fail(str(exc.args[0]), ExitCode.FAILED)) from None


def _ingest_here(args: argparse.Namespace) -> int:
    import duckdb

    from narratoria.runtime.campaign import CampaignError, ingest
    from narratoria.runtime.db import DB_FILENAME, DatabaseLocked, connect
    from narratoria.runtime.embedding import make_backend
    from narratoria.runtime.host.paths import default_data_dir
    from narratoria.runtime.store import PersistenceStore

    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    try:
        con = connect(data_dir / DB_FILENAME)
    except DatabaseLocked as exc:  # names the file and the daemon's pid
        return fail(f"{exc}: stop `narratoria serve` or pass another --data-dir", ExitCode.FAILED)
    except duckdb.IOException as exc:
        return fail(f"cannot open {data_dir / DB_FILENAME}: {exc}", ExitCode.FAILED)

    def progress(phase: str, done: int, total: int) -> None:
        if phase in ("files", "embedding") or done == total:
            print(f"  {phase}: {done}/{total}", file=sys.stderr)

    try:
        with PersistenceStore(con, make_backend()) as store:
            result = ingest(_campaign_path(args.path, data_dir), store, progress=progress)
    except CampaignError as exc:
        if args.json:
            print_json({"status": "invalid", "problems": _problem_docs(exc.problems)})
        for problem in exc.problems:
            err(str(problem))
        return ExitCode.FAILED
    finally:
        con.close()
    if args.json:
        print_json(result)
    else:
        print(f"{result.campaign_id} {result.version}: {result.total_files} file(s), "
              f"{result.text_chunks} chunk(s) ({result.chunks_embedded} embedded, "
              f"{result.chunks_reused} reused, {result.chunks_removed} removed), "
              f"{result.binary_assets} asset(s) in {result.total_ingestion_ms:.0f} ms")
        for warning in result.warnings:
            print(f"  warning: {warning}")
    return ExitCode.SUCCESS


def cmd_campaigns_pack(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import CampaignError, pack

    try:
        result = pack(Path(args.path), Path(args.output))
    except CampaignError as exc:
        if args.json:
            print_json({"status": "invalid", "problems": _problem_docs(exc.problems)})
        for problem in exc.problems:
            err(str(problem))
        return fail(f"{args.path}: not packed", ExitCode.FAILED)
    if args.json:
        print_json({"status": "packed", "output": str(result.output), "campaign": result.campaign_id,
                     "version": result.version, "files": result.files, "bytes": result.bytes})
    else:
        print(result.output)
    return ExitCode.SUCCESS


def cmd_campaigns_list(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign import builtin_campaigns_dir, list_campaigns, user_campaigns_dir

    entries = list_campaigns()
    saves = _saves_by_campaign()
    if args.json:
        print_json({"builtinDir": str(builtin_campaigns_dir()), "userDir": str(user_campaigns_dir()),
                     "campaigns": [{"source": e.source, "path": str(e.path), "kind": e.kind,
                                    "id": e.id, "title": e.title, "version": e.version,
                                    "valid": e.valid, "errors": e.errors, "warnings": e.warnings,
                                    "saves": saves.get(e.id or "", [])}
                                   for e in entries],
                     "savesKnown": saves is not _NO_DAEMON})
        return ExitCode.SUCCESS
    if not entries:
        print(f"no campaigns (built-in: {builtin_campaigns_dir()}, user: {user_campaigns_dir()})")
    for e in entries:
        state = "valid" if e.valid else f"INVALID ({len(e.errors)} error(s))"
        print(f"{e.id or '?'}\t{e.version or '?'}\t{e.title or '?'}\t[{e.source}] {e.path}\t{state}")
        for save in saves.get(e.id or "", []):
            print(f"  resume: narratoria play --session {save['id']}\t{save['turns']} turn(s)"
                  f"\t{save['title'] or ''}")
    return ExitCode.SUCCESS


_NO_DAEMON: dict[str, list[dict[str, Any]]] = {}


def _saves_by_campaign() -> dict[str, list[dict[str, Any]]]:
    """Saved playthroughs a player can resume, by campaign id, from the running
    daemon (which holds the sessions); none when no daemon answers."""
    from narratoria.clients.client import ClientError, NarratoriaClient

    try:
        with NarratoriaClient(timeout_s=2) as client:
            sessions = client.list_sessions()
    except ClientError:
        return _NO_DAEMON
    saves: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(sessions, key=lambda s: -s.updated_at_ms):
        if s.campaign:
            saves.setdefault(s.campaign, []).append(
                {"id": s.id, "title": s.title, "turns": s.turns, "updatedAtMs": s.updated_at_ms})
    return saves


def register(sub: argparse._SubParsersAction) -> None:
    campaigns = sub.add_parser("campaigns", help="check, ingest, pack and list campaigns "
                                                 "(folders or .narratoria/.zip packages)")
    campaigns_sub = campaigns.add_subparsers(dest="campaigns_command", metavar="ACTION",
                                             required=True)
    cval = campaigns_sub.add_parser(
        "validate", help="every problem of a campaign folder, as file:line: field: message",
        description="PATH is a campaign folder or package, or a built-in or user campaign's "
                    "id (as `campaigns list` shows it).")
    cval.add_argument("path", metavar="PATH", help="the campaign folder or package, or its id")
    cval.add_argument("--json", action="store_true")
    cval.set_defaults(func=cmd_campaigns_validate)
    cing = campaigns_sub.add_parser(
        "ingest", help="chunk, embed and store a campaign's lore (progress on stderr)",
        description="Validates the campaign, then stores its chunks in the data dir's database: "
                    "through the running daemon when there is one, else directly. Unchanged "
                    "files are not re-embedded. PATH may be a built-in or user campaign's id.")
    cing.add_argument("path", metavar="PATH", help="the campaign folder or package")
    cing.add_argument("--data-dir", metavar="DIR", help="where the database is (default: the "
                                                        "data dir)")
    cing.add_argument("--json", action="store_true", help="print the completion record")
    cing.set_defaults(func=cmd_campaigns_ingest)
    cpack = campaigns_sub.add_parser(
        "pack", help="write a valid campaign as a .narratoria package (prints its path)",
        description="Validates first; hidden files are left out, symbolic links refused. The same "
                    "folder always gives the same bytes.")
    cpack.add_argument("path", metavar="DIR", help="the campaign folder")
    cpack.add_argument("-o", "--output", metavar="NAME.narratoria", required=True)
    cpack.add_argument("--json", action="store_true")
    cpack.set_defaults(func=cmd_campaigns_pack)
    clist = campaigns_sub.add_parser(
        "list", help="built-in and user campaigns, with id, version, title and whether valid")
    clist.add_argument("--json", action="store_true")
    clist.set_defaults(func=cmd_campaigns_list)
    campaign_queries.register(campaigns_sub)  # related, assets: in their own module
    campaign_import.register(campaigns_sub)   # import: lorebooks from other tools
