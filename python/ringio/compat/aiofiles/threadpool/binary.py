"""``aiofiles.threadpool.binary`` over ringio: the binary file wrappers, with the
same classes, coroutine methods, plain methods and properties as aiofiles 25.1."""

from __future__ import annotations

import errno
import io
import os
from typing import Any

from ..base import AsyncBase, AsyncIndirectBase
from .utils import delegate_to_executor, proxy_method_directly, proxy_property_directly

__all__ = [
    "AsyncBufferedIOBase",
    "AsyncBufferedReader",
    "AsyncFileIO",
    "AsyncIndirectBufferedIOBase",
    "AsyncIndirectBufferedReader",
    "AsyncIndirectFileIO",
]


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "read1",
    "readinto",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "writable",
    "write",
    "writelines",
)
@proxy_method_directly("detach", "fileno", "readable")
@proxy_property_directly("closed", "raw", "name", "mode")
class AsyncBufferedIOBase(AsyncBase):
    """The version of io.BufferedWriter and BufferedIOBase (write-only buffered)."""


@delegate_to_executor("peek")
class AsyncBufferedReader(AsyncBufferedIOBase):
    """The version of io.BufferedReader and BufferedRandom (readable buffered)."""


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "readall",
    "readinto",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "writable",
    "write",
    "writelines",
)
@proxy_method_directly("fileno", "readable")
@proxy_property_directly("closed", "name", "mode")
class AsyncFileIO(AsyncBase):
    """The version of io.FileIO (``buffering=0``)."""


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "read1",
    "readinto",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "writable",
    "write",
    "writelines",
)
@proxy_method_directly("detach", "fileno", "readable")
@proxy_property_directly("closed", "raw", "name", "mode")
class AsyncIndirectBufferedIOBase(AsyncIndirectBase):
    """The indirect version of io.BufferedWriter and BufferedIOBase."""


@delegate_to_executor("peek")
class AsyncIndirectBufferedReader(AsyncIndirectBufferedIOBase):
    """The indirect version of io.BufferedReader and Random."""


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "readall",
    "readinto",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "writable",
    "write",
    "writelines",
)
@proxy_method_directly("fileno", "readable")
@proxy_property_directly("closed", "name", "mode")
class AsyncIndirectFileIO(AsyncIndirectBase):
    """The indirect version of io.FileIO."""


# What ringio's buffered files lack compared with io's: peek and detach.


async def _peek(self: Any, size: int = 0) -> bytes:
    """Buffered bytes from the position without moving it (at least one byte
    unless at end of file), as BufferedReader.peek: read, then seek back."""
    f = self._file
    if f.closed:
        raise ValueError("peek of closed file")
    if not f.readable():
        raise io.UnsupportedOperation("read")
    pos = await f.tell()
    data: bytes = await f.read1(max(size, io.DEFAULT_BUFFER_SIZE))
    await f.seek(pos)
    return data


def _raw(self: Any) -> Any:
    """The raw file under the buffered one, as io's ``BufferedReader.raw``."""
    return self._file.raw


def _detach(self: Any) -> Any:
    """As io's buffered files: hands over the fd as a sync ``io.FileIO`` (after
    writing what the buffer holds, and with the fd's position where the raw
    file's is), and leaves this wrapper unusable (``ValueError``), ``async with``
    exit included."""
    f = self._file
    if f.closed:
        raise ValueError("raw stream has been detached")
    r = f.raw
    if f._lock.locked() or r._pending is not None:
        raise ValueError("detach() while another operation is in progress on the file")
    f._unlines()
    fd = r._fd
    # Synchronously, as io's detach() flushes: the wrapper's detach() is a plain
    # method in aiofiles too.
    wbuf = f._wbuf
    while wbuf:
        if r._seekable and not r._append and r._pos is not None:
            n = os.pwrite(fd, wbuf, r._pos)
            r._pos += n
        else:
            n = os.write(fd, wbuf)
            if r._pos is not None and not r._append:
                r._pos += n
        if n == 0:
            raise OSError(errno.EIO, "write returned 0 bytes")
        del wbuf[:n]
    if r._seekable and r._pos is not None and not r._append:
        os.lseek(fd, r._pos, os.SEEK_SET)  # where the raw file is: after read-ahead
    closefd = r._closefd
    r._closefd = False
    r._closed = True  # the ringio object lets go of the fd without closing it
    self._detached = True
    raw = io.FileIO(fd, f.mode.replace("b", ""), closefd=closefd)
    raw.name = f.name  # type: ignore[misc]
    return raw


for _cls in (AsyncBufferedReader, AsyncIndirectBufferedReader):
    _cls.peek = _peek  # type: ignore[attr-defined]
for _cls in (AsyncBufferedIOBase, AsyncIndirectBufferedIOBase):
    _cls.raw = property(_raw)  # type: ignore[attr-defined]
    _cls.detach = _detach  # type: ignore[attr-defined]
del _cls
