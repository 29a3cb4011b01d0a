"""The plan grammar: what the model may emit, built from the skills actually offered.

The model does not write full Plan JSON (docs/plans.md, "Plan JSON"); it writes a
compact *model plan*

    {"narrative": "One sentence.", "tools": [{"tool": "skill/script", "input": {...}}]}

whose JSON Schema is generated per request: one ``anyOf`` branch per offered script,
each pairing the script's ref (a ``const``) with that script's own input schema. Under
the llama.cpp grammar built from it, an unknown or disabled script cannot be emitted.

Small models run away inside loose schemas (an ``{"type": "object"}`` input is nested
until ``max_tokens``), so every schema is *tightened* first: each string and array
gets a bound, open objects are closed, untyped values become bounded scalars and regex
quantifiers get an upper limit. Tightening only ever removes documents — whatever the
tight schema accepts, the script's schema accepts too — except for what llama.cpp's
converter cannot express (numeric ranges, ``maxLength`` next to ``pattern``), which
:func:`conform` repairs after decoding. :func:`model_plan_to_plan` then turns the
document into a validated :class:`~runtime.plan.Plan`.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from narratoria.runtime.planner.base import PlanRequest, PlanShape
from narratoria.runtime.skillrun.plan import Plan, PlanError, PlanMetadata, ToolInvocation, new_plan_id, validate_plan
from narratoria.runtime.skills.discovery import SkillScript

if TYPE_CHECKING:  # llama_cpp is imported lazily: building schemas needs no model.
    from llama_cpp import LlamaGrammar

MAX_TOOLS = 3
NARRATIVE_MAX = 100    # one short sentence: longer ones loop on this model, ~25 ms a token
STRING_MAX = 100       # cap on any string the model writes into a tool input
ARRAY_MAX = 8          # any array a script schema leaves unbounded
REPEAT_MAX = 8         # regex * and + become {0,8} and {1,8}
MAX_DEPTH = 3          # deeper objects collapse to {} so the grammar stays small

# Scripts without an inputSchema get one short free-text field and nothing else.
DEFAULT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "maxLength": STRING_MAX}},
    "additionalProperties": False,
}
EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

# Keywords whose meaning tightening preserves; everything else (description,
# examples, format, $comment, ...) is dropped from the grammar schema.
_KEEP = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "default")


# --- tightening -----------------------------------------------------------------


def _scalar(string_max: int = STRING_MAX) -> dict[str, Any]:
    """What an untyped value (``{}``) becomes: a bounded scalar, never a nested object."""
    return {"anyOf": [{"type": "string", "maxLength": string_max},
                      {"type": "number"}, {"type": "boolean"}]}


# Regex escapes outside a class that llama.cpp's converter turns into a GBNF literal.
_LITERAL_ESCAPES = frozenset("[]()|{}*+?")
# Other harmless escapes, rewritten into forms the converter and GBNF both read.
_REWRITTEN_ESCAPES = {".": "[.]", "-": "-", "/": "/", "$": "[$]"}
# \s narrows to a plain space: whatever it generates still matches the original.
_SHORTHAND = {"d": [("0", "9")], "s": [(" ", " ")],
              "w": [("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_")]}
# The converter turns "." into any character; a raw quote would end the JSON string.
_ANY_JSON_SAFE = r'[^"\\\n\r]'
_JSON_SPECIAL = ('"', "\\")


def bound_pattern(pattern: str, repeat_max: int = REPEAT_MAX) -> str | None:
    """Anchor a regex and give its open quantifiers an upper bound; None if unusable.

    The result matches a subset of what the original matches (anchoring, bounding and
    keeping out ``"`` and ``\\`` only narrow it), so a value generated under it is
    valid under the script's schema and needs no JSON escape. Constructs the llama.cpp
    converter or GBNF cannot express faithfully give None; :func:`conform` then
    checks the original pattern after decoding.
    """
    inner = pattern.removeprefix("^")
    if inner.endswith("$") and not inner.endswith("\\$"):
        inner = inner[:-1]
    out: list[str] = []
    i = 0
    while i < len(inner):
        c = inner[i]
        if c == "\\":
            nxt = inner[i + 1:i + 2]
            if nxt in _SHORTHAND:
                out.append(_class(_SHORTHAND[nxt]))
            elif nxt in _LITERAL_ESCAPES:
                out.append(c + nxt)
            elif nxt in _REWRITTEN_ESCAPES:
                out.append(_REWRITTEN_ESCAPES[nxt])
            else:
                return None  # \\, \b, \S, \x41, a trailing backslash ...
            i += 2
        elif c == "[":
            end = _class_end(inner, i)
            cls = None if end < 0 else _json_safe_class(inner[i + 1:end])
            if cls is None:
                return None
            out.append(cls)
            i = end + 1
        elif c == "{":
            end = inner.find("}", i)
            low, comma, high = inner[i + 1:max(end, i)].partition(",")
            if end < 0 or not low.isdigit() or (high and not high.isdigit()):
                return None
            bounded = comma and not high  # {m,} is open-ended
            out.append(f"{{{low},{max(int(low), repeat_max)}}}" if bounded else inner[i:end + 1])
            i = end + 1
        elif c in '"^$':
            return None  # a quote needs a JSON escape; inner anchors are not literals
        else:
            out.append({"*": f"{{0,{repeat_max}}}", "+": f"{{1,{repeat_max}}}",
                        ".": _ANY_JSON_SAFE}.get(c, c))
            i += 1
    # The group matters: the converter would split a bare top-level "a|b" wrongly.
    body = f"^({''.join(out)})$"
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
        json_schema_to_gbnf(json.dumps({"type": "string", "pattern": body}))
        re.compile(body)
    except Exception:  # noqa: BLE001 - any converter failure means "no pattern"
        return None
    return body


def _class_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1."""
    i = start + 1
    i += pattern[i:i + 1] == "^"
    i += pattern[i:i + 1] == "]"  # a leading ] is a literal
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern[i] == "]":
            return i
        else:
            i += 1
    return -1


def _class_char(body: str, i: int) -> tuple[str | None, int]:
    """One (possibly escaped) character of a class body; None if not expressible."""
    if body[i] != "\\":
        return body[i], i + 1
    nxt = body[i + 1:i + 2]
    if nxt and (nxt in _LITERAL_ESCAPES or nxt in ".-/$^"):
        return nxt, i + 2
    return None, i + 2


def _json_safe_class(body: str) -> str | None:
    """A character class that cannot produce ``"`` or ``\\``, or None."""
    if body.startswith("^"):
        # A negated class: excluding two more characters only narrows it. Shorthands
        # would widen it (\s is narrowed to a space), so only plain escapes pass.
        i = 1
        while i < len(body):
            char, i = _class_char(body, i)
            if char is None:
                return None
        return "[" + body + '"\\\\' + "]"
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and body[i + 1:i + 2] in _SHORTHAND:
            ranges += _SHORTHAND[body[i + 1]]
            i += 2
            continue
        low, i = _class_char(body, i)
        high = low
        if body[i:i + 1] == "-" and i + 1 < len(body):
            high, i = _class_char(body, i + 1)
        if low is None or high is None or low > high:
            return None
        if any(low <= special <= high for special in _JSON_SPECIAL):
            return None
        ranges.append((low, high))
    return _class(ranges) if ranges else None


def _class(ranges: list[tuple[str, str]]) -> str:
    """Class text that GBNF and Python's re read alike: specials as ``\\xHH`` escapes."""
    def one(c: str) -> str:
        return f"\\x{ord(c):02X}" if c in "[]^-" else c

    return "[" + "".join(one(lo) if lo == hi else f"{one(lo)}-{one(hi)}"
                         for lo, hi in ranges) + "]"


def tighten(schema: Any, depth: int = 0) -> dict[str, Any]:
    """A bounded copy of a JSON Schema (see the module docstring)."""
    if not isinstance(schema, dict) or not schema:
        return _scalar()
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return {"anyOf": [tighten(s, depth) for s in schema[key]]}
    if "const" in schema:
        return {"const": schema["const"]}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {"enum": list(schema["enum"])}
    kind = schema.get("type")
    if isinstance(kind, list):
        return {"anyOf": [tighten({**schema, "type": t}, depth) for t in kind]}
    if kind is None:
        kind = ("object" if "properties" in schema else "array" if "items" in schema
                else "string" if "pattern" in schema or "maxLength" in schema else None)
    kept = {k: schema[k] for k in _KEEP if k in schema}
    if kind == "object":
        return _tighten_object(schema, depth)
    if kind == "array":
        low = int(schema.get("minItems", 0))
        # Our cap never undercuts the script's own minimum.
        high = min(int(schema.get("maxItems", ARRAY_MAX)), max(ARRAY_MAX, low))
        return {"type": "array", "items": tighten(schema.get("items", {}), depth + 1),
                "minItems": low, "maxItems": high}
    if kind == "string":
        low = int(schema.get("minLength", 0))
        high = min(int(schema.get("maxLength", STRING_MAX)), max(STRING_MAX, low))
        out: dict[str, Any] = {"type": "string", "maxLength": high, **kept}
        if low:
            out["minLength"] = low
        if isinstance(schema.get("pattern"), str):
            bounded = bound_pattern(schema["pattern"])
            if bounded is not None:
                out["pattern"] = bounded
            else:  # unusable in the grammar: conform() checks it after decoding
                out["x-pattern"] = schema["pattern"]
        return out
    if kind in ("integer", "number", "boolean", "null"):
        return {"type": kind, **kept}
    return _scalar()


def _tighten_object(schema: dict[str, Any], depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    if depth >= MAX_DEPTH or not isinstance(properties, dict) or not properties:
        # No declared fields: only {} is allowed (an open object is where
        # small models nest forever).
        return dict(EMPTY_OBJECT)
    required = [r for r in schema.get("required", []) if r in properties]
    return {
        "type": "object",
        "properties": {name: tighten(sub, depth + 1) for name, sub in properties.items()},
        "required": required,
        "additionalProperties": False,
    }


def script_input_schema(script: SkillScript, *, essential: bool = False,
                        fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The tight schema the model must follow for ``script``'s input.

    ``essential``: only the fields a caller must or typically gives — the required
    ones and those of the script's shortest manifest example. A small model fills
    every optional field it is offered with filler ("randomSource": "crypto" for a
    climb), which costs tokens and changes the roll; the script's defaults do better.
    """
    schema = script.input_schema
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return copy.deepcopy(DEFAULT_INPUT_SCHEMA)
    properties = schema.get("properties")
    if properties == {}:
        return dict(EMPTY_OBJECT)  # the script declares that it takes no input
    if not isinstance(properties, dict):
        return copy.deepcopy(DEFAULT_INPUT_SCHEMA)  # an open object: give it one bounded field
    if essential:
        keep = essential_fields(script) | set(fixed or ())
        if keep:
            schema = {**schema, "properties": {k: v for k, v in properties.items() if k in keep}}
    tight = tighten(schema)
    for name, value in (fixed or {}).items():
        if name in tight.get("properties", {}):
            tight["properties"][name] = {"const": value}
            tight["required"] = sorted({*tight.get("required", []), name})
    return tight


def essential_fields(script: SkillScript) -> set[str]:
    """Required fields plus those of the shortest manifest example (empty: unknown)."""
    schema = script.input_schema or {}
    properties = schema.get("properties") or {}
    keep = {r for r in schema.get("required", []) if r in properties}
    examples = [e for e in script.examples if isinstance(e, dict)]
    if examples:
        keep |= {k for k in min(examples, key=lambda e: len(json.dumps(e))) if k in properties}
    return keep


def plan_schema(scripts: Sequence[SkillScript], *, max_tools: int = MAX_TOOLS,
                narrative_max: int = NARRATIVE_MAX, shape: PlanShape = PlanShape()) -> dict[str, Any]:
    """JSON Schema of the model plan for these scripts (pass ``request.offered()``),
    narrowed by ``shape`` (see :class:`.base.PlanShape`)."""
    if shape.only is not None:
        scripts = [s for s in scripts if s.skill in shape.only]
    by_skill: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(scripts, key=lambda s: s.ref):
        by_skill.setdefault(s.skill, []).append(_tool_branch(s, shape))
    branches = [b for skill_branches in by_skill.values() for b in skill_branches]
    if shape.each:
        # One call per skill the router chose: left a choice, this model calls one
        # of two chosen skills and drops the other (or calls the first one twice).
        missing = [skill for skill in shape.each if skill not in by_skill]
        if missing:
            raise ValueError(f"PlanShape.each names skills not offered: {missing}")
        tools: dict[str, Any] = {"type": "array", "prefixItems": [
            {"anyOf": by_skill[skill]} if len(by_skill[skill]) > 1 else by_skill[skill][0]
            for skill in shape.each]}
    else:
        tools = _tools_array(branches, max_tools, shape)
    if not shape.narrative:
        return {"type": "object", "properties": {"tools": tools}, "required": ["tools"],
                "additionalProperties": False}
    return {
        "type": "object",
        # Narrative first: written straight after the player's words it reads as prose
        # and ends; written after the tools' JSON, this model kept echoing formulas
        # until the length limit. A reply cut short then loses only whole tools.
        "properties": {"narrative": narrative_schema(narrative_max), "tools": tools},
        "required": ["tools", "narrative"],
        "additionalProperties": False,
    }


def _tool_branch(script: SkillScript, shape: PlanShape) -> dict[str, Any]:
    return {
        "type": "object",
        # "tool" comes first so the model names the script before writing its input.
        "properties": {"tool": {"const": script.ref},
                       "input": script_input_schema(script, essential=shape.essential_inputs,
                                                    fixed=shape.fixed.get(script.ref))},
        "required": ["tool", "input"],
        "additionalProperties": False,
    }


def _tools_array(branches: list[dict[str, Any]], max_tools: int,
                 shape: PlanShape) -> dict[str, Any]:
    if shape.max_tools is not None:
        max_tools = min(max_tools, shape.max_tools)
    tools: dict[str, Any] = {"type": "array", "maxItems": max_tools if branches else 0}
    if branches and shape.min_tools:
        tools["minItems"] = min(shape.min_tools, max_tools)
    tools["items"] = {"anyOf": branches} if branches else dict(EMPTY_OBJECT)
    return tools


_WORD_EDGES = "\"'.,;:!?()[]{}"


def explicit_values(script: SkillScript, text: str) -> dict[str, str]:
    """String fields of ``script``'s input that the player spelled out: the first
    word of ``text`` that matches a field's own ``pattern`` ("I roll 2d6 to climb"
    gives formula 2d6). A small model copies the manifest's example instead."""
    properties = (script.input_schema or {}).get("properties") or {}
    words = [w.strip(_WORD_EDGES) for w in text.split()]
    found: dict[str, str] = {}
    for name, schema in properties.items():
        pattern = schema.get("pattern") if isinstance(schema, dict) else None
        if schema.get("type") != "string" or not isinstance(pattern, str):
            continue
        try:
            compiled = re.compile(pattern)
        except re.error:
            continue
        limit = schema.get("maxLength")
        for word in words:
            if word and (limit is None or len(word) <= limit) and compiled.fullmatch(word) \
                    and any(c.isdigit() for c in word):  # "d" alone is no formula
                found[name] = word
                break
    return found


def narrative_schema(narrative_max: int = NARRATIVE_MAX) -> dict[str, Any]:
    """Exactly one sentence: the grammar ends the string at the first . ! or ?.

    A bare maxLength is not enough: small models repeat a phrase until the limit.
    Quotes and backslashes are excluded so the text never needs JSON escapes.
    """
    return {"type": "string", "minLength": 2, "maxLength": narrative_max,
            "pattern": f'^[^"\\\\.!?\\n]{{1,{narrative_max - 1}}}[.!?]$'}


# --- grammar compilation --------------------------------------------------------

_GRAMMAR_CACHE_SIZE = 16
_grammar_cache: OrderedDict[str, LlamaGrammar] = OrderedDict()
_grammar_lock = threading.Lock()


def canonical(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def to_grammar(schema: dict[str, Any]) -> LlamaGrammar:
    """The llama.cpp grammar for ``schema``; cached, since the offered skills rarely change."""
    from llama_cpp import LlamaGrammar

    key = canonical(schema)
    with _grammar_lock:
        grammar = _grammar_cache.get(key)
        if grammar is not None:
            _grammar_cache.move_to_end(key)
            return grammar
    # Property order matters to the converter (it follows the dict), so the
    # schema itself is converted, not the sorted key.
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    with _grammar_lock:
        _grammar_cache[key] = grammar
        while len(_grammar_cache) > _GRAMMAR_CACHE_SIZE:
            _grammar_cache.popitem(last=False)
    return grammar


# --- decoding -------------------------------------------------------------------


class _Invalid(ValueError):
    pass


_MISSING = object()


def conform(value: Any, schema: dict[str, Any], where: str = "input") -> Any:
    """Check ``value`` against a tight schema, repairing what the grammar cannot enforce.

    Numbers are clamped into their range; an optional property that still fails is
    dropped and a required one falls back to its default. Raises ``_Invalid``.
    """
    if "anyOf" in schema:
        for branch in schema["anyOf"]:
            try:
                return conform(value, branch, where)
            except _Invalid:
                continue
        raise _Invalid(f"{where}: matches none of the allowed forms")
    if "const" in schema:
        if value != schema["const"]:
            raise _Invalid(f"{where}: must be {schema['const']!r}")
        return value
    if "enum" in schema:
        if value not in schema["enum"]:
            raise _Invalid(f"{where}: {value!r} is not one of {schema['enum']!r}")
        return value
    kind = schema.get("type")
    if kind == "object":
        return _conform_object(value, schema, where)
    if kind == "array":
        if not isinstance(value, list) or len(value) > schema.get("maxItems", ARRAY_MAX):
            raise _Invalid(f"{where}: expected an array of at most {schema.get('maxItems')}")
        if len(value) < schema.get("minItems", 0):
            raise _Invalid(f"{where}: expected at least {schema['minItems']} items")
        return [conform(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value)]
    if kind == "string":
        return _conform_string(value, schema, where)
    if kind in ("integer", "number"):
        return _conform_number(value, schema, where)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "null" and value is None:
        return value
    raise _Invalid(f"{where}: expected {kind}")


def _conform_object(value: Any, schema: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(f"{where}: expected an object")
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    out: dict[str, Any] = {}
    for name, sub in properties.items():
        item = value.get(name, _MISSING)
        if item is not _MISSING:
            try:
                out[name] = conform(item, sub, f"{where}.{name}")
                continue
            except _Invalid:
                if name not in required:
                    continue  # a bad optional field is dropped; the script's default applies
                if "default" not in sub:
                    raise
        if name in required:
            if "default" not in sub:
                raise _Invalid(f"{where}.{name}: required")
            out[name] = sub["default"]
    unknown = sorted(set(value) - set(properties))
    if unknown:
        raise _Invalid(f"{where}: unexpected field {unknown[0]!r}")
    return out


def _conform_string(value: Any, schema: dict[str, Any], where: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"{where}: expected a string")
    if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
        raise _Invalid(f"{where}: length {len(value)} out of bounds")
    for key in ("pattern", "x-pattern"):
        if key in schema and not re.search(schema[key], value):
            raise _Invalid(f"{where}: does not match {schema[key]!r}")
    return value


def _conform_number(value: Any, schema: dict[str, Any], where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"{where}: expected a number")
    if schema["type"] == "integer" and not float(value).is_integer():
        raise _Invalid(f"{where}: expected an integer")
    step = 1 if schema["type"] == "integer" else 0
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        if not step:
            raise _Invalid(f"{where}: must be > {schema['exclusiveMinimum']}")
        value = schema["exclusiveMinimum"] + step
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        if not step:
            raise _Invalid(f"{where}: must be < {schema['exclusiveMaximum']}")
        value = schema["exclusiveMaximum"] - step
    return int(value) if step else value


def model_plan_to_plan(doc: dict[str, Any] | str | bytes, request: PlanRequest) -> Plan:
    """Turn the model's document into a validated Plan; PlanError says what was wrong."""
    if isinstance(doc, (str, bytes)):
        try:
            # strict=False: the grammar lets raw newlines into strings.
            doc = json.loads(doc, strict=False)
        except json.JSONDecodeError as exc:
            raise PlanError(f"model plan: invalid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PlanError("model plan: expected a JSON object")
    raw_tools = doc.get("tools", [])
    narrative = doc.get("narrative")
    if not isinstance(raw_tools, list):
        raise PlanError("model plan: tools must be an array")
    if narrative is not None and not isinstance(narrative, str):
        raise PlanError("model plan: narrative must be a string")

    offered = {s.ref: s for s in request.offered()}
    tools: list[ToolInvocation] = []
    seen: set[str] = set()
    for index, item in enumerate(raw_tools):
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            raise PlanError(f"model plan: tools[{index}] must name a tool")
        ref = item["tool"]
        script = offered.get(ref)
        if script is None:
            raise PlanError(f"model plan: tools[{index}].tool {ref!r} is not offered")
        try:
            tool_input = conform(item.get("input", {}), script_input_schema(script),
                                 f"tools[{index}].input")
        except _Invalid as exc:
            raise PlanError(f"model plan: {exc}") from None
        # Small models repeat themselves; the same call twice adds nothing.
        key = canonical({"ref": ref, "input": tool_input})
        if key in seen:
            continue
        seen.add(key)
        tools.append(ToolInvocation(toolId=f"t{len(tools) + 1}", toolPath=ref,
                                    input=tool_input, is_async=True))
    narrative = narrative.strip() if narrative else None
    plan = Plan(
        requestId=new_plan_id(),
        tools=tools,
        narrative=narrative or None,
        parallel=len(tools) > 1,
        disabledSkills=sorted(request.disabled_skills),
        metadata=PlanMetadata(generationAttempt=request.attempt,
                              parentPlanId=request.parent_plan_id),
    )
    try:
        # Round-trip through the wire type so msgspec's field constraints apply too.
        plan = msgspec.convert(msgspec.to_builtins(plan), Plan)
    except msgspec.ValidationError as exc:
        raise PlanError(f"model plan: {exc}") from None
    validate_plan(plan)
    return plan
