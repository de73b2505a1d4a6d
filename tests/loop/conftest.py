from __future__ import annotations

import asyncio

import pytest

import ringio


@pytest.fixture
def loop():
    """A fresh ringio loop, closed (after its async generators and executor) at the end."""
    lp = ringio.new_event_loop()
    yield lp
    if not lp.is_closed():
        if not lp.is_running():
            lp.run_until_complete(lp.shutdown_asyncgens())
            lp.run_until_complete(lp.shutdown_default_executor())
        lp.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def run(loop):
    """run(coro, timeout=10): run a coroutine on the ringio loop, bounded."""

    def runner(coro, timeout: float = 10.0):
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))

    return runner
