"""Campaign validation (docs/campaigns.md): every problem, with file, line and field.

Checks the manifest, that every content file reads as UTF-8 and parses (YAML
frontmatter, YAML and JSON files), the stats in ``stats/`` and the items in
``items/`` (with ``stats`` and ``items``, the modules the runtime loads
them with, so validation and loading cannot disagree) and that every asset a
file names exists. Errors make a campaign unloadable; warnings (a missing asset, a sidecar beside nothing) are reported and the
campaign still loads ("add warning, continue").
Nothing is embedded or stored: this is the fast check (under 2 s) an author runs
while writing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from narratoria.runtime.campaign.assets import check_assets
from narratoria.runtime.campaign.beats import check_beats
from narratoria.runtime.campaign.chunking import load_structured
from narratoria.runtime.campaign.discovery import (MAX_CAMPAIGN_TEXT_BYTES, MAX_TEXT_FILE_BYTES, SIDECAR_SUFFIX,
                        CampaignFile, discover)
from narratoria.runtime.campaign.frontmatter import (NAMED_TYPES, FileMetadata, read_metadata,
                                                     split_frontmatter)
from narratoria.runtime.campaign.items import check_items
from narratoria.runtime.campaign.manifest import Manifest, find_manifest, load_manifest
from narratoria.runtime.campaign.package import is_package, open_campaign
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.campaign.stats import read_stats

ASSET_FORMATS = frozenset({"png", "jpg", "jpeg", "webp", "gif", "webm", "mp4",
                           "mp3", "ogg", "wav", "flac"})


@dataclass
class ValidationReport:
    root: Path
    manifest: Manifest | None
    files: list[CampaignFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors


def validate(root: Path) -> ValidationReport:
    """Every problem of the campaign folder or package ``root``, in file order.

    A package is extracted for the check and gone after it: its report's ``files``
    name paths that no longer exist (callers that read them use ``open_campaign``).
    """
    root = Path(root)
    if is_package(root):
        try:
            with open_campaign(root) as folder:
                report = validate(folder)
        except CampaignError as exc:  # unsafe or unreadable: nothing inside was checked
            return ValidationReport(root, None, [], exc.problems)
        report.root = root
        return report
    if not root.is_dir():
        return ValidationReport(root, None, [], [Problem(".", 1, "-", f"{root} is not a folder "
                                                                      "or a campaign package")])
    manifest, problems = None, []
    try:
        manifest = load_manifest(root)
    except CampaignError as exc:
        problems += exc.problems
        if find_manifest(root) is None:
            # Not a campaign at all (a home folder, "/"): say so without reading it.
            return ValidationReport(root, None, [], problems)
    if manifest is not None:
        problems += _engine_fields(root, manifest)
    everything = discover(root, oversized=True)
    files = [f for f in everything if not f.too_large]
    present = {f.relative for f in everything}
    # Stats and items are checked across files (a duplicate id, an item naming a stat);
    # their problems are still listed with the file they are about, in file order.
    stats, entity_problems = read_stats(root, files)
    by_file: dict[str, list[Problem]] = defaultdict(list)
    for p in entity_problems + check_items(root, files, stats):
        by_file[p.file].append(p)
    # Art and music, their sidecars and provenance; the generated-asset
    # count is about the campaign as a whole (file "."), so it comes last.
    for p in check_assets(root, files):
        by_file[p.file].append(p)
    for p in check_beats(root, files):  # plot beats: prerequisites, windows, conditions
        by_file[p.file].append(p)
    problems += _size_problems(everything)
    for p in _entity_id_clashes(files):
        by_file[p.file].append(p)
    for f in files:
        found = _check_file(f, present)
        # A syntax error is found by both passes; say it once.
        problems += found + [p for p in by_file.pop(f.relative, []) if p not in found]
    for rest in by_file.values():
        problems += rest
    return ValidationReport(root, manifest, files, problems)


def _engine_fields(root: Path, manifest: Manifest) -> list[Problem]:
    """The manifest's fields for the engine (risky actions, invented names): a bad value
    is a warning, since the campaign plays on with the default (resolution.py, canon.py)."""
    from narratoria.runtime.turn.canon import forbids_new_names
    from narratoria.runtime.turn.resolution import rules_from

    found = [rules_from((), manifest.fields)[1], forbids_new_names(manifest.fields)[1]]
    try:
        lines = (root / manifest.file).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    out = []
    for problem in filter(None, found):
        key, _, message = problem.partition(": ")
        line = next((i for i, text in enumerate(lines, 1)
                     if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*:", text)), 1)
        out.append(Problem(manifest.file, line, key, message, "warning"))
    return out


def _entity_id_clashes(files: list[CampaignFile]) -> list[Problem]:
    """A character or NPC whose file names it in its text (``# Leory``) must not take an id
    another such file already gives: the two would silently become one entity. Files that
    share an id on purpose say so with ``entity_id`` or by name (``character_merlin_backstory``)."""
    people: dict[str, list[tuple[FileMetadata, str]]] = defaultdict(list)
    for f in files:
        if f.kind != "content" or f.format not in ("txt", "md"):
            continue
        try:
            text = f.path.read_text("utf-8")
            meta = read_metadata(f.relative, text)
        except (CampaignError, OSError, UnicodeDecodeError):
            continue  # _check_file reports it
        if meta.entity_type in NAMED_TYPES:
            people[meta.entity_id].append((meta, text))
    problems = []
    for entity_id, found in people.items():
        for meta, text in found:
            others = [m.file for m, _ in found if m is not meta]
            if meta.id_from != "text" or not others:
                continue
            problems.append(Problem(
                meta.file, _naming_line(meta, text), "entity_id",
                f"this file names {entity_id!r}, the id {', '.join(others)} already gives; "
                f"write an entity_id in one of them (the same one only if both describe "
                f"the same {meta.entity_type})"))
    return problems


def _naming_line(meta: FileMetadata, text: str) -> int:
    """The line that named the entity: the frontmatter's name, else the body's heading."""
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        if i < meta.body_line and re.match(r"(name|display_name)\s*:", line):
            return i
        if i >= meta.body_line and line.strip():
            return i
    return 1


def _size_problems(files: list[CampaignFile]) -> list[Problem]:
    """Text files too large to read, and a campaign too large to ingest (discovery.py)."""
    problems = [Problem(f.relative, 1, "-", f"{f.size_bytes} bytes; a text file may be at most "
                                            f"{MAX_TEXT_FILE_BYTES} (1 MiB): split it")
                for f in files if f.too_large]
    total = sum(f.size_bytes for f in files if f.kind != "asset")
    if total > MAX_CAMPAIGN_TEXT_BYTES:
        problems.append(Problem(".", 1, "-", f"{total} bytes of text files; a campaign may hold at "
                                             f"most {MAX_CAMPAIGN_TEXT_BYTES} (16 MiB)"))
    return problems


def _check_file(f: CampaignFile, present: set[str]) -> list[Problem]:
    if f.kind == "asset":
        return []
    if f.kind == "sidecar":
        target = f.relative[: -len(SIDECAR_SUFFIX)]
        if target not in present:
            return [Problem(f.relative, 1, "-", f"keywords sidecar for {target}, "
                                                "which does not exist", "warning")]
        return []
    try:
        text = f.path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        return [Problem(f.relative, 1 + f.path.read_bytes()[: exc.start].count(b"\n"),
                        "-", "not UTF-8 text")]
    return _check_content(f, text, present)


def _check_content(f: CampaignFile, text: str, present: set[str]) -> list[Problem]:
    try:
        if f.format in ("yml", "yaml", "json"):
            data = load_structured(f.relative, text, f.format)
        else:
            data = split_frontmatter(text, f.relative)[0] or {}
    except CampaignError as exc:
        return exc.problems  # unparsable: nothing further can be checked
    problems = []
    if f.format in ("txt", "md"):
        try:
            read_metadata(f.relative, text)
        except CampaignError as exc:
            problems += exc.problems
    for key, ref in _asset_refs(data):
        if ref not in present:
            problems.append(Problem(f.relative, _line_of(text, ref), key,
                                    f"names asset {ref}, which is not in the campaign", "warning"))
    return problems


# -- asset references ------------------------------------------------------------------

def _asset_refs(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, relative path) of every string value that names an asset file."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "provenance" and not path:
                continue  # where an imported file came from, not an asset of this campaign
            yield from _asset_refs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _asset_refs(value, f"{path}[{i}]")
    elif isinstance(data, str):
        value = data.strip()
        if (re.fullmatch(r"[\w./ -]+\.\w+", value) and "://" not in value
                and PurePosixPath(value).suffix[1:].lower() in ASSET_FORMATS):
            yield path, value[2:] if value.startswith("./") else value


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return 1 if at < 0 else text.count("\n", 0, at) + 1
