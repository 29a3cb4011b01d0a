"""The set of skills the runtime offers, kept current with the folders on disk."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

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
    """

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._lock = threading.Lock()
        self._fingerprint: tuple | None = None
        self._discovery = Discovery({}, [], {})
        self.generation = 0
        self.refresh()

    def refresh(self) -> bool:
        """Reload if anything changed on disk; True when a reload happened."""
        current = fingerprint(self.roots)
        with self._lock:
            if current == self._fingerprint:
                return False
            self._discovery = discover(self.roots)
            self._fingerprint = current
            self.generation += 1
        for skipped in self._discovery.skipped:
            log.warning("skill skipped: %s", skipped)
        return True

    @property
    def skills(self) -> dict[str, Skill]:
        return self._discovery.skills

    @property
    def discovery(self) -> Discovery:
        return self._discovery

    def get(self, name: str) -> Skill | None:
        return self._discovery.skills.get(name)

    def scripts(self) -> list[SkillScript]:
        return [s for skill in self.skills.values() for s in skill.scripts.values()]

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
