"""A local runner subprocess on loopback, for play on one machine, the checker and the tests.

The bot process stays torch-free: the runner lives in its own process and is reached over
HTTP exactly as a remote one would be.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from .client import RunnerClient, RunnerUnavailable

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedRunner:
    """`async with EmbeddedRunner() as client:` (or `with`): a sandboxed runner while the block runs."""

    def __init__(self, *, config_path: str | None = None, allow_unsandboxed: bool = False,
                 startup_timeout: float = 120.0, python: str | None = None) -> None:
        self.config_path = config_path
        self.allow_unsandboxed = allow_unsandboxed
        self.startup_timeout = startup_timeout
        self.python = python or sys.executable
        self.proc: subprocess.Popen[bytes] | None = None
        self.client: RunnerClient | None = None
        self.log: deque[str] = deque(maxlen=200)

    def start_blocking(self) -> RunnerClient:
        port = _free_port()
        token = secrets.token_urlsafe(24)
        env = dict(os.environ, RUNNER_TOKEN=token,
                   PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        args = [self.python, "-m", "runner", "serve", "--host", "127.0.0.1", "--port", str(port)]
        if self.config_path:
            args += ["--config", self.config_path]
        if self.allow_unsandboxed:
            args.append("--allow-unsandboxed")
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        ready = threading.Event()
        threading.Thread(target=self._read_log, args=(ready,), daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop_blocking()
                raise RunnerUnavailable("the embedded runner did not start:\n" + "".join(self.log))
        self.client = RunnerClient(f"http://127.0.0.1:{port}", token, timeout=60.0)
        return self.client

    def _read_log(self, ready: threading.Event) -> None:
        """Keep reading the runner's log so its pipe never fills up; spot the ready line."""
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            self.log.append(line)
            if "runner listening on" in line:
                ready.set()

    def stop_blocking(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    async def start(self) -> RunnerClient:
        return await asyncio.get_running_loop().run_in_executor(None, self.start_blocking)

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.stop_blocking)

    async def __aenter__(self) -> RunnerClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> RunnerClient:
        return self.start_blocking()

    def __exit__(self, *exc: object) -> None:
        self.stop_blocking()
