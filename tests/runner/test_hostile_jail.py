"""The jail's finer edges: CPU time of processes the kernel reaps on its own, syscalls that give
concurrent jobs a channel or the host a stall, real-time priorities, exec.

Like test_hostile.py, each attack goes through the HTTP runner and is followed by grading a
correct answer, which must still pass (`grade_then_recover`).
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from runner import sandbox
from runner.client import RunnerClient
from runner.embedded import PACKAGE_ROOT
from tests.runner.jobs import hostile
from tests.runner.test_hostile import grade_then_recover

x86_64_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="the seccomp filter is x86-64 only")

ONE_CASE = "def make_cases():\n    return [{'args': (torch.randn(3, 4),), 'name': 'one'}]\n"

# (name, x86-64 number, arguments that are otherwise valid, the errno the jail answers)
REFUSED = [
    ("modify_ldt", 154, "0, buf, 16", "EPERM"),
    ("inotify_init", 253, "", "EPERM"),
    ("inotify_init1", 294, "0", "EPERM"),
    ("inotify_add_watch", 254, "-1, b'/usr', 1", "EPERM"),  # EBADF without the filter
    ("inotify_rm_watch", 255, "-1, 1", "EPERM"),
    ("fanotify_init", 300, "0x200, 0", "EPERM"),  # FAN_REPORT_FID: allowed unprivileged since 5.13
    ("fanotify_mark", 301, "-1, 1, 1, -100, b'/usr'", "EPERM"),
    ("syncfs", 306, "-1", "EPERM"),
    ("sync", 162, "", "EPERM"),
    ("memfd_secret", 447, "0", "ENOSYS"),
    ("execve", 59, "b'/bin/true', argv, None", "EPERM"),
    ("execveat", 322, "-100, b'/bin/true', argv, None, 0", "EPERM"),
]


def _syscall_body(name: str, nr: int, args: str, err: str) -> str:
    return (
        "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\nbuf = ctypes.create_string_buffer(64)\n"
        "argv = (ctypes.c_char_p * 2)(b'true', None)\n"
        f"ret = libc.syscall(ctypes.c_long({nr}){', ' if args else ''}{args})\n"
        f"assert ret == -1, '{name} returned %d' % ret\n"
        f"assert ctypes.get_errno() == errno.{err}, '{name}: %s' % errno.errorcode.get(ctypes.get_errno())\n")


async def test_cpu_burners_the_kernel_reaps_still_share_one_cpu_limit(runner_client: RunnerClient) -> None:
    """Children of a parent that ignores SIGCHLD are reaped by the kernel and never reach its
    cutime: their CPU time must count all the same. One at a time, so the processes alive at any
    moment never hold more than half the limit. Needs the engine to read the job's cpuacct group
    (or runner.usage.TreeUsage where there is none)."""
    body = ("signal.signal(signal.SIGCHLD, signal.SIG_IGN)\nfor _ in range(6):\n    pid = os.fork()\n"
            "    if pid == 0:\n        t = time.process_time()\n        while time.process_time() - t < 0.5:\n"
            "            pass\n        os._exit(0)\n    try:\n        os.waitpid(pid, 0)  # returns once the kernel reaped it\n"
            "    except ChildProcessError:\n        pass")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE, limits={"cpu_s": 1, "wall_s": 10}))
    assert r["verdict"] == "timeout", r
    assert "CPU" in r["message"], r


@x86_64_only
@pytest.mark.parametrize("name,nr,args,err", REFUSED, ids=[r[0] for r in REFUSED])
async def test_refused_syscalls(runner_client: RunnerClient, name: str, nr: int, args: str, err: str) -> None:
    r = await grade_then_recover(runner_client, hostile(_syscall_body(name, nr, args, err), setup=ONE_CASE))
    assert r["verdict"] == "passed", r


@x86_64_only
async def test_no_file_watches_between_jobs(runner_client: RunnerClient) -> None:
    """inotify and dnotify report reads of the shared read-only files: a channel between two
    concurrent jobs. Other fcntl commands still work."""
    body = ("import fcntl, errno\nfd = os.open('/usr/lib', os.O_RDONLY)\n"
            "try:\n    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)\n"
            "except PermissionError:\n    pass\nelse:\n    raise RuntimeError('dnotify worked')\n"
            "assert fcntl.fcntl(fd, fcntl.F_GETFD) >= 0\n"
            "fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)\n"
            "import ctypes\nassert ctypes.CDLL(None).inotify_init1(0) == -1, 'inotify worked'")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r


async def test_no_real_time_priority_and_no_higher_priority(runner_client: RunnerClient) -> None:
    body = ("import resource\n"
            "assert resource.getrlimit(resource.RLIMIT_RTPRIO) == (0, 0), resource.getrlimit(resource.RLIMIT_RTPRIO)\n"
            "assert resource.getrlimit(resource.RLIMIT_NICE) == (0, 0), resource.getrlimit(resource.RLIMIT_NICE)\n"
            "for raise_it in (lambda: resource.setrlimit(resource.RLIMIT_RTPRIO, (99, 99)),\n"
            "                 lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)),\n"
            "                 lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1)),\n"
            "                 lambda: os.setpriority(os.PRIO_PROCESS, 0, -5)):\n"
            "    try:\n        raise_it()\n    except (OSError, ValueError):\n        continue\n"
            "    raise RuntimeError('raised its priority')\n"
            "assert os.sched_getscheduler(0) == os.SCHED_OTHER")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r


@x86_64_only
async def test_exec_is_refused_by_default(runner_client: RunnerClient) -> None:
    """An exec'd process is dumpable again; no job needs exec unless its item says so."""
    body = ("import subprocess\nfor run in (lambda: subprocess.run(['/bin/true']),\n"
            "            lambda: subprocess.run([sys.executable, '-c', 'pass']),\n"
            "            lambda: os.posix_spawn('/bin/true', ['true'], {})):\n"
            "    try:\n        run()\n    except PermissionError:\n        continue\n"
            "    raise RuntimeError('exec worked')\n"
            "assert os.system('true') != 0, 'os.system ran a shell'\n"
            "try:\n    os.execv('/bin/true', ['true'])\nexcept PermissionError:\n    pass")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r


@x86_64_only
async def test_exec_where_the_job_allows_it(runner_client: RunnerClient) -> None:
    """`allow_exec: true` (a trusted field of the job, for items that compile, as torch.compile
    on CPU does): exec works and the exec'd process is still in the jail. Needs the engine to pass
    the job's `allow_exec` on to the zygote's payload."""
    body = ("import subprocess\nassert subprocess.run(['/bin/echo', 'hi'], capture_output=True).stdout == b'hi\\n'\n"
            "check = 'import ctypes; l = ctypes.CDLL(None); assert l.unshare(0x10000000) == -1 and l.ptrace(0, 0, 0, 0) == -1'\n"
            "subprocess.run([sys.executable, '-c', check], check=True)")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE, allow_exec=True))
    assert r["verdict"] == "passed", r


# ---------------------------------------------------------------- the filter itself, with a control

_FILTER_CHECK = """
import ctypes, errno, json, os, sys
from runner import sandbox
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(64)
argv = (ctypes.c_char_p * 2)(b'true', None)
calls = json.loads(sys.argv[1])
def run():
    out = {}
    for name, nr, args in calls:
        if name in ('execve', 'execveat') or (name == 'sync' and not filtered):
            if name == 'sync':
                continue
            pid = os.fork()  # a successful exec must not replace this process
            if pid == 0:
                libc.syscall(ctypes.c_long(nr), *eval('(' + args + ',)'))
                os._exit(100 + ctypes.get_errno())
            out[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            out[name] = 0 if out[name] == 0 else out[name] - 100
            continue
        ret = libc.syscall(ctypes.c_long(nr), *(eval('(' + args + ',)') if args else ()))
        out[name] = 0 if ret >= 0 else ctypes.get_errno()
    return out
filtered = False
before = run()
sandbox.prctl(sandbox.PR_SET_NO_NEW_PRIVS, 1)
sandbox.install_seccomp(allow_exec=sys.argv[2] == '1')
filtered = True
print(json.dumps({'before': before, 'after': run()}))
"""


def _filter_check(allow_exec: bool) -> dict[str, dict[str, int]]:
    calls = [(name, nr, args) for name, nr, args, _ in REFUSED]
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_FILTER_CHECK), json.dumps(calls),
                           "1" if allow_exec else "0"], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@x86_64_only
def test_the_filter_is_what_refuses_them() -> None:
    """Without the filter the same calls succeed or fail otherwise; with it they get its errno."""
    import errno
    seen = _filter_check(allow_exec=False)
    for name, _nr, _args, err in REFUSED:
        assert seen["after"][name] == getattr(errno, err), (name, seen)
        if name not in ("sync", "memfd_secret"):  # never run unfiltered / may be off in the kernel
            assert seen["before"][name] != seen["after"][name], (name, seen)
    allowed = _filter_check(allow_exec=True)["after"]
    assert allowed["execve"] == 0 and allowed["execveat"] == 0, allowed
    assert allowed["inotify_init"] == errno.EPERM


def test_the_filter_has_the_right_numbers() -> None:
    """Every name in the filter's tables against the kernel's x86-64 numbers: the installed
    headers where there are some, else the numbers this file lists (from syscall_64.tbl)."""
    import re
    from pathlib import Path
    table = {**sandbox.DENIED_SYSCALLS_X86_64, **sandbox.ENOSYS_SYSCALLS_X86_64, **sandbox.EXEC_SYSCALLS_X86_64}
    for name, nr, _args, _err in REFUSED:
        assert table[name] == nr, name
    headers = [p for p in (Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), Path("/usr/include/asm/unistd_64.h"))
               if p.exists()]
    if headers:
        kernel = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+) (\d+)", headers[0].read_text())}
        wrong = {n: (nr, kernel.get(n)) for n, nr in table.items() if kernel.get(n) != nr}
        assert not wrong, wrong
        assert (sandbox.SYS_CLONE, sandbox.SYS_CLONE3, sandbox.SYS_SOCKET, sandbox.SYS_FCNTL) == (
            kernel["clone"], kernel["clone3"], kernel["socket"], kernel["fcntl"])
    assert sandbox.seccomp_program(allow_exec=True) != sandbox.seccomp_program()
