"""Torch-free HTTP client for the runner, used by the bot and by `questionbank check --runner`."""
from __future__ import annotations

from typing import Any

import aiohttp


class RunnerUnavailable(RuntimeError):
    """The runner could not be reached or answered with an error: try again later."""


class RunnerClient:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.request(method, self.url + path, json=body, headers=self._headers()) as resp:
                    if resp.status == 503:
                        retry = resp.headers.get("Retry-After", "")
                        raise RunnerUnavailable(f"runner busy (retry after {retry or '?'} s)")
                    if resp.status == 401:
                        raise RunnerUnavailable("the runner refused our token (check the token env var)")
                    if resp.status >= 400:
                        text = (await resp.text())[:300]
                        raise RunnerUnavailable(f"runner answered HTTP {resp.status}: {text}")
                    return await resp.json()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise RunnerUnavailable(f"cannot reach the runner at {self.url}: {e or type(e).__name__}") from None

    async def grade(self, job: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", "/v1/grade", job)

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/health")
