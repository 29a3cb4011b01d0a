"""The set of skills the runtime offers, kept current with the folders on disk.

A plan's ``toolPath`` is a *name*, never a program: :meth:`SkillRegistry.lookup` maps it
to a script of a registered skill or refuses it. Accepted forms are ``skill/script``
(what the planners emit) and the spec's relative ``skill/scripts/script`` and
``skills/skill/scripts/script``; an absolute path, an empty, ``.`` or ``..`` part, any
other shape, an unknown name, and a registered script whose file lies outside its skill
folder (a link) are refused with a :class:`ToolPathError` whose message quotes the
toolPath only up to :data:`SHOWN_CHARS` characters.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from narratoria.runtime.bundled import bundled_dir
from narratoria.runtime.skills.config import settings_path, settings_stamp, switched_off
from narratoria.runtime.skills.discovery import Discovery, Skill, SkillScript, discover, fingerprint, inside

log = logging.getLogger(__name__)

SHOWN_CHARS = 80  # of a toolPath quoted in an error message


class ToolPathError(ValueError):
    """A toolPath that names no registered script; ``code`` goes into the ToolResult."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def parse_tool_path(tool_path: str) -> tuple[str, str]:
    """(skill, script) a toolPath names; raises ToolPathError for anything else."""
    if tool_path.startswith("/"):
        raise ToolPathError(f"toolPath {shown(tool_path)} is a file path: a plan names a "
                            "registered skill's script as skill/script", "tool_path_refused")
    parts = tool_path.split("/")
    if "\0" in tool_path or any(p in ("", ".", "..") for p in parts):
        raise ToolPathError(f"toolPath {shown(tool_path)} has an empty, '.' or '..' part: a "
                            "plan names a registered skill's script as skill/script",
                            "tool_path_refused")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[1] == "scripts":
        return parts[0], parts[2]
    if len(parts) == 4 and parts[0] == "skills" and parts[2] == "scripts":
        return parts[1], parts[3]
    raise ToolPathError(f"toolPath {shown(tool_path)} is not of the form skill/script (or "
                        "skill/scripts/script)", "tool_path_refused")


def builtin_skills_dir() -> Path:
    """The built-in skills (package data), or ``$NARRATORIA_BUILTIN_SKILLS``."""
    override = os.environ.get("NARRATORIA_BUILTIN_SKILLS")
    if override:
        return Path(override)
    return bundled_dir("skills")


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
        """The script a plan's ``toolPath`` names, or None (see :meth:`lookup`)."""
        try:
            return self.lookup(tool_path)
        except ToolPathError:
            return None

    def lookup(self, tool_path: str) -> SkillScript:
        """The registered script a plan's ``toolPath`` names; raises ToolPathError (its
        message says what is wrong) for a file path, an unknown name, or a script whose
        file has been made a link out of its skill folder since discovery."""
        skill_name, script_name = parse_tool_path(tool_path)
        skill = self.skills.get(skill_name)
        if skill is None:
            raise ToolPathError(f"toolPath {shown(tool_path)} names no registered skill",
                                "unknown_tool")
        script = skill.scripts.get(script_name)
        if script is None:
            raise ToolPathError(f"toolPath {shown(tool_path)}: skill {skill.name!r} has no "
                                "such script", "unknown_tool")
        if not inside(script.path, skill.root):
            raise ToolPathError(f"toolPath {shown(tool_path)}: the script's file is a link to "
                                f"outside the skill folder {skill.root}", "tool_path_refused")
        return script
