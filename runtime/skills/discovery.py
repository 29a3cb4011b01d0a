"""Skill discovery (docs/skills.md, "Discovery"): find `*/SKILL.md` under skill roots and load them.

Only the frontmatter is read at discovery; the markdown body (the behavioural
prompt) is read when a plan activates the skill (progressive disclosure). An
invalid skill is skipped with a reason naming its file; the others still load.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from narratoria.runtime.bounded import JsonLimitError, load_json, load_yaml

SKILL_FILE = "SKILL.md"
CONFIG_SCHEMA = Path("references") / "config-schema.json"
SCRIPT_MANIFEST = Path("references") / "script-manifest.json"
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


class SkillError(ValueError):
    """A skill that cannot be loaded; the message names the file and the reason."""


class RetryPolicySpec(msgspec.Struct, forbid_unknown_fields=True):
    maxRetries: int = 3
    backoffMs: int = 100

    def __post_init__(self) -> None:
        if self.maxRetries < 0 or self.backoffMs < 0:
            raise ValueError("retryPolicy values must be >= 0")


class LimitsSpec(msgspec.Struct, forbid_unknown_fields=True):
    """A skill's own resource limits per process (``x-narratoria.limits``); unset
    ones keep the daemon's defaults (runtime/skillrun/limits.py)."""

    cpuSeconds: int | None = None
    memoryMb: int | None = None
    openFiles: int | None = None

    def __post_init__(self) -> None:
        for name, value, low in (("cpuSeconds", self.cpuSeconds, 1),
                                 ("memoryMb", self.memoryMb, 64),
                                 ("openFiles", self.openFiles, 16)):
            if value is not None and value < low:
                raise ValueError(f"limits.{name} must be >= {low}, got {value}")


class NarratoriaMeta(msgspec.Struct, rename={"display_name": "displayName"}):
    display_name: str | None = None
    capabilities: list[str] = []
    priority: int = 50
    retryPolicy: RetryPolicySpec | None = None
    timeoutMs: int | None = None
    limits: LimitsSpec | None = None
    # Player inputs that call for this skill: the planner's router compares a
    # turn's input with them (and with the description and capabilities).
    routeExamples: list[str] = []
    # false: installed but off until the player enables it (`narratoria skills enable`),
    # for skills the planner cannot yet route to reliably beside the others.
    defaultEnabled: bool = True

    def __post_init__(self) -> None:
        if any(not isinstance(e, str) or not e.strip() for e in self.routeExamples):
            raise ValueError("routeExamples must be non-empty strings")
        if not 0 <= self.priority <= 100:
            raise ValueError(f"priority must be 0-100, got {self.priority}")
        if self.timeoutMs is not None and self.timeoutMs <= 0:
            raise ValueError("timeoutMs must be > 0")


class Frontmatter(msgspec.Struct):
    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, Any] = {}


class ScriptSpec(msgspec.Struct):
    description: str | None = None
    timeoutMs: int | None = None
    inputSchema: dict[str, Any] | None = None
    examples: list[dict[str, Any]] = []


class ScriptManifest(msgspec.Struct):
    scripts: dict[str, ScriptSpec] = {}


@dataclass(frozen=True)
class SkillScript:
    skill: str
    name: str
    path: Path
    description: str | None = None
    timeout_ms: int | None = None
    input_schema: dict[str, Any] | None = None
    examples: tuple[dict[str, Any], ...] = ()

    @property
    def ref(self) -> str:
        """The planner-facing name, ``skill/script``."""
        return f"{self.skill}/{self.name}"


@dataclass
class Skill:
    name: str
    description: str
    root: Path
    license: str | None = None
    compatibility: str | None = None
    display_name: str | None = None
    capabilities: list[str] = field(default_factory=list)
    priority: int = 50
    route_examples: list[str] = field(default_factory=list)
    default_enabled: bool = True
    retry_policy: RetryPolicySpec | None = None
    timeout_ms: int | None = None
    limits: LimitsSpec | None = None
    scripts: dict[str, SkillScript] = field(default_factory=dict)
    config_schema: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    _body: str | None = None

    @property
    def skill_file(self) -> Path:
        return self.root / SKILL_FILE

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def behavioural_prompt(self) -> str:
        """The SKILL.md body, read on first activation and cached."""
        if self._body is None:
            _, self._body = split_frontmatter(self.skill_file.read_text("utf-8"), self.skill_file)
        return self._body

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "displayName": self.display_name,
            "description": self.description,
            "root": str(self.root),
            "capabilities": self.capabilities,
            "priority": self.priority,
            "scripts": sorted(self.scripts),
            "hasConfigSchema": self.config_schema is not None,
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class SkippedSkill:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def split_frontmatter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """Split ``---``-delimited YAML frontmatter from the markdown body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{path}:1: missing YAML frontmatter (the file must start with ---)")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{path}: frontmatter is not closed by a --- line")
    try:
        data = load_yaml("".join(lines[1:end]))  # bounded: aliases, nesting
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillError(f"{path}{where}: invalid YAML frontmatter: {problem}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{path}: frontmatter must be a YAML mapping")
    return data, "".join(lines[end + 1:]).strip()


def _read_json(path: Path) -> Any:
    try:
        return load_json(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise SkillError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except JsonLimitError as exc:
        raise SkillError(f"{path}: invalid JSON: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read: {exc}") from None


def _convert(data: Any, kind: type, path: Path, prefix: str = "") -> Any:
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc).replace("`$", f"`{prefix}" if prefix else "`$")
        raise SkillError(f"{path}: {text}") from None


def load_skill(root: Path) -> Skill:
    skill_file = root / SKILL_FILE
    try:
        text = skill_file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{skill_file}: cannot read: {exc}") from None
    data, _ = split_frontmatter(text, skill_file)
    front = _convert(data, Frontmatter, skill_file)
    if not NAME_RE.match(front.name) or "--" in front.name:
        raise SkillError(
            f"{skill_file}: name {front.name!r} must be 1-64 lowercase letters, digits and "
            "single hyphens, not starting or ending with a hyphen"
        )
    if front.name != root.name:
        raise SkillError(f"{skill_file}: name {front.name!r} does not match folder {root.name!r}")
    if not front.description.strip():
        raise SkillError(f"{skill_file}: description must not be empty")
    if len(front.description) > 1024:
        raise SkillError(
            f"{skill_file}: description is {len(front.description)} characters (max 1024)"
        )
    if front.compatibility is not None and len(front.compatibility) > 500:
        raise SkillError(f"{skill_file}: compatibility is over 500 characters")
    ext = front.metadata.get("x-narratoria", {})
    meta = _convert(ext, NarratoriaMeta, skill_file, "metadata.x-narratoria")

    skill = Skill(
        name=front.name,
        description=front.description.strip(),
        root=root,
        license=front.license,
        compatibility=front.compatibility,
        display_name=meta.display_name,
        capabilities=list(meta.capabilities),
        priority=meta.priority,
        route_examples=[e.strip() for e in meta.routeExamples],
        default_enabled=meta.defaultEnabled,
        retry_policy=meta.retryPolicy,
        timeout_ms=meta.timeoutMs,
        limits=meta.limits,
    )
    schema_path = root / CONFIG_SCHEMA
    if schema_path.exists():
        schema = _read_json(schema_path)
        if not isinstance(schema, dict):
            raise SkillError(f"{schema_path}: a config schema must be a JSON object")
        skill.config_schema = schema
    manifest = ScriptManifest()
    manifest_path = root / SCRIPT_MANIFEST
    if manifest_path.exists():
        manifest = _convert(_read_json(manifest_path), ScriptManifest, manifest_path)
    skill.scripts = _discover_scripts(skill, manifest)
    for declared in sorted(set(manifest.scripts) - set(skill.scripts)):
        skill.warnings.append(f"{manifest_path}: script {declared!r} has no executable in scripts/")
    return skill


def _discover_scripts(skill: Skill, manifest: ScriptManifest) -> dict[str, SkillScript]:
    scripts_dir = skill.root / "scripts"
    found: dict[str, SkillScript] = {}
    if not scripts_dir.is_dir():
        return found
    for entry in sorted(scripts_dir.iterdir()):
        if entry.name.startswith((".", "_")) or not entry.is_file():
            continue
        if not inside(entry, skill.root):  # a plan may run nothing outside skill folders
            skill.warnings.append(f"{entry}: a link to outside the skill folder; not offered "
                                  "to the planner")
            continue
        if not os.access(entry, os.X_OK):
            skill.warnings.append(f"{entry}: not executable (chmod +x); not offered to the planner")
            continue
        spec = manifest.scripts.get(entry.name, ScriptSpec())
        found[entry.name] = SkillScript(
            skill=skill.name,
            name=entry.name,
            path=entry,
            description=spec.description,
            timeout_ms=spec.timeoutMs or skill.timeout_ms,
            input_schema=spec.inputSchema,
            examples=tuple(spec.examples),
        )
    return found


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies within ``folder``, links resolved in both."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(root.rstrip(os.sep) + os.sep)


@dataclass
class Discovery:
    skills: dict[str, Skill]
    skipped: list[SkippedSkill]
    # name -> the earlier roots' folders it replaced (a user skill overriding a built-in)
    overridden: dict[str, list[Path]]


def discover(roots: list[Path]) -> Discovery:
    """Load every skill under ``roots``; a later root overrides an earlier one by name."""
    skills: dict[str, Skill] = {}
    skipped: list[SkippedSkill] = []
    overridden: dict[str, list[Path]] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            if folder.name.startswith((".", "_")):
                continue
            if not (folder / SKILL_FILE).is_file():
                skipped.append(SkippedSkill(folder, f"no {SKILL_FILE}"))
                continue
            try:
                skill = load_skill(folder)
            except SkillError as exc:
                skipped.append(SkippedSkill(folder, str(exc)))
                continue
            if skill.name in skills:
                overridden.setdefault(skill.name, []).append(skills[skill.name].root)
            skills[skill.name] = skill
    return Discovery(skills, skipped, overridden)


def fingerprint(roots: list[Path]) -> tuple:
    """A cheap summary of what discovery reads, to notice changes on disk."""
    parts: list[tuple] = []
    for root in roots:
        try:
            folders = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in folders:
            for rel in (SKILL_FILE, "scripts", CONFIG_SCHEMA, SCRIPT_MANIFEST):
                try:
                    st = (folder / rel).stat()
                    parts.append((str(folder), str(rel), st.st_mtime_ns, st.st_size, st.st_mode))
                except OSError:
                    parts.append((str(folder), str(rel)))
            scripts = folder / "scripts"
            if scripts.is_dir():
                for entry in scripts.iterdir():
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    parts.append((str(entry), st.st_mtime_ns, st.st_mode))
    return tuple(parts)
