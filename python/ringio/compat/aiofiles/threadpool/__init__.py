"""``aiofiles.threadpool`` over ringio: ``open`` and ``wrap`` give aiofiles'
wrapper classes around ringio file objects, whose I/O is done by ringio's engine
(io_uring or kernel AIO) rather than a thread pool; ``stdin``, ``stdout``,
``stderr`` (and ``*_bytes``) wrap the process's standard streams."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from concurrent.futures import Executor
from functools import singledispatch
from typing import Any

import ringio
from ringio._io import AsyncBufferedFile
from ringio._io import AsyncFileIO as _RingioFileIO
from ringio._io import AsyncTextFile as _RingioTextFile
from ringio.tempfile import AsyncTemporaryFileWrapper

from ..base import AiofilesContextManager
from . import _stdio
from .binary import (
    AsyncBufferedIOBase,
    AsyncBufferedReader,
    AsyncFileIO,
    AsyncIndirectBufferedIOBase,
)
from .text import AsyncTextIndirectIOWrapper, AsyncTextIOWrapper

sync_open = open

__all__ = (
    "open",
    "stderr",
    "stderr_bytes",
    "stdin",
    "stdin_bytes",
    "stdout",
    "stdout_bytes",
)


def open(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Callable[[Any, int], int] | None = None,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager:
    """Opens a file like ``aiofiles.open``: ``await`` it or ``async with`` it.

    The file is opened and used through ringio's engine. ``loop`` must be None or
    the running loop; ``executor`` is accepted and unused."""
    return AiofilesContextManager(
        _open(
            file,
            mode=mode,
            buffering=buffering,
            encoding=encoding,
            errors=errors,
            newline=newline,
            closefd=closefd,
            opener=opener,
            loop=loop,
            executor=executor,
        )
    )


async def _open(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Callable[[Any, int], int] | None = None,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
) -> Any:
    """Opens an asyncio file."""
    running = asyncio.get_running_loop()
    if loop is not None and loop is not running:
        raise ValueError("loop must be the running event loop (or None)")
    f = await ringio.open(file, mode, buffering, encoding, errors, newline, closefd, opener)
    return wrap(f, loop=loop, executor=executor)


@singledispatch
def wrap(file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    """The aiofiles wrapper for a ringio file object (what ``ringio.open`` or
    ``ringio.tempfile`` returned), of the class aiofiles gives the matching io
    object: text, buffered reader (readable), buffered writer, or FileIO."""
    msg = f"Unsupported io type: {file}."
    raise TypeError(msg)


@wrap.register(_RingioTextFile)
def _(file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    return AsyncTextIOWrapper(file, loop=loop, executor=executor)


@wrap.register(AsyncBufferedFile)
def _(file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    # io.open gives a BufferedWriter for write-only modes, else a Reader/Random.
    if file._readable:
        return AsyncBufferedReader(file, loop=loop, executor=executor)
    return AsyncBufferedIOBase(file, loop=loop, executor=executor)


@wrap.register(_RingioFileIO)
def _(file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    return AsyncFileIO(file, loop=loop, executor=executor)


@wrap.register(AsyncTemporaryFileWrapper)
def _(file: Any, *, loop: Any = None, executor: Any = None) -> Any:
    # A named temporary file: the class follows the file inside; the wrapper
    # stays the _file so that close() removes it.
    cls = type(wrap(file.file))
    return cls(file, loop=loop, executor=executor)


stdin = AsyncTextIndirectIOWrapper(
    "sys.stdin", None, None, indirect=lambda: _stdio.over(sys.stdin, True)
)
stdout = AsyncTextIndirectIOWrapper(
    "sys.stdout", None, None, indirect=lambda: _stdio.over(sys.stdout, True)
)
stderr = AsyncTextIndirectIOWrapper(
    "sys.stderr", None, None, indirect=lambda: _stdio.over(sys.stderr, True)
)
stdin_bytes = AsyncIndirectBufferedIOBase(
    "sys.stdin.buffer", None, None, indirect=lambda: _stdio.over(sys.stdin.buffer, False)
)
stdout_bytes = AsyncIndirectBufferedIOBase(
    "sys.stdout.buffer", None, None, indirect=lambda: _stdio.over(sys.stdout.buffer, False)
)
stderr_bytes = AsyncIndirectBufferedIOBase(
    "sys.stderr.buffer", None, None, indirect=lambda: _stdio.over(sys.stderr.buffer, False)
)
