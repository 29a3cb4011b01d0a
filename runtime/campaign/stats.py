"""Campaign stats (docs/campaigns.md, "Stats"): named numeric gauges, bound to session state.

An author defines a stat by dropping a JSON file into ``stats/`` (tracked and
hidden from the player under ``stats/hidden/``); a file named
``stats/npc.<npc>.<stat>.json`` scopes the stat to one NPC, and an NPC profile
(``characters/npcs/<npc>/profile.json``) may declare simple stats inline. The
runtime then needs four things from those files, which :class:`StatRegistry`
gives it:

* the starting values at the conventional state paths (docs/state.md, "Conventional paths"):
  ``player.stats.<stat>`` and ``npcs.<npc>.stats.<stat>``;
* the range of every such path, to clamp every ``state_patch`` that writes one
  ("a patch setting health to -5 is clamped to 0");
* the behavioural prose the Narrator AI reads, with the current value, so it
  describes a stat's effect instead of announcing a number;
* which stats the UI shows (hidden ones are tracked, never shown).

The spec gives thresholds only as prose ("At 8+, ...", "At 3 or below, ...",
"Below 200, ..."). Rather than invent a second, structured place to say the
same thing, sentences with such a condition become *bands*, and the prompt for
a stat quotes the bands its current value is in: the narrator sees what applies
now, not only the whole paragraph. Prose without a recognisable condition
("heavy breathing at 70") stays in the paragraph and is simply never singled out.

Validation collects every problem with file, line and field, like the rest of
the campaign package; ``load_stats`` refuses a campaign with any error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from narratoria.runtime.bounded import shown
from narratoria.runtime.campaign.discovery import CampaignFile, discover
from narratoria.runtime.campaign.parsing import Parsed, load_json
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.sentences import sentences
from narratoria.runtime.state.merge import json_copy
from narratoria.runtime.state.paths import get_path
from narratoria.runtime.state.session import StatRange

__all__ = [
    "STAT_DISPLAYS",
    "StatBand",
    "StatDefinition",
    "StatRegistry",
    "check_stats",
    "is_stat_file",
    "load_stats",
    "parse_bands",
    "read_stats",
]

STAT_DISPLAYS = frozenset({"bar", "number", "hearts", "pips", "ring", "hidden"})
STATS_DIR = "stats"
HIDDEN_DIR = "hidden"
NPC_PREFIX = "npc"
# Inline NPC stats, declared in an NPC's profile.
PROFILE_PATTERN = re.compile(r"characters/npcs/([^/]+)/profile\.json")
# A stat id becomes one segment of a dotted state path, so it cannot hold a dot.
_ID = re.compile(r"\w[\w-]*")
# A number standing alone: not the 20 of "1d20" nor the 10 of "0-10".
_NUMBER = r"(?<![\w.-])(-?\d+(?:\.\d+)?)(?!\w)"


def _number(value: Any) -> bool:
    # bool is an int subclass, but `true` is not a bound; JSON also reads `Infinity`.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: float) -> str:
    # Not plain :g, which writes a hull of 1000000 as 1e+06 in the narrator's prompt.
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- threshold bands --------------------------------------------------------------------

@dataclass(frozen=True)
class StatBand:
    """One sentence of a behavioural prompt that applies only in part of the range."""

    text: str
    low: float | None        # None: open below
    high: float | None       # None: open above
    low_inclusive: bool = True
    high_inclusive: bool = True

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (value == self.low and not self.low_inclusive)):
            return False
        if self.high is not None and (value > self.high or (value == self.high and not self.high_inclusive)):
            return False
        return True


# The wordings the spec's examples use, most specific first: "between 3 and 7" must
# not also read as "3+"-ish, and "3 or below" must not read as "below ...".
_BAND_PATTERNS: list[tuple[re.Pattern[str], Callable[[float, float | None], tuple]]] = [
    (re.compile(rf"\bbetween\s+{_NUMBER}\s+and\s+{_NUMBER}\b", re.I),
     lambda a, b: (a, b, True, True)),
    (re.compile(rf"{_NUMBER}\s*\+", re.I), lambda a, _: (a, None, True, True)),
    (re.compile(rf"{_NUMBER}\s+or\s+(?:below|less|lower|under|fewer)\b", re.I),
     lambda a, _: (None, a, True, True)),
    (re.compile(rf"{_NUMBER}\s+or\s+(?:above|more|higher|over|greater)\b", re.I),
     lambda a, _: (a, None, True, True)),
    (re.compile(rf"\b(?:below|under|less\s+than)\s+{_NUMBER}", re.I),
     lambda a, _: (None, a, True, False)),
    (re.compile(rf"\b(?:above|over|more\s+than|greater\s+than)\s+{_NUMBER}", re.I),
     lambda a, _: (a, None, False, True)),
]


def parse_bands(prompt: str) -> tuple[StatBand, ...]:
    """The sentences of ``prompt`` that state a value condition, with that condition.

    Only the first condition of a sentence counts: "At 8+, she calls; below 3 she
    leaves" is two clauses an author should write as two sentences.
    """
    bands: list[StatBand] = []
    for sentence in sentences(prompt):
        best: tuple[int, StatBand] | None = None
        for pattern, bounds in _BAND_PATTERNS:
            match = pattern.search(sentence)
            if match is None or (best is not None and match.start() >= best[0]):
                continue
            numbers = [float(g) for g in match.groups()]
            low, high, low_in, high_in = bounds(numbers[0], numbers[1] if len(numbers) > 1 else None)
            best = (match.start(), StatBand(sentence.strip(), low, high, low_in, high_in))
        if best is not None:
            bands.append(best[1])
    return tuple(bands)


# -- definitions ------------------------------------------------------------------------

@dataclass(frozen=True)
class StatDefinition:
    """One stat as the runtime uses it, defaults filled in (docs/campaigns.md, "Stats")."""

    id: str                       # the stat's own id: "chemistry" (also for npc.owen.chemistry)
    name: str                     # the JSON "label"
    category: str
    min: float
    max: float
    default: float
    display: str
    hidden: bool                  # `"hidden": true`, under stats/hidden/, or display "hidden"
    npc: str | None               # the NPC it belongs to, or None for a player stat
    behavioral_prompt: str
    file: str                     # relative to the campaign folder
    bands: tuple[StatBand, ...] = ()

    @property
    def path(self) -> str:
        """Its conventional state path (docs/state.md, "Conventional paths")."""
        if self.npc is None:
            return f"player.stats.{self.id}"
        return f"npcs.{self.npc}.stats.{self.id}"

    @property
    def range(self) -> StatRange:
        return StatRange(self.min, self.max)

    def clamp(self, value: Any) -> Any:
        """``value`` inside the range; a non-number unchanged (the UI shows it as invalid)."""
        return self.range.clamp(value)

    def active_bands(self, value: Any) -> list[StatBand]:
        return [band for band in self.bands if _number(value) and band.contains(value)]

    def prompt(self, value: Any) -> str:
        """The line the Narrator AI reads for this stat: its value and the bands it is in."""
        scope = self.category if self.npc is None else f"{self.category}, NPC: {_title(self.npc)}"
        current = _fmt(value) if _number(value) else "not set"
        line = f"{self.id} ({scope}): {_fmt(self.min)}-{_fmt(self.max)}, currently {current}."
        if self.hidden:
            line += " Hidden from the player: show it only through the story, never as a number."
        if self.behavioral_prompt:
            line += f' "{self.behavioral_prompt}"'
        active = self.active_bands(value)
        if active:
            line += " Applies now: " + " ".join(f'"{band.text}"' for band in active)
        return line


def _title(stem: str) -> str:
    return stem.replace("_", " ").replace("-", " ").title()


# -- the registry -----------------------------------------------------------------------

@dataclass
class StatRegistry:
    """Every stat of a campaign, keyed by state path, in file order."""

    stats: dict[str, StatDefinition] = field(default_factory=dict)

    def __iter__(self) -> Iterator[StatDefinition]:
        return iter(self.stats.values())

    def __len__(self) -> int:
        return len(self.stats)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def get(self, key: str) -> StatDefinition | None:
        """By state path (``player.stats.health``) or file id (``health``, ``npc.owen.trust``)."""
        found = self.stats.get(key)
        if found is not None:
            return found
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == NPC_PREFIX:
            return self.stats.get(f"npcs.{parts[1]}.stats.{parts[2]}")
        return self.stats.get(f"player.stats.{key}")

    def initial_state(self) -> dict[str, Any]:
        """The state tree a new playthrough starts from: every stat at its default.

        Hidden stats are included: the system tracks them, the UI does not show them.
        """
        tree: dict[str, Any] = {}
        for stat in self.stats.values():
            if stat.npc is None:
                scope = tree.setdefault("player", {})
            else:
                scope = tree.setdefault("npcs", {}).setdefault(stat.npc, {})
            scope.setdefault("stats", {})[stat.id] = stat.default
        return tree

    def ranges(self) -> dict[str, StatRange]:
        """Range by state path, the form ``SessionState(tree, stats=...)`` takes."""
        return {path: stat.range for path, stat in self.stats.items()}

    def clamp(self, path: str, value: Any) -> Any:
        """``value`` clamped if ``path`` is a registered stat, otherwise as given."""
        stat = self.get(path)
        return value if stat is None else stat.clamp(value)

    def clamp_patch(self, patch: Any) -> Any:
        """A copy of ``patch`` with every value written to a stat clamped into its range.

        ``patch`` is a ``state_patch`` payload (a nested object, deep-merged) or a list of
        them. A patch that replaces a whole subtree (``{"npcs": {"owen": {...}}}``)
        is clamped inside too: the walk follows the stat's path, not the patch's.
        Nulls (deletions) and non-numbers are left alone.
        """
        if isinstance(patch, list):
            return [self.clamp_patch(item) for item in patch]
        if not isinstance(patch, dict):
            raise TypeError(f"state patch must be a JSON object (dict), got {type(patch).__name__}")
        patch = json_copy(patch)
        for path, stat in self.stats.items():
            *parents, leaf = path.split(".")
            node: Any = patch
            for segment in parents:
                node = node.get(segment) if isinstance(node, dict) else None
            if isinstance(node, dict) and node.get(leaf) is not None:
                node[leaf] = stat.clamp(node[leaf])
        return patch

    def visible(self) -> list[StatDefinition]:
        """Stats the UI shows, grouped by category, then by label."""
        return sorted((s for s in self.stats.values() if not s.hidden),
                      key=lambda s: (s.category, s.name.casefold(), s.path))

    def hidden(self) -> list[StatDefinition]:
        return [s for s in self.stats.values() if s.hidden]

    def for_npc(self, npc: str) -> list[StatDefinition]:
        return [s for s in self.stats.values() if s.npc == npc]

    def prompts(self, state: dict[str, Any]) -> list[str]:
        """One line per stat for the Narrator AI, with its value in ``state`` and the
        bands of its behavioural prompt that value is in. Hidden stats are included
        (the narrator must respect them) and say so."""
        return [stat.prompt(get_path(state, path)) for path, stat in self.stats.items()]

    def prompt_block(self, state: dict[str, Any]) -> str:
        """``prompts`` as the "CAMPAIGN STATS:" block of the system context; "" if none."""
        lines = self.prompts(state)
        return "CAMPAIGN STATS:\n" + "\n".join(f"- {line}" for line in lines) if lines else ""


# -- reading stat files -----------------------------------------------------------------

def is_stat_file(relative: str) -> bool:
    """Whether ``relative`` is a JSON file under ``stats/`` (stat files)."""
    parts = PurePosixPath(relative).parts
    return len(parts) >= 2 and parts[0] == STATS_DIR and relative.lower().endswith(".json")


def check_stats(root: Path, files: Sequence[CampaignFile]) -> list[Problem]:
    """Every problem of the stat files among ``files`` (for ``validate``)."""
    return read_stats(root, files)[1]


def load_stats(root: Path) -> StatRegistry:
    """The stats of the campaign folder ``root``; ``CampaignError`` with every error if any."""
    root = Path(root)
    registry, problems = read_stats(root, discover(root))
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise CampaignError(errors)
    return registry


def read_stats(root: Path, files: Sequence[CampaignFile]) -> tuple[StatRegistry, list[Problem]]:
    """The registry of every valid stat among ``files`` and the problems of the rest."""
    registry = StatRegistry()
    problems: list[Problem] = []
    inline: list[StatDefinition] = []
    for f in files:
        if f.kind != "content":
            continue
        if is_stat_file(f.relative):
            read = _read_stat_file(f, problems)
            if read is not None:
                _register(registry, read, problems)
        elif _in_stats_folder(f.relative):
            problems.append(Problem(f.relative, 1, "-", "stat files are JSON (stats/<id>.json); "
                                                       "this file is not loaded", "warning"))
        elif PROFILE_PATTERN.fullmatch(f.relative):
            inline += _read_profile_stats(f, problems)
    # A dedicated stat file takes precedence over the same stat inline in a profile.
    for stat in inline:
        if stat.path not in registry.stats:
            registry.stats[stat.path] = stat
    return registry, problems


def _in_stats_folder(relative: str) -> bool:
    parts = PurePosixPath(relative).parts
    return len(parts) >= 2 and parts[0] == STATS_DIR


def _register(registry: StatRegistry, read: tuple[StatDefinition, int], problems: list[Problem]) -> None:
    stat, id_line = read
    earlier = registry.stats.get(stat.path)
    if earlier is not None:
        problems.append(Problem(stat.file, id_line, "id",
                                f"duplicate stat {stat.path}: already defined in {earlier.file}"))
        return
    registry.stats[stat.path] = stat


def _read_text(f: CampaignFile, problems: list[Problem]) -> str | None:
    try:
        return f.path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(f.relative, 1 + f.path.read_bytes()[: exc.start].count(b"\n"),
                                "-", "not UTF-8 text"))
    except OSError as exc:
        problems.append(Problem(f.relative, 1, "-", f"cannot be read: {exc.strerror or exc}"))
    return None


def _nested_line(text: str, parsed: Parsed, top: str, key: str) -> int:
    """The line of ``key`` inside the object at top-level ``top`` (that key's line if not found).

    json keeps no positions; the first ``"key":`` at or after the line naming
    ``top`` is where an author wrote it.
    """
    start = parsed.line(top)
    lines = text.splitlines()
    needle = re.compile(re.escape(f'"{key}"') + r"\s*:")
    for number in range(start, len(lines) + 1):
        if needle.search(lines[number - 1]):
            return number
    return start


def _read_stat_file(f: CampaignFile, problems: list[Problem]) -> tuple[StatDefinition, int] | None:
    """The stat of one file and the line of its id (for a later duplicate), or None."""
    name = f.relative
    parts = PurePosixPath(name).parts
    in_hidden = len(parts) == 3 and parts[1] == HIDDEN_DIR
    if len(parts) > 2 and not in_hidden:
        problems.append(Problem(name, 1, "-", "stat files belong in stats/ or stats/hidden/; "
                                              "this file is not loaded", "warning"))
        return None
    text = _read_text(f, problems)
    if text is None:
        return None
    try:
        parsed = load_json(text, name)
    except CampaignError as exc:
        problems += exc.problems
        return None
    data = parsed.value
    if not isinstance(data, dict):
        problems.append(Problem(name, 1, "-", "a stat must be a JSON object"))
        return None
    found: list[Problem] = []

    def problem(key: str, message: str) -> None:
        top, _, inner = key.partition(".")
        line = _nested_line(text, parsed, top, inner) if inner else parsed.line(top)
        found.append(Problem(name, line, key, message))

    stem = parts[-1][: -len(".json")]

    # The file name says which stat, and for stats/npc.<npc>.<stat>.json whose.
    npc, stat_id = None, stem
    stem_parts = stem.split(".")
    if stem_parts[0] == NPC_PREFIX and len(stem_parts) > 1:
        if len(stem_parts) != 3 or not all(_ID.fullmatch(p) for p in stem_parts[1:]):
            problem("id", f"an NPC stat file is named npc.<npc>.<stat>.json, got {shown(parts[-1])}")
            npc = stat_id = None
        else:
            npc, stat_id = stem_parts[1], stem_parts[2]
    elif not _ID.fullmatch(stem):
        problem("id", f"a stat id is letters, digits, '_' or '-' (it becomes a state path "
                      f"segment), got file name {shown(parts[-1])}")
        stat_id = None

    declared = data.get("id")
    if declared is None:
        problem("id", "required field is missing")
    elif not isinstance(declared, str) or not declared.strip():
        problem("id", f"must be non-empty text, got {shown(declared)}")
    elif not (stem == declared or stem.endswith("." + declared)):  # npc.<npc>.<stat>.json: either
        problem("id", f"must match the file name ({stem!r}), got {shown(declared)}")

    low = high = None
    rng = data.get("range")
    if rng is None:
        problem("range", "required field is missing")
    elif not isinstance(rng, dict):
        problem("range", f"must be an object with min and max, got {shown(rng)}")
    else:
        low, high = rng.get("min"), rng.get("max")
        for key, value in (("min", low), ("max", high)):
            if not _number(value):
                problem(f"range.{key}", f"must be a number, got {shown(value)}")
        if not (_number(low) and _number(high)):
            low = high = None
        elif low >= high:
            problem("range", f"min ({low:g}) must be below max ({high:g})")
            low = high = None

    default = data.get("default")
    if default is not None:
        if not _number(default):
            problem("default", f"must be a number, got {shown(default)}")
        elif low is not None and not low <= default <= high:
            problem("default", f"{default:g} is outside the range {low:g}-{high:g}")

    display = data.get("display", "bar")
    if display not in STAT_DISPLAYS:
        problem("display", f"must be one of {', '.join(sorted(STAT_DISPLAYS))}, got {shown(display)}")
    hidden = data.get("hidden")
    if hidden is not None and not isinstance(hidden, bool):
        problem("hidden", f"must be true or false, got {shown(hidden)}")
    for key in ("label", "category", "behavioral_prompt"):
        if key in data and not isinstance(data[key], str):
            problem(key, f"must be text, got {shown(data[key])}")

    problems += found
    if found or stat_id is None or low is None:
        return None
    prompt = data.get("behavioral_prompt", "").strip()
    return StatDefinition(
        id=stat_id,
        name=data.get("label") or _title(stat_id),
        category=data.get("category") or "general",
        min=low,
        max=high,
        default=low if default is None else default,
        display=display,
        hidden=bool(hidden) or in_hidden or display == "hidden",
        npc=npc,
        behavioral_prompt=prompt,
        file=name,
        bands=parse_bands(prompt),
    ), parsed.line("id")


# -- inline NPC stats (an NPC profile's own) -----------------------------------------------

_RANGE_TEXT = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*")  # "0-10"


def _read_profile_stats(f: CampaignFile, problems: list[Problem]) -> list[StatDefinition]:
    """``{"stats": {"trust": {"value": 3, "range": "0-10"}}}`` in an NPC's profile.json."""
    text = _read_text(f, problems)
    if text is None:
        return []
    try:
        parsed = load_json(text, f.relative)
    except CampaignError:
        return []  # validate reports the syntax error for every JSON file already
    data = parsed.value
    if not isinstance(data, dict) or "stats" not in data:
        return []
    npc = PROFILE_PATTERN.fullmatch(f.relative).group(1)
    stats = data["stats"]
    if not isinstance(stats, dict):
        problems.append(Problem(f.relative, parsed.line("stats"), "stats",
                                f"must be an object of stats, got {shown(stats)}"))
        return []
    found: list[StatDefinition] = []
    for stat_id, spec in stats.items():
        key, line = f"stats.{stat_id}", _nested_line(text, parsed, "stats", stat_id)

        def problem(message: str, sub: str = "") -> None:
            problems.append(Problem(f.relative, line, key + sub, message))

        if not _ID.fullmatch(npc) or not _ID.fullmatch(stat_id):
            problem("NPC and stat ids are letters, digits, '_' or '-' (they become state path segments)")
            continue
        if not isinstance(spec, dict):
            problem(f'must be an object like {{"value": 0, "range": "0-10"}}, got {shown(spec)}')
            continue
        rng = spec.get("range")
        match = _RANGE_TEXT.fullmatch(rng) if isinstance(rng, str) else None
        if isinstance(rng, dict) and _number(rng.get("min")) and _number(rng.get("max")):
            low, high = rng["min"], rng["max"]
        elif match is not None:
            low, high = (_whole(float(g)) for g in match.groups())
        else:
            problem(f'must be "<min>-<max>" or {{"min": .., "max": ..}}, got {shown(rng)}', ".range")
            continue
        if low >= high:
            problem(f"min ({low:g}) must be below max ({high:g})", ".range")
            continue
        value = spec.get("value", low)
        if not _number(value):
            problem(f"must be a number, got {shown(value)}", ".value")
            continue
        if not low <= value <= high:
            problem(f"{value:g} is outside the range {low:g}-{high:g}", ".value")
            continue
        found.append(StatDefinition(
            id=stat_id, name=_title(stat_id), category="general", min=low, max=high,
            default=value, display="bar", hidden=False, npc=npc, behavioral_prompt="",
            file=f.relative))
    return found


def _whole(value: float) -> float:
    # "0-10" is read as text; keep whole numbers ints so the state holds 0, not 0.0.
    return int(value) if value.is_integer() else value

