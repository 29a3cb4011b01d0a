"""`narratoria skills check`: a conformance check for skill authors.

It loads the skill as discovery would, then runs every script with probe
inputs (the examples of ``references/script-manifest.json``, and an empty input
that a robust script must answer with ``done``) and reports every protocol
violation it finds, not only the first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narratoria.runtime.skillrun.limits import SkillCaps
from narratoria.runtime.skillrun.process import ProcessLimits, run_script, script_env
from narratoria.runtime.skillrun.protocol import ErrorEvent, tool_input
from narratoria.runtime.skills.discovery import SKILL_FILE, Skill, SkillError, SkillScript, load_skill

PROBE_TIMEOUT_S = 10.0


@dataclass
class Finding:
    severity: str  # error | warning
    where: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"severity": self.severity, "where": self.where, "message": self.message}


@dataclass
class ProbeReport:
    script: str
    probe: str
    input: dict[str, Any]
    exit_code: int | None
    events: int
    done_ok: bool | None
    duration_ms: int
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "probe": self.probe,
            "input": self.input,
            "exitCode": self.exit_code,
            "events": self.events,
            "doneOk": self.done_ok,
            "durationMs": self.duration_ms,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass
class CheckReport:
    skill_dir: Path
    skill: str | None
    findings: list[Finding] = field(default_factory=list)
    probes: list[ProbeReport] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        found = [f for f in self.findings if f.severity == "error"]
        for probe in self.probes:
            found += [f for f in probe.findings if f.severity == "error"]
        return found

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "skillDir": str(self.skill_dir),
            "skill": self.skill,
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "probes": [p.to_json() for p in self.probes],
        }


def check_skill(skill_dir: Path, env: dict[str, str] | None = None,
                timeout_s: float = PROBE_TIMEOUT_S) -> CheckReport:
    return asyncio.run(check_skill_async(skill_dir, env, timeout_s))


async def check_skill_async(skill_dir: Path, env: dict[str, str] | None = None,
                            timeout_s: float = PROBE_TIMEOUT_S) -> CheckReport:
    report = CheckReport(skill_dir=skill_dir, skill=None)
    try:
        skill = load_skill(skill_dir)
    except SkillError as exc:
        report.findings.append(Finding("error", str(skill_dir / SKILL_FILE), str(exc)))
        return report
    report.skill = skill.name
    _static_checks(skill, report)
    for script in skill.scripts.values():
        for label, payload in _probes(script):
            report.probes.append(await _probe(script, label, payload, env, timeout_s))
    return report


def _static_checks(skill: Skill, report: CheckReport) -> None:
    for warning in skill.warnings:
        report.findings.append(Finding("warning", str(skill.root), warning))
    for message in over_default_caps(skill):
        report.findings.append(Finding("warning", str(skill.skill_file), message))
    if not skill.scripts:
        report.findings.append(
            Finding("warning", str(skill.root / "scripts"), "no executable scripts found"))
    for script in skill.scripts.values():
        try:
            head = script.path.read_bytes()[:2]
        except OSError as exc:
            report.findings.append(Finding("error", str(script.path), f"cannot read: {exc}"))
            continue
        if head != b"#!" and not _is_binary_executable(script.path):
            report.findings.append(Finding(
                "error", str(script.path), "no shebang line (#!): the OS cannot run it"))
        if script.input_schema is None:
            report.findings.append(Finding(
                "warning", str(script.path),
                "no inputSchema in references/script-manifest.json: the planner cannot "
                "constrain this script's input"))


def over_default_caps(skill: Skill, caps: SkillCaps = SkillCaps()) -> list[str]:
    """What ``skill`` asks for beyond the daemon's default caps: a daemon refuses its tools
    unless started with the flag each message names."""
    limits = skill.limits
    asked = [("limits.memoryMb", limits and limits.memoryMb, caps.memory_mb, "MB", "memory_mb"),
             ("limits.cpuSeconds", limits and limits.cpuSeconds, caps.cpu_s, "s", "cpu_s"),
             ("limits.openFiles", limits and limits.openFiles, caps.open_files, "files",
              "open_files")]
    asked += [(f"script {script.name}'s timeoutMs", script.timeout_ms and script.timeout_ms / 1000,
               caps.tool_timeout_s, "s", "tool_timeout_s") for script in skill.scripts.values()]
    return [f"{what} asks for {value:g} {unit}, above the daemon's default cap of {cap:g} "
            f"{unit}: its tools are refused unless the daemon runs with "
            f"{SkillCaps.SETTINGS[setting]}"
            for what, value, cap, unit, setting in asked if value and value > cap]


def _is_binary_executable(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == b"\x7fELF"


def _probes(script: SkillScript) -> list[tuple[str, dict[str, Any]]]:
    probes = [(f"example {i + 1}", dict(ex)) for i, ex in enumerate(script.examples)]
    # Every script must answer bad or missing input with done, never a bare traceback.
    probes.append(("empty input", {}))
    return probes


async def _probe(script: SkillScript, label: str, payload: dict[str, Any],
                 env: dict[str, str] | None, timeout_s: float) -> ProbeReport:
    where = f"{script.ref} ({label})"
    stdin = tool_input("conformance-probe", script.skill, script.name, payload)
    outcome = await run_script(
        script.path, stdin, limits=ProcessLimits(timeout_s=timeout_s),
        env=env or script_env(script, "conformance-probe"), keep_going=True,
    )
    findings = [Finding("error", where, str(v)) for v in outcome.violations]
    failure = outcome.failure
    if outcome.timed_out:
        findings.append(Finding("error", where, f"did not finish within {timeout_s:g}s"))
    elif failure is not None:
        findings.append(Finding("error", where, failure.message))
    for warning in outcome.warnings:
        findings.append(Finding("error", where, f"{warning}: exactly one done is allowed"))
    if outcome.done is None:
        findings.append(Finding("error", where, "no done event"))
    elif not outcome.done.ok and not any(isinstance(r.event, ErrorEvent) for r in outcome.events):
        findings.append(Finding("warning", where,
                                "done ok:false without an error event explaining why"))
    if outcome.exit_code not in (0, None) and not outcome.timed_out and failure is None:
        findings.append(Finding("error", where, f"exit code {outcome.exit_code} (must be 0)"))
    if "Traceback (most recent call last)" in outcome.stderr:
        findings.append(Finding("error", where,
                                "a Python traceback on stderr: handle bad input with an "
                                "error event and done ok:false"))
    return ProbeReport(
        script=script.ref, probe=label, input=payload, exit_code=outcome.exit_code,
        events=len(outcome.events), done_ok=outcome.done.ok if outcome.done else None,
        duration_ms=int(outcome.duration_s * 1000), findings=findings,
    )
