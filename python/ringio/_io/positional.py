"""The raw binary file's operations beyond ``io``'s: ``pread``/``pwrite`` (the
position is left alone), ``pread_many``/``preadinto_many``, ``readv``/``writev``,
``fsync``/``fdatasync``. The buffered file writes its buffer out, then calls these
(or, under the lock, their ``_*_locked`` parts).
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Coroutine, Iterable
from typing import Any

from .._core import AlignedBuffer, InlineRead, pread_ready, preadinto_ready
from .base import _scatter, markcoroutinefunction


class PositionalIO:
    """What ``ringio.open`` binary files add to ``io``'s: positioned and vectored
    reads and writes, batches of them, and ``fsync`` (on the raw file)."""

    _inline_reads: bool

    def pread(self, n: int, offset: int) -> Coroutine[Any, Any, bytes]:
        """Reads up to `n` bytes at `offset`, leaving the position alone.

        Where the page cache holds the bytes, they are read at once (the returned
        awaitable is already complete: no coroutine, no Future); else the read
        goes through the engine's queue when awaited."""
        # The native method (``InlineRead``, below) serves cached reads itself and
        # calls this where the file's gate is shut.
        if self._inline_read_clear():
            try:
                ready = pread_ready(self._fd, n, offset, self._hint.memory)
            except Exception:
                # Bad arguments, or a file that refuses RWF_NOWAIT: the engine's
                # path below says so, or remembers the refusal.
                ready = None
            if ready is not None:
                return ready
        elif self._direct:
            started = self._start_direct_pread(n, offset)
            if started is not None:
                return started
        return self._pread(n, offset)

    def _start_direct_pread(self, n: int, offset: int) -> Coroutine[Any, Any, bytes] | None:
        """An O_DIRECT ``pread`` started now by the engine (see
        ``FileEngine.start_direct_read``), where nothing is due before it and the
        file can read; None, with nothing started, elsewhere."""
        if (
            self._pending is None
            and self._readable
            and self._seekable
            and not self._closed
            and not self._eng.closed
        ):
            return self._eng.start_direct_read(
                self._fd, n, offset, self._hint, self._off_align, self._bounce_align
            )
        return None

    async def _pread(self, n: int, offset: int) -> bytes:
        self._check_readable()
        if n < 0 or offset < 0:
            raise ValueError("negative size or offset")
        self._check_offsets()
        if self._pending is not None:
            async with self._lock:
                await self._settle()
        if self._direct:
            # Positional: no lock, so concurrent preads of an O_DIRECT file keep the
            # device's queue as deep as the caller's concurrency. The aligned
            # bounce buffer is this read's own. Inlined: a helper coroutine cost
            # ~3.5k instructions per read, and even the span as a call to
            # read_span(offset, n, self._off_align) 0.8k of 40.8k (callgrind).
            a = self._off_align
            start = offset - offset % a
            bounce = AlignedBuffer(-(-(offset + n) // a) * a - start, self._bounce_align)
            got = await self._eng.pread(self._fd, bounce, start, self._hint)
            skip = offset - start
            got = max(0, min(got - skip, n))
            return bytes(memoryview(bounce)[skip : skip + got])
        return await self._eng.pread_bytes(self._fd, n, offset, self._hint)

    pread = markcoroutinefunction(InlineRead(pread, _pread, "pread"))  # type: ignore[assignment]

    def preadinto(self, buffer: Any, offset: int) -> Coroutine[Any, Any, int]:
        """Reads into `buffer` at `offset` (one read, as ``os.preadv(fd, [buffer],
        offset)``: fewer bytes only where the file ends), leaving the position alone;
        returns the byte count.

        Where the page cache holds the bytes they are read at once (the awaitable
        returned is already complete). On an O_DIRECT file the read goes straight
        into `buffer`, with no bounce buffer and no copy, when the buffer's address
        and length and `offset` are aligned (``ringio.aligned`` buffers are); else
        through an aligned bounce buffer."""
        if (
            self._pending is None
            and self._readable
            and self._seekable
            and not self._closed
            and not self._eng.closed
        ):
            if self._direct:
                started = self._eng.start_direct_read(
                    self._fd, buffer, offset, self._hint, self._off_align, self._mem_align
                )
                if started is not None:
                    return started
                if self._in_place(buffer, offset):
                    # The engine's own coroutine: no frame of this file's per read.
                    return self._eng.pread(self._fd, buffer, offset, self._hint)
            elif self._inline_read_clear():
                try:
                    ready = preadinto_ready(self._fd, buffer, offset, self._hint.memory)
                except Exception:
                    # Bad arguments, or a file that refuses RWF_NOWAIT: the path
                    # below says so, or remembers the refusal.
                    ready = None
                if ready is not None:
                    return ready
        return self._preadinto(buffer, offset)

    async def _preadinto(self, buffer: Any, offset: int) -> int:
        self._check_readable()
        view = _writable_view(buffer, "preadinto")
        offset = operator.index(offset)
        if offset < 0:
            raise ValueError("negative offset")
        self._check_offsets()
        if self._pending is not None:
            async with self._lock:
                await self._settle()
        if not view:
            return 0
        if self._direct and not self._in_place(view, offset):
            data = await self._pread(len(view), offset)
            view[: len(data)] = data
            return len(data)
        return await self._eng.pread(self._fd, view, offset, self._hint)


    preadinto = markcoroutinefunction(  # type: ignore[assignment]
        InlineRead(preadinto, _preadinto, "preadinto")
    )

    async def pread_many(self, n: int, offsets: Iterable[int], *, depth: int = 32) -> list[bytes]:
        """Reads up to `n` bytes at each of `offsets`, keeping up to `depth` reads in
        flight; returns the data in the order of `offsets` (short or empty at the end
        of the file), leaving the position alone.

        What `depth` tasks each awaiting ``pread`` do, without a task wake-up per
        read: each completion starts the next read at once (fio's way of keeping a
        device's queue full). The first error is raised and the reads in flight
        are cancelled; so does cancelling the awaiting task."""
        align = await self._before_positional_reads()
        return await self._eng.pread_many(self._fd, n, offsets, self._hint, depth=depth,
                                          align=align)  # fmt: skip

    async def preadinto_many(
        self, buffer: Any, offsets: Iterable[int], *, depth: int = 32
    ) -> list[int]:
        """``pread_many`` into `buffer`, cut in ``len(offsets)`` equal parts: read `k`
        fills part `k`. Returns each read's byte count. On an O_DIRECT file, reads go
        straight into the parts when the buffer, the part size and the offsets are
        aligned (``ringio.aligned``), else through aligned bounce buffers."""
        align = await self._before_positional_reads()
        return await self._eng.preadinto_many(self._fd, buffer, offsets, self._hint,
                                              depth=depth, align=align)  # fmt: skip

    async def _before_positional_reads(self) -> tuple[int, int] | None:
        """Checks, and applies a cancelled write's result (the reads must see it);
        returns the O_DIRECT alignment (offset, memory) of the file, None when buffered."""
        self._check_readable()
        self._check_offsets()
        if self._pending is not None:
            async with self._lock:
                await self._settle()
        return (self._off_align, self._mem_align) if self._direct else None

    async def pwrite(self, data: Any, offset: int) -> int:
        """Writes `data` at `offset` (one op, may be short), leaving the position alone."""
        self._unlines()
        self._check_writable()
        if isinstance(data, str):
            raise TypeError("a bytes-like object is required, not 'str'")
        if offset < 0:
            raise ValueError("negative offset")
        self._check_offsets()
        if self._direct and not (self._pending or self._rbuf):
            bounce = self._whole_blocks(data, offset)
            if bounce is not None:
                return await self._eng.pwrite(self._fd, bounce, offset, self._hint)
        async with self._lock:
            return await self._pwrite_locked(data, offset)

    def _whole_blocks(self, data: Any, offset: int) -> Any:
        """O_DIRECT: `data` copied into an aligned bounce buffer when it covers whole
        blocks at `offset` (such a write needs nothing read back or truncated, so
        no lock either); else None."""
        mv = memoryview(data).cast("B")
        if offset % self._off_align == 0 and mv.nbytes % self._off_align == 0 and mv:
            bounce = AlignedBuffer(mv.nbytes, self._bounce_align)
            memoryview(bounce)[:] = mv
            return bounce
        return None

    async def _pwrite_locked(self, data: Any, offset: int) -> int:
        await self._settle()
        if self._rbuf:
            self._drop_read_buffer()  # may now be stale
        if self._direct:
            saved = self._pos
            self._pos = offset
            try:
                return await self._direct_write(data)
            finally:
                self._pos = saved
        return await self._eng.pwrite(self._fd, data, offset, self._hint)

    async def readv(self, buffers: Iterable[Any]) -> int:
        """Scatter read: fills `buffers` in order with ONE op at the position, which
        advances; returns the byte count."""
        self._unlines()
        self._check_readable()
        bufs = list(buffers)
        for b in bufs:  # as os.readv: a read-only target is a TypeError, up front
            if memoryview(b).readonly:
                raise TypeError(f"readv() buffers must be writable, not {type(b).__name__}")
        async with self._lock:
            return await self._readv_locked(bufs)

    async def _readv_locked(self, bufs: list[Any]) -> int:
        await self._before_read()
        self._drop_read_buffer()
        if self._rbuf:  # a pipe's leftover bytes come first
            return await self._readinto_from_leftover(bufs)
        if self._direct:
            total = sum(memoryview(b).nbytes for b in bufs)
            data = await self._direct_read(total)
            return _scatter(bufs, data)
        if not self._seekable:
            # One read into a scratch buffer of ours, then scatter: if it is
            # cancelled, what the kernel read is kept from the scratch (the
            # caller's buffers are theirs again once the call has raised).
            scratch = bytearray(sum(memoryview(b).nbytes for b in bufs))
            got = await self._stream(self._eng.read, scratch, self._keep_read_bytes(scratch))
            return _scatter(bufs, bytes(memoryview(scratch)[:got]))
        pos = await self._raw_pos()
        got = await self._eng.preadv(self._fd, bufs, pos)
        self._pos = pos + got
        return got

    async def _readinto_from_leftover(self, bufs: list[Any]) -> int:
        data = self._take(sum(memoryview(b).nbytes for b in bufs))
        return _scatter(bufs, data)

    async def writev(self, buffers: Iterable[Any]) -> int:
        """Gather write: writes `buffers` in order with ONE op at the position, which
        advances; returns the byte count (may be short, like os.writev)."""
        self._unlines()
        self._check_writable()
        bufs = list(buffers)
        for b in bufs:
            if isinstance(b, str):
                raise TypeError("a bytes-like object is required, not 'str'")
        async with self._lock:
            return await self._writev_locked(bufs)

    async def _writev_locked(self, bufs: list[Any]) -> int:
        await self._before_write()
        if self._direct or not self._seekable:
            return await self._raw_write(b"".join(bufs))
        pos = self._pos if self._pos is not None else 0
        oc = self._outcome
        oc.reset()

        def advance(n: int) -> None:
            self._pos = None if self._append else pos + n

        try:
            n = await self._eng.pwritev(self._fd, bufs, pos, outcome=oc)
        except asyncio.CancelledError:
            if oc.armed:
                self._set_pending(advance)
            raise
        advance(n)
        return n

    async def fsync(self) -> None:
        """Flushes, then fsync(2)."""
        await self.flush()
        await self._eng.fsync(self._fd)

    async def fdatasync(self) -> None:
        """Flushes, then fdatasync(2)."""
        await self.flush()
        await self._eng.fdatasync(self._fd)


def _writable_view(buffer: Any, method: str) -> memoryview:
    """`buffer` as a writable memoryview of bytes; TypeError for what a read cannot fill."""
    view = memoryview(buffer)
    if view.readonly:
        raise TypeError(
            f"{method}() argument must be a writable buffer, not {type(buffer).__name__}"
        )
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view
