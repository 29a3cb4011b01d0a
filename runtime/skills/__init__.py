"""The skills framework: discovery, the registry, health and conformance checks."""

from narratoria.runtime.skills.discovery import (
    Discovery,
    Skill,
    SkillError,
    SkillScript,
    SkippedSkill,
    discover,
    load_skill,
)
from narratoria.runtime.skills.health import Health, SkillHealthTracker
from narratoria.runtime.skills.registry import SkillRegistry, builtin_skills_dir, user_skills_dir

__all__ = [
    "Discovery",
    "Health",
    "Skill",
    "SkillError",
    "SkillHealthTracker",
    "SkillRegistry",
    "SkillScript",
    "SkippedSkill",
    "builtin_skills_dir",
    "discover",
    "load_skill",
    "user_skills_dir",
]
