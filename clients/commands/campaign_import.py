"""`narratoria campaigns import FILE -o DIR`: a lorebook from another story tool as a campaign.

Reads a SillyTavern World Info JSON, a NovelAI ``.lorebook`` or a character card's
``character_book`` (``runtime/campaign/lorebook.py``) and writes a campaign folder
that validates and ingests: ``campaign.yml`` and one lore file per entry. Every
field with no equivalent is listed per entry (``unmapped`` with ``--json``).
Exit status: ``SUCCESS`` written, ``BAD_INPUT`` the file cannot be imported or DIR
is not empty (``--force`` replaces it), nothing written in either case.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from narratoria.clients.output import ExitCode, fail, print_json


def cmd_campaigns_import(args: argparse.Namespace) -> int:
    from narratoria.runtime.campaign.lorebook import LorebookError, import_lorebook

    source = Path(args.file)
    if not source.is_file():
        return _refuse(args, str(source), "-", "no such file")
    try:
        done = import_lorebook(source, Path(args.output), force=args.force)
    except LorebookError as exc:
        return _refuse(args, exc.source, exc.where, exc.message)
    except OSError as exc:  # a full disk or an unwritable DIR: nothing was left behind
        return _refuse(args, str(args.output), "-", f"cannot write: {exc}", ExitCode.FAILED)
    converted = done.converted
    if args.json:
        print_json({"status": "imported", "output": str(done.output), "campaign": done.campaign_id,
                    "title": done.title, "source": done.source, "format": converted.format,
                    "entries": converted.entries, "files": ["campaign.yml", *converted.files],
                    "unmapped": converted.unmapped, "report": converted.report})
        return ExitCode.SUCCESS
    enabled = sum(e["enabled"] for e in converted.entries)
    print(f"{args.output}: campaign {done.campaign_id!r} ({done.title}) from {done.source} "
          f"({converted.format}): {enabled} lore file(s), "
          f"{len(converted.entries) - enabled} disabled")
    for line in converted.report:
        print(f"  {line}")
    return ExitCode.SUCCESS


def _refuse(args: argparse.Namespace, file: str, where: str, message: str,
            code: ExitCode = ExitCode.BAD_INPUT) -> int:
    if args.json:
        print_json({"status": "error", "file": file, "where": where, "message": message})
    return fail(f"{file}: {where}: {message}", code)


def register(campaigns_sub: argparse._SubParsersAction) -> None:
    """Register ``import`` under ``narratoria campaigns``."""
    cimp = campaigns_sub.add_parser(
        "import", help="a SillyTavern, NovelAI or character-card lorebook as a campaign folder",
        description="Writes DIR as a campaign: campaign.yml (id from DIR's name) and one lore "
                    "file per entry under lore/; disabled entries go under .disabled/lore/, "
                    "which is never ingested. Fields with no equivalent are listed per entry. "
                    "DIR must be empty or absent unless --force.")
    cimp.add_argument("file", metavar="FILE", help="World Info .json, NovelAI .lorebook, or a "
                                                   "character card / character_book .json")
    cimp.add_argument("-o", "--output", metavar="DIR", required=True, help="the campaign folder")
    cimp.add_argument("--force", action="store_true", help="replace DIR if it has files")
    cimp.add_argument("--json", action="store_true")
    cimp.set_defaults(func=cmd_campaigns_import)
