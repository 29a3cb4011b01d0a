"""The campaign's manifest: ``campaign.yml`` or ``manifest.json`` (docs/campaigns.md, "Manifest").

Only ``title`` and ``version`` are required; every other field (author, genre,
tone, content warnings…) is kept as written in ``fields`` for whoever needs it.
The campaign's id is the manifest's ``id`` when it has one, else the folder's
name made into a slug: it names the store scope the lore lives in
(``campaign:<id>``), so it must stay the same across versions of a campaign.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narratoria.runtime.bounded import shown
from narratoria.runtime.campaign.parsing import Parsed, load_json, load_yaml
from narratoria.runtime.campaign.problems import CampaignError, Problem

MANIFEST_NAMES = ("campaign.yml", "manifest.json")  # looked for in this order
REQUIRED = ("title", "version")
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Manifest:
    id: str
    title: str
    version: str
    file: str                      # which manifest file, relative to the campaign folder
    fields: dict[str, Any] = field(default_factory=dict)  # everything the file says


def find_manifest(root: Path) -> Path | None:
    for name in MANIFEST_NAMES:
        if (root / name).is_file():
            return root / name
    return None


def slug(name: str) -> str:
    """A folder name as a campaign id: lower case, runs of other characters as ``_``."""
    return re.sub(r"[^a-z0-9-]+", "_", name.lower()).strip("_-") or "campaign"


def load_manifest(root: Path) -> Manifest:
    """The manifest of the campaign folder ``root``; CampaignError lists every problem."""
    path = find_manifest(root)
    if path is None:
        raise CampaignError([Problem(MANIFEST_NAMES[0], 1, "-",
                                     "no manifest: the campaign needs campaign.yml or manifest.json")])
    name = path.name
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CampaignError([Problem(name, 1, "-", f"cannot read: {exc}")]) from None
    parsed = load_yaml(text, name) if name.endswith(".yml") else load_json(text, name)
    if not isinstance(parsed.value, dict):
        raise CampaignError([Problem(name, 1, "-", "must be a mapping of fields (title, version, …)")])
    problems: list[Problem] = []
    values = {key: _text(parsed, key, name, problems) for key in REQUIRED}
    campaign_id = slug(root.resolve().name)
    if "id" in parsed.value:
        given = _text(parsed, "id", name, problems)
        if given is not None and not _ID.match(given):
            problems.append(Problem(name, parsed.line("id"), "id",
                                    f"must be lower-case letters, digits, '_' or '-', got {shown(given)}"))
        elif given is not None:
            campaign_id = given
    if problems:
        raise CampaignError(problems)
    return Manifest(campaign_id, values["title"], values["version"], name, dict(parsed.value))


def _text(parsed: Parsed, key: str, file: str, problems: list[Problem]) -> str | None:
    """A required text field; a number (``version: 2``) is taken as written."""
    value = parsed.value.get(key)
    if value is None:
        problems.append(Problem(file, parsed.line(key), key, "required field is missing"))
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = parsed.raw.get(key, str(value))
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(file, parsed.line(key), key, f"must be non-empty text, got {shown(value)}"))
        return None
    return value.strip()
