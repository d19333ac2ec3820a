"""The trusted pieces on their own: wire decoding of hostile frames, comparison, config, start-up checks."""
from __future__ import annotations

import asyncio
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from runner.compare import compare
from runner.config import ConfigError, Limits, load_config
from runner.wire import MAGIC, PROGRESS, Decoder, Encoder, WireError, progress_mark, split_frame, split_progress

ROOT = Path(__file__).resolve().parents[2]


def roundtrip(value):
    enc = Encoder(max_bytes=1 << 20)
    node = enc.encode(value)
    header, blobs = split_frame(enc.frame({"v": node}))
    return Decoder(header, blobs).decode(header["v"])


def test_wire_roundtrip_keeps_values_dtypes_and_shapes() -> None:
    t = torch.arange(12, dtype=torch.float32).view(3, 4).t()  # non-contiguous on purpose
    got = roundtrip({"t": t, "b": torch.tensor([True, False]), "n": None, "f": math.nan, "i": 2**70,
                     "s": "héllo", "l": [1, (2.5, "x")], "e": torch.empty(0, 3, dtype=torch.int64),
                     "h": torch.ones(2, dtype=torch.bfloat16), "d": torch.float16})
    assert got["t"].shape == (4, 3) and torch.equal(got["t"].data, t)
    assert got["b"].dtype == "bool" and got["b"].data.tolist() == [True, False]
    assert got["n"] is None and math.isnan(got["f"]) and got["i"] == 2**70
    assert got["l"] == [1, (2.5, "x")] and got["s"] == "héllo"
    assert got["e"].shape == (0, 3) and got["h"].data.dtype == torch.bfloat16
    assert got["d"] == "float16"


@pytest.mark.parametrize("frame", [
    b"", b"XXXX" + b"\0" * 8, MAGIC + struct.pack("<I", 100) + b"{}",
    MAGIC + struct.pack("<I", 5) + b"[1,2]",
])
def test_malformed_frames_are_rejected(frame: bytes) -> None:
    with pytest.raises(WireError):
        split_frame(frame)


@pytest.mark.parametrize("node", [
    {"t": "tensor", "kind": "Tensor", "dtype": "float32", "shape": [4], "blob": 0},   # size mismatch
    {"t": "tensor", "kind": "Tensor", "dtype": "object", "shape": [1], "blob": 0},    # bad dtype
    {"t": "tensor", "kind": "Tensor", "dtype": "float32", "shape": [-1], "blob": 0},  # bad shape
    {"t": "pickle", "v": "cos\nsystem\n"},                                             # unknown type
    {"t": "int", "v": "9" * 10000},                                                    # huge int
    {"t": "list", "v": [{"t": "list", "v": []}] * 3, "x": 1} | {"v": None},            # not a list
])
def test_hostile_nodes_are_rejected(node: dict) -> None:
    header = {"blobs": [[0, 3]]}
    with pytest.raises(WireError):
        Decoder(header, memoryview(b"abc")).decode(node)


def test_deep_nesting_is_rejected() -> None:
    node: dict = {"t": "none"}
    for _ in range(100):
        node = {"t": "list", "v": [node]}
    with pytest.raises(WireError):
        Decoder({"blobs": []}, memoryview(b"")).decode(node)


def test_blob_table_pointing_outside_the_frame_is_rejected() -> None:
    with pytest.raises(WireError):
        Decoder({"blobs": [[0, 100]]}, memoryview(b"abc"))


def test_comparison_messages_never_contain_expected_values() -> None:
    exp = roundtrip({"result": torch.tensor([123.456, 789.0])})
    got = roundtrip({"result": torch.tensor([1.0, 2.0])})
    msg = compare(exp, got, rtol=1e-5, atol=1e-8, path="")
    assert "values differ" in msg and "123" not in msg and "789" not in msg
    assert compare(roundtrip(41), roundtrip(42), rtol=0, atol=0, path="") == ": wrong value"
    assert "expected a bool" in compare(roundtrip(True), roundtrip(1), rtol=0, atol=0, path="x")
    assert compare(roundtrip(1.0), roundtrip(1), rtol=0, atol=0, path="x") == ""


def test_limits_are_clamped_to_the_server_maxima() -> None:
    maxima = Limits(wall_s=30, memory_mb=4096)
    got = Limits().clamp({"wall_s": 999, "memory_mb": 100}, maxima)
    assert got.wall_s == 30 and got.memory_mb == 100 and got.cpu_s == 10


def test_config_reports_every_problem_with_its_key(tmp_path: Path) -> None:
    p = tmp_path / "runner.yaml"
    p.write_text("port: eighty\nworkers: 2\nmaxima:\n  wall_s: -1\n  bogus: 3\ncolour: red\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    text = str(e.value)
    for needle in ("port: expected int", "maxima.wall_s: expected a positive number", "maxima.bogus: unknown limit",
                   "colour: unknown setting"):
        assert needle in text
    p.write_text("workers: [\n")
    with pytest.raises(ConfigError):
        load_config(p)


def _health(*extra: str, path: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=path, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "runner", "health", *extra], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_refuses_to_start_without_a_sandbox(tmp_path: Path) -> None:
    r = _health(path=str(tmp_path))  # no bwrap on this PATH
    assert r.returncode == 2
    assert "bubblewrap" in r.stderr and "allow_unsandboxed" in r.stderr


def test_unsandboxed_only_when_the_config_allows_it_and_loudly(tmp_path: Path) -> None:
    cfg = tmp_path / "runner.yaml"
    cfg.write_text("allow_unsandboxed: true\n")
    r = _health("--config", str(cfg), path=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sandboxed"] is False
    assert "RUNNING UNSANDBOXED" in r.stderr


async def test_without_cgroups_the_rss_watchdog_catches_memory_spread_over_children() -> None:
    from runner.config import RunnerConfig
    from runner.engine import Engine
    from tests.runner.jobs import CORRECT, hostile, job

    body = ("for _ in range(8):\n    if os.fork() == 0:\n        b = bytearray(200 << 20)\n"
            "        b[::4096] = b'x' * len(b[::4096])\n        time.sleep(30)\ntime.sleep(30)")
    async with Engine(RunnerConfig(cgroups=False)) as engine:
        assert "rss-watchdog" in engine.health()["sandbox"]
        r = await engine.grade(hostile(body, limits={"memory_mb": 512, "wall_s": 8}))
        assert r["verdict"] == "memory", r
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _chains(root: int) -> list[list[int]]:
    """Every parent-to-child chain of processes from `root` down to a leaf."""
    try:
        kids = [int(c) for t in os.listdir(f"/proc/{root}/task")
                for c in open(f"/proc/{root}/task/{t}/children").read().split()]
    except OSError:
        kids = []
    return [[root] + chain for kid in kids for chain in _chains(kid)] or [[root]]


def _deepest_chain(root: int, leaf: str) -> list[int]:
    """The longest chain of processes under `root` (root first) down to the process named
    `leaf`: the job we mean, not a pooled process waiting for its payload nor one still exiting
    after its answer."""
    named = [c for c in _chains(root) if _comm(c[-1]) == leaf]
    return max(named, key=len) if named else [root]


async def test_a_killed_warm_worker_is_replaced_and_grading_goes_on() -> None:
    import signal as sig

    from runner.engine import Engine
    from tests.runner.jobs import CORRECT, hostile, job

    async with Engine() as engine:
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"
        assert engine.zygote is not None and engine.zygote.proc is not None
        engine.zygote.proc.send_signal(sig.SIGKILL)
        await engine.zygote.proc.wait()
        r = await engine.grade(job(CORRECT))
        assert r["verdict"] in ("passed", "internal")  # a job racing the crash is the runner's fault
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"
        assert engine.metrics["zygote_restarts"] == 1

        # A job whose supervisor dies (a runner crash, an OOM kill of the runner's side) is the
        # runner's fault: `internal` (the bot retries it), never an `error` that costs points.
        one_case = "def make_cases():\n    return [{'args': (torch.randn(3, 4),)}]\n"
        # the reference is cached first, so the only job running below is the slow submission
        assert (await engine.grade(job(CORRECT, setup=one_case)))["verdict"] == "passed"
        slow = hostile("import ctypes\nctypes.CDLL(None).prctl(15, b'qz-slow-job', 0, 0, 0)\ntime.sleep(3)",
                       setup=one_case, limits={"wall_s": 10})
        flight = asyncio.ensure_future(engine.grade(slow))
        seen: dict[int, float] = {}
        killed = False
        loop = asyncio.get_running_loop()
        for _ in range(200):
            await asyncio.sleep(0.05)
            chain = _deepest_chain(engine.zygote.proc.pid, "qz-slow-job")
            if len(chain) < 3:
                continue
            parent = chain[-2]  # the job's supervisor
            first = seen.setdefault(parent, loop.time())
            if loop.time() - first >= 0.5:  # the same supervisor for half a second: the slow job's
                try:
                    os.kill(parent, sig.SIGKILL)
                except ProcessLookupError:
                    continue
                killed = True
                break
        assert killed
        r = await flight
        assert r["verdict"] == "internal", r
        assert (await engine.grade(job(CORRECT)))["verdict"] == "passed"


async def test_a_full_queue_answers_503_with_retry_after(tmp_path: Path) -> None:
    import asyncio

    import aiohttp

    from runner.embedded import EmbeddedRunner
    from tests.runner.jobs import hostile

    cfg = tmp_path / "runner.yaml"
    cfg.write_text("queue_size: 1\nworkers: 1\n")
    slow = hostile("time.sleep(0.5)", limits={"wall_s": 5})
    async with EmbeddedRunner(config_path=str(cfg)) as client:
        headers = {"Authorization": f"Bearer {client.token}"}
        async with aiohttp.ClientSession() as s:
            async def post() -> tuple[int, str | None]:
                async with s.post(client.url + "/v1/grade", json=slow, headers=headers) as resp:
                    await resp.read()
                    return resp.status, resp.headers.get("Retry-After")
            results = await asyncio.gather(*(post() for _ in range(3)))
    statuses = sorted(status for status, _ in results)
    assert statuses[0] == 200 and 503 in statuses
    assert all(retry for status, retry in results if status == 503)


async def test_unsandboxed_jobs_remove_their_work_directory(tmp_path: Path, monkeypatch) -> None:
    """Without the sandbox's private tmpfs each job gets a temporary directory; it must not pile up."""
    from runner.config import RunnerConfig
    from runner.engine import Engine
    from tests.runner.jobs import CORRECT, job

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap here
    monkeypatch.setenv("TMPDIR", str(tmp))
    body = CORRECT.replace("def ", "open('left-behind.txt', 'w').write('x')\ndef ", 1)
    async with Engine(RunnerConfig(allow_unsandboxed=True, cgroups=False)) as engine:
        assert engine.health()["sandboxed"] is False
        for _ in range(3):
            assert (await engine.grade(job(body)))["verdict"] == "passed"
    assert list(tmp.glob("quiz-job-*")) == []


def test_progress_marks_are_read_ahead_of_the_frame_and_forgeries_only_relabel() -> None:
    frame = MAGIC + struct.pack("<I", 2) + b"{}"
    assert split_progress(progress_mark(0) + progress_mark(1) + frame) == (1, frame)
    assert split_progress(progress_mark(3)) == (3, None)  # killed before any frame
    assert split_progress(b"") == (None, None)
    # a truncated or forged mark is left to the frame parser, which refuses it
    last, rest = split_progress(progress_mark(0) + PROGRESS + b"\x01")
    assert last == 0
    with pytest.raises(WireError):
        split_frame(rest)
