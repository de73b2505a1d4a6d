"""Helpers for tests of files over pipes and sockets on every engine and both loops:
each test runs its coroutine on a fresh loop (asyncio's or ringio's) with the engine
forced by RINGIO_ENGINE."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

import ringio
import ringio._engines as engines

ENGINES = ["uring", "aio", "thread"]
LOOPS = ["asyncio", "ringio"]


def unavailable(name: str) -> str | None:
    return None if name == "thread" else engines._usable(name)


@pytest.fixture(params=[f"{e}-{lp}" for e in ENGINES for lp in LOOPS])
def run(request, monkeypatch) -> Iterator[Callable[[Coroutine[Any, Any, Any]], Any]]:
    """Runs a coroutine to completion on the engine and loop of the parameter."""
    name, loop_kind = request.param.split("-")
    why = unavailable(name)
    if why:
        pytest.skip(f"{name} engine unavailable: {why}")
    monkeypatch.setenv("RINGIO_ENGINE", name)
    engines.reset()

    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        loop = ringio.new_event_loop() if loop_kind == "ringio" else asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(coro)
            assert engines.get(loop).name == name
            return result
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    try:
        yield runner
    finally:
        engines.reset()


def stream(kind: str) -> tuple[int, Any]:
    """(read end fd, write end: an fd or a socket) of a pipe or a socketpair."""
    if kind == "pipe":
        return os.pipe()
    a, b = socket.socketpair()
    return a.detach(), b


def send(w: Any, data: bytes) -> None:
    if isinstance(w, socket.socket):
        w.sendall(data)
    else:
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]


def close_writer(w: Any) -> None:
    if isinstance(w, socket.socket):
        w.close()
    else:
        os.close(w)


async def blocked(task: asyncio.Task[Any], delay: float = 0.05) -> None:
    """Lets `task` run until it waits for more input."""
    await asyncio.sleep(delay)
    assert not task.done()
