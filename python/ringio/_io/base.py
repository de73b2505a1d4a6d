"""What every ``ringio.open`` file shares: sizes, argument checks, the lock that
serialises a file's I/O, and the context-manager and closing surface.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from .._core import (
    LINES_CR,
    LINES_CRLF,
    LINES_LF,
    LINES_UNIVERSAL,
)

DEFAULT_BUFFER_SIZE = io.DEFAULT_BUFFER_SIZE


def default_buffer_size(blksize: int) -> int:
    """The buffer size the running Python's open() picks for a file with this
    st_blksize: the block size (io.DEFAULT_BUFFER_SIZE, 8 KiB, where it is unknown)
    up to 3.13; from 3.14 max(min(blksize, 8 MiB), io.DEFAULT_BUFFER_SIZE), which
    is 128 KiB there."""
    if sys.version_info >= (3, 14):
        return max(min(blksize, 8192 * 1024), DEFAULT_BUFFER_SIZE)
    return blksize if blksize > 1 else DEFAULT_BUFFER_SIZE
#: Line reads and reads to EOF start at this chunk size and double up to the max.
CHUNK_MIN = 64 * 1024
CHUNK_MAX = 1024 * 1024
#: Reads through a buffered file that follow the one before and are smaller than
#: READ_AHEAD_BELOW fill the read buffer, even where they are as large as the
#: buffer; larger ones go straight to the caller. Measured 2026-11-27 (cached 16 MiB
#: file, `while await f.read(n)` against the builtin file's loop, 4 KiB buffer):
#: n = 4 KiB 0.67x straight, 1.0-1.25x read ahead; 16 KiB 0.71-0.74x, 0.79-1.01x;
#: 32 KiB either way within the noise; 64 KiB 0.97x straight, 0.72-0.83x read ahead
#: (the copy through the buffer costs more than the syscall it saves).
READ_AHEAD_BELOW = 32 * 1024
#: Fills of the read buffer double from the buffer size up to this while the reads
#: stay sequential. A bytes object this size comes from glibc's heap (its mmap
#: threshold is 128 KiB): 4 KiB reads served from 64-128 KiB fills ran at 1.05-1.2x
#: the builtin file's loop, from 1 MiB fills (a fresh mapping faulted in per fill)
#: at 0.95x.
READ_AHEAD_MAX = 128 * 1024
#: The largest off_t: no file position goes beyond it.
OFF_T_MAX = (1 << 63) - 1
#: O_DIRECT alignment when statx cannot tell (older kernels, some filesystems).
DIO_FALLBACK = 4096
#: Text decodes and splits chunks of at most this: the lines made from a chunk are
#: still in the CPU cache when they are handed out (measured: 1 MiB chunks cost
#: ~40% more per line than 64-256 KiB ones). Below glibc's mmap threshold (128 KiB),
#: as READ_AHEAD_MAX: a 256 KiB chunk and its decoded str are, in some process
#: layouts, given back to the kernel when freed and faulted in again for the next
#: chunk, and `async for line in f` over the bench's
#: 20 MB text file ran at 0.78-0.80x `for line in f` for one engine or the other,
#: depending on the file (3 files, 3-5 processes each, 2026-11-27; no read left the
#: inline path), and at 1.0-1.05x for the other; with 120 KiB chunks at 0.99-1.05x
#: for both engines on all three files.
TEXT_CHUNK_MAX = 120 * 1024

# How line iteration splits decoded text, per newline= (None: the newline decoder
# already turned \r and \r\n into \n).
_LINE_KINDS = {
    None: LINES_LF, "\n": LINES_LF, "\r": LINES_CR, "\r\n": LINES_CRLF, "": LINES_UNIVERSAL,
}  # fmt: skip



def _closed_error() -> ValueError:
    return ValueError("I/O operation on closed file.")


def _index(size: Any, allow_none: bool = True) -> int:
    if size is None and allow_none:
        return -1
    try:
        return size.__index__()
    except AttributeError:
        raise TypeError(
            f"argument should be integer or None, not '{type(size).__name__}'"
        ) from None


_F = TypeVar("_F", bound=Callable[..., Any])


def markcoroutinefunction(func: _F) -> _F:
    """Marks a method that returns an awaitable other than a coroutine
    (``ringio._core.Ready``, ``Started``), so that ``inspect.iscoroutinefunction`` is True of it
    as of the coroutine it stands for (CPython 3.12+; 3.11 has no such mark)."""
    mark = getattr(inspect, "markcoroutinefunction", None)
    return mark(func) if mark is not None else func


class _FileLock(asyncio.Lock):
    """The lock that serialises a file's I/O. Once the file is closing, whoever
    gets it next (an op that was waiting behind the one in flight) gets
    ``ValueError: I/O operation on closed file.`` instead; close() itself takes it
    with ``acquire()``."""

    closing = False

    def idle(self) -> bool:
        """Neither held nor awaited: a read that starts now and finishes without an
        await cannot overtake an op that asked for the lock first. (Right after a
        release, ``locked()`` is False while the woken waiter has not run yet.)"""
        return not self._locked and not self._waiters  # type: ignore[attr-defined]

    async def __aenter__(self) -> None:
        await self.acquire()
        if self.closing:
            self.release()
            raise _closed_error()


class _Base:
    """What binary and text files share: names, flags, context managers, closing."""

    _closed: bool
    _closefd: bool

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def aclose(self) -> None:
        """Same as ``close()``."""
        await self.close()

    async def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError



def _retrieve(task: asyncio.Task[Any]) -> None:
    # The exception of a close that nobody awaits any more (its caller was
    # cancelled) is not an unhandled one.
    if not task.cancelled():
        task.exception()


def _scatter(bufs: list[Any], data: bytes) -> int:
    pos = 0
    for b in bufs:
        mv = memoryview(b).cast("B")
        k = min(len(mv), len(data) - pos)
        mv[:k] = data[pos : pos + k]
        pos += k
        if pos >= len(data):
            break
    return pos
