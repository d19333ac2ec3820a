"""More hostile submissions: reading other jobs' code, leaving state behind, starving the host,
crashing the trusted decoder, reaching out of the sandbox.

Like test_hostile.py, every test grades real jobs through the HTTP runner and asserts what a
player or an operator would expect; `grade_then_recover` also checks the runner still passes a
correct answer afterwards.
"""
from __future__ import annotations

import asyncio
import secrets

import pytest

from runner.client import RunnerClient
from tests.runner.jobs import hostile, job
from tests.runner.test_hostile import grade_then_recover

pytestmark = pytest.mark.asyncio

ONE_CASE = "def make_cases():\n    return [{'args': (torch.randn(3, 4),), 'name': 'one'}]\n"


def _memory_scanner(markers: list[str]) -> str:
    """A submission that searches every writable page it inherited for `markers`.

    It never holds a marker whole (that copy would be found too): it looks for a short common
    prefix and checks the rest byte by byte against lists of ints."""
    prefix = "QZSECRET"
    assert all(m.startswith(prefix) for m in markers)
    tails = [[ord(ch) for ch in m[len(prefix):]] for m in markers]
    return f"""
import ctypes
PREFIX = b'{prefix}'
TAILS = {tails!r}
hits = []
for line in open('/proc/self/maps'):
    parts = line.split()
    lo, hi = (int(v, 16) for v in parts[0].split('-'))
    # anonymous memory and the heap: where an interpreter keeps (and frees) what it read
    if not parts[1].startswith('rw') or (len(parts) > 5 and parts[5] != '[heap]'):
        continue
    for start in range(lo, hi, 1 << 24):
        chunk = ctypes.string_at(start, min(hi - start, 1 << 24))
        i = chunk.find(PREFIX)
        while i >= 0:
            rest = chunk[i + len(PREFIX):i + len(PREFIX) + 64]
            for n, tail in enumerate(TAILS):
                if len(rest) >= len(tail) and all(rest[k] == tail[k] for k in range(len(tail))):
                    hits.append(n)
            i = chunk.find(PREFIX, i + 1)
        del chunk
if hits:
    raise RuntimeError('found the code of marker(s) %s' % sorted(set(hits)))

def solve(x):
    return x.transpose(0, 1)
"""


async def test_zygote_memory_holds_no_other_jobs_code(runner_client: RunnerClient) -> None:
    """Every job is forked from the warm zygote: the reference solution and other players' code it
    once read must not be in the memory a job inherits (freed or not)."""
    ref_marker, sub_marker, concurrent_marker = (f"QZSECRET{secrets.token_hex(8)}" for _ in range(3))
    earlier = job(f"def solve(x):\n    '{sub_marker}'\n    return x.transpose(0, 1)\n",
                  reference=f"def solve(x):\n    '{ref_marker}'\n    return x.t()\n", seed=11)
    assert (await runner_client.grade(earlier))["verdict"] == "passed"
    # the scan's own reference is fresh (a new seed), so it runs next to the submission
    scan = job(_memory_scanner([ref_marker, sub_marker, concurrent_marker]),
               reference=f"def solve(x):\n    '{concurrent_marker}'\n    return x.t()\n",
               setup=ONE_CASE, seed=12, limits={"wall_s": 20, "cpu_s": 20})
    r = await grade_then_recover(runner_client, scan)
    assert r["verdict"] == "passed", r


async def test_the_question_bank_is_not_in_the_jail(runner_client: RunnerClient) -> None:
    body = ("for name in ('questionbank', 'bot'):\n"
            "    try:\n        __import__(name)\n    except ImportError:\n        continue\n"
            "    raise RuntimeError('imported ' + name)\n"
            "for d in sys.path + ['/work', '/app', os.getcwd()]:\n"
            "    if os.path.isdir(d):\n"
            "        assert not {'questionbank', 'bot', 'items'} & set(os.listdir(d)), d")
    r = await grade_then_recover(runner_client, hostile(body))
    assert r["verdict"] == "passed", r


async def test_global_state_does_not_leak_into_the_next_job(runner_client: RunnerClient) -> None:
    """Torch's global switches, dispatcher registrations, modes, builtins, sys.modules, atexit,
    files in /dev/shm: none of it reaches the next job (another player's or a reference run)."""
    poison = """
if not getattr(torch, '_quiz_poisoned', False):
    torch._quiz_poisoned = True
    import atexit, builtins
    from torch.overrides import TorchFunctionMode
    torch.set_default_dtype(torch.float64)
    torch.set_flush_denormal(True)
    torch.use_deterministic_algorithms(True)
    torch.set_grad_enabled(False)
    torch.set_num_threads(7)
    torch.manual_seed(999)
    global _lib
    _lib = torch.library.Library('aten', 'IMPL')
    _lib.impl('mul.Tensor', lambda a, b: torch.zeros_like(a), 'CPU')
    class Lie(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    Lie().__enter__()
    builtins.quiz_marker = 1
    sys.modules['quiz_marker'] = sys
    os.environ['QUIZ_MARKER'] = '1'
    atexit.register(lambda: open('/dev/shm/quiz-marker', 'w').write('x'))
    open('/dev/shm/quiz-marker', 'w').write('x')
"""
    await runner_client.grade(hostile(poison))
    check = """
import builtins
assert torch.get_default_dtype() == torch.float32
assert torch.is_grad_enabled() and not torch.are_deterministic_algorithms_enabled()
assert torch.get_num_threads() == 1, torch.get_num_threads()
assert not hasattr(torch, '_quiz_poisoned') and not hasattr(builtins, 'quiz_marker')
assert 'quiz_marker' not in sys.modules and 'QUIZ_MARKER' not in os.environ
assert (torch.ones(2) * 3).tolist() == [3.0, 3.0], 'aten::mul override survived'
assert torch._C._len_torch_function_stack() == 0, 'a torch function mode survived'
assert not os.path.exists('/dev/shm/quiz-marker')
"""
    # a fresh reference (new seed) runs after the poisoned job, next to this one
    r = await grade_then_recover(runner_client, hostile(check, seed=21))
    assert r["verdict"] == "passed", r


async def test_child_processes_share_one_cpu_limit(runner_client: RunnerClient) -> None:
    """RLIMIT_CPU is per process: four children each just under it add up to far more."""
    body = ("kids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
            "        t = time.process_time()\n        while time.process_time() - t < 0.9:\n            pass\n"
            "        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE, limits={"cpu_s": 1, "wall_s": 10}))
    assert r["verdict"] == "timeout", r
    assert "CPU" in r["message"]


async def test_dev_shm_and_scratch_cap_their_inodes(runner_client: RunnerClient) -> None:
    """Empty files cost no bytes but each costs kernel memory that no limit meters."""
    body = ("for d in ('/dev/shm', '/scratch'):\n    n = 0\n    try:\n        while n < 20000:\n"
            "            os.close(os.open('%s/f%d' % (d, n), os.O_CREAT | os.O_WRONLY))\n            n += 1\n"
            "    except OSError as e:\n        assert e.errno == 28, e\n"
            "    assert n < 10000, 'created %d files in %s' % (n, d)")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r


async def test_vsock_to_the_hypervisor_is_refused(runner_client: RunnerClient) -> None:
    """AF_VSOCK ignores network namespaces: the filter refuses the socket itself (EPERM, not the
    kernel's EAFNOSUPPORT, so this holds on hosts with and without vsock)."""
    body = ("import errno\nfor kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):\n"
            "    try:\n        socket.socket(40, kind).close()\n    except OSError as e:\n"
            "        assert e.errno == errno.EPERM, e\n        continue\n"
            "    raise RuntimeError('made an AF_VSOCK socket')")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r


async def test_jobs_cannot_meet_on_unix_sockets(runner_client: RunnerClient) -> None:
    server = ("s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.bind('\\0quiz-rendezvous')\n"
              "s.listen(1)\ns.settimeout(1.5)\ntry:\n    s.accept()\nexcept socket.timeout:\n    pass\n"
              "else:\n    raise RuntimeError('another job connected')")
    client = ("deadline = time.time() + 1.2\nwhile time.time() < deadline:\n"
              "    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    try:\n"
              "        c.connect('\\0quiz-rendezvous')\n    except OSError:\n        time.sleep(0.05)\n"
              "        continue\n    raise RuntimeError('reached another job')")
    a, b = await asyncio.gather(runner_client.grade(hostile(server, setup=ONE_CASE)),
                                runner_client.grade(hostile(client, setup=ONE_CASE)))
    assert a["verdict"] == "passed", a
    assert b["verdict"] == "passed", b


@pytest.mark.parametrize("frame", [
    # JSON nested deeper than the parent's recursion limit
    "hdr = b'[' * 100000 + b']' * 100000",
    # a tensor shape torch refuses to build (its strides overflow)
    "hdr = json.dumps({'status': 'ok', 'error': None, 'tampered': [], 'blobs': [[0, 0]], 'cases': [\n"
    "    {'name': 'x', 'obs': {'t': 'dict', 'v': [['result', {'t': 'tensor', 'kind': 'Tensor', 'dtype': 'float32',\n"
    "     'shape': [0] + [2 ** 40 - 1] * 6, 'device': 'cpu', 'layout': 'strided', 'blob': 0}]]}}]}).encode()",
], ids=["deep-json", "overflowing-shape"])
async def test_a_frame_that_trips_the_decoder_is_the_players_error(runner_client: RunnerClient, frame: str) -> None:
    """`internal` never counts against a player and makes the bot retry: a forged frame must not
    be able to buy that."""
    sub = ("import os, json, struct\n" + frame +
           "\nos.write(3, b'QZW1' + struct.pack('<I', len(hdr)) + hdr)\nos._exit(0)\n")
    r = await grade_then_recover(runner_client, job(sub, setup=ONE_CASE))
    assert r["verdict"] == "error", r


async def test_an_int_too_large_for_a_float_is_a_wrong_answer(runner_client: RunnerClient) -> None:
    r = await grade_then_recover(runner_client, job("def solve(x):\n    return 10 ** 400\n", setup=ONE_CASE,
                                                    reference="def solve(x):\n    return float(x.sum())\n"))
    assert r["verdict"] == "failed", r


# Known limit, kept visible: a probe runs in the player's process, after the player's code, so
# what it computes there (a boolean from torch.allclose, a storage-sharing flag, a list of ops
# seen by a dispatch mode) is only as honest as that code. The snapshot/restore of torch catches
# careless monkeypatching, not a determined player. Only observations the player cannot compute
# without solving (the result values themselves) are hard evidence; see runner/README.md.
_BOOL_PROBE = "def probe(result, args, kwargs, call):\n    return {'ok': torch.allclose(result, args[0].t())}\n"


# A forger who writes the frame itself (after solving nothing) and exits: no check in the job
# can stop that, so a probe whose observation is a guessable flag passes. The parent can only
# insist on evidence a solver has (values): see test_fail_closed.py for the same forger failing
# against a value probe.
_FORGE_FRAME = (
    "import os\nfrom runner.wire import Encoder\n"
    "def solve(x):\n"
    "    enc = Encoder(1 << 20)\n"
    "    case = {'name': 'one', 'example': False, 'obs': enc.encode({'ok': True}), 'error': None}\n"
    "    os.write(3, enc.frame({'status': 'ok', 'error': None, 'cases': [case], 'tampered': []}))\n"
    "    os._exit(0)\n")


@pytest.mark.xfail(strict=True, reason="in-process probes can be forged (documented limit)")
@pytest.mark.parametrize("cheat", [
    _FORGE_FRAME,
    "from torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode):\n"
    "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
    "        return True if func is torch.allclose else func(*args, **(kwargs or {}))\n"
    "M().__enter__()\ndef solve(x):\n    return x * 0\n",
], ids=["forge-the-frame", "function-mode"])
async def test_a_boolean_probe_cannot_be_forged(runner_client: RunnerClient, cheat: str) -> None:
    r = await runner_client.grade(job(cheat, probe=_BOOL_PROBE, setup=ONE_CASE))
    assert r["verdict"] != "passed", r


async def test_reference_is_not_in_the_submissions_payload(runner_client: RunnerClient) -> None:
    """The harness's frames and payload hold the setup, the probe and the player's code only (the
    memory scan above covers everything else in the process)."""
    marker = f"QZSECRET{secrets.token_hex(8)}"
    body = ("import gc\nseen = 0\nf = sys._getframe()\nwhile f is not None:\n"
            "    for v in list(f.f_locals.values()) + [o for o in gc.get_referents(f) if isinstance(o, dict)]:\n"
            "        if isinstance(v, dict) and 'role' in v and 'code' in v:\n"
            "            seen += 1\n"
            "            assert v['role'] == 'submission' and 'reference' not in v, sorted(v)\n"
            "            assert REFERENCE_TAIL not in json.dumps(v)\n"
            "        assert not (isinstance(v, str) and REFERENCE_TAIL in v)\n"
            "    f = f.f_back\n"
            "assert seen, 'never found the harness payload, so this proves nothing'")
    j = hostile(body, setup=ONE_CASE, seed=31,
                reference=f"def solve(x):\n    '{marker}'\n    return x.t()\n")
    # the submission knows the marker only as a tail it could not have guessed from the job
    j["submission"] = j["submission"].replace(
        "import os,", f"import json\nREFERENCE_TAIL = ''.join(map(chr, {[ord(c) for c in marker[8:]]!r}))\nimport os,")
    r = await grade_then_recover(runner_client, j)
    assert r["verdict"] == "passed", r


async def test_memory_that_no_process_maps_is_refused(runner_client: RunnerClient) -> None:
    """memfd and SysV shm/msg pages are in no process's RSS nor under RLIMIT_AS: without per-job
    cgroups, a job (times its processes and open files) could pin any amount of host memory."""
    body = ("import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "try:\n    os.memfd_create('x')\nexcept OSError as e:\n    assert e.errno == errno.ENOSYS, e\n"
            "else:\n    raise RuntimeError('memfd_create worked')\n"
            "assert libc.shmget(0, 1 << 20, 0o1600) == -1 and ctypes.get_errno() == errno.EPERM, 'shmget worked'\n"
            "assert libc.msgget(0, 0o1600) == -1 and ctypes.get_errno() == errno.EPERM, 'msgget worked'\n"
            "q = torch.ones(4, 4)\nassert torch.equal(torch.mm(q, q), torch.full((4, 4), 4.0))")
    r = await grade_then_recover(runner_client, hostile(body, setup=ONE_CASE))
    assert r["verdict"] == "passed", r
