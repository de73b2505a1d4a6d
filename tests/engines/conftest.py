"""Runs a test module against every file engine: uring, aio and thread."""

from __future__ import annotations

import pytest

import ringio._engines as engines


def available(name: str) -> str | None:
    return None if name == "thread" else engines._usable(name)


@pytest.fixture(params=["uring", "aio", "thread"])
def engine_name(request, monkeypatch):
    why = available(request.param)
    if why:
        pytest.skip(f"{request.param} engine unavailable: {why}")
    monkeypatch.setenv("RINGIO_ENGINE", request.param)
    engines.reset()
    yield request.param
    engines.reset()


@pytest.fixture
async def engine(engine_name):
    return engines.get()
