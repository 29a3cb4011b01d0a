"""Terminal text for the daemon's messages: streamed turns, sessions, state, status.

Everything here returns strings and prints nothing, so tests check exactly what a
player would see; ``play`` and the CLI do the printing. A turn is rendered by a
:class:`TurnRenderer` fed one event at a time, because the layout depends on what
came before (narration tokens leave the cursor mid-line; a dice roll is shown
once even though its tool reports it several ways).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from narratoria.proto import narratoria_pb2 as pb

__all__ = [
    "TurnRenderer", "check_line", "dice_line", "format_choices", "format_patch", "format_session",
    "format_session_line", "format_state", "format_status", "format_timings", "queued_line",
    "render_turn",
]

DICE_SKILL = "dice-roller"
# Timings in the order a turn runs; anything else the daemon reports comes after.
TIMING_ORDER = ("plan", "execute", "narrate", "choices", "store")
MAX_PATCH_ITEMS = 6
MAX_VALUE_CHARS = 40
# Faint text (SGR 2) for a line that is only news of the wait, on a terminal.
DIM, RESET = "\033[2m", "\033[0m"
SHORT_ID = 8  # characters of a session id in a listing: enough to tell sessions apart
# The dice-roller's done summary: "Rolled 2d6+1: 9 (to pick the lock)".
_ROLL_SUMMARY = re.compile(r"Rolled (?P<formula>\S+): (?P<total>-?\d+)(?: \((?P<reason>.*)\))?$")


def _loads(text: str) -> Any:
    """A *_json field's document; None when empty or not JSON (rendering never fails)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


# -- pieces ------------------------------------------------------------------------------

def format_choices(options: Sequence[str]) -> str:
    """A numbered menu, one option a line: ``  1. Open the door``."""
    return "".join(f"  {i}. {option}\n" for i, option in enumerate(options, 1))


def _find_roll(doc: Any, depth: int = 0) -> Mapping[str, Any] | None:
    """The first object holding both ``formula`` and ``total`` (a dice_roll payload, a
    ``lastRoll`` patch, or whatever wraps one), searched breadth-first."""
    if depth > 4:
        return None
    if isinstance(doc, Mapping):
        if "formula" in doc and "total" in doc:
            return doc
        children: Iterable[Any] = doc.values()
    elif isinstance(doc, list):
        children = doc
    else:
        return None
    for child in children:
        found = _find_roll(child, depth + 1)
        if found is not None:
            return found
    return None


def _faces(roll: Mapping[str, Any]) -> list[int]:
    """The dice that count: ``rolls`` of a lastRoll patch, or each term's ``kept``."""
    if isinstance(roll.get("rolls"), list):
        return [f for f in roll["rolls"] if isinstance(f, int)]
    faces: list[int] = []
    for term in roll.get("dice") or []:
        if isinstance(term, Mapping):
            kept = term.get("kept", term.get("rolls")) or []
            sign = -1 if term.get("sign") == -1 else 1
            faces += [sign * f for f in kept if isinstance(f, int)]
    return faces


def dice_line(doc: Any) -> str | None:
    """``  ⚄ 2d6+1 → 9  (3, 5, +1)  to pick the lock``, from anything the dice-roller
    emits (its dice_roll payload, its lastRoll patch, its done summary); None when
    ``doc`` holds no roll."""
    roll = _find_roll(doc)
    if roll is None:
        summary = doc.get("summary") if isinstance(doc, Mapping) else None
        match = _ROLL_SUMMARY.match(summary) if isinstance(summary, str) else None
        if match is None:
            return None
        roll = match.groupdict()
    line = f"  ⚄ {roll['formula']} → {roll['total']}"
    parts = [str(f) for f in _faces(roll)]
    modifier = roll.get("modifier")
    if isinstance(modifier, int) and modifier:
        parts.append(f"{modifier:+d}")
    if parts:
        line += f"  ({', '.join(parts)})"
    if roll.get("reason"):
        line += f"  {roll['reason']}"
    return line + "\n"


def check_line(m: pb.Check) -> str:
    """``  ⚖ vigour check: 2d6 7+2 = 9 vs 10 → partial; cost: Vigour -10``: a risky
    action the engine resolved (its ``check`` turn event)."""
    stat = f"{m.stat} check" if m.stat else "check"
    cost = f"; cost: {m.cost}" if m.cost and m.cost != "none" else ""
    return (f"  ⚖ {stat}: {m.formula or '2d6'} {m.roll}{m.modifier:+d} = {m.total} "
            f"vs {m.difficulty} → {m.outcome}{cost}\n")


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def format_patch(patch: Mapping[str, Any]) -> str:
    """A state patch on one line, ``  ~ hp=7, inventory.rope=true, mood removed``.

    Leaves as dotted paths (patches deep-merge, so a leaf is what changes); null
    deletes a key in a patch, hence "removed"; long values are cut.
    """
    items = [f"{path} removed" if value is None else f"{path}={_compact(value)}"
             for path, value in _leaves(patch)]
    if not items:
        return ""
    shown = items[:MAX_PATCH_ITEMS]
    if len(items) > MAX_PATCH_ITEMS:
        shown.append(f"+{len(items) - MAX_PATCH_ITEMS} more")
    return "  ~ " + ", ".join(shown) + "\n"


def format_timings(done: pb.TurnDone) -> str:
    """``turn 3 · SUCCESS · 1234 ms (plan 100, execute 200, ...)``."""
    outcome = done.outcome or ("FALLBACK" if done.fallback else "SUCCESS")
    timings = dict(done.timings_ms)
    total = timings.pop("total", None)
    ordered = [k for k in TIMING_ORDER if k in timings] + sorted(set(timings) - set(TIMING_ORDER))
    line = f"turn {done.turn_number} · {outcome}"
    if total is not None:
        line += f" · {total} ms"
    if ordered:
        line += " (" + ", ".join(f"{k} {timings[k]}" for k in ordered) + ")"
    return line + "\n"


# -- a streamed turn ---------------------------------------------------------------------

@dataclass
class TurnRenderer:
    """Turns a turn's events into terminal text, one ``feed`` per event.

    Shown always: narration as it streams, dice rolls, state patches, tool errors,
    replans and fallbacks, the choices and a final timing line. ``verbose`` adds
    phases, plans, tool starts/finishes and tool logs.
    """

    verbose: bool = False
    dim: bool = False  # faint wait lines (a terminal); plain text otherwise
    choices: list[str] = field(default_factory=list)
    done: pb.TurnDone | None = None
    _tool_paths: dict[str, str] = field(default_factory=dict)
    _rolls_shown: set[tuple[str, int]] = field(default_factory=set)
    _errors_shown: set[tuple[str, int]] = field(default_factory=set)
    _narrated: bool = False
    _resume_narration: bool = False
    _at_line_start: bool = True

    def feed(self, ev: pb.TurnEvent) -> str:
        kind = ev.WhichOneof("event")
        # An event kind newer than this client is skipped, not fatal.
        handler = getattr(self, f"_{kind}", None) if kind else None
        text = handler(getattr(ev, kind)) if handler else ""
        if not text:
            return ""
        if kind != "narration" and not self._at_line_start:
            text = "\n" + text  # a line of its own, not glued to streamed narration
        self._at_line_start = text.endswith("\n")
        return text

    def _is_dice(self, tool_id: str) -> bool:
        return self._tool_paths.get(tool_id, "").split("/", 1)[0] == DICE_SKILL

    # One method per TurnEvent oneof member, named after it.

    def _started(self, m: pb.TurnStarted) -> str:
        return f"turn {m.turn_number}: {m.input}\n" if self.verbose else ""

    def _phase(self, m: pb.PhaseChanged) -> str:
        if not self.verbose:
            return ""
        return f"  · {m.phase}" + (f" (attempt {m.attempt})" if m.attempt else "") + "\n"

    def _knowledge(self, m: pb.NpcKnowledge) -> str:
        if not self.verbose:
            return ""
        return "".join(f"  · {n.name} knows {len(n.facts)} fact(s), {len(n.memories)} memory(ies)\n"
                       for n in m.npcs)

    def _log(self, m: pb.LogLine) -> str:
        return f"  · {m.source or 'turn'} {m.level}: {m.message}\n" if self.verbose else ""

    def _plan(self, m: pb.PlanGenerated) -> str:
        if not self.verbose:
            return ""
        skills = ", ".join(m.skills) or "no skills"
        return f"  plan {m.attempt} by {m.planner or '?'} in {m.generation_ms} ms: {skills}\n"

    def _tool_started(self, m: pb.ToolStarted) -> str:
        self._tool_paths[m.tool_id] = m.tool_path
        if not self.verbose:
            return ""
        retry = f" (attempt {m.attempt})" if m.attempt > 1 else ""
        return f"  ▸ {m.tool_id} {m.tool_path}{retry}\n"

    def _tool_event(self, m: pb.ToolOutput) -> str:
        event = _loads(m.event_json)
        if not isinstance(event, Mapping):
            return ""
        key = (m.tool_id, m.attempt)
        if m.type == "error":
            self._errors_shown.add(key)
            return (f"  ✗ {m.tool_id}: {event.get('errorCode', 'error')}: "
                    f"{event.get('errorMessage', '')}\n")
        if m.type == "ui_event" and event.get("event") == "dice_roll":
            line = dice_line(event.get("payload"))
            if line and key not in self._rolls_shown:
                self._rolls_shown.add(key)
                return line
            return ""
        if m.type == "state_patch" and isinstance(event.get("patch"), Mapping):
            patch = event["patch"]
            # The dice-roller's lastRoll patch repeats the roll line shown for it.
            if self._is_dice(m.tool_id) and set(patch) <= {"lastRoll"} and not self.verbose:
                return ""
            return format_patch(patch)
        if m.type == "log" and self.verbose:
            return f"    {m.tool_id}: {event.get('message', '')}\n"
        return ""

    def _tool_finished(self, m: pb.ToolFinished) -> str:
        key = (m.tool_id, m.attempt)
        if not m.ok:
            # The error event (if any) already said why; do not repeat it.
            why = "" if key in self._errors_shown or not m.error else f": {m.error}"
            return f"  ✗ {m.tool_id} failed after {m.duration_ms} ms{why}\n"
        text = ""
        if self._is_dice(m.tool_id) and key not in self._rolls_shown:
            line = dice_line(_loads(m.output_json))
            if line:
                self._rolls_shown.add(key)
                text += line
        if self.verbose:
            text += f"  ■ {m.tool_id} ok in {m.duration_ms} ms\n"
        return text

    def _replan(self, m: pb.Replan) -> str:
        line = f"  ↻ attempt {m.attempt} failed"
        if m.reason:
            line += f": {m.reason}"
        details = []
        if m.failed_tools:
            details.append("failed " + ", ".join(m.failed_tools))
        if m.disabled_skills:
            details.append("disabled " + ", ".join(m.disabled_skills))
        if details:
            line += f" ({'; '.join(details)})"
        return line + "; replanning\n"

    def _fallback(self, m: pb.Fallback) -> str:
        reason = f": {m.reason}" if m.reason else ""
        return f"  ! fallback after {m.attempts} attempt(s){reason}\n"

    def _check(self, m: pb.Check) -> str:
        return check_line(m)

    def _queued(self, m: pb.Queued) -> str:
        # The daemon sends one per change of place, so each is a line worth showing.
        self._resume_narration = self._narrated
        line = queued_line(m)
        return f"{DIM}{line}{RESET}\n" if self.dim else line + "\n"

    def _narration(self, m: pb.NarrationToken) -> str:
        self._narrated = self._narrated or bool(m.text)
        if self._resume_narration:
            # Narration resumed under a wait line: no stray space at the line's start.
            self._resume_narration = not m.text.strip()
            return m.text.lstrip()
        return m.text

    def _choices(self, m: pb.Choices) -> str:
        self.choices = list(m.options)
        return "\n" + format_choices(m.options) if m.options else ""

    def _done(self, m: pb.TurnDone) -> str:
        self.done = m
        # A daemon that sent no tokens (or a client that joined late) still shows the story.
        text = "" if self._narrated or not m.narration else m.narration.rstrip("\n") + "\n"
        return text + format_timings(m)


def queued_line(m: pb.Queued) -> str:
    """``  … waiting for the model: position 2``, the wait so far when it is a while."""
    line = f"  … waiting for the model: position {m.position}"
    return line + (f" ({m.wait_s:.0f} s)" if m.wait_s >= 1 else "")


def render_turn(events: Iterable[pb.TurnEvent], verbose: bool = False) -> str:
    """All of a turn at once (tests, logs): what ``play`` would have printed."""
    renderer = TurnRenderer(verbose=verbose)
    return "".join(renderer.feed(ev) for ev in events)


# -- sessions, state, status -------------------------------------------------------------

def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M") if ms else "-"


def format_session_line(s: pb.Session) -> str:
    """One row of ``session list``."""
    title = f"  {s.title}" if s.title else ""
    campaign = s.campaign or "-"
    return (f"{s.id}  {s.status:<6}  {s.turns:>3} turns  {campaign}  "
            f"updated {_when(s.updated_at_ms)}{title}\n")


def format_session(s: pb.Session) -> str:
    """A session as a player comes back to it: header, last narration, choices."""
    header = f"session {s.id}"
    if s.title:
        header += f" “{s.title}”"
    header += f" · campaign {s.campaign or '-'} · {s.status} · {s.turns} turns\n"
    if s.parent_session_id:
        header += f"branched from {s.parent_session_id} at scene {s.branched_at_scene}\n"
    text = header
    if s.last_narration:
        text += "\n" + s.last_narration.rstrip("\n") + "\n"
    if s.choices:
        text += "\n" + format_choices(s.choices)
    return text


def format_state(state: pb.SessionState) -> str:
    """The state tree as indented JSON, after a one-line header."""
    tree = _loads(state.state_json)
    body = json.dumps(tree if tree is not None else {}, indent=2, sort_keys=True,
                      ensure_ascii=False)
    return f"state of {state.session_id} after {state.turns} turns:\n{body}\n"


def format_status(st: pb.StatusResponse) -> str:
    """``narratoria status``: what runs, the model, the skill processes, the sessions."""
    lines = [f"narratoria daemon {st.version or '?'} · up {st.uptime_s:.0f} s · "
             f"data {st.data_dir or '-'}"]
    model = st.model_path or "none"
    if st.model_quantization:
        model += f" · runs as {st.model_quantization}"
    loaded = f"model {model} · loaded {st.model_loads}× ({st.model_load_seconds:.1f} s)"
    if st.model_slots_max:
        lines.append(loaded)
        lines.append(f"model slots {st.model_slots_used}/{st.model_slots_max} · "
                     f"queue {st.model_queue_depth}")
        lines.extend(_wait_line(w) for w in st.model_waiting)
    else:  # a planner that reports no slots: its queue alone
        lines.append(f"{loaded} · queue {st.model_queue_depth}")
    lines.append(f"skill processes {st.live_skill_processes}/{st.skill_process_limit} "
                 f"(peak {st.peak_skill_processes}) · queue {st.skill_queue_depth}")
    lines.append(f"sessions {st.sessions} active · turns in flight {st.turns_in_flight}")
    for actor in st.actors:
        state = "alive" if actor.alive else "DOWN"
        restarts = f", {actor.restarts} restarts" if actor.restarts else ""
        lines.append(f"  {actor.name}: {state}{restarts}")
    return "\n".join(lines) + "\n"


def _wait_line(w: pb.ModelWait) -> str:
    """One waiting model request: ``  #1 3f2a9c1b narration waiting 2.4 s``; a session
    the caller may not see shows as ``-``."""
    session = w.session_id[:SHORT_ID] or "-"
    return f"  #{w.position} {session:<{SHORT_ID}} {w.kind or '?':<9} waiting {w.wait_s:.1f} s"
