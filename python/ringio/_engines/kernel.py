"""Engines that hand operations to the kernel: io_uring and kernel AIO.

Both drive their kernel queue through ``ringio._proactor.Proactor`` on the loop
(one submit per loop turn, or at once while the kernel is short of work;
completions settled in batches from the eventfd).

Fast path: a buffered read of cached data is first tried inline with
``preadv2(RWF_NOWAIT)``; only when the kernel says it would block (EAGAIN) does it
go through the queue. Never on an O_DIRECT file (the engine's per-fd hint, see
``FileEngine.nowait_hint``): there the inline read would wait for the device. A file
of a memory filesystem (tmpfs, ramfs) refuses RWF_NOWAIT but waits for no device:
``_core.preadinto_nowait`` reads it inline without the flag.
Writes likewise try ``pwritev2(RWF_NOWAIT)`` (with a caller's hint) until the
filesystem says it cannot (ext4: EOPNOTSUPP), which the file's hint remembers.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import stat
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .. import _core, _ring_hook
from .._proactor import LoopRingProactor, Proactor, StagingProactor
from .base import (
    FileEngine,
    NowaitHint,
    Outcome,
    PoolPathOps,
    read_what_is_there,
    write_what_fits,
)  # fmt: skip
from .base import check_offset as _check_offset
from .inline import fstat_inline, open_inline, stat_inline
from .many import ManyReads

AT_EMPTY_PATH = 0x1000
AT_SYMLINK_NOFOLLOW = 0x100
_NOWAIT = os.RWF_NOWAIT
FUSE_SUPER_MAGIC = 0x65735546


def _check_fd(fd: int) -> None:
    # statx(AT_EMPTY_PATH) on AT_FDCWD (-100) would describe the working directory.
    if fd < 0:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def _inline_read_refused(e: OSError, hint: NowaitHint) -> None:
    """An inline RWF_NOWAIT read failed: re-raise a real error; where the file just
    cannot do RWF_NOWAIT, remember that (the caller then uses the kernel queue)."""
    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ESPIPE):
        raise e
    hint.read = False


class KernelEngine(FileEngine):
    inline_reads = True

    def __init__(
        self, loop: asyncio.AbstractEventLoop, queue: Any, cancellable: Callable,
        proactor: Proactor | None = None,
    ) -> None:
        super().__init__(loop)
        # The proactor reaches the loop only weakly, so that a finished loop (and
        # with it this engine and its kernel queue) can be collected.
        self._queue = queue
        if proactor is None:
            proactor = Proactor(queue, weakref.proxy(loop), cancellable=cancellable)
        proactor.home(loop)
        self._proactor = proactor

    def _start(self, op: _core.Op, outcome: Outcome | None) -> asyncio.Future:
        """Queues `op` (its `data` is a new future) and returns that future. The
        caller awaits it and calls `self._proactor.abandon(op)` if the await raises:
        that cancels the op in the kernel, with no done-callback per op."""
        if outcome is not None:
            proactor = self._proactor
            outcome.arm(lambda: proactor.settled(op))
        return self._proactor.start(op, watch=False)

    async def _run(
        self, make: Callable[..., _core.Op], *args: Any, outcome: Outcome | None = None,
        **kwargs: Any,
    ) -> Any:
        op = make(*args, data=self._new_future(), **kwargs)
        try:
            return await self._start(op, outcome)
        except BaseException:
            self._proactor.abandon(op)
            raise

    async def pread(
        self, fd: int, buf: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        # The hot path: the checks and _run's body are inlined (no call or
        # coroutine more per read than needed).
        if offset < 0:
            _check_offset(offset)
        if self.closed:
            self._check_open()
        # The engine's own per-fd hint decides the inline attempt only: whether the
        # queue reads the file correctly (FUSE) is never cached in it, because an fd
        # number reused for another file would then keep a wrong answer.
        nowait = hint or self._fd_hints.get(fd) or self.nowait_hint(fd)
        if nowait.read:
            try:
                got = _core.preadinto_nowait(fd, buf, offset, nowait.memory)
            except OSError as e:
                _inline_read_refused(e, nowait)
            else:
                if got is not None:
                    return got
                # Not (all) cached: the kernel queue reads it without blocking us.
        if (hint is None or not hint.queue_reads) and not self._queue_reads_correct(fd, hint):
            return await self._tracked(outcome, os.preadv, fd, [buf], offset)
        op = _core.pread(fd, buf, offset, data=self._new_future())
        try:
            if outcome is None:
                return await self._proactor.start(op, watch=False)
            return await self._start(op, outcome)
        except BaseException:
            self._proactor.abandon(op)
            raise

    def start_direct_read(
        self, fd: int, target: Any, offset: int, hint: NowaitHint, off_align: int,
        mem_align: int,
    ) -> Coroutine[Any, Any, Any] | None:
        # Only where pread would queue the op at once: no inline attempt (an O_DIRECT
        # read would wait for the device) and a queue that reads this file correctly.
        if (
            hint.read
            or not (hint.queue_reads or self._queue_reads_correct(fd, hint))
            or self.closed
        ):
            return None
        return self._proactor.start_direct_read(
            fd, target, offset, off_align, mem_align, self._new_future
        )

    async def _read_many(
        self, fd: int, n: int, offs: list[int], out: memoryview | None,
        hint: NowaitHint | None, depth: int, align: tuple[int, int] | None,
    ) -> list[Any]:
        if not self._queue_reads_correct(fd, hint):
            return await super()._read_many(fd, n, offs, out, hint, depth, align)
        results: list[Any] = [b"" if out is None else 0] * len(offs)
        todo: Sequence[int] = range(len(offs))
        nowait = hint or self._fd_hints.get(fd) or self.nowait_hint(fd)
        if nowait.read and align is None:
            # Cached data first, inline (as pread and pread_bytes do): only what the
            # page cache lacks goes to the kernel queue.
            try:
                todo = self._read_cached(fd, n, offs, out, results, nowait.memory)
            except OSError as e:
                _inline_read_refused(e, nowait)
        many = ManyReads(self, fd, n, offs, out, results, todo, align, min(depth, len(todo)))
        return await many.run()

    @staticmethod
    def _read_cached(
        fd: int, n: int, offs: list[int], out: memoryview | None, results: list[Any],
        memory: bool,
    ) -> list[int]:
        """Reads what the page cache holds; returns the indices of the others."""
        todo = []
        if out is None:
            for i, off in enumerate(offs):
                data = _core.pread_nowait(fd, n, off, memory)
                if data is None:
                    todo.append(i)
                else:
                    results[i] = data
            return todo
        for i, off in enumerate(offs):
            got = _core.preadinto_nowait(fd, out[i * n : i * n + n], off, memory)
            if got == n:
                results[i] = got
            else:
                todo.append(i)  # not cached, or only partly (or at the end of the file)
        return todo

    def _queue_reads_correct(self, fd: int, hint: NowaitHint | None) -> bool:
        """Whether the kernel queue reads this file correctly (see the uring engine)."""
        return True

    async def _queued_pread(
        self, fd: int, buf: Any, offset: int, hint: NowaitHint | None, outcome: Outcome | None
    ) -> int:
        if self._queue_reads_correct(fd, hint):
            return await self._run(_core.pread, fd, buf, offset, outcome=outcome)
        return await self._tracked(outcome, os.preadv, fd, [buf], offset)

    async def pread_bytes(
        self, fd: int, n: int, offset: int, hint: NowaitHint | None = None
    ) -> bytes:
        # Cached data is copied once, page cache to the bytes object returned.
        self._check_open()
        nowait = hint or self._fd_hints.get(fd) or self.nowait_hint(fd)
        if nowait.read:
            try:
                data = _core.pread_nowait(fd, n, offset, nowait.memory)
            except OSError as e:
                _inline_read_refused(e, nowait)
            else:
                if data is not None:
                    return data
        buf = bytearray(n)
        got = await self._queued_pread(fd, buf, offset, hint, None)
        del buf[got:]
        return bytes(buf)

    async def pwrite(
        self, fd: int, data: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        _check_offset(offset)
        self._check_open()
        if hint is not None and hint.write:
            try:
                # A file of a memory filesystem is written with a plain call (see
                # ``_core.on_memory_filesystem``): it refuses RWF_NOWAIT.
                return os.pwritev(fd, [data], offset, 0 if hint.memory else _NOWAIT)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ESPIPE):
                    raise
                hint.write = False
        return await self._run(_core.pwrite, fd, data, offset, outcome=outcome)

    async def preadv(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int:
        return await self._run(_core.preadv, fd, list(buffers), offset, outcome=outcome)

    async def pwritev(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int:
        return await self._run(_core.pwritev, fd, list(buffers), offset, outcome=outcome)

    async def fsync(self, fd: int) -> None:
        await self._run(_core.fsync, fd)

    async def fdatasync(self, fd: int) -> None:
        await self._run(_core.fdsync, fd)

    async def poll(self, fd: int, events: int) -> int:
        return await self._run(_core.poll, fd, events)

    def close_engine(self) -> None:
        if self.closed:
            return
        super().close_engine()
        try:
            self._proactor.close()
        except (ReferenceError, RuntimeError):
            # The loop is gone or closed: nothing to unregister; close the queue.
            self._queue.close()


def _raise_eisdir_for_directories(e: OSError, fd: int) -> None:
    # Kernel AIO answers EINVAL where read(2) says EISDIR.
    if e.errno == errno.EINVAL and _is_dir(fd):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)) from None


def _is_dir(fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        return False


class UringFileEngine(KernelEngine):
    name = "uring"

    def __init__(self, loop: asyncio.AbstractEventLoop, entries: int = 256) -> None:
        loop_ring = _ring_hook.loop_ring(loop)
        if loop_ring is not None:
            # ringio.EventLoop: file ops ride the loop's own ring, submitted and
            # reaped by its one io_uring_enter per iteration (no eventfd).
            proactor = LoopRingProactor(loop_ring, weakref.proxy(loop), lambda op: True)
            super().__init__(loop, proactor.ring, lambda op: True, proactor)
            return
        # Any other loop: a ring of the engine's own, used only from the loop's
        # thread (SINGLE_ISSUER + DEFER_TASKRUN where the kernel has them), whose
        # eventfd the loop watches.
        ring = _core.uring.Ring(entries, single_issuer=True)
        proactor = StagingProactor(ring, weakref.proxy(loop), cancellable=lambda op: True)
        super().__init__(loop, ring, lambda op: True, proactor)
        self.thread_bound = True

    # Linux 6.18 (at least): io_uring retries a short read of a FUSE file opened in
    # direct_io mode (FOPEN_DIRECT_IO, chosen by the FUSE server) at the read's
    # *starting* offset, and reports the full length: the tail of the buffer then
    # holds the start of the range again. Any read crossing EOF, or a server's short
    # reply, would silently return wrong bytes. Userspace cannot see whether a FUSE
    # file is in direct_io mode, so every queued read of a FUSE file goes to the
    # fallback pool instead (tests/reliability/test_eio.py reproduces the kernel bug).
    def _queue_reads_correct(self, fd: int, hint: NowaitHint | None) -> bool:
        if hint is not None and hint.queue_reads is not None:
            return hint.queue_reads
        ok = _core.fs_type(fd) != FUSE_SUPER_MAGIC
        if hint is not None:
            hint.queue_reads = ok
        return ok

    async def preadv(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int:
        if self._queue_reads_correct(fd, None):
            return await super().preadv(fd, buffers, offset, outcome=outcome)
        _check_offset(offset)
        return await self._tracked(outcome, os.preadv, fd, list(buffers), offset)

    async def read(self, fd: int, buf: Any, *, outcome: Outcome | None = None) -> int:
        return await self._run(_core.read, fd, buf, outcome=outcome)

    async def write(self, fd: int, data: Any, *, outcome: Outcome | None = None) -> int:
        return await self._run(_core.write, fd, data, outcome=outcome)

    async def open(
        self, path: Any, flags: int, mode: int = 0o666, *, dir_fd: int | None = None
    ) -> int:
        fd = open_inline(path, flags, dir_fd)
        if fd is not None:
            return fd
        return await self._run(_core.openat, path, flags, mode, dir_fd=dir_fd)

    async def close(self, fd: int) -> None:
        self.forget_fd(fd)
        await self._run(_core.close, fd)

    async def _statx(self, path: Any, dir_fd: int | None, flags: int) -> os.stat_result:
        from ..uring import stat_result

        fut = self._new_future()
        op = _core.statx(path, dir_fd=dir_fd, flags=flags, data=fut)
        await self._proactor.start(op)
        return stat_result(op)

    async def stat(
        self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True
    ) -> os.stat_result:
        st = stat_inline(path, dir_fd, follow_symlinks)
        if st is not None:
            return st
        flags = 0 if follow_symlinks else AT_SYMLINK_NOFOLLOW
        return await self._statx(path, dir_fd, flags)

    async def fstat(self, fd: int) -> os.stat_result:
        _check_fd(fd)
        st = fstat_inline(fd)
        if st is not None:
            return st
        return await self._statx("", fd, AT_EMPTY_PATH)

    async def ftruncate(self, fd: int, length: int) -> None:
        await self._run(_core.ftruncate, fd, length)

    async def rename(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, flags: int = 0,
    ) -> None:
        await self._run(
            _core.renameat, src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, flags=flags
        )

    async def unlink(self, path: Any, *, dir_fd: int | None = None) -> None:
        await self._run(_core.unlinkat, path, dir_fd=dir_fd)

    async def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        await self._run(_core.unlinkat, path, dir_fd=dir_fd, rmdir=True)

    async def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        await self._run(_core.mkdirat, path, mode, dir_fd=dir_fd)

    async def link(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, follow_symlinks: bool = True,
    ) -> None:
        await self._run(
            _core.linkat, src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd,
            follow_symlinks=follow_symlinks,
        )

    async def symlink(self, src: Any, dst: Any, *, dir_fd: int | None = None) -> None:
        await self._run(_core.symlinkat, src, dst, dir_fd=dir_fd)


class AioFileEngine(PoolPathOps, KernelEngine):
    """Kernel AIO for reads, writes, syncs and polls; the calls kernel AIO lacks
    (open, close, stat, rename, ...) run on the fallback pool."""

    name = "aio"

    def __init__(self, loop: asyncio.AbstractEventLoop, maxevents: int = 1024) -> None:
        super().__init__(loop, _core.aio.AioContext(maxevents), lambda op: op.command == "poll")

    async def pread(
        self, fd: int, buf: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        try:
            return await super().pread(fd, buf, offset, hint, outcome=outcome)
        except OSError as e:
            _raise_eisdir_for_directories(e, fd)
            raise

    async def pread_bytes(
        self, fd: int, n: int, offset: int, hint: NowaitHint | None = None
    ) -> bytes:
        try:
            return await super().pread_bytes(fd, n, offset, hint)
        except OSError as e:
            _raise_eisdir_for_directories(e, fd)
            raise

    async def _read_many(
        self, fd: int, n: int, offs: list[int], out: memoryview | None,
        hint: NowaitHint | None, depth: int, align: tuple[int, int] | None,
    ) -> list[Any]:
        try:
            return await super()._read_many(fd, n, offs, out, hint, depth, align)
        except OSError as e:
            _raise_eisdir_for_directories(e, fd)
            raise

    async def _stream(self, fd: int, events: int, attempt: Callable[[], int]) -> int:
        # Kernel AIO has no "at the file position" form and would block inside
        # io_submit on a pipe: wait for readiness with an AIO poll, then do the
        # non-blocking syscall.
        while True:
            try:
                return attempt()
            except BlockingIOError:
                await self._poll_stream(fd, events)

    async def _poll_stream(self, fd: int, events: int) -> None:
        """Waits for readiness: an AIO poll, or the loop's own readiness watch where
        AIO refuses the file (EINVAL: its poll uses more than one wait queue, as a
        terminal's does)."""
        try:
            await self.poll(fd, events)
        except OSError as e:
            if e.errno != errno.EINVAL or not await self._wait_ready(fd, events):
                raise

    async def read(self, fd: int, buf: Any, *, outcome: Outcome | None = None) -> int:
        if os.get_blocking(fd):
            while True:
                await self._poll_stream(fd, select.POLLIN)
                n = read_what_is_there(fd, buf)
                if n is not None:
                    return n
        return await self._stream(fd, select.POLLIN, lambda: os.readv(fd, [buf]))

    async def write(self, fd: int, data: Any, *, outcome: Outcome | None = None) -> int:
        if os.get_blocking(fd):
            while True:
                await self._poll_stream(fd, select.POLLOUT)
                n = write_what_fits(fd, data)
                if n is not None:
                    return n
        return await self._stream(fd, select.POLLOUT, lambda: os.write(fd, data))

    async def close(self, fd: int) -> None:
        self.forget_fd(fd)
        # Ops on this fd still waiting in the proactor's queue would be submitted
        # after the number is reused: submit them first (once in the kernel, an op
        # holds the file itself, not the number), waiting for room if need be.
        proactor = self._proactor
        while proactor.queued_on(fd):
            proactor.submit_queued()
            if proactor.queued_on(fd):
                await asyncio.sleep(0.001)  # the kernel queue is full: completions make room
        os.close(fd)  # never blocks for regular files; no kernel AIO form

    async def fstat(self, fd: int) -> os.stat_result:
        st = fstat_inline(fd)
        if st is not None:
            return st
        return await self.run_sync(os.fstat, fd)  # the server may be asked

