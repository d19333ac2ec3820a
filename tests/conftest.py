"""Shared fixtures: one real, sandboxed runner for the whole session, reached over HTTP."""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from runner.client import RunnerClient
from runner.embedded import EmbeddedRunner


@pytest.fixture(scope="session")
def runner_service() -> Iterator[EmbeddedRunner]:
    runner = EmbeddedRunner()
    runner.start_blocking()
    yield runner
    runner.stop_blocking()


@pytest.fixture(scope="session")
def runner_client(runner_service: EmbeddedRunner) -> RunnerClient:
    assert runner_service.client is not None
    return runner_service.client


@pytest.fixture(autouse=True)
async def _close_runner_connections(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """The session's client keeps its connections alive on each test's event loop: close them
    before that loop ends."""
    yield
    if "runner_client" in request.fixturenames:
        await request.getfixturevalue("runner_client").close()
