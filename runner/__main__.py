"""`python -m runner serve|grade|health`."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from .config import ConfigError, RunnerConfig, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner", description="Sandboxed torch grading service")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--config", help="runner YAML file (see runner/runner.example.yaml)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--allow-unsandboxed", action="store_true",
                       help="run without a sandbox if none is available (local play only)")
    grade = sub.add_parser("grade", help="grade one job locally and print the result JSON")
    grade.add_argument("job", help="job JSON file, or - for stdin")
    grade.add_argument("--config")
    health = sub.add_parser("health", help="start the sandbox once and print capabilities")
    health.add_argument("--config")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"runner: bad config:\n{e}", file=sys.stderr)
        return 2
    if args.cmd == "serve":
        from dataclasses import replace

        from .server import serve_forever
        over = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
        if args.allow_unsandboxed:
            over["allow_unsandboxed"] = True
        return asyncio.run(serve_forever(replace(config, **over)))
    if args.cmd == "grade":
        text = sys.stdin.read() if args.job == "-" else open(args.job).read()
        return asyncio.run(_grade_once(config, json.loads(text)))
    return asyncio.run(_health(config))


async def _grade_once(config: RunnerConfig, job: dict) -> int:
    from .engine import Engine, JobError
    from .sandbox import SandboxError
    try:
        async with Engine(config) as engine:
            result = await engine.grade(job)
    except (SandboxError, JobError) as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if result["verdict"] == "passed" else 1


async def _health(config: RunnerConfig) -> int:
    from .engine import Engine
    from .sandbox import SandboxError
    try:
        async with Engine(config) as engine:
            print(json.dumps(engine.health(), indent=2))
    except SandboxError as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
