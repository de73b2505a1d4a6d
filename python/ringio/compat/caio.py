"""A stand-in for caio's ``AsyncioContext`` on ringio's file engine, so that
``aiofile`` (which takes one as ``context=``) runs on io_uring / kernel AIO::

    import aiofile
    from ringio.compat.caio import AsyncioContext

    async with AsyncioContext() as ctx:
        async with aiofile.async_open("data.txt", "w+", context=ctx) as f:
            await f.write("hello")

Same signatures and results as caio 0.12's ``AsyncioContext``: ``read(nbytes, fd,
offset, priority=0) -> bytes`` (shorter at end of file), ``write(payload, fd,
offset, priority=0) -> int`` - one write, which may be short, exactly like caio
(aiofile loops until everything is written) - ``fsync(fd)``, ``fdsync(fd)``,
``close()``, ``.loop`` and ``async with``. At most ``max_requests`` operations of a
context are in flight; more wait for a slot (caio's back-pressure).

The operations run on the loop's ringio engine (io_uring, else kernel AIO, else
the thread engine), shared with ``ringio.open`` and ``ringio.os``; the context holds
no kernel resources of its own. Errors are the ``os`` module's ``OSError``
subclasses. ``priority`` is checked and otherwise ignored (caio's io_uring context
ignores it too).
"""

from __future__ import annotations

import asyncio
import errno
import operator
import os
import stat
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from .. import _engines

__all__ = ["AsyncioContext"]

T = TypeVar("T")


class AsyncioContext:
    """caio's ``AsyncioContext`` over ringio's engine for ``loop``."""

    MAX_REQUESTS_DEFAULT = 512

    def __init__(
        self, max_requests: int | None = MAX_REQUESTS_DEFAULT,
        loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any,
    ) -> None:
        # caio passes extra keywords (sqpoll=, pool_size=) to its backend; none of
        # them has a meaning here, and accepting them keeps such calls working.
        # Like caio, 0 or None mean the default.
        max_requests = operator.index(max_requests or self.MAX_REQUESTS_DEFAULT)
        if max_requests < 0:
            raise ValueError(f"max_requests must be a positive integer, got {max_requests}")
        self.max_requests = max_requests
        # caio's own choice of loop (it also works when made before the loop runs).
        self.loop: asyncio.AbstractEventLoop = loop or asyncio.get_event_loop()
        self.semaphore = asyncio.BoundedSemaphore(max_requests)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuses new operations. Those in flight finish: they are the engine's,
        which other users of the loop share, so it stays open."""
        self._closed = True

    async def __aenter__(self) -> AsyncioContext:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def _submit(self, op: Callable[[_engines.FileEngine], Awaitable[T]]) -> T:
        if self._closed:
            raise RuntimeError("Context is closed")
        async with self.semaphore:
            if self._closed:
                raise RuntimeError("Context is closed")
            # Looked up per call: the loop's engine is made lazily (the context may
            # have been made before the loop ran) and is remade after engines.reset().
            return await op(_engines.get(self.loop))

    def read(self, nbytes: int, fd: int, offset: int, priority: int = 0) -> Awaitable[bytes]:
        """Reads up to ``nbytes`` at ``offset``; fewer (down to b"") at end of file."""
        nbytes, fd, offset, _ = _ints(nbytes, fd, offset, priority)
        offset = _offset(offset)
        if nbytes < 0:
            raise ValueError(f"nbytes must not be negative, got {nbytes}")

        async def run(engine: _engines.FileEngine) -> bytes:
            try:
                return await engine.pread_bytes(fd, nbytes, offset)
            except OSError as e:
                # Kernel AIO refuses a directory with EINVAL where pread(2) and
                # io_uring say EISDIR: report what they do.
                if e.errno == errno.EINVAL and _is_dir(fd):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)) from None
                raise

        return self._submit(run)

    def write(self, payload: bytes, fd: int, offset: int, priority: int = 0) -> Awaitable[int]:
        """Writes ``payload`` at ``offset`` once; returns the byte count, which can be
        short (as caio's and pwrite(2)'s). Any bytes-like object is accepted."""
        fd, offset, _ = _ints(fd, offset, priority)
        offset = _offset(offset)
        try:
            data = memoryview(payload)
        except TypeError:
            raise TypeError(
                f"payload must be a bytes-like object, got {type(payload).__name__}"
            ) from None
        if not isinstance(payload, bytes):
            # Snapshot a mutable buffer, as caio does by requiring bytes: the
            # caller may reuse it while the write is in flight.
            data = memoryview(bytes(data))

        async def run(engine: _engines.FileEngine) -> int:
            if not data.nbytes:
                return 0
            return await engine.pwrite(fd, data, offset)

        return self._submit(run)

    def fsync(self, fd: int) -> Awaitable[None]:
        """fsync(2) of ``fd``: data and metadata."""
        (fd,) = _ints(fd)
        return self._submit(lambda engine: engine.fsync(fd))

    def fdsync(self, fd: int) -> Awaitable[None]:
        """fdatasync(2) of ``fd``: data and the metadata needed to read it back."""
        (fd,) = _ints(fd)
        return self._submit(lambda engine: engine.fdatasync(fd))


def _ints(*values: Any) -> tuple[int, ...]:
    """The arguments as ints, refusing str, float... with TypeError at the call (as
    caio's C backends do), not later inside the operation."""
    out = []
    for v in values:
        if not hasattr(v, "__index__"):
            raise TypeError(f"an integer is required, got {type(v).__name__}")
        out.append(operator.index(v))
    return tuple(out)


def _is_dir(fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.fstat(fd).st_mode)  # the inode is in memory: no I/O
    except OSError:
        return False


def _offset(offset: int) -> int:
    # io_uring reads an offset of -1 as "at the file position": refuse every
    # negative offset up front, with what pread(2) says.
    if offset < 0:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    return offset
