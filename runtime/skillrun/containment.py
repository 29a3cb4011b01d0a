"""Containment: every process a skill invocation starts dies with the invocation.

A process group does not hold a skill: ``fork(); setsid(); fork()`` leaves it, and the
grandchild, reparented to init, outlives its invocation out of reach (and out of sight of
a scan by environment: a forked child need not carry any marker). Two mechanisms keep
every descendant attributable to its invocation and kill them all when it ends; the
first that works here is used (``Containment(mode="auto")``) and logged:

- **cgroup**: the daemon can write a cgroup hierarchy (root; or a systemd unit with
  ``Delegate=yes``, see ``deploy/systemd``). It makes ``narratoria-skills-<pid>`` in its
  own cgroup and, per invocation, a *cell* beneath it; the child joins its cell before
  anything of the script runs, so every process the script starts is born in it whatever
  it does with sessions and parents. The end of the invocation writes ``cgroup.kill``
  (cgroup2: every member dies, a fork racing the kill included) or, with a cgroup v1
  ``pids`` hierarchy alone, SIGKILLs the members until none is left (``pids.max`` bounds
  how many can appear meanwhile).
- **subreaper**: no writable cgroup (a normal user without delegation). The script's
  parent is a shim of its own invocation (``zygote.py``) that is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``): an orphan is reparented to the shim instead of init, so it
  stays attributable; once the script has exited the shim kills its children until it
  has none (:func:`kill_children`). The zygote is a subreaper too: whatever a killed shim
  leaves falls to it and is killed.
- ``off`` keeps only the process group (the behaviour before containment): for
  measuring what containment costs and catches, never a default.

The process-count limit (``ResourceLimits.processes``; threads count, the kernel counts
tasks) is the cell's ``pids.max`` where a pids controller is writable (cgroup2 in the
cell, or a cgroup v1 ``pids`` hierarchy beside it), else ``RLIMIT_NPROC``. That rlimit is
a per-user count, so it is set to the user's task count at the start plus the limit (the
skill can then add about that many), and the kernel does not enforce it for root (or any
process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN): root without a pids controller has no
process-count limit. :meth:`Containment.describe` says which applies.

Cost (2-core test machine, ``narratoria bench skills``): the shim, an extra fork, adds
about 5 ms to an invocation; a cell adds about 15 ms more, nearly all of it the child's
move into its cgroups (writing ``cgroup.procs`` takes a lock that waits for an RCU grace
period). A pool of shims that moved into fresh cells while idle would take that off the
invocation's path (their children are born in the cell); not done yet.

Invariants: a cell's folders exist before its child starts and are removed only once no
member is left (one that cannot be emptied is kept, retried and never reused); the
daemon's base folders go when its Containment closes, or at the next start of any
daemon when the one that made them died (its pid is gone). Plain Python, stdlib only.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import logging
import os
import re
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

MODES = ("auto", "cgroup", "subreaper", "off")
PREFIX = "narratoria-skills-"
_BASE_NAME = re.compile(re.escape(PREFIX) + r"(\d+)(?:-\d+)?$")
EMPTY_WAIT_S = 2.0  # SIGKILLed members are gone within milliseconds; D state can take longer
TASK_COUNT_TTL_S = 1.0

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NAME, _PR_SET_CHILD_SUBREAPER = 1, 4, 15, 36
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


class ContainmentError(OSError):
    """The containment asked for is not available here."""


# ------------------------------------------------------------------------ the hierarchies


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup hierarchy the daemon can write. ``kind``: ``cgroup2`` (cells are killed with
    ``cgroup.kill``; ``pids`` says whether its pids controller is on in the cells) or
    ``pids`` (a cgroup v1 pids hierarchy: counting only)."""

    kind: str
    base: str  # <mount>/<the daemon's own cgroup>/narratoria-skills-<pid>
    pids: bool


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, fs type, super options) of cgroup mounts."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and rest and rest[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4], fields[3], rest[0], rest[2] if len(rest) > 2 else ""))
    except OSError:
        pass
    return out


def _own_cgroups(pid: int | str = "self") -> dict[str, str]:
    """The cgroup path of ``pid`` per hierarchy: ``""`` for cgroup2, else each controller."""
    out: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for controller in (parts[1].split(",") if parts[1] else [""]):
                        out[controller] = parts[2]
    except OSError:
        pass
    return out


def own_folders(pid: int | str = "self") -> dict[str, str]:
    """Where ``pid``'s own cgroups are on this machine: ``cgroup2`` and ``pids`` (v1)."""
    own = _own_cgroups(pid)
    found: dict[str, str] = {}
    for mount, root, fstype, options in _mounts():
        if fstype == "cgroup2" and "" in own and "cgroup2" not in found:
            path = own[""]
        elif fstype == "cgroup" and "pids" in options.split(",") and "pids" in own:
            path = own["pids"]
        else:
            continue
        if root != "/" and path.startswith(root):
            path = path[len(root):]  # a container's mount of its own subtree
        folder = os.path.normpath(os.path.join(mount, path.lstrip("/")))
        found["cgroup2" if fstype == "cgroup2" else "pids"] = folder
    return found


def base_folders(pid: int) -> list[str]:
    """Every base folder the daemon process ``pid`` may have made (for leak scans)."""
    out = []
    for folder in own_folders(pid).values():
        with contextlib.suppress(OSError):
            out += [os.path.join(folder, e.name) for e in os.scandir(folder)
                    if e.is_dir(follow_symlinks=False)
                    and (m := _BASE_NAME.match(e.name)) and int(m.group(1)) == pid]
    return out


def processes_in(folder: str) -> set[int]:
    """Every process in the cgroup ``folder`` and beneath it."""
    found: set[int] = set()
    for here, dirs, _files in os.walk(folder):
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(here, "cgroup.procs")) as f:
                found.update(int(p) for p in f.read().split())
    return found


def _write(path: str, text: str, dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str, dir_fd: int | None = None) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- the cells


class Cell:
    """One invocation's cgroups: a folder of the same name in each hierarchy, and an fd of
    each (``fds``) that the child joins with (:func:`join`) and its shim kills with."""

    def __init__(self, owner: "Containment", dirs: list[tuple[Hierarchy, str]]) -> None:
        self.owner = owner
        self.dirs = dirs
        self.fds: list[int] = []
        try:
            self.fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for _, d in dirs]
        except BaseException:
            self._close_fds()
            raise
        self.counts = any(h.pids for h, _ in dirs)  # pids.max is set: no RLIMIT_NPROC needed

    def members(self) -> set[int]:
        found: set[int] = set()
        for fd in self.fds:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in _read("cgroup.procs", fd).split())
        return found

    def empty(self) -> bool:
        for (hierarchy, _), fd in zip(self.dirs, self.fds):
            try:
                if hierarchy.kind == "cgroup2":
                    if "populated 1" in _read("cgroup.events", fd):
                        return False
                elif _read("cgroup.procs", fd).split():
                    return False
            except OSError:
                continue  # removed under us: nothing in it
        return True

    def kill(self) -> None:
        """SIGKILL every member, wherever it was reparented (not waiting for them)."""
        for (hierarchy, _), fd in zip(self.dirs, self.fds):
            if hierarchy.kind == "cgroup2":
                try:
                    _write("cgroup.kill", "1", fd)
                    return
                except OSError:
                    break  # a kernel before 5.14: no cgroup.kill; signal them one by one
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def close(self, wait_s: float = EMPTY_WAIT_S) -> bool:
        """Kill the members, wait until they are gone, remove the folders. False when a
        member outlived ``wait_s`` (the cell is kept and retried later)."""
        deadline = time.monotonic() + wait_s
        self.kill()
        while not self.empty():
            if time.monotonic() > deadline:
                self.owner._keep(self)
                return False
            time.sleep(0.0005)
            self.kill()  # v1 alone: a member may have forked before its signal
        return self.remove()

    def remove(self) -> bool:
        ok = True
        for _, folder in self.dirs:
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        if ok:
            self._close_fds()
            self.owner._forget(self)
        else:
            self.owner._keep(self)
        return ok

    def _close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def join(fds: Sequence[int]) -> None:
    """In the child, before anything of the script runs: enter the cell whose folders
    ``fds`` are (every process it starts is then born in it)."""
    for fd in fds:
        try:
            _write("cgroup.procs", "0", fd)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot join the invocation's cgroup: {exc.strerror}") from None


# --------------------------------------------------------------------- the subreaper side


def _prctl_call(option: int, arg: int | bytes) -> None:
    if _prctl is None:
        raise OSError("prctl is not available")
    value = ctypes.c_char_p(arg) if isinstance(arg, bytes) else ctypes.c_ulong(arg)
    if _prctl(option, value, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def become_subreaper() -> None:
    """Orphans of this process's descendants are reparented to it, not to init."""
    _prctl_call(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    _prctl_call(_PR_SET_PDEATHSIG, sig)


def set_dumpable(on: bool) -> None:
    """Off: no process of the same user but root may ptrace this one or take its fds
    (``pidfd_getfd``), and its ``/proc`` files belong to root."""
    _prctl_call(_PR_SET_DUMPABLE, 1 if on else 0)


def set_name(name: str) -> None:
    """This process's ``comm`` (what ``ps`` and ``/proc/<pid>/comm`` show), 15 bytes."""
    with contextlib.suppress(OSError):
        _prctl_call(_PR_SET_NAME, name.encode(errors="replace")[:15])


def children(pid: int | None = None) -> list[int]:
    """The live children (zombies included) of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        return found
    except (OSError, ValueError):
        pass
    for entry in os.scandir("/proc"):  # no CONFIG_PROC_CHILDREN: the slow way
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry.name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry.name))
    return found


def kill_children(keep: Iterable[int] = ()) -> int:
    """SIGKILL every child of this process but ``keep`` and reap it, round after round:
    a killed child's own children are reparented here (a subreaper) and die in the next.
    Returns how many were killed. Blocking: for a shim, whose last job this is."""
    keep = set(keep)
    killed = 0
    while True:
        kids = [p for p in children() if p not in keep]
        if not kids:
            return killed
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += len(kids)
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def user_tasks(uid: int | None = None) -> int:
    """How many tasks (threads) the user runs now: what RLIMIT_NPROC is compared with."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


# ---------------------------------------------------------------------- the containment


class Containment:
    """How one daemon (or one CLI run) contains its skill invocations; see the module doc.

    ``mode``: ``auto`` (a cgroup where one is writable, else a subreaper), ``cgroup``
    (ContainmentError when none is writable), ``subreaper`` (never a cgroup: the fallback,
    forced), ``off``."""

    def __init__(self, mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValueError(f"containment mode must be one of {', '.join(MODES)}")
        self.requested = mode
        self.hierarchies: list[Hierarchy] = []
        self.reason = ""
        self._lock = threading.Lock()
        self._names = itertools.count(1)
        self._live: set[Cell] = set()
        self._dirty: list[Cell] = []
        self._closed = False
        self._tasks = (-TASK_COUNT_TTL_S - 1.0, 0)  # (when, the user's task count then)
        if mode in ("auto", "cgroup"):
            sweep()
            self.hierarchies, self.reason = _set_up(os.getpid())
            if mode == "cgroup" and not self.hierarchies:
                raise ContainmentError(f"no writable cgroup for skill processes: {self.reason}")
            if self.hierarchies:
                atexit.register(self.close)
        elif mode == "subreaper":
            self.reason = "forced (no cgroup)"
        self.mode = "cgroup" if self.hierarchies else ("off" if mode == "off" else "subreaper")

    @property
    def bases(self) -> tuple[str, ...]:
        return tuple(h.base for h in self.hierarchies)

    @property
    def owner_folders(self) -> tuple[str, ...]:
        """The daemon's own cgroups, which hold the cells: a skill that could write there
        would raise its own ``pids.max`` or move itself out of its cell, so the skill
        sandbox keeps them out like the data dir."""
        return tuple(os.path.dirname(h.base) for h in self.hierarchies)

    @property
    def counts_by_cgroup(self) -> bool:
        return any(h.pids for h in self.hierarchies)

    def describe(self) -> dict[str, object]:
        cgroup2 = next((h.base for h in self.hierarchies if h.kind == "cgroup2"), None)
        pids = next((h.base for h in self.hierarchies if h.pids), None)
        if pids:
            limit = "pids.max"
        elif os.geteuid() == 0:
            limit = "RLIMIT_NPROC (not enforced: the kernel exempts root)"
        else:
            limit = "RLIMIT_NPROC"
        return {"mode": self.mode, "requested": self.requested, "cgroup": cgroup2,
                "pidsCgroup": pids, "processLimit": limit, "note": self.reason}

    def summary(self) -> str:
        d = self.describe()
        where = f" in {d['cgroup'] or d['pidsCgroup']}" if self.mode == "cgroup" else ""
        why = f" ({self.reason})" if self.reason and self.mode != "cgroup" else ""
        return (f"skill containment: {self.mode}{where}{why}; process limit: "
                f"{d['processLimit']}")

    @contextlib.contextmanager
    def cell(self, processes: int | None = None) -> Iterator[Cell | None]:
        """One invocation's cell (None unless ``mode == "cgroup"``), removed afterwards."""
        if self.mode != "cgroup":
            yield None
            return
        cell = self.new_cell(processes)
        try:
            yield cell
        finally:
            if cell.fds:  # the runner waited for it to empty; one that did not is kept
                cell.close(wait_s=0)

    def new_cell(self, processes: int | None = None) -> Cell:
        with self._lock:
            if self._closed:
                raise ContainmentError("the skill containment is closed")
            name = f"i{next(self._names)}"
            dirty, self._dirty = self._dirty, []
        for old in dirty:  # a cell a member outlived: try again
            old.close(wait_s=0)
        made: list[tuple[Hierarchy, str]] = []
        try:
            for h in self.hierarchies:
                folder = os.path.join(h.base, name)
                os.mkdir(folder)
                made.append((h, folder))
                if h.pids and processes is not None:
                    _write(os.path.join(folder, "pids.max"), str(max(1, processes)))
            cell = Cell(self, made)
        except OSError:
            for _, folder in made:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
        with self._lock:
            self._live.add(cell)
        return cell

    def nproc_pairs(self, processes: int | None, cell: Cell | None) -> list[tuple[int, int]]:
        """The RLIMIT_NPROC fallback of a process limit no ``pids.max`` enforces."""
        if processes is None or (cell is not None and cell.counts):
            return []
        now = time.monotonic()
        # Counting walks /proc (milliseconds): once a second is close enough for a
        # limit that is approximate anyway.
        if now - self._tasks[0] > TASK_COUNT_TTL_S:
            self._tasks = (now, user_tasks())
        return [(resource.RLIMIT_NPROC, self._tasks[1] + max(1, processes))]

    def _keep(self, cell: Cell) -> None:
        with self._lock:
            self._live.discard(cell)
            if cell not in self._dirty:
                self._dirty.append(cell)

    def _forget(self, cell: Cell) -> None:
        with self._lock:
            self._live.discard(cell)
            with contextlib.suppress(ValueError):
                self._dirty.remove(cell)

    def close(self) -> None:
        """Kill what is left in every cell; remove the cells and the base folders."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            cells = list(self._live) + list(self._dirty)
        for cell in cells:
            if cell.fds:
                cell.close()
        for h in self.hierarchies:
            _remove_base(h.base)


_instances = itertools.count()


def _set_up(pid: int) -> tuple[list[Hierarchy], str]:
    """The hierarchies this process can contain skills in, each with its base folder made
    and a child seen to join a cell of it; and why there is none when there is none."""
    own = own_folders()
    if not own:
        return [], "no cgroup hierarchy is mounted"
    found: list[Hierarchy] = []
    reasons = []
    n = next(_instances)
    name = PREFIX + str(pid) + (f"-{n}" if n else "")  # a second Containment in one process
    for kind in ("cgroup2", "pids"):
        if kind not in own:
            continue
        if kind == "pids" and any(h.pids for h in found):
            continue  # cgroup2 counts already
        base = os.path.join(own[kind], name)
        try:
            if os.path.isdir(base):  # a dead process's of the same pid
                _remove_base(base)
            os.mkdir(base)
        except OSError as exc:
            reasons.append(f"{own[kind]}: {exc.strerror}")
            continue
        pids = kind == "pids" or _enable_pids(own[kind], base)
        hierarchy = Hierarchy(kind, base, pids)
        problem = _probe(hierarchy)
        if problem:
            reasons.append(f"{base}: {problem}")
            _remove_base(base)
            continue
        found.append(hierarchy)
    return found, "; ".join(reasons) or ("" if found else "no writable cgroup")


def _enable_pids(own: str, base: str) -> bool:
    """Turn the cgroup2 pids controller on in the cells where the kernel lets us (it is off
    where a cgroup v1 hierarchy holds it, or where our own cgroup has processes and may
    not hand controllers down)."""
    try:
        if "pids" not in _read(os.path.join(base, "cgroup.controllers")).split():
            if "pids" not in _read(os.path.join(own, "cgroup.controllers")).split():
                return False
            _write(os.path.join(own, "cgroup.subtree_control"), "+pids")
        _write(os.path.join(base, "cgroup.subtree_control"), "+pids")
        return True
    except OSError:
        return False


def _probe(hierarchy: Hierarchy) -> str:
    """Whether a child can join a cell of ``hierarchy`` (writing ``cgroup.procs`` needs
    rights on the common ancestor too, which mkdir alone does not prove)."""
    folder = os.path.join(hierarchy.base, "probe")
    try:
        os.mkdir(folder)
        if hierarchy.pids:
            _write(os.path.join(folder, "pids.max"), "4")
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        return exc.strerror or str(exc)
    try:
        pid = os.fork()
        if pid == 0:  # only an open, a write and _exit: safe in a threaded parent
            try:
                join([fd])
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        return "" if os.waitstatus_to_exitcode(status) == 0 else "a child cannot join a cell"
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _remove_base(base: str) -> None:
    """Empty and remove a base folder and its cells (a dead daemon's, or ours at close)."""
    try:
        cells = [e.path for e in os.scandir(base) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for folder in cells:
        members = processes_in(folder)
        with contextlib.suppress(OSError):
            _write(os.path.join(folder, "cgroup.kill"), "1")
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + EMPTY_WAIT_S
        while True:
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    log.warning("cannot remove %s: processes are still in it", folder)
                    return
                time.sleep(0.001)
    with contextlib.suppress(OSError):
        os.rmdir(base)


def sweep() -> list[str]:
    """Remove the base folders of daemons that died without removing them (killing what
    was left in them). Returns the folders removed."""
    removed = []
    for folder in own_folders().values():
        try:
            entries = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for entry in entries:
            match = _BASE_NAME.match(entry.name)
            if match and not os.path.exists(f"/proc/{match.group(1)}"):
                _remove_base(entry.path)
                if not os.path.exists(entry.path):
                    removed.append(entry.path)
    return removed


_default: Containment | None = None
_default_lock = threading.Lock()


def default_containment() -> Containment:
    """This process's own Containment (``auto``), for invocations no daemon contains (a
    local ``narratoria plan run``, ``skills check``, tests); made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Containment("auto")
            if _default.mode != "cgroup":
                log.warning(_default.summary())
        return _default


__all__ = ["Cell", "Containment", "ContainmentError", "MODES", "base_folders",
           "become_subreaper", "children", "default_containment", "join", "kill_children",
           "own_folders", "processes_in", "sweep", "user_tasks"]

if sys.platform != "linux":  # pragma: no cover
    log.warning("skill containment needs Linux")
