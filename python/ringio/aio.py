"""Kernel AIO (io_setup / io_submit / io_getevents): the whole ABI, sync and async.

Synchronous use::

    from ringio import aio
    with aio.Context(128) as ctx:
        buf = bytearray(4096)
        ctx.submit([aio.pread(fd, buf, 0)])
        [done] = ctx.get_events(1)
        n = done.result()          # bytes read, or raises OSError

asyncio use (no threads; completions arrive through the context's eventfd)::

    async with aio.AsyncContext() as actx:
        data = await actx.read(fd, 4096, offset=0)

Kernel facts that shape this API:

* Buffered (non-O_DIRECT) AIO runs synchronously inside io_submit; only O_DIRECT
  reads and writes are truly asynchronous. POLL is always asynchronous. So
  ``AsyncContext`` waits for readiness (a POLL op) before reading from or writing to
  a pipe, socket or terminal, which would otherwise block the loop until the peer
  acts; a write bigger than the room left can still block on a blocking fd.
* Only POLL ops can be cancelled (``Context.cancel``); any other in-flight op must
  run to completion, and ringio keeps its buffers alive until then.
* ``IOCB_CMD_NOOP`` exists in the ABI but the kernel rejects it with EINVAL.
* Misaligned O_DIRECT I/O is accepted by io_submit and fails in the completion
  with EINVAL; ringio's error then states the alignment statx reports.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import stat
from collections.abc import Iterable
from typing import Any

from . import _core
from ._core import (
    Completion,
    Op,
    PartialSubmitError,
    fdsync,
    fsync,
    noop,
    poll,
    pread,
    preadv,
    pwrite,
    pwritev,
)
from ._core.aio import (
    IOCB_CMD_FDSYNC,
    IOCB_CMD_FSYNC,
    IOCB_CMD_NOOP,
    IOCB_CMD_POLL,
    IOCB_CMD_PREAD,
    IOCB_CMD_PREADV,
    IOCB_CMD_PWRITE,
    IOCB_CMD_PWRITEV,
    IOCB_FLAG_IOPRIO,
    IOCB_FLAG_RESFD,
)
from ._proactor import Proactor

Context = _core.aio.AioContext

__all__ = [
    "IOCB_CMD_FDSYNC",
    "IOCB_CMD_FSYNC",
    "IOCB_CMD_NOOP",
    "IOCB_CMD_POLL",
    "IOCB_CMD_PREAD",
    "IOCB_CMD_PREADV",
    "IOCB_CMD_PWRITE",
    "IOCB_CMD_PWRITEV",
    "IOCB_FLAG_IOPRIO",
    "IOCB_FLAG_RESFD",
    "IOPRIO_CLASS_BE",
    "IOPRIO_CLASS_IDLE",
    "IOPRIO_CLASS_NONE",
    "IOPRIO_CLASS_RT",
    "RWF_APPEND",
    "RWF_ATOMIC",
    "RWF_DONTCACHE",
    "RWF_DSYNC",
    "RWF_HIPRI",
    "RWF_NOAPPEND",
    "RWF_NOWAIT",
    "RWF_SYNC",
    "AsyncContext",
    "Completion",
    "Context",
    "Op",
    "PartialSubmitError",
    "fdsync",
    "fsync",
    "ioprio",
    "noop",
    "poll",
    "pread",
    "preadv",
    "pwrite",
    "pwritev",
]

# Per-op flags (aio_rw_flags), linux/fs.h. A flag the running kernel does not know
# makes io_submit fail with EOPNOTSUPP.
RWF_HIPRI = 0x01
RWF_DSYNC = 0x02
RWF_SYNC = 0x04
RWF_NOWAIT = 0x08
RWF_APPEND = 0x10
RWF_NOAPPEND = 0x20  # Linux 6.9
RWF_ATOMIC = 0x40  # Linux 6.11, O_DIRECT only
RWF_DONTCACHE = 0x80  # Linux 6.14

# I/O priority classes (linux/ioprio.h).
IOPRIO_CLASS_NONE = 0
IOPRIO_CLASS_RT = 1
IOPRIO_CLASS_BE = 2
IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13
_IOPRIO_LEVELS = 8


def ioprio(cls: int, level: int = 0) -> int:
    """The ioprio value for an op's `priority=`: a class (IOPRIO_CLASS_*) and a
    level 0 (highest) to 7. RT needs CAP_SYS_ADMIN (io_submit fails with EPERM)."""
    if cls not in (IOPRIO_CLASS_NONE, IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE):
        raise ValueError(f"unknown I/O priority class {cls!r}")
    if not 0 <= level < _IOPRIO_LEVELS:
        raise ValueError(f"I/O priority level must be 0..7, not {level!r}")
    return (cls << _IOPRIO_CLASS_SHIFT) | level


class AsyncContext:
    """Awaitable kernel AIO on an asyncio loop, with no threads.

    Ops started during one loop turn go to the kernel in one io_submit; completions
    are reaped in batches when the context's eventfd becomes readable. When more
    ops are started than `maxevents`, the rest wait their turn (back-pressure).
    """

    def __init__(self, maxevents: int = 1024, loop: asyncio.AbstractEventLoop | None = None):
        self._loop = loop or asyncio.get_running_loop()
        self._ctx = Context(maxevents)
        self._proactor = Proactor(self._ctx, self._loop, cancellable=_is_poll)

    @property
    def context(self) -> Context:
        """The underlying synchronous context."""
        return self._ctx

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def _start(self, make: Any, *args: Any, **kwargs: Any) -> asyncio.Future[int]:
        fut = self._loop.create_future()
        return self._proactor.start(make(*args, data=fut, **kwargs))

    async def _ready(self, fd: Any, events: int) -> None:
        """Buffered AIO runs the read or write inside io_submit: on a pipe, socket or
        terminal with nothing to read (or no room to write) that would block the
        whole loop until the peer acts. Such fds are first waited on with a POLL op
        (asynchronous and cancellable); regular files and block devices go at once."""
        try:
            mode = os.fstat(fd if isinstance(fd, int) else fd.fileno()).st_mode
        except (OSError, AttributeError, TypeError, ValueError):
            return  # the op itself reports the bad fd, as it would without this
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
            await self.poll(fd, events)

    async def read(
        self, fd: Any, size: int, offset: int = 0, *, rw_flags: int = 0,
        priority: int | None = None,
    ) -> bytes:
        """Reads up to `size` bytes at `offset`; returns them (short at end of file)."""
        if size < 0:
            raise ValueError(f"size must be >= 0, not {size}")
        if self.closed:
            raise ValueError("I/O operation on closed context")
        if not rw_flags and priority is None and isinstance(fd, int):
            # Cached data: one copy, page cache to bytes, no kernel queue round trip.
            try:
                data = _core.pread_nowait(fd, size, offset)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ESPIPE):
                    raise
            else:
                if data is not None:
                    return data
        await self._ready(fd, select.POLLIN)
        buf = bytearray(size)
        n = await self._start(pread, fd, buf, offset, rw_flags=rw_flags, priority=priority)
        del buf[n:]
        return bytes(buf)

    async def readinto(
        self, fd: Any, buffer: Any, offset: int = 0, *, rw_flags: int = 0,
        priority: int | None = None,
    ) -> int:
        """Reads into `buffer` at `offset`; returns the byte count."""
        await self._ready(fd, select.POLLIN)
        return await self._start(pread, fd, buffer, offset, rw_flags=rw_flags, priority=priority)

    async def write(
        self, fd: Any, data: Any, offset: int = 0, *, rw_flags: int = 0,
        priority: int | None = None,
    ) -> int:
        """Writes `data` at `offset`; returns the byte count the kernel wrote."""
        await self._ready(fd, select.POLLOUT)
        return await self._start(pwrite, fd, data, offset, rw_flags=rw_flags, priority=priority)

    async def readv(
        self, fd: Any, buffers: Iterable[Any], offset: int = 0, *, rw_flags: int = 0,
        priority: int | None = None,
    ) -> int:
        """Scatter-reads into `buffers` in one op; returns the total byte count."""
        await self._ready(fd, select.POLLIN)
        return await self._start(
            preadv, fd, list(buffers), offset, rw_flags=rw_flags, priority=priority
        )

    async def writev(
        self, fd: Any, buffers: Iterable[Any], offset: int = 0, *, rw_flags: int = 0,
        priority: int | None = None,
    ) -> int:
        """Gather-writes `buffers` in one op; returns the total byte count."""
        await self._ready(fd, select.POLLOUT)
        return await self._start(
            pwritev, fd, list(buffers), offset, rw_flags=rw_flags, priority=priority
        )

    async def fsync(self, fd: Any) -> None:
        await self._start(fsync, fd)

    async def fdsync(self, fd: Any) -> None:
        await self._start(fdsync, fd)

    async def poll(self, fd: Any, events: int = select.POLLIN) -> int:
        """Waits until `fd` is ready for `events`; returns the ready mask.
        Cancelling the awaiting task cancels the poll in the kernel."""
        return await self._start(poll, fd, events)

    def close(self) -> None:
        """Stops the loop watching; waits for ops in the kernel, as io_destroy does."""
        self._proactor.close()

    @property
    def closed(self) -> bool:
        return self._ctx.closed

    async def __aenter__(self) -> AsyncContext:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _is_poll(op: Op) -> bool:
    return op.command == "poll"
