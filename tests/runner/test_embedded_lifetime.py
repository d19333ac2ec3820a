"""The embedded runner dies with its parent: a `python -m bot console` killed with SIGKILL
leaves no `runner serve`, bwrap or zygote behind."""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not shutil.which("bwrap") or not Path("/proc/self/task").exists(),
                                reason="needs Linux and bubblewrap (the runner's sandbox)")


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def descendants(pid: int) -> set[int]:
    seen: set[int] = set()
    todo = children(pid)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += children(p)
    return seen


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def test_killing_the_console_kills_the_embedded_runner_and_its_sandbox(tmp_path):
    console = subprocess.Popen(
        [sys.executable, "-m", "bot", "console", "--db", str(tmp_path / "q.sqlite3")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tree: set[int] = set()
    try:
        # the console answers a command once its runner is up and listening (a runner killed
        # while still starting dies of its broken log pipe anyway: that proves nothing)
        assert console.stdin is not None and console.stdout is not None
        console.stdin.write(b"/quiz help\n")
        console.stdin.flush()
        seen = b""
        deadline = time.monotonic() + 180
        while b"/quiz" not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([console.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(console.stdout.fileno(), 65536)
                assert chunk, f"the console ended: {seen.decode(errors='replace')}"
                seen += chunk
        deadline = time.monotonic() + 60
        while not any("bwrap" in cmdline(p) for p in tree):  # its sandboxed workers
            assert time.monotonic() < deadline, [cmdline(p) for p in tree]
            time.sleep(0.2)
            tree = descendants(console.pid)
        assert any("runner" in cmdline(p) and "serve" in cmdline(p) for p in tree)
        time.sleep(1.0)
        tree = descendants(console.pid)
        assert tree
        os.kill(console.pid, signal.SIGKILL)
        console.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(alive(p) for p in tree):
            time.sleep(0.2)
        left = [f"{p}: {cmdline(p)}" for p in tree if alive(p)]
        assert not left, f"left running after the console was killed: {left}"
    finally:
        for p in tree:  # never leave them behind, even when the test fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if console.poll() is None:
            console.kill()
            console.wait()
