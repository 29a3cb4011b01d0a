"""Campaign validation (architecture §6.2.16): every problem, with file, line and field.

Checks the manifest, that every content file reads as UTF-8 and parses (YAML
frontmatter, YAML and JSON files), the stat definitions in ``stats/`` (§6.2.8)
and that every asset a file names exists. Errors make a campaign unloadable;
warnings (a missing asset, a sidecar beside nothing) are reported and the
campaign still loads, as §6.2.15 step 2.3 says ("add warning, continue").
Nothing is embedded or stored: this is the fast check (under 2 s) an author runs
while writing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from .chunking import load_structured
from .discovery import SIDECAR_SUFFIX, CampaignFile, discover
from .frontmatter import split_frontmatter, read_metadata
from .manifest import Manifest, load_manifest
from .package import is_package, open_campaign
from .parsing import load_json
from .problems import CampaignError, Problem

ASSET_FORMATS = frozenset({"png", "jpg", "jpeg", "webp", "gif", "webm", "mp4",
                           "mp3", "ogg", "wav", "flac"})
STAT_DISPLAYS = frozenset({"bar", "number", "hearts", "pips", "ring", "hidden"})


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
    files = discover(root)
    present = {f.relative for f in files}
    for f in files:
        if f.kind == "asset":
            continue
        if f.kind == "sidecar":
            target = f.relative[: -len(SIDECAR_SUFFIX)]
            if target not in present:
                problems.append(Problem(f.relative, 1, "-", f"keywords sidecar for {target}, "
                                                            "which does not exist", "warning"))
            continue
        try:
            text = f.path.read_text("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(f.relative, 1 + f.path.read_bytes()[: exc.start].count(b"\n"),
                                    "-", "not UTF-8 text"))
            continue
        problems += _check_content(f, text, present)
    return ValidationReport(root, manifest, files, problems)


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
    if _is_stat_file(f):
        problems += _check_stat(f, text)
    for key, ref in _asset_refs(data):
        if ref not in present:
            problems.append(Problem(f.relative, _line_of(text, ref), key,
                                    f"names asset {ref}, which is not in the campaign", "warning"))
    return problems


# -- stats (§6.2.8) --------------------------------------------------------------------

def _is_stat_file(f: CampaignFile) -> bool:
    parts = PurePosixPath(f.relative).parts
    return f.format == "json" and len(parts) >= 2 and parts[0] == "stats"


def _check_stat(f: CampaignFile, text: str) -> list[Problem]:
    parsed = load_json(text, f.relative)
    stat, name = parsed.value, f.relative
    if not isinstance(stat, dict):
        return [Problem(name, 1, "-", "a stat must be a JSON object")]
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(name, parsed.line(key.split(".")[0]), key, message))

    stem = PurePosixPath(name).name[: -len(".json")]
    stat_id = stat.get("id")
    if stat_id is None:
        problem("id", "required field is missing")
    elif not isinstance(stat_id, str) or not stat_id.strip():
        problem("id", f"must be non-empty text, got {stat_id!r}")
    elif not (stem == stat_id or stem.endswith("." + stat_id)):  # npc.<id>.<stat>.json
        problem("id", f"must match the file name ({stem!r}), got {stat_id!r}")
    low = high = None
    rng = stat.get("range")
    if rng is None:
        problem("range", "required field is missing")
    elif not isinstance(rng, dict):
        problem("range", f"must be an object with min and max, got {rng!r}")
    else:
        low, high = rng.get("min"), rng.get("max")
        for key, value in (("min", low), ("max", high)):
            if not _number(value):
                problem(f"range.{key}", f"must be a number, got {value!r}")
        if not (_number(low) and _number(high)):
            low = high = None
        elif low >= high:
            problem("range", f"min ({low:g}) must be below max ({high:g})")
            low = high = None
    default = stat.get("default")
    if default is not None:
        if not _number(default):
            problem("default", f"must be a number, got {default!r}")
        elif low is not None and not low <= default <= high:
            problem("default", f"{default:g} is outside the range {low:g}-{high:g}")
    display = stat.get("display")
    if display is not None and display not in STAT_DISPLAYS:
        problem("display", f"must be one of {', '.join(sorted(STAT_DISPLAYS))}, got {display!r}")
    hidden = stat.get("hidden")
    if hidden is not None and not isinstance(hidden, bool):
        problem("hidden", f"must be true or false, got {hidden!r}")
    for key in ("label", "category", "behavioral_prompt"):
        if key in stat and not isinstance(stat[key], str):
            problem(key, f"must be text, got {stat[key]!r}")
    return problems


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- asset references ------------------------------------------------------------------

def _asset_refs(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, relative path) of every string value that names an asset file."""
    if isinstance(data, dict):
        for key, value in data.items():
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
