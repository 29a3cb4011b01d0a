"""Skill configuration (docs/skills.md, "Configuration"): settings described by a skill's
``references/config-schema.json``, saved in a ``config.json``, and whether the
player has the skill enabled.

Where things live:

- a user skill (any root but the built-in one) keeps ``config.json`` in its own
  folder, where its author put the schema;
- a built-in skill's folder belongs to the installation (shared, possibly
  read-only, under version control), so its ``config.json`` goes to
  ``<config dir>/skills/<skill>/config.json``;
- the disabled skills are one list, ``<config dir>/skills.json``
  (``{"disabled": [...]}``), keyed by skill name so a choice survives moving
  or overriding a skill folder.

``<config dir>`` is ``$NARRATORIA_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/narratoria``,
else ``~/.config/narratoria``.

Stored values stay as the player wrote them: ``${VAR}`` references are
resolved only by :func:`resolved_config`, when a skill is about to use its
settings, so secrets never need to be written to disk.

Invariant: no setting ever reads one of the runtime's own environment variables
(:data:`RESERVED_ENV_PREFIXES`: its tokens and addresses, Ray's, gRPC's, the model
hub's), whoever names it -- the player in a ``${VAR}`` value, or the skill's author in an
``x-env-var`` (settings resolve in the daemon, from the daemon's environment, and the
resolved values go to the skill). Any other variable a skill may read is listed by
:func:`env_reads`, for ``narratoria skills list`` and ``skills config`` to show what a
skill is granted.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from narratoria.runtime.files import write_atomic
from narratoria.runtime.skills.discovery import Skill

CONFIG_FILE = "config.json"
SETTINGS_FILE = "skills.json"
MASK = "••••"
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The runtime's own variables, and those of what it runs on: NARRATORIA_TOKEN,
# NARRATORIA_CLIENT_TOKEN, NARRATORIA_SKILL_TOKEN, NARRATORIA_ADDRESS...; RAY_ADDRESS,
# RAY_AUTH_TOKEN and the rest Ray sets in its workers (where settings resolve); gRPC's
# settings; the Hugging Face hub's token (HF_TOKEN, HUGGING_FACE_HUB_TOKEN) the
# embedder's libraries would send.
RESERVED_ENV_PREFIXES = ("NARRATORIA_", "RAY_", "GRPC_", "HF_", "HUGGING_FACE_")
MAX_NAME_SHOWN = 64
SIMPLE_TYPES = ("string", "number", "integer", "boolean")


class ConfigError(ValueError):
    """Invalid settings; ``problems`` holds one message per field and rule."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# -- locations ----------------------------------------------------------------------------

def config_dir() -> Path:
    override = os.environ.get("NARRATORIA_CONFIG_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "narratoria"


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def is_builtin(skill: Skill) -> bool:
    # Imported here: the registry imports this module for the disabled list.
    from narratoria.runtime.skills.registry import builtin_skills_dir

    try:
        return skill.root.resolve().is_relative_to(builtin_skills_dir().resolve())
    except OSError:
        return False


def config_path(skill: Skill) -> Path:
    """The ``config.json`` that holds the player's settings for ``skill``."""
    if is_builtin(skill):
        return config_dir() / "skills" / skill.name / CONFIG_FILE
    return skill.root / CONFIG_FILE


# -- environment variables -------------------------------------------------------------------

def reserved_env(name: str) -> bool:
    """Whether ``name`` is one of the runtime's own variables, which no setting may read."""
    return name.upper().startswith(RESERVED_ENV_PREFIXES)


def _shown_name(name: object) -> str:
    text = str(name)
    return text if len(text) <= MAX_NAME_SHOWN else text[:MAX_NAME_SHOWN] + "..."


def _refused(field: str, name: str, how: str) -> str:
    prefixes = ", ".join(p + "*" for p in RESERVED_ENV_PREFIXES)
    return (f"{field}: {how} {_shown_name(name)} is one of the runtime's own environment "
            f"variables ({prefixes}), which no skill setting may read")


# -- schema --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    name: str
    type: str  # string | number | integer | boolean, or another JSON type taken as JSON
    title: str | None = None
    description: str | None = None
    default: Any = None
    has_default: bool = False
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False
    sensitive: bool = False
    env_var: str | None = None  # x-env-var: read when nothing is stored

    def show(self, value: Any) -> str:
        """How a value may appear in any output: secrets never do."""
        if self.sensitive:
            return MASK
        if isinstance(value, str):
            return repr(value)
        return json.dumps(value, ensure_ascii=False)


def fields(schema: Mapping[str, Any] | None) -> dict[str, Field]:
    """The settings a schema declares, in schema order."""
    if not schema:
        return {}
    required = set(schema.get("required") or ())
    out: dict[str, Field] = {}
    for name, spec in (schema.get("properties") or {}).items():
        if not isinstance(spec, dict):
            continue
        kind = spec.get("type", "string")
        if isinstance(kind, list):  # ["string", "null"]: the first real type decides
            kind = next((k for k in kind if k != "null"), "string")
        enum = spec.get("enum")
        out[name] = Field(
            name=name,
            type=kind,
            title=spec.get("title"),
            description=spec.get("description"),
            default=spec.get("default"),
            has_default="default" in spec,
            enum=tuple(enum) if isinstance(enum, list) else None,
            minimum=spec.get("minimum"),
            maximum=spec.get("maximum"),
            required=name in required,
            sensitive=bool(spec.get("x-sensitive")) or spec.get("format") == "password",
            env_var=spec.get("x-env-var"),
        )
    return out


# -- parsing and validation --------------------------------------------------------------

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_value(field: Field, text: str, keep_refs: bool = True) -> Any:
    """Turn command-line text into the field's JSON type; ConfigError if it is not one.

    Text holding a ``${VAR}`` reference is kept as text (``keep_refs``): its real
    value, and so its type, is only known when the config is resolved.
    """
    if field.type == "string" or (keep_refs and ENV_REF.search(text)):
        return text
    shown = MASK if field.sensitive else repr(text)
    if field.type == "boolean":
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ConfigError([f"{field.name}: must be true or false, got {shown}"])
    if field.type in ("integer", "number"):
        try:
            number = int(text)
        except ValueError:
            if field.type == "integer":
                raise ConfigError([f"{field.name}: must be an integer, got {shown}"]) from None
            try:
                number = float(text)
            except ValueError:
                raise ConfigError([f"{field.name}: must be a number, got {shown}"]) from None
            if not math.isfinite(number):
                raise ConfigError([f"{field.name}: must be a finite number, got {shown}"])
        return number
    try:  # arrays and objects: the player writes JSON
        return json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError([f"{field.name}: must be JSON ({field.type}), got {shown}"]) from None


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float),
    "array": (list,), "object": (dict,), "null": (type(None),),
}


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def check_value(field: Field, value: Any) -> str | None:
    """The first rule ``value`` breaks, as ``"name: rule, got value"``, else None."""
    got = field.show(value)
    expected = _PY_TYPES.get(field.type)
    # bool is an int in Python, never in JSON Schema.
    if expected is not None and (not isinstance(value, expected)
                                 or (isinstance(value, bool) and field.type != "boolean")):
        return f"{field.name}: must be {_article(field.type)}, got {got}"
    if field.enum is not None and value not in field.enum:
        options = ", ".join(str(o) for o in field.enum)
        return f"{field.name}: must be one of {options}, got {got}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if field.minimum is not None and value < field.minimum:
            return f"{field.name}: must be >= {_number(field.minimum)}, got {got}"
        if field.maximum is not None and value > field.maximum:
            return f"{field.name}: must be <= {_number(field.maximum)}, got {got}"
    return None


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _missing(value: Any) -> bool:
    return value is None or value == ""


def validate(schema: Mapping[str, Any] | None, stored: Mapping[str, Any]) -> list[str]:
    """Every problem with a stored config, one message per field (empty when valid).

    Values with ``${VAR}`` references are checked when resolved, not here: the
    variable may only exist in the environment the skill runs in.
    """
    known = fields(schema)
    problems = [_unknown(key, known) for key in stored if key not in known]
    for name, field in known.items():
        value = stored.get(name)
        if isinstance(value, str) and ENV_REF.search(value):
            problems += [_refused(name, "${" + var + "}", "the value refers to")
                         for var in ENV_REF.findall(value) if reserved_env(var)]
            continue
        if _missing(value):
            if field.required and not field.has_default and not field.env_var:
                problems.append(f"{name}: required")
            continue
        problem = check_value(field, value)
        if problem:
            problems.append(problem)
    return problems


def _unknown(key: str, known: Mapping[str, Field]) -> str:
    names = ", ".join(known) or "none"
    return f"{key}: unknown setting (known: {names})"


# -- reading and writing ----------------------------------------------------------------------

def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file, or {} when absent; ConfigError when unreadable or not an object."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: must hold a JSON object"])
    return data


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` in one step: a reader (the daemon) sees the old file or the new
    one, never half of one. Mode 0600, as configs hold secrets."""
    write_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def stored_config(skill: Skill) -> dict[str, Any]:
    """The values as saved (references unresolved, no defaults)."""
    return read_json_object(config_path(skill))


def update_config(skill: Skill, assignments: Sequence[tuple[str, str]],
                  unset: Sequence[str] = ()) -> dict[str, Any]:
    """Apply ``key=value`` texts (and removals) and save, all or nothing.

    Every problem is collected before anything is written, so one bad value
    leaves the file exactly as it was. Returns the new stored config.
    """
    known = fields(skill.config_schema)
    if not known:
        raise ConfigError([f"{skill.name}: has no settings (no references/config-schema.json "
                           "properties)"])
    new = stored_config(skill)
    problems: list[str] = []
    for key in unset:
        # A saved key the schema no longer has may be unset: that is how it gets cleaned up.
        if key not in known and key not in new:
            problems.append(_unknown(key, known))
        new.pop(key, None)
    for key, text in assignments:
        field = known.get(key)
        if field is None:
            problems.append(_unknown(key, known))
            continue
        try:
            new[key] = parse_value(field, text)
        except ConfigError as exc:
            problems.extend(exc.problems)
    # A value that failed to parse kept its old one in ``new``, so validating the
    # whole config here adds the other fields' problems without repeating those.
    problems += [p for p in validate(skill.config_schema, new) if p not in problems]
    if problems:
        raise ConfigError(problems)
    write_json_atomic(config_path(skill), new)
    return new


# -- use time ----------------------------------------------------------------------------------

def _substitute(field: Field, text: str, env: Mapping[str, str]) -> str:
    def value_of(match: re.Match[str]) -> str:
        var = match.group(1)
        if reserved_env(var):
            raise ConfigError([_refused(field.name, "${" + var + "}", "the value refers to")])
        if var not in env:
            shown = _shown_name(var)
            raise ConfigError([f"{field.name}: environment variable {shown} is not set "
                               f"(the value refers to ${{{shown}}})"])
        return env[var]
    return ENV_REF.sub(value_of, text)


def _env_var_problem(field: Field) -> str | None:
    """What is wrong with a field's ``x-env-var``, if anything."""
    name = field.env_var
    if name is None:
        return None
    if not isinstance(name, str) or not ENV_NAME.match(name):
        return (f"{field.name}: x-env-var must be an environment variable name, got "
                f"{_shown_name(json.dumps(name) if not isinstance(name, str) else name)}")
    if reserved_env(name):
        return _refused(field.name, name, "x-env-var")
    return None


def resolved_config(skill: Skill, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings a skill runs with: stored values, ``${VAR}`` resolved from ``env``
    (default: this process's environment), ``x-env-var`` for unset fields, then
    defaults; ConfigError naming every field and rule that fails.

    Read from disk on every call, so a change is seen on the next use; no cache
    to go stale in a long-running daemon.
    """
    env = os.environ if env is None else env
    known = fields(skill.config_schema)
    stored = stored_config(skill)
    problems = [_unknown(key, known) for key in stored if key not in known]
    out: dict[str, Any] = {}
    for name, field in known.items():
        value = stored.get(name)
        try:
            if isinstance(value, str) and ENV_REF.search(value):
                value = parse_value(field, _substitute(field, value, env), keep_refs=False)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        if _missing(value) and field.env_var is not None:
            problem = _env_var_problem(field)
            if problem:
                problems.append(problem)
                continue
        if _missing(value) and field.env_var and env.get(field.env_var):
            value = env[field.env_var]
            try:
                value = parse_value(field, value, keep_refs=False)
            except ConfigError as exc:
                problems.extend(f"{p} (from ${field.env_var})" for p in exc.problems)
                continue
        if _missing(value):
            if field.has_default:
                out[name] = field.default
            elif field.required:
                problems.append(f"{name}: required")
            continue
        problem = check_value(field, value)
        if problem:
            problems.append(problem)
            continue
        out[name] = value
    if problems:
        raise ConfigError(problems)
    return out


# -- what a player sees -------------------------------------------------------------------------

def describe(skill: Skill) -> dict[str, Any]:
    """Every field with its current value (defaults filled), masked where sensitive.

    This is the one view both the human and the JSON output are made from, so a
    secret cannot reach one and not the other.
    """
    known = fields(skill.config_schema)
    path = config_path(skill)
    try:
        stored = stored_config(skill)
        problems = validate(skill.config_schema, stored)
    except ConfigError as exc:
        stored, problems = {}, list(exc.problems)
    if not problems:
        # Use-time problems too (a variable not set here); their messages never hold
        # a sensitive value, only field and variable names.
        try:
            resolved_config(skill)
        except ConfigError as exc:
            problems = [p for p in exc.problems if p not in problems]
    rows = []
    for name, field in known.items():
        if name in stored:
            value, source = stored[name], "set"
        elif field.env_var and not _env_var_problem(field) and os.environ.get(field.env_var):
            value, source = os.environ[field.env_var], "env"
        elif field.has_default:
            value, source = field.default, "default"
        else:
            value, source = None, "unset"
        refs = ENV_REF.findall(value) if isinstance(value, str) else []
        if field.env_var and source == "env":
            refs = [field.env_var]
        rows.append({
            "name": name,
            "type": field.type,
            "value": MASK if field.sensitive and value is not None else value,
            "source": source,
            "default": (MASK if field.sensitive and field.default is not None
                        else field.default),
            "required": field.required,
            "sensitive": field.sensitive,
            "enum": list(field.enum) if field.enum is not None else None,
            "minimum": field.minimum,
            "maximum": field.maximum,
            "envVars": refs,  # names only: a variable's name is not the secret
            "title": field.title,
            "description": field.description,
        })
    return {
        "skill": skill.name,
        "configPath": str(path),
        "builtin": is_builtin(skill),
        "enabled": is_enabled(skill),
        "fields": rows,
        "envReads": env_reads(skill),
        "problems": problems,
    }


def env_reads(skill: Skill) -> list[dict[str, Any]]:
    """Every environment variable of the daemon the skill's settings name, and whether
    it is read: ``{"name", "field", "via": "x-env-var" | "setting", "refused"}``. An
    ``x-env-var`` is read only while its field has no saved value, but it is listed
    anyway: it is what the skill's author asks for."""
    try:
        stored = stored_config(skill)
    except ConfigError:
        stored = {}
    reads: list[dict[str, Any]] = []
    for name, field in fields(skill.config_schema).items():
        if field.env_var is not None:
            valid = isinstance(field.env_var, str) and bool(ENV_NAME.match(field.env_var))
            reads.append({"name": _shown_name(field.env_var), "field": name, "via": "x-env-var",
                          "refused": not valid or reserved_env(field.env_var)})
        value = stored.get(name)
        for var in (ENV_REF.findall(value) if isinstance(value, str) else []):
            reads.append({"name": _shown_name(var), "field": name, "via": "setting",
                          "refused": reserved_env(var)})
    return reads


def describe_env_reads(reads: Sequence[Mapping[str, Any]]) -> str:
    """One line for people: ``OPENAI_API_KEY (apiKey, x-env-var)``, refused ones marked."""
    parts = []
    for r in reads:
        note = "; refused: one of the runtime's own" if r["refused"] else ""
        parts.append(f"{r['name']} ({r['field']}, {r['via']}{note})")
    return ", ".join(parts) or "none"


# -- enabled / disabled --------------------------------------------------------------------------

def _switches(path: Path | None, key: str) -> frozenset[str]:
    """Names listed under ``key`` ("disabled" or "enabled") in the settings file; a
    broken file lists nothing (the CLI says so) rather than stopping the daemon."""
    try:
        data = read_json_object(path or settings_path())
    except ConfigError:
        return frozenset()
    names = data.get(key)
    if not isinstance(names, list):
        return frozenset()
    return frozenset(n for n in names if isinstance(n, str))


def disabled_skills(path: Path | None = None) -> frozenset[str]:
    """Names the player disabled."""
    return _switches(path, "disabled")


def enabled_skills(path: Path | None = None) -> frozenset[str]:
    """Names the player enabled (what turns on a skill that ships off)."""
    return _switches(path, "enabled")


def switched_off(skills: Iterable[Skill], path: Path | None = None) -> frozenset[str]:
    """The skills planners must not offer: disabled by the player, or shipped off
    (``defaultEnabled: false``) and not enabled by the player."""
    off, on = disabled_skills(path), enabled_skills(path)
    return frozenset(s.name for s in skills if s.name in off or (not s.default_enabled
                                                                 and s.name not in on))


def is_enabled(skill: Skill) -> bool:
    return skill.name not in switched_off([skill])


def set_enabled(name: str, enabled: bool) -> bool:
    """Persist the choice; True when it changed anything."""
    path = settings_path()
    data = read_json_object(path)
    off, on = set(disabled_skills(path)), set(enabled_skills(path))
    new_off, new_on = (off - {name}, on | {name}) if enabled else (off | {name}, on - {name})
    if (new_off, new_on) == (off, on):
        return False
    data["disabled"], data["enabled"] = sorted(new_off), sorted(new_on)
    write_json_atomic(path, data)
    return True


def settings_stamp(path: Path | None = None) -> tuple | None:
    """A cheap fingerprint of the settings file, so the registry rereads it only on change."""
    try:
        st = (path or settings_path()).stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
