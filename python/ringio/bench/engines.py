"""ringio's engines behind one tiny adapter, so every engine is measured by name.

``async_context(engine, maxevents)`` gives an object with the awaitable methods of
``ringio.aio.AsyncContext`` (read, readinto, write, readv, writev, fsync, fdsync)
over the file engine of that name (``ringio._engines``: uring, aio, thread), so the
workloads stay engine-independent. ``sync_context`` gives the engine's synchronous
kernel queue (``aio.Context`` or ``uring.Ring``: same submit/get_events API).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

ENGINES = ("uring", "aio", "thread")
# A contender name ending so (``ringio[uring] on ringio's loop``) runs on
# ``ringio.EventLoop`` instead of asyncio's default loop.
LOOP_SUFFIX = " on ringio's loop"


def unavailable_reason(name: str) -> str | None:
    """None when engine `name` can run here, else a short reason for the notice."""
    if name not in ENGINES:
        return f"unknown engine (known: {', '.join(ENGINES)})"
    try:
        from ringio import _engines
    except ImportError as exc:
        return f"cannot import ringio: {exc}"
    return None if name == "thread" else _engines._usable(name)


def contender_name(engine: str) -> str:
    """How an engine appears in tables: ``ringio[aio]``."""
    return f"ringio[{engine}]"


class EngineContext:
    """``aio.AsyncContext``'s surface over any file engine."""

    def __init__(self, engine: str) -> None:
        from ringio import _engines
        from ringio._engines.base import NowaitHint

        self._engine = _engines.ENGINES[engine](asyncio.get_running_loop())
        # One hint per fd, as ringio.open keeps one per file: the engine's own (no
        # inline RWF_NOWAIT attempt on O_DIRECT files, see FileEngine.nowait_hint),
        # which then also caches the uring engine's FUSE check. The workloads open
        # and close these fds themselves, so no fd number is reused under a hint.
        self._hints: dict[int, Any] = {}
        self._new_hint = NowaitHint

    # read and readinto hand back the engine's own coroutine instead of wrapping it in
    # one more: the adapter adds no frame to the reads the benchmarks time.
    def read(self, fd: int, size: int, offset: int = 0) -> Awaitable[bytes]:
        return self._engine.pread_bytes(fd, size, offset)

    def readinto(self, fd: int, buffer: Any, offset: int = 0) -> Awaitable[int]:
        hint = self._hints.get(fd)
        if hint is None:
            own = self._engine.nowait_hint(fd)
            hint = self._hints[fd] = self._new_hint(read=own.read, write=own.write)
        return self._engine.pread(fd, buffer, offset, hint)

    async def write(self, fd: int, data: Any, offset: int = 0) -> int:
        return await self._engine.pwrite(fd, data, offset)

    async def readv(self, fd: int, buffers: Any, offset: int = 0) -> int:
        return await self._engine.preadv(fd, list(buffers), offset)

    async def writev(self, fd: int, buffers: Any, offset: int = 0) -> int:
        return await self._engine.pwritev(fd, list(buffers), offset)

    async def fsync(self, fd: int) -> None:
        await self._engine.fsync(fd)

    async def fdsync(self, fd: int) -> None:
        await self._engine.fdatasync(fd)

    def close(self) -> None:
        self._engine.close_engine()

    async def __aenter__(self) -> EngineContext:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def async_context(engine: str, maxevents: int) -> Any:
    """An async context manager for `engine`. Must be called with a running loop.
    (`maxevents` sizes the aio context; the uring ring and thread pool size
    themselves.)"""
    if engine == "aio":
        from ringio import aio

        return aio.AsyncContext(maxevents)
    return EngineContext(engine)


def sync_context(engine: str, maxevents: int) -> Any:
    """The engine's synchronous kernel queue, or raise if it has none."""
    if engine == "aio":
        from ringio import aio

        return aio.Context(maxevents)
    if engine == "uring":
        from ringio import uring

        return uring.Ring(maxevents)
    raise NotImplementedError(f"engine {engine!r} has no synchronous context")


def select_engines(requested: list[str], notice: Any) -> list[str]:
    """The requested engines that can run, with a one-line notice for each other."""
    chosen = []
    for name in requested:
        reason = unavailable_reason(name)
        if reason:
            notice(f"engine {name}: skipped ({reason})")
        else:
            chosen.append(name)
    return chosen
