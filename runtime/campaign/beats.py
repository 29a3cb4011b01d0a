"""Plot beats as a campaign writes them (docs/campaigns.md, "Plot beats"), checked line by line.

A beat is a moment the author wants the story to reach: a title, what happens,
how to steer the narrator toward it, and the conditions under which it may
happen. Campaigns write beats three ways, all read here into one :class:`Beat`:

- one beat a structured file (``plot_beat_vision.yml``)::

      entity_type: plot_beat
      entity_id: vision
      title: Vision of the Future
      description: Merlin receives a prophetic vision of Camelot in flames
      guidance: Let Merlin glimpse the fall of Camelot in the hearth fire.
      priority: critical            # critical | high | medium | low | optional, or 5..1
      conditions:
        scene_count_min: 2          # the scene window, inclusive
        scene_count_max: 5
        requires_beat: [opening_encounter]
        player_state: established_in_camelot        # player.established_in_camelot is truthy
        world_state: ["season == winter"]            # paths under world.
        state: ["player.stats.courage >= 3", "not player.cursed"]
        npc_state: ["merlin.perception >= 20"]       # <npc id>.<attribute> op value
        player_choice: [pray, "ask about the dream"] # the player chose words like these
      consequences:
        - state_patch: {player.gained_knowledge: true}
      skippable: false

- many beats in one file (``plot/beats.json``): ``{"beats": [{"id": ...}, ...]}``
  or a bare list, each entry shaped as above with ``id`` (or ``entity_id``), or as the
  plot-beats schema writes it::

      {"beats": [{"id": "beat_002", "title": "The Betrayal", "description": "...",
                  "priority": "high",
                  "conditions": {"scene_count": {"min": 10, "max": 20},
                                 "requires_beat": "beat_001",
                                 "requires_any_beat": ["beat_003", "beat_004"],
                                 "player_state": "established in Camelot",
                                 "player_choices": ["trusted_morgana", "refused_quest"],
                                 "npc_state": {"morgana": "betrayed"},
                                 "world_state": {"camelot_status": "at_war"},
                                 "custom": {"expression": "player.fame > 50 && not player.cursed"}},
                  "consequences": ["Morgana becomes active antagonist"]}]}

  Both spellings mean the same beat: ``scene_count {min, max}`` is the window;
  ``player_state`` text that is not a condition names a player flag
  (``established in Camelot`` → ``player.established_in_camelot`` is truthy);
  ``requires_any_beat`` needs one of its beats to have triggered, ``player_choices``
  every one of its choices to have been made (``player_choice``: any one);
  ``npc_state {npc: value}`` compares ``npcs.<npc>.state``; ``custom.expression`` is
  state conditions joined by ``&&``; a text consequence is told to the narrator.
  The schema's other fields (``outcomes``, ``dialogue``, ``location``, ``tags``...)
  are the author's notes and are not checked;
- a prose file (``plot_beat_vision.txt``) whose frontmatter holds the
  fields above (``plot_requirements`` is read as ``requires_beat``) and
  whose prose is the narrator's guidance.

A file is a beat file when it says ``entity_type: plot_beat`` or, saying no type,
when its name or folder does (``plot_beat_*``, ``plot/``, ``beats/``): the same
rule ingestion uses, so a beat is searched and tracked alike.

Conditions gate when the story may turn, so a mistyped one is an error, not a
free key: a misspelt ``scene_min`` would otherwise make a beat fire at once.
Every problem names the file, line and field (``beats[2].conditions.scene_count_max``).
"""

from __future__ import annotations

import graphlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from narratoria.runtime.bounded import compose_yaml, load_yaml as load_yaml_value, shown
from narratoria.runtime.campaign.discovery import STRUCTURED_FORMATS, CampaignFile, discover
from narratoria.runtime.campaign.frontmatter import name_hints, split_frontmatter
from narratoria.runtime.campaign.parsing import load_json, load_yaml
from narratoria.runtime.campaign.problems import CampaignError, Problem, Severity
from narratoria.runtime.state.paths import StatePathError, split_path

BEAT_TYPE = "plot_beat"
PRIORITIES = {"critical": 5, "high": 4, "medium": 3, "low": 2, "optional": 1}
PRIORITY_NAMES = {rank: name for name, rank in PRIORITIES.items()}
DEFAULT_PRIORITY = PRIORITIES["medium"]
# Longest first, so "<=" is never read as "<" followed by "=3".
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
ORDERING = frozenset({"<", "<=", ">", ">="})
TRUTHY, FALSY = "truthy", "falsy"   # a bare path, and "not <path>"
CONDITION_KEYS = ("scene_count", "scene_count_min", "scene_count_max", "requires_beat",
                  "requires_any_beat", "player_state", "world_state", "state", "npc_state",
                  "player_choice", "player_choices", "custom")
# The attribute ``npc_state: {morgana: betrayed}`` compares (the plot-beats schema's form).
NPC_STATE_ATTRIBUTE = "state"
# Where each kind of state condition looks: authors write "established_in_camelot"
# under player_state, not "player.established_in_camelot".
STATE_PREFIXES = {"player_state": "player", "world_state": "world", "state": ""}
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# path, then optionally an operator and a value that does not start like another operator.
_CONDITION = re.compile(r"^\s*(?P<path>[^\s<>=!]+)\s*"
                        r"(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>[^\s<>=!].*?))?\s*$")


@dataclass(frozen=True)
class StateCondition:
    """``path op value`` on the session state tree; a missing value never satisfies a
    comparison (a flag the story has not set yet is not ``false`` yet), except ``not``."""

    path: str
    op: str                 # one of OPERATORS, TRUTHY or FALSY
    value: Any = None

    def __str__(self) -> str:
        if self.op == TRUTHY:
            return self.path
        if self.op == FALSY:
            return f"not {self.path}"
        return f"{self.path} {self.op} {self.value!r}"


@dataclass(frozen=True)
class NpcCondition:
    """An NPC's value (perception of the player, a relationship stat) against a threshold."""

    npc: str
    attribute: str          # "perception", "trust", "relationship.trust"
    op: str
    value: Any = None

    def __str__(self) -> str:
        return str(StateCondition(f"{self.npc}.{self.attribute}", self.op, self.value))


@dataclass(frozen=True)
class Beat:
    id: str
    title: str
    description: str
    guidance: str           # what the planner and narrator are told when it triggers
    priority: int           # 5 critical .. 1 optional
    scene_min: int | None = None
    scene_max: int | None = None
    requires: tuple[str, ...] = ()
    state: tuple[StateCondition, ...] = ()
    npcs: tuple[NpcCondition, ...] = ()
    choices: tuple[str, ...] = ()       # any one, said in a player's choice, satisfies it
    all_choices: tuple[str, ...] = ()   # every one, each said in some choice, satisfies it
    requires_any: tuple[str, ...] = ()  # one of these beats triggered in an earlier scene
    consequences: tuple[str, ...] = ()  # what changes afterwards, told to the narrator
    # False: the window's end is a target, not a cutoff; the beat may trigger late.
    skippable: bool = True
    ending: bool = False
    state_patch: dict[str, Any] = field(default_factory=dict, hash=False)
    mood: str | None = None
    music: str | None = None
    file: str = ""
    line: int = 1

    @property
    def priority_name(self) -> str:
        return PRIORITY_NAMES[self.priority]


# -- reading ---------------------------------------------------------------------------

def load_beats(root: Path) -> list[Beat]:
    """The beats of the campaign folder ``root``, in file order; CampaignError if any is wrong."""
    beats, problems = read_beats(discover(Path(root)))
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise CampaignError(errors)
    return beats


def check_beats(root: Path, files: Iterable[CampaignFile] | None = None) -> list[Problem]:
    """Every problem of the campaign's beats (``files``: ``discover(root)`` if not given)."""
    return read_beats(discover(Path(root)) if files is None else files)[1]


def read_beats(files: Iterable[CampaignFile]) -> tuple[list[Beat], list[Problem]]:
    """The beats of ``files`` that parsed, and every problem found in all of them."""
    read: list[tuple[Beat, _Source]] = []
    problems: list[Problem] = []
    for f in files:
        if f.kind != "content":
            continue
        try:
            text = f.path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # validate() reports unreadable files; nothing here to add
        found, trouble = _read_file(f.relative, f.format, text)
        read += found
        problems += trouble
    beats, more = _check_together(read)
    return beats, problems + more


@dataclass
class _Source:
    """One beat's raw fields, where they were written and how its fields are named."""

    file: str
    raw: dict[str, Any]
    lines: dict[str, int]       # field path (as named in problems) -> 1-based line
    prefix: str                 # "" for a one-beat file, "beats[2]." for a list entry
    line: int                   # where the beat starts
    default_id: str | None      # from the file name, for one-beat files
    body: str = ""              # prose files: the guidance
    problems: list[Problem] = field(default_factory=list)
    broken: bool = False        # the beat read has errors: checked with the others, never loaded

    def where(self, key: str) -> int:
        """The line of ``key``, or of the nearest enclosing field written."""
        path = self.prefix + key
        while path:
            if path in self.lines:
                return self.lines[path]
            path = re.sub(r"(\.[^.\[\]]+|\[\d+\])$", "", path) if re.search(r"[.\[]", path) else ""
        return self.line

    def problem(self, key: str, message: str, severity: Severity = "error") -> None:
        self.problems.append(Problem(self.file, self.where(key), self.prefix + key, message,
                                     severity))


def _read_file(file: str, fmt: str, text: str) -> tuple[list[tuple[Beat, _Source]], list[Problem]]:
    hinted = name_hints(file).entity_type == BEAT_TYPE
    try:
        sources = (_structured_sources(file, fmt, text, hinted) if fmt in STRUCTURED_FORMATS
                   else _prose_sources(file, text, hinted))
    except CampaignError as exc:
        # Unparsable: a beat file by name is reported here; any other, by validate().
        return [], exc.problems if hinted else []
    beats, problems = [], []
    for source in sources:
        if isinstance(source, Problem):
            problems.append(source)
            continue
        beat = _beat(source)
        problems += source.problems
        if beat is not None:
            beats.append((beat, source))
    return beats, problems


def _structured_sources(file: str, fmt: str, text: str, hinted: bool) -> list[_Source | Problem]:
    parsed = load_json(text, file) if fmt == "json" else load_yaml(text, file)
    data, lines = parsed.value, _field_lines(text, 1) or dict(parsed.key_lines)
    if isinstance(data, dict):
        kind = data.get("entity_type")
        if kind != BEAT_TYPE and not (kind is None and hinted):
            return []
        if kind is None and "beats" in data:
            entries = data["beats"]
            if not isinstance(entries, list):
                return [Problem(file, lines.get("beats", 1), "beats",
                                f"must be a list of beats, got {_kind(entries)}")]
            return _entries(file, entries, lines, "beats")
        return [_Source(file, data, lines, "", 1, name_hints(file).entity_id)]
    if isinstance(data, list) and hinted:
        return _entries(file, data, lines, "")
    if hinted and data is not None:
        return [Problem(file, 1, "-", f"a beat file holds a beat (a mapping) or a list of "
                                      f"beats, got {_kind(data)}")]
    return []


def _entries(file: str, entries: list[Any], lines: dict[str, int], key: str) -> list[_Source | Problem]:
    found: list[_Source | Problem] = []
    for i, entry in enumerate(entries):
        prefix = f"{key}[{i}]"
        line = lines.get(prefix, lines.get(key, 1))
        if not isinstance(entry, dict):
            found.append(Problem(file, line, prefix, f"a beat must be a mapping, got {_kind(entry)}"))
            continue
        found.append(_Source(file, entry, lines, prefix + ".", line, None))
    return found


def _prose_sources(file: str, text: str, hinted: bool) -> list[_Source | Problem]:
    fm, body, _ = split_frontmatter(text, file)
    kind = (fm or {}).get("entity_type")
    if kind != BEAT_TYPE and not (kind is None and hinted):
        return []
    lines: dict[str, int] = {}
    if fm is not None:
        block = text.splitlines(keepends=True)
        end = next(i for i in range(1, len(block)) if block[i].rstrip() in ("---", "..."))
        lines = _field_lines("".join(block[1:end]), 2)
    return [_Source(file, dict(fm or {}), lines, "", 1, name_hints(file).entity_id,
                    body=body.strip())]


def _field_lines(text: str, first_line: int) -> dict[str, int]:
    """Every field path (``conditions.requires_beat``, ``beats[2].id``) -> its 1-based line.

    JSON is YAML too, so one walk over YAML's nodes serves both; JSON that YAML
    refuses (a tab where YAML wants spaces) falls back to top-level lines.
    """
    try:
        node = compose_yaml(text)  # bounded: aliases and nesting
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    child = f"{path}.{key.value}" if path else str(key.value)
                    lines.setdefault(child, first_line + key.start_mark.line)
                    walk(value, child)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                child = f"{path}[{i}]"
                lines.setdefault(child, first_line + item.start_mark.line)
                walk(item, child)

    if node is not None:
        walk(node, "")
    return lines


# -- one beat --------------------------------------------------------------------------

def _beat(src: _Source) -> Beat | None:
    raw = src.raw
    before = len(src.problems)
    beat_id = _beat_id(src)
    title = _text(src, "title")
    description = _text(src, "description")
    guidance = _text(src, "guidance") or src.body or description or title or ""
    priority = _priority(src)
    conditions = raw.get("conditions")
    if conditions is None:
        conditions = {}
    elif not isinstance(conditions, dict):
        src.problem("conditions", f"must be a mapping of conditions, got {_kind(conditions)}")
        conditions = {}
    for key in conditions:
        if key not in CONDITION_KEYS:
            src.problem(f"conditions.{key}", f"unknown condition; conditions are "
                                             f"{', '.join(CONDITION_KEYS)}")
    low, high = _window(src, conditions)
    requires = _ids(src, "conditions.requires_beat", conditions.get("requires_beat"))
    requires += _ids(src, "plot_requirements", raw.get("plot_requirements"))
    requires_any = _ids(src, "conditions.requires_any_beat", conditions.get("requires_any_beat"))
    state: list[StateCondition] = []
    for key, prefix in STATE_PREFIXES.items():
        value = conditions.get(key)
        if key == "player_state":
            value = _player_flag(value)
        state += _state_conditions(src, f"conditions.{key}", value, prefix)
    state += _custom_conditions(src, conditions.get("custom"))
    npcs = _npc_conditions(src, "conditions.npc_state", conditions.get("npc_state"))
    choices = _phrases(src, "conditions.player_choice", conditions.get("player_choice"))
    all_choices = _phrases(src, "conditions.player_choices", conditions.get("player_choices"))
    skippable = _flag(src, "skippable", True)
    ending = _flag(src, "ending", False)
    patch, told = _consequences(src)
    if told:
        guidance = f"{guidance} Afterwards: {'; '.join(told)}."
    mood, music = _text(src, "mood"), _text(src, "music")
    if beat_id is None:
        return None
    # A beat with problems is still returned, marked, so that the checks across beats
    # (unknown prerequisites, cycles) report on it in the same pass.
    src.broken = len(src.problems) > before
    return Beat(id=beat_id, title=title or beat_id, description=description or "",
                guidance=guidance or beat_id, priority=priority, scene_min=low, scene_max=high,
                requires=tuple(dict.fromkeys(requires)), state=tuple(state), npcs=tuple(npcs),
                choices=tuple(choices), all_choices=tuple(dict.fromkeys(all_choices)),
                requires_any=tuple(dict.fromkeys(requires_any)), consequences=tuple(told),
                skippable=skippable, ending=ending, state_patch=patch,
                mood=mood, music=music, file=src.file, line=src.line)


def _beat_id(src: _Source) -> str | None:
    for key in ("id", "entity_id"):
        if key in src.raw:
            value = src.raw[key]
            if not isinstance(value, str) or not _ID.match(value):
                src.problem(key, f"a beat id is 1-64 letters, digits, '_' or '-', got {shown(value)}")
                return None
            return value
    if src.default_id is None:
        src.problem("id", "required field is missing")
        return None
    if not _ID.match(src.default_id):
        src.problem("entity_id", f"the file name gives the id {src.default_id!r}; write an "
                                 "entity_id of letters, digits, '_' or '-'")
        return None
    return src.default_id


def _text(src: _Source, key: str) -> str | None:
    value = src.raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        src.problem(key, f"must be non-empty text, got {shown(value)}")
        return None
    return " ".join(value.split())


def _priority(src: _Source) -> int:
    value = src.raw.get("priority")
    if value is None:
        return DEFAULT_PRIORITY
    if isinstance(value, str) and value.strip().lower() in PRIORITIES:
        return PRIORITIES[value.strip().lower()]
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5:
        return value
    src.problem("priority", f"must be one of {', '.join(PRIORITIES)} (or 5..1), got {shown(value)}")
    return DEFAULT_PRIORITY


def _window(src: _Source, conditions: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The scene window, written ``scene_count_min``/``max`` or ``scene_count {min, max}``."""
    low = _scene(src, "conditions.scene_count_min", conditions.get("scene_count_min"))
    high = _scene(src, "conditions.scene_count_max", conditions.get("scene_count_max"))
    low_key = "conditions.scene_count_min"  # where a window that opens after it closes is reported
    window = conditions.get("scene_count")
    if isinstance(window, dict):
        for extra in sorted(set(map(str, window)) - {"min", "max"}):
            src.problem(f"conditions.scene_count.{extra}", "unknown key; a scene window has "
                                                            "min and max")
        for bound in ("min", "max"):
            key = f"conditions.scene_count.{bound}"
            if bound not in window:
                continue
            if (low if bound == "min" else high) is not None:
                src.problem(key, f"the window's {bound} is also written as "
                                 f"scene_count_{bound}: write it once")
                continue
            value = _scene(src, key, window[bound])
            if bound == "min":
                low, low_key = value, key
            else:
                high = value
    elif window is not None:
        src.problem("conditions.scene_count", f"must be a mapping of min and max scene numbers, "
                                              f"got {shown(window)}")
    if low is not None and high is not None and low > high:
        src.problem(low_key, f"the window opens at scene {low}, after it closes at scene {high}")
    return low, high


def _scene(src: _Source, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        src.problem(key, f"must be a whole scene number (0 or more), got {shown(value)}")
        return None
    return value


def _player_flag(value: Any) -> Any:
    """``player_state`` text that reads as no condition ("established in Camelot") names
    a player flag, as the YAML form writes it (``established_in_camelot``)."""
    if not isinstance(value, str) or _parse_condition(value) is not None:
        return value
    flag = re.sub(r"[^a-z0-9]+", "_", value.lower()).strip("_")
    return flag or value


def _ids(src: _Source, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and _ID.match(i) for i in items):
        src.problem(key, f"must be a list of beat ids, got {shown(value)}")
        return []
    return list(items)


def _phrases(src: _Source, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i.strip()
                                                           for i in items):
        src.problem(key, f"must be a list of words or phrases, got {shown(value)}")
        return []
    return [" ".join(i.lower().split()) for i in items]


def _flag(src: _Source, key: str, default: bool) -> bool:
    value = src.raw.get(key, default)
    if not isinstance(value, bool):
        src.problem(key, f"must be true or false, got {shown(value)}")
        return default
    return value


# -- conditions ------------------------------------------------------------------------

def _condition_items(src: _Source, key: str, value: Any) -> list[tuple[str, str, str, Any]]:
    """(field, path, op, value) of each condition, however it was written:
    ``"path op value"``, a list of those or of ``{path, op, value}``, or ``{path: value}``."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if isinstance(value, dict) and "path" not in value:
        return [(f"{key}.{path}", str(path), "==", expected) for path, expected in value.items()]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        src.problem(key, f"must be a condition (\"path >= 3\"), a list of them or a mapping of "
                         f"path: value, got {_kind(value)}")
        return []
    items = []
    for i, item in enumerate(value):
        at = f"{key}[{i}]"
        if isinstance(item, str):
            parsed = _parse_condition(item)
            if parsed is None:
                src.problem(at, f"cannot read {shown(item)}: write 'path', 'not path' or "
                                f"'path op value' with op one of {' '.join(OPERATORS)}")
                continue
            items.append((at, *parsed))
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            extra = set(item) - {"path", "op", "value"}
            if extra:
                src.problem(at, f"unknown keys {', '.join(sorted(map(str, extra)))}; "
                                "a condition has path, op and value")
                continue
            op = item.get("op", "==" if "value" in item else TRUTHY)
            items.append((at, item["path"], op, item.get("value")))
        else:
            src.problem(at, f"must be a condition (\"path >= 3\") or {{path, op, value}}, "
                            f"got {shown(item)}")
    return items


def _parse_condition(text: str) -> tuple[str, str, Any] | None:
    words = text.split()
    if len(words) == 2 and words[0] == "not":
        return words[1], FALSY, None
    match = _CONDITION.match(text)
    if match is None:
        return None
    if match["op"] is None:
        return match["path"], TRUTHY, None
    if not match["value"]:
        return None
    try:
        value = load_yaml_value(match["value"])
    except yaml.YAMLError:
        value = match["value"]
    return match["path"], match["op"], value


def _checked(src: _Source, at: str, path: str, op: str, value: Any) -> bool:
    if op not in OPERATORS and op not in (TRUTHY, FALSY):
        src.problem(at, f"unknown operator {shown(op)}; use one of {' '.join(OPERATORS)}")
        return False
    try:
        split_path(path)
    except (StatePathError, TypeError) as exc:
        src.problem(at, f"bad state path: {exc}")
        return False
    if op in ORDERING and not _number(value):
        src.problem(at, f"{op} compares numbers, got {shown(value)}")
        return False
    if op in ("==", "!=") and isinstance(value, (list, dict)):
        src.problem(at, f"compares with a number, text, true/false or null, got {shown(value)}")
        return False
    return True


def _state_conditions(src: _Source, key: str, value: Any, prefix: str) -> list[StateCondition]:
    found = []
    for at, path, op, expected in _condition_items(src, key, value):
        if not isinstance(path, str) or not _checked(src, at, path, op, expected):
            continue
        if prefix and path.split(".", 1)[0] != prefix:
            path = f"{prefix}.{path}"
        found.append(StateCondition(path, op, expected))
    return found


def _npc_conditions(src: _Source, key: str, value: Any) -> list[NpcCondition]:
    found = []
    for at, path, op, expected in _condition_items(src, key, value):
        if not isinstance(path, str) or not _checked(src, at, path, op, expected):
            continue
        npc, _, attribute = path.partition(".")
        if not attribute and op in ("==", "!="):
            attribute = NPC_STATE_ATTRIBUTE  # {morgana: betrayed}: the NPC's state
        if not attribute:
            src.problem(at, f"name the NPC and what of it to compare: "
                            f"'{npc}.perception >= 20', got {shown(path)}")
            continue
        found.append(NpcCondition(npc, attribute, op, expected))
    return found


def _custom_conditions(src: _Source, value: Any) -> list[StateCondition]:
    """``custom: {expression: "a.b > 50 && not c"}``: state conditions that must all hold."""
    key = "conditions.custom"
    if value is None:
        return []
    if not isinstance(value, dict) or set(map(str, value)) != {"expression"}:
        src.problem(key, f"must be {{expression: \"path op value && ...\"}}, got {shown(value)}")
        return []
    expression = value["expression"]
    if not isinstance(expression, str) or not expression.strip():
        src.problem(f"{key}.expression", f"must be non-empty text, got {shown(expression)}")
        return []
    parts = [p.strip() for p in expression.split("&&")]
    if not all(parts):
        src.problem(f"{key}.expression", f"an empty condition around '&&' in {shown(expression)}")
        return []
    return _state_conditions(src, f"{key}.expression", parts, "")


def _consequences(src: _Source) -> tuple[dict[str, Any], list[str]]:
    """The consequences' ``state_patch`` entries as one nested patch, and the ones written
    as text (the plot-beats schema's form), which the narrator is told; other mappings
    (``npc_mood_change``) are the narrator's business, carried in the guidance's beat."""
    value = src.raw.get("consequences")
    if value is None:
        return {}, []
    if not isinstance(value, list):
        src.problem("consequences", f"must be a list, got {_kind(value)}")
        return {}, []
    patch: dict[str, Any] = {}
    told: list[str] = []
    for i, item in enumerate(value):
        at = f"consequences[{i}]"
        if isinstance(item, str) and item.strip():
            told.append(" ".join(item.split()))
            continue
        if not isinstance(item, dict):
            src.problem(at, f"must be text or a mapping such as state_patch: {{...}}, "
                            f"got {shown(item)}")
            continue
        if "state_patch" not in item:
            continue
        given = item["state_patch"]
        if not isinstance(given, dict):
            src.problem(f"{at}.state_patch", f"must be a mapping of path: value, got {shown(given)}")
            continue
        for path, new in given.items():
            try:
                segments = split_path(str(path))
            except StatePathError as exc:
                src.problem(f"{at}.state_patch", f"bad state path: {exc}")
                continue
            node = patch
            for segment in segments[:-1]:
                if not isinstance(node.get(segment), dict):
                    node[segment] = {}  # a later, deeper path wins over an earlier leaf
                node = node[segment]
            node[segments[-1]] = new
    return patch, told


# -- across beats ----------------------------------------------------------------------

def _check_together(read: list[tuple[Beat, _Source]]) -> tuple[list[Beat], list[Problem]]:
    """Duplicate ids, unknown and circular prerequisites, beats that can never trigger."""
    problems: list[Problem] = []
    by_id: dict[str, tuple[Beat, _Source]] = {}
    for beat, src in read:
        if beat.id in by_id:
            first = by_id[beat.id][0]
            key = "id" if "id" in src.raw or src.default_id is None else "entity_id"
            problems.append(Problem(src.file, src.where(key), src.prefix + key,
                                    f"beat {beat.id!r} is already defined in "
                                    f"{first.file}:{first.line}"))
        else:
            by_id[beat.id] = (beat, src)
    for beat, src in by_id.values():
        for need in beat.requires + beat.requires_any:
            if need not in by_id:
                problems.append(_requires_problem(src, need, f"requires beat {shown(need)}, which no "
                                                             "beat file defines"))
    graph = {b.id: [n for n in prerequisites(b) if n in by_id] for b, _ in by_id.values()}
    for cycle in _cycles(graph):
        beat, src = by_id[cycle[0]]
        problems.append(_requires_problem(src, cycle[1], "prerequisites form a cycle, so none "
                                                         f"of these can ever trigger: "
                                                         f"{' -> '.join(cycle)}"))
    beats = [b for b, src in by_id.values() if not src.broken]
    if not problems and len(beats) == len(by_id):
        earliest = earliest_scenes(beats)
        for beat, src in by_id.values():
            if earliest[beat.id] == math.inf and prerequisites(beat):
                problems.append(_requires_problem(
                    src, None, f"can never trigger: its window closes at scene {beat.scene_max}, "
                               "before its prerequisites can all have triggered", "warning"))
    return beats, problems


def _requires_problem(src: _Source, need: str | None, message: str,
                      severity: Severity = "error") -> Problem:
    """A problem at the prerequisite ``need`` as written (either spelling of the field)."""
    conditions = src.raw.get("conditions")
    written = conditions if isinstance(conditions, dict) else {}
    for key, value in (("conditions.requires_beat", written.get("requires_beat")),
                       ("plot_requirements", src.raw.get("plot_requirements")),
                       ("conditions.requires_any_beat", written.get("requires_any_beat"))):
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and (need is None or need in items):
            if need is not None and isinstance(value, list):
                key = f"{key}[{items.index(need)}]"
            return Problem(src.file, src.where(key), src.prefix + key, message, severity)
    return Problem(src.file, src.line, src.prefix + "conditions.requires_beat", message, severity)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each cycle graphlib finds, broken after it is reported so the next one shows."""
    graph = {k: list(v) for k, v in graph.items()}
    found = []
    for _ in range(len(graph) + 1):
        try:
            graphlib.TopologicalSorter(graph).prepare()
            return found
        except graphlib.CycleError as exc:
            # args[1] is [a, b, ..., a] with each node depending on the next.
            cycle = list(exc.args[1])
            found.append(cycle)
            graph[cycle[0]].remove(cycle[1])
    return found


def prerequisites(beat: Beat) -> tuple[str, ...]:
    """Every beat ``beat`` waits on, all of them or any one: the order beats are settled in."""
    return beat.requires + beat.requires_any


def after_prerequisites(beat: Beat, earliest: Mapping[str, float]) -> list[float]:
    """The scenes ``beat``'s prerequisites let it trigger from, given when each can trigger:
    the scene after the last of ``requires``, and after the first of ``requires_any``."""
    at = [earliest.get(n, math.inf) + 1 for n in beat.requires]
    if beat.requires_any:
        at.append(min(earliest.get(n, math.inf) for n in beat.requires_any) + 1)
    return at


def earliest_scenes(beats: Sequence[Beat]) -> dict[str, float]:
    """The first scene each beat could trigger in, from its window and prerequisites alone
    (a beat is eligible the scene after its last prerequisite triggers); inf: never."""
    by_id = {b.id: b for b in beats}
    order = graphlib.TopologicalSorter({b.id: [n for n in prerequisites(b) if n in by_id]
                                        for b in beats}).static_order()
    earliest: dict[str, float] = {}
    for beat_id in order:
        beat = by_id[beat_id]
        at = max([float(max(beat.scene_min or 1, 1))] + after_prerequisites(beat, earliest))
        if beat.skippable and beat.scene_max is not None and at > beat.scene_max:
            at = math.inf
        earliest[beat_id] = at
    return earliest


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text"}.get(type(value), repr(value))


__all__ = ["Beat", "NpcCondition", "StateCondition", "PRIORITIES", "after_prerequisites",
           "check_beats", "earliest_scenes", "load_beats", "prerequisites", "read_beats"]
