"""A local runner subprocess on loopback, for play on one machine, the checker and the tests.

The bot process stays torch-free: the runner lives in its own process and is reached over
HTTP exactly as a remote one would be. It dies with its parent: the child asks the kernel for
SIGTERM when the process that started it dies (PR_SET_PDEATHSIG, also after a kill -9), and
its sandboxes (`bwrap --die-with-parent`) and zygote follow it. The death signal belongs to the
thread that forked, so the child is always started from the caller's thread, never a pool's.
"""
from __future__ import annotations

import asyncio
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from .client import RunnerClient, RunnerUnavailable

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child between fork and exec: SIGTERM when the parent dies. If the parent died
    already (before this ran), exit now rather than run orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to do
        return
    if os.getppid() == 1:
        os._exit(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedRunner:
    """`async with EmbeddedRunner() as client:` (or `with`): a sandboxed runner while the block runs."""

    def __init__(self, *, config_path: str | None = None, allow_unsandboxed: bool = False,
                 startup_timeout: float = 120.0, python: str | None = None,
                 package_root: str | None = None) -> None:
        self.config_path = config_path
        # where the `runner` package it starts lives (the benchmark runs another checkout's beside this one)
        self.package_root = package_root or PACKAGE_ROOT
        self.allow_unsandboxed = allow_unsandboxed
        self.startup_timeout = startup_timeout
        self.python = python or sys.executable
        self.proc: subprocess.Popen[bytes] | None = None
        self.client: RunnerClient | None = None
        self.log: deque[str] = deque(maxlen=200)

    def start_blocking(self) -> RunnerClient:
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Start the child (in the calling thread: its death signal is tied to this thread)."""
        port = _free_port()
        token = secrets.token_urlsafe(24)
        env = dict(os.environ, RUNNER_TOKEN=token,
                   PYTHONPATH=self.package_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        args = [self.python, "-m", "runner", "serve", "--host", "127.0.0.1", "--port", str(port)]
        if self.config_path:
            args += ["--config", self.config_path]
        if self.allow_unsandboxed:
            args.append("--allow-unsandboxed")
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
                                     # `-m runner` looks in the working directory first
                                     cwd=None if self.package_root == PACKAGE_ROOT else self.package_root)
        self._ready = threading.Event()
        self._url, self._token = f"http://127.0.0.1:{port}", token
        threading.Thread(target=self._read_log, args=(self._ready,), daemon=True).start()

    def wait_ready(self) -> RunnerClient:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop_blocking()
                raise RunnerUnavailable("the embedded runner did not start:\n" + "".join(self.log))
        self.client = RunnerClient(self._url, self._token, timeout=60.0)
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
        self.spawn()  # here, not in the executor: see the module's note on the death signal
        return await asyncio.get_running_loop().run_in_executor(None, self.wait_ready)

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        await asyncio.get_running_loop().run_in_executor(None, self.stop_blocking)

    async def __aenter__(self) -> RunnerClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> RunnerClient:
        return self.start_blocking()

    def __exit__(self, *exc: object) -> None:
        self.stop_blocking()
