"""Play the quiz in a terminal: one local channel, any number of players, the same commands.

Input lines: `name: text` speaks as that user, a plain line as the default user. A line
starting with `/quiz` is a command; anything else is a chat message (a ```python block, inline
code or an option key answers the open round). A fenced block may span several lines. Lines
starting with `:` talk to the console itself (`:advance 1d` with a fake clock, `:quit`).

With stdin from a pipe the console waits for each line's gradings before reading the next,
so a script's output is deterministic; interactively, results arrive as they are graded.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from ..core.clock import Clock, FakeClock, SystemClock
from ..core.commands import parse_duration
from ..core.models import Actor, ChannelRef, Message
from ..core.roles import RoleRules
from ..core.runners import RunnerPool, RunnerSlot
from ..core.service import QuizService
from ..core.settings import CoreSettings
from ..runtime import embedded_slot, load_bank_or_report, remote_slots

PLATFORM = "console"
_SPEAKER = re.compile(r"^([A-Za-z][A-Za-z0-9_.\-]{0,31}):(?:\s(.*)|)$", re.DOTALL)


def split_speaker(line: str, default: str) -> tuple[str, str]:
    """`alice: hi` -> ("alice", "hi"); anything else is the default user's."""
    m = _SPEAKER.match(line)
    if m and not line.startswith(("http:", "https:")):
        return m.group(1), (m.group(2) or "")
    return default, line


class Console:
    """The adapter: reads utterances, calls the service, prints what the bot says."""

    def __init__(self, service: QuizService, out: TextIO, *, channel: ChannelRef, default_user: str,
                 files_dir: Path, wait: bool) -> None:
        self.svc = service
        self.out = out
        self.channel = channel
        self.default_user = default_user
        self.files_dir = files_dir
        self.wait = wait
        self.interactive = False
        self._prompt = ""  # the prompt on screen while waiting for input ("" when none)
        self.svc.sink = self.sink

    # -- output

    def print(self, text: str) -> None:
        """A line of output. A result that arrives while the prompt waits for input goes above
        it, and the prompt is shown again after it."""
        if self._prompt:
            self.out.write("\r" + " " * len(self._prompt) + "\r")
        self.out.write(text.rstrip("\n") + "\n")
        if self._prompt:
            self.out.write(self._prompt)
        self.out.flush()

    def prompt(self, text: str) -> None:
        if self.interactive:
            self._prompt = text
            self.out.write(text)
            self.out.flush()

    def render(self, msg: Message, to: str | None = None) -> str:
        head = "[bot"
        if msg.dm and msg.mention:
            head += f" -> direct message to {msg.mention}"
        elif msg.ephemeral and to:
            head += f" -> {to} only"
        elif msg.mention:
            head += f" -> @{msg.mention}"
        head += "]"
        body = msg.text
        lines = [f"{head} {body.splitlines()[0] if body else ''}"] + body.splitlines()[1:]
        for f in msg.files:
            self.files_dir.mkdir(parents=True, exist_ok=True)
            path = self.files_dir / f.filename
            path.write_bytes(f.data)
            lines.append(f"  (attachment: {path}, {len(f.data):,} bytes)")
        return "\n".join(lines)

    async def sink(self, ref: ChannelRef, msg: Message) -> str | None:
        self.print(self.render(msg, to=msg.mention if msg.ephemeral else None))
        return f"console-thread-{msg.round_id}" if msg.kind == "round_open" else None

    # -- input

    async def handle(self, user: str, text: str) -> bool:
        """One utterance; False means quit."""
        text = text.strip("\n")
        if not text.strip():
            return True
        actor = Actor(PLATFORM, user, user)
        stripped = text.strip()
        if stripped.startswith(":"):
            return await self.directive(stripped)
        if stripped.startswith("/"):  # the core reads `/quiz ...` and says what a typo meant
            replies = await self.svc.command(actor, self.channel, stripped)
        else:
            replies = await self.svc.message(actor, self.channel, text)
        for msg in replies:
            self.print(self.render(msg, to=user))
        if self.wait:
            await self.svc.settle()
        else:
            await self.svc.deliver()
        return True

    async def directive(self, line: str) -> bool:
        word, _, arg = line[1:].partition(" ")
        if word in ("quit", "exit", "q"):
            return False
        if word == "advance":
            if not isinstance(self.svc.clock, FakeClock):
                self.print("[console] :advance needs a fake clock: start with --start 2025-01-06T08:00+00:00")
                return True
            try:
                minutes = parse_duration(arg.strip() or "1d") if arg.strip() != "0" else 0
            except ValueError as exc:
                self.print(f"[console] {exc}")
                return True
            await self.advance(timedelta(minutes=minutes))
            return True
        if word == "time":
            self.print(f"[console] now {self.svc.clock.now().isoformat(timespec='minutes')}")
            return True
        self.print("[console] directives: :advance DURATION (fake clock), :time, :quit "
                   "(inside an unclosed ``` block: :cancel drops it)")
        return True

    async def advance(self, delta: timedelta) -> None:
        """Move a fake clock in steps of at most an hour, ticking on the way, so rounds open and
        close at their times as they would in a real week."""
        clock = self.svc.clock
        assert isinstance(clock, FakeClock)
        end = clock.now() + delta
        while clock.now() < end:
            clock.advance(min(timedelta(hours=1), end - clock.now()))
            await self.svc.settle()
        self.print(f"[console] now {clock.now().isoformat(timespec='minutes')}")

    async def run(self, stdin: TextIO, *, interactive: bool) -> None:
        loop = asyncio.get_running_loop()
        self.interactive = interactive

        async def readline(prompt: str) -> str:
            self.prompt(prompt)
            try:
                if interactive:
                    return await loop.run_in_executor(None, stdin.readline)
                return stdin.readline()
            finally:
                self._prompt = ""

        while True:
            line = await readline("> ")
            if not line:
                break
            user, first = split_speaker(line.rstrip("\n"), self.default_user)
            text, go_on = await self.rest_of_block(user, first, readline)
            if text is None:
                if not go_on:
                    break
                continue
            if not await self.handle(user, text) or not go_on:
                break
        await self.svc.settle()
        report = await self.svc.pending_report()  # the core says what becomes of them
        if report:
            self.print(f"[console] {report}")

    async def rest_of_block(self, user: str, text: str, readline: Any) -> tuple[str | None, bool]:
        """An open ``` fence: the block goes on over the next lines, under a `...` prompt, until
        the closing fence. `:quit` there still quits and `:cancel` drops the block; at the end
        of the input an unclosed block is sent as it is, and said so. Returns (the text to
        handle or None, whether to read on)."""
        while text.count("```") % 2 == 1:
            more = await readline("... ")
            if not more:
                self.print(f"[console] {user}'s ``` block was never closed; sent as it is.")
                return text, False
            word = more.strip()
            if word in (":quit", ":exit", ":q"):
                self.print(f"[console] {user}'s unclosed ``` block was not sent.")
                return None, False
            if word == ":cancel":
                self.print(f"[console] {user}'s unclosed ``` block was dropped.")
                return None, True
            text += "\n" + more.rstrip("\n")
        return text, True


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bot console", description="Play the quiz in the terminal.")
    p.add_argument("--db", default=None, help="SQLite file (default: the config's, or data/quiz.sqlite3)")
    p.add_argument("--as", dest="user", default="you", help="the default user's name (default: you)")
    p.add_argument("--moderator", action="append", default=[],
                   help="a user with moderator and manager rights (repeatable; default: the default user)")
    p.add_argument("--config", default=None, help="a bot config YAML (roles, scoring, schedule defaults, runners)")
    p.add_argument("--runner", default=None, help="use the runner at this URL (token from $RUNNER_TOKEN) "
                                                   "instead of starting a local one")
    p.add_argument("--no-runner", action="store_true", help="no runner at all: only choice items are played")
    p.add_argument("--allow-unsandboxed", action="store_true",
                   help="let the local runner run without its sandbox (only on your own machine)")
    p.add_argument("--start", default=None,
                   help="use a fake clock starting at this ISO time; `:advance 1d` moves it (scripts, demos)")
    p.add_argument("--wait", choices=("auto", "yes", "no"), default="auto",
                   help="wait for each line's gradings before the next (default: when stdin is not a terminal)")
    return p


async def run_console(argv: list[str], *, stdin: TextIO | None = None, stdout: TextIO | None = None,
                      bank: Any = None, runner_client: Any = None, clock: Clock | None = None) -> int:
    """Entry point; tests inject the streams, a bank, a runner client and a clock."""
    args = build_parser().parse_args(argv)
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    err = sys.stderr if stdout is None else out
    from ..config import Config, ConfigError, load_config

    try:
        cfg = load_config(args.config, check_env=False) if args.config else Config()
    except ConfigError as exc:
        err.write(f"{exc}\n")
        return 2
    if bank is None:
        bank = load_bank_or_report(cfg, err)
        if bank is None:
            return 2
    if clock is None:
        if args.start:
            try:
                start = datetime.fromisoformat(args.start)
                if start.tzinfo is None:
                    raise ValueError("give a time zone offset, e.g. +00:00")
            except ValueError as exc:
                err.write(f"--start: {exc}\n")
                return 2
            clock = FakeClock(start)
        else:
            clock = SystemClock()
    moderators = set(args.moderator or [args.user])
    roles = cfg.core.roles
    settings: CoreSettings = replace(cfg.core, roles=RoleRules(
        moderators=roles.moderators | moderators, managers=roles.managers | moderators,
        moderator_roles=roles.moderator_roles, manager_roles=roles.manager_roles,
        admins_are_moderators=roles.admins_are_moderators))
    db_path = args.db or cfg.database
    interactive = stdin.isatty() if hasattr(stdin, "isatty") else False
    wait = {"yes": True, "no": False}.get(args.wait, not interactive)

    async with contextlib.AsyncExitStack() as stack:
        slots: list[RunnerSlot] = []
        if runner_client is not None:
            slots.append(RunnerSlot("test", runner_client))
        elif args.runner:
            import os

            from runner.client import RunnerClient

            slots.append(RunnerSlot("remote", RunnerClient(args.runner, os.environ.get("RUNNER_TOKEN"))))
        elif cfg.runners and not args.no_runner:
            slots.extend(remote_slots(cfg))
        elif not args.no_runner:
            slot = await embedded_slot(cfg, stack, err, allow_unsandboxed=args.allow_unsandboxed)
            if slot is None:
                err.write("playing choice questions only.\n")
            else:
                slots.append(slot)
        service = await QuizService.open(db_path, bank, RunnerPool(slots), clock=clock, settings=settings)
        stack.push_async_callback(service.close)
        ref = ChannelRef(PLATFORM, "local", cfg.console_channel, cfg.console_channel)
        console = Console(service, out, channel=ref, default_user=args.user,
                          files_dir=Path(db_path).resolve().parent / "console-files", wait=wait)
        await service.enable(ref)
        await service.start(background=not wait)
        if interactive:
            out.write(f"Quiz console: #{ref.channel}, database {db_path}, runners: {service.pool.describe()}.\n"
                      f"You are {args.user}; `name: text` speaks as someone else. Try /quiz help, /quiz post.\n")
        await service.settle()
        await console.run(stdin, interactive=interactive)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return asyncio.run(run_console(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        return 130
