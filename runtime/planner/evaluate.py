"""Planner evaluation: plan a dataset of player inputs and score the plans.

The targets are in docs/scene.md, "Narration eval".

``narratoria eval planner --dataset FILE.jsonl`` runs the real planner path — the
default planner (the embedding router in front of the model, :mod:`.routed`)
under the turn loop's 5 s generation budget, with the pattern planner answering
on a timeout or a planner error — over the built-in skills, and reports::

    {"n", "valid_rate", "skill_accuracy", "p50_ms", "p95_ms", "per_skill": {...},
     "fallbacks", "fallback_reasons", "mistakes", "planner", "budget_s", "warmup_ms"}

``planner`` is the planner's class (``RoutedPlanner`` or ``ModelPlanner``). The
planner is warmed first, untimed (``warmup_ms``; its ``warm(request)`` when it has
one, as a daemon does at start, else one throwaway plan), so the latency figures are
those of a warm planner; ``--no-warmup`` times the cold first case too.

Dataset: JSON Lines, one case a line (blank lines are skipped)::

    {"input": "I roll 3d6 for luck", "expected_skills": ["dice-roller"],
     "forbidden_skills": [], "state": {"location": "the docks"}}

``input`` is required; ``expected_skills`` and ``forbidden_skills`` (lists of skill
names, default ``[]``), ``state`` (an object, default ``{}``), ``campaign`` and
``effects`` are optional, and any other key is an error (a misspelt ``expected_skill`` would silently make a case
trivially right). Every skill named must be one the planner is offered. A case may
expect several skills at once — a multi-skill turn, such as a roll whose outcome is
then written to memory. The shipped dataset (``tests/data/planner_eval.jsonl``) has
none yet because ``dice-roller`` is the only built-in skill; add multi-skill lines
there as more skills ship. A bad dataset fails before any model work, with
``FILE:LINE: FIELD: reason``.

Deeds are checked by what the plan's inputs do, not only by which
skills it calls. ``campaign`` is a built-in campaign's id or a campaign folder: its
NPCs and factions reach the planner (``PlanRequest.entities``) as a daemon's session
would give them. ``effects`` lists what the plan must do, each::

    {"skill": "npc-perception", "target": "odile_venn", "change": "down", "size": "notable"}

``skill`` is ``reputation`` or ``npc-perception`` (and must be expected); ``target``
an id, or a list of ids any of which will do; ``change`` ``up``, ``down`` (an update
moving the target that way) or ``query`` (the skill's query script naming it);
``size`` (optional, with up/down) ``small`` (|delta| <= 10), ``notable`` (< 30) or
``major``. Ids compare as the skills make them (``deeds.entity_id``).

Scoring (pure functions, no model needed):

- a plan is *valid* when it survives a round trip through the wire format
  (``encode`` → :func:`decode_plan`, which re-validates ids, dependencies and cycles)
  and every tool names an offered script;
- the *skills of a plan* are the ``skill`` parts of its tools' ``skill/script`` paths;
- a case is *accurate* when its plan is valid, invokes every expected skill and none
  of the forbidden ones (an invalid plan cannot run, so it is never accurate);
- per skill, over expected vs planned skills (skills of invalid plans count as none):
  ``precision = tp / (tp + fp)``, ``recall = tp / (tp + fn)``, ``support = tp + fn``
  (cases expecting the skill); ``null`` where the denominator is 0;
- a case with effects *meets* them when every one is done by some tool of its plan
  (``effect_accuracy`` over the cases with effects; ``effect_mistakes`` lists misses);
- latency is the whole time to the final plan, the fallback included:
  ``p50_ms`` is the median, ``p95_ms`` the nearest-rank 95th percentile.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narratoria.runtime.planner.base import Planner, PlanRequest
from narratoria.runtime.planner.deeds import SIZES, Entity, campaign_entities, effect_met, entity_id, planned_effects
from narratoria.runtime.planner.pattern import PatternPlanner
from narratoria.runtime.skillrun.plan import Plan, PlanError, decode_plan, encode, validate_plan
from narratoria.runtime.skills.discovery import SkillScript

DEFAULT_BUDGET_S = 5.0  # the turn loop's generation budget (replan.GENERATION_BUDGET_S)
MISTAKES_LIMIT = 20
CASE_KEYS = ("input", "expected_skills", "forbidden_skills", "state", "campaign", "effects")
EFFECT_KEYS = ("skill", "target", "change", "size")
EFFECT_SKILLS = ("npc-perception", "reputation")
CHANGES = ("up", "down", "query")
CAMPAIGN_MAX = 300
MAX_REPORTED_ERRORS = 20
WARMUP_INPUT = "I glance around and wait."  # not a dataset case; its plan is thrown away


# --- the dataset --------------------------------------------------------------------------


class DatasetError(ValueError):
    """A dataset that cannot be evaluated; each entry of ``errors`` reads
    ``FILE:LINE: FIELD: reason``."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        shown = self.errors[:MAX_REPORTED_ERRORS]
        more = len(self.errors) - len(shown)
        super().__init__("\n".join(shown + ([f"... and {more} more"] if more > 0 else [])))


@dataclass(frozen=True)
class ExpectedEffect:
    """What a deed case's plan must do to one NPC or faction."""

    skill: str
    targets: tuple[str, ...]   # ids, any one of which will do
    change: str                # up | down | query
    size: str | None = None    # small | notable | major (up/down only)

    def met(self, plan: Plan | None) -> bool:
        if plan is None:
            return False
        done = [e for tool in plan.tools for e in planned_effects(tool.toolPath, tool.input)]
        return effect_met(self.skill, self.targets, self.change, self.size, done)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"skill": self.skill, "target": list(self.targets),
                               "change": self.change}
        return {**doc, "size": self.size} if self.size else doc


@dataclass(frozen=True)
class EvalCase:
    input: str
    expected_skills: tuple[str, ...] = ()
    forbidden_skills: tuple[str, ...] = ()
    state: dict[str, Any] = field(default_factory=dict)
    line: int = 0  # 1-based line in the dataset file; 0 for cases built in code
    campaign: str = ""                             # a built-in campaign's id or a folder
    effects: tuple[ExpectedEffect, ...] = ()


def _skill_list(value: Any, key: str, where: str, known: frozenset[str] | None) -> list[str]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: {key}: expected a list of skill names, "
                         f"got {type(value).__name__}")
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ValueError(f"{where}: {key}[{index}]: expected a skill name (a non-empty "
                             f"string), got {json.dumps(item)}")
        if known is not None and item not in known:
            offered = ", ".join(sorted(known)) or "none"
            raise ValueError(f"{where}: {key}[{index}]: unknown skill {item!r} "
                             f"(offered: {offered})")
        if item in names:
            raise ValueError(f"{where}: {key}[{index}]: {item!r} is listed twice")
        names.append(item)
    return names


def _effect(doc: Any, where: str, expected: Sequence[str]) -> ExpectedEffect:
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected an object with skill, target and change, "
                         f"got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(EFFECT_KEYS))
    if unknown:
        raise ValueError(f"{where}.{unknown[0][:40]}: unknown field "
                         f"(an effect has {', '.join(EFFECT_KEYS)})")
    skill = doc.get("skill")
    if skill not in EFFECT_SKILLS:
        raise ValueError(f"{where}.skill: expected one of {', '.join(EFFECT_SKILLS)}")
    if skill not in expected:
        raise ValueError(f"{where}.skill: {skill!r} is not among expected_skills")
    target = doc.get("target")
    targets = [target] if isinstance(target, str) else target
    if not isinstance(targets, list) or not targets or not all(
            isinstance(t, str) and t and entity_id(t) == t for t in targets):
        raise ValueError(f"{where}.target: expected an id (lower case, words joined by _) "
                         "or a non-empty list of ids")
    change = doc.get("change")
    if change not in CHANGES:
        raise ValueError(f"{where}.change: expected one of {', '.join(CHANGES)}")
    size = doc.get("size")
    if size is not None and (size not in SIZES or change == "query"):
        raise ValueError(f"{where}.size: expected one of {', '.join(SIZES)}, "
                         "and only with change up or down")
    return ExpectedEffect(skill, tuple(targets), change, size)


def parse_case(doc: Any, where: str, known_skills: Iterable[str] | None = None,
               line: int = 0) -> EvalCase:
    """One case from its decoded JSON; ``ValueError`` names ``where`` and the field."""
    known = frozenset(known_skills) if known_skills is not None else None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(CASE_KEYS))
    if unknown:
        raise ValueError(f"{where}: {unknown[0]}: unknown field "
                         f"(a case has {', '.join(CASE_KEYS)})")
    if "input" not in doc:
        raise ValueError(f"{where}: input: missing")
    text = doc["input"]
    if not isinstance(text, str):
        raise ValueError(f"{where}: input: expected a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{where}: input: empty")
    expected = _skill_list(doc.get("expected_skills", []), "expected_skills", where, known)
    forbidden = _skill_list(doc.get("forbidden_skills", []), "forbidden_skills", where, known)
    both = [name for name in expected if name in forbidden]
    if both:
        raise ValueError(f"{where}: forbidden_skills: {both[0]!r} is also expected")
    state = doc.get("state", {})
    if not isinstance(state, dict):
        raise ValueError(f"{where}: state: expected an object, got {type(state).__name__}")
    campaign = doc.get("campaign", "")
    if not isinstance(campaign, str) or len(campaign) > CAMPAIGN_MAX:
        raise ValueError(f"{where}: campaign: expected a campaign id or folder "
                         f"(a string of at most {CAMPAIGN_MAX} characters)")
    if campaign and campaign_folder(campaign) is None:
        raise ValueError(f"{where}: campaign: {campaign[:80]!r} is neither a built-in "
                         "campaign's id nor a folder")
    effects = doc.get("effects", [])
    if not isinstance(effects, list):
        raise ValueError(f"{where}: effects: expected a list, got {type(effects).__name__}")
    return EvalCase(input=text, expected_skills=tuple(expected),
                    forbidden_skills=tuple(forbidden), state=state, line=line,
                    campaign=campaign,
                    effects=tuple(_effect(e, f"{where}: effects[{i}]", expected)
                                  for i, e in enumerate(effects)))


def jsonl_documents(text: str, source: str,
                    errors: list[str]) -> Iterator[tuple[int, str, Any]]:
    """Each non-blank line's ``(number, "source:number", document)``; a line that is no
    JSON goes to ``errors`` (naming file, line and column) and is skipped."""
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            yield number, where, json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: not JSON: {exc.msg} at column {exc.colno}")


def parse_dataset(text: str, source: str,
                  known_skills: Iterable[str] | None = None) -> list[EvalCase]:
    """Every case of a JSONL text; raises :class:`DatasetError` listing every bad line."""
    known = frozenset(known_skills) if known_skills is not None else None
    cases: list[EvalCase] = []
    errors: list[str] = []
    for number, where, doc in jsonl_documents(text, source, errors):
        try:
            cases.append(parse_case(doc, where, known, number))
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        raise DatasetError(errors)
    if not cases:
        raise DatasetError([f"{source}: no cases (one JSON object a line)"])
    return cases


def load_dataset(path: Path | str, known_skills: Iterable[str] | None = None) -> list[EvalCase]:
    """Read and validate a JSONL dataset; ``known_skills`` are the offered skill names."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DatasetError([f"{path}: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise DatasetError([f"{path}:{line}: not UTF-8 text"]) from None
    return parse_dataset(text, str(path), known_skills)


# --- scoring (pure) -------------------------------------------------------------------------


def plan_skills(plan: Plan) -> tuple[str, ...]:
    """The skills a plan invokes: the ``skill`` part of each ``skill/script`` toolPath."""
    return tuple(sorted({tool.toolPath.split("/", 1)[0] for tool in plan.tools}))


def check_plan(plan: Plan | None, offered_refs: Iterable[str] | None = None) -> str | None:
    """None when ``plan`` is a valid Plan document, else why not.

    The plan is serialised and decoded again with the project's own Plan code, so a
    planner cannot hand back a struct the wire format would reject.
    """
    if plan is None:
        return "no plan"
    try:
        decoded = decode_plan(encode(plan), "plan")
    except PlanError as exc:
        return str(exc)
    except (TypeError, ValueError) as exc:  # msgspec cannot even encode it
        return f"plan: cannot encode: {exc}"
    if offered_refs is not None:
        refs = set(offered_refs)
        for index, tool in enumerate(decoded.tools):
            if tool.toolPath not in refs:
                return f"tools[{index}].toolPath: {tool.toolPath!r} is not an offered script"
    return None


def is_accurate(expected: Iterable[str], forbidden: Iterable[str],
                planned: Iterable[str]) -> bool:
    """Every expected skill planned, and no forbidden one."""
    planned = set(planned)
    return set(expected) <= planned and not (set(forbidden) & planned)


@dataclass
class CaseOutcome:
    case: EvalCase
    planned: tuple[str, ...]      # skills of the final plan, as planned
    valid: bool
    latency_ms: float
    fallback: bool = False
    planner: str = ""             # who wrote the final plan
    error: str | None = None      # why the planner was not used, or why the plan is invalid
    fallback_reason: str | None = None  # timeout | invalid_plan | planner_error
    plan: Plan | None = None

    @property
    def scored_skills(self) -> tuple[str, ...]:
        """What the plan would run: nothing when it is invalid."""
        return self.planned if self.valid else ()

    @property
    def accurate(self) -> bool:
        return self.valid and is_accurate(self.case.expected_skills,
                                          self.case.forbidden_skills, self.planned)

    @property
    def missed_effects(self) -> list[ExpectedEffect]:
        """The case's effects its plan does not do (all of them when it is invalid)."""
        plan = self.plan if self.valid else None
        return [e for e in self.case.effects if not e.met(plan)]


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def skill_accuracy(outcomes: Sequence[CaseOutcome]) -> float | None:
    return _ratio(sum(o.accurate for o in outcomes), len(outcomes))


def valid_rate(outcomes: Sequence[CaseOutcome]) -> float | None:
    return _ratio(sum(o.valid for o in outcomes), len(outcomes))


def per_skill_metrics(pairs: Iterable[tuple[Iterable[str], Iterable[str]]],
                      skills: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """Precision, recall and support per skill from (expected, planned) pairs.

    ``skills`` are reported even when nothing expected or planned them (every offered
    skill appears in the report); precision/recall are None where undefined.
    """
    counts: dict[str, list[int]] = {name: [0, 0, 0] for name in skills}  # tp, fp, fn
    for expected, planned in pairs:
        expected, planned = set(expected), set(planned)
        for name in expected | planned:
            tp_fp_fn = counts.setdefault(name, [0, 0, 0])
            if name in expected and name in planned:
                tp_fp_fn[0] += 1
            elif name in planned:
                tp_fp_fn[1] += 1
            else:
                tp_fp_fn[2] += 1
    return {
        name: {"precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn),
               "support": tp + fn, "tp": tp, "fp": fp, "fn": fn}
        for name, (tp, fp, fn) in sorted(counts.items())
    }


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile: the smallest value with at least q% at or below."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def effect_accuracy(outcomes: Sequence[CaseOutcome]) -> float | None:
    with_effects = [o for o in outcomes if o.case.effects]
    return _ratio(sum(not o.missed_effects for o in with_effects), len(with_effects))


def effect_mistake(outcome: CaseOutcome) -> dict[str, Any]:
    plan = outcome.plan if outcome.valid else None
    return {"line": outcome.case.line, "input": outcome.case.input,
            "missed": [e.to_json() for e in outcome.missed_effects],
            "tools": [{"tool": t.toolPath, "input": t.input} for t in plan.tools] if plan else []}


def mistake(outcome: CaseOutcome) -> dict[str, Any]:
    case = outcome.case
    entry: dict[str, Any] = {"line": case.line, "input": case.input,
                             "expected": list(case.expected_skills),
                             "forbidden": list(case.forbidden_skills),
                             "planned": list(outcome.planned), "fallback": outcome.fallback}
    if not outcome.valid:
        entry["invalid"] = outcome.error
    return entry


def summarize(outcomes: Sequence[CaseOutcome], *, skills: Iterable[str] = (),
              mistakes_limit: int = MISTAKES_LIMIT) -> dict[str, Any]:
    """The report's figures for a list of outcomes."""
    latencies = [o.latency_ms for o in outcomes]
    reasons: dict[str, int] = {}
    for o in outcomes:
        if o.fallback:
            key = o.fallback_reason or "unknown"
            reasons[key] = reasons.get(key, 0) + 1
    return {
        "n": len(outcomes),
        "valid_rate": valid_rate(outcomes),
        "skill_accuracy": skill_accuracy(outcomes),
        "p50_ms": _ms(median(latencies)),
        "p95_ms": _ms(nearest_rank(latencies, 95)),
        "per_skill": per_skill_metrics(((o.case.expected_skills, o.scored_skills)
                                        for o in outcomes), skills),
        "fallbacks": sum(o.fallback for o in outcomes),
        "fallback_reasons": dict(sorted(reasons.items())),
        "mistakes": [mistake(o) for o in outcomes if not o.accurate][:mistakes_limit],
        "effect_cases": sum(bool(o.case.effects) for o in outcomes),
        "effect_accuracy": effect_accuracy(outcomes),
        "effect_mistakes": [effect_mistake(o) for o in outcomes
                            if o.missed_effects][:mistakes_limit],
    }


@dataclass
class EvalReport:
    outcomes: list[CaseOutcome]
    planner: str
    budget_s: float
    skills: tuple[str, ...] = ()
    warmup_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {**summarize(self.outcomes, skills=self.skills),
                "planner": self.planner, "budget_s": self.budget_s,
                "warmup_ms": _ms(self.warmup_ms)}


# --- running ------------------------------------------------------------------------------


def builtin_scripts() -> tuple[SkillScript, ...]:
    """Every script of the built-in skills, those switched off included: what the
    evaluation offers the planner, whatever this machine's settings say."""
    from narratoria.runtime.skills.registry import SkillRegistry, builtin_skills_dir

    return tuple(SkillRegistry([builtin_skills_dir()]).scripts(include_disabled=True))


def default_planner(model_path: Path | str | None = None, skills: Any = None) -> Planner:
    """The turn loop's planner: the embedding router in front of the model;
    ``skills`` is a SkillRegistry."""
    from narratoria.runtime.planner.routed import default_planner as routed_default

    return routed_default(model_path, skills=skills)


Progress = Callable[[int, int, CaseOutcome], None]


def campaign_folder(campaign: str) -> Path | None:
    """The folder a case's ``campaign`` names: a built-in campaign's id, else a path."""
    from narratoria.runtime.campaign.catalog import builtin_campaigns_dir

    builtin = builtin_campaigns_dir() / campaign
    if "/" not in campaign and builtin.is_dir():
        return builtin
    folder = Path(campaign)
    return folder if folder.is_dir() else None


def case_entities(campaign: str, cache: dict[str, tuple[Entity, ...]] | None = None
                  ) -> tuple[Entity, ...]:
    """The NPCs and factions of a case's campaign (a built-in id or a folder); () for none."""
    if not campaign:
        return ()
    if cache is not None and campaign in cache:
        return cache[campaign]
    folder = campaign_folder(campaign)
    if folder is None:
        raise DatasetError([f"campaign {campaign[:80]!r}: not a built-in campaign id or a folder"])
    found = campaign_entities(folder)
    if cache is not None:
        cache[campaign] = found
    return found


async def plan_case(case: EvalCase, planner: Planner, available: tuple[SkillScript, ...], *,
                    fallback: Planner | None, budget_s: float,
                    entities: tuple[Entity, ...] = ()) -> CaseOutcome:
    """Plan one case as the turn loop does: budget, validation, then the fallback."""
    request = PlanRequest(player_input=case.input, available=available, state=dict(case.state),
                          entities=entities)
    started = time.perf_counter()
    plan: Plan | None = None
    used = planner
    error = reason = None
    try:
        plan = await asyncio.wait_for(planner.generate(request), budget_s)
        validate_plan(plan)
    except TimeoutError:
        plan, reason, error = None, "timeout", f"plan generation exceeded {budget_s:g}s"
    except PlanError as exc:
        plan, reason, error = None, "invalid_plan", str(exc)
    except Exception as exc:  # noqa: BLE001 - the turn loop treats any planner failure alike
        plan, reason, error = None, "planner_error", f"{type(exc).__name__}: {exc}"
    if plan is None and fallback is not None:
        used = fallback
        try:
            plan = await fallback.generate(request)
        except Exception as exc:  # noqa: BLE001 - reported as an invalid plan
            plan, error = None, f"{error}; fallback {type(exc).__name__}: {exc}"
    latency_ms = (time.perf_counter() - started) * 1000
    problem = check_plan(plan, (s.ref for s in available))
    return CaseOutcome(
        case=case,
        planned=plan_skills(plan) if plan is not None else (),
        valid=problem is None,
        latency_ms=latency_ms,
        fallback=reason is not None,
        planner=getattr(used, "name", type(used).__name__),
        error=problem if problem is not None else error,
        fallback_reason=reason,
        plan=plan,
    )


async def warm_up(planner: Planner, available: tuple[SkillScript, ...]) -> float:
    """Untimed, before the cases: the planner's own ``warm(request)`` when it has one
    (what a daemon runs at start: router phrases embedded, planning prompt cached),
    else one throwaway plan. A throwaway plan is not enough for a routed planner: a
    turn it routes to narration never reaches the model."""
    request = PlanRequest(player_input=WARMUP_INPUT, available=available)
    started = time.perf_counter()
    try:
        warm = getattr(planner, "warm", None)
        if callable(warm):
            await asyncio.to_thread(warm, request)
        else:
            await planner.generate(request)
    except Exception:  # noqa: BLE001 - the cases will show what is wrong
        pass
    return (time.perf_counter() - started) * 1000


async def evaluate(cases: Sequence[EvalCase], planner: Planner, *,
                   fallback: Planner | None = None, budget_s: float = DEFAULT_BUDGET_S,
                   available: Sequence[SkillScript] | None = None,
                   progress: Progress | None = None, warmup: bool = True) -> EvalReport:
    """Plan every case in order and collect the outcomes.

    ``fallback`` defaults to a :class:`PatternPlanner`; ``available`` to every
    built-in script. Cases run one at a time: the planner owns one model. With
    ``warmup`` one throwaway plan comes first (a daemon pays that once, at its first
    turn); its time is reported as ``warmup_ms``, outside the latency figures.
    """
    offered = tuple(available) if available is not None else builtin_scripts()
    backup = fallback if fallback is not None else PatternPlanner()
    entities: dict[str, tuple[Entity, ...]] = {}
    for case in cases:  # a missing campaign fails before any planning
        case_entities(case.campaign, entities)
    warmup_ms = await warm_up(planner, offered) if warmup and cases else None
    outcomes: list[CaseOutcome] = []
    for index, case in enumerate(cases, start=1):
        outcome = await plan_case(case, planner, offered, fallback=backup, budget_s=budget_s,
                                  entities=case_entities(case.campaign, entities))
        outcomes.append(outcome)
        if progress is not None:
            progress(index, len(cases), outcome)
    # The class, not ``name``: the routed and the bare model planner share name "model".
    return EvalReport(outcomes=outcomes, planner=type(planner).__name__,
                      budget_s=budget_s, skills=tuple(sorted({s.skill for s in offered})),
                      warmup_ms=warmup_ms)


# --- presentation -------------------------------------------------------------------------


def progress_line(index: int, total: int, outcome: CaseOutcome) -> str:
    """``[12/150] 2.3 s ok`` — then ``miss``/``invalid`` and ``(fallback: reason)``."""
    verdict = "ok" if outcome.accurate else "invalid" if not outcome.valid else "miss"
    line = f"[{index}/{total}] {outcome.latency_ms / 1000:.1f} s {verdict}"
    if outcome.fallback:
        line += f" (fallback: {outcome.fallback_reason})"
    if verdict != "ok":
        line += (f" — planned {list(outcome.planned)}, expected "
                 f"{list(outcome.case.expected_skills)}: {outcome.case.input[:60]!r}")
    return line


def format_report(report: dict[str, Any]) -> list[str]:
    """A human summary of :meth:`EvalReport.to_json`."""
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 100:.1f}%"

    lines = [
        f"planner {report['planner']}, {report['n']} cases, budget {report['budget_s']:g} s"
        + (f", warm-up {report['warmup_ms']} ms" if report.get("warmup_ms") is not None else ""),
        f"valid plans     {pct(report['valid_rate'])}",
        f"skill accuracy  {pct(report['skill_accuracy'])}",
        f"latency         p50 {report['p50_ms']} ms, p95 {report['p95_ms']} ms",
        f"fallbacks       {report['fallbacks']}"
        + (f" ({', '.join(f'{k} {v}' for k, v in report['fallback_reasons'].items())})"
           if report["fallback_reasons"] else ""),
    ]
    for name, m in report["per_skill"].items():
        lines.append(f"  {name}: precision {pct(m['precision'])}, recall {pct(m['recall'])}, "
                     f"support {m['support']}")
    if report.get("effect_cases"):
        lines.append(f"deed inputs     {pct(report['effect_accuracy'])} of "
                     f"{report['effect_cases']} cases (target, direction, size)")
    if report["mistakes"]:
        lines.append(f"mistakes (first {len(report['mistakes'])}):")
        for m in report["mistakes"]:
            lines.append(f"  line {m['line']}: planned {m['planned']}, expected {m['expected']}, "
                         f"forbidden {m['forbidden']}: {m['input']}")
    if report.get("effect_mistakes"):
        lines.append(f"deed inputs missed (first {len(report['effect_mistakes'])}):")
        for m in report["effect_mistakes"]:
            missed = "; ".join(f"{e['skill']} {'/'.join(e['target'])} {e['change']}"
                               + (f" {e['size']}" if e.get("size") else "") for e in m["missed"])
            done = "; ".join(f"{t['tool']} {json.dumps(t['input'], sort_keys=True)[:80]}"
                             for t in m["tools"]) or "no tools"
            lines.append(f"  line {m['line']}: wanted {missed}; planned {done}: {m['input']}")
    return lines
