"""Submitted code is hostile: each attack gets the right verdict and the runner stays healthy.

Every test ends by grading a correct answer, which must still pass.
"""
from __future__ import annotations

import asyncio
import os

import pytest

from runner.client import RunnerClient
from tests.runner.jobs import CORRECT, hostile, job
from tests.runner.jobs import metric as _metric

pytestmark = pytest.mark.asyncio




async def grade_then_recover(client: RunnerClient, j: dict) -> dict:
    r = await client.grade(j)
    after = await client.grade(job(CORRECT))
    assert after["verdict"] == "passed", f"runner unhealthy after attack: {after}"
    return r


async def test_infinite_loop_times_out(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("while True:\n    pass", limits={"wall_s": 2, "cpu_s": 1}))
    assert r["verdict"] == "timeout"


async def test_ignoring_the_cpu_limit_signal_still_times_out(runner_client: RunnerClient) -> None:
    """The CPU limit's SIGXCPU can be ignored; the hard limit a second later still ends it, as a
    timeout (never a crash: the player's verdict must name the limit)."""
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    r = await grade_then_recover(runner_client, hostile(code, limits={"wall_s": 5, "cpu_s": 1}))
    assert r["verdict"] == "timeout", r


async def test_sleeping_forever_hits_the_wall_clock(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("time.sleep(1e9)", limits={"wall_s": 1.5, "cpu_s": 5}))
    assert r["verdict"] == "timeout"
    assert r["message"] == "time limit exceeded: all cases together ran past 1.5 s; it was running case 1 of 4 (small)"


async def test_fork_bomb_is_contained(runner_client: RunnerClient) -> None:
    body = "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    r = await grade_then_recover(runner_client, hostile(body, limits={"wall_s": 2}))
    # capped at the process limit, the children spin (wall clock) or, each copying pages of
    # the warm interpreter on write, exhaust the job's memory first: both end the job
    assert r["verdict"] in ("timeout", "memory")


async def test_thread_bomb_is_refused_by_the_process_limit(runner_client: RunnerClient) -> None:
    body = ("ts = []\nfor _ in range(10000):\n    t = threading.Thread(target=time.sleep, args=(100,))\n"
            "    t.start()\n    ts.append(t)")
    r = await grade_then_recover(runner_client, hostile(body, limits={"wall_s": 3}))
    assert r["verdict"] == "error"
    assert "can't start new thread" in r["error"]["message"] or r["error"]["type"] == "RuntimeError"


async def test_python_memory_bomb(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("a = [bytearray(1 << 20) for _ in range(100000)]",
                                                        limits={"memory_mb": 256}))
    assert r["verdict"] == "memory"


async def test_torch_memory_bomb(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("y = torch.ones(1 << 40)", limits={"memory_mb": 256}))
    assert r["verdict"] == "memory"


async def test_memory_bomb_in_child_processes_is_caught_by_the_watchdog(runner_client: RunnerClient) -> None:
    body = ("for _ in range(8):\n    if os.fork() == 0:\n        b = bytearray(200 << 20)\n"
            "        b[::4096] = b'x' * len(b[::4096])\n        time.sleep(30)\ntime.sleep(30)")
    r = await grade_then_recover(runner_client, hostile(body, limits={"memory_mb": 512, "wall_s": 8}))
    assert r["verdict"] == "memory"


async def test_stdout_flood_is_stopped(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("while True:\n    print('spam' * 1000)"))
    assert r["verdict"] == "output_limit"
    assert r["output_truncated"] is True
    assert len(r["stdout"]) < 8192


async def test_writing_outside_scratch_is_refused(runner_client: RunnerClient) -> None:
    body = ("for p in ['/etc/pwned', '/usr/pwned', '/pwned', '/opt/pwned', '/var/pwned', '/work/pwned', '/dev/pwned', '/proc/pwned']:\n"
            "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        continue\n"
            "    raise RuntimeError('wrote ' + p)\nopen('scratch.txt', 'w').write('fine')")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "passed", r
    assert not os.path.exists("/pwned") and not os.path.exists("/etc/pwned")


async def test_filling_scratch_stops_at_its_size(runner_client: RunnerClient) -> None:
    body = "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))"
    r = await grade_then_recover(runner_client, hostile(body, limits={"scratch_mb": 8, "file_size_mb": 64}))
    assert r["verdict"] == "error"
    assert r["error"]["type"] == "OSError"
    assert "No space left" in r["error"]["message"]


async def test_scratch_is_private_and_wiped(runner_client: RunnerClient) -> None:
    write = hostile("open('/scratch/secret-from-job-a', 'w').write('a')")
    assert (await runner_client.grade(write))["verdict"] == "passed"
    read = hostile("assert not os.path.exists('/scratch/secret-from-job-a'), 'saw the previous job'")
    assert (await runner_client.grade(read))["verdict"] == "passed"


async def test_no_network_not_even_to_the_runner(runner_client: RunnerClient) -> None:
    host, port = runner_client.url.removeprefix("http://").split(":")
    body = (f"for addr in [('{host}', {port}), ('1.1.1.1', 53), ('127.0.0.1', 22)]:\n"
            "    s = socket.socket()\n    s.settimeout(1)\n    try:\n        s.connect(addr)\n"
            "    except OSError:\n        continue\n    raise RuntimeError('connected to %s' % (addr,))\n"
            "try:\n    socket.getaddrinfo('example.com', 80)\nexcept OSError:\n    pass\n"
            "else:\n    raise RuntimeError('DNS worked')")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "passed", r


async def test_cannot_read_the_runners_environment_or_token(runner_client: RunnerClient) -> None:
    token = runner_client.token
    body = ("seen = []\nfor p in ['/proc/1/environ', '/proc/self/environ']:\n"
            "    try:\n        seen.append(open(p, 'rb').read())\n    except OSError:\n        pass\n"
            "import glob\nfor p in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline'):\n"
            "    try:\n        seen.append(open(p, 'rb').read())\n    except OSError:\n        pass\n"
            "blob = b''.join(seen) + repr(dict(os.environ)).encode()\n"
            f"assert b'{token}' not in blob, 'token leaked'\n"
            "assert 'RUNNER_TOKEN' not in os.environ\n"
            "assert len([p for p in os.listdir('/proc') if p.isdigit()]) <= 3, os.listdir('/proc')\n"
            "for p in ['/work', '/root', os.path.expanduser('~')]:\n"
            "    assert not any(n.endswith(('.yaml', '.db', '.sqlite3')) for n in (os.listdir(p) if os.path.isdir(p) else [])), p")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "passed", r


async def test_killing_the_parent_hurts_nobody_else(runner_client: RunnerClient) -> None:
    body = "os.kill(os.getppid(), 9)\nos.kill(0, 9)\nos.killpg(0, 9)\nos.kill(-1, 9)\nos.kill(1, 9)"
    before = await _metric(runner_client, "runner_zygote_restarts_total")
    r = await grade_then_recover(runner_client, hostile(body))
    assert await _metric(runner_client, "runner_zygote_restarts_total") == before, "the warm worker was killed"
    # we are PID 1 of our own namespace: kill(-1) reaches no one else, kill(1) is ignored by init
    assert r["verdict"] in ("passed", "error"), r


def _processes_named(name: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if open(f"/proc/{pid}/comm").read().strip() == name:
                    found.append(pid)
            except OSError:
                continue
    return found


async def test_setsid_child_does_not_outlive_the_job(runner_client: RunnerClient) -> None:
    marker = "quizorphan"
    body = ("if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        import ctypes\n        ctypes.CDLL(None).prctl(15, b'" + marker + "', 0, 0, 0)\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        time.sleep(60)\n    os._exit(0)\n"
            "time.sleep(0.3)")
    j = hostile(body)
    during = asyncio.ensure_future(runner_client.grade(j))
    seen_alive = False
    for _ in range(100):
        await asyncio.sleep(0.05)
        seen_alive = seen_alive or bool(_processes_named(marker))
        if during.done():
            break
    r = await during
    assert r["verdict"] == "passed", r
    assert seen_alive, "the test's orphan never started, so it proves nothing"
    await asyncio.sleep(0.3)
    assert _processes_named(marker) == [], "a setsid'd grandchild outlived its job"
    assert (await runner_client.grade(job(CORRECT)))["verdict"] == "passed"


async def test_ignoring_sigterm_does_not_help(runner_client: RunnerClient) -> None:
    body = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(100)"
    r = await grade_then_recover(runner_client, hostile(body, limits={"wall_s": 1.5}))
    assert r["verdict"] == "timeout"


async def test_ctypes_segfault_is_an_error_not_a_runner_crash(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("import ctypes\nctypes.string_at(0)"))
    assert r["verdict"] == "error"
    assert "SIGSEGV" in r["message"]


async def test_deep_recursion(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, hostile("def f(n):\n    return f(n + 1)\nf(0)"))
    assert r["verdict"] == "error" and r["error"]["type"] == "RecursionError"
    body = "sys.setrecursionlimit(10**9)\ndef f(n):\n    return f(n + 1)\nf(0)"
    r = await grade_then_recover(runner_client, hostile(body, limits={"wall_s": 3, "memory_mb": 512}))
    # Python 3.11 recurses on the heap: it ends in a memory error, a crash or the clock
    assert r["verdict"] in ("error", "memory", "timeout")


async def test_exiting_early_with_status_zero_does_not_pass(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, job("import os\nos._exit(0)\n"))
    assert r["verdict"] == "error" and "exited" in r["message"]
    r = await grade_then_recover(runner_client, hostile("os._exit(0)"))
    assert r["verdict"] == "error"
    r = await grade_then_recover(runner_client, hostile("sys.exit(0)"))
    assert r["verdict"] == "error" and r["passed_cases"] == 0


async def test_forging_the_result_channel_does_not_pass(runner_client: RunnerClient) -> None:
    body = ("for fd in range(3, 64):\n    try:\n        os.write(fd, b'QZW1' + b'\\xff' * 64)\n"
            "    except OSError:\n        pass\nos._exit(0)")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "error"


@pytest.mark.parametrize("patch", [
    "torch.allclose = lambda *a, **k: True",
    "torch.equal = lambda *a, **k: True",
    "torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)",
    "import torch.testing\ntorch.testing.assert_close = lambda *a, **k: None",
])
async def test_monkeypatching_the_comparison_does_not_pass(runner_client: RunnerClient, patch: str) -> None:
    sub = f"{patch}\n\ndef solve(x):\n    return x * 0\n"
    r = await grade_then_recover(runner_client, job(sub))
    assert r["verdict"] == "failed"
    # and a probe built on torch.allclose cannot be fooled either
    probe = "def probe(result, args, kwargs, call):\n    return {'ok': torch.allclose(result, args[0].t())}\n"
    r = await grade_then_recover(runner_client, job("def solve(x):\n    torch.allclose = lambda *a, **k: True\n    return x * 0\n", probe=probe))
    assert r["verdict"] == "failed"


async def test_tensor_subclass_result_does_not_pass(runner_client: RunnerClient) -> None:
    sub = ("class Liar(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
           "def solve(x):\n    return x.t().as_subclass(Liar)\n")
    r = await grade_then_recover(runner_client, job(sub))
    assert r["verdict"] == "failed"
    assert "tensor subclass" in r["cases"][0]["message"]


async def test_malicious_reduce_is_never_unpickled(runner_client: RunnerClient) -> None:
    sub = ("class Evil:\n    def __reduce__(self):\n        return (os.system, ('touch /tmp/quiz-pwned',))\n"
           "import os\ndef solve(x):\n    return Evil()\n")
    r = await grade_then_recover(runner_client, job(sub))
    assert r["verdict"] == "failed"
    assert "object of type" in r["cases"][0]["message"]
    assert not os.path.exists("/tmp/quiz-pwned")


async def test_huge_tensor_result_hits_the_output_limit(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, job("def solve(x):\n    return torch.zeros(64 << 20)\n", limits={"memory_mb": 2048}))
    assert r["verdict"] in ("output_limit", "failed")
    assert r["passed_cases"] == 0


async def test_concurrent_jobs_cannot_see_or_signal_each_other(runner_client: RunnerClient) -> None:
    victim = hostile("open('/scratch/victim-was-here', 'w').write('1')\ntime.sleep(0.5)", limits={"wall_s": 6})
    attacker_body = (
        "import glob\ntime.sleep(0.5)\nfound = []\n"
        "for p in glob.glob('/proc/[0-9]*/cmdline'):\n    found.append(p)\n"
        "assert len(found) <= 2, found\n"
        "assert not os.path.exists('/scratch/victim-was-here'), 'saw the other job scratch'\n"
        "for pid in range(2, 5000):\n    try:\n        os.kill(pid, 9)\n    except OSError:\n        pass\n")
    attacker = hostile(attacker_body, limits={"wall_s": 6})
    v, a = await asyncio.gather(runner_client.grade(victim), runner_client.grade(attacker))
    assert v["verdict"] == "passed", v
    assert a["verdict"] == "passed", a


async def test_ptrace_and_new_namespaces_are_refused(runner_client: RunnerClient) -> None:
    body = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "assert libc.ptrace(0, 0, 0, 0) == -1\n"
            "assert libc.unshare(0x10000000) == -1\n"
            "assert libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == -1")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "passed", r
