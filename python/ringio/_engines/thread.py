"""The thread-pool engine: the visible fallback where the kernel refuses io_uring
and kernel AIO (for example under a seccomp profile). Every operation is a
blocking ``os`` call on a small pool."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import select
from collections.abc import Sequence
from typing import Any

from .base import (
    FileEngine,
    NowaitHint,
    Outcome,
    PoolPathOps,
    _settle_thread,
    check_offset,
    read_what_is_there,
    write_what_fits,
)  # fmt: skip


async def _finished(cf: concurrent.futures.Future[Any], loop: asyncio.AbstractEventLoop) -> None:
    if not cf.done():
        await asyncio.wait([asyncio.wrap_future(cf, loop=loop)])


def _ready_mask(fd: int, events: int) -> int:
    p = select.poll()
    p.register(fd, events)
    ready = p.poll(0)
    return ready[0][1] if ready else 0


class ThreadEngine(PoolPathOps, FileEngine):
    name = "thread"

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        # The pool calls made on each fd and not finished: close(fd) waits for them,
        # so that a call still queued never runs on the fd number once it is reused.
        self._jobs: dict[int, set[concurrent.futures.Future[Any]]] = {}

    async def _tracked(self, outcome: Outcome | None, func: Any, *args: Any) -> Any:
        fd = args[0]
        cf = self._fallback_pool().submit(func, *args)
        jobs = self._jobs.get(fd)
        if jobs is None:
            jobs = self._jobs[fd] = set()
        jobs.add(cf)
        cf.add_done_callback(jobs.discard)  # set.discard is atomic: any thread may call
        if outcome is not None:
            outcome.arm(lambda: _settle_thread(cf, self.loop))
        return await asyncio.wrap_future(cf, loop=self.loop)

    async def pread(
        self, fd: int, buf: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        check_offset(offset)
        return await self._tracked(outcome, os.preadv, fd, [buf], offset)

    async def pwrite(
        self, fd: int, data: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        check_offset(offset)
        return await self._tracked(outcome, os.pwrite, fd, data, offset)

    async def preadv(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int:
        check_offset(offset)
        return await self._tracked(outcome, os.preadv, fd, list(buffers), offset)

    async def pwritev(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int:
        check_offset(offset)
        return await self._tracked(outcome, os.pwritev, fd, list(buffers), offset)

    async def read(self, fd: int, buf: Any, *, outcome: Outcome | None = None) -> int:
        while await self._wait_ready(fd, select.POLLIN):
            n = read_what_is_there(fd, buf)
            if n is not None:
                return n
        return await self._tracked(outcome, os.readv, fd, [buf])

    async def write(self, fd: int, data: Any, *, outcome: Outcome | None = None) -> int:
        while await self._wait_ready(fd, select.POLLOUT):
            n = write_what_fits(fd, data)
            if n is not None:
                return n
        return await self._tracked(outcome, os.write, fd, data)

    async def fsync(self, fd: int) -> None:
        await self._tracked(None, os.fsync, fd)

    async def fdatasync(self, fd: int) -> None:
        await self._tracked(None, os.fdatasync, fd)

    async def ftruncate(self, fd: int, length: int) -> None:
        await self._tracked(None, os.ftruncate, fd, length)

    async def close(self, fd: int) -> None:
        self.forget_fd(fd)
        # Pool threads discard finished calls from the set while this runs: iterate
        # a copy (set.copy is one C call, atomic against their discards).
        jobs = [cf for cf in self._jobs.pop(fd, set()).copy() if not cf.done()]
        if jobs:
            # Calls queued or running on this fd end first (shielded: cancelling the
            # close does not cancel them, and the fd is closed after them anyway).
            await asyncio.shield(
                asyncio.gather(*(_finished(cf, self.loop) for cf in jobs))
            )
        await self.run_sync(os.close, fd)

    async def fstat(self, fd: int) -> os.stat_result:
        return await self._tracked(None, os.fstat, fd)

    async def poll(self, fd: int, events: int) -> int:
        while not (mask := _ready_mask(fd, events)):
            if not await self._wait_ready(fd, events):
                return await self.run_sync(_ready_mask, fd, events)
        return mask
