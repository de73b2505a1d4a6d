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
from ringio._proactor import LoopRingProactor

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


# -- helpers for tests that watch the engine's kernel queue ----------------------------


def kernel_queue(engine):
    if engine.name == "thread":
        pytest.skip("the thread engine has no kernel queue")
    return engine._queue


def eventfd_queue(engine):
    """The engine's own kernel queue and its eventfd (not on ringio's loop, where
    file ops ride the loop's ring: tests/loop/test_loop_files.py)."""
    queue = kernel_queue(engine)
    if isinstance(engine._proactor, LoopRingProactor):
        pytest.skip("on ringio's loop file ops have no queue or eventfd of their own")
    return queue


async def until(predicate, what: str) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def cancel_with_completions_held(engine, start, in_flight: int, buf: bytearray) -> None:
    """Runs ``start()`` as a task with the engine's completion delivery held back,
    cancels it once `in_flight` ops are in the kernel, and checks that `buf` (which
    they read into) stays exported until their completions have been reaped."""
    queue = eventfd_queue(engine)
    loop = asyncio.get_running_loop()
    loop.remove_reader(queue.fileno())
    try:
        task = asyncio.ensure_future(start())
        await until(lambda: queue.in_flight == in_flight, "the reads reached the kernel")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(BufferError):
            buf.extend(b"x")  # the kernel may still write into it
    finally:
        loop.add_reader(queue.fileno(), engine._proactor._on_completions)
    await until(lambda: queue.in_flight == 0, "the completions were reaped")
    buf.extend(b"x")  # released with the completions
    del buf[-1:]
