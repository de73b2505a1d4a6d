"""``aiofiles.base`` over ringio: the wrapper base classes and the object
``aiofiles.open()`` returns (awaitable and async context manager).

A wrapper's ``_file`` is the ringio file object (aiofiles': the sync one); its
methods are forwarded to it instead of to a thread pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextlib import AbstractAsyncContextManager
from typing import Any

from ringio.os import wrap

__all__ = ["AiofilesContextManager", "AsyncBase", "AsyncIndirectBase", "wrap"]


class AsyncBase:
    """What every aiofiles-style file wrapper shares: ``_file`` (the ringio file
    object), ``_loop`` and ``_executor`` (kept for code that reads them; ringio
    needs no executor), and ``async for`` over lines."""

    def __init__(
        self, file: Any, loop: asyncio.AbstractEventLoop | None, executor: Any
    ) -> None:
        self._file = file
        self._executor = executor
        self._ref_loop = loop

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return self._ref_loop or asyncio.get_running_loop()

    def __aiter__(self) -> AsyncBase:
        """We are our own iterator (as in aiofiles)."""
        return self

    def __repr__(self) -> str:
        return super().__repr__() + " wrapping " + repr(self._file)

    async def __anext__(self) -> Any:
        # Straight to the ringio object: no extra forwarding layer per line.
        if line := await self._file.readline():
            return line
        raise StopAsyncIteration


class AsyncIndirectBase(AsyncBase):
    """A wrapper whose file is looked up on each use (``aiofiles.stdout`` and
    friends): ``indirect()`` gives the object to wrap."""

    def __init__(
        self, name: str, loop: asyncio.AbstractEventLoop | None, executor: Any,
        indirect: Callable[[], Any],
    ) -> None:  # fmt: skip
        self._indirect = indirect
        self._name = name
        super().__init__(None, loop, executor)

    @property  # type: ignore[override]
    def _file(self) -> Any:
        return self._indirect()

    @_file.setter
    def _file(self, v: Any) -> None:
        pass  # discard writes (as aiofiles)


class AiofilesContextManager(Awaitable[Any], AbstractAsyncContextManager[Any]):
    """What ``open()`` and the ``tempfile`` constructors return: ``await`` it for the
    wrapper, or ``async with`` it (the file is closed, or the temporary file or
    directory cleaned up, on exit)."""

    __slots__ = ("_coro", "_obj")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self._obj: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        if self._obj is None:
            self._obj = yield from self._coro.__await__()
        return self._obj

    async def __aenter__(self) -> Any:
        return await self

    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        # aiofiles runs the sync object's __exit__ in a thread; the ringio object's
        # __aexit__ closes it (and, for temporary files, removes them).
        obj, self._obj = self._obj, None
        if getattr(obj, "_detached", False):
            # io's __exit__ closes, and closing a detached buffered file raises.
            raise ValueError("raw stream has been detached")
        await obj._file.__aexit__(exc_type, exc_val, exc_tb)
