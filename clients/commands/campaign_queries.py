"""`narratoria campaigns related|assets`: a campaign's relationship graph and assets, queried.

Local commands, no daemon, nothing stored: they read the campaign folder as it is
on disk (``runtime/campaign/relations.py`` and ``assets.py``, the same code that
ingestion runs), so an author can ask "what relates to merlin" or "which art did
the campaign accept" while writing it.

REF is a built-in or user campaign's id, or a folder or package path
(``CampaignLibrary.locate``; a package is read from its extracted copy in the
data dir). Every edge and problem says where it comes from as ``file:line``,
relative to the campaign folder printed first. Exit status: ``SUCCESS`` answered,
``FAILED`` no such campaign or entity.
"""

from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narratoria.clients.output import Command, ExitCode, print_json, reporting

if TYPE_CHECKING:
    from narratoria.runtime.campaign.assets import AssetRecord
    from narratoria.runtime.campaign.problems import Problem
    from narratoria.runtime.campaign.relations import Edge, Graph

_SUGGESTIONS = 5


class _Refused(Exception):
    """A REF or ENTITY that names nothing: the message, exit status 1."""


def _folder(ref: str) -> Path:
    """The campaign folder ``ref`` names (an id, a folder, a package)."""
    from narratoria.runtime.host.paths import default_data_dir
    from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
    from narratoria.runtime.campaign.problems import CampaignError

    library = CampaignLibrary(default_data_dir())
    try:
        folder = library.folder(library.locate(ref))
    except CampaignNotFound as exc:
        raise _Refused(str(exc.args[0])) from None
    except CampaignError as exc:  # a package that does not open
        raise _Refused(f"campaign {ref}: " + "; ".join(str(p) for p in exc.problems)) from None
    if not folder.is_dir():
        raise _Refused(f"campaign {ref}: {folder} is not a campaign folder or package")
    return folder


def _campaign_id(folder: Path) -> str | None:
    from narratoria.runtime.campaign.manifest import load_manifest
    from narratoria.runtime.campaign.problems import CampaignError

    try:
        return load_manifest(folder).id
    except CampaignError:
        return None  # querying a campaign does not need its manifest to be valid


def _run(command: Command) -> Command:
    return reporting(command, lambda: [(_Refused, ExitCode.FAILED)])


# -- related ---------------------------------------------------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def close_matches(graph: Graph, query: str) -> list[str]:
    """Entity ids that ``query`` may have meant: spelled nearly alike (difflib), by id or
    by name, then ids that contain it as a part ("venn" → odile_venn)."""
    by_key: dict[str, str] = {}
    for entity in graph.entities.values():
        if entity.name:
            by_key.setdefault(_norm(entity.name), entity.id)
    by_key.update({_norm(e.id): e.id for e in graph.entities.values()})
    key = _norm(query)
    found = [by_key[k] for k in difflib.get_close_matches(key, list(by_key), n=_SUGGESTIONS * 2)]
    if key:
        found += [e for k, e in sorted(by_key.items()) if key in k.split("_") or k.startswith(key)]
    return list(dict.fromkeys(found))[:_SUGGESTIONS]


def _node_doc(graph: Graph, node: str) -> dict[str, Any]:
    entity = graph.entities.get(node)
    if entity is None:  # an asset's path
        return {"id": node, "type": "asset", "name": None, "files": [node]}
    return {"id": entity.id, "type": entity.type, "name": entity.name, "files": list(entity.files)}


def cmd_related(args: argparse.Namespace) -> int:
    import msgspec

    from narratoria.runtime.campaign.relations import campaign_graph, related

    folder = _folder(args.ref)
    graph = campaign_graph(folder)
    node = graph.resolve(args.entity)
    if node is None:
        known = close_matches(graph, args.entity)
        hint = (f"did you mean {', '.join(known)}?" if known else
                f"it knows {len(graph.entities)} entities, none named alike")
        raise _Refused(f"{args.entity}: no such entity in campaign {args.ref} ({folder}); {hint}")
    edges = related(graph, node)
    outgoing = [e for e in edges if e.source == node]
    incoming = [e for e in edges if e.target == node]
    if args.json:
        print_json({"campaign": _campaign_id(folder), "root": str(folder),
                     "entity": _node_doc(graph, node),
                     "outgoing": [msgspec.to_builtins(e) for e in outgoing],
                     "incoming": [msgspec.to_builtins(e) for e in incoming]})
        return ExitCode.SUCCESS
    doc = _node_doc(graph, node)
    name = f" \u2014 {doc['name']}" if doc["name"] else ""
    print(f"{node}{name} ({doc['type']}; {', '.join(doc['files'])})")
    print(f"in {folder}")
    _print_edges(f"outgoing ({len(outgoing)}): what {node} names", outgoing, lambda e: e.target)
    _print_edges(f"incoming ({len(incoming)}): what names {node}", incoming, lambda e: e.source)
    return ExitCode.SUCCESS


def _print_edges(title: str, edges: list[Edge], other) -> None:
    print(title)
    if not edges:
        print("  (none)")
        return
    kind_w = max(len(e.kind) for e in edges)
    other_w = max(len(other(e)) for e in edges)
    for e in edges:
        how = "" if e.explicit else "  (inferred)"  # a mention, or an asset's name
        print(f"  {e.kind:<{kind_w}}  {other(e):<{other_w}}  {e.file}:{e.line}{how}")


# -- assets ----------------------------------------------------------------------------------

def _measure(record: AssetRecord) -> str:
    if record.width is not None and record.height is not None:
        return f"{record.width}x{record.height}"
    if record.duration_seconds is not None:
        return f"{record.duration_seconds:.1f}s"
    return "-"


def _origin(record: AssetRecord) -> str:
    if not record.generated:
        return "human-made"
    p = record.provenance
    if p is None:
        return "generated"
    return f"generated by {p.source_model} at {p.generated_at.isoformat()}"


def problem_doc(p: Problem) -> dict[str, Any]:
    """A problem under --json (``campaigns validate``, ``ingest``, ``pack`` too)."""
    return {"file": p.file, "line": p.line, "field": p.field, "message": p.message,
            "severity": p.severity}


def rejected_assets(folder: Path, accepted: list[AssetRecord],
                    problems: list[Problem]) -> list[tuple[str, list[Problem]]]:
    """Each asset file that has no record, with the problems of it and of its sidecar."""
    from narratoria.runtime.campaign.discovery import SIDECAR_SUFFIX, discover

    kept = {r.path for r in accepted}
    out = []
    for f in discover(folder):
        if f.kind == "asset" and f.relative not in kept:
            own = [p for p in problems if p.file in (f.relative, f.relative + SIDECAR_SUFFIX)]
            out.append((f.relative, own))
    return out


def cmd_assets(args: argparse.Namespace) -> int:
    import msgspec

    from narratoria.runtime.campaign.assets import check_assets, load_assets

    folder = _folder(args.ref)
    accepted = load_assets(folder)
    problems = check_assets(folder)
    rejected = rejected_assets(folder, accepted, problems)
    if args.json:
        print_json({"campaign": _campaign_id(folder), "root": str(folder),
                     "assets": [msgspec.to_builtins(r) for r in accepted],
                     "rejected": [{"path": path, "problems": [problem_doc(p) for p in own]}
                                  for path, own in rejected],
                     "problems": [problem_doc(p) for p in problems]})
        return ExitCode.SUCCESS
    print(f"{len(accepted)} asset(s) in {folder}")
    for r in accepted:
        print(f"  {r.path}  {r.media_type}/{r.format}  {_measure(r)}  {_origin(r)}")
        print(f"    keywords: {', '.join(r.keywords) or '-'}")
    if rejected:
        print(f"{len(rejected)} rejected (left out of the campaign):")
        for path, own in rejected:
            print(f"  {path}")
            for p in own:
                print(f"    {p}")
    warnings = [p for p in problems if p.severity == "warning"]
    for p in warnings:
        print(f"warning: {p}")
    return ExitCode.SUCCESS


# -- registration ----------------------------------------------------------------------------

def register(campaigns_sub: argparse._SubParsersAction) -> None:
    """Register ``related`` and ``assets`` under ``narratoria campaigns``."""
    rel = campaigns_sub.add_parser(
        "related", help="what relates to an entity: its edges both ways, with file:line",
        description="Every edge of the campaign's relationship graph that touches ENTITY (an "
                    "entity id, its name, or an asset's path): what it names (outgoing) and what "
                    "names it (incoming), each with its kind (the field, 'mentions', 'link', "
                    "'depicts') and the file:line that says so. REF is a campaign id or a "
                    "folder or package path.")
    rel.add_argument("ref", metavar="REF", help="campaign id, folder or package")
    rel.add_argument("entity", metavar="ENTITY", help="entity id or name (or an asset path)")
    rel.add_argument("--json", action="store_true")
    rel.set_defaults(func=_run(cmd_related))
    assets = campaigns_sub.add_parser(
        "assets", help="the campaign's accepted art and music, and the rejected ones with why",
        description="Every accepted asset with its type, format, size in pixels or duration, "
                    "keywords and provenance; then the assets left out (provenance rules broken) with the "
                    "file:line of each problem, and the warnings. REF is a campaign id or a "
                    "folder or package path.")
    assets.add_argument("ref", metavar="REF", help="campaign id, folder or package")
    assets.add_argument("--json", action="store_true")
    assets.set_defaults(func=_run(cmd_assets))
