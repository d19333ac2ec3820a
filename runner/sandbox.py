"""The jail: everything about isolation lives here, in two layers.

1. The *zygote jail* is a bubblewrap sandbox around the warm process that imported torch:
   a read-only view of the interpreter and the `runner` package only (no config, no database,
   no token: the environment is cleared), no network, its own IPC/UTS namespaces.
2. Each *job* is forked from the zygote and enters fresh user, PID, mount, network and IPC
   namespaces of its own, mounts a private /proc, a size-limited scratch tmpfs and /dev/shm,
   sets rlimits, drops every capability, sets no_new_privs and installs a seccomp filter.
   The job's first process is PID 1 of its namespace, so killing it kills everything it
   spawned, `setsid` or not; jobs cannot see, signal or reach one another.

bubblewrap cannot fork a warm interpreter, so layer 2 uses the same kernel primitives directly.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import resource
import shutil
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NS_FLAGS = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET

MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SECCOMP_MODE_FILTER = 2

SANDBOX_UID = 65534
SCRATCH = "/scratch"  # each job's private tmpfs; also mounted at /tmp where possible  # when the runner is root, jobs run as host uid `nobody`

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class SandboxError(RuntimeError):
    pass


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)}")


def prctl(option: int, arg2: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg2), 0, 0, 0), f"prctl({option})")


def die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# ---------------------------------------------------------------- the zygote jail (bubblewrap)

@dataclass
class JailPlan:
    """How the zygote is started, and what isolation the job layer will add."""

    argv_prefix: list[str]
    features: list[str] = field(default_factory=list)
    sandboxed: bool = True
    drop_to_uid: int | None = None
    tmp_is_scratch: bool = True


def _interpreter_paths() -> list[str]:
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(sys.exec_prefix), os.path.realpath(sys.base_exec_prefix),
             os.path.dirname(os.path.realpath(sys.executable))}
    for p in sys.path:
        if p and os.path.isdir(p) and "site-packages" in p:
            paths.add(os.path.realpath(p))
    # keep only the outermost directories
    out: list[str] = []
    for p in sorted(paths, key=len):
        if p in ("/", "/usr") or any(p == q or p.startswith(q + "/") for q in out):
            continue
        out.append(p)
    return out


def _dir_chain(path: str) -> list[str]:
    """bwrap creates missing parents with mode 0700; create them 0755 so a dropped uid can pass."""
    args: list[str] = []
    parts = Path(path).parts[1:-1]
    cur = ""
    for part in parts:
        cur += "/" + part
        if cur in ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"):
            continue
        args += ["--perms", "0755", "--dir", cur]
    return args


JAIL_HOSTNAME = "sandbox"
JAIL_ETC = {
    "passwd": "root:x:0:0:root:/scratch:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": f"127.0.0.1\tlocalhost {JAIL_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": JAIL_HOSTNAME + "\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n",
}
_jail_etc_dir: str | None = None


def jail_etc() -> str:
    """The jail's own /etc files, written once per runner process into a private directory."""
    global _jail_etc_dir
    if _jail_etc_dir is None or not os.path.isdir(_jail_etc_dir):
        import atexit
        import tempfile

        path = tempfile.mkdtemp(prefix="quiz-jail-etc-")
        os.chmod(path, 0o755)
        for name, text in JAIL_ETC.items():
            with open(os.path.join(path, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(path, name), 0o644)
        atexit.register(shutil.rmtree, path, True)
        _jail_etc_dir = path
    return _jail_etc_dir


def bwrap_argv(package_root: str, *, gpu: bool) -> JailPlan:
    """The bubblewrap command line for the zygote, or raise SandboxError if bwrap is unusable."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise SandboxError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    root = os.geteuid() == 0
    argv = [bwrap, "--die-with-parent", "--new-session", "--clearenv",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", JAIL_HOSTNAME]
    features = ["bwrap", "netns", "ipcns", "mountns", "ro-root", "clearenv"]
    if root:
        # Real root: keep only what is needed to drop to `nobody`, so RLIMIT_NPROC applies.
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        drop = SANDBOX_UID
    else:
        argv += ["--unshare-user"]
        features.append("userns")
        drop = None
    for d in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.exists(d):
            argv += ["--ro-bind", d, d]
    # A minimal /etc made for the jail, readable by the dropped uid: the loader's cache and the
    # toolchain's alternatives from the host, and our own users, hosts and name service switch
    # (the host's would tell a job who runs the service and which machines it knows).
    argv += ["--perms", "0755", "--dir", "/etc"]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives"):
        if os.path.exists(f):
            argv += ["--ro-bind", f, f]
    etc = jail_etc()
    for name in sorted(os.listdir(etc)):
        argv += ["--ro-bind", os.path.join(etc, name), "/etc/" + name]
    pkg = os.path.join(package_root, "runner")
    binds = _interpreter_paths() + [pkg]
    # Jobs get /scratch, and /tmp too unless the code itself lives under /tmp (a checkout in
    # /tmp): a tmpfs there would hide the interpreter, so /tmp then stays read-only.
    tmp_free = not any(b == "/tmp" or b.startswith("/tmp/") for b in binds)
    if tmp_free:
        argv += ["--tmpfs", "/tmp"]
    for p in binds:
        argv += _dir_chain(p) + ["--ro-bind", p, p]
    # Host /proc for the zygote (trusted); each job mounts a private one on top.
    # /scratch is a small tmpfs already in the zygote (torch._dynamo makes its cache dir on import);
    # every job mounts a fresh one of its own over it.
    argv += ["--perms", "1777", "--size", str(64 << 20), "--tmpfs", SCRATCH,
             "--bind", "/proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm"]
    if gpu:
        for dev in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(dev), str(dev)]
        argv += ["--ro-bind-try", "/sys", "/sys"]
        features.append("gpu")
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": package_root, "HOME": SCRATCH, "TMPDIR": SCRATCH, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": SCRATCH + "/inductor",
           "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return JailPlan(argv_prefix=argv + ["--"], features=features, drop_to_uid=drop, tmp_is_scratch=tmp_free)


def probe_jail(plan: JailPlan) -> None:
    """Start a trivial process in the jail, with the per-job namespaces, to prove both layers work."""
    code = ("import os,sys; sys.path.insert(0, os.environ['PYTHONPATH']);"
            "from runner import sandbox as s;"
            f"s.drop_privileges({plan.drop_to_uid!r});"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    try:\n"
            "        s.enter_job_namespaces(); c = os.fork()\n"
            "        if c == 0:\n"
            f"            s.setup_job_mounts(1, {plan.tmp_is_scratch!r}); s.lock_down(); os._exit(0)\n"
            "        os._exit(os.waitstatus_to_exitcode(os.waitpid(c, 0)[1]))\n"
            "    except BaseException as e:\n"
            "        print(e, file=sys.stderr); os._exit(3)\n"
            "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))")
    try:
        proc = subprocess.run(plan.argv_prefix + [sys.executable, "-c", code],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxError(f"bubblewrap failed to start: {e}") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SandboxError(f"the sandbox does not work here (exit {proc.returncode}): {detail[0]}")


# ---------------------------------------------------------------- inside the zygote

def drop_privileges(uid: int | None) -> None:
    """Root zygote: become `nobody` so rlimits on processes count; no way back (no_new_privs)."""
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # Changing uid made us non-dumpable, which would lock us out of our own
        # /proc/self/uid_map; jobs turn it off again in lock_down().
        prctl(PR_SET_DUMPABLE, 1)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def enter_job_namespaces() -> None:
    """In the forked job supervisor: new user/pid/mount/net/ipc/uts/cgroup namespaces."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(NS_FLAGS), "unshare")
    become_job_root(uid, gid)


def become_job_root(uid: int, gid: int) -> None:
    """In a new user namespace (after unshare, or in a child cloned into it): map its root to
    `uid`/`gid`, the ids outside (no other id exists inside, and setgroups is denied), and bring
    up the loopback of its new network namespace."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"0 {gid} 1")
    loopback_up()


SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring `lo` up in the job's fresh network namespace (it starts down), while we still hold
    CAP_NET_ADMIN there: multi-rank jobs (gloo, TCPStore) talk over 127.0.0.1. The namespace is
    the job's own, so it reaches only its own loopback, never the runner's or another job's."""
    import fcntl
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _mount(src: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(_libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None),
           f"mount {target}")


def setup_job_mounts(scratch_mb: int, tmp_too: bool, shm_mb: int = 64) -> str:
    """In the job's PID 1: private /proc, scratch (and /tmp) and /dev/shm. Returns the work dir.

    /dev/shm has its own size: DataLoader workers hand batches over through it."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    _mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=1777,nr_inodes=4096")
    if tmp_too:
        _mount(SCRATCH, "/tmp", None, MS_BIND, None)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               f"size={shm_mb}m,mode=1777,nr_inodes=4096")  # inodes are unmetered kernel memory
    work = SCRATCH + "/work"
    os.mkdir(work, 0o777)
    return work


MS_REMOUNT = 0x20


def resize_job_mounts(scratch_mb: int, shm_mb: int) -> None:
    """In a pooled job's PID 1, once its payload says its sizes: the scratch tmpfs (and /tmp, the
    same mount) and /dev/shm made ahead with the default sizes get the job's own."""
    _mount("tmpfs", SCRATCH, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,nr_inodes=4096")
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", None, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               f"size={shm_mb}m,nr_inodes=4096")


def set_limits(*, cpu_s: int, memory_bytes: int | None, processes: int, open_files: int,
               file_size_bytes: int) -> None:
    def lim(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    # CPU: the soft limit sends SIGXCPU (a timeout, whatever the outside accounting saw); the hard
    # limit one second later kills a process that ignores it. With both equal the kernel sends
    # SIGKILL at once, and a kill whose CPU the job's cgroup had not counted yet (time spent before
    # it was attached) read as a crash instead of a timeout.
    resource.setrlimit(resource.RLIMIT_CPU, (max(1, cpu_s), max(1, cpu_s) + 1))
    if memory_bytes is not None:
        lim(resource.RLIMIT_AS, memory_bytes)
    lim(resource.RLIMIT_NPROC, processes)
    lim(resource.RLIMIT_NOFILE, open_files)
    lim(resource.RLIMIT_FSIZE, file_size_bytes)
    lim(resource.RLIMIT_CORE, 0)
    lim(resource.RLIMIT_MEMLOCK, 0)
    lim(resource.RLIMIT_MSGQUEUE, 0)
    lim(resource.RLIMIT_RTPRIO, 0)  # no real-time scheduling, which would starve other jobs
    lim(resource.RLIMIT_NICE, 0)  # no raising its priority above the default


def lock_down(*, allow_exec: bool = False) -> None:
    """Last step before untrusted code: no capabilities, no new privileges, seccomp.

    `allow_exec` lets the job execve (a job that runs a compiler, as torch.compile's inductor
    does on CPU); otherwise execve/execveat fail with EPERM. An exec'd process is dumpable again
    (the kernel resets the flag on exec); see runner/README.md for what that does and does not
    expose."""
    prctl(PR_SET_DUMPABLE, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("<Ii", 0x20080522, 0)
    data = bytes(24)
    hbuf, dbuf = ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)
    _check(_libc.capset(hbuf, dbuf), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    install_seccomp(allow_exec=allow_exec)


# ---------------------------------------------------------------- seccomp

# x86_64 syscall numbers that untrusted code has no business calling.
DENIED_SYSCALLS_X86_64 = {
    "ptrace": 101, "syslog": 103, "personality": 135, "vhangup": 153, "pivot_root": 155,
    "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165,
    "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_getfd": 438, "mount_setattr": 442,
    # the LDT: a kernel attack surface no Python or torch code needs
    "modify_ldt": 154,
    # file watches see every open and read of the shared read-only files (/usr, the interpreter):
    # two concurrent jobs could signal each other through them
    "inotify_init": 253, "inotify_add_watch": 254, "inotify_rm_watch": 255, "inotify_init1": 294,
    "fanotify_init": 300, "fanotify_mark": 301,
    # flushing every dirty page of the host stalls its I/O (and jobs write only to tmpfs)
    "sync": 162, "syncfs": 306,
    # SysV shared memory and message queues hold memory no process maps: no rlimit, no RSS
    "shmget": 29, "msgget": 68,
}
# Refused as if the kernel lacked them, so libraries fall back (asmjit, in torch, then uses
# shm_open on the size-limited /dev/shm): memfd pages are memory no rlimit or RSS poll meters.
# memfd_secret pages are even taken out of the kernel's direct map.
ENOSYS_SYSCALLS_X86_64 = {"memfd_create": 319, "memfd_secret": 447}
# Refused unless a job opts in (`allow_exec`): an exec'd process is dumpable again.
EXEC_SYSCALLS_X86_64 = {"execve": 59, "execveat": 322}
SYS_CLONE, SYS_CLONE3, SYS_SOCKET, SYS_FCNTL = 56, 435, 41, 72
F_NOTIFY = 1026  # dnotify: like inotify, it reports reads of files in a shared directory
AF_VSOCK = 40  # VM <-> hypervisor sockets: no network namespace confines them
AUDIT_ARCH_X86_64 = 0xC000003E
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 1, 38


def _ret_errno(err: int) -> int:
    return 0x00050000 | err


def seccomp_program(*, allow_exec: bool = False) -> bytes:
    """A classic-BPF filter: deny the lists above (execve/execveat unless `allow_exec`),
    namespace flags on clone, clone3, fcntl(F_NOTIFY) and AF_VSOCK sockets."""
    ins: list[tuple[int, int, int, int]] = []
    LD_W_ABS, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06
    ins.append((LD_W_ABS, 0, 0, 4))                     # arch
    ins.append((JEQ, 1, 0, AUDIT_ARCH_X86_64))
    ins.append((RET, 0, 0, _RET_KILL))
    ins.append((LD_W_ABS, 0, 0, 0))                     # syscall nr
    ins.append((JGE, 0, 1, 0x40000000))                 # x32 ABI
    ins.append((RET, 0, 0, _ret_errno(EPERM)))
    ins.append((JEQ, 0, 1, SYS_CLONE3))                 # glibc falls back to clone on ENOSYS
    ins.append((RET, 0, 0, _ret_errno(ENOSYS)))
    denied = set(DENIED_SYSCALLS_X86_64.values())
    if not allow_exec:
        denied |= set(EXEC_SYSCALLS_X86_64.values())
    for nr in sorted(denied):
        ins.append((JEQ, 0, 1, nr))
        ins.append((RET, 0, 0, _ret_errno(EPERM)))
    for nr in sorted(ENOSYS_SYSCALLS_X86_64.values()):
        ins.append((JEQ, 0, 1, nr))
        ins.append((RET, 0, 0, _ret_errno(ENOSYS)))
    ins.append((JEQ, 0, 4, SYS_FCNTL))
    ins.append((LD_W_ABS, 0, 0, 24))                    # low half of the command
    ins.append((JEQ, 1, 0, F_NOTIFY))
    ins.append((RET, 0, 0, _RET_ALLOW))
    ins.append((RET, 0, 0, _ret_errno(EPERM)))
    ins.append((JEQ, 0, 4, SYS_SOCKET))
    ins.append((LD_W_ABS, 0, 0, 16))                    # address family
    ins.append((JEQ, 1, 0, AF_VSOCK))
    ins.append((RET, 0, 0, _RET_ALLOW))
    ins.append((RET, 0, 0, _ret_errno(EPERM)))
    ins.append((JEQ, 0, 3, SYS_CLONE))
    ins.append((LD_W_ABS, 0, 0, 16))                    # low half of clone flags
    ins.append((JSET, 0, 1, NS_FLAGS))
    ins.append((RET, 0, 0, _ret_errno(EPERM)))
    ins.append((RET, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Built once (in the zygote, by `prebuild_seccomp`) and inherited by every job: a job only makes
# the prctl call.
_PROGRAMS: dict[bool, tuple[ctypes.Array[ctypes.c_char], _SockFprog]] = {}


def _fprog(allow_exec: bool) -> _SockFprog:
    if allow_exec not in _PROGRAMS:
        prog = seccomp_program(allow_exec=allow_exec)
        buf = ctypes.create_string_buffer(prog, len(prog))
        _PROGRAMS[allow_exec] = (buf, _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p)))
    return _PROGRAMS[allow_exec][1]


def prebuild_seccomp() -> None:
    """Build both filters now, so a job forked later finds them ready."""
    if platform.machine() == "x86_64":
        _fprog(False)
        _fprog(True)


def install_seccomp(*, allow_exec: bool = False) -> None:
    if platform.machine() != "x86_64":
        return  # the filter is written for x86_64 syscall numbers; other arches rely on the rest
    fprog = _fprog(allow_exec)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def seccomp_supported() -> bool:
    return platform.machine() == "x86_64"
