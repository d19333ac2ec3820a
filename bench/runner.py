"""Runner latency and throughput, warm (zygote) vs cold (a fresh sandboxed interpreter per job).

Prints figures; the last line is
`runner: warm_p50_ms=… cold_p50_ms=… speedup=… throughput_per_s=…`.
Run: .venv/bin/python bench/runner.py [--warm N] [--cold N] [--seconds S] [--clients C]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.embedded import EmbeddedRunner  # noqa: E402

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


def pct(data: list[float], q: float) -> float:
    data = sorted(data)
    return data[min(len(data) - 1, int(q * len(data)))]


async def warm(client, n: int, job: dict = JOB) -> list[float]:
    await client.grade(job)  # fill the reference cache, as a day's first answer does
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = await client.grade(job)
        out.append((time.perf_counter() - t) * 1000)
        assert r["verdict"] == "passed", r
    return out


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


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", type=int, default=50)
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    async with EmbeddedRunner() as client:
        health = await client.health()
        print(f"torch {health['torch']}, cuda {health['cuda']}, workers {health['workers']}, "
              f"sandbox {'+'.join(health['sandbox'])}")
        w = await warm(client, args.warm)
        print(f"warm HTTP end-to-end: n={len(w)} p50={pct(w, .5):.1f} ms p95={pct(w, .95):.1f} ms")
        o = await warm(client, max(5, args.warm // 5), OPTIM_JOB)
        print(f"warm, a job that builds an optimizer: n={len(o)} p50={pct(o, .5):.1f} ms")
        tp = await throughput(client, args.seconds, args.clients)
        print(f"throughput: {tp:.1f} gradings/s with {args.clients} concurrent clients")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "cold.yaml"
        cfg.write_text("cold_start: true\n")
        async with EmbeddedRunner(config_path=str(cfg)) as client:
            c = await cold(client, args.cold)
    print(f"cold (fresh sandboxed interpreter per job): n={len(c)} p50={statistics.median(c):.0f} ms")
    speedup = statistics.median(c) / pct(w, .5)
    print(f"runner: warm_p50_ms={pct(w, .5):.1f} cold_p50_ms={statistics.median(c):.0f} "
          f"speedup={speedup:.0f}x throughput_per_s={tp:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
