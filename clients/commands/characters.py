"""`narratoria characters`: the fresh-character gallery from the command line.

A fresh character is a description and a portrait
(docs/campaigns.md, "Player characters").

One source of truth: when a daemon answers (``--socket``, ``--address``, else the
socket in ``--data-dir``, else ``NARRATORIA_ADDRESS`` or the default socket), every
command goes through its character RPCs, so what is made here is what ``play
--character`` and the web page see. Only when none answers do they read and write the
character store themselves, in ``--data-dir`` (else ``NARRATORIA_DATA_DIR``, else
``$XDG_DATA_HOME/narratoria``), and say so in one line on stderr. A daemon named
with ``--socket``/``--address`` that does not answer is an error, never a fallback.

With ``--json`` a command prints the character plus ``via``: ``daemon`` (the
daemon's CharacterInfo fields) or ``local`` (the record as stored, snake_case keys,
plus ``portrait_file``, the portrait's absolute path).
Exit status: ``SUCCESS`` done, ``FAILED`` no such character (or no daemon at an
address given), ``BAD_INPUT`` refused input (the message names the field:
``description``, ``portrait``, ``import``…).

``import`` also reads SillyTavern character cards (V1/V2/V3: a PNG with a ``chara`` or
``ccv3`` chunk, a JSON card, a CHARX zip; ``runtime/characters/cards.py``): name,
description, personality, scenario, first message, tags and image make a fresh
character (the four middle ones as ``## Personality``… sections of its description),
or, with ``--npc CAMPAIGN_DIR``, an NPC file in that campaign's ``characters/`` with
the portrait in ``art/characters/``. A card's lorebook (``character_book``) becomes lore
files: in the campaign's ``lore/`` with ``--npc``, in ``--lore-dir DIR`` for a player
character, else it is reported as not imported. Every card field with no equivalent is
listed (on stderr, and under ``unmapped`` with ``--json``). ``export --format card-v2``
writes a V2 PNG card that SillyTavern reads.

Locally the data dir's owner runs these, so they see every identity's characters: one
a client identity made through the daemon (``owner`` ``client:NAME``) is marked so.
Through the daemon they see the caller's own.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from narratoria.clients.commands.remote import daemon_errors
from narratoria.clients.output import Command, Expected, ExitCode, emit, print_json, reporting

if TYPE_CHECKING:
    from narratoria.clients.client import NarratoriaClient
    from narratoria.proto import narratoria_pb2 as pb
    from narratoria.runtime.characters.cards import Card
    from narratoria.runtime.characters.store import CharacterStore, FreshCharacter

# How long to wait for a daemon to accept a connection before using the local store.
_PROBE_S = 2.0

_PREVIEW = 50  # the gallery shows the first 50 characters of a description


def _doc(store: CharacterStore, character: FreshCharacter) -> dict[str, Any]:
    import msgspec

    doc = msgspec.to_builtins(character)
    portrait = store.portrait_file(character)
    doc["portrait_file"] = str(portrait) if portrait else None
    doc["via"] = "local"
    return doc


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[:_PREVIEW - 1] + "…"


def _badge(character: FreshCharacter) -> str:
    from narratoria.runtime.characters.store import owner_of
    from narratoria.runtime.host.identity import LOCAL_OWNER

    badge = ("fresh" if not character.realizations else
             "used in: " + ", ".join(r.campaign_title for r in character.realizations))
    owner = owner_of(character)
    return badge if owner == LOCAL_OWNER else f"{badge}; {owner}'s"


def _description(args: argparse.Namespace) -> str | None:
    from narratoria.runtime.characters.store import CharacterError

    if args.description_file is None:
        return args.description
    try:
        return Path(args.description_file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CharacterError(f"description: cannot read {args.description_file}: {exc}") from None


def _character_errors() -> list[Expected]:
    from narratoria.runtime.characters.store import CharacterError, CharacterNotFound

    return [(CharacterNotFound, ExitCode.FAILED), (CharacterError, ExitCode.BAD_INPUT),
            *daemon_errors()]


def _daemon(args: argparse.Namespace) -> NarratoriaClient | None:
    """A client of the daemon that answers where ``args`` say, or None: use the local store.

    Only a connection is awaited, no RPC, so a busy daemon still counts as there."""
    import grpc

    from narratoria.clients.client import NarratoriaClient
    from narratoria.runtime.host.endpoint import (client_endpoint, default_socket,
                                                  parse_address, unix_endpoint)

    if args.local:
        return None
    named = bool(args.socket or args.address)
    if args.socket:
        endpoint = unix_endpoint(Path(args.socket).expanduser().absolute())
    elif args.address:
        endpoint = parse_address(args.address)
    elif args.data_dir:  # `serve --data-dir D` listens on D's socket unless told otherwise
        endpoint = unix_endpoint(default_socket(Path(args.data_dir).expanduser().absolute()))
    else:
        endpoint = client_endpoint()
    client = NarratoriaClient(endpoint)
    if named:
        return client  # its first call says, in one line, that nothing answers there
    if endpoint.unix_path is None or endpoint.unix_path.exists():
        try:
            grpc.channel_ready_future(client.channel).result(timeout=_PROBE_S)
            return client
        except grpc.FutureTimeoutError:
            pass
    client.close()
    return None


def _run(body: Callable[[CharacterStore, argparse.Namespace], int],
         remote: Callable[[NarratoriaClient, argparse.Namespace], int]) -> Command:
    def command(args: argparse.Namespace) -> int:
        client = _daemon(args)
        if client is not None:
            with client:
                return remote(client, args)
        # Imported here, not at module level: building the parser for any other command
        # should not pay for Pillow and the store.
        from narratoria.runtime.characters.store import CharacterStore

        store = CharacterStore(Path(args.data_dir).expanduser().absolute() if args.data_dir
                               else None)
        print(f"narratoria: no daemon answers; using the local character store in {store.root}",
              file=sys.stderr)
        return body(store, args)
    return reporting(command, _character_errors)


# -- through the daemon ----------------------------------------------------------------------

def _info_doc(info: pb.CharacterInfo) -> dict[str, Any]:
    from narratoria.clients.client import message_to_dict

    return {**message_to_dict(info), "via": "daemon"}


def _info_badge(info: pb.CharacterInfo) -> str:
    return "fresh" if info.fresh else "used in: " + ", ".join(info.campaigns)


def _portrait_bytes(args: argparse.Namespace) -> bytes:
    """The portrait, read and normalised here: the daemon cannot read the caller's
    files, and a 512x512 PNG fits any gRPC message limit where a 5 MB upload may not."""
    from narratoria.runtime.characters.store import prepare_portrait

    return prepare_portrait(args.portrait) if args.portrait is not None else b""


def _find(client: NarratoriaClient, character_id: str) -> pb.CharacterInfo:
    from narratoria.runtime.characters.store import CharacterNotFound, check_id

    check_id(character_id)
    for info in client.list_characters():
        if info.id == character_id:
            return info
    raise CharacterNotFound(f"no character {character_id!r} in the daemon's store")


def remote_create(client: NarratoriaClient, args: argparse.Namespace) -> int:
    info = client.save_character(_description(args) or "", _portrait_bytes(args), args.name or "")
    emit(_info_doc(info), args.json, info.id)
    return ExitCode.SUCCESS


def remote_edit(client: NarratoriaClient, args: argparse.Namespace) -> int:
    description = _description(args)
    _check_edit(description, args)
    info = client.save_character(description or "", _portrait_bytes(args), args.name or "",
                                 character_id=args.id)
    emit(_info_doc(info), args.json, info.id)
    return ExitCode.SUCCESS


def remote_list(client: NarratoriaClient, args: argparse.Namespace) -> int:
    characters = client.list_characters()
    if args.json:
        print_json({"via": "daemon", "address": str(client.endpoint),
                    "characters": [_info_doc(c) for c in characters]})
        return ExitCode.SUCCESS
    if not characters:
        print(f"no characters (in the daemon at {client.endpoint})")
    for c in characters:
        print(f"{c.id}\t{c.name or '-'}\t{_preview(c.description)}\t[{_info_badge(c)}]")
    return ExitCode.SUCCESS


def remote_show(client: NarratoriaClient, args: argparse.Namespace) -> int:
    info = _find(client, args.id)
    if args.json:
        print_json(_info_doc(info))
        return ExitCode.SUCCESS
    print(f"{info.id}\t{info.name or '-'}\t[{_info_badge(info)}]")
    print(f"portrait: {'yes' if info.has_portrait else 'none'}")
    print(info.description)
    return ExitCode.SUCCESS


def remote_delete(client: NarratoriaClient, args: argparse.Namespace) -> int:
    client.delete_character(args.id)
    if args.json:
        print_json({"status": "deleted", "id": args.id, "via": "daemon"})
    return ExitCode.SUCCESS


def remote_export(client: NarratoriaClient, args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from narratoria.runtime.characters.store import export_archive
    from narratoria.runtime.files import write_atomic

    info = _find(client, args.id)
    png = client.get_character_portrait(info.id).data if info.has_portrait else None
    if args.format == "card-v2":
        return _export_card(info.id, info.name or None, info.description, png, "daemon", args)
    _require_output(args)
    created = (datetime.fromtimestamp(info.created_at_ms / 1000, timezone.utc)
               if info.created_at_ms else None)
    target = Path(args.output)
    write_atomic(target, export_archive(info.description, info.name or None, created, png))
    emit({"status": "exported", "id": args.id, "output": str(target), "via": "daemon"},
         args.json, str(target))
    return ExitCode.SUCCESS


# -- character cards (runtime/characters/cards.py) ------------------------------------------

@dataclass
class _CardPlan:
    """A card import, checked whole before anything is written."""

    card: Card
    target: str                                   # "player" or "npc"
    description: str = ""                         # the fresh character's (player)
    portrait: bytes | None = None                 # the 512x512 PNG to store
    unmapped: list[str] = field(default_factory=list)
    lore_files: dict[Path, str] = field(default_factory=dict)   # absolute path -> text
    lore: dict[str, Any] = field(default_factory=dict)          # what became of the book


def _card_plan(args: argparse.Namespace, target: str) -> _CardPlan | None:
    """The card in ``args.file`` made ready to import, or None when the file is a
    ``.narratoria-character`` export (the store's own import reads those)."""
    from narratoria.runtime.characters.cards import card_kind, read_card, unmapped
    from narratoria.runtime.characters.store import CharacterError, prepare_portrait

    path = Path(args.file)
    if card_kind(path) == "narratoria":
        for option, value in (("--npc", args.npc), ("--lore-dir", args.lore_dir),
                              ("--portrait", args.portrait)):
            if value is not None:
                raise CharacterError(f"import: {option} is for character cards; {path.name} is "
                                     f"a .narratoria-character file")
        return None
    card = read_card(path)
    plan = _CardPlan(card, target, unmapped=unmapped(card, target))  # type: ignore[arg-type]
    image = args.portrait if args.portrait is not None else card.image
    if image is not None:
        plan.portrait = prepare_portrait(image)
    elif target == "player":
        raise CharacterError(f"portrait: {path.name} carries no image; give --portrait IMAGE "
                             f"(PNG, JPEG or WebP)")
    if target == "player":
        from narratoria.runtime.characters.cards import fresh_description

        plan.description, left_out = fresh_description(card)
        plan.unmapped += left_out
    _plan_lore(plan, args)
    if target == "player":  # checked before the character is made: a refusal leaves nothing
        _refuse_existing(list(plan.lore_files), "--lore-dir")
    return plan


def _plan_lore(plan: _CardPlan, args: argparse.Namespace) -> None:
    """Where the card's ``character_book`` goes: the campaign's lore/ (an NPC), the
    ``--lore-dir`` folder (a player character), else nowhere, said so."""
    from narratoria.runtime.campaign.lorebook import LorebookError, book_lore_files
    from narratoria.runtime.characters.cards import lore_target
    from narratoria.runtime.characters.store import CharacterError

    book = plan.card.character_book
    if book is None:
        plan.lore = {"imported": False, "reason": "the card has no character_book"}
        return
    entries = book.get("entries")
    count = len(entries) if isinstance(entries, (list, dict)) else 0
    if plan.target == "player" and args.lore_dir is None:
        reason = (f"a player character carries no lore; give --lore-dir DIR (e.g. a "
                  f"campaign's lore/ folder) to write its {count} entries as lore files")
        plan.lore = {"imported": False, "entries": count, "reason": reason}
        plan.unmapped.append(f"character_book: not imported: {reason}")
        return
    try:
        # Not the bare file name: `campaigns validate` would warn that the lore names a
        # .png asset missing from the campaign.
        files, report = book_lore_files(book, source=f"{plan.card.file} (character card)")
    except LorebookError as exc:
        raise CharacterError(f"character_book: {exc}") from None
    if plan.target == "npc":
        root = Path(args.npc).expanduser().absolute()
        plan.lore_files = {root / relative: text for relative, text in files.items()}
    else:
        root = Path(args.lore_dir).expanduser().absolute()
        plan.lore_files = {root / lore_target(relative): text for relative, text in files.items()}
    plan.lore = {"imported": True, "entries": count, "dir": str(root),
                 "files": [str(p) for p in plan.lore_files], "report": report}


def _refuse_existing(paths: list[Path], option: str) -> None:
    from narratoria.runtime.characters.store import CharacterError

    taken = [p for p in paths if p.exists()]
    if taken:
        raise CharacterError(f"{option}: {taken[0]} already exists (of {len(taken)} file(s) to "
                             f"write); nothing was written and nothing is overwritten")


def _write_new(path: Path, data: bytes) -> None:
    # "x": a file that appeared since the check is refused, never overwritten.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as fh:
        fh.write(data)


def _card_doc(plan: _CardPlan) -> dict[str, Any]:
    card = plan.card
    return {"card": {"file": card.file, "spec": card.spec, "from": card.container},
            "unmapped": plan.unmapped, "lore": plan.lore}


def _card_notes(plan: _CardPlan) -> None:
    """What a person should know of the import, on stderr: stdout is the id alone."""
    card = plan.card
    notes = [f"imported {card.name!r} from {card.file} ({card.spec}, {card.container})",
             *plan.unmapped]
    if plan.lore.get("imported"):
        notes.append(f"lore: {len(plan.lore['files'])} file(s) written under {plan.lore['dir']}")
        notes += [f"lore: {line}" for line in plan.lore["report"]]
    for note in notes:
        print(f"narratoria: {note}", file=sys.stderr)


def _report_card_import(plan: _CardPlan, doc: dict[str, Any], character_id: str,
                        args: argparse.Namespace) -> int:
    for path, text in plan.lore_files.items():
        _write_new(path, text.encode("utf-8"))
    if not args.json:
        _card_notes(plan)
    emit({**doc, **_card_doc(plan)}, args.json, character_id)
    return ExitCode.SUCCESS


def cmd_import_npc(args: argparse.Namespace) -> int:
    """A card as an NPC of the campaign in ``--npc``: campaign files, so neither the
    daemon nor the character store is involved."""
    from narratoria.runtime.campaign.frontmatter import PORTRAIT_FOLDER
    from narratoria.runtime.campaign.manifest import find_manifest
    from narratoria.runtime.characters.cards import entity_slug, npc_markdown
    from narratoria.runtime.characters.store import CharacterError

    root = Path(args.npc).expanduser().absolute()
    if not root.is_dir() or find_manifest(root) is None:
        raise CharacterError(f"--npc: {root} is not a campaign folder (no campaign.yml or "
                             f"manifest.json)")
    if args.lore_dir is not None:
        raise CharacterError("--lore-dir: not with --npc; an NPC's lore goes into the "
                             "campaign's lore/ folder")
    plan = _card_plan(args, "npc")
    if plan is None:
        raise CharacterError(f"import: --npc takes a character card; {Path(args.file).name} is "
                             f"a .narratoria-character file")
    card = plan.card
    if not (card.description or card.personality or card.scenario):
        raise CharacterError(f"description: {card.file}: the card has no description, "
                             f"personality or scenario to make an NPC of")
    entity_id = entity_slug(card.name)
    npc_file = root / "characters" / f"character_{entity_id}.md"
    asset = f"{PORTRAIT_FOLDER}/{entity_id}.png" if plan.portrait else None
    if asset is None:
        plan.unmapped.append("portrait: the card carries no image; the NPC has no portrait_asset")
    writes = {npc_file: npc_markdown(card, entity_id, asset).encode("utf-8"),
              **({root / asset: plan.portrait} if asset and plan.portrait else {}),
              **{p: t.encode("utf-8") for p, t in plan.lore_files.items()}}
    _refuse_existing(list(writes), "--npc")
    for path, data in writes.items():
        _write_new(path, data)
    if not args.json:
        _card_notes(plan)
    emit({"status": "imported", "npc": str(npc_file), "entity_id": entity_id,
          "portrait_asset": asset, "campaign": str(root), **_card_doc(plan)},
         args.json, str(npc_file))
    return ExitCode.SUCCESS


def _export_card(character_id: str, name: str | None, description: str, png: bytes | None,
                 via: str, args: argparse.Namespace) -> int:
    from narratoria.runtime.characters.cards import card_png, card_v2, entity_slug
    from narratoria.runtime.files import write_atomic

    # A card must have a name; a fresh character may not (the campaign names it).
    card_name = name or "Unnamed"
    target = Path(args.output or f"{entity_slug(name or character_id)}.png")
    write_atomic(target, card_png(card_v2(card_name, description), png))
    emit({"status": "exported", "id": character_id, "output": str(target), "format": "card-v2",
          "portrait": "the character's" if png else "generated", "via": via},
         args.json, str(target))
    return ExitCode.SUCCESS


def _require_output(args: argparse.Namespace) -> None:
    if not args.output:
        from narratoria.runtime.characters.store import CharacterError

        raise CharacterError("--output: required with --format narratoria (the "
                             ".narratoria-character file to write)")


def remote_import(client: NarratoriaClient, args: argparse.Namespace) -> int:
    from narratoria.runtime.characters.store import prepare_portrait, read_export

    if (plan := _card_plan(args, "player")) is not None:
        info = client.save_character(plan.description, plan.portrait or b"", plan.card.name)
        return _report_card_import(plan, _info_doc(info), info.id, args)
    description, name, portrait = read_export(args.file)
    info = client.save_character(description, prepare_portrait(portrait) if portrait else b"",
                                 name or "")
    emit(_info_doc(info), args.json, info.id)
    return ExitCode.SUCCESS


# -- in the local store ----------------------------------------------------------------------


def _show_one(store: CharacterStore, character: FreshCharacter, as_json: bool) -> None:
    if as_json:
        print_json(_doc(store, character))
        return
    print(f"{character.id}\t{character.name or '-'}\t[{_badge(character)}]")
    print(f"portrait: {store.portrait_file(character) or 'none'}")
    print(character.description)
    for r in character.realizations:
        print(f"  {r.campaign_id}: {r.realized_name} ({r.violation_state}), "
              f"realised {r.realized_at:%Y-%m-%d}")


def _check_edit(description: str | None, args: argparse.Namespace) -> None:
    if description is None and args.portrait is None and args.name is None:
        from narratoria.runtime.characters.store import CharacterError

        raise CharacterError("edit: nothing to change (give --description, --description-file, "
                             "--portrait or --name)")


def cmd_create(store: CharacterStore, args: argparse.Namespace) -> int:
    character = store.create(_description(args), args.portrait, args.name)
    emit(_doc(store, character), args.json, character.id)
    return ExitCode.SUCCESS


def cmd_edit(store: CharacterStore, args: argparse.Namespace) -> int:
    description = _description(args)
    _check_edit(description, args)
    character = store.edit(args.id, description=description, portrait=args.portrait, name=args.name)
    emit(_doc(store, character), args.json, character.id)
    return ExitCode.SUCCESS


def cmd_list(store: CharacterStore, args: argparse.Namespace) -> int:
    characters = store.list()
    if args.json:
        print_json({"via": "local", "dir": str(store.root),
                    "characters": [_doc(store, c) for c in characters]})
        return ExitCode.SUCCESS
    if not characters:
        print(f"no characters (in {store.root})")
    for c in characters:
        print(f"{c.id}\t{c.name or '-'}\t{_preview(c.description)}\t[{_badge(c)}]")
    return ExitCode.SUCCESS


def cmd_show(store: CharacterStore, args: argparse.Namespace) -> int:
    _show_one(store, store.get(args.id), args.json)
    return ExitCode.SUCCESS


def cmd_delete(store: CharacterStore, args: argparse.Namespace) -> int:
    store.delete(args.id)
    if args.json:
        print_json({"status": "deleted", "id": args.id, "via": "local"})
    return ExitCode.SUCCESS


def cmd_export(store: CharacterStore, args: argparse.Namespace) -> int:
    if args.format == "card-v2":
        character = store.get(args.id)
        portrait = store.portrait_file(character)
        try:
            png = portrait.read_bytes() if portrait else None
        except OSError as exc:
            from narratoria.runtime.characters.store import CharacterError

            raise CharacterError(f"portrait: cannot read {portrait}: {exc.strerror}") from None
        return _export_card(character.id, character.name, character.description, png, "local",
                            args)
    _require_output(args)
    target = store.export(args.id, args.output)
    emit({"status": "exported", "id": args.id, "output": str(target), "via": "local"},
         args.json, str(target))
    return ExitCode.SUCCESS


def cmd_import(store: CharacterStore, args: argparse.Namespace) -> int:
    if (plan := _card_plan(args, "player")) is not None:
        character = store.create(plan.description, plan.portrait, plan.card.name)
        return _report_card_import(plan, _doc(store, character), character.id, args)
    character = store.import_file(args.file)
    emit(_doc(store, character), args.json, character.id)
    return ExitCode.SUCCESS


def _add_description_options(p: argparse.ArgumentParser, required: bool) -> None:
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--description", metavar="TEXT", help="the character, in your words "
                       "(10-5000 characters)")
    group.add_argument("--description-file", metavar="FILE", help="read the description from FILE")
    p.add_argument("--portrait", metavar="IMAGE", required=required,
                   help="PNG, JPEG or WebP, at most 5 MB; stored as a 512x512 PNG (letterboxed)"
                        + ("; required" if required else ""))
    p.add_argument("--name", help="what you call the character (the campaign may rename it)")
    p.add_argument("--json", action="store_true")


def _add_where(p: argparse.ArgumentParser) -> None:
    where = p.add_argument_group("where", "the daemon when one answers, else the local store")
    daemon = where.add_mutually_exclusive_group()
    daemon.add_argument("--socket", metavar="PATH", help="the daemon's unix socket (no "
                        "fallback to the local store if it does not answer)")
    daemon.add_argument("--address", metavar="ADDR", help="the daemon's address, unix:PATH or "
                        "HOST:PORT (no fallback to the local store if it does not answer)")
    daemon.add_argument("--local", action="store_true", help="the data dir's own store, "
                        "never the daemon: the device owner's view, every client identity's "
                        "characters marked with whose they are")
    where.add_argument("--data-dir", metavar="DIR", help="the daemon's data dir, as given to "
                       "`serve --data-dir`: its socket is tried first, and with no daemon the "
                       "store in DIR is used (default: NARRATORIA_DATA_DIR, else "
                       "$XDG_DATA_HOME/narratoria)")


def register(sub: argparse._SubParsersAction) -> None:
    """Register ``characters`` under the top-level subcommands."""
    chars = sub.add_parser("characters", help="fresh player characters: create, edit, list, "
                                              "show, delete, export, import")
    actions = chars.add_subparsers(dest="characters_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="a new fresh character; prints its id")
    _add_description_options(create, required=True)
    _add_where(create)
    create.set_defaults(func=_run(cmd_create, remote_create))

    edit = actions.add_parser("edit", help="change a character's description, portrait or name")
    edit.add_argument("id")
    _add_description_options(edit, required=False)
    _add_where(edit)
    edit.set_defaults(func=_run(cmd_edit, remote_edit))

    ls = actions.add_parser("list", help="the gallery: id, name, description, fresh or used")
    ls.add_argument("--json", action="store_true")
    _add_where(ls)
    ls.set_defaults(func=_run(cmd_list, remote_list))

    show = actions.add_parser("show", help="one character, with its realisations")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    _add_where(show)
    show.set_defaults(func=_run(cmd_show, remote_show))

    delete = actions.add_parser("delete", help="remove a character and its portrait")
    delete.add_argument("id")
    delete.add_argument("--json", action="store_true")
    _add_where(delete)
    delete.set_defaults(func=_run(cmd_delete, remote_delete))

    export = actions.add_parser("export", help="write a character as one .narratoria-character "
                                               "file, or as a SillyTavern card (--format card-v2)")
    export.add_argument("id")
    export.add_argument("-o", "--output", metavar="FILE", help="the file to write (required for "
                        "--format narratoria; for card-v2 the default is NAME.png here)")
    export.add_argument("--format", choices=("narratoria", "card-v2"), default="narratoria",
                        help="narratoria: a .narratoria-character file (default); card-v2: a PNG "
                             "of the portrait (or a plain generated image) with a Character Card "
                             "V2 'chara' chunk, as SillyTavern reads it")
    export.add_argument("--json", action="store_true")
    _add_where(export)
    export.set_defaults(func=_run(cmd_export, remote_export))

    imp = actions.add_parser("import", help="add the character in a .narratoria-character file "
                                            "or a SillyTavern character card (PNG, JSON, CHARX)")
    imp.add_argument("file", help="a .narratoria-character file, or a Character Card V1/V2/V3: "
                                  "a PNG with a chara or ccv3 chunk, a .json card or a .charx")
    imp.add_argument("--npc", metavar="CAMPAIGN_DIR", help="make the card an NPC of this "
                     "campaign instead: characters/character_ID.md, its portrait in "
                     "art/characters/, its lorebook in lore/ (no daemon or store involved)")
    imp.add_argument("--lore-dir", metavar="DIR", help="for a player character: write the "
                     "card's lorebook (character_book) as lore files into DIR, e.g. a "
                     "campaign's lore/ folder; without it the lorebook is reported, not imported")
    imp.add_argument("--portrait", metavar="IMAGE", help="the portrait, for a card that carries "
                     "no image (or instead of its image)")
    imp.add_argument("--json", action="store_true")
    _add_where(imp)
    as_player = _run(cmd_import, remote_import)
    as_npc = reporting(cmd_import_npc, _character_errors)
    imp.set_defaults(func=lambda args: as_npc(args) if args.npc is not None else as_player(args))
