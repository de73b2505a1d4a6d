"""``aiofiles.tempfile`` over ringio: the same constructors and signatures as
aiofiles 25.1 (``delete_on_close`` on Python 3.12+, as there), returning aiofiles'
wrapper classes around :mod:`ringio.tempfile`'s objects. The files and directories
are created by ringio's engine (0o600 / 0o700), not in a thread pool."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import Executor
from functools import singledispatch
from typing import Any

from ringio import tempfile as _rt
from ringio._io import AsyncBufferedFile
from ringio._io import AsyncFileIO as _RingioFileIO
from ringio._io import AsyncTextFile as _RingioTextFile

from ..base import AiofilesContextManager
from ..threadpool.binary import AsyncBufferedIOBase, AsyncBufferedReader, AsyncFileIO
from ..threadpool.text import AsyncTextIOWrapper
from .temptypes import AsyncSpooledTemporaryFile, AsyncTemporaryDirectory

__all__ = [
    "NamedTemporaryFile",
    "SpooledTemporaryFile",
    "TemporaryDirectory",
    "TemporaryFile",
]

Loop = asyncio.AbstractEventLoop

if sys.version_info >= (3, 12):

    def NamedTemporaryFile(
        mode: str = "w+b",
        buffering: int = -1,
        encoding: str | None = None,
        newline: str | None = None,
        suffix: Any = None,
        prefix: Any = None,
        dir: Any = None,
        delete: bool = True,
        delete_on_close: bool = True,
        loop: Loop | None = None,
        executor: Executor | None = None,
    ) -> AiofilesContextManager:
        """Async open a named temporary file"""
        return AiofilesContextManager(
            _temporary_file(
                named=True, mode=mode, buffering=buffering, encoding=encoding,
                newline=newline, suffix=suffix, prefix=prefix, dir=dir, delete=delete,
                delete_on_close=delete_on_close, loop=loop, executor=executor,
            )
        )

else:

    def NamedTemporaryFile(  # type: ignore[misc]
        mode: str = "w+b",
        buffering: int = -1,
        encoding: str | None = None,
        newline: str | None = None,
        suffix: Any = None,
        prefix: Any = None,
        dir: Any = None,
        delete: bool = True,
        loop: Loop | None = None,
        executor: Executor | None = None,
    ) -> AiofilesContextManager:
        """Async open a named temporary file"""
        return AiofilesContextManager(
            _temporary_file(
                named=True, mode=mode, buffering=buffering, encoding=encoding,
                newline=newline, suffix=suffix, prefix=prefix, dir=dir, delete=delete,
                loop=loop, executor=executor,
            )
        )


def TemporaryFile(
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: Loop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager:
    """Async open an unnamed temporary file"""
    return AiofilesContextManager(
        _temporary_file(
            named=False, mode=mode, buffering=buffering, encoding=encoding,
            newline=newline, suffix=suffix, prefix=prefix, dir=dir, loop=loop,
            executor=executor,
        )
    )


def SpooledTemporaryFile(
    max_size: int = 0,
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: Loop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager:
    """Async open a spooled temporary file"""
    return AiofilesContextManager(
        _spooled_temporary_file(
            max_size=max_size, mode=mode, buffering=buffering, encoding=encoding,
            newline=newline, suffix=suffix, prefix=prefix, dir=dir, loop=loop,
            executor=executor,
        )
    )


def TemporaryDirectory(
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: Loop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager:
    """Async open a temporary directory"""
    return AiofilesContextManagerTempDir(
        _temporary_directory(suffix=suffix, prefix=prefix, dir=dir, loop=loop, executor=executor)
    )


async def _temporary_file(
    named: bool = True,
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    delete: bool = True,
    delete_on_close: bool = True,
    loop: Loop | None = None,
    executor: Executor | None = None,
    max_size: int = 0,
) -> Any:
    """Opens a temporary file (named or not) with the aiofiles interface."""
    if loop is None:
        loop = asyncio.get_running_loop()
    if named:
        f: Any = await _rt.NamedTemporaryFile(
            mode, buffering, encoding, newline, suffix, prefix, dir, delete,
            delete_on_close, loop=loop,
        )  # fmt: skip
        result = wrap(f.file, f, loop=loop, executor=executor)
        # What aiofiles copies from the stdlib wrapper: 3.11 `delete`; 3.12+ only
        # `_closer` (the stdlib wrapper has no `delete` since 3.12, nor has aiofiles').
        if sys.version_info < (3, 12):
            result.delete = f.delete
        result._closer = f
        return result
    f = await _rt.TemporaryFile(mode, buffering, encoding, newline, suffix, prefix, dir, loop=loop)
    return wrap(f, f, loop=loop, executor=executor)


async def _spooled_temporary_file(
    max_size: int = 0,
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: Loop | None = None,
    executor: Executor | None = None,
) -> AsyncSpooledTemporaryFile:
    """Opens a spooled temporary file with the aiofiles interface."""
    if loop is None:
        loop = asyncio.get_running_loop()
    f = await _rt.SpooledTemporaryFile(
        max_size, mode, buffering, encoding, newline, suffix, prefix, dir, loop=loop
    )
    return AsyncSpooledTemporaryFile(f, loop=loop, executor=executor)


async def _temporary_directory(
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: Loop | None = None,
    executor: Executor | None = None,
) -> AsyncTemporaryDirectory:
    """Makes a temporary directory with the aiofiles interface."""
    if loop is None:
        loop = asyncio.get_running_loop()
    d = await _rt.TemporaryDirectory(suffix, prefix, dir, loop=loop)
    return AsyncTemporaryDirectory(d, loop=loop, executor=executor)


class AiofilesContextManagerTempDir(AiofilesContextManager):
    """``async with`` gives the directory's path, not the object (as the stdlib)."""

    async def __aenter__(self) -> Any:
        self._obj = await self._coro
        return self._obj.name


@singledispatch
def wrap(base_io_obj: Any, file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    """The aiofiles wrapper class for a temporary file, chosen by the ringio file
    object inside (``base_io_obj``); ``file`` is what it wraps."""
    msg = f"Unsupported IO type: {base_io_obj}"
    raise TypeError(msg)


@wrap.register(_RingioTextFile)
def _(base_io_obj: Any, file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    return AsyncTextIOWrapper(file, loop=loop, executor=executor)


@wrap.register(AsyncBufferedFile)
def _(base_io_obj: Any, file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    if base_io_obj._readable:
        return AsyncBufferedReader(file, loop=loop, executor=executor)
    return AsyncBufferedIOBase(file, loop=loop, executor=executor)


@wrap.register(_RingioFileIO)
def _(base_io_obj: Any, file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    return AsyncFileIO(file, loop=loop, executor=executor)
