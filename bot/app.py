"""`python -m bot run --config CONFIG`: the bot as deployed, on every platform the config enables.

Start-up refuses a bad config (every problem with its key path), a missing token or a broken
bank before connecting anywhere, so a deployment fails loudly at once instead of at 09:00.
While running it touches a heartbeat file that `python -m bot health` (the container's
healthcheck) reads.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from .config import Config, ConfigError, load_config
from .core.models import ChannelRef, Message
from .core.runners import RunnerPool
from .core.service import QuizService
from .runtime import embedded_slot, load_bank_or_report, remote_slots

log = logging.getLogger("bot")

HEARTBEAT_EVERY_S = 15.0
HEARTBEAT_STALE_S = 90.0


def heartbeat_path(cfg: Config) -> Path:
    return Path(cfg.database).resolve().parent / "bot.heartbeat"


class PlatformRouter:
    """The service's single sink, handing each message to its channel's platform."""

    def __init__(self) -> None:
        self.sinks: dict[str, Any] = {}

    async def __call__(self, ref: ChannelRef, msg: Message) -> str | None:
        sink = self.sinks.get(ref.platform)
        if sink is None:  # a platform switched off in the config: its channels are dormant
            log.warning("no %s adapter running; dropping a %s message for %s", ref.platform, msg.kind, ref)
            return None
        return await sink(ref, msg)


def build_adapters(cfg: Config, service: QuizService) -> dict[str, tuple[Any, Any]]:
    """platform -> (adapter, coroutine function that runs it). Secrets are read here."""
    out: dict[str, tuple[Any, Any]] = {}
    if cfg.discord.enabled:
        from .platforms.discord_app import DiscordAdapter

        token = cfg.secret(cfg.discord.token_env)
        d = DiscordAdapter(service, cfg.discord)
        out["discord"] = (d, lambda: d.start(token))
    if cfg.slack.enabled:
        from .platforms.slack_app import SlackAdapter

        s = SlackAdapter(
            service, cfg.slack, bot_token=cfg.secret(cfg.slack.bot_token_env),
            app_token=cfg.secret(cfg.slack.app_token_env) if cfg.slack.mode == "socket" else None,
            signing_secret=cfg.secret(cfg.slack.signing_secret_env) if cfg.slack.mode == "http" else None,
            base_url=cfg.slack.api_url)
        out["slack"] = (s, s.start)
    return out


async def heartbeat(path: Path, service: QuizService) -> None:
    while True:
        with contextlib.suppress(OSError):
            path.write_text(f"{time.time():.0f} {service.pool.describe()}\n", encoding="utf-8")
        await asyncio.sleep(HEARTBEAT_EVERY_S)


async def run_bot(config_path: str, *, err: TextIO | None = None, stop: asyncio.Event | None = None) -> int:
    err = err or sys.stderr
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        err.write(f"{exc}\n")
        return 2
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not (cfg.discord.enabled or cfg.slack.enabled):
        err.write(f"{config_path}: no platform is enabled: set discord.enabled or slack.enabled to true "
                  "(or play locally with `python -m bot console`)\n")
        return 2
    bank = load_bank_or_report(cfg, err)
    if bank is None:
        return 2
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        slots = remote_slots(cfg)
        if cfg.embedded.enabled:
            slot = await embedded_slot(cfg, stack, err)
            if slot is not None:
                slots.append(slot)
        if not slots:
            log.warning("no runner configured: only choice items will be posted")
        router = PlatformRouter()
        Path(cfg.database).resolve().parent.mkdir(parents=True, exist_ok=True)
        service = await QuizService.open(cfg.database, bank, RunnerPool(slots), settings=cfg.core, sink=router)
        stack.push_async_callback(service.close)
        try:
            adapters = build_adapters(cfg, service)
        except ConfigError as exc:
            err.write(f"{config_path}: {exc.problems[0]}\n")
            return 2
        for platform, (adapter, _run) in adapters.items():
            router.sinks[platform] = adapter.sink
            stack.push_async_callback(adapter.stop)
        await service.start()
        log.info("quiz bot running: %s; runners: %s", ", ".join(adapters), service.pool.describe())
        tasks = {asyncio.create_task(run(), name=f"platform-{p}"): p for p, (_a, run) in adapters.items()}
        tasks[asyncio.create_task(heartbeat(heartbeat_path(cfg), service), name="heartbeat")] = "heartbeat"
        stopper = asyncio.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        for task in done:
            if task is stopper:
                continue
            failure = task.exception() if not task.cancelled() else None
            err.write(f"{tasks[task]} stopped: {failure or 'returned'}; shutting down\n")
            code = 1
        for task in [stopper, *tasks]:
            task.cancel()
        for task in [stopper, *tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        heartbeat_path(cfg).unlink(missing_ok=True)
    return code


def health(config_path: str, out: TextIO) -> int:
    """Exit 0 when the running bot's heartbeat is fresh (the container healthcheck)."""
    try:
        cfg = load_config(config_path, check_env=False)
    except ConfigError as exc:
        out.write(f"{exc}\n")
        return 2
    path = heartbeat_path(cfg)
    try:
        stamp, _, runners = path.read_text(encoding="utf-8").partition(" ")
        age = time.time() - float(stamp)
    except (OSError, ValueError):
        out.write(f"unhealthy: no heartbeat at {path} (is the bot running?)\n")
        return 1
    if age > HEARTBEAT_STALE_S:
        out.write(f"unhealthy: last heartbeat {age:.0f} s ago\n")
        return 1
    out.write(f"ok: heartbeat {age:.0f} s ago; runners: {runners.strip()}\n")
    return 0
