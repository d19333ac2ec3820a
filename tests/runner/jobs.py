"""Small job builders shared by the runner tests."""
from __future__ import annotations

from typing import Any

import aiohttp

SETUP = """
def make_cases():
    cases = [{'args': (torch.randn(3, 4),), 'name': 'small', 'example': True}]
    for shape in [(5, 2), (1, 7), (6, 6)]:
        cases.append({'args': (torch.randn(*shape),)})
    return cases
"""
REFERENCE = "def solve(x):\n    return x.t()\n"
CORRECT = "def solve(x):\n    return x.transpose(0, 1)\n"


def job(submission: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"kind": "code", "setup": SETUP, "reference": REFERENCE,
                            "entrypoint": "solve", "submission": submission,
                            "limits": {"wall_s": 5, "cpu_s": 5}}
    base.update(over)
    return base


def hostile(body: str, **over: Any) -> dict[str, Any]:
    """A submission whose `solve` runs `body` first and would otherwise be correct."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return job(f"import os, sys, time, signal, socket, threading\n\ndef solve(x):\n{indented}\n    return x.t()\n", **over)


async def metric(client: Any, name: str) -> float:
    """One counter from the runner's /metrics."""
    async with aiohttp.ClientSession() as s:
        async with s.get(client.url + "/metrics") as resp:
            for line in (await resp.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
    raise AssertionError(f"no metric {name}")
