"""The buffered binary ``ringio.open`` file, ``AsyncBufferedFile`` (like
``io.BufferedReader/Writer/Random``): it wraps a raw ``AsyncFileIO`` (``.raw``),
as io's buffered files wrap a ``FileIO``. Reads fill a read buffer and keep what
they read ahead (line iteration borrows it), writes collect in a write buffer;
io's buffered error messages. Everything else (the fd, the position, a cancelled
op's bookkeeping, O_DIRECT, closing) is the raw file's.
"""

from __future__ import annotations

import asyncio
import errno
import io
import operator
import os
import sys
import warnings
from collections.abc import Coroutine, Iterable
from typing import Any

from .._core import (
    LINES_BYTES,
    AlignedBuffer,
    InlineRead,
    LineCursor,
    ReadGate,
    copy_whole_into,
    pread_nowait,
    pread_ready,
)
from .base import (
    CHUNK_MIN,
    OFF_T_MAX,
    READ_AHEAD_BELOW,
    READ_AHEAD_MAX,
    _closed_error,
    _index,
    _scatter,
    markcoroutinefunction,
)
from .binary import WHENCES, _BinaryFile
from .raw import AsyncFileIO

# io's BufferedWriter writes data of exactly the buffer size straight to the file
# from CPython 3.13 on; before, it buffered it (straight only when larger).
_STRAIGHT_FROM_BUFSIZE = sys.version_info >= (3, 13)


class AsyncBufferedFile(_BinaryFile):
    """A buffered binary file over a raw one (like ``io.BufferedReader/Writer/Random``).

    The two share one lock (the raw file's): an op through ``.raw`` and one through
    the buffered file never interleave. Under it, the buffered file calls the raw
    file's lock-held parts."""

    # Read in place by the native ``pread``/``preadinto``, as ``AsyncFileIO._gate``.
    __slots__ = ("_gate",)

    def __init__(self, raw: AsyncFileIO, buffer_size: int) -> None:
        self.raw = raw
        self._lock = raw._lock
        # What the fd allows, which never changes: the fast paths check these.
        self._readable = raw._readable
        self._writable = raw._writable
        self._seekable = raw._seekable
        self._bufsize = buffer_size
        # Read-ahead: the raw file's position is at the end of _rbuf.
        self._rbuf = b""
        self._rpos = 0
        self._cursor: LineCursor | None = None
        # Written data not yet written to the raw file, whose position is at its start.
        self._wbuf = bytearray()
        # Open while the write buffer is empty (a pread writes it out first); it
        # hangs from the raw file's gate, which says the rest (see
        # ``AsyncFileIO._gate``).
        gate = raw._gate
        self._gate = ReadGate(gate.fd, gate.memory, gate, open=True)
        self._fill = buffer_size  # grows while reads stay sequential
        # Where the last read from the file ended (a fill, or a read straight to the
        # caller): a read from there is sequential.
        self._last_fill_end = -1

    # -- plain properties (the raw file's) ---------------------------------------------
    @property
    def name(self) -> Any:
        return self.raw.name

    @property
    def mode(self) -> str:  # type: ignore[override]
        return self.raw.mode

    @property
    def closed(self) -> bool:
        return self.raw._closed

    def fileno(self) -> int:
        return self.raw.fileno()

    def readable(self) -> bool:
        return self.raw.readable()

    def writable(self) -> bool:
        return self.raw.writable()

    def seekable(self) -> bool:
        return self.raw.seekable()

    def isatty(self) -> bool:
        return self.raw.isatty()

    # As io: a buffered file without the capability has no such method at all
    # (UnsupportedOperation, closed or not).
    def _check_readable(self) -> None:
        if not self._readable:
            raise io.UnsupportedOperation("read")
        if self.raw._closed:
            raise _closed_error()

    def _check_writable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation("write")
        if self.raw._closed:
            raise _closed_error()

    def _check_truncatable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation("truncate")

    def _check_seek(self, offset: int, whence: int) -> None:
        if not -OFF_T_MAX - 1 <= offset <= OFF_T_MAX:  # what the builtin's says
            raise ValueError("cannot fit 'int' into an offset-sized integer")
        if whence not in WHENCES:
            raise ValueError(f"whence value {whence} unsupported")
        if not self._seekable:
            raise io.UnsupportedOperation("File or stream is not seekable.")

    # -- the buffers (lock held) --------------------------------------------------------
    def _drop_read_buffer(self) -> None:
        """Forgets read-ahead: the raw position goes back to the logical one. A
        pipe's bytes cannot be read again: they are kept."""
        self._unlines()
        left = len(self._rbuf) - self._rpos
        raw = self.raw
        if left:
            if self._seekable and raw._pos is not None:
                raw._pos -= left
            elif not self._seekable:
                return
        self._rbuf = b""
        self._rpos = 0
        raw._drop_read_buffer()

    async def _flush_locked(self) -> None:
        raw = self.raw
        await raw._settle()
        wbuf = self._wbuf
        while wbuf:
            # The engine may hold `wbuf` until the kernel is done: if we are
            # cancelled (or close() ended the write: ValueError), swap in a copy
            # so later writes can still append, and drop what the op wrote once
            # its result is known.
            try:
                n = await raw._raw_write(wbuf)
            except (asyncio.CancelledError, ValueError):
                self._wbuf = bytearray(wbuf)
                self._gate.open = False
                pending = raw._pending
                if pending is not None:

                    def applied(k: int, pending: Any = pending) -> None:
                        pending(k)
                        del self._wbuf[:k]

                    raw._set_pending(applied)
                raise
            if n == 0:
                raise OSError(errno.EIO, "write returned 0 bytes")
            del wbuf[:n]

    async def _before_read(self) -> None:
        self._unlines()
        await self.raw._settle()
        if self._wbuf:
            await self._flush_locked()

    async def _before_write(self) -> None:
        self._unlines()
        raw = self.raw
        await raw._settle()
        if self._rbuf or raw._rbuf:
            self._drop_read_buffer()

    async def _fill_chunk(self, size: int) -> bool:
        """Appends one raw read of `size` to the read buffer; False at EOF."""
        rbuf, rpos = self._rbuf, self._rpos
        if rpos < len(rbuf) and self.raw._may_read_inline_holding_lock():
            # Bytes left unread (a partial line): the page cache's chunk is read in
            # behind them, into one bytes object, where joining the two copied the
            # whole chunk again (3 % of a binary file's line iteration).
            raw = self.raw
            pos: int = raw._pos  # type: ignore[assignment]
            try:
                data = pread_nowait(
                    raw._fd, size, pos, raw._hint.memory, head=rbuf, head_from=rpos
                )
            except Exception:  # the raw read below says what is wrong
                data = None
            if data is not None:
                got = len(data) - (len(rbuf) - rpos)
                raw._pos = pos + got
                if not got:
                    return False
                self._rbuf, self._rpos = data, 0
                return True
        data = await self.raw._raw_read(size)
        if not data:
            return False
        self._append_read(data)
        return True

    def _logical_pos(self) -> int:
        self._unlines()
        pos = self.raw._logical_pos()
        if self._wbuf:
            return pos + len(self._wbuf)
        return pos - (len(self._rbuf) - self._rpos)

    # -- reading ----------------------------------------------------------------------
    def _may_read_inline(self) -> bool:
        """The raw file's check, and no buffered write is due before the read."""
        return not self._wbuf and self.raw._may_read_inline()

    def _reads_ahead(self, need: int) -> bool:
        """Whether a read of `need` bytes past the read buffer fills the buffer:
        below the buffer size (as io's), or below READ_AHEAD_BELOW where it follows
        the last read from the file (not with O_DIRECT, whose reads of the buffer
        size or more go to the caller's buffer). Else it goes straight to the
        caller."""
        raw = self.raw
        return need < self._bufsize or (
            need < READ_AHEAD_BELOW and raw._pos == self._last_fill_end and not raw._direct
        )

    def _read_straight(self, pos: int) -> None:
        """Notes a read that went straight to the caller and ended at `pos`."""
        self._last_fill_end = pos
        self._fill = self._bufsize

    async def read(self, size: int | None = -1) -> bytes:
        """Reads up to `size` bytes (all, to EOF, when negative or None)."""
        # _read_now's case of a read the read buffer holds whole, inlined: the path
        # of every small sequential read (a method call was an eighth of it).
        rbuf, rpos = self._rbuf, self._rpos
        if type(size) is int and 0 <= size <= len(rbuf) - rpos and self._cursor is None:
            lock = self._lock
            if (
                not lock._locked  # type: ignore[attr-defined]
                and not lock._waiters  # type: ignore[attr-defined]
                and self._readable
                and not self.raw._closed
            ):
                self._rpos = rpos + size
                return rbuf[rpos : rpos + size]
        data = self._read_now(size)
        if data is not None:
            return data
        return await self._read_waiting(size)

    async def readinto(self, buffer: Any) -> int:
        """Reads into a writable bytes-like object; returns the byte count."""
        # _readinto_now's case of a read the read buffer holds whole, inlined (as
        # read's above).
        rpos = self._rpos
        if len(self._rbuf) > rpos and self._cursor is None:
            lock = self._lock
            if (
                not lock._locked  # type: ignore[attr-defined]
                and not lock._waiters  # type: ignore[attr-defined]
                and self._readable
                and not self.raw._closed
            ):
                try:
                    got = copy_whole_into(buffer, self._rbuf, rpos)
                except Exception:  # not a writable buffer: the slow path says so
                    got = -1
                if got >= 0:
                    self._rpos = rpos + got
                    return got
        got = self._readinto_now(buffer)
        if got is not None:
            return got
        return await self._readinto_waiting(buffer)

    def _read_now(self, size: Any) -> bytes | None:
        """``read(size)`` from the read buffer, refilled from the page cache where it
        holds the bytes; else None (nothing changed)."""
        lock = self._lock
        # lock.idle(), inlined: this is the path of every read the buffer serves.
        if (
            type(size) is not int
            or size < 0
            or lock._locked  # type: ignore[attr-defined]
            or lock._waiters  # type: ignore[attr-defined]
            or not self._readable
            or self.raw._closed
        ):
            return None
        if self._cursor is not None:
            self._unlines()
        rpos = self._rpos
        rbuf = self._rbuf
        if size <= len(rbuf) - rpos:
            self._rpos = rpos + size
            return rbuf[rpos : rpos + size]
        avail = len(rbuf) - rpos
        if not self._may_read_inline():
            return None
        raw = self.raw
        pos: int = raw._pos  # type: ignore[assignment]
        need = size - avail
        if not self._reads_ahead(need):
            # As _read_sized: a large read goes straight to the caller.
            try:
                data = pread_nowait(raw._fd, need, pos, raw._hint.memory)
            except Exception:  # the coroutine says what is wrong
                return None
            if data is None:
                return None
            raw._pos = pos + len(data)
            self._read_straight(raw._pos)
            return self._take(avail) + data if avail else data
        if not self._fill_now(need):
            return None
        return self._take(size)

    def _fill_now(self, need: int) -> bool:
        """Appends a fill for a read of `need` bytes from the page cache to the read
        buffer (the raw file may read inline, and the buffer holds nothing ahead of
        its position); False, with nothing changed, where the cache does not hold it."""
        raw = self.raw
        pos: int = raw._pos  # type: ignore[assignment]
        fill, last_end = self._fill, self._last_fill_end
        try:
            data = pread_nowait(raw._fd, self._fill_size(need), pos, raw._hint.memory)
        except Exception:  # the coroutine says what is wrong
            data = None
        if data is None:
            self._fill, self._last_fill_end = fill, last_end
            return False
        raw._pos = pos + len(data)
        if data:
            self._append_read(data)
        return True

    def _readinto_now(self, buffer: Any) -> int | None:
        """``readinto(buffer)`` from the read buffer where it holds enough, or, where
        it is empty and the page cache holds the bytes, from a fill of it (reads
        that read ahead, ``_reads_ahead``) or straight into `buffer`; else None
        (nothing changed)."""
        raw = self.raw
        lock = self._lock
        # lock.idle(), inlined: this is the path of every readinto the buffer serves.
        if (
            not self._readable
            or raw._closed
            or lock._locked  # type: ignore[attr-defined]
            or lock._waiters  # type: ignore[attr-defined]
        ):
            return None
        if self._cursor is not None:
            self._unlines()
        rpos = self._rpos
        if len(self._rbuf) > rpos:
            # Served from the read buffer where it holds the whole read.
            try:
                got = copy_whole_into(buffer, self._rbuf, rpos)
            except Exception:  # not a writable buffer: the coroutine says so
                return None
            if got < 0:
                return None
            self._rpos = rpos + got
            return got
        try:
            mv = memoryview(buffer)
        except TypeError:  # the coroutine says what is wrong
            return None
        n = mv.nbytes
        if mv.readonly or n == 0 or not mv.c_contiguous:
            return None
        if self._wbuf:
            return None
        if not self._reads_ahead(n):
            # Straight into the caller's buffer, as _readinto_locked reads; the raw
            # file's cached read fills it whole (short only at EOF), as a buffered
            # readinto must.
            got = raw._readinto_now(buffer)
            if got is not None:
                self._read_straight(raw._pos)  # type: ignore[arg-type]
            return got
        if not raw._may_read_inline() or not self._fill_now(n):
            return None
        return self._take_into(mv)

    async def _read_sized(self, size: int) -> bytes:
        """`size` bytes (fewer at EOF): from the read buffer, refilled as needed;
        reads that do not read ahead (``_reads_ahead``) go straight to the caller."""
        rpos = self._rpos
        if size <= len(self._rbuf) - rpos and not self._lock.locked():
            self._rpos = rpos + size
            return self._rbuf[rpos : rpos + size]
        async with self._lock:
            await self._before_read()
            parts = [self._take(size)]
            need = size - len(parts[0])
            try:
                if not self._reads_ahead(need):
                    # Large read: straight from the file, no copy through the buffer.
                    raw = self.raw
                    while need > 0:
                        data = await raw._raw_read(need)
                        if not data:
                            break
                        parts.append(data)
                        need -= len(data)
                    if raw._pos is not None:
                        self._read_straight(raw._pos)
                else:
                    while need > 0:
                        if not await self._fill_chunk(self._fill_size(need)):
                            break
                        data = self._take(need)
                        parts.append(data)
                        need -= len(data)
            except BaseException:
                self._unread(b"".join(parts))
                raise
            return b"".join(parts)

    def _fill_size(self, need: int) -> int:
        """Buffer fill for a read of `need` bytes: the buffer size, doubling (to
        READ_AHEAD_MAX, or the buffer size where that is larger) while the reads stay
        sequential, back to the buffer size after a seek; at least `need`."""
        pos = self.raw._pos
        if pos is not None and pos == self._last_fill_end:
            self._fill = max(min(self._fill * 2, READ_AHEAD_MAX), self._bufsize)
        else:
            self._fill = self._bufsize
        fill = max(self._fill, need)
        if pos is not None:
            self._last_fill_end = pos + fill
        return fill

    async def read1(self, size: int = -1) -> bytes:
        """Reads up to `size` bytes with at most one read from the file."""
        self._unlines()
        self._check_readable()
        size = _index(size, allow_none=False)  # as io's read1: None is a TypeError
        async with self._lock:
            await self._before_read()
            if size < 0:
                size = max(self._bufsize, CHUNK_MIN)
            if self._rpos < len(self._rbuf):
                return self._take(size)
            if size == 0:
                return b""
            return await self.raw._raw_read(size)

    async def readall(self) -> bytes:
        """Reads to the end of the file, in large chunks."""
        self._unlines()
        self._check_readable()
        async with self._lock:
            await self._before_read()
            head = self._take(len(self._rbuf))
            self._rbuf, self._rpos = b"", 0
            # If this raises, the raw file keeps what was read, `head` first.
            return await self.raw._readall_locked(head)

    async def _readinto_locked(self, mv: memoryview) -> int:
        """Fills `mv` (less only at EOF): from the read buffer, then from fills of it
        where the read reads ahead (``_reads_ahead``), else straight from the file."""
        n = len(mv)
        got = 0
        if self._rpos < len(self._rbuf):
            got = self._take_into(mv)
            if got == n:
                return got
        raw = self.raw
        if raw._direct and got == 0 and raw._rpos >= len(raw._rbuf):
            direct = await raw._direct_readinto(mv)
            if direct is not None:
                return direct
        try:
            if self._reads_ahead(n - got):
                # Through the read buffer, as _read_sized fills it.
                while got < n and await self._fill_chunk(self._fill_size(n - got)):
                    got += self._take_into(mv[got:])
                return got
            while got < n:
                k = await raw._readinto_once(mv[got:])
                got += k
                if k == 0:
                    break
        except BaseException:
            self._unread(mv[:got].tobytes())
            raise
        if raw._pos is not None:
            self._read_straight(raw._pos)
        return got

    def _lend(self) -> None:
        """Lends the rest of the read buffer to line iteration (after a line was
        read through readline()); not while another task's op holds the lock."""
        rbuf = self._rbuf
        if (
            self._cursor is None
            and self._rpos < len(rbuf)
            and type(rbuf) is bytes
            and not self._lock.locked()
        ):
            self._cursor = LineCursor(rbuf, self._rpos, LINES_BYTES)

    # -- writing ----------------------------------------------------------------------
    async def _write_checked(self, data: Any, mv: memoryview) -> int:
        """As io's BufferedWriter of the running Python: into the write buffer while
        it has room (up to full); else the buffer is written out first, then data
        too large for the buffer goes straight to the file and smaller data into the
        emptied buffer. Returns the whole length."""
        n = mv.nbytes
        bufsize = self._bufsize
        large = n >= bufsize if _STRAIGHT_FROM_BUFSIZE else n > bufsize
        wbuf = self._wbuf
        if (
            not large
            and len(wbuf) + n <= bufsize
            and not self._rbuf
            and self.raw._pending is None
            and not self._lock.locked()
        ):
            if not wbuf:
                self._gate.open = False  # a pread must now write the buffer out first
            wbuf += mv  # the common case: no I/O, no lock
            return n
        async with self._lock:
            await self._before_write()
            if large or len(self._wbuf) + n > bufsize:
                await self._flush_locked()
            if large:
                # bytes cannot change under us; anything else is copied first.
                await self.raw._write_all(data if isinstance(data, bytes) else mv.tobytes())
            else:
                self._gate.open = False
                self._wbuf += mv
        return n

    async def flush(self) -> None:
        """Writes out the write buffer."""
        self._check_closed()
        if self._wbuf or self.raw._pending is not None:
            async with self._lock:
                await self._flush_locked()

    # -- position ---------------------------------------------------------------------
    async def tell(self) -> int:
        """The current position."""
        self._unlines()
        self._check_closed()
        if not self._seekable:
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))
        raw = self.raw
        async with self._lock:
            await raw._settle()
            if raw._append and self._wbuf:
                await self._flush_locked()
            await raw._raw_pos()
            return self._logical_pos()

    async def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Moves the position (whence: SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA,
        SEEK_HOLE); returns the new position."""
        self._unlines()
        self._check_closed()
        offset = operator.index(offset)
        whence = operator.index(whence)
        self._check_seek(offset, whence)
        async with self._lock:
            await self._flush_locked()
            return await self.raw._seek_locked(offset, whence, self)

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position); the position stays."""
        self._unlines()
        self._check_closed()
        self._check_truncatable()
        if not self._seekable:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        async with self._lock:
            await self._flush_locked()
            return await self.raw._truncate_locked(size, self)

    # -- the raw file's own operations, after the buffers ------------------------------
    async def _flush_before_positional(self) -> None:
        if self._wbuf:
            async with self._lock:
                await self._flush_locked()

    def pread(self, n: int, offset: int) -> Coroutine[Any, Any, bytes]:
        """Reads up to `n` bytes at `offset`, leaving the position alone; served at
        once where the page cache holds them (see the raw file's ``pread``)."""
        # The native method (``InlineRead``, below) serves cached reads itself and
        # calls this where the file's gate, or the raw file's, is shut.
        raw = self.raw
        written = not self._wbuf
        self._gate.open = written
        if raw._inline_read_clear() and written:
            try:
                ready = pread_ready(raw._fd, n, offset, raw._hint.memory)
            except Exception:  # the engine's path below says what is wrong
                ready = None
            if ready is not None:
                return ready
        elif raw._direct and written:
            started = raw._start_direct_pread(n, offset)
            if started is not None:
                return started
        return self._pread(n, offset)

    async def _pread(self, n: int, offset: int) -> bytes:
        self._check_readable()
        if n < 0 or offset < 0:
            raise ValueError("negative size or offset")
        raw = self.raw
        raw._check_offsets()
        if self._wbuf or raw._pending is not None:
            async with self._lock:
                await self._flush_locked()
        # The raw file's pread (``PositionalIO.pread``), inlined: awaiting it would
        # cost a coroutine per read.
        if raw._direct:
            # No lock: the aligned bounce buffer is this read's own.
            a = raw._off_align
            start = offset - offset % a
            bounce = AlignedBuffer(-(-(offset + n) // a) * a - start, raw._bounce_align)
            got = await raw._eng.pread(raw._fd, bounce, start, raw._hint)
            skip = offset - start
            got = max(0, min(got - skip, n))
            return bytes(memoryview(bounce)[skip : skip + got])
        return await raw._eng.pread_bytes(raw._fd, n, offset, raw._hint)

    pread = markcoroutinefunction(InlineRead(pread, _pread, "pread"))  # type: ignore[assignment]

    def preadinto(self, buffer: Any, offset: int) -> Coroutine[Any, Any, int]:
        """``AsyncFileIO.preadinto`` (straight into an aligned buffer on O_DIRECT, at
        once where the page cache holds the bytes), after the write buffer is
        written out."""
        written = not self._wbuf
        self._gate.open = written
        if written:
            return self.raw.preadinto(buffer, offset)
        return self._preadinto_flushed(buffer, offset)

    def _preadinto_queued(self, buffer: Any, offset: int) -> Coroutine[Any, Any, int]:
        """The raw file's read through its queue: the data is not cached."""
        return self.raw._preadinto(buffer, offset)

    preadinto = markcoroutinefunction(  # type: ignore[assignment]
        InlineRead(preadinto, _preadinto_queued, "preadinto")
    )

    async def _preadinto_flushed(self, buffer: Any, offset: int) -> int:
        self._check_readable()
        await self._flush_before_positional()
        return await self.raw.preadinto(buffer, offset)

    async def pread_many(self, n: int, offsets: Iterable[int], *, depth: int = 32) -> list[bytes]:
        """``AsyncFileIO.pread_many``, after the write buffer is written out."""
        self._check_readable()
        await self._flush_before_positional()
        return await self.raw.pread_many(n, offsets, depth=depth)

    async def preadinto_many(
        self, buffer: Any, offsets: Iterable[int], *, depth: int = 32
    ) -> list[int]:
        """``AsyncFileIO.preadinto_many``, after the write buffer is written out."""
        self._check_readable()
        await self._flush_before_positional()
        return await self.raw.preadinto_many(buffer, offsets, depth=depth)

    async def pwrite(self, data: Any, offset: int) -> int:
        """Writes `data` at `offset` (one op, may be short), leaving the position alone."""
        self._unlines()
        self._check_writable()
        if isinstance(data, str):
            raise TypeError("a bytes-like object is required, not 'str'")
        if offset < 0:
            raise ValueError("negative offset")
        raw = self.raw
        raw._check_offsets()
        if raw._direct and not (self._wbuf or self._rbuf or raw._pending or raw._rbuf):
            bounce = raw._whole_blocks(data, offset)
            if bounce is not None:
                return await raw._eng.pwrite(raw._fd, bounce, offset, raw._hint)
        async with self._lock:
            await self._flush_locked()
            if self._rbuf:
                self._drop_read_buffer()  # may now be stale
            return await raw._pwrite_locked(data, offset)

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
            await self._before_read()
            self._drop_read_buffer()
            if self._rbuf:  # a pipe's read-ahead comes first
                return _scatter(bufs, self._take(sum(memoryview(b).nbytes for b in bufs)))
            return await self.raw._readv_locked(bufs)

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
            await self._before_write()
            await self._flush_locked()
            return await self.raw._writev_locked(bufs)

    async def fsync(self) -> None:
        """Flushes, then fsync(2)."""
        await self.flush()
        await self.raw.fsync()

    async def fdatasync(self) -> None:
        """Flushes, then fdatasync(2)."""
        await self.flush()
        await self.raw.fdatasync()

    # -- closing ----------------------------------------------------------------------
    async def close(self) -> None:
        """Flushes, then closes the raw file.

        An op another task has in flight on a pipe, socket or terminal is ended:
        it raises ``ValueError: I/O operation on closed file.``, as do the ops
        waiting behind it; the write buffer is written out after them. The fd
        number goes back to the OS only once the kernel has completed every op of
        ours on it."""
        self._unlines()  # iteration stops: the next line raises ValueError
        await self.raw._close(self)

    def __del__(self) -> None:
        raw = getattr(self, "raw", None)
        if raw is None or raw._closed:
            return
        if raw._closefd:
            warnings.warn(f"unclosed file {self!r}", ResourceWarning, stacklevel=2, source=self)
        raw._close_now()

    def _close_now(self) -> None:
        """Closes at collection (see ``AsyncFileIO._close_now``)."""
        self.raw._close_now()
