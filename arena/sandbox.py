"""A sandbox for the worker processes of a :class:`~coevo.arena.workers.WorkerPool`.

Tool code from an installed package is trusted to be what its author meant,
not to be free of bugs, so a sandboxed worker runs it behind layers that the
kernel enforces, each one independent of the others:

- before the worker executes Python (in the child, between fork and exec):
  it dies with its parent, joins its own network namespace (no interface,
  not even loopback), gets an address-space limit (``RLIMIT_AS``), no core
  dumps, and joins its own ``pids`` cgroup when one can be made;
- after it imported its handler (so imports are not restricted): limits on
  open files, file size and processes, a CPU-time allowance reset before
  each job, a switch to its own unprivileged uid keeping only
  ``CAP_DAC_READ_SEARCH`` (to read Python's root-owned files), then
  Landlock: read-only access to Python's install, site-packages and the
  import paths the handler came from; read-write access to one folder, the
  box; no TCP.

Where a layer cannot be had (not root, a kernel without Landlock, no
namespaces), the pool says so in ``isolation_missing`` and leaves it out of
``isolation``; ``Sandbox(strict=True)`` refuses to start instead. A layer is
only listed once the worker has checked it from inside. The setup travels
to the worker in an environment variable the parent sets, never in a job.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import math
import os
import resource
import shutil
import signal
import site
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

__all__ = ["CpuTimeExceeded", "Sandbox", "SandboxUnavailable"]

SETUP_VARIABLE: Final = "COEVO_WORKER_SANDBOX"
"""The environment variable in which the parent hands a worker its sandbox setup (JSON)."""

_SYSTEM_LIBRARIES: Final = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache")
"""Read-only as well: the shared libraries an extension module imported later may load."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

_CLONE_NEWNET: Final = 0x40000000
_CLONE_NEWUSER: Final = 0x10000000
_PR_SET_PDEATHSIG, _PR_SET_KEEPCAPS, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 8, 24, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_DAC_READ_SEARCH: Final = 2
_CAPABILITY_VERSION_3: Final = 0x20080522

# Landlock (linux/landlock.h); the syscall numbers are the same on every architecture
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULESET_VERSION: Final = 1
_RULE_PATH_BENEATH: Final = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1: Final = (1 << 13) - 1  # execute, read, write, and making or removing every kind of file
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_FILE_RIGHTS: Final = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_FS_READ: Final = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2

_CGROUP_ROOTS: Final = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")  # cgroup v1, then v2
_ids = itertools.count()


class SandboxUnavailable(RuntimeError):
    """A strict sandbox asked for layers this machine cannot give (the message says how to get them)."""


class CpuTimeExceeded(BaseException):
    """Raised in a job that used up its CPU time (a ``BaseException``, so ``except Exception`` in tool code cannot swallow it)."""


@dataclass(frozen=True)
class Sandbox:
    """What a sandboxed worker may use; give it to ``WorkerPool(..., sandbox=Sandbox())``.

    Attributes:
        cpu_seconds: CPU time one job may use (``RLIMIT_CPU``, reset before
            each job; granularity about a second). A job past it fails with
            :class:`CpuTimeExceeded`; the worker lives on.
        memory_bytes: the worker's address space (``RLIMIT_AS``); the pool's
            own ``memory_bytes``, if smaller, wins.
        processes: processes and threads the worker may have at once,
            itself included (a ``pids`` cgroup, and ``RLIMIT_NPROC`` under
            the worker's own uid).
        file_bytes: the largest file the worker may write (``RLIMIT_FSIZE``).
        open_files: file descriptors the worker may hold (``RLIMIT_NOFILE``).
        network: False gives the worker a network namespace of its own with
            no interface at all (not even loopback) and, with Landlock ABI 4
            or later, no TCP either; True leaves the network alone.
        box: the one folder the tools may write (and read), shared by the
            pool's workers; None makes a fresh temporary folder per worker,
            removed with it. It is the worker's working directory, ``HOME``
            and ``TMPDIR``.
        read_only: more paths the tools may read (Python's install,
            site-packages and the handler's import paths are always readable).
        env: environment variables for the workers; nothing else of the
            parent's environment is passed on (API keys stay out).
        strict: refuse to start unless every layer is active.
        uid_base: the first of the unprivileged uids given to workers (each
            started worker gets its own, so that ``RLIMIT_NPROC`` counts only
            its processes); they need no entry in ``/etc/passwd``.
    """

    cpu_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    processes: int = 16
    file_bytes: int = 64 << 20
    open_files: int = 256
    network: bool = False
    box: str | None = None
    read_only: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    strict: bool = False
    uid_base: int = 200_000

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_bytes", "processes", "file_bytes", "open_files"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Sandbox.{name} must be positive, got {getattr(self, name)}")

    def missing(self) -> dict[str, str]:
        """The layers this machine cannot give this sandbox, each with the way to get it."""
        return _support(self.uid_base).missing(self)


# ---------------------------------------------------------------- what the machine supports


@dataclass(frozen=True)
class _Support:
    """What the parent process can arrange for its workers (probed once per process)."""

    network_flags: int  # the unshare flags that give a new network namespace (0: none work)
    switch_uid: bool
    landlock_abi: int
    cgroup_root: str | None

    def missing(self, sandbox: Sandbox) -> dict[str, str]:
        gone: dict[str, str] = {}
        if not sandbox.network and not self.network_flags:
            gone["network namespace"] = (
                "unshare(CLONE_NEWNET) is refused: run as root (or with CAP_SYS_ADMIN), enable "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or use "
                "Sandbox(network=True) to go without"
            )
        if not self.switch_uid:
            gone["unprivileged uid"] = (
                "switching each worker to its own uid needs root (CAP_SETUID and CAP_SETGID): run as root"
            )
        if self.landlock_abi < 1:
            gone["landlock"] = (
                "the kernel has no Landlock: it needs Linux 5.13 or later with landlock in the "
                "lsm= boot parameter (see /sys/kernel/security/lsm)"
            )
        if not self.switch_uid and self.cgroup_root is None:
            gone["process limit"] = (
                "neither a writable pids cgroup (/sys/fs/cgroup/pids or a v2 /sys/fs/cgroup with the "
                "pids controller) nor a uid of its own (root) is available to bound processes"
            )
        return gone


def _probe_in_child(uid: int) -> tuple[int, bool]:
    """Which unshare flags give a network namespace, and whether setresuid works: tried in a forked child."""
    results = []
    for attempt in ([_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET], None):
        pid = os.fork()
        if pid == 0:  # the child only makes syscalls, then leaves
            code = 0
            try:
                if attempt is None:
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    code = 1
                else:
                    for bit, flags in enumerate(attempt):
                        if _libc.unshare(flags) == 0:
                            code = 1 << bit
                            break
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        results.append(os.waitstatus_to_exitcode(status))
    namespaces, uid_switched = results
    flags = (
        _CLONE_NEWNET if namespaces & 1 else (_CLONE_NEWUSER | _CLONE_NEWNET if namespaces else 0)
    )
    return flags, bool(uid_switched)


def _network_namespace() -> int:
    """This process's network namespace (the inode of its ``/proc`` entry)."""
    return os.stat("/proc/self/ns/net").st_ino


def _landlock_abi() -> int:
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _RULESET_VERSION)
    return max(int(abi), 0)


def _writable_cgroup_root() -> str | None:
    for root in _CGROUP_ROOTS:
        probe = os.path.join(root, f"coevo-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            if os.path.exists(os.path.join(probe, "pids.max")):
                return root
        finally:
            os.rmdir(probe)
    return None


@cache
def _support(uid: int) -> _Support:
    flags, switch_uid = _probe_in_child(uid)
    return _Support(flags, switch_uid, _landlock_abi(), _writable_cgroup_root())


# ---------------------------------------------------------------- the parent's side


def check_or_refuse(sandbox: Sandbox) -> dict[str, str]:
    """The layers missing for ``sandbox``; raises :class:`SandboxUnavailable` if it is strict and any is."""
    missing = sandbox.missing()
    if missing and sandbox.strict:
        lines = "\n".join(f"- {name}: {how}" for name, how in missing.items())
        raise SandboxUnavailable(
            f"the strict sandbox cannot start: {len(missing)} layer(s) missing on this machine\n{lines}"
        )
    return missing


def fresh_id(sandbox: Sandbox) -> int:
    """A uid (or gid) for one worker (or pool) that no other worker of this process has, from ``uid_base`` up.

    Processes of other pools rarely share one: the ids of a process start at
    a multiple of 1,000 taken from its pid.
    """
    return sandbox.uid_base + (os.getpid() % 10_000) * 1_000 + next(_ids) % 1_000


class Jail:
    """One worker's sandbox, made by the parent before it starts the worker and released after it stops.

    Args:
        sandbox: the limits.
        group: the gid every worker of the pool shares (it owns a shared box).
        paths: import paths the worker is given (readable in the sandbox).
        memory_bytes: the pool's own address-space limit (0: none); the smaller one applies.
    """

    def __init__(self, sandbox: Sandbox, *, group: int, paths: tuple[str, ...], memory_bytes: int):
        self.sandbox = sandbox
        support = _support(sandbox.uid_base)
        self.network_flags = 0 if sandbox.network else support.network_flags
        self.uid = fresh_id(sandbox)
        self.gid = group
        self.switch_uid = support.switch_uid
        self.memory_bytes = min(v for v in (sandbox.memory_bytes, memory_bytes) if v > 0)
        self.paths = paths
        self._own_box = sandbox.box is None
        self.box = tempfile.mkdtemp(prefix="coevo-box-") if sandbox.box is None else sandbox.box
        self.cgroup: str | None = None
        try:
            os.makedirs(self.box, exist_ok=True)
            if self.switch_uid:
                if self._own_box:
                    os.chown(self.box, self.uid, self.gid)
                else:  # shared by the pool's workers (each its own uid): through their common group
                    os.chown(self.box, -1, self.gid)
                    os.chmod(self.box, os.stat(self.box).st_mode & 0o7777 | 0o2070)
            if support.cgroup_root is not None:
                self.cgroup = os.path.join(support.cgroup_root, f"coevo-worker-{self.uid}")
                os.makedirs(self.cgroup, exist_ok=True)
                with open(os.path.join(self.cgroup, "pids.max"), "w") as limit:
                    limit.write(str(sandbox.processes))
        except BaseException:
            self.release(None)
            raise

    def environment(self) -> dict[str, str]:
        """The worker's whole environment: the sandbox's variables, the box, the import paths, the setup."""
        setup = {
            "uid": self.uid if self.switch_uid else None,
            "gid": self.gid,
            "parent": os.getpid(),
            "network_namespace": _network_namespace() if self.network_flags else None,
            "network_flags": self.network_flags,
            "cgroup": self.cgroup,
            "landlock": _support(self.sandbox.uid_base).landlock_abi >= 1,
            "deny_tcp": not self.sandbox.network,
            "read_only": [*self.paths, *self.sandbox.read_only],
            "box": self.box,
            "cpu_seconds": self.sandbox.cpu_seconds,
            "processes": self.sandbox.processes,
            "file_bytes": self.sandbox.file_bytes,
            "open_files": self.sandbox.open_files,
        }
        env = {
            "PATH": os.defpath,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            **self.sandbox.env,
            "HOME": self.box,
            "TMPDIR": self.box,
            SETUP_VARIABLE: json.dumps(setup),
        }
        if self.paths:
            env["PYTHONPATH"] = os.pathsep.join(self.paths)
        return env

    def before_exec(self) -> None:
        """In the child, between fork and exec: a network namespace, no core dumps, the pids cgroup.

        Only syscalls, no locks: the parent may have other threads.
        """
        if self.network_flags and _libc.unshare(self.network_flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self.cgroup is not None:
            fd = os.open(os.path.join(self.cgroup, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)

    def release(self, process_group: int | None) -> None:
        """After the worker stopped: kill what it left running, remove its cgroup and its own box."""
        if process_group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process_group, signal.SIGKILL)
        if self.cgroup is not None:
            self._empty_cgroup()
        if self._own_box:
            shutil.rmtree(self.box, ignore_errors=True)

    def _empty_cgroup(self) -> None:
        assert self.cgroup is not None
        procs = os.path.join(self.cgroup, "cgroup.procs")
        for _ in range(200):  # children may fork while being killed: a few rounds
            try:
                with open(procs) as listing:
                    pids = [int(line) for line in listing if line.strip()]
            except FileNotFoundError:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.cgroup)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return
            os.sched_yield()


# ---------------------------------------------------------------- the worker's side


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def _die_with_parent(parent: int) -> None:
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _become(uid: int, gid: int) -> None:
    """Switch to ``uid``/``gid`` for good, keeping only ``CAP_DAC_READ_SEARCH`` (reading root-owned Python)."""
    for cap in range(64):
        if cap != _CAP_DAC_READ_SEARCH and _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the last capability the kernel knows
                break
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(
        _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0),
        "clearing ambient capabilities",
    )
    _check(_libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0), "prctl(PR_SET_KEEPCAPS)")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    keep = 1 << _CAP_DAC_READ_SEARCH
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    # effective, permitted and inheritable, each in two 32-bit words
    data = (ctypes.c_uint32 * 6)(keep, keep, 0, 0, 0, 0)
    _check(_libc.capset(header, data), "capset")


def _readable_paths(extra: list[str]) -> list[str]:
    """Python's install and site-packages, the folders of every imported package, and ``extra``."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *_SYSTEM_LIBRARIES}
    paths.update(
        sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")
    )
    paths.update(site.getsitepackages())
    for name, module in list(sys.modules.items()):
        package_path = getattr(module, "__path__", None)
        if package_path is not None:
            paths.update(str(entry) for entry in package_path)
        elif (file := getattr(module, "__file__", None)) is not None:
            paths.add(file)
        mapping = getattr(module, "MAPPING", None)  # setuptools' finder of an editable install
        if name.startswith("__editable__") and isinstance(mapping, dict):
            paths.update(str(entry) for entry in mapping.values())
    paths.update(extra)
    existing = sorted(os.path.realpath(p) for p in paths if os.path.exists(p))
    kept: list[str] = []
    for path in existing:  # sorted: a folder comes before what is under it
        if not kept or not (path == kept[-1] or path.startswith(kept[-1].rstrip("/") + "/")):
            kept.append(path)
    return kept


def _landlock(read_only: list[str], read_write: list[str], *, deny_tcp: bool) -> int:
    """Restrict this process and its future children to these paths (and TCP if asked); returns the ABI."""
    abi = _landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "the kernel has no Landlock")
    fs = _FS_ABI1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    fs |= _FS_IOCTL_DEV if abi >= 5 else 0
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    words = (fs, net, scoped)[: 1 if abi < 4 else 2 if abi < 6 else 3]
    attr = (ctypes.c_uint64 * len(words))(*words)
    ruleset = _check(
        _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0),
        "landlock_create_ruleset",
    )
    try:
        for paths, access in ((read_only, _FS_READ), (read_write, fs)):
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    allowed = access if os.path.isdir(path) else access & _FS_FILE_RIGHTS
                    rule = (ctypes.c_uint8 * 12)()  # struct landlock_path_beneath_attr is packed
                    ctypes.c_uint64.from_buffer(rule).value = allowed & fs
                    ctypes.c_int32.from_buffer(rule, 8).value = fd
                    _check(
                        _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0),
                        f"landlock_add_rule({path})",
                    )
                finally:
                    os.close(fd)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _in_cgroup(path: str) -> bool:
    name = "/" + os.path.basename(path)
    with open("/proc/self/cgroup") as membership:
        return any(line.rstrip("\n").endswith(name) for line in membership)


def _lower(limit: int, value: int) -> None:
    """Set both limits of ``limit`` to ``value``, or keep a lower hard limit the process already has."""
    _, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(limit, (value, value))


def enter(setup: dict[str, Any]) -> list[str]:
    """Apply the layers of ``setup`` to this worker (after its imports); returns the active ones.

    Every layer the parent asked for is checked from here; one that did not
    take raises OSError, so that no layer is ever claimed without being there.
    """
    layers = []
    if setup["network_namespace"] is not None:
        if _network_namespace() == setup["network_namespace"]:
            raise OSError(errno.EPERM, "the worker is still in its parent's network namespace")
        layers.append(
            "network namespace"
            if setup["network_flags"] == _CLONE_NEWNET
            else "network namespace (in a user namespace)"
        )
    if setup["cgroup"] is not None:
        if not _in_cgroup(setup["cgroup"]):
            raise OSError(errno.EPERM, f"the worker is not in its pids cgroup {setup['cgroup']}")
        layers.append("pids cgroup")
    _lower(resource.RLIMIT_NOFILE, setup["open_files"])
    _lower(resource.RLIMIT_FSIZE, setup["file_bytes"])
    _lower(resource.RLIMIT_CORE, 0)
    # RLIMIT_NPROC counts every process of the real uid: it is set only with a uid of the worker's own
    if setup["uid"] is not None:
        _lower(resource.RLIMIT_NPROC, setup["processes"])
        _become(setup["uid"], setup["gid"])
        _die_with_parent(setup["parent"])  # a change of credentials disarmed it
        if os.getuid() != setup["uid"] or os.geteuid() != setup["uid"]:
            raise OSError(errno.EPERM, f"the worker did not become uid {setup['uid']}")
        layers.append(f"uid {setup['uid']}")
        os.umask(
            0o007
        )  # what one worker writes in a shared box, the pool's other workers may change
    signal.signal(signal.SIGXCPU, _out_of_cpu)
    layers.append("rlimits")
    if setup["landlock"]:
        readable = _readable_paths(setup["read_only"])
        abi = _landlock(readable, [setup["box"]], deny_tcp=setup["deny_tcp"])
        layers.insert(-1, f"landlock ABI {abi}")
    return layers


_allowance: float | None = None  # the CPU seconds of the job running now (None: between jobs)


def _out_of_cpu(signum: int, frame: object) -> None:
    if _allowance is not None:
        raise CpuTimeExceeded(
            f"the job used up its {_allowance:g} s of CPU time (Sandbox.cpu_seconds)"
        )


@contextlib.contextmanager
def cpu_allowance(seconds: float) -> Iterator[None]:
    """Let the code in the block use ``seconds`` more CPU time; past it :class:`CpuTimeExceeded` is raised in it."""
    global _allowance
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    _allowance = seconds
    try:
        yield
    finally:
        _allowance = None
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
