"""`narratoria skills list|check|config|enable|disable`: find, check and configure skills.

Local commands, no daemon: they read the skill roots (built-in, user, ``--skills-dir``)
and write the user's settings, which a running daemon notices on its next turn.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from narratoria.clients.commands import local
from narratoria.clients.commands.options import add_skill_dirs
from narratoria.clients.output import ExitCode, err, fail, print_json


def cmd_skills_list(args: argparse.Namespace) -> int:
    from narratoria.runtime.skills import config as skill_config

    registry = local.registry(args)
    d = registry.discovery
    # The same per-user switches `skills enable|disable` write and the planner obeys.
    off = skill_config.switched_off(d.skills.values())
    if args.json:
        print_json({
            "roots": [str(r) for r in registry.roots],
            "skills": [{**s.summary(), "enabled": s.name not in off,
                        "envReads": skill_config.env_reads(s)}
                       for s in d.skills.values()],
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in d.skipped],
            "overridden": {k: [str(p) for p in v] for k, v in d.overridden.items()},
        })
        return ExitCode.SUCCESS
    if not d.skills:
        print("no skills found in: " + ", ".join(str(r) for r in registry.roots))
    for skill in d.skills.values():
        label = skill.display_name or skill.name
        state = "disabled" if skill.name in off else "enabled"
        print(f"{skill.name} ({label}, priority {skill.priority}, {state}) — {skill.root}")
        print(f"    {skill.description.splitlines()[0][:100]}")
        for script in skill.scripts.values():
            timeout = f", timeout {script.timeout_ms} ms" if script.timeout_ms else ""
            print(f"    script {script.ref}{timeout}")
        if reads := skill_config.env_reads(skill):
            # Settings resolve from the daemon's environment: what the skill is granted.
            print(f"    reads environment: {skill_config.describe_env_reads(reads)}")
        for warning in skill.warnings:
            print(f"    warning: {warning}")
    for name, replaced in d.overridden.items():
        print(f"note: {name} overrides {', '.join(str(p) for p in replaced)}")
    for skipped in d.skipped:
        print(f"skipped: {skipped}")
    return ExitCode.SUCCESS


def cmd_skills_check(args: argparse.Namespace) -> int:
    from narratoria.runtime.skills.conformance import check_skill

    target = Path(args.dir)
    if not target.is_dir():
        return fail(f"{target}: not a directory", ExitCode.BAD_INPUT)
    if (target / "SKILL.md").exists():
        folders = [target]
    else:
        folders = sorted(p for p in target.iterdir() if (p / "SKILL.md").is_file())
        if not folders:
            return fail(f"{target}: no SKILL.md here or in its subfolders", ExitCode.BAD_INPUT)
    reports = [check_skill(folder, timeout_s=args.timeout) for folder in folders]
    if args.json:
        print_json({"ok": all(r.ok for r in reports), "skills": [r.to_json() for r in reports]})
    else:
        for report in reports:
            status = "ok" if report.ok else f"{len(report.errors)} error(s)"
            print(f"{report.skill or report.skill_dir}: {status}")
            for f in report.findings:
                print(f"  {f.severity}: {f.where}: {f.message}")
            for probe in report.probes:
                mark = "✗" if any(f.severity == "error" for f in probe.findings) else "✓"
                print(f"  {mark} {probe.script} [{probe.probe}] exit {probe.exit_code}, "
                      f"{probe.events} events, done ok={probe.done_ok}, {probe.duration_ms} ms")
                for f in probe.findings:
                    print(f"      {f.severity}: {f.message}")
    return ExitCode.SUCCESS if all(r.ok for r in reports) else ExitCode.FAILED


def _find_skill(args: argparse.Namespace):
    registry = local.registry(args)
    skill = registry.get(args.skill)
    if skill is None:
        known = ", ".join(sorted(registry.skills)) or "none"
        raise SystemExit(fail(f"unknown skill {args.skill!r} (known: {known})", ExitCode.FAILED))
    return skill


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key.strip(), value


def _show_value(row: dict[str, Any]) -> str:
    value = row["value"]
    if row["sensitive"]:
        return value if value is not None else "(not set)"
    return "(not set)" if value is None else json.dumps(value, ensure_ascii=False)


def cmd_skills_config(args: argparse.Namespace) -> int:
    from narratoria.runtime.skills import config as skill_config

    skill = _find_skill(args)
    if args.set or args.unset:
        try:
            skill_config.update_config(skill, args.set or [], args.unset or [])
        except skill_config.ConfigError as exc:
            for problem in exc.problems:
                err(problem)
            return fail(f"nothing saved to {skill_config.config_path(skill)}", ExitCode.BAD_INPUT)
        if not args.json:
            print(f"saved {skill_config.config_path(skill)}", file=sys.stderr)
    view = skill_config.describe(skill)
    if args.json:
        print_json(view)
        return ExitCode.SUCCESS
    state = "enabled" if view["enabled"] else "disabled"
    print(f"{skill.name} ({state}) — settings in {view['configPath']}")
    if not view["fields"]:
        print("    no settings (no references/config-schema.json properties)")
    for row in view["fields"]:
        kind = row["type"]
        if row["enum"] is not None:
            kind += " (" + " | ".join(str(o) for o in row["enum"]) + ")"
        if row["minimum"] is not None or row["maximum"] is not None:
            low = "" if row["minimum"] is None else row["minimum"]
            high = "" if row["maximum"] is None else row["maximum"]
            kind += f" [{low}..{high}]"
        flags = [row["source"]] + (["required"] if row["required"] else []) \
            + (["sensitive"] if row["sensitive"] else [])
        refs = "".join(f" from ${{{v}}}" for v in row["envVars"])
        print(f"  {row['name']} = {_show_value(row)}{refs}    {kind}, {', '.join(flags)}")
        if row["description"]:
            print(f"      {row['description']}")
    print(f"  reads environment: {skill_config.describe_env_reads(view['envReads'])}")
    for problem in view["problems"]:
        print(f"  problem: {problem}")
    return ExitCode.SUCCESS


def cmd_skills_enable(args: argparse.Namespace) -> int:
    from narratoria.runtime.skills import config as skill_config

    skill = _find_skill(args)
    enabled = args.skills_command == "enable"
    try:
        changed = skill_config.set_enabled(skill.name, enabled)
    except skill_config.ConfigError as exc:
        return fail(str(exc), ExitCode.BAD_INPUT)
    if args.json:
        print_json({"skill": skill.name, "enabled": enabled, "changed": changed,
                     "settingsPath": str(skill_config.settings_path())})
    else:
        word = "enabled" if enabled else "disabled"
        print(f"{skill.name} {word}" + ("" if changed else " (already)")
              + " — takes effect on the next turn")
    return ExitCode.SUCCESS


def register(sub: argparse._SubParsersAction) -> None:
    skills = sub.add_parser("skills", help="discover and check skills")
    skills_sub = skills.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    ls = skills_sub.add_parser(
        "list", help="discovered skills (enabled or disabled), scripts, and skipped skills")
    add_skill_dirs(ls)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_skills_list)
    check = skills_sub.add_parser("check", help="protocol conformance check for a skill folder")
    check.add_argument("dir", metavar="DIR", help="a skill folder, or a folder of skills")
    check.add_argument("--timeout", type=float, default=10.0, help="per-probe timeout (10 s)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_skills_check)
    cfg = skills_sub.add_parser(
        "config", help="show or change a skill's settings (references/config-schema.json)",
        description="Shows every setting with its value (defaults filled in; secrets masked). "
                    "--set KEY=VALUE parses VALUE by the field's type, validates the whole "
                    "config and saves it only if valid. A value may refer to ${VAR}: it is "
                    "stored as written and read from the environment when the skill runs.")
    cfg.add_argument("skill", metavar="SKILL")
    cfg.add_argument("--set", action="append", type=_assignment, metavar="KEY=VALUE",
                     help="change a setting (repeatable)")
    cfg.add_argument("--unset", action="append", metavar="KEY",
                     help="remove a saved setting, back to its default (repeatable)")
    cfg.add_argument("--json", action="store_true")
    add_skill_dirs(cfg)
    cfg.set_defaults(func=cmd_skills_config)
    for action, text in (("enable", "offer a skill to the planner again"),
                         ("disable", "never offer a skill to the planner (persisted)")):
        toggle = skills_sub.add_parser(action, help=text)
        toggle.add_argument("skill", metavar="SKILL")
        toggle.add_argument("--json", action="store_true")
        add_skill_dirs(toggle)
        toggle.set_defaults(func=cmd_skills_enable)
