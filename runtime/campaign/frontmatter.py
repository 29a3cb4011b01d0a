"""Phase 2 of ingestion: a content file's frontmatter, and what it leaves unsaid inferred.

A ``.txt``/``.md`` file may open with a YAML block between ``---`` lines; its keys
are the author's (no schema beyond valid YAML; docs/campaigns.md, "Frontmatter").
Fields the author did not write are inferred from the file name first
(``character_merlin_backstory.txt`` → character, ``merlin``, background),
then from the folder (``characters/npcs/gareth/profile.md`` → ``gareth``), then
from the prose. A character's or NPC's id is the one exception: a file whose name
does not follow the convention (``character_<id>``, ``npcs/<id>/profile.md``) says
who it is in its text, its frontmatter ``name`` (or ``display_name``) or the heading
opening its body, so ``characters/npcs/skeleton.txt`` headed ``# Leory`` is ``leory``.
``explicit_fields`` and ``inferred_fields`` say which is which: an inferred value is
a guess, and only what the author wrote becomes a binding (tier 1) frontmatter chunk.

Inference here is deliberately plain keyword matching: it must be repeatable
(the same file always gives the same chunks, so unchanged files are never
re-embedded) and cheap (validation under 2 s).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Iterable

from narratoria.runtime.bounded import shown
from narratoria.runtime.campaign.parsing import load_yaml
from narratoria.runtime.campaign.problems import CampaignError, Problem

ENTITY_TYPES = ("plot_beat", "character", "npc", "lore", "world", "stat", "item")  # longest first
# Folder names that say what their files are.
FOLDER_TYPES = {"characters": "character", "character": "character", "npcs": "npc", "npc": "npc",
                "lore": "lore", "world": "world", "plot": "plot_beat", "beats": "plot_beat",
                "stats": "stat", "items": "item"}
# Trailing name parts that are an aspect of the entity, not part of its id.
ASPECTS = {"backstory": "background", "background": "background", "history": "history",
           "personality": "personality", "goals": "goals", "speech": "speech",
           "relationship": "relationship", "rules": "mechanics", "mechanics": "mechanics",
           "setting": "setting", "profile": "personality", "origins": "history"}
DEFAULT_CONTENT = {"character": "personality", "npc": "personality", "world": "setting",
                   "lore": "world_knowledge", "plot_beat": "plot", "stat": "mechanics",
                   "item": "description"}
PRIORITY_WORDS = {"critical": 5, "essential": 5, "important": 3}
MOODS = {  # a word in the prose → the mood it suggests; the most frequent mood wins
    "foreboding": ("doom", "dread", "ominous", "foreboding", "fall", "ruin", "shadow", "flames"),
    "somber": ("grief", "mourning", "sorrow", "tragic", "melancholy", "melancholic", "burden"),
    "hopeful": ("hope", "hopeful", "joy", "bright", "dawn", "promise"),
    "tense": ("danger", "threat", "fear", "tense", "hunted", "betrayal"),
    "romantic": ("love", "romance", "tender", "longing", "beloved"),
}
_WORD = re.compile(r"[a-z][a-z']+")
_COMMON = frozenset(
    "the and that this with from have were they their there which what when where your into "
    "about would could should been will just than then them these those some very only also "
    "over under after before because while here each other more most such like even much "
    "many still back down upon does being make made says said know knows always never "
    "himself herself itself his her its are was has had not but for you all one who".split())
TAG_LIMIT = 6
# Entities a file names in its text (frontmatter name, heading): people, whose files are
# often named for a role or draft ("skeleton.txt") rather than for who they are.
NAMED_TYPES = frozenset({"character", "npc"})
NAME_FIELDS = ("name", "display_name")
# "# Leory", "## Leory, Keeper of the Tower": the name is the heading up to its epithet.
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t#]*$")
_EPITHET = re.compile(r"\s+[—–-]\s+|[:,;(]")
MAX_NAME_WORDS = 4   # longer is a title ("The Skeleton in the Cellar"), not a name
PORTRAIT_FOLDER = "art/characters"
PORTRAIT_FORMATS = frozenset({"png", "jpg", "jpeg", "webp", "webm"})


@dataclass(frozen=True)
class FileMetadata:
    file: str                              # relative path
    body: str                              # the text after the frontmatter
    body_line: int                         # 1-based line of the file where ``body`` starts
    frontmatter: dict[str, Any]            # the author's block, as written (empty if none)
    has_frontmatter: bool
    entity_type: str
    entity_id: str
    content_type: str
    priority: int
    tags: list[str]
    mood: str | None
    portrait_asset: str | None = None
    explicit_fields: list[str] = field(default_factory=list)
    inferred_fields: list[str] = field(default_factory=list)
    # Where entity_id came from: "frontmatter" (entity_id), "text" (a name or heading
    # naming it) or "path" (the file or folder name).
    id_from: str = "path"

    @property
    def frontmatter_keys(self) -> list[str]:
        return list(self.frontmatter)


def split_frontmatter(text: str, file: str) -> tuple[dict[str, Any] | None, str, int]:
    """(the frontmatter mapping or None, the body, the body's first line)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return None, text, 1
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            parsed = load_yaml("".join(lines[1:i]), file, first_line=2)
            if parsed.value is None:
                fm: dict[str, Any] = {}
            elif isinstance(parsed.value, dict):
                fm = {str(k): v for k, v in parsed.value.items()}
            else:
                raise CampaignError([Problem(file, 2, "-", "frontmatter must be a mapping of "
                                                           "key: value lines")])
            return fm, "".join(lines[i + 1:]), i + 2
    raise CampaignError([Problem(file, 1, "-", "frontmatter opened with '---' on line 1 is "
                                               "never closed by another '---' line")])


def read_metadata(file: str, text: str, assets: Iterable[str] = ()) -> FileMetadata:
    """Frontmatter and inferred metadata of the content file ``file`` (relative path).

    ``assets`` are the campaign's asset paths, where a character's portrait is
    looked for when the frontmatter names none. Chunks never depend on it.
    """
    fm, body, body_line = split_frontmatter(text, file)
    explicit = dict(fm or {})
    problems = _check_explicit(file, text, explicit)
    if problems:
        raise CampaignError(problems)
    name = name_hints(file)
    words = _WORD.findall(body.lower())
    inferred: dict[str, Any] = {}
    entity_type = explicit.get("entity_type") or inferred.setdefault("entity_type", name.entity_type)
    named = None if name.conventional else named_id(explicit, body, str(entity_type))
    entity_id = explicit.get("entity_id") or inferred.setdefault("entity_id",
                                                                 named or name.entity_id)
    content_type = explicit.get("content_type") or inferred.setdefault(
        "content_type", name.aspect or _content_from_prose(body)
        or DEFAULT_CONTENT.get(entity_type, "general"))
    priority = explicit.get("priority")
    if priority is None:
        said = [PRIORITY_WORDS[w] for w in words + name.words if w in PRIORITY_WORDS]
        priority = inferred.setdefault("priority", max(said, default=1))
    tags = explicit.get("tags")
    if tags is None:
        tags = inferred.setdefault("tags", _tags(name.words, words))
    mood = explicit.get("mood")
    if mood is None and (guess := _mood(words)) is not None:
        mood = inferred.setdefault("mood", guess)
    portrait = explicit.get("portrait_asset")
    if portrait is None and entity_type in ("character", "npc"):
        if (found := _portrait(str(entity_id), assets)) is not None:
            portrait = inferred.setdefault("portrait_asset", found)
    return FileMetadata(
        file=file, body=body, body_line=body_line, frontmatter=explicit,
        has_frontmatter=fm is not None, entity_type=str(entity_type), entity_id=str(entity_id),
        content_type=str(content_type), priority=int(priority), tags=[str(t) for t in tags],
        mood=None if mood is None else str(mood),
        portrait_asset=None if portrait is None else str(portrait),
        explicit_fields=[k for k in explicit], inferred_fields=list(inferred),
        id_from="frontmatter" if explicit.get("entity_id") else "text" if named else "path")


def _check_explicit(file: str, text: str, fm: dict[str, Any]) -> list[Problem]:
    """The fields of the table whose type the pipeline relies on; other keys are free."""
    problems = []

    def line(key: str) -> int:
        match = re.search(rf"^{re.escape(key)}\s*:", text, re.MULTILINE)
        return text.count("\n", 0, match.start()) + 1 if match else 1

    for key in ("entity_type", "entity_id", "content_type", "mood"):
        value = fm.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(Problem(file, line(key), key, f"must be non-empty text, got {shown(value)}"))
    priority = fm.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                 or not 1 <= priority <= 5):
        problems.append(Problem(file, line("priority"), "priority",
                                f"must be a whole number 1-5, got {shown(priority)}"))
    tags = fm.get("tags")
    if tags is not None and (not isinstance(tags, list)
                             or not all(isinstance(t, (str, int, float)) and str(t).strip()
                                        for t in tags)):
        problems.append(Problem(file, line("tags"), "tags", f"must be a list of words, got {shown(tags)}"))
    return problems


def named_id(frontmatter: dict[str, Any], body: str, entity_type: str) -> str | None:
    """The id a character's or NPC's file gives it in its text: its frontmatter ``name``
    or ``display_name``, else the heading opening its body; None if it names none."""
    if entity_type not in NAMED_TYPES:
        return None
    for key in NAME_FIELDS:
        value = frontmatter.get(key)
        if isinstance(value, str) and (slug := _name_slug(value)) is not None:
            return slug
    first = next((line for line in body.splitlines() if line.strip()), "")
    heading = _HEADING.match(first.strip())
    if heading is None:
        return None
    return _name_slug(_EPITHET.split(heading["text"].strip("*_` "), 1)[0])


def _name_slug(name: str) -> str | None:
    """``Leory`` → ``leory``; None for what is no name (an aspect, a long title)."""
    words = re.findall(r"[a-z0-9]+", name.lower().replace("'", ""))
    if not words or len(words) > MAX_NAME_WORDS:
        return None
    slug = "_".join(words)
    if slug in ASPECTS or slug in ENTITY_TYPES or slug in FOLDER_TYPES:
        return None
    return slug[:64]


@dataclass(frozen=True)
class _NameHints:
    entity_type: str
    entity_id: str
    aspect: str | None       # content type named by a trailing part of the name
    words: list[str]         # the name's words, for tags and priority
    # The path follows the naming convention, so it names the entity: a type in the file
    # name (character_merlin.txt) or the entity's own folder (npcs/gareth/profile.md).
    conventional: bool = False


def name_hints(file: str) -> _NameHints:
    path = PurePosixPath(file)
    stem = path.name.split(".", 1)[0].lower()  # "npc_wizard.png.keywords" has one stem too
    folders = [p.lower() for p in path.parts[:-1]]
    entity_type, rest, conventional = None, stem, False
    for kind in ENTITY_TYPES:
        if stem.startswith(kind + "_") and len(stem) > len(kind) + 1:
            entity_type, rest = kind, stem[len(kind) + 1:]
            break
    if entity_type is None:
        # "magicsystemlore" → lore, id "magicsystem". Only a type
        # word at either end: "characterization" is not a character.
        for kind in ENTITY_TYPES:
            if stem != kind and (stem.startswith(kind) or stem.endswith(kind)):
                entity_type = kind
                rest = (stem[len(kind):] if stem.startswith(kind) else stem[:-len(kind)]).strip("_-")
                break
    conventional = entity_type is not None
    if entity_type is None:
        entity_type = next((FOLDER_TYPES[f] for f in reversed(folders) if f in FOLDER_TYPES), None)
    parts = [p for p in re.split(r"[_\-\s]+", rest) if p]
    aspect = None
    if len(parts) > 1 and parts[-1] in ASPECTS:
        aspect = ASPECTS[parts.pop()]
    elif len(parts) == 1 and parts[0] in ASPECTS and folders and folders[-1] not in FOLDER_TYPES:
        # characters/npcs/gareth/profile.md: the folder names the entity, the file its aspect
        aspect = ASPECTS[parts[0]]
        parts = [re.sub(r"[^a-z0-9]+", "_", folders[-1]).strip("_")]
        conventional = True
    entity_id = "_".join(parts) or stem
    words = [w for w in re.split(r"[^a-z]+", entity_id) if len(w) >= 3]
    return _NameHints(entity_type or "lore", entity_id, aspect, words, conventional)


def _portrait(entity_id: str, assets: Iterable[str]) -> str | None:
    """The first image under art/characters/ whose name starts with the entity id."""
    for path in sorted(assets):
        p = PurePosixPath(path)
        if (p.parent.as_posix() == PORTRAIT_FOLDER and p.suffix[1:].lower() in PORTRAIT_FORMATS
                and p.name.lower().startswith(entity_id.lower())):
            return path
    return None


def _content_from_prose(body: str) -> str | None:
    lower = body.lower()
    if re.search(r"\bhow [\w\s]{0,30}\bworks?\b|\brules?\b|\bmechanics?\b", lower):
        return "mechanics"
    return None


def _tags(name_words: list[str], words: list[str]) -> list[str]:
    """The file name's words, then the prose's most repeated distinctive words."""
    tags = [w for w in name_words if w not in ENTITY_TYPES and w not in ASPECTS]
    counts = Counter(w for w in words if len(w) >= 4 and w not in _COMMON)
    for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if count < 2 or len(tags) >= TAG_LIMIT:
            break
        if word not in tags:
            tags.append(word)
    return list(dict.fromkeys(tags))[:TAG_LIMIT]


def _mood(words: list[str]) -> str | None:
    seen = set(words)
    scores = {mood: sum(w in seen for w in cues) for mood, cues in MOODS.items()}
    best = max(scores, key=lambda m: scores[m])
    return best if scores[best] else None
