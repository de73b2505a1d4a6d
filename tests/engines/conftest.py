"""Runs a test module against every file engine: uring, aio and thread, and the
uring engine on ringio's own event loop (``uring-loop``), where file ops ride the
loop's ring instead of a ring of their own.

A module that imports these fixtures also imports ``event_loop_policy``: the loop
pytest-asyncio makes for each async test then follows the engine parameter. For
``uring-loop`` the global policy is ringio's too while the test runs, so that sync
tests that call ``asyncio.run`` run on ringio's loop as well.
"""

from __future__ import annotations

import asyncio

import pytest

import ringio
import ringio._engines as engines

ENGINE_PARAMS = ["uring", "aio", "thread", "uring-loop"]


def available(name: str) -> str | None:
    return None if name == "thread" else engines._usable(name)


@pytest.fixture(params=ENGINE_PARAMS)
def engine_name(request, monkeypatch):
    name = request.param.removesuffix("-loop")
    why = available(name)
    if why:
        pytest.skip(f"{name} engine unavailable: {why}")
    monkeypatch.setenv("RINGIO_ENGINE", name)
    engines.reset()
    on_ringio_loop = request.param.endswith("-loop")
    if on_ringio_loop:
        old_policy = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(ringio.EventLoopPolicy())
    try:
        yield name
    finally:
        if on_ringio_loop:
            asyncio.set_event_loop_policy(old_policy)
        engines.reset()


@pytest.fixture
def event_loop_policy(request):
    """asyncio's policy, or ringio's for the ``uring-loop`` parameter. (It does not
    request ``engine_name``: a test that does not use the engines runs once.)"""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and str(callspec.params.get("engine_name", "")).endswith("-loop"):
        return ringio.EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()


@pytest.fixture
async def engine(engine_name):
    return engines.get()
