"""Runner latency and throughput, warm (zygote) vs cold (a fresh sandboxed interpreter per job).

Prints figures; the last line is
`runner: warm_p50_ms=… cold_p50_ms=… speedup=… throughput_per_s=… parent_peak_mb=…`.

The warm runs are traced (`trace: true`, runner/trace.py): stamps in the parent, the zygote's
side and the job give a per-phase breakdown (the median of each phase over the warm gradings,
HTTP being what the client saw beyond the engine's own time).

`--baseline REV` runs another commit's runner beside this checkout's, in the same run on the same
machine: the warm gradings and the throughput are measured in alternating rounds (each round
starts with the other runner), and each side gets its own figures, its own client (the baseline's
`runner/client.py`) and its phases, so a change is compared against the code before it without
the load of the machine drifting in between.

The hostile phase sends frames built to stall or bloat the trusted parent (a header at its size
cap, a huge case list, a blob table reused by many tensors) alongside correct answers, and
reports the parent's peak resident memory, how long the service took to answer a health check
meanwhile, and what the innocent answers got.
Run: .venv/bin/python bench/runner.py [--warm N] [--cold N] [--seconds S] [--clients C]
     [--baseline REV [--rounds R]] [--no-cold] [--no-hostile]
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.embedded import EmbeddedRunner  # noqa: E402
from runner.trace import LABELS, phases  # noqa: E402

GAP_S = 0.2  # between spaced warm gradings: answers in a quiz come seconds apart, not back to back
JOB = {
    "kind": "code",
    "setup": "def make_cases():\n    return [{'args': (torch.randn(8, 8), torch.randn(8))} for _ in range(5)]\n",
    "reference": "def solve(w, x):\n    return torch.relu(w @ x)\n",
    "entrypoint": "solve",
    "submission": "def solve(w, x):\n    return (w @ x).clamp(min=0)\n",
}


# A training-step item: building an optimizer touches torch.optim (and torch._dynamo), which the
# zygote imports once; without that, every job paid 1.5-3.5 s of its wall limit.
OPTIM_JOB = {
    "kind": "code",
    "setup": "def make_cases():\n    return [{'args': (torch.randn(4, 3), torch.randn(4, 2))} for _ in range(3)]\n",
    "reference": ("def solve(x, y):\n    torch.manual_seed(0)\n    m = nn.Linear(3, 2)\n"
                  "    opt = torch.optim.SGD(m.parameters(), lr=0.1)\n    F.mse_loss(m(x), y).backward()\n"
                  "    opt.step()\n    return m.weight.detach()\n"),
    "entrypoint": "solve",
}
OPTIM_JOB["submission"] = OPTIM_JOB["reference"]
# Ranks mode: two processes in a gloo group over the job's own loopback, one all_reduce per case.
RANKS_JOB = {
    "kind": "code", "ranks": 2,
    "setup": "def make_cases():\n    return [{'args': (torch.randn(16),)} for _ in range(3)]\n",
    "reference": ("import torch.distributed as dist\ndef solve(x):\n    y = x * (dist.get_rank() + 1)\n"
                  "    dist.all_reduce(y)\n    return y\n"),
    "entrypoint": "solve",
}
RANKS_JOB["submission"] = RANKS_JOB["reference"]


def pct(data: list[float], q: float) -> float:
    data = sorted(data)
    return data[min(len(data) - 1, int(q * len(data)))]


async def warm(client, n: int, job: dict = JOB, traces: list[dict[str, float]] | None = None,
               gap_s: float = 0.0) -> list[float]:
    """n gradings one after another; with `gap_s`, that pause (untimed) before each, as a quiz's
    answers come: the runner's pool of job processes made ahead has refilled by then."""
    await client.grade(job)  # fill the reference cache, as a day's first answer does
    out = []
    for _ in range(n):
        if gap_s:
            await asyncio.sleep(gap_s)
        t = time.perf_counter()
        r = await client.grade(job)
        ms = (time.perf_counter() - t) * 1000
        out.append(ms)
        assert r["verdict"] == "passed", r
        if traces is not None:
            traces.append(_phases(r, ms))
    return out


def _phases(result: dict[str, Any], client_ms: float) -> dict[str, float]:
    """One grading's phases (ms) from the stamps in its timings; HTTP is the client's time
    beyond the engine's."""
    stamps = {k[2:]: v for k, v in result.get("timings", {}).items() if k.startswith("t_")}
    out = phases(stamps)
    if "end" in stamps:
        out["http"] = client_ms - (stamps["end"] - stamps.get("recv", 0.0))
    return out


def print_phases(traces: list[dict[str, float]], who: str = "") -> None:
    """The median of each phase over the gradings, in the order the phases happen."""
    if not traces or not any(traces):
        print(f"{who}phases: no timestamps (a runner without `trace`)")
        return
    by: dict[str, list[float]] = defaultdict(list)
    for t in traces:
        for name, ms in t.items():
            by[name].append(ms)
    known = list(LABELS)
    names = sorted((n for n in by if n != "http"), key=lambda n: known.index(n) if n in known else len(known))
    print(f"{who}per-phase medians over {len(traces)} warm gradings (ms):")
    rows = [("http", "HTTP in+out (client minus engine)")] + [(n, LABELS.get(n, n)) for n in names]
    for name, label in rows:
        vals = by.get(name)
        if not vals:
            continue
        seen = "" if len(vals) == len(traces) else f"  (in {len(vals)} of {len(traces)})"
        print(f"  {label:<40} {statistics.median(vals):7.2f}  p95 {pct(vals, .95):6.2f}{seen}")
    line = " ".join(f"{n}={statistics.median(by[n]):.1f}" for n, _ in rows if by.get(n))
    print(f"{who}phases_ms: {line}")


async def cold(client, n: int) -> list[float]:
    """The same HTTP API and sandbox, but a fresh jailed interpreter (and `import torch`) per job."""
    return await warm(client, n)


async def throughput(client, seconds: float, clients: int) -> float:
    done = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < end:
            r = await client.grade(JOB)
            assert r["verdict"] == "passed", r
            done += 1

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return done / (time.perf_counter() - t)


def _frame_writer(header: str, blobs: str = "b''") -> str:
    return ("import os, json, struct\ndef solve(w, x):\n"
            f"    header = {header}\n    blobs = {blobs}\n"
            "    text = json.dumps(header).encode()\n"
            "    os.write(3, b'QZW1' + struct.pack('<I', len(text)) + text + blobs)\n    os._exit(0)\n")


_HEAD = "{'status': 'ok', 'error': None, 'tampered': [], "
FLOODS = {
    "870k cases": _frame_writer(_HEAD + "'blobs': [], 'cases': [{}] * 870_000}"),
    "header near its cap": _frame_writer(_HEAD + "'blobs': [], 'cases': [{'name': 'x', 'example': False, 'error': None,"
                                         " 'obs': {'t': 'list', 'v': [{'t': 'none'}] * 100_000}}] * 5}"),
    "16 MiB blob x 60 tensors": _frame_writer(
        _HEAD + "'blobs': [[0, 16 << 20]], 'cases': [{'name': 'x', 'example': False, 'error': None, 'obs': "
        "{'t': 'list', 'v': [{'t': 'tensor', 'kind': 'Tensor', 'dtype': 'float32', 'shape': [4 << 20],"
        " 'device': 'cpu', 'requires_grad': False, 'layout': 'strided', 'blob': 0}] * 60}}] * 5}",
        "bytes(16 << 20)"),
}


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def hostile(client, pid: int, rounds: int = 3) -> float:
    """Floods beside correct answers; returns the parent's peak RSS (MiB) afterwards."""
    before = _peak_rss_mb(pid)
    stalls: list[float] = []
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await client.health()
            stalls.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    victims: list[tuple[str, float]] = []

    async def victim() -> None:
        t = time.perf_counter()
        r = await client.grade(JOB)
        victims.append((r["verdict"], (time.perf_counter() - t) * 1000))

    verdicts: dict[str, set[str]] = {name: set() for name in FLOODS}

    async def flood(name: str, code: str) -> None:
        r = await client.grade(dict(JOB, submission=code))
        verdicts[name].add(r["verdict"])

    for _ in range(rounds):
        await asyncio.gather(*(flood(n, c) for n, c in FLOODS.items()), *(victim() for _ in range(3)))
    done.set()
    await watcher
    peak = _peak_rss_mb(pid)
    print(f"hostile: floods {', '.join(f'{n}: {sorted(v)}' for n, v in verdicts.items())}")
    ok = sum(v == "passed" for v, _ in victims)
    print(f"hostile: innocent answers passed {ok}/{len(victims)}, their p50={pct([t for _, t in victims], .5):.0f} ms;"
          f" health check during floods p50={pct(stalls, .5):.1f} ms max={max(stalls):.0f} ms")
    print(f"hostile: parent peak RSS {before:.0f} MiB before, {peak:.0f} MiB after")
    return peak


def _baseline_tree(rev: str, dest: Path) -> Path:
    """The baseline commit's `runner` package, unpacked beside a copy of nothing else. Not under
    /tmp: a checkout there keeps the jobs' /tmp read-only (runner/sandbox.py)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "runner"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _client_class(root: Path) -> Any:
    """`RunnerClient` as that checkout has it (keep-alive or not is part of what is compared)."""
    spec = importlib.util.spec_from_file_location(f"bench_client_{abs(hash(str(root)))}", root / "runner" / "client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RunnerClient


@contextlib.asynccontextmanager
async def _runner(config: Path, root: Path | None = None):
    """A traced runner from this checkout, or from `root`, with that checkout's client."""
    embedded = EmbeddedRunner(config_path=str(config), package_root=str(root) if root else None)
    own = await embedded.start()
    client = own if root is None else _client_class(root)(own.url, own.token, timeout=60.0)
    try:
        yield embedded, client
    finally:
        close = getattr(client, "close", None)
        if close is not None:
            await close()
        if client is not own and hasattr(own, "close"):
            await own.close()
        await embedded.stop()


async def compare(args: argparse.Namespace, config: Path) -> None:
    """This checkout against `--baseline`, alternating rounds in one run."""
    with tempfile.TemporaryDirectory(prefix="baseline-", dir=str(ROOT / ".bench")) as tmp:
        base = _baseline_tree(args.baseline, Path(tmp))
        base_config = config
        if "trace" not in (base / "runner" / "config.py").read_text():
            # a baseline from before tracing rejects the setting: it runs untraced (no phases)
            base_config = Path(tmp) / "untraced.yaml"
            base_config.write_text("{}\n")
        async with _runner(base_config, base) as (_e0, old), _runner(config) as (_e1, new):
            sides = {"before": old, "after": new}
            for c in sides.values():
                await warm(c, 3)
            lat: dict[str, list[float]] = {k: [] for k in sides}
            spaced: dict[str, list[float]] = {k: [] for k in sides}
            traces: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
            done: dict[str, float] = dict.fromkeys(sides, 0.0)
            spent: dict[str, float] = dict.fromkeys(sides, 0.0)
            rounds = max(1, args.rounds)
            per = max(1, args.warm // rounds)
            for r in range(rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                for k in order:
                    lat[k] += await warm(sides[k], per, traces=traces[k])
                for k in order:
                    spaced[k] += await warm(sides[k], max(1, per // 2), gap_s=GAP_S)
                for k in order:
                    t = time.perf_counter()
                    rate = await throughput(sides[k], args.seconds / rounds, args.clients)
                    dt = time.perf_counter() - t
                    done[k] += rate * dt
                    spent[k] += dt
            print(f"same run, {rounds} alternating rounds; before = {args.baseline}, after = this checkout")
            for k in sides:
                w, tp = lat[k], done[k] / spent[k]
                print(f"{k}: warm n={len(w)} p50={pct(w, .5):.1f} ms p95={pct(w, .95):.1f} ms; "
                      f"throughput {tp:.1f} gradings/s with {args.clients} clients")
                print_phases(traces[k], f"{k}: ")
                g = spaced[k]
                print(f"{k}: warm, {GAP_S * 1000:.0f} ms apart: n={len(g)} p50={pct(g, .5):.1f} ms p95={pct(g, .95):.1f} ms")
            for k in sides:
                w, g = lat[k], spaced[k]
                print(f"runner[{k}]: warm_p50_ms={pct(w, .5):.1f} warm_p95_ms={pct(w, .95):.1f} "
                      f"spaced_p50_ms={pct(g, .5):.1f} throughput_per_s={done[k] / spent[k]:.1f}")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", type=int, default=50)
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--baseline", help="a commit to compare against, in the same run (e.g. main)")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds with --baseline")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold figures")
    ap.add_argument("--no-hostile", action="store_true", help="skip the hostile phase")
    args = ap.parse_args()
    (ROOT / ".bench").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cfg-", dir=str(ROOT / ".bench")) as tmp:
        config = Path(tmp) / "trace.yaml"
        config.write_text("trace: true\n")
        if args.baseline:
            await compare(args, config)
            return
        await single(args, config)


async def single(args: argparse.Namespace, config: Path) -> None:
    embedded = EmbeddedRunner(config_path=str(config))
    async with embedded as client:
        health = await client.health()
        print(f"torch {health['torch']}, cuda {health['cuda']}, workers {health['workers']}, "
              f"sandbox {'+'.join(health['sandbox'])}")
        traces: list[dict[str, float]] = []
        w = await warm(client, args.warm, traces=traces)
        print(f"warm HTTP end-to-end: n={len(w)} p50={pct(w, .5):.1f} ms p95={pct(w, .95):.1f} ms")
        print_phases(traces)
        g = await warm(client, max(5, args.warm // 2), gap_s=GAP_S)
        print(f"warm, {GAP_S * 1000:.0f} ms apart (as answers come; the pool refilled): n={len(g)} "
              f"p50={pct(g, .5):.1f} ms p95={pct(g, .95):.1f} ms")
        o = await warm(client, max(5, args.warm // 5), OPTIM_JOB)
        print(f"warm, a job that builds an optimizer: n={len(o)} p50={pct(o, .5):.1f} ms")
        r2 = await warm(client, max(5, args.warm // 5), RANKS_JOB) if health.get("capabilities", {}).get("ranks", 1) >= 2 else []
        if r2:
            print(f"warm, a 2-rank gloo job (all_reduce): n={len(r2)} p50={pct(r2, .5):.1f} ms p95={pct(r2, .95):.1f} ms")
        tp = await throughput(client, args.seconds, args.clients)
        print(f"throughput: {tp:.1f} gradings/s with {args.clients} concurrent clients")
        assert embedded.proc is not None
        peak = await hostile(client, embedded.proc.pid) if not args.no_hostile else float("nan")
        if hasattr(client, "close"):
            await client.close()
    c = [float("nan")]
    if not args.no_cold:
        cfg = config.parent / "cold.yaml"
        cfg.write_text("cold_start: true\n")
        async with EmbeddedRunner(config_path=str(cfg)) as client:
            c = await cold(client, args.cold)
            if hasattr(client, "close"):
                await client.close()
        print(f"cold (fresh sandboxed interpreter per job): n={len(c)} p50={statistics.median(c):.0f} ms")
    speedup = statistics.median(c) / pct(w, .5)
    print(f"runner: warm_p50_ms={pct(w, .5):.1f} cold_p50_ms={statistics.median(c):.0f} "
          f"speedup={speedup:.0f}x throughput_per_s={tp:.1f} parent_peak_mb={peak:.0f}"
          + (f" ranks2_p50_ms={pct(r2, .5):.0f}" if r2 else ""))


if __name__ == "__main__":
    asyncio.run(main())
