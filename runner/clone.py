"""One clone(2) with the namespace flags, straight from the zygote: the job is born PID 1 of its
new user/PID/mount/network/IPC/UTS/cgroup namespaces, and the zygote reaps it.

The two-fork way (fork a supervisor, which unshares and forks the job) copies the zygote's page
tables twice per job and frees them twice. `os.fork` cannot take namespace flags, so this calls
the clone system call itself, with the GIL held as `os.fork` holds it, wrapped in CPython's own
fork hooks (`PyOS_BeforeFork`, `PyOS_AfterFork_Child`/`_Parent`: the import lock, the thread
states, `os.register_at_fork` handlers).

What glibc's `fork()` does beyond the system call, and a raw clone does not:
- it records the child's thread id in the thread's descriptor (`pthread_self()->tid`), by
  passing that field to the kernel as CLONE_CHILD_SETTID. A raw clone would leave the zygote's
  id there (wrong in the child: used by recursive and PI mutexes, `pthread_getaffinity_np`...).
  `usable()` finds the field (the only word of the descriptor equal to the thread id, and again
  after a real fork) and passes it the same way; without it, there is no one-clone.
- it runs the C `pthread_atfork` handlers and resets locks of other threads. The zygote is
  single-threaded when it clones (torch runs one thread and no pool there), so the locks are
  free, and the handlers torch registers only matter for thread pools the zygote never starts.
- it re-registers the robust-mutex list of the thread (robust mutexes are not used here).

Only x86-64 (the system call's argument order and number); elsewhere, and wherever the checks in
`usable()` fail, the zygote keeps the two-fork way.
"""
from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import threading

SYS_CLONE = 56  # x86-64
CLONE_CHILD_SETTID = 0x01000000

_libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across the call, as in os.fork
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_pthread_self = ctypes.CDLL(None).pthread_self
_pthread_self.restype = ctypes.c_void_p
_before = ctypes.pythonapi.PyOS_BeforeFork
_after_child = ctypes.pythonapi.PyOS_AfterFork_Child
_after_parent = ctypes.pythonapi.PyOS_AfterFork_Parent

_tid_addr: int | None = None
_checked = False


def _find_tid_field() -> int | None:
    """The address of this thread's id in glibc's thread descriptor, or None."""
    base = _pthread_self()
    if not base:
        return None
    me = threading.get_native_id()
    # the descriptor is well over 1 KiB; its tid field sits in the first KiB (0x2d0 on glibc 2.2x-2.4x)
    seen = [off for off in range(0, 1024, 4) if ctypes.c_int.from_address(base + off).value == me]
    if not seen:
        return None
    r, w = os.pipe()
    pid = os.fork()  # glibc's fork writes the child's id into the field: keep the offsets that changed with it
    if pid == 0:
        try:
            child = threading.get_native_id()
            still = [off for off in seen if ctypes.c_int.from_address(base + off).value == child]
            os.write(w, json.dumps(still).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        offsets = json.loads(data)
    except ValueError:
        return None
    return base + offsets[0] if len(offsets) == 1 else None


def clone(flags: int) -> int:
    """clone(2) with `flags` (namespace flags) and SIGCHLD to the parent; 0 in the child, its
    pid in the parent. Only after `usable()` said yes."""
    assert _tid_addr is not None
    _before()
    pid = _syscall(SYS_CLONE, flags | signal.SIGCHLD | CLONE_CHILD_SETTID, None, None, _tid_addr, None)
    if pid == 0:
        _after_child()
        return 0
    err = ctypes.get_errno()
    _after_parent()
    if pid < 0:
        raise OSError(err, f"clone: {os.strerror(err)}")
    return int(pid)


def usable(flags: int, child_setup: object = None) -> bool:
    """Whether one clone works here: x86-64, glibc's tid field found, and a trial clone with
    `flags` whose child sees itself as PID 1 with its own id in the field (and, when given,
    runs `child_setup()` without raising). Checked once, in the zygote, before any job."""
    global _tid_addr, _checked
    if _checked:
        return _tid_addr is not None
    _checked = True
    if platform.machine() != "x86_64" or threading.active_count() != 1:
        return False
    try:
        _tid_addr = _find_tid_field()
        if _tid_addr is None:
            return False
        pid = clone(flags)
        if pid == 0:
            ok = False
            try:
                ok = (os.getpid() == 1 and threading.get_native_id() == 1
                      and ctypes.c_int.from_address(_tid_addr).value == 1)
                if ok and callable(child_setup):
                    child_setup()
            except BaseException:  # noqa: BLE001 - any failure: no one-clone
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            _tid_addr = None
    except OSError:
        _tid_addr = None
    return _tid_addr is not None
