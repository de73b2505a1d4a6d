"""Every Watcher test runs in three modes (the ``wmode`` fixture):

* ``sync``: a Watcher with its own ring, driven by ``wait_io`` (blocking);
* ``asyncio``: a Watcher with its own ring, awaited on a plain asyncio loop
  (``wait_io_async``: ``add_reader`` on the ring's eventfd);
* ``ringloop``: a Watcher bound to a ``ringio.EventLoop``, awaited there: its SQEs
  and CQEs go through the loop's ring and select.

In the two awaiting modes the tests' ``w.wait_io(t)`` calls run the loop until
``wait_io_async()`` returns (or ``t`` passes), so the tests read the same.
"""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ringio

MODES = ("sync", "asyncio", "ringloop")


async def _await(w: ringio.Watcher, timeout: float | None) -> list[ringio.OpResult]:
    if timeout == 0:
        # One loop iteration (its select submits and reaps), then what is ready.
        await asyncio.sleep(0)
        return w._poll()
    try:
        async with asyncio.timeout(timeout):
            return await w.wait_io_async()
    except TimeoutError:
        return []


class AwaitedWatcher(ringio.Watcher):
    """A Watcher whose ``wait_io`` awaits ``wait_io_async`` on the test's loop."""

    test_loop: asyncio.AbstractEventLoop

    def wait_io(self, timeout: float | None = None) -> list[ringio.OpResult]:
        bad = timeout is not None and (not isinstance(timeout, int | float) or not timeout >= 0)
        if bad or self.closed or (timeout is not None and math.isnan(timeout)):
            return super().wait_io(timeout)  # the same errors, and the last results
        return self.test_loop.run_until_complete(_await(self, timeout))


class WatcherEnv:
    """Makes the test's Watchers in one mode and closes them (and the loop) after."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.loop: asyncio.AbstractEventLoop | None = None
        if mode == "asyncio":
            self.loop = asyncio.SelectorEventLoop()
        elif mode == "ringloop":
            self.loop = ringio.new_event_loop()
        self.watchers: list[ringio.Watcher] = []

    def make(self, *args: Any, **kw: Any) -> ringio.Watcher:
        if self.loop is None:
            w = ringio.Watcher(*args, loop=False, **kw)
        else:
            share = self.loop if self.mode == "ringloop" else False
            w = AwaitedWatcher(*args, loop=share, **kw)
            w.test_loop = self.loop
            assert (w.loop is not None) == (self.mode == "ringloop")
        self.watchers.append(w)
        return w

    def close(self) -> None:
        for w in self.watchers:
            w.close()
        if self.loop is not None:
            self.loop.close()


@pytest.fixture(params=MODES)
def wenv(request: pytest.FixtureRequest) -> Iterator[WatcherEnv]:
    env = WatcherEnv(request.param)
    try:
        yield env
    finally:
        env.close()


@pytest.fixture
def make_watcher(wenv: WatcherEnv) -> Callable[..., ringio.Watcher]:
    """``ringio.Watcher(...)`` in the test's mode."""
    return wenv.make


@pytest.fixture
def watcher(wenv: WatcherEnv) -> ringio.Watcher:
    return wenv.make()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4096)
    try:
        yield ls
    finally:
        ls.close()
