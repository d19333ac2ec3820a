"""`python -m bot console [...]` plays in the terminal; `python -m bot check-config FILE` validates a config."""
from __future__ import annotations

import sys


def check_config(argv: list[str]) -> int:
    import argparse

    from .config import ConfigError, load_config

    p = argparse.ArgumentParser(prog="python -m bot check-config",
                                description="Validate a bot config without starting anything.")
    p.add_argument("config")
    p.add_argument("--no-env", action="store_true", help="do not require the secrets' environment variables")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, check_env=not args.no_env)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    runners = ", ".join(r.name for r in cfg.runners) or ("embedded" if cfg.embedded.enabled else "none")
    print(f"{args.config}: OK (database {cfg.database}; runners: {runners}; "
          f"discord {'on' if cfg.discord.enabled else 'off'}, slack {'on' if cfg.slack.enabled else 'off'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m bot {console,check-config} ...  (python -m bot console --help)"
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "console":
        from .platforms.console import main as console_main

        return console_main(rest)
    if cmd == "check-config":
        return check_config(rest)
    print(f"unknown command {cmd!r}\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
