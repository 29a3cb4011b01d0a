"""The set of skills the runtime offers, kept current with the folders on disk."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from .config import settings_path, settings_stamp, switched_off
from .discovery import Discovery, Skill, SkillScript, discover, fingerprint

log = logging.getLogger(__name__)


def builtin_skills_dir() -> Path:
    """The repository's `skills/` folder (the package is installed in place)."""
    override = os.environ.get("NARRATORIA_BUILTIN_SKILLS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "skills"


def user_skills_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "narratoria" / "skills"


class SkillRegistry:
    """Skills from several roots; later roots override earlier ones by name.

    ``refresh()`` is cheap (a few stat calls per skill) and reloads only when
    something discovery reads has changed, so callers run it before every plan:
    skills added, edited or removed on disk are picked up without a restart.
    The same goes for the player's disabled-skills list (``skills.json``, see
    ``config.py``): disabled skills stay in ``skills`` (so they can be listed and
    configured) but ``scripts()``, what planners are offered, leaves them out.
    """

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._lock = threading.Lock()
        self._fingerprint: tuple | None = None
        self._discovery = Discovery({}, [], {})
        # The settings file is looked up once: the daemon's environment does not change.
        self._settings = settings_path()
        self._settings_stamp: tuple | None = None
        self.disabled: frozenset[str] = frozenset()
        self.generation = 0
        self.refresh()

    def refresh(self) -> bool:
        """Reload if anything changed on disk; True when a reload happened."""
        current = fingerprint(self.roots)
        stamp = settings_stamp(self._settings)
        with self._lock:
            if current == self._fingerprint and stamp == self._settings_stamp:
                return False
            if current != self._fingerprint:
                self._discovery = discover(self.roots)
                self._fingerprint = current
                skipped = self._discovery.skipped
            else:
                skipped = []
            self.disabled = switched_off(self._discovery.skills.values(), self._settings)
            self._settings_stamp = stamp
            self.generation += 1
        for skip in skipped:
            log.warning("skill skipped: %s", skip)
        return True

    @property
    def skills(self) -> dict[str, Skill]:
        return self._discovery.skills

    @property
    def discovery(self) -> Discovery:
        return self._discovery

    def get(self, name: str) -> Skill | None:
        return self._discovery.skills.get(name)

    def is_enabled(self, name: str) -> bool:
        return name not in self.disabled

    def scripts(self, include_disabled: bool = False) -> list[SkillScript]:
        """The scripts planners may choose: those of enabled skills (all with
        ``include_disabled``)."""
        return [s for skill in self.skills.values()
                if include_disabled or skill.name not in self.disabled
                for s in skill.scripts.values()]

    def resolve(self, tool_path: str) -> SkillScript | None:
        """Find the script a plan's ``toolPath`` names.

        Accepts ``skill/script`` (what planners emit) or a filesystem path to a
        script inside a known skill folder.
        """
        skill_name, _, script_name = tool_path.partition("/")
        skill = self.skills.get(skill_name)
        if skill is not None and script_name in skill.scripts:
            return skill.scripts[script_name]
        try:
            target = Path(tool_path).resolve()
        except OSError:
            return None
        for skill in self.skills.values():
            for script in skill.scripts.values():
                if script.path.resolve() == target:
                    return script
        return None
