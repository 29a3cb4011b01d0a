"""Phase 7 of ingestion: the relationship graph, "what relates to merlin".

Edges come only from what the campaign says, so the graph is repeatable and
every edge can be cited (its ``file`` and ``line``):

- explicit references: a frontmatter or structured field whose value names
  another entity (``location: tower``, ``plot_requirements: [vision]``,
  ``faction: [order_of_the_oak]``) or a campaign file (``portrait_asset:
  art/characters/merlin.png``); the edge's ``kind`` is the field's name. Fields
  in :data:`REFERENCE_KEYS` are references even when nothing defines their
  target: those edges dangle, and :func:`dangling` lists them for phase 10.
  Frontmatter keys are the author's own, so any other field counts
  too, but only when its whole value is a known entity id or name;
- cross-file links: a Markdown link ``[the ledger](lore/ledger.md)`` in prose;
- mentions: an entity's id or name as a word in another entity's prose or text
  fields (plain keyword matching, step 3 of phase 7: repeatable and cheap);
- assets: an image or track whose name or keywords name an entity
  (``art/characters/merlin_young.png`` depicts ``merlin``).

Semantic similarity between chunks (step 2) needs the embeddings and belongs
to the store; it is not computed here. Nothing is stored either: the caller
keeps the edges (as bidirectional relations, step 4: :func:`related` reads an
edge from both ends).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator, Mapping

import msgspec

from narratoria.runtime.campaign.assets import AssetRecord, load_assets, name_keywords
from narratoria.runtime.campaign.chunking import load_structured
from narratoria.runtime.campaign.discovery import STRUCTURED_FORMATS, discover
from narratoria.runtime.campaign.frontmatter import name_hints, read_metadata
from narratoria.runtime.campaign.problems import CampaignError

# Fields that say what a file is, not what it relates to.
IDENTITY_KEYS = frozenset({"entity_type", "entity_id", "id", "content_type", "priority", "mood",
                           "name", "display_name", "title"})
# Fields whose values are references by name (a beat's plot_requirements, an asset's references).
REFERENCE_KEYS = frozenset({
    "related", "related_to", "relations", "relationships", "references", "links",
    "entity_links", "location", "locations", "starting_location", "faction", "factions",
    "character", "characters", "npc", "npcs", "members", "allies", "enemies", "rivals",
    "owner", "mentor", "leader", "plot_requirements", "requires", "prerequisites"})
NAME_KEYS = ("name", "display_name", "title")
MIN_TERM = 3  # shorter ids ("ox", "it") would match half the prose
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


class Edge(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``source`` relates to ``target``, as ``file`` says at ``line``."""

    source: str        # an entity id, or an asset's relative path
    target: str
    kind: str          # the field that names it, or "mentions", "link", "depicts"
    file: str          # relative path of the file that says so
    line: int = 1
    explicit: bool     # written as a reference (field, link), not found in prose


@dataclass(frozen=True)
class Entity:
    id: str
    type: str
    name: str | None
    files: tuple[str, ...]      # the files that define it, in file order


@dataclass(frozen=True)
class Graph:
    entities: dict[str, Entity]
    assets: frozenset[str]
    edges: list[Edge] = field(default_factory=list)

    def resolve(self, name: str) -> str | None:
        """The entity id or asset path ``name`` refers to (an id, a name, any case)."""
        if name in self.entities or name in self.assets:
            return name
        return _lookup(self.entities).get(_norm(name))


def build_graph(texts: Mapping[str, str], assets: Iterable[AssetRecord | str] = ()) -> Graph:
    """The graph of the content files ``texts`` (relative path → text) and ``assets``.

    Pure: nothing is read from disk. A file that does not parse is left out
    (validation reports it).
    """
    docs = [doc for file in sorted(texts) if (doc := _parse(file, texts[file])) is not None]
    assets = list(assets)
    asset_paths = {a.path if isinstance(a, AssetRecord) else str(a) for a in assets}
    entities = _entities(docs)
    lookup = _lookup(entities)
    mentions = _Mentions(lookup, _mention_pattern(entities))
    file_entity = {doc.file: doc.entity_id for doc in docs}
    edges: set[Edge] = set()
    for doc in docs:
        edges.update(_field_edges(doc, lookup, file_entity, asset_paths, mentions))
        for line, text in doc.prose:
            edges.update(_mentions(doc, line, text, mentions))
            edges.update(_links(doc, line, text, file_entity, asset_paths))
    edges.update(_asset_edges(assets, entities))
    ordered = sorted(edges, key=lambda e: (e.file, e.line, e.source, e.target, e.kind))
    return Graph(entities, frozenset(asset_paths), ordered)


def related(graph: Graph, entity_id: str) -> list[Edge]:
    """Every edge from or to ``entity_id`` (an id, a name or an asset path), file order."""
    node = graph.resolve(entity_id)
    if node is None:
        return []
    return [e for e in graph.edges if node in (e.source, e.target)]


def dangling(graph: Graph) -> list[Edge]:
    """Explicit references to nothing the campaign defines (phase 10: no orphaned links)."""
    return [e for e in graph.edges if e.target not in graph.entities and e.target not in graph.assets]


def campaign_graph(root: Path) -> Graph:
    """:func:`build_graph` over the campaign folder ``root`` as it is on disk."""
    texts: dict[str, str] = {}
    for f in discover(Path(root)):
        if f.kind == "content":
            try:
                texts[f.relative] = f.path.read_text("utf-8")
            except UnicodeDecodeError:
                continue  # validation says where
    return build_graph(texts, load_assets(Path(root)))


# -- parsing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Doc:
    file: str
    text: str
    entity_id: str
    entity_type: str
    name: str | None
    fields: dict[str, Any]
    prose: list[tuple[int, str]]   # (1-based line, paragraph) of the body; empty for data files


def _parse(file: str, text: str) -> _Doc | None:
    fmt = PurePosixPath(file).suffix[1:].lower()
    try:
        if fmt in STRUCTURED_FORMATS:
            data = load_structured(file, text, fmt)
            mapping = data if isinstance(data, dict) else {}
            hints = name_hints(file)
            entity_id = _text(mapping.get("entity_id")) or _text(mapping.get("id")) or hints.entity_id
            entity_type = _text(mapping.get("entity_type")) or hints.entity_type
            fields, prose = {str(k): v for k, v in mapping.items()}, []
        else:
            meta = read_metadata(file, text)
            entity_id, entity_type, fields = meta.entity_id, meta.entity_type, meta.frontmatter
            prose = _paragraphs(meta.body, meta.body_line)
    except CampaignError:
        return None
    name = next((n for key in NAME_KEYS if (n := _text(fields.get(key)))), None)
    return _Doc(file, text, entity_id, entity_type, name, fields, prose)


def _paragraphs(body: str, first_line: int) -> list[tuple[int, str]]:
    out, line = [], first_line
    for block in re.split(r"(\n[ \t]*\n)", body):
        if block.strip() and not re.fullmatch(r"\n[ \t]*\n", block):
            lead = len(block) - len(block.lstrip())
            out.append((line + block.count("\n", 0, lead), block.strip()))
        line += block.count("\n")
    return out


def _entities(docs: list[_Doc]) -> dict[str, Entity]:
    found: dict[str, Entity] = {}
    for doc in docs:
        known = found.get(doc.entity_id)
        if known is None:
            found[doc.entity_id] = Entity(doc.entity_id, doc.entity_type, doc.name, (doc.file,))
        else:  # one entity, several files (character_merlin.txt, character_merlin_backstory.txt)
            found[doc.entity_id] = Entity(known.id, known.type, known.name or doc.name,
                                          known.files + (doc.file,))
    return found


def _lookup(entities: Mapping[str, Entity]) -> dict[str, str]:
    """Normalised id or name → entity id; an id wins over another entity's name."""
    table = {_norm(e.name): e.id for e in entities.values() if e.name}
    table.update({_norm(e.id): e.id for e in entities.values()})
    return table


# -- edges -----------------------------------------------------------------------------------

def _field_edges(doc: _Doc, lookup: dict[str, str], file_entity: dict[str, str],
                 asset_paths: set[str], mentions: _Mentions) -> Iterator[Edge]:
    for path, key, value in _leaves(doc.fields):
        line = _line_of(doc.text, value, key)
        target = _file_target(value, doc.file, file_entity, asset_paths)
        if target is None:
            target = lookup.get(_norm(value))
        if target is None and key in REFERENCE_KEYS and _norm(value):
            target = _norm(value)  # a reference to nothing defined: dangles
        if target is not None:
            if target != doc.entity_id:
                yield Edge(source=doc.entity_id, target=target, kind=key, file=doc.file,
                           line=line, explicit=True)
        elif path.split(".")[0] not in IDENTITY_KEYS:
            yield from _mentions(doc, line, value, mentions)


def _leaves(data: Any, path: str = "", key: str = "") -> Iterator[tuple[str, str, str]]:
    """(field path, field name, text) of every string in ``data``, and of mapping keys.

    A mapping's keys are leaves too: ``relationships: {morgana: rival}`` names morgana.
    """
    if isinstance(data, dict):
        for k, v in data.items():
            sub = f"{path}.{k}" if path else str(k)
            if path and key in REFERENCE_KEYS:
                yield sub, key, str(k)
            yield from _leaves(v, sub, str(k))
    elif isinstance(data, list):
        for item in data:
            yield from _leaves(item, path, key)
    elif isinstance(data, str) and data.strip() and path.split(".")[0] not in IDENTITY_KEYS:
        yield path, key, data.strip()


def _mention_pattern(entities: Mapping[str, Entity]) -> re.Pattern[str] | None:
    terms: set[str] = set()
    for e in entities.values():
        for term in (e.id, e.name):
            if term and len(term) >= MIN_TERM:
                terms.add(term.lower())
    if not terms:
        return None
    # magic_system is also written "magic system" or "magic-system"; longest first so
    # "oak staff" is found before "oak".
    parts = [r"[\s_-]+".join(re.escape(w) for w in re.split(r"[\s_-]+", t))
             for t in sorted(terms, key=len, reverse=True)]
    return re.compile(r"(?<![\w])(?:" + "|".join(parts) + r")(?![\w])", re.IGNORECASE)


@dataclass(frozen=True)
class _Mentions:
    lookup: dict[str, str]              # normalised id or name → entity id
    pattern: re.Pattern[str] | None     # any id or name as a whole word; None: no entities


def _mentions(doc: _Doc, line: int, text: str, mentions: _Mentions) -> Iterator[Edge]:
    if mentions.pattern is None:
        return
    for match in mentions.pattern.finditer(text):
        target = mentions.lookup.get(_norm(match.group(0)))
        if target is not None and target != doc.entity_id:
            yield Edge(source=doc.entity_id, target=target, kind="mentions", file=doc.file,
                       line=line + text.count("\n", 0, match.start()), explicit=False)


def _links(doc: _Doc, line: int, text: str, file_entity: dict[str, str],
           asset_paths: set[str]) -> Iterator[Edge]:
    for match in _LINK.finditer(text):
        target = _file_target(match.group(1), doc.file, file_entity, asset_paths)
        if target is not None and target != doc.entity_id:
            yield Edge(source=doc.entity_id, target=target, kind="link", file=doc.file,
                       line=line + text.count("\n", 0, match.start()), explicit=True)


def _file_target(value: str, here: str, file_entity: dict[str, str],
                 asset_paths: set[str]) -> str | None:
    """The node a path names: an asset's path, or the entity a content file defines."""
    if "/" not in value and "." not in value:
        return None
    ref = value.split("#", 1)[0].removeprefix("./")
    beside = (PurePosixPath(here).parent / ref).as_posix()  # relative to the file, as in Markdown
    for candidate in (ref, beside):
        if candidate in asset_paths:
            return candidate
        if candidate in file_entity:
            return file_entity[candidate]
    return None


def _asset_edges(assets: Iterable[AssetRecord | str], entities: Mapping[str, Entity]) -> Iterator[Edge]:
    for asset in assets:
        path = asset.path if isinstance(asset, AssetRecord) else str(asset)
        keywords = asset.keywords if isinstance(asset, AssetRecord) else name_keywords(path)
        named = {_norm(k) for k in name_keywords(path)}
        said = {_norm(k) for k in keywords}
        stem = _norm(PurePosixPath(path).name.split(".", 1)[0])
        sidecar = asset.sidecar if isinstance(asset, AssetRecord) else None
        for e in entities.values():
            key = _norm(e.id)
            if len(key) < MIN_TERM:
                continue
            if key in named or stem == key or stem.startswith(key + "_"):
                yield Edge(source=path, target=e.id, kind="depicts", file=path, explicit=False)
            elif key in said and sidecar:  # only the sidecar's keywords name it
                yield Edge(source=path, target=e.id, kind="depicts", file=sidecar, explicit=False)


# -- helpers ---------------------------------------------------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _line_of(text: str, value: str, key: str) -> int:
    at = text.find(value)
    if at < 0:
        match = re.search(rf"^[ \t]*\"?{re.escape(key)}\"?\s*:", text, re.MULTILINE)
        at = match.start() if match else 0
    return text.count("\n", 0, at) + 1
