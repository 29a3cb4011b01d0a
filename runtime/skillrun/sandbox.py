"""Landlock: a skill process cannot open the daemon's own files, nor other processes', nor
change any file but its own, nor signal any process but its own.

Skills run as the player's user, so file modes cannot keep them out of the data
dir (the database, the daemon token, the characters). Linux's Landlock can: an
unprivileged process may give up access to parts of the file system for itself and
every process it starts, for good. Landlock rules only *allow* (a hierarchy); to
keep one folder out, each folder on the way from ``/`` down to it allows all of its
entries except the next step, and the folder itself gets nothing. A folder *beneath*
a denied one can be let in again by a rule of its own: the skill roots installed in
the data dir (read and run) and the invoking skill's own ``data/`` folder (its
working directory: everything).

Three layers, each of which must allow an access (invariant: a skill may read and run
files everywhere but the denied folders and other processes' ``/proc``; it may change
files only in its working directory, its ``TMPDIR`` and :data:`DEV_FILES` /
:data:`DEV_FOLDERS`; where the kernel has scopes, it may signal and reach the abstract
unix sockets of only its own processes):

1. **the data dir** (:class:`Ruleset`, built in the parent): every entry of the data
   dir's ancestors but the next step, as above; Ray's per-user files
   (:func:`ray_files`) are denied folders too. Creating or removing entries directly
   inside an ancestor (``/tmp`` when the data dir lives under it) is out.
2. **other processes** (built in the child, because only there is the pid known): every
   entry of ``/`` but ``/proc``, every entry of ``/proc`` that is no process
   (``meminfo``, ``sys``...; links such as ``self`` resolve to a process folder and need
   no rule), and ``/proc/<its own pid>``. So a skill reads its own ``/proc/self`` but no
   other process's ``environ``, ``cmdline`` or ``fd`` (the daemon's secrets). Its
   children inherit the layer with the skill's pid in it: each child may read the
   skill's ``/proc`` folder, not its own. From ABI 6 the layer also sets the *scopes*
   ``SIGNAL`` and ``ABSTRACT_UNIX_SOCKET``: the skill and what it starts may signal
   (``kill``, ``pidfd_send_signal``, ``F_SETOWN``) only processes of this layer's domain
   -- itself and its descendants -- never the daemon, its actors, the zygote, its own
   shim or another invocation. Processes outside the sandbox (the supervisor, the shim,
   the zygote) still signal the skill: scopes bind only the sandboxed side. A kernel
   before ABI 6 gets the ruleset without scopes (logged once by :func:`lease`).
3. **writes** (built in the child from its working directory and ``TMPDIR``:
   :func:`writable_for`): handles only the rights that change files (write, truncate,
   make, remove, link or rename across folders) and gives them back to those two
   folders and to /dev's few. Everything else is read-only: other skills' scripts (they
   would run with *that* skill's Store scope), the project's source and venv (code the
   daemon runs next), the skill settings, ``$HOME``, ``/tmp`` (other daemons' token
   files). Since the daemon's ``TMPDIR`` is shared with other programs, every confined
   invocation gets a scratch ``TMPDIR`` of its own (:func:`needs_scratch`,
   :func:`scratch_dir`: a ``mkdtemp`` and an ``rmtree``, well under a millisecond).
   Landlock does not govern ``chmod``, ``chown``, ``utime`` or extended attributes.

What a skill keeps: connecting to the daemon's socket (Landlock does not govern
``connect`` on a path socket) and the network (the network rights stay unhandled).

The first layer is built in the parent (listing ``/tmp`` can take milliseconds),
cached per policy and writable folders beneath a denied one, and rebuilt only when an
ancestor folder changes; the child, after fork and before the script runs, calls
:func:`restrict` with its fd and the invocation's writable folders -- in the same two
places as the resource limits (``process.py``'s exec, ``zygote.py``'s fork; the zygote
gets the fd with the request, over SCM_RIGHTS, and the writable folders are the
request's ``cwd`` and ``env["TMPDIR"]``). The two child-built layers cost about a
millisecond (two folder listings, ~80 rules). On a kernel without Landlock the process
runs as before (logged once).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_EINVAL = 22

# File-system rights (include/uapi/linux/landlock.h).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1       # execute .. make_sym
_REFER = 1 << 13                # ABI 2: link/rename across folders (denied unless handled)
_TRUNCATE = 1 << 14             # ABI 3: truncate(2) -- unhandled, it would reach the denied dir
READ_ONLY = EXECUTE | READ_FILE | READ_DIR

# ABI 6 scopes: a sandboxed process may signal, and connect to the abstract unix sockets
# of, only the processes of its own Landlock domain (itself and what it starts).
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
SCOPES_ABI = 6

# What programs write in /dev whatever they do: the null, zero and random devices, the
# controlling terminal, and POSIX shared memory and semaphores (multiprocessing's locks).
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
DEV_FOLDERS = ("/dev/shm",)

# Resolved now, in the parent: the child between fork and exec must not dlopen/dlsym
# (another thread of the daemon may have held the loader's lock when it forked).
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _syscall = _LIBC.syscall
    _prctl = _LIBC.prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _LIBC = None


class _RulesetAttr(ctypes.Structure):
    # The kernel reads as much of it as it is told: 8 bytes (file-system rights, ABI 1-5),
    # or all 24 once ``scoped`` is used (ABI 6); ``handled_access_net`` (ABI 4) stays 0.
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


_ATTR_FS_ONLY = 8


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_abi: int | None = None


def available() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (or it is disabled)."""
    global _abi
    if _abi is None:
        if _LIBC is None:
            _abi = 0
        else:
            version = _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                               ctypes.c_uint32(_CREATE_RULESET_VERSION))
            _abi = max(0, int(version))
    return _abi


def _rights(abi: int) -> tuple[int, int]:
    """(every handled right, the rights a non-folder may be given) for this ABI."""
    everything = _ABI1_ALL | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    return everything, everything & (EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE)


def scopes(abi: int | None = None) -> int:
    """The scopes this kernel enforces (none before ABI 6)."""
    abi = available() if abi is None else abi
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPES_ABI else 0


@dataclass(frozen=True)
class SandboxPolicy:
    """What a skill process may not open.

    ``denied``: folders kept out entirely (the daemon's data dir). ``readable``:
    folders that may lie beneath a denied one and stay readable and runnable there
    (the skill roots, the interpreter); one that is not beneath a denied folder needs
    no rule and gets none.
    """

    denied: tuple[str, ...]
    readable: tuple[str, ...] = ()


def _beneath(path: Path, folders: Iterable[Path]) -> bool:
    """Strictly beneath one of ``folders``."""
    return any(f in path.parents for f in folders)


class Ruleset:
    """A Landlock ruleset that keeps ``denied`` out, as an fd children restrict with.

    ``extra`` maps folders beneath a denied one to the rights they get back. Rules
    name what exists when they are added: an entry created later in an ancestor folder
    would be out of reach, and a re-allowed folder replaced since (a skill installed
    again) would be too, so ``fd()`` rebuilds the ruleset when an ancestor's
    modification time or an extra folder's identity has changed since.
    """

    def __init__(self, denied: Sequence[str], extra: Mapping[str, int] | None = None) -> None:
        self.denied = frozenset(Path(os.path.realpath(p)) for p in denied)
        self.ancestors = sorted({a for d in self.denied for a in d.parents} - self.denied)
        self.extra: dict[Path, int] = {}
        for p, rights in (extra or {}).items():  # -1: every handled right
            real = Path(os.path.realpath(p))
            had = self.extra.get(real, 0)
            self.extra[real] = -1 if -1 in (had, rights) else had | rights
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._stamp: tuple[object, ...] | None = None
        # Leased fds (see ``lease``) -> count: a rebuild closes the old fd only once no
        # caller may still be handing it to a child.
        self._leases: dict[int, int] = {}

    def _now(self) -> tuple[object, ...]:
        return (tuple(_mtime(a) for a in self.ancestors),
                tuple(_identity(p) for p in sorted(self.extra)))

    def fd(self) -> int:
        """The current ruleset's fd, rebuilt first if the file system changed; valid
        until the next call (use ``lease`` where another thread may call meanwhile)."""
        with self._lock:
            return self._current()

    @contextlib.contextmanager
    def lease(self) -> Iterator[int]:
        """The current fd, kept open until the ``with`` ends even if rebuilt meanwhile."""
        with self._lock:
            fd = self._current()
            self._leases[fd] = self._leases.get(fd, 0) + 1
        try:
            yield fd
        finally:
            with self._lock:
                self._leases[fd] -= 1
                if not self._leases[fd]:
                    del self._leases[fd]
                    if fd != self._fd:
                        os.close(fd)

    def _current(self) -> int:
        stamp = self._now()
        if self._fd is None or stamp != self._stamp:
            fresh = _build(self.denied, self.ancestors, self.extra)
            if self._fd is not None and self._fd not in self._leases:
                os.close(self._fd)
            self._fd, self._stamp = fresh, stamp
        return self._fd

    def close(self) -> None:
        with self._lock:
            if self._fd is not None and self._fd not in self._leases:
                os.close(self._fd)
            self._fd = None


def restrict(ruleset_fd: int, writable: Sequence[str] | None) -> None:
    """In the child: enforce the ruleset, then the layer that keeps other processes out
    (their ``/proc`` folders, signals, abstract sockets), then -- unless ``writable`` is
    None -- the layer that lets it change files only in ``writable`` (its working
    directory and its TMPDIR: :func:`writable_for`) and /dev's few; for this process
    and all it starts, for good.

    Pre-resolved C calls, two folder listings and a few opens (``os.scandir``: no
    dlopen, and glibc resets its allocator's locks in a forked child): safe between fork
    and exec."""
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    # Built first: the data dir's layer closes listing ``/``.
    layers = [_other_processes_layer()]
    try:
        if writable is not None:
            layers.append(_write_layer(writable))
        _restrict_self(ruleset_fd)
        for layer in layers:
            _restrict_self(layer)
    finally:
        for layer in layers:
            os.close(layer)


def writable_for(cwd: str | os.PathLike[str] | None,
                 env: Mapping[str, str] | None) -> tuple[str, ...]:
    """What one invocation may change: its working directory and its ``TMPDIR``."""
    return tuple(str(p) for p in (cwd, (env or {}).get("TMPDIR")) if p)


def _restrict_self(ruleset_fd: int) -> None:
    if _syscall(_SYS_RESTRICT_SELF, ruleset_fd, ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")


def _other_processes_layer() -> int:
    """A ruleset fd that allows everything but the ``/proc/<pid>`` folders of the other
    processes (and creating entries right in ``/`` or ``/proc``), and, where the kernel
    has scopes, signalling them or connecting to their abstract unix sockets."""
    abi = available()
    everything, file_rights = _rights(abi)
    ruleset = _create_ruleset(everything, scopes(abi))
    try:
        for folder, keep in (("/", lambda name: name != "proc"),
                             ("/proc", lambda name: not name.isdigit())):
            try:
                with os.scandir(folder) as it:
                    entries = [(e.path, e.is_dir(follow_symlinks=False)) for e in it
                               if keep(e.name) and not e.is_symlink()]
            except OSError:
                if folder == "/":
                    raise
                continue  # no /proc mounted: nothing of it to keep out
            for path, is_dir in entries:
                _add_rule(ruleset, Path(path), everything, file_rights, is_dir)
        _add_rule(ruleset, Path("/proc/self"), everything, file_rights, True)  # -> /proc/<pid>
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _write_layer(writable: Sequence[str]) -> int:
    """A ruleset fd that handles only the rights that change files (write, truncate,
    make, remove, link/rename across folders) and gives them back to ``writable`` and
    /dev's few (:data:`DEV_FILES`, :data:`DEV_FOLDERS`): reading and running stay as the
    other layers have them. A folder that does not exist gets no rule."""
    everything, file_rights = _rights(available())
    changes = everything & ~READ_ONLY
    ruleset = _create_ruleset(changes)
    try:
        for folder in (*writable, *DEV_FOLDERS):
            _add_rule(ruleset, Path(folder), changes, file_rights)
        for device in DEV_FILES:
            _add_rule(ruleset, Path(device), changes, file_rights, False)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def ray_files() -> tuple[str, ...]:
    """Ray's per-user files a skill may not open: ``~/.ray`` (the cluster's auth token)
    and Ray's default temporary folder ``/tmp/ray`` (session files naming the cluster's
    address). Named whether or not they exist yet: one created later is kept out too."""
    return (str(Path.home() / ".ray"), "/tmp/ray")


def deny(paths: Sequence[str], extra: Mapping[str, int] | None = None,
         writable: Sequence[str] | None = None) -> None:
    """Give up every access to ``paths`` (folders) in this process, for good; with
    ``writable``, every change to files outside those folders too (see ``restrict``).

    Raises OSError when the kernel refuses or has no Landlock."""
    if not paths:
        return
    ruleset = Ruleset(paths, extra)
    try:
        restrict(ruleset.fd(), writable)
    finally:
        ruleset.close()


# --------------------------------------------------------------- the supervisor's side

_cache: dict[tuple[SandboxPolicy, tuple[str, ...]], Ruleset] = {}
_cache_lock = threading.Lock()
_warned = False
_warned_scopes = False


@contextlib.contextmanager
def lease(policy: SandboxPolicy, writable: Sequence[str | os.PathLike[str]] = ()
          ) -> Iterator[int | None]:
    """The ruleset fd a child restricts itself with, open until the ``with`` ends (the
    cache owns it: never close it), or None when this kernel has no Landlock (logged
    once): the skill runs unconfined. Blocking (a rebuild lists the data dir's
    ancestors): call it off the event loop.

    ``writable``: folders the invocation works in (its working directory, its scratch
    folders' root); one beneath a denied folder gets every right back in this layer,
    and gets its own ruleset (cached too). What confines writes is the child's own
    layer (``restrict``'s ``writable``).
    """
    global _warned, _warned_scopes
    if not policy.denied or not available():
        if policy.denied and not _warned:
            _warned = True
            log.warning("this kernel has no Landlock: skill processes can read the data dir "
                        "and write anywhere the user can")
        yield None
        return
    if not scopes() and not _warned_scopes:
        _warned_scopes = True
        log.warning("this kernel's Landlock (ABI %d, scopes need %d) cannot scope signals: "
                    "skill processes can signal the daemon and the user's other processes",
                    available(), SCOPES_ABI)
    denied = [Path(os.path.realpath(p)) for p in policy.denied]
    ancestors = {a for d in denied for a in d.parents}
    inside = tuple(sorted({
        str(real) for w in writable
        if _beneath(real := Path(os.path.realpath(w)), denied) and real not in ancestors}))
    key = (policy, inside)
    with _cache_lock:
        ruleset = _cache.get(key)
        if ruleset is None:
            extra = {r: READ_ONLY for r in policy.readable
                     if _beneath(Path(os.path.realpath(r)), denied)}
            extra.update({w: -1 for w in inside})  # -1: every handled right
            ruleset = _cache[key] = Ruleset(policy.denied, extra)
    with ruleset.lease() as fd:
        yield fd


def needs_scratch(policy: SandboxPolicy) -> bool:
    """Whether a skill run under ``policy`` needs a ``TMPDIR`` of its own: always where
    it is confined, since it may write nowhere but its working directory and its
    ``TMPDIR``, and the daemon's own (``/tmp``) holds other programs' files (other
    daemons' token files, other invocations' scratch files)."""
    return bool(policy.denied) and available() > 0


_scratch_root: str | None = None
_scratch_lock = threading.Lock()


def scratch_root() -> str:
    """The folder every invocation's scratch ``TMPDIR`` is made in: one per daemon
    process, in the daemon's own temporary folder, removed when the process exits."""
    global _scratch_root
    with _scratch_lock:
        if _scratch_root is None or not os.path.isdir(_scratch_root):
            _scratch_root = tempfile.mkdtemp(prefix="narratoria-skill-tmp-")
            atexit.register(shutil.rmtree, _scratch_root, True)
        return _scratch_root


@contextlib.contextmanager
def scratch_dir() -> Iterator[str]:
    """One invocation's own ``TMPDIR``, removed afterwards."""
    path = tempfile.mkdtemp(prefix="t-", dir=scratch_root())
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------- building the rules


def _mtime(folder: Path) -> int:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return -1


def _identity(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return -1, -1


def _create_ruleset(handled: int, scoped: int = 0) -> int:
    attr = _RulesetAttr(handled, 0, scoped)
    # The short form where no scope is asked for: kernels before ABI 4 know no other.
    size = ctypes.sizeof(attr) if scoped else _ATTR_FS_ONLY
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr),
                       ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    return ruleset


def _build(denied: frozenset[Path], ancestors: list[Path], extra: Mapping[Path, int]) -> int:
    everything, file_rights = _rights(available())
    ruleset = _create_ruleset(everything)
    try:
        on_the_way = set(ancestors)
        for folder in ancestors:
            _allow_entries(ruleset, folder, on_the_way, denied, everything, file_rights)
        for path, rights in extra.items():
            if path in denied:  # never let a denied folder itself back in
                continue
            _add_rule(ruleset, path, everything if rights == -1 else rights & everything,
                      file_rights)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset  # O_CLOEXEC: only the child that restricts itself with it uses it


def _allow_entries(ruleset: int, folder: Path, ancestors: set[Path], denied: frozenset[Path],
                   everything: int, file_rights: int) -> None:
    try:
        with os.scandir(folder) as it:
            entries = [(e.path, e.is_symlink(), e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return  # an unreadable folder: nothing beneath it is allowed
    for path, link, is_dir in entries:
        # Where the entry really is (``folder`` is a real path already): a link to an
        # ancestor ("pytest-current") would otherwise open the whole hierarchy again,
        # and one into a denied folder the folder itself.
        real = Path(os.path.realpath(path)) if link else Path(path)
        if real in ancestors or real in denied or (link and _beneath(real, denied)):
            continue
        _add_rule(ruleset, Path(path), everything, file_rights, None if link else is_dir)


def _add_rule(ruleset: int, path: Path, rights: int, file_rights: int,
              is_dir: bool | None = None) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or a dangling link
    try:
        if is_dir is None:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        rule = _PathBeneath(rights if is_dir else rights & file_rights, fd)
        if _syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                    ctypes.c_uint32(0)) != 0:
            errno = ctypes.get_errno()
            if errno != _EINVAL:  # a special file Landlock takes no rule for
                raise OSError(errno, f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
