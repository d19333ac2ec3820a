"""HTTP face of the runner: /v1/grade, /v1/health, /metrics, with a token and a bounded queue."""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
from typing import Any

from aiohttp import web

from .config import RunnerConfig
from .engine import Engine, JobError
from .protocol import Result, Verdict
from .sandbox import SandboxError

log = logging.getLogger("runner.server")
ENGINE = web.AppKey("engine", Engine)
STATE = web.AppKey("state", dict)


def make_app(engine: Engine, config: RunnerConfig, token: str | None) -> web.Application:
    app = web.Application(client_max_size=config.max_request_kb * 1024)
    app[ENGINE] = engine
    app[STATE] = {"pending": 0}

    def authorised(request: web.Request) -> bool:
        if token is None:
            return True
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    async def grade(request: web.Request) -> web.Response:
        if not authorised(request):
            engine.metrics["rejected_auth"] += 1
            return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        state = request.app[STATE]
        if state["pending"] >= config.queue_size:
            engine.metrics["rejected_busy"] += 1
            return web.json_response({"error": "runner busy, retry later"}, status=503,
                                     headers={"Retry-After": "2"})
        try:
            job: Any = await request.json()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response({"error": f"job larger than {config.max_request_kb} KiB"}, status=413)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "the body is not valid JSON"}, status=400)
        state["pending"] += 1
        try:
            result = await engine.grade(job)
        except JobError as e:
            return web.json_response({"error": str(e)}, status=400)
        except Exception as e:  # noqa: BLE001 - never a 500 without a verdict the bot can retry
            log.exception("grading failed")
            result = Result(Verdict.INTERNAL, f"runner fault: {type(e).__name__}").to_json()
        finally:
            state["pending"] -= 1
        return web.json_response(result)

    async def health(request: web.Request) -> web.Response:
        body = engine.health()
        body["queue"] = {"pending": request.app[STATE]["pending"], "size": config.queue_size}
        return web.json_response(body, status=200 if body["status"] == "ok" else 503)

    async def metrics(request: web.Request) -> web.Response:
        text = engine.metrics_text() + f"# TYPE runner_pending gauge\nrunner_pending {request.app[STATE]['pending']}\n"
        return web.Response(text=text, content_type="text/plain")

    app.router.add_post("/v1/grade", grade)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/metrics", metrics)
    return app


async def serve_forever(config: RunnerConfig) -> int:
    token = config.token()
    if token is None:
        log.error("no token: set the environment variable %s (the bot sends it as a bearer token)", config.token_env)
        return 2
    try:
        engine = Engine(config)
        await engine.start()
    except SandboxError as e:
        log.error("%s", e)
        return 2
    app = make_app(engine, config, token)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    sockets = getattr(site._server, "sockets", None)  # the port the OS picked when config.port is 0
    port = sockets[0].getsockname()[1] if sockets else config.port
    print(f"runner listening on http://{config.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    await engine.close()
    return 0
