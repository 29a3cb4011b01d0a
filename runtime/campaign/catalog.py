"""Campaign discovery (docs/campaigns.md, "Packages"): the campaigns a player can start.

Two sources, in this order: the built-in campaigns (the repository's
``campaigns/`` folder, found the way built-in skills are) and the user's
(``$XDG_DATA_HOME/narratoria/campaigns``, beside the user's skills). Each holds
campaign folders and ``.narratoria``/``.zip`` packages; anything else there (a
README, a folder without a manifest) is not a campaign and is left out.

Every campaign found is validated, so the list says which ones would load and
why the others would not; an invalid campaign is listed rather than hidden, so
an author sees it. Playthrough saves to resume (tier 4) live in the daemon's
sessions; ``narratoria campaigns list`` asks the running daemon for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from narratoria.runtime.bundled import bundled_dir
from narratoria.runtime.campaign.manifest import find_manifest
from narratoria.runtime.campaign.package import is_package, open_campaign
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.campaign.validate import validate

Source = Literal["builtin", "user"]


def builtin_campaigns_dir() -> Path:
    """The built-in campaigns (package data), or ``$NARRATORIA_BUILTIN_CAMPAIGNS``."""
    override = os.environ.get("NARRATORIA_BUILTIN_CAMPAIGNS")
    if override:
        return Path(override)
    return bundled_dir("campaigns")


def user_campaigns_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "narratoria" / "campaigns"


@dataclass(frozen=True)
class CatalogEntry:
    source: Source
    path: Path
    kind: Literal["folder", "package"]
    id: str | None          # None when the manifest cannot be read
    title: str | None
    version: str | None
    valid: bool
    errors: list[str] = field(default_factory=list)    # "file:line: field: message"
    warnings: int = 0


def candidates(root: Path) -> list[Path]:
    """Campaign folders (with a manifest) and packages directly under ``root``, by name."""
    if not root.is_dir():
        return []
    return [p for p in sorted(root.iterdir())
            if not p.name.startswith(".")
            and (is_package(p) or (p.is_dir() and find_manifest(p) is not None))]


def describe(path: Path, source: Source) -> CatalogEntry:
    kind = "package" if is_package(path) else "folder"
    try:
        with open_campaign(path) as root:
            report = validate(root)
    except CampaignError as exc:  # an unsafe or unreadable package
        return CatalogEntry(source, path, kind, None, None, None, False,
                            [str(p) for p in exc.problems])
    m = report.manifest
    return CatalogEntry(source, path, kind, m and m.id, m and m.title, m and m.version,
                        report.ok, [str(p) for p in report.errors], len(report.warnings))


def list_campaigns(roots: list[tuple[Source, Path]] | None = None) -> list[CatalogEntry]:
    """Every campaign of the built-in then the user folder (or ``roots``), each validated."""
    if roots is None:
        roots = [("builtin", builtin_campaigns_dir()), ("user", user_campaigns_dir())]
    return [describe(path, source) for source, root in roots for path in candidates(root)]
