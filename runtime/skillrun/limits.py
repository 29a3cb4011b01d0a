"""Kernel limits on a skill process (setrlimit), applied in the child before it runs.

Both ways a skill starts apply them: exec'd (``process.py``, between fork and exec)
and forked from the zygote (``zygote.py``). The soft and hard limits are set equal,
so the skill cannot raise them again; its children inherit them.
"""

from __future__ import annotations

import resource
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceLimits:
    """Kernel limits (setrlimit) on one skill process and every child it forks.

    The defaults are generous for a skill (a Python process with grpc needs about
    300 MB of address space) and small enough that a hostile or buggy one cannot
    take the device down: a memory hog gets MemoryError, a spinner SIGXCPU, a
    descriptor leak EMFILE. ``None`` leaves that limit as the daemon's own.
    """

    cpu_s: int | None = 60              # RLIMIT_CPU: seconds of CPU time
    memory_mb: int | None = 2048        # RLIMIT_AS: address space
    open_files: int | None = 256        # RLIMIT_NOFILE
    # Processes and threads of one invocation together (a fork bomb stops there): the
    # cgroup's pids.max, else RLIMIT_NPROC (runtime/skillrun/containment.py; not in pairs(): that
    # rlimit counts the whole user's tasks, and the kernel exempts root). A Python skill
    # with grpc runs about 10 threads; 128 leaves room for a helper process or a pool.
    processes: int | None = 128

    def pairs(self) -> list[tuple[int, int]]:
        """(resource, value) for setrlimit; soft = hard, so a skill cannot raise them."""
        out = []
        for resource_id, value in ((resource.RLIMIT_CPU, self.cpu_s),
                                   (resource.RLIMIT_AS, None if self.memory_mb is None
                                    else self.memory_mb * 1024 * 1024),
                                   (resource.RLIMIT_NOFILE, self.open_files)):
            if value is not None:
                out.append((resource_id, value))
        return out


def apply_resource_limits(pairs: Sequence[Sequence[int]]) -> None:
    """In the child, before the script runs. A limit above the daemon's own hard limit
    is lowered to it (an unprivileged process cannot raise a hard limit)."""
    for resource_id, value in pairs:
        _soft, hard = resource.getrlimit(resource_id)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(resource_id, (value, value))


@dataclass(frozen=True)
class SkillCaps:
    """The most a SKILL.md (``x-narratoria.limits``, ``timeoutMs``) or a plan (a tool's or
    the plan's ``timeoutMs``) may ask for; past a cap the executor refuses the tool (or
    the plan) with an error naming the limit and the ``narratoria serve`` flag in
    ``SETTINGS`` that raises it.

    Defaults: twice the default address space (4 GiB: room for a numpy- or torch-sized
    skill, still well under a player device's RAM), five minutes of CPU and of wall time
    per tool (ten times the default timeout; the built-in skills ask for at most 20 s),
    ten minutes per plan (a turn nobody waits through is no turn), 4096 descriptors.
    """

    memory_mb: int = 4096
    cpu_s: int = 300
    open_files: int = 4096
    tool_timeout_s: float = 300.0
    plan_timeout_s: float = 600.0

    SETTINGS = {"memory_mb": "--max-skill-memory-mb", "cpu_s": "--max-skill-cpu-s",
                "open_files": "--max-skill-open-files",
                "tool_timeout_s": "--max-tool-timeout-s",
                "plan_timeout_s": "--max-plan-timeout-s"}
