"""Build what every entry point needs from a Config: the runner pool and the bank.

`python -m bot console` and `python -m bot run` start the same way; keeping it here means a
runner option or a bank check is added once.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO

from .config import Config
from .core.runners import RunnerSlot


def remote_slots(cfg: Config) -> list[RunnerSlot]:
    """The config's remote runners (tokens from their environment variables)."""
    from runner.client import RunnerClient

    return [RunnerSlot(r.name, RunnerClient(r.url, os.environ.get(r.token_env), r.timeout_s),
                       cuda=r.cuda, cuda_hint=bool(r.cuda)) for r in cfg.runners]


async def embedded_slot(cfg: Config, stack: contextlib.AsyncExitStack, err: TextIO, *,
                        allow_unsandboxed: bool = False) -> RunnerSlot | None:
    """Start a local runner subprocess (needs torch next to the bot); None when it cannot start,
    with the reason written to `err`."""
    from runner.client import RunnerUnavailable
    from runner.embedded import EmbeddedRunner

    err.write("starting the local runner (sandboxed torch; a few seconds)...\n")
    err.flush()
    try:
        client = await stack.enter_async_context(EmbeddedRunner(
            allow_unsandboxed=allow_unsandboxed or cfg.embedded.allow_unsandboxed,
            config_path=cfg.embedded.config))
    except RunnerUnavailable as exc:
        err.write(f"the local runner did not start:\n{exc}\n")
        return None
    return RunnerSlot("local", client)


def load_bank_or_report(cfg: Config, err: TextIO) -> Any | None:
    """The question bank, or None after writing its problems (file:line) to `err`."""
    from questionbank.loader import BankError, load_bank

    try:
        return load_bank(cfg.bank_root)
    except BankError as exc:
        err.write(f"the question bank has problems:\n{exc}\n")
        return None
