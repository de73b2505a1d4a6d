"""Binary ``ringio.open`` files over the file engines (io_uring, kernel AIO): what
unbuffered and buffered ones share (``_BinaryFile``), and the unbuffered one
(``AsyncFileIO``, like ``io.FileIO``). The buffered one is in ``buffered``. The
package's docstring (``ringio._io``) has the design in short.
"""

from __future__ import annotations

import asyncio
import errno
import io
import operator
import os
import warnings
from collections.abc import Iterable
from typing import Any

from .. import _engines
from .._core import (
    LineCursor,
    dio_alignment,
)
from .base import (
    CHUNK_MAX,
    CHUNK_MIN,
    DIO_FALLBACK,
    OFF_T_MAX,
    _Base,
    _closed_error,
    _FileLock,
    _index,
    _retrieve,
)
from .direct import DirectIO
from .lines import LineReading
from .positional import PositionalIO

#: The whence values seek knows (lseek's).
WHENCES = (os.SEEK_SET, os.SEEK_CUR, os.SEEK_END, os.SEEK_DATA, os.SEEK_HOLE)


class _BinaryFile(LineReading[bytes], PositionalIO, DirectIO, _Base):
    """What unbuffered (``AsyncFileIO``) and buffered (``AsyncBufferedFile``, in
    ``buffered``) binary files share: the fd and its engine, the position, the raw
    reads and writes with their cancellation bookkeeping, the read and write
    buffers' management, seeking, truncating and closing.

    The subclasses supply what differs, as io's ``FileIO`` and ``Buffered*`` do:
    ``_check_readable``/``_check_writable``, ``_check_seek``,
    ``_check_truncatable`` (the error messages), ``_read_sized``, ``_write_checked``
    and ``_readinto_locked`` (one system call or as many as it takes),
    ``_readline_locked`` and ``_lend`` (read-ahead kept or not).
    """

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

    def _check_writable(self) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError

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
        return await self._read_sized(size)

    async def _read_sized(self, size: int) -> bytes:  # pragma: no cover - the subclass's
        raise NotImplementedError

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
            return await self._readinto_locked(mv)

    async def _readinto_locked(self, mv: memoryview) -> int:  # pragma: no cover
        raise NotImplementedError  # the subclass's

    def _take_into(self, mv: memoryview) -> int:
        """Fills the start of `mv` from the read buffer; returns the byte count."""
        data = self._take(len(mv))
        got = len(data)
        mv[:got] = data
        return got

    async def _readinto_once(self, mv: memoryview) -> int:
        """One read from the file into `mv`; returns the byte count (0 at EOF)."""
        if self._seekable and not self._direct:
            # Straight into the caller's buffer (the kernel may keep it until the
            # op completes, even if we are cancelled).
            pos = await self._raw_pos()
            k = await self._eng.pread(self._fd, mv, pos, self._hint)
            self._pos = pos + k
            return k
        data = await self._raw_read(len(mv))
        k = len(data)
        mv[:k] = data
        return k

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
            return await self._readline_locked(size)

    async def _readline_locked(self, size: int) -> bytes:
        """A line read in chunks of growing size; the read-ahead stays in the read
        buffer."""
        await self._before_read()
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

    # -- line reading's hooks (lines.LineReading) ----------------------------------------
    def _lines_undo(self, mark: Any, taken: list[bytes]) -> None:
        self._unread(b"".join(taken))

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
        return await self._write_checked(data, mv)

    async def _write_checked(self, data: Any, mv: memoryview) -> int:  # pragma: no cover
        raise NotImplementedError  # the subclass's

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
        self._check_seek(offset, whence)
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

    def _check_seek(self, offset: int, whence: int) -> None:  # pragma: no cover
        """Refuses, as the builtin's seek does, an offset out of range, an unknown
        whence, an unseekable file."""
        raise NotImplementedError  # the subclass's

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position); the position stays."""
        self._unlines()
        self._check_closed()
        self._check_truncatable()
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

    def _check_truncatable(self) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError

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


class AsyncFileIO(_BinaryFile):
    """An unbuffered binary file (``buffering=0``), like ``io.FileIO``: one system
    call per read or write, possibly short."""

    # As io.FileIO: a closed file says so first.
    def _check_readable(self) -> None:
        if self._closed:
            raise _closed_error()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")

    def _check_writable(self) -> None:
        if self._closed:
            raise _closed_error()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")

    def _check_truncatable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")

    def _check_seek(self, offset: int, whence: int) -> None:
        if not -OFF_T_MAX - 1 <= offset <= OFF_T_MAX:  # what the builtin's says
            raise OverflowError("Python int too large to convert to C long")
        if whence not in WHENCES and self._seekable:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))  # lseek refuses it
        if not self._seekable:
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))

    async def _read_sized(self, size: int) -> bytes:
        """Bytes a cancelled op left in the read buffer, else one read."""
        async with self._lock:
            await self._before_read()
            if self._rpos < len(self._rbuf):
                return self._take(size)
            return await self._raw_read(size)

    async def _readinto_locked(self, mv: memoryview) -> int:
        """Bytes a cancelled op left in the read buffer, else one read."""
        if self._rpos < len(self._rbuf):
            return self._take_into(mv)
        if self._direct:
            got = await self._direct_readinto(mv)
            if got is not None:
                return got
        if not mv:
            return 0
        return await self._readinto_once(mv)

    async def _readline_locked(self, size: int) -> bytes:
        """No read-ahead survives the line: the position is the line's end."""
        if self._seekable:
            line = await super()._readline_locked(size)
        else:
            # A pipe: a byte at a time, like io.FileIO, so that no byte past the
            # line is consumed.
            await self._before_read()
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
            line = bytes(out)
        self._drop_read_buffer()
        return line

    def _lend(self) -> None:
        """Nothing to lend to line iteration: no read-ahead is kept."""

    async def _lines_done(self, mark: Any) -> None:
        async with self._lock:
            self._drop_read_buffer()

    async def _write_checked(self, data: Any, mv: memoryview) -> int:
        """One write, possibly short."""
        async with self._lock:
            await self._before_write()
            return await self._raw_write(mv)
