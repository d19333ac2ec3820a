"""Torch-free HTTP client for the runner, used by the bot and by `questionbank check --runner`.

One connection pool per event loop, kept alive between requests (a grading is a few ms of
work: a new TCP connection per request was a measurable share of it). `close()` closes it; a
client used from another event loop (a test's) opens a new pool there.
"""
from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

# Idle connections are dropped by the client before the runner's server does (aiohttp: 75 s),
# so a request never goes out on a connection the server is closing.
KEEPALIVE_S = 30.0


class RunnerUnavailable(RuntimeError):
    """The runner could not be reached or answered with an error: try again later."""


class RunnerClient:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _pool(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is not None and self._loop is loop and not self._session.closed:
            return self._session
        self._drop()
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            connector=aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_S))
        self._loop = loop
        return self._session

    def _drop(self) -> None:
        """Forget a pool made on another (usually finished) event loop, closing what can be."""
        session, self._session, self._loop = self._session, None, None
        if session is None or session.closed:
            return
        connector = session.connector
        session.detach()  # closed, without waiting on the loop it belongs to
        if connector is not None:
            connector._close()  # noqa: SLF001 - the synchronous part of close(); no await on a dead loop

    async def close(self) -> None:
        session, self._session, self._loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()

    async def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        for attempt in (1, 2):
            try:
                async with self._pool().request(method, self.url + path, json=body, headers=self._headers()) as resp:
                    if resp.status == 503:
                        retry = resp.headers.get("Retry-After", "")
                        raise RunnerUnavailable(f"runner busy (retry after {retry or '?'} s)")
                    if resp.status == 401:
                        raise RunnerUnavailable("the runner refused our token (check the token env var)")
                    if resp.status >= 400:
                        text = (await resp.text())[:300]
                        raise RunnerUnavailable(f"runner answered HTTP {resp.status}: {text}")
                    result: dict[str, Any] = await resp.json()
                    return result
            except aiohttp.ServerDisconnectedError as e:
                # a kept-alive connection the server had just closed: once more on a new one
                if attempt == 1:
                    continue
                raise RunnerUnavailable(f"cannot reach the runner at {self.url}: {e or type(e).__name__}") from None
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                raise RunnerUnavailable(f"cannot reach the runner at {self.url}: {e or type(e).__name__}") from None
        raise AssertionError("unreachable")

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", "/v1/grade", job)

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/health")
