"""ringio file objects over the process's standard streams, for ``aiofiles.stdin``
and friends.

The stream (``sys.stdout`` etc.) is looked up on each use, as aiofiles does, and a
ringio object is made over its fd (``closefd=False``) once per stream and loop. It
is never treated as seekable: reads and writes go through the engine's
``read``/``write`` at the fd's own position, so they interleave with ``print()``
and with whatever else writes to the fd. Writes are flushed at once (the sync
stream is flushed first), so nothing sits in a buffer at exit.
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
import weakref
from typing import Any

from ringio import _engines
from ringio._io import AsyncBufferedFile, AsyncFileIO, AsyncTextFile


class _StdBinary(AsyncBufferedFile):
    async def write(self, data: Any) -> int:
        n = await super().write(data)
        await self.flush()
        return n

    async def writelines(self, lines: Any) -> None:
        await super().writelines(lines)
        await self.flush()


class _StdText(AsyncTextFile):
    async def write(self, s: str) -> int:
        n = await super().write(s)
        await self.flush()
        return n

    async def writelines(self, lines: Any) -> None:
        await super().writelines(lines)
        await self.flush()


# (id of the sync stream, text?) -> (the stream, its ringio object), per loop.
_made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)


# The methods aiofiles runs in its executor (the wrappers' coroutine methods).
_IN_EXECUTOR = frozenset({
    "close", "flush", "isatty", "peek", "read", "read1", "readable", "readall",
    "readinto", "readline", "readlines", "seek", "seekable", "tell", "truncate",
    "writable", "write", "writelines",
})  # fmt: skip


class _InExecutor:
    """A standard stream without a file descriptor, as aiofiles wraps it: the
    coroutine methods run the stream's own in the loop's default executor; the
    rest (``fileno``, ``closed``, ``name``, ...) is the stream's."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._stream, name)
        if name not in _IN_EXECUTOR or not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(attr, *args, **kwargs))

        return call


def _fd_of(stream: Any) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation included
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def over(stream: Any, text: bool) -> Any:
    """The ringio object for `stream` (a sys.std* text stream or its buffer)."""
    if _fd_of(stream) is None:
        return _InExecutor(stream)
    loop = asyncio.get_running_loop()
    per_loop = _made.setdefault(loop, {})
    key = (id(stream), text)
    hit = per_loop.get(key)
    if hit is not None and hit[0] is stream:
        made = hit[1]
    else:
        made = _make(stream, text, _engines.get(loop))
        per_loop[key] = (stream, made)
    if stream.writable() and not stream.closed:
        stream.flush()  # what print() buffered goes out before our bytes
    return made


def _make(stream: Any, text: bool, eng: _engines.FileEngine) -> Any:
    fd = stream.fileno()
    readable, writable = stream.readable(), stream.writable()
    mode = "rb+" if readable and writable else "rb" if readable else "wb"
    name = getattr(stream, "name", fd)
    raw = AsyncFileIO(
        fd, name, mode, readable=readable, writable=writable, append=False,
        closefd=False, seekable=False, pos=0, direct=False, isatty=os.isatty(fd),
        engine=eng,
    )  # fmt: skip
    buffered = _StdBinary(raw, io.DEFAULT_BUFFER_SIZE)
    if not text:
        return buffered
    tmode = "r+" if readable and writable else "r" if readable else "w"
    return _StdText(
        buffered, stream.encoding, stream.errors, None, bool(stream.line_buffering), tmode
    )
