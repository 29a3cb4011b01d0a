"""`narratoria characters`: the fresh-character gallery from the command line.

A fresh character is a description and a portrait
(docs/campaigns.md, "Player characters"). Local commands, no daemon: they read
and write the character store in the data directory (``NARRATORIA_DATA_DIR``,
else ``$XDG_DATA_HOME/narratoria``). With ``--json`` a command prints the
character record as stored (snake_case keys) plus ``portrait_file``, the
portrait's absolute path.
Exit status: ``SUCCESS`` done, ``FAILED`` no such character, ``BAD_INPUT`` refused
input (the message names the field: ``description``, ``portrait``, ``import``…).

The data dir's owner runs these, so they see every identity's characters: one a
client identity made through the daemon (``owner`` ``client:NAME``) is marked so.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from narratoria.clients.output import Command, Expected, ExitCode, emit, print_json, reporting

if TYPE_CHECKING:
    from narratoria.runtime.characters.store import CharacterStore, FreshCharacter

_PREVIEW = 50  # the gallery shows the first 50 characters of a description


def _doc(store: CharacterStore, character: FreshCharacter) -> dict[str, Any]:
    import msgspec

    doc = msgspec.to_builtins(character)
    portrait = store.portrait_file(character)
    doc["portrait_file"] = str(portrait) if portrait else None
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

    return [(CharacterNotFound, ExitCode.FAILED), (CharacterError, ExitCode.BAD_INPUT)]


def _run(body: Callable[[CharacterStore, argparse.Namespace], int]) -> Command:
    def command(args: argparse.Namespace) -> int:
        # Imported here, not at module level: building the parser for any other command
        # should not pay for Pillow and the store.
        from narratoria.runtime.characters.store import CharacterStore

        return body(CharacterStore(), args)
    return reporting(command, _character_errors)


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


def cmd_create(store: CharacterStore, args: argparse.Namespace) -> int:
    character = store.create(_description(args), args.portrait, args.name)
    emit(_doc(store, character), args.json, character.id)
    return ExitCode.SUCCESS


def cmd_edit(store: CharacterStore, args: argparse.Namespace) -> int:
    description = _description(args)
    if description is None and args.portrait is None and args.name is None:
        from narratoria.runtime.characters.store import CharacterError

        raise CharacterError("edit: nothing to change (give --description, --description-file, "
                             "--portrait or --name)")
    character = store.edit(args.id, description=description, portrait=args.portrait, name=args.name)
    emit(_doc(store, character), args.json, character.id)
    return ExitCode.SUCCESS


def cmd_list(store: CharacterStore, args: argparse.Namespace) -> int:
    characters = store.list()
    if args.json:
        print_json({"dir": str(store.root), "characters": [_doc(store, c) for c in characters]})
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
        print_json({"status": "deleted", "id": args.id})
    return ExitCode.SUCCESS


def cmd_export(store: CharacterStore, args: argparse.Namespace) -> int:
    target = store.export(args.id, args.output)
    emit({"status": "exported", "id": args.id, "output": str(target)}, args.json, str(target))
    return ExitCode.SUCCESS


def cmd_import(store: CharacterStore, args: argparse.Namespace) -> int:
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


def register(sub: argparse._SubParsersAction) -> None:
    """Register ``characters`` under the top-level subcommands."""
    chars = sub.add_parser("characters", help="fresh player characters: create, edit, list, "
                                              "show, delete, export, import")
    actions = chars.add_subparsers(dest="characters_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="a new fresh character; prints its id")
    _add_description_options(create, required=True)
    create.set_defaults(func=_run(cmd_create))

    edit = actions.add_parser("edit", help="change a character's description, portrait or name")
    edit.add_argument("id")
    _add_description_options(edit, required=False)
    edit.set_defaults(func=_run(cmd_edit))

    ls = actions.add_parser("list", help="the gallery: id, name, description, fresh or used")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_run(cmd_list))

    show = actions.add_parser("show", help="one character, with its realisations")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_run(cmd_show))

    delete = actions.add_parser("delete", help="remove a character and its portrait")
    delete.add_argument("id")
    delete.add_argument("--json", action="store_true")
    delete.set_defaults(func=_run(cmd_delete))

    export = actions.add_parser("export", help="write a character as one .narratoria-character file")
    export.add_argument("id")
    export.add_argument("-o", "--output", required=True, metavar="FILE")
    export.add_argument("--json", action="store_true")
    export.set_defaults(func=_run(cmd_export))

    imp = actions.add_parser("import", help="add the character in a .narratoria-character file")
    imp.add_argument("file")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(func=_run(cmd_import))
