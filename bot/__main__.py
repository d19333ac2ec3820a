"""`python -m bot run --config FILE` runs the bot on Discord/Slack; `console` plays in the terminal;
`check-config FILE` validates a config; `health --config FILE` is the container healthcheck."""
from __future__ import annotations

import sys


def check_config(argv: list[str]) -> int:
    import argparse

    from .config import ConfigError, load_config

    p = argparse.ArgumentParser(prog="python -m bot check-config",
                                description="Validate a bot config without starting anything.")
    p.add_argument("config", nargs="?", help="the YAML config (or --config FILE, as for the other commands)")
    p.add_argument("--config", dest="config_opt", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--no-env", action="store_true", help="do not require the secrets' environment variables")
    args = p.parse_args(argv)
    if (args.config is None) == (args.config_opt is None):
        p.error("give the config file once: python -m bot check-config FILE")
    args.config = args.config or args.config_opt
    try:
        cfg = load_config(args.config, check_env=not args.no_env, dotenv=True)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    runners = ", ".join(r.name for r in cfg.runners) or ("embedded" if cfg.embedded.enabled else "none")
    print(f"{args.config}: OK (database {cfg.database}; runners: {runners}; "
          f"discord {'on' if cfg.discord.enabled else 'off'}, slack {'on' if cfg.slack.enabled else 'off'})")
    return 0


def backup(config: str, dest: str) -> int:
    from .config import ConfigError, load_config
    from .storage.db import backup_file

    try:
        cfg = load_config(config, check_env=False)
        pages = backup_file(cfg.database, dest)
    except (ConfigError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{cfg.database} -> {dest} ({pages} pages)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """A database the bot cannot use at all (not a database, damaged, read-only, from a newer
    version, in use by another process) ends it with the file, the cause and the fix: exit 3."""
    from .storage.faults import StorageError

    try:
        return _main(argv)
    except StorageError as exc:
        print(f"cannot start: {exc}", file=sys.stderr)
        return 3


def _main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = ("usage: python -m bot {run,console,check-config,health,backup} ...\n"
             "  run --config FILE       the bot on every platform the config enables\n"
             "  console [--help]        play in the terminal (embedded runner, local SQLite file)\n"
             "  check-config FILE       validate a config without starting anything\n"
             "  health --config FILE    exit 0 when the running bot's heartbeat is fresh\n"
             "  backup --config FILE DEST   a consistent copy of the live SQLite file")
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "console":
        from .platforms.console import main as console_main

        return console_main(rest)
    if cmd == "check-config":
        return check_config(rest)
    if cmd in ("run", "health", "backup"):
        import argparse

        p = argparse.ArgumentParser(prog=f"python -m bot {cmd}")
        p.add_argument("--config", required=True, help="the bot's YAML config (see config.example.yaml)")
        if cmd == "backup":
            p.add_argument("dest", help="the copy to write (must not exist)")
        args = p.parse_args(rest)
        if cmd == "backup":
            return backup(args.config, args.dest)
        if cmd == "health":
            from .app import health

            return health(args.config, sys.stdout)
        import asyncio

        from .app import run_bot

        try:
            return asyncio.run(run_bot(args.config))
        except KeyboardInterrupt:
            return 130
    print(f"unknown command {cmd!r}\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
