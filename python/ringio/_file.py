"""``ringio.open``: asyncio file objects over the file engines (io_uring, kernel AIO).

The objects mirror the standard library's ``open()`` result (``FileIO``,
``BufferedReader/Writer/Random``, ``TextIOWrapper``) with ``await`` wherever the call
may do I/O. Design notes, in short (docs/files.md has the long version):

* The position lives in the object, not in the fd: every read and write of a
  seekable file is a positioned ``pread``/``pwrite`` at ``self._pos``. Reads first
  try ``preadv2(RWF_NOWAIT)`` inline (the engine's hint), so cached data costs no
  ring round trip and no future.
* Pipes, FIFOs and terminals (not seekable) use the engine's ``read``/``write``.
* Every operation that touches the position or the buffers runs under one lock,
  so the file's I/O is serialised. When the awaiting task is cancelled while a
  write (or a stream read) is in the kernel, the object remembers it; before its
  next operation it waits for the op's real result (``Outcome``) and applies it:
  bytes the kernel wrote advance the position, bytes it read from a pipe are kept
  for the next read.
* Line reads and reads to EOF use large chunks (64 KiB growing to 1 MiB) split in
  memory; text is decoded a whole chunk at a time.
* ``async for line in f`` is native (``_core.LineIter``): the file lends the rest of
  its chunk (read buffer, or decoded text) to a ``_core.LineCursor`` kept in
  ``self._cursor``; lines split from it cost no coroutine. Every other operation
  first takes the cursor back (``_unlines()``), which restores the position.
"""

from __future__ import annotations

import asyncio
import codecs
import ctypes
import errno
import io
import locale
import operator
import os
import stat
import sys
import warnings
from collections.abc import AsyncIterator, Generator, Iterable
from typing import Any

from . import _engines
from ._core import (
    LINES_BYTES,
    LINES_CR,
    LINES_CRLF,
    LINES_LF,
    LINES_UNIVERSAL,
    AlignedBuffer,
    LineCursor,
    LineIter,
    dio_alignment,
)
from ._engines.many import read_span

__all__ = ["AsyncBufferedFile", "AsyncFileIO", "AsyncTextFile", "NotAwaitedError", "open"]

DEFAULT_BUFFER_SIZE = io.DEFAULT_BUFFER_SIZE
#: Line reads and reads to EOF start at this chunk size and double up to the max.
CHUNK_MIN = 64 * 1024
CHUNK_MAX = 1024 * 1024
#: The largest off_t: no file position goes beyond it.
OFF_T_MAX = (1 << 63) - 1
#: O_DIRECT alignment when statx cannot tell (older kernels, some filesystems).
DIO_FALLBACK = 4096
#: Text decodes and splits chunks of at most this: the lines made from a chunk are
#: still in the CPU cache when they are handed out (measured: 1 MiB chunks cost
#: ~40% more per line than 64-256 KiB ones).
TEXT_CHUNK_MAX = 256 * 1024

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


class _FileLock(asyncio.Lock):
    """The lock that serialises a file's I/O. Once the file is closing, whoever
    gets it next (an op that was waiting behind the one in flight) gets
    ``ValueError: I/O operation on closed file.`` instead; close() itself takes it
    with ``acquire()``."""

    closing = False

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



# ----------------------------------------------------------------------------------
# Binary files
# ----------------------------------------------------------------------------------


class AsyncFileIO(_Base):
    """A binary file; unbuffered (``buffering=0``) or buffered (``AsyncBufferedFile``).

    Unbuffered objects behave like ``io.FileIO``: one system call per read or write,
    possibly short. Buffered ones like ``io.BufferedReader/Writer/Random``.
    """

    _buffered = False

    def __init__(
        self, fd: int, name: Any, mode: str, *, readable: bool, writable: bool,
        append: bool, closefd: bool, seekable: bool, pos: int, buffer_size: int,
        direct: bool, isatty: bool, engine: _engines.FileEngine,
    ) -> None:  # fmt: skip
        self._fd = fd
        self.name = name
        self.mode = mode
        self._readable = readable
        self._writable = writable
        self._append = append
        self._closefd = closefd
        self._seekable = seekable
        self._isatty = isatty
        self._closed = False
        self._eng = engine
        self._direct = direct
        self._hint = _engines.NowaitHint(read=not direct, write=not direct)
        self._outcome = _engines.Outcome()
        # A cancelled op still in the kernel: called with its real result before
        # the next op (see _settle).
        self._pending: Any = None
        self._lock = _FileLock()
        # The task whose stream op (pipe, socket, terminal: it may wait forever) is
        # in the engine now; close() interrupts it (see _stream).
        self._stream_task: asyncio.Task[Any] | None = None
        self._interrupted: asyncio.Task[Any] | None = None
        # close() still waiting for the ops in flight before it gives the fd back.
        self._closer: asyncio.Task[None] | None = None
        # Position: where the next raw op happens (end of the read buffer, start
        # of the write buffer). None after an O_APPEND write: end of file, learnt
        # from fstat when needed.
        self._pos: int | None = pos
        self._bufsize = buffer_size
        self._rbuf = b""
        self._rpos = 0
        # Line iteration: the cursor the rest of _rbuf is lent to (see _lend).
        self._cursor: LineCursor | None = None
        self._wbuf = bytearray()
        self._fill = buffer_size  # grows while reads stay sequential
        self._last_fill_end = -1
        if direct:
            align = None
            try:
                align = dio_alignment(fd)
            except OSError:
                pass
            mem, off = align if align else (DIO_FALLBACK, DIO_FALLBACK)
            self._mem_align = max(mem, 1)
            self._off_align = max(off, 1)
            self._dio_align = max(self._mem_align, self._off_align)

    # -- plain properties -------------------------------------------------------------
    def __repr__(self) -> str:
        state = " [closed]" if self._closed else ""
        return f"<ringio {type(self).__name__} name={self.name!r} mode={self.mode!r}{state}>"

    def _check_closed(self) -> None:
        if self._closed:
            raise _closed_error()

    def fileno(self) -> int:
        self._check_closed()
        return self._fd

    def readable(self) -> bool:
        self._check_closed()
        return self._readable

    def writable(self) -> bool:
        self._check_closed()
        return self._writable

    def seekable(self) -> bool:
        self._check_closed()
        return self._seekable

    def isatty(self) -> bool:
        self._check_closed()
        return self._isatty

    # As io: a buffered file without the capability has no such method at all
    # (UnsupportedOperation, closed or not); FileIO says closed first.
    def _check_readable(self) -> None:
        if self._closed and not (self._buffered and not self._readable):
            raise _closed_error()
        if not self._readable:
            raise io.UnsupportedOperation(
                "read" if self._buffered else "File not open for reading"
            )

    def _check_writable(self) -> None:
        if self._closed and not (self._buffered and not self._writable):
            raise _closed_error()
        if not self._writable:
            raise io.UnsupportedOperation(
                "write" if self._buffered else "File not open for writing"
            )

    # -- raw operations (lock held) ------------------------------------------------------
    async def _settle(self) -> None:
        """Applies the real result of a cancelled op before anything else happens."""
        pending = self._pending
        if pending is not None:
            n = await self._outcome.result()  # if this is cancelled, we try again
            self._pending = None
            if n:
                pending(n)

    async def _raw_pos(self) -> int:
        pos = self._pos
        if pos is None:  # after an O_APPEND write: the end of the file
            pos = self._pos = (await self._eng.fstat(self._fd)).st_size
        return pos

    async def _raw_read(self, n: int) -> bytes:
        """One read of up to `n` bytes at the position, which advances."""
        if self._direct:
            return await self._direct_read(n)
        if self._seekable:
            pos = await self._raw_pos()
            data = await self._eng.pread_bytes(self._fd, n, pos, self._hint)
            self._pos = pos + len(data)
            return data
        buf = bytearray(n)  # fresh each time: a cancelled read may still fill the old one
        got = await self._stream(self._eng.read, buf, self._keep_read_bytes(buf))
        if got == n:
            return bytes(buf)
        return bytes(memoryview(buf)[:got])

    def _keep_read_bytes(self, buf: bytearray) -> Any:
        def keep(n: int) -> None:
            # The kernel consumed these from the pipe although our task was
            # cancelled: they are the next bytes a read returns.
            self._rbuf = self._rbuf[self._rpos :] + bytes(buf[:n])
            self._rpos = 0

        return keep

    async def _stream(self, op: Any, buf: Any, on_cancelled: Any) -> int:
        oc = self._outcome
        oc.reset()
        task = self._stream_task = asyncio.current_task()
        try:
            return await op(self._fd, buf, outcome=oc)
        except asyncio.CancelledError:
            if oc.armed:
                self._pending = on_cancelled
            if task is not None and self._interrupted is task:
                # close() cancelled us to end the op: the caller sees the file
                # closed, unless its task was also cancelled by someone else.
                self._interrupted = None
                if task.uncancel() == 0:
                    raise _closed_error() from None
            raise
        finally:
            self._stream_task = None

    async def _raw_write(self, data: Any) -> int:
        """One write of `data` at the position (or the end, in append mode); may be
        short. The position advances by what was written."""
        if self._direct:
            return await self._direct_write(data)
        if not self._seekable:
            return await self._stream(self._eng.write, data, lambda n: None)
        pos = self._pos if self._pos is not None else 0
        oc = self._outcome
        oc.reset()

        def advance(n: int) -> None:
            self._pos = None if self._append else pos + n

        try:
            n = await self._eng.pwrite(self._fd, data, pos, self._hint, outcome=oc)
        except asyncio.CancelledError:
            if oc.armed:
                self._pending = advance
            raise
        advance(n)
        return n

    async def _write_all(self, data: Any) -> None:
        mv = memoryview(data).cast("B")
        while mv:
            n = await self._raw_write(mv)
            if n == 0:
                raise OSError(errno.EIO, "write returned 0 bytes")
            mv = mv[n:]

    # -- O_DIRECT: aligned bounce buffers ---------------------------------------------
    def _aligned_span(self, pos: int, n: int) -> tuple[int, int]:
        start, length, _ = read_span(pos, n, self._off_align)
        return start, start + length

    async def _direct_read(self, n: int) -> bytes:
        pos = await self._raw_pos()
        start, end = self._aligned_span(pos, n)
        bounce = AlignedBuffer(end - start, self._dio_align)
        got = await self._eng.pread(self._fd, bounce, start, self._hint)
        got = max(0, min(got - (pos - start), n))
        self._pos = pos + got
        return bytes(memoryview(bounce)[pos - start : pos - start + got])

    async def _direct_write(self, data: Any) -> int:
        """Writes `data` at the position through an aligned bounce buffer: the
        partial blocks at either end are read first, and a file that grew by padding
        is truncated back to its true size."""
        mv = memoryview(data).cast("B")
        n = len(mv)
        if self._append:
            self._pos = None
        pos = await self._raw_pos()
        size = (await self._eng.fstat(self._fd)).st_size
        start, end = self._aligned_span(pos, n)
        bounce = AlignedBuffer(end - start, self._dio_align)
        bm = memoryview(bounce)
        a = self._off_align
        if pos != start and start < size:
            await self._eng.pread(self._fd, bm[:a], start, self._hint)
        if (pos + n) % a and end - a >= start and end - a < size and end - a >= pos:
            await self._eng.pread(self._fd, bm[len(bm) - a :], end - a, self._hint)
        bm[pos - start : pos - start + n] = mv
        written = await self._eng.pwrite(self._fd, bounce, start, self._hint)
        done = max(0, min(written - (pos - start), n))
        new_size = max(size, pos + done)
        if start + written > new_size:
            await self._eng.ftruncate(self._fd, new_size)
        self._pos = pos + done
        return done

    async def _direct_readinto(self, buf: memoryview) -> int | None:
        """Reads straight into the caller's buffer when address, offset and size are
        all aligned; None when a bounce buffer is needed."""
        pos = await self._raw_pos()
        n = len(buf)
        if pos % self._off_align or n % self._off_align or n == 0:
            return None
        try:
            c = (ctypes.c_char * n).from_buffer(buf)
        except (TypeError, ValueError):
            return None
        if ctypes.addressof(c) % self._mem_align:
            return None
        del c
        got = await self._eng.pread(self._fd, buf, pos, self._hint)
        self._pos = pos + got
        return got

    # -- buffer management (lock held) ------------------------------------------------
    def _unlines(self) -> None:
        """Takes back the read buffer lent to line iteration: _rpos is where its
        next unread line starts. Every method that looks at _rbuf/_rpos calls this
        first (before any await)."""
        c = self._cursor
        if c is not None:
            self._cursor = None
            pos = c.take()
            if pos >= 0:
                self._rpos = pos

    def _lend(self) -> None:
        """Lends the rest of the read buffer to line iteration (after a line was
        read through readline()); not while another task's op holds the lock."""
        rbuf = self._rbuf
        if (
            self._cursor is None
            and self._buffered
            and self._rpos < len(rbuf)
            and type(rbuf) is bytes
            and not self._lock.locked()
        ):
            self._cursor = LineCursor(rbuf, self._rpos, LINES_BYTES)

    def _drop_read_buffer(self) -> None:
        """Forgets read-ahead: the raw position goes back to the logical one."""
        self._unlines()
        left = len(self._rbuf) - self._rpos
        if left:
            if self._seekable and self._pos is not None:
                self._pos -= left
            elif not self._seekable:
                return  # a pipe's bytes cannot be re-read: keep them
        self._rbuf = b""
        self._rpos = 0

    async def _flush_locked(self) -> None:
        await self._settle()
        wbuf = self._wbuf
        while wbuf:
            # The engine may hold `wbuf` until the kernel is done: if we are
            # cancelled (or close() ended the write: ValueError), swap in a copy
            # so later writes can still append, and drop what the op wrote once
            # its result is known.
            try:
                n = await self._raw_write(wbuf)
            except (asyncio.CancelledError, ValueError):
                self._wbuf = bytearray(wbuf)
                pending = self._pending
                if pending is not None:

                    def applied(k: int, pending: Any = pending) -> None:
                        pending(k)
                        del self._wbuf[:k]

                    self._pending = applied
                raise
            if n == 0:
                raise OSError(errno.EIO, "write returned 0 bytes")
            del wbuf[:n]

    async def _before_read(self) -> None:
        self._unlines()
        await self._settle()
        if self._wbuf:
            await self._flush_locked()

    async def _before_write(self) -> None:
        self._unlines()
        await self._settle()
        if self._rpos < len(self._rbuf):
            self._drop_read_buffer()
        else:
            self._rbuf = b""
            self._rpos = 0

    def _unread(self, data: bytes) -> None:
        """Puts back bytes that a read took before it raised (was cancelled): it
        returns nothing, so they are the next bytes read. They come before what the
        buffer holds, and before what a cancelled op still in the kernel brings
        (its `_pending` appends when settled)."""
        if data:
            self._unlines()
            rest = self._rbuf[self._rpos :]
            self._rbuf = bytes(data) + rest if rest else bytes(data)
            self._rpos = 0

    def _take(self, n: int) -> bytes:
        """Up to n bytes from the read buffer."""
        rpos = self._rpos
        data = self._rbuf[rpos : rpos + n]
        self._rpos = rpos + len(data)
        return data

    async def _fill_chunk(self, size: int) -> bool:
        """Appends one raw read of `size` to the read buffer; False at EOF."""
        data = await self._raw_read(size)
        if not data:
            return False
        rest = self._rbuf[self._rpos :]
        self._rbuf = rest + data if rest else data
        self._rpos = 0
        return True

    def _next_chunk(self, chunk: int) -> int:
        return min(chunk * 2, CHUNK_MAX)

    # -- reading ----------------------------------------------------------------------
    async def read(self, size: int | None = -1) -> bytes:
        """Reads up to `size` bytes (all, to EOF, when negative or None)."""
        self._check_readable()
        size = _index(size)
        if size < 0:
            return await self.readall()
        if self._cursor is not None:
            self._unlines()
        if not self._buffered:
            async with self._lock:
                await self._before_read()
                if self._rpos < len(self._rbuf):
                    return self._take(size)
                return await self._raw_read(size)
        rpos = self._rpos
        if size <= len(self._rbuf) - rpos and not self._lock.locked():
            self._rpos = rpos + size
            return self._rbuf[rpos : rpos + size]
        async with self._lock:
            await self._before_read()
            parts = [self._take(size)]
            need = size - len(parts[0])
            try:
                if need >= self._bufsize:
                    # Large read: straight from the file, no copy through the buffer.
                    while need > 0:
                        data = await self._raw_read(need)
                        if not data:
                            break
                        parts.append(data)
                        need -= len(data)
                else:
                    while need > 0:
                        if not await self._fill_chunk(self._fill_size()):
                            break
                        data = self._take(need)
                        parts.append(data)
                        need -= len(data)
            except BaseException:
                self._unread(b"".join(parts))
                raise
            return b"".join(parts)

    def _fill_size(self) -> int:
        """Buffer fill for small reads: the buffer size, doubling (to CHUNK_MAX) while
        the reads stay sequential, back to the buffer size after a seek."""
        pos = self._pos
        if pos is not None and pos == self._last_fill_end:
            self._fill = min(self._fill * 2, CHUNK_MAX)
        else:
            self._fill = self._bufsize
        fill = self._fill
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
            return await self._raw_read(size)

    async def readall(self) -> bytes:
        """Reads to the end of the file, in large chunks."""
        self._unlines()
        self._check_readable()
        async with self._lock:
            await self._before_read()
            parts = [self._take(len(self._rbuf))]
            self._rbuf, self._rpos = b"", 0
            chunk = CHUNK_MIN
            if self._seekable and not self._direct:
                # Regular files: ask for everything left, plus one byte to see EOF.
                try:
                    st = await self._eng.fstat(self._fd)
                    pos = await self._raw_pos()
                    if st.st_size > pos:
                        chunk = st.st_size - pos + 1
                except OSError:
                    pass
            try:
                while True:
                    data = await self._raw_read(chunk)
                    if not data:
                        break
                    parts.append(data)
                    chunk = max(self._next_chunk(chunk), CHUNK_MIN)
            except BaseException:
                self._unread(b"".join(parts))
                raise
            return b"".join(parts)

    async def readinto(self, buffer: Any) -> int:
        """Reads into a writable bytes-like object; returns the byte count."""
        self._unlines()
        self._check_readable()
        try:
            mv = memoryview(buffer)
        except TypeError:
            raise TypeError(
                "readinto() argument must be read-write bytes-like object, "
                f"not {type(buffer).__name__}"
            ) from None
        if mv.readonly:
            raise TypeError(
                "readinto() argument must be read-write bytes-like object, "
                f"not {type(buffer).__name__}"
            )
        mv = mv.cast("B")
        async with self._lock:
            await self._before_read()
            n = len(mv)
            got = 0
            if self._rpos < len(self._rbuf):
                data = self._take(n)
                got = len(data)
                mv[:got] = data
                if got == n or not self._buffered:
                    return got
            if self._direct and got == 0:
                direct = await self._direct_readinto(mv)
                if direct is not None:
                    return direct
            try:
                while got < n:
                    if self._seekable and not self._direct:
                        # Straight into the caller's buffer (the kernel may keep it
                        # until the op completes, even if we are cancelled).
                        pos = await self._raw_pos()
                        k = await self._eng.pread(self._fd, mv[got:], pos, self._hint)
                        self._pos = pos + k
                    else:
                        data = await self._raw_read(n - got)
                        k = len(data)
                        mv[got : got + k] = data
                    got += k
                    if k == 0 or not self._buffered:
                        break
            except BaseException:
                self._unread(mv[:got].tobytes())
                raise
            return got

    async def readline(self, size: int | None = -1) -> bytes:
        """Reads one line (up to and including b'\\n'), at most `size` bytes."""
        self._check_readable()
        size = _index(size)
        if self._cursor is not None:
            self._unlines()
        rbuf, rpos = self._rbuf, self._rpos
        i = rbuf.find(b"\n", rpos)
        if i >= 0 and (size < 0 or i + 1 - rpos <= size) and not self._lock.locked():
            self._rpos = i + 1
            return rbuf[rpos : i + 1]
        async with self._lock:
            line = await self._readline_locked(size)
            if not self._buffered:
                # Unbuffered: no read-ahead survives, the position is the line end.
                self._drop_read_buffer()
            return line

    async def _readline_locked(self, size: int) -> bytes:
        await self._before_read()
        if not self._buffered and not self._seekable:
            # Unbuffered pipe: a byte at a time, like io.FileIO, so that no byte
            # past the line is consumed.
            out = bytearray(self._take(len(self._rbuf)))
            try:
                while (size < 0 or len(out) < size) and not out.endswith(b"\n"):
                    b = await self._raw_read(1)
                    if not b:
                        break
                    out += b
            except BaseException:
                self._unread(out)
                raise
            return bytes(out)
        chunk = CHUNK_MIN
        searched = self._rpos
        while True:
            rbuf, rpos = self._rbuf, self._rpos
            i = rbuf.find(b"\n", searched)
            if i >= 0:
                end = i + 1
                if size >= 0:
                    end = min(end, rpos + size)
                return self._take(end - rpos)
            if size >= 0 and len(rbuf) - rpos >= size:
                return self._take(size)
            searched = len(rbuf) - rpos
            if not await self._fill_chunk(chunk):
                return self._take(len(self._rbuf))
            chunk = self._next_chunk(chunk)

    async def readlines(self, hint: int | None = -1) -> list[bytes]:
        """Reads lines until EOF, or until their total size reaches `hint`."""
        hint = _index(hint)
        lines: list[bytes] = []
        total = 0
        try:
            while True:
                line = await self.readline()
                if not line:
                    break
                lines.append(line)
                total += len(line)
                if 0 < hint <= total:
                    break
        except BaseException:
            self._unread(b"".join(lines))
            raise
        if not self._buffered:
            async with self._lock:
                self._drop_read_buffer()
        return lines

    async def __anext__(self) -> bytes:
        return await self._next_line()

    def __aiter__(self) -> AsyncIterator[bytes]:
        # Native: lines already in the lent buffer cost no coroutine (_core.LineIter);
        # the state stays in the object, so readline() and friends can be mixed in.
        self._check_readable()
        return LineIter(self)  # type: ignore[no-any-return]

    async def _next_line(self) -> bytes:
        """Iteration's slow path (LineIter calls it when the lent buffer holds no
        complete line): one readline(), then the rest of the buffer is lent out."""
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        self._lend()
        return line

    # -- ringio's own ---------------------------------------------------------------
    async def pread(self, n: int, offset: int) -> bytes:
        """Reads up to `n` bytes at `offset`, leaving the position alone."""
        self._check_readable()
        if n < 0 or offset < 0:
            raise ValueError("negative size or offset")
        if self._wbuf or self._pending is not None:
            async with self._lock:
                await self._settle()
                await self._flush_locked()
        if self._direct:
            # Positional: no lock, so concurrent preads of an O_DIRECT file keep the
            # device's queue as deep as the caller's concurrency. The aligned
            # bounce buffer is this read's own. Inlined: a helper coroutine cost
            # ~3.5k instructions per read, and even the span as a call to
            # read_span(offset, n, self._off_align) 0.8k of 40.8k (callgrind).
            a = self._off_align
            start = offset - offset % a
            bounce = AlignedBuffer(-(-(offset + n) // a) * a - start, self._dio_align)
            got = await self._eng.pread(self._fd, bounce, start, self._hint)
            skip = offset - start
            got = max(0, min(got - skip, n))
            return bytes(memoryview(bounce)[skip : skip + got])
        return await self._eng.pread_bytes(self._fd, n, offset, self._hint)

    async def pread_many(
        self, n: int, offsets: Iterable[int], *, depth: int = 32
    ) -> list[bytes]:
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
        """Checks, and writes out what is buffered (the reads must see it); returns
        the O_DIRECT alignment (offset, memory) of the file, None when buffered."""
        self._check_readable()
        if self._wbuf or self._pending is not None:
            async with self._lock:
                await self._settle()
                await self._flush_locked()
        return (self._off_align, self._mem_align) if self._direct else None

    async def pwrite(self, data: Any, offset: int) -> int:
        """Writes `data` at `offset` (one op, may be short), leaving the position alone."""
        self._unlines()
        self._check_writable()
        if isinstance(data, str):
            raise TypeError("a bytes-like object is required, not 'str'")
        if offset < 0:
            raise ValueError("negative offset")
        if self._direct and not (self._wbuf or self._pending or self._rbuf):
            mv = memoryview(data).cast("B")
            if offset % self._off_align == 0 and mv.nbytes % self._off_align == 0 and mv:
                # Whole blocks: nothing to read back or truncate, so no lock either.
                bounce = AlignedBuffer(mv.nbytes, self._dio_align)
                memoryview(bounce)[:] = mv
                return await self._eng.pwrite(self._fd, bounce, offset, self._hint)
        async with self._lock:
            await self._settle()
            await self._flush_locked()
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
            await self._before_write()
            await self._flush_locked()
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
                    self._pending = advance
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

    # -- writing ----------------------------------------------------------------------
    async def write(self, data: Any) -> int:
        """Writes a bytes-like object; returns its length (unbuffered: what one
        write(2) took, possibly less)."""
        self._check_writable()
        if isinstance(data, str):
            raise TypeError("a bytes-like object is required, not 'str'")
        try:
            mv = memoryview(data)
        except TypeError:
            raise TypeError(
                f"a bytes-like object is required, not '{type(data).__name__}'"
            ) from None
        if not mv.c_contiguous:  # what the builtin's write (PyBUF_SIMPLE) refuses
            raise BufferError("memoryview: underlying buffer is not C-contiguous")
        n = mv.nbytes
        if not self._buffered:
            async with self._lock:
                await self._before_write()
                return await self._raw_write(mv)
        wbuf = self._wbuf
        if (
            len(wbuf) + n < self._bufsize
            and not self._rbuf
            and self._pending is None
            and not self._lock.locked()
        ):
            wbuf += mv  # the common case: no I/O, no lock
            return n
        async with self._lock:
            await self._before_write()
            if n >= self._bufsize:
                await self._flush_locked()
                # bytes cannot change under us; anything else is copied first.
                await self._write_all(data if isinstance(data, bytes) else mv.tobytes())
            else:
                self._wbuf += mv
                if len(self._wbuf) >= self._bufsize:
                    await self._flush_locked()
        return n

    async def writelines(self, lines: Iterable[Any]) -> None:
        """Writes every bytes-like object of `lines` (no separators added)."""
        self._check_closed()  # as io: not writable fails at the first write
        for line in lines:
            await self.write(line)

    async def flush(self) -> None:
        """Writes out the write buffer."""
        self._check_closed()
        if self._wbuf or self._pending is not None:
            async with self._lock:
                await self._flush_locked()

    # -- position ---------------------------------------------------------------------
    def _logical_pos(self) -> int:
        assert self._pos is not None
        self._unlines()
        if self._wbuf:
            return self._pos + len(self._wbuf)
        return self._pos - (len(self._rbuf) - self._rpos)

    async def tell(self) -> int:
        """The current position."""
        self._unlines()
        self._check_closed()
        if not self._seekable:
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))
        async with self._lock:
            await self._settle()
            if self._append and self._wbuf:
                await self._flush_locked()
            await self._raw_pos()
            return self._logical_pos()

    async def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Moves the position (whence: SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA,
        SEEK_HOLE); returns the new position."""
        self._unlines()
        self._check_closed()
        offset = operator.index(offset)
        whence = operator.index(whence)
        if not -OFF_T_MAX - 1 <= offset <= OFF_T_MAX:  # what the builtin's say
            if self._buffered:
                raise ValueError("cannot fit 'int' into an offset-sized integer")
            raise OverflowError("Python int too large to convert to C long")
        if whence not in (os.SEEK_SET, os.SEEK_CUR, os.SEEK_END, os.SEEK_DATA, os.SEEK_HOLE):
            if self._buffered:
                raise ValueError(f"whence value {whence} unsupported")
            if self._seekable:  # as FileIO: lseek refuses it (a pipe: ESPIPE, below)
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        if not self._seekable:
            if self._buffered:
                raise io.UnsupportedOperation("File or stream is not seekable.")
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))
        async with self._lock:
            await self._settle()
            await self._flush_locked()
            await self._raw_pos()
            cur = self._logical_pos()
            if whence == os.SEEK_SET:
                new = offset
            elif whence == os.SEEK_CUR:
                new = cur + offset
            elif whence == os.SEEK_END:
                new = (await self._eng.fstat(self._fd)).st_size + offset
            else:  # SEEK_DATA / SEEK_HOLE: only the kernel knows; lseek is cheap
                new = os.lseek(self._fd, offset, whence)
            if new < 0 or new > OFF_T_MAX:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            # The kernel decides what the file system allows (ext4: 16 TiB, vfat:
            # 4 GiB): lseek refuses with EINVAL as the builtin's seek does, instead
            # of a later write or close failing. The fd's own position is then ours.
            os.lseek(self._fd, new, os.SEEK_SET)
            self._drop_read_buffer()
            self._pos = new
            return new

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position); the position stays."""
        self._unlines()
        self._check_closed()
        if not self._writable:
            raise io.UnsupportedOperation(
                "truncate" if self._buffered else "File not open for writing"
            )
        if not self._seekable:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        async with self._lock:
            await self._settle()
            await self._flush_locked()
            await self._raw_pos()
            if size is None:
                size = self._logical_pos()
            else:
                size = operator.index(size)
            if size < 0:  # what the builtin's ftruncate(2) says; io_uring's op refuses first
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            self._drop_read_buffer()
            await self._eng.ftruncate(self._fd, size)
            return size

    # -- closing ----------------------------------------------------------------------
    async def close(self) -> None:
        """Flushes, then closes the fd through the engine (unless closefd=False).

        An op another task has in flight on a pipe, socket or terminal is ended:
        it raises ``ValueError: I/O operation on closed file.``, as do the ops
        waiting behind it. The fd number goes back to the OS only once the kernel
        has completed every op of ours on it."""
        if self._closed:
            if self._closer is not None:  # a close() before us still waits: so do we
                await asyncio.shield(self._closer)
            return
        self._unlines()  # iteration stops: the next line raises ValueError
        self._closed = True
        self._lock.closing = True
        task = self._stream_task
        if task is not None and task is not asyncio.current_task():
            self._interrupted = task
            task.cancel()
        if not self._lock.locked():
            await self._close_after_ops()  # nothing in flight: no wait for the lock
            return
        # Done in a task of its own: if this close() is cancelled while the ops in
        # flight end, the fd is still given back, once they have.
        closer = self._closer = asyncio.ensure_future(self._close_after_ops())
        closer.add_done_callback(_retrieve)
        await asyncio.shield(closer)

    async def _close_after_ops(self) -> None:
        try:
            if self._lock.locked() or self._wbuf or self._pending is not None:
                await self._lock.acquire()  # behind the ops in flight, which now end
                try:
                    await self._flush_locked()  # settles a cancelled op first
                finally:
                    self._lock.release()
        finally:
            await self._release_fd()

    async def _release_fd(self) -> None:
        fd = self._fd
        if self._closefd:
            await self._eng.close(fd)
        elif self._seekable and self._pos is not None:
            # The fd goes on living: leave its kernel position where ours is.
            try:
                os.lseek(fd, self._logical_pos(), os.SEEK_SET)
            except OSError:
                pass

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        if self._closefd:
            warnings.warn(f"unclosed file {self!r}", ResourceWarning, stacklevel=2, source=self)
        self._close_now()

    def _close_now(self) -> None:
        """Closes at collection: no op of ours can be in flight (an awaiting task
        would hold the object)."""
        self._closed = True
        if self._closefd:
            try:
                os.close(self._fd)
            except OSError:
                pass


class AsyncBufferedFile(AsyncFileIO):
    """A buffered binary file (like ``io.BufferedReader/Writer/Random``)."""

    _buffered = True


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


# ----------------------------------------------------------------------------------
# Text files
# ----------------------------------------------------------------------------------


class AsyncTextFile(_Base):
    """A text file over a buffered binary one (like ``io.TextIOWrapper``).

    Reads decode a whole chunk at a time; ``tell()`` cookies are the stdlib's, so
    they can be passed to ``seek()`` (and mean the same thing as CPython's).
    """

    _CHUNK = CHUNK_MIN

    def __init__(
        self, buffer: AsyncBufferedFile, encoding: str, errors: str | None,
        newline: str | None, line_buffering: bool, mode: str,
    ) -> None:  # fmt: skip
        self.buffer = buffer
        self.mode = mode
        if errors is None:
            errors = "strict"
        self._encoding = encoding
        self._errors = errors
        self._line_buffering = line_buffering
        self._readuniversal = not newline
        self._readtranslate = newline is None
        self._readnl = newline
        self._writetranslate = newline != ""
        self._writenl = newline or os.linesep
        self._decoder: Any = None
        self._encoder: Any = None
        self._decoded = ""  # text decoded and not yet returned from here on
        self._used = 0
        # Line iteration: the cursor the rest of _decoded is lent to (see _lend).
        self._cursor: LineCursor | None = None
        self._line_kind = _LINE_KINDS[newline]
        self._snapshot: tuple[int, bytes] | None = None
        self._b2cratio = 0.0
        self._seekable = self._telling = buffer._seekable
        self._chunk = self._CHUNK
        self._eof = False
        # While a read that may take several chunks runs (see _mark): each chunk's
        # bytes and the snapshot made with it, to put the text back if it raises.
        self._chunk_log: list[tuple[bytes, tuple[int, bytes] | None]] | None = None
        if self._seekable and buffer._writable:
            # Like TextIOWrapper: no BOM in the middle of a file.
            pos = buffer._pos or 0
            if pos != 0:
                try:
                    self._get_encoder().setstate(0)
                except LookupError:
                    pass

    # -- properties -------------------------------------------------------------------
    def __repr__(self) -> str:
        state = " [closed]" if self.closed else ""
        return (
            f"<ringio AsyncTextFile name={self.name!r} mode={self.mode!r} "
            f"encoding={self._encoding!r}{state}>"
        )

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self.buffer._closed

    @property
    def name(self) -> Any:
        return self.buffer.name

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def errors(self) -> str:
        return self._errors

    @property
    def newlines(self) -> Any:
        return getattr(self._decoder, "newlines", None) if self._decoder else None

    @property
    def line_buffering(self) -> bool:
        return self._line_buffering

    def fileno(self) -> int:
        return self.buffer.fileno()

    def readable(self) -> bool:
        return self.buffer.readable()

    def writable(self) -> bool:
        return self.buffer.writable()

    def seekable(self) -> bool:
        return self.buffer.seekable()

    def isatty(self) -> bool:
        return self.buffer.isatty()

    def _check_closed(self) -> None:
        if self.buffer._closed:
            raise _closed_error()

    def _check_readable(self) -> None:
        self._check_closed()
        if not self.buffer._readable:
            raise io.UnsupportedOperation("not readable")

    def _check_writable(self) -> None:
        self._check_closed()
        if not self.buffer._writable:
            raise io.UnsupportedOperation("not writable")

    # -- codec state ------------------------------------------------------------------
    def _get_encoder(self) -> Any:
        self._encoder = codecs.getincrementalencoder(self._encoding)(self._errors)
        return self._encoder

    def _get_decoder(self) -> Any:
        decoder = codecs.getincrementaldecoder(self._encoding)(self._errors)
        if self._readuniversal:
            decoder = io.IncrementalNewlineDecoder(decoder, self._readtranslate)
        self._decoder = decoder
        return decoder

    def _set_decoded(self, chars: str) -> None:
        self._decoded = chars
        self._used = 0

    def _unlines(self) -> None:
        """Takes back the decoded text lent to line iteration: _used is where its
        next unread line starts. Every method that looks at _decoded/_used calls
        this first."""
        c = self._cursor
        if c is not None:
            self._cursor = None
            pos = c.take()
            if pos >= 0:
                self._used = pos

    def _lend(self) -> None:
        """Lends the rest of the decoded text to line iteration."""
        if self._cursor is None and self._used < len(self._decoded):
            self._cursor = LineCursor(self._decoded, self._used, self._line_kind)

    def _take(self, n: int | None = None) -> str:
        used = self._used
        chars = self._decoded[used:] if n is None else self._decoded[used : used + n]
        self._used = used + len(chars)
        return chars

    async def _read_chunk(self) -> bool:
        """Reads and decodes the next chunk into the decoded text; False at EOF."""
        decoder = self._decoder or self._get_decoder()
        if self._telling:
            dec_buffer, dec_flags = decoder.getstate()
        chunk = await self.buffer.read1(self._chunk)
        self._chunk = min(self._chunk * 2, TEXT_CHUNK_MAX)
        eof = not chunk
        text = decoder.decode(chunk, eof)
        self._set_decoded(text)
        self._b2cratio = len(chunk) / len(text) if text else 0.0
        if self._telling:
            self._snapshot = (dec_flags, dec_buffer + chunk)
        if self._chunk_log is not None:
            self._chunk_log.append((chunk, self._snapshot))
        return not eof

    def _mark(self) -> tuple[Any, ...]:
        """Where a read that may take several chunks starts; `_restore` puts back
        what it took if it raises (is cancelled): the text it consumed, and the
        decoded chunks it read since, as one decoded text whose snapshot covers
        them all (so tell() stays right)."""
        self._unlines()
        outer = self._chunk_log is not None
        if not outer:
            self._chunk_log = []
        assert self._chunk_log is not None
        return (self._decoded, self._used, self._snapshot, len(self._chunk_log), outer)

    def _unmark(self, mark: tuple[Any, ...]) -> None:
        if not mark[4]:
            self._chunk_log = None

    def _restore(self, mark: tuple[Any, ...], taken: str) -> None:
        decoded0, used0, snap0, start, outer = mark
        log = self._chunk_log[start:] if self._chunk_log is not None else []
        if not outer:
            self._chunk_log = None
        self._unlines()
        # What was consumed since the mark is `taken`; what follows it is the rest
        # of the current decoded text.
        self._decoded = decoded0[:used0] + taken + self._decoded[self._used :]
        self._used = used0
        if not log:
            return  # the same decoded text as at the mark: its snapshot holds
        if not self._telling:
            self._snapshot = None
        elif snap0 is not None:
            self._snapshot = (snap0[0], snap0[1] + b"".join(c for c, _ in log))
        elif not decoded0 and log[0][1] is not None:
            first = log[0][1]
            self._snapshot = (first[0], first[1] + b"".join(c for c, _ in log[1:]))
        else:
            self._snapshot = None

    # -- reading ----------------------------------------------------------------------
    async def read(self, size: int | None = -1) -> str:
        """Reads up to `size` characters (all, to EOF, when negative or None)."""
        self._check_readable()
        size = _index(size)
        self._unlines()
        decoder = self._decoder or self._get_decoder()
        if size < 0:
            await self.buffer.flush()
            data = await self.buffer.readall()
            result = self._take() + decoder.decode(data, final=True)
            self._set_decoded("")
            self._snapshot = None
            self._chunk = self._CHUNK
            return result
        result = self._take(size)
        if len(result) == size:
            return result
        self._used -= len(result)
        mark = self._mark()
        self._used += len(result)
        eof = False
        try:
            while len(result) < size and not eof:
                eof = not await self._read_chunk()
                result += self._take(size - len(result))
        except BaseException:
            self._restore(mark, result)
            raise
        self._unmark(mark)
        return result

    def _find_eol(self, text: str, start: int) -> tuple[int, int]:
        """(index after the line end, or -1) and where to resume searching."""
        if self._readtranslate:
            i = text.find("\n", start)
            return (i + 1 if i >= 0 else -1), len(text)
        if self._readuniversal:
            # \r, \n or \r\n; the newline decoder never leaves a lone \r at the
            # end of a chunk unless at EOF.
            nl = text.find("\n", start)
            cr = text.find("\r", start, nl if nl >= 0 else len(text))
            if cr >= 0:
                if cr + 1 < len(text) and text[cr + 1] == "\n":
                    return cr + 2, 0
                return cr + 1, 0
            return (nl + 1 if nl >= 0 else -1), len(text)
        nlstr = self._readnl
        assert nlstr is not None
        i = text.find(nlstr, start)
        if i >= 0:
            return i + len(nlstr), 0
        return -1, max(len(text) - len(nlstr) + 1, 0)

    async def readline(self, size: int | None = -1) -> str:
        """Reads one line, with its line ending (translated per `newline`)."""
        self._check_readable()
        size = _index(size)
        if self._cursor is not None:
            self._unlines()
        decoded, used = self._decoded, self._used
        end, _ = self._find_eol(decoded, used)
        if end >= 0 and (size < 0 or end - used <= size):
            self._used = end
            return decoded[used:end]
        mark = self._mark()
        parts: list[str] = []
        try:
            line = await self._readline_slow(size, parts)
        except BaseException:
            self._restore(mark, "".join(parts))
            raise
        self._unmark(mark)
        return line

    async def _readline_slow(self, size: int, parts: list[str]) -> str:
        # As _pyio does, the line is gathered across chunks and each chunk replaces
        # the decoded text (so tell() snapshots stay right); but in parts: of the
        # chunk where the line ends only the line's part is copied.
        first = self._take()
        end, _ = self._find_eol(first, 0)
        if end >= 0 or (size >= 0 and len(first) >= size):
            if end < 0 or (size >= 0 and end > size):
                end = size
            self._used -= len(first) - end
            return first[:end]
        parts.append(first)
        total = len(first)  # < size when size >= 0
        crlf = self._readnl == "\r\n"
        while True:
            while await self._read_chunk():
                if self._decoded:
                    break
            text = self._decoded
            if not text:
                self._set_decoded("")
                self._snapshot = None
                return "".join(parts)
            if crlf and text[0] == "\n" and parts[-1].endswith("\r"):
                end = 1  # the \r\n straddles the chunks
            else:
                end, _ = self._find_eol(text, 0)
            if end >= 0 or (size >= 0 and total + len(text) >= size):
                if end < 0 or (size >= 0 and total + end > size):
                    end = size - total
                self._used = end
                parts.append(text[:end])
                return "".join(parts)
            parts.append(text)
            total += len(text)
            self._used = len(text)

    async def readlines(self, hint: int | None = -1) -> list[str]:
        """Reads lines until EOF, or until their total size reaches `hint`."""
        hint = _index(hint)
        lines: list[str] = []
        total = 0
        mark = self._mark()
        try:
            while True:
                line = await self.readline()
                if not line:
                    break
                lines.append(line)
                total += len(line)
                if 0 < hint <= total:
                    break
        except BaseException:
            self._restore(mark, "".join(lines))
            raise
        self._unmark(mark)
        return lines

    async def __anext__(self) -> str:
        return await self._next_line()

    def __aiter__(self) -> AsyncIterator[str]:
        # Native: lines already in the lent text cost no coroutine (_core.LineIter);
        # the state stays in the object, so readline() and friends can be mixed in.
        self._check_readable()
        return LineIter(self)  # type: ignore[no-any-return]

    async def _next_line(self) -> str:
        """Iteration's slow path (LineIter calls it when the lent text holds no
        complete line): one readline(), then the rest of the text is lent out."""
        # Like TextIOWrapper.__next__: no tell() while iterating (no snapshots).
        self._telling = False
        self._snapshot = None
        line = await self.readline()
        if not line:
            self._telling = self._seekable
            raise StopAsyncIteration
        self._lend()
        return line

    # -- writing ----------------------------------------------------------------------
    async def write(self, s: str) -> int:
        """Writes a str (newlines translated per `newline`); returns its length."""
        self._check_writable()
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        length = len(s)
        haslf = (self._writetranslate or self._line_buffering) and "\n" in s
        if haslf and self._writetranslate and self._writenl != "\n":
            s = s.replace("\n", self._writenl)
        if self._decoded or self._cursor is not None or self._snapshot is not None:
            await self._rewind_to_logical()
        encoder = self._encoder or self._get_encoder()
        b = encoder.encode(s)
        await self.buffer.write(b)
        if self._line_buffering and (haslf or "\r" in s):
            await self.flush()
        return length

    async def _rewind_to_logical(self) -> None:
        """Before writing after reading: puts the binary position back where the
        text read stopped (CPython writes after its read-ahead instead)."""
        self._unlines()
        if self._seekable and self._telling and self.buffer._readable:
            if self._used < len(self._decoded):
                await self.seek(await self.tell())
        self._set_decoded("")
        self._snapshot = None
        if self._decoder:
            self._decoder.reset()

    async def writelines(self, lines: Iterable[str]) -> None:
        """Writes every str of `lines` (no separators added)."""
        self._check_closed()  # as io: even with nothing to write
        for line in lines:
            await self.write(line)

    async def flush(self) -> None:
        """Writes out the buffer."""
        self._check_closed()
        await self.buffer.flush()
        self._telling = self._seekable

    async def fsync(self) -> None:
        await self.flush()
        await self.buffer.fsync()

    async def fdatasync(self) -> None:
        await self.flush()
        await self.buffer.fdatasync()

    async def close(self) -> None:
        """Flushes, then closes (the buffer's close() flushes, after it has ended
        the ops in flight)."""
        self._unlines()  # iteration stops: the next line raises ValueError
        await self.buffer.close()

    def __del__(self) -> None:
        # As io.TextIOWrapper's: the warning names the text file, not its buffer
        # (whose own __del__ then finds it closed).
        buffer = getattr(self, "buffer", None)
        if buffer is not None and not getattr(buffer, "_closed", True) and buffer._closefd:
            warnings.warn(f"unclosed file {self!r}", ResourceWarning, stacklevel=2, source=self)
            buffer._close_now()

    # -- position (the stdlib's cookie algorithm, from _pyio) ------------------------
    @staticmethod
    def _pack_cookie(
        position: int, dec_flags: int = 0, bytes_to_feed: int = 0, need_eof: bool = False,
        chars_to_skip: int = 0,
    ) -> int:  # fmt: skip
        return (
            position | (dec_flags << 64) | (bytes_to_feed << 128) | (chars_to_skip << 192)
            | bool(need_eof) << 256
        )  # fmt: skip

    @staticmethod
    def _unpack_cookie(bigint: int) -> tuple[int, int, int, bool, int]:
        rest, position = divmod(bigint, 1 << 64)
        rest, dec_flags = divmod(rest, 1 << 64)
        rest, bytes_to_feed = divmod(rest, 1 << 64)
        need_eof, chars_to_skip = divmod(rest, 1 << 64)
        return position, dec_flags, bytes_to_feed, bool(need_eof), chars_to_skip

    async def tell(self) -> int:
        """An opaque position cookie for seek() (a byte offset in simple cases)."""
        self._check_closed()
        if not self._seekable:
            raise io.UnsupportedOperation("underlying stream is not seekable")
        if not self._telling:
            raise OSError("telling position disabled by next() call")
        await self.flush()
        self._unlines()
        position = await self.buffer.tell()
        decoder = self._decoder
        if decoder is None or self._snapshot is None:
            if self._used < len(self._decoded):
                raise OSError("can't reconstruct logical file position")
            return position
        dec_flags, next_input = self._snapshot
        position -= len(next_input)
        chars_to_skip = self._used
        if chars_to_skip == 0:
            return self._pack_cookie(position, dec_flags)
        saved_state = decoder.getstate()
        try:
            skip_bytes = int(self._b2cratio * chars_to_skip)
            skip_back = 1
            skip_bytes = min(skip_bytes, len(next_input))
            while skip_bytes > 0:
                decoder.setstate((b"", dec_flags))
                n = len(decoder.decode(next_input[:skip_bytes]))
                if n <= chars_to_skip:
                    b, d = decoder.getstate()
                    if not b:
                        dec_flags = d
                        chars_to_skip -= n
                        break
                    skip_bytes -= len(b)
                    skip_back = 1
                else:
                    skip_bytes -= skip_back
                    skip_back = skip_back * 2
            else:
                skip_bytes = 0
                decoder.setstate((b"", dec_flags))
            start_pos = position + skip_bytes
            start_flags = dec_flags
            if chars_to_skip == 0:
                return self._pack_cookie(start_pos, start_flags)
            bytes_fed = 0
            need_eof = False
            chars_decoded = 0
            for i in range(skip_bytes, len(next_input)):
                bytes_fed += 1
                chars_decoded += len(decoder.decode(next_input[i : i + 1]))
                dec_buffer, dec_flags = decoder.getstate()
                if not dec_buffer and chars_decoded <= chars_to_skip:
                    start_pos += bytes_fed
                    chars_to_skip -= chars_decoded
                    start_flags, bytes_fed, chars_decoded = dec_flags, 0, 0
                if chars_decoded >= chars_to_skip:
                    break
            else:
                chars_decoded += len(decoder.decode(b"", final=True))
                need_eof = True
                if chars_decoded < chars_to_skip:
                    raise OSError("can't reconstruct logical file position")
            return self._pack_cookie(start_pos, start_flags, bytes_fed, need_eof, chars_to_skip)
        finally:
            decoder.setstate(saved_state)

    def _reset_encoder(self, position: int) -> None:
        try:
            encoder = self._encoder or self._get_encoder()
        except LookupError:
            return
        if position != 0:
            encoder.setstate(0)
        else:
            encoder.reset()

    async def seek(self, cookie: int, whence: int = 0) -> int:
        """Moves to a tell() cookie (whence 0), or to the end (seek(0, 2))."""
        self._check_closed()
        self._unlines()
        if not self._seekable:
            raise io.UnsupportedOperation("underlying stream is not seekable")
        cookie = operator.index(cookie)
        if whence == os.SEEK_CUR:
            if cookie != 0:
                raise io.UnsupportedOperation("can't do nonzero cur-relative seeks")
            whence = 0
            cookie = await self.tell()
        elif whence == os.SEEK_END:
            if cookie != 0:
                raise io.UnsupportedOperation("can't do nonzero end-relative seeks")
            await self.flush()
            position = await self.buffer.seek(0, whence)
            self._unlines()
            self._set_decoded("")
            self._snapshot = None
            if self._decoder:
                self._decoder.reset()
            self._reset_encoder(position)
            return position
        if whence != 0:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if cookie < 0:
            raise ValueError(f"negative seek position {cookie!r}")
        await self.flush()
        start_pos, dec_flags, bytes_to_feed, need_eof, chars_to_skip = self._unpack_cookie(cookie)
        if start_pos > OFF_T_MAX:  # io.TextIOWrapper reads it as a negative off_t
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        await self.buffer.seek(start_pos)
        self._unlines()
        self._set_decoded("")
        self._snapshot = None
        self._chunk = self._CHUNK
        if cookie == 0 and self._decoder:
            self._decoder.reset()
        elif self._decoder or dec_flags or chars_to_skip or (cookie and self.buffer._readable):
            # A cookie's decoder state applies even before the first read: flags 0
            # are a state too (utf-16/32: byte order known, no BOM expected here),
            # as in io.TextIOWrapper, whose decoder exists from the start.
            self._decoder = self._decoder or self._get_decoder()
            self._decoder.setstate((b"", dec_flags))
            self._snapshot = (dec_flags, b"")
        if chars_to_skip:
            input_chunk = await self.buffer.read(bytes_to_feed)
            self._set_decoded(self._decoder.decode(input_chunk, need_eof))
            self._snapshot = (dec_flags, input_chunk)
            if len(self._decoded) < chars_to_skip:
                raise OSError("can't restore logical file position")
            self._used = chars_to_skip
        self._reset_encoder(cookie)
        return cookie

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position)."""
        await self.flush()
        if size is None:
            size = await self.tell()
        return await self.buffer.truncate(size)


# ----------------------------------------------------------------------------------
# open()
# ----------------------------------------------------------------------------------

AnyFile = AsyncFileIO | AsyncBufferedFile | AsyncTextFile


class _Opening:
    """What ``ringio.open()`` returns: await it, or use it with ``async with``."""

    __slots__ = ("_args", "_file")

    def __init__(self, args: tuple[Any, ...]) -> None:
        self._args = args
        self._file: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        return _open(*self._args).__await__()

    async def __aenter__(self) -> Any:
        self._file = await _open(*self._args)
        return self._file

    async def __aexit__(self, *exc: object) -> None:
        await self._file.close()

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the opener lacks: a file method used on the opener.
        raise NotAwaitedError(
            f"'{type(self).__name__}' object has no attribute {name!r}: ringio.open() "
            "returns an awaitable, not the file; use `f = await ringio.open(...)` or "
            "`async with ringio.open(...) as f`",
            name=name, obj=self,
        )  # fmt: skip


class NotAwaitedError(AttributeError):
    """A file attribute asked of what ``ringio.open()`` returns before it was awaited."""


def open(
    file: str | bytes | os.PathLike[Any] | int,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
    *,
    direct: bool = False,
) -> Any:
    """Opens a file like the builtin ``open()``, for asyncio.

    ``f = await ringio.open(...)`` or ``async with ringio.open(...) as f``. The
    result is an ``AsyncTextFile``, ``AsyncBufferedFile`` or (``buffering=0``)
    ``AsyncFileIO``; every method that may do I/O is a coroutine. ``direct=True``
    opens with O_DIRECT (binary only); unaligned buffers, offsets and sizes go
    through aligned bounce buffers.
    """
    return _Opening((file, mode, buffering, encoding, errors, newline, closefd, opener, direct))


def _parse_mode(mode: str) -> tuple[str, str, bool]:
    """(raw mode like FileIO's, kind 'r'/'w'/'a'/'x', binary) or ValueError/TypeError."""
    if not isinstance(mode, str):
        raise TypeError(f"open() argument 'mode' must be str, not {type(mode).__name__}")
    modes = set(mode)
    if modes - set("axrwb+t") or len(mode) > len(modes):
        raise ValueError(f"invalid mode: {mode!r}")
    kinds = [k for k in "xrwa" if k in modes]
    if "t" in modes and "b" in modes:
        raise ValueError("can't have text and binary mode at once")
    if len(kinds) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    kind = kinds[0]
    # FileIO's own mode string: "w+" files report "rb+" (readable and writable,
    # no longer truncating), as the builtin's do.
    raw = ("r" if kind == "w" and "+" in modes else kind) + "b" + ("+" if "+" in modes else "")
    return raw, kind, "b" in modes


def _check_text_args(
    encoding: str | None, errors: str | None, newline: str | None, buffering: int,
    direct: bool,
) -> str:
    """Validates the text layer's arguments as io.open does; returns the encoding."""
    if newline not in (None, "", "\n", "\r", "\r\n"):
        raise ValueError(f"illegal newline value: {newline}")
    if buffering == 0:
        raise ValueError("can't have unbuffered text I/O")
    if direct:
        raise ValueError("direct=True needs binary mode")
    if encoding is None:
        encoding = "locale"
        if sys.flags.warn_default_encoding:
            warnings.warn("'encoding' argument not specified", EncodingWarning, 3)
    if encoding == "locale":
        encoding = locale.getpreferredencoding(False)
    if not codecs.lookup(encoding)._is_text_encoding:
        raise LookupError(
            f"{encoding!r} is not a text encoding; use codecs.open() to handle arbitrary codecs"
        )
    if errors is not None:
        codecs.lookup_error(errors)
    return encoding


async def _open(
    file: Any, mode: str, buffering: int, encoding: str | None, errors: str | None,
    newline: str | None, closefd: bool, opener: Any, direct: bool,
) -> AnyFile:  # fmt: skip
    if not isinstance(file, int):
        file = os.fspath(file)
    if not isinstance(file, (str, bytes, int)):
        raise TypeError(f"invalid file: {file!r}")
    if not isinstance(buffering, int):
        raise TypeError(f"'{type(buffering).__name__}' object cannot be interpreted as an integer")
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"open() argument 'encoding' must be str or None, not {type(encoding).__name__}")  # noqa: E501
    if errors is not None and not isinstance(errors, str):
        raise TypeError(f"open() argument 'errors' must be str or None, not {type(errors).__name__}")  # noqa: E501
    raw_mode, kind, binary = _parse_mode(mode)
    updating = "+" in mode
    if binary:
        if encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        if errors is not None:
            raise ValueError("binary mode doesn't take an errors argument")
        if newline is not None:
            raise ValueError("binary mode doesn't take a newline argument")
        if buffering == 1:
            warnings.warn(
                "line buffering (buffering=1) isn't supported in binary mode, the default "
                "buffer size will be used", RuntimeWarning, 2,
            )  # fmt: skip
    else:
        if newline is not None and not isinstance(newline, str):
            raise TypeError(f"open() argument 'newline' must be str or None, not {type(newline).__name__}")  # noqa: E501
        try:
            encoding = _check_text_args(encoding, errors, newline, buffering, direct)
        except (ValueError, LookupError):
            # io.open has already made the FileIO when the text layer refuses these,
            # so an fd it was handed is closed (with closefd=True): do the same.
            if isinstance(file, int) and file >= 0 and closefd:
                try:
                    os.close(file)
                except OSError:
                    pass
            raise
    if isinstance(file, int) and file < 0:
        raise ValueError("negative file descriptor")
    if not isinstance(file, int) and not closefd:
        raise ValueError("Cannot use closefd=False with file name")

    readable = kind == "r" or updating
    writable = kind != "r" or updating
    flags = (os.O_RDWR if readable and writable else os.O_RDONLY if readable else os.O_WRONLY)
    if kind == "w":
        flags |= os.O_CREAT | os.O_TRUNC
    elif kind == "a":
        flags |= os.O_CREAT | os.O_APPEND
    elif kind == "x":
        flags |= os.O_CREAT | os.O_EXCL
    if direct:
        flags |= os.O_DIRECT

    eng = _engines.get()
    if isinstance(file, int):
        fd = file
        if direct:
            fl = os.get_blocking(fd)  # validates the fd
            del fl
    elif opener is not None:
        fd = opener(file, flags | os.O_CLOEXEC)
        if not isinstance(fd, int):
            raise TypeError("expected integer from opener")
        if fd < 0:
            raise ValueError(f"opener returned {fd}")
    else:
        try:
            fd = await eng.open(file, flags, 0o666)
        except OSError as e:
            if e.filename is None:
                e.filename = file
            raise
    try:
        try:
            st = await eng.fstat(fd)
        except OSError as e:
            if isinstance(file, int):
                raise OSError(e.errno, os.strerror(e.errno)) from None
            raise
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), file)
        # Seekable like FileIO decides it: whether lseek works on the fd.
        try:
            pos = os.lseek(fd, 0, os.SEEK_CUR)
            seekable = True
        except OSError:
            pos, seekable = 0, False
        if kind == "a" and seekable:
            pos = st.st_size
        is_tty = os.isatty(fd)
        line_buffering = False
        if buffering == 1 or (buffering < 0 and is_tty):
            buffering = -1
            line_buffering = True
        if buffering < 0:
            buffering = st.st_blksize if st.st_blksize > 1 else DEFAULT_BUFFER_SIZE
        if direct and buffering:
            align = max((dio_alignment(fd) or (DIO_FALLBACK, DIO_FALLBACK))[1], 1)
            buffering = -(-buffering // align) * align
        cls = AsyncBufferedFile if buffering else AsyncFileIO
        raw = cls(
            fd, file, raw_mode, readable=readable, writable=writable, append=kind == "a",
            closefd=closefd, seekable=seekable, pos=pos, buffer_size=buffering,
            direct=direct, isatty=is_tty, engine=eng,
        )  # fmt: skip
        if binary:
            return raw
        assert encoding is not None
        return AsyncTextFile(raw, encoding, errors, newline, line_buffering, mode)
    except BaseException:
        if closefd or not isinstance(file, int):
            try:
                os.close(fd)
            except OSError:
                pass
        raise
