"""The campaigns one daemon plays: where each one's files are, each read once.

A session names its campaign by id; a player starts one by id (built-in or user
campaign) or by path (a folder or a ``.narratoria``/``.zip`` package). The
library resolves either to files, remembers which path an id was started from (in
``campaigns.json`` in the data dir, so a session started from an arbitrary folder
still finds its campaign after a daemon restart) and keeps each campaign loaded
(``loaded.py``) until one of its files changes.

Packages are extracted once, safely (``package.py``), into the data dir's
``unpacked/`` folder, named by the package's content hash: a changed package is a
new folder, and a session never reads a half-extracted one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from narratoria.runtime.campaign.catalog import builtin_campaigns_dir, candidates, user_campaigns_dir
from narratoria.runtime.campaign.discovery import discover
from narratoria.runtime.campaign.loaded import LoadedCampaign, load_campaign
from narratoria.runtime.campaign.manifest import find_manifest, load_manifest, slug
from narratoria.runtime.campaign.package import is_package, open_campaign
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.files import write_atomic

INDEX_FILE = "campaigns.json"


class CampaignNotFound(KeyError):
    pass


class CampaignLibrary:
    def __init__(self, data_dir: Path, roots: list[Path] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.roots = roots if roots is not None else [builtin_campaigns_dir(), user_campaigns_dir()]
        self._lock = threading.Lock()
        self._loaded: dict[Path, tuple[tuple, LoadedCampaign]] = {}

    # -- where a campaign is ---------------------------------------------------------------

    def locate(self, ref: str) -> Path:
        """The folder or package ``ref`` names: a path, an id started before, or the id
        of a built-in or user campaign."""
        ref = ref.strip()
        if not ref:
            raise CampaignNotFound("campaign: empty")
        try:
            as_path = Path(ref).expanduser()
            exists = as_path.exists()
        except (RuntimeError, OSError, ValueError):  # "~nobody" has no home; a name too long
            as_path, exists = Path(ref), False
        if "/" in ref or as_path.suffix in (".narratoria", ".zip") or exists:
            if not exists:
                raise CampaignNotFound(f"campaign: {ref} does not exist")
            return as_path.resolve()
        known = self._index().get(ref)
        if known is not None and Path(known).exists():
            return Path(known)
        for root in self.roots:
            for path in candidates(root):
                if self._id_of(path) == ref:
                    return path.resolve()
        searched = ", ".join(str(r) for r in self.roots)
        raise CampaignNotFound(f"campaign: no campaign with id {ref!r} (looked in {searched}; "
                               "a folder or package path works too)")

    def folder(self, path: Path) -> Path:
        """``path`` itself for a folder; for a package, its extracted copy."""
        if not is_package(path):
            return path
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        # The folder keeps the package's name: a manifest without an id takes the
        # campaign's id from it, as when the package is opened anywhere else.
        home = self.data_dir / "unpacked" / digest
        target = home / slug(path.stem)
        if not target.is_dir():
            home.mkdir(parents=True, exist_ok=True)
            with open_campaign(path) as extracted:
                staging = Path(tempfile.mkdtemp(dir=home, prefix=".staging-"))
                shutil.copytree(extracted, staging, dirs_exist_ok=True)
                try:
                    os.replace(staging, target)  # whole or not at all
                except OSError:  # another thread got there first: same content
                    shutil.rmtree(staging, ignore_errors=True)
        return target

    def remember(self, campaign_id: str, path: Path) -> None:
        with self._lock:
            index = self._index()
            if index.get(campaign_id) == str(path):
                return
            index[campaign_id] = str(path)
            write_atomic(self.data_dir / INDEX_FILE,
                         json.dumps(index, indent=1, sort_keys=True).encode())

    # -- the campaign itself ---------------------------------------------------------------

    def load(self, ref: str) -> LoadedCampaign:
        """The campaign ``ref`` names, read again only when one of its files changed."""
        folder = self.folder(self.locate(ref))
        stamp = _fingerprint(folder)
        with self._lock:
            cached = self._loaded.get(folder)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        campaign = load_campaign(folder)
        with self._lock:
            self._loaded[folder] = (stamp, campaign)
        return campaign

    def _index(self) -> dict[str, str]:
        try:
            doc = json.loads((self.data_dir / INDEX_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}

    @staticmethod
    def _id_of(path: Path) -> str | None:
        try:
            if is_package(path):
                with open_campaign(path) as folder:
                    return load_manifest(folder).id
            return load_manifest(path).id
        except CampaignError:
            return None


def _fingerprint(folder: Path) -> tuple:
    """Every file's path, size and modification time: any edit changes it."""
    try:
        files = discover(folder)
    except OSError as exc:
        raise CampaignError([Problem(".", 1, "-", f"cannot read {folder}: {exc}")]) from None
    manifest = find_manifest(folder)
    paths = [(f.relative, f.path) for f in files]
    if manifest is not None:
        paths.append((manifest.name, manifest))
    return tuple((name, p.stat().st_size, p.stat().st_mtime_ns) for name, p in paths)
