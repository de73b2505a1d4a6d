"""The raw binary ``ringio.open`` file, ``AsyncFileIO`` (like ``io.FileIO``): one
system call per read or write, possibly short. It owns the fd and its engine, the
position, the bookkeeping of an op cancelled while in the kernel, O_DIRECT,
positional ops, truncating and closing. The buffered file (``buffered``) wraps
one. The package's docstring (``ringio._io``) has the design in short.
"""

from __future__ import annotations

import asyncio
import errno
import io
import operator
import os
import warnings
from typing import Any

from .. import _engines
from .._core import (
    ReadGate,
    dio_alignment,
    pread_nowait,
    preadinto_nowait,
)
from .._engines.many import BOUNCE_ALIGN
from .base import (
    CHUNK_MIN,
    DIO_FALLBACK,
    OFF_T_MAX,
    _closed_error,
    _FileLock,
    _index,
    _retrieve,
)
from .binary import WHENCES, _BinaryFile
from .direct import DirectIO
from .positional import PositionalIO


class AsyncFileIO(PositionalIO, DirectIO, _BinaryFile):
    """An unbuffered binary file (``buffering=0``), like ``io.FileIO``: one system
    call per read or write, possibly short.

    Several of its methods take a `top`: the file whose buffers sit on this one
    (this file itself, or the ``AsyncBufferedFile`` wrapping it), whose
    ``_flush_locked()``, ``_logical_pos()`` and ``_drop_read_buffer()`` the
    position, seek, truncate and close go through.
    """

    # The native ``pread``/``preadinto`` read the gate at its slot's offset rather
    # than through the instance dict (src/inline_read.rs); the rest of the state
    # stays in the instance's ``__dict__``.
    __slots__ = ("_gate",)

    def __init__(
        self, fd: int, name: Any, mode: str, *, readable: bool, writable: bool,
        append: bool, closefd: bool, seekable: bool, pos: int, direct: bool,
        isatty: bool, engine: _engines.FileEngine, memory: bool = False,
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
        # memory: a regular file of tmpfs or ramfs, read and written inline with
        # plain calls (see ``_core.on_memory_filesystem``).
        self._hint = _engines.NowaitHint(read=not direct, write=not direct, memory=memory)
        # Whether cached reads may be served inline, without a coroutine (the
        # engine's hint, ``_hint.read``, may still turn them off at run time).
        self._inline_reads = readable and not direct and engine.inline_reads
        # ``pread``/``preadinto`` read through this gate natively while it is open:
        # whatever stops a read from being served inline (a cancelled op's result
        # due, close, a refused RWF_NOWAIT) shuts it; the Python methods open it
        # again (``_inline_read_clear``). See src/inline_read.rs.
        self._gate = ReadGate(
            fd, memory, engine.gate, open=self._inline_reads and seekable
        )
        self._outcome = _engines.Outcome()
        # A cancelled op still in the kernel: called with its real result before
        # the next op (see _settle).
        self._pending: Any = None
        # Serialises the file's I/O; a buffered file over this one uses it too.
        self._lock = _FileLock()
        # The task whose stream op (pipe, socket, terminal: it may wait forever) is
        # in the engine now; close() interrupts it (see _stream).
        self._stream_task: asyncio.Task[Any] | None = None
        self._interrupted: asyncio.Task[Any] | None = None
        # close() still waiting for the ops in flight before it gives the fd back.
        self._closer: asyncio.Task[None] | None = None
        # Position: where the next read or write happens (after the bytes the read
        # buffer holds). None after an O_APPEND write: end of file, learnt from
        # fstat when needed.
        self._pos: int | None = pos
        # Bytes a cancelled read took from the kernel: the next read returns them.
        self._rbuf = b""
        self._rpos = 0
        self._cursor = None  # nothing is lent to line iteration (see _lend)
        if direct:
            align = None
            try:
                align = dio_alignment(fd)
            except OSError:
                pass
            mem, off = align if align else (DIO_FALLBACK, DIO_FALLBACK)
            self._mem_align = max(mem, 1)
            self._off_align = max(off, 1)
            self._bounce_align = max(self._mem_align, self._off_align, BOUNCE_ALIGN)

    # -- plain properties -------------------------------------------------------------
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

    def _check_offsets(self) -> None:
        """Positioned I/O needs a file with offsets: a pipe, FIFO, socket or terminal
        raises ESPIPE, as os.pread and os.pwrite do (io_uring and kernel AIO would
        read or write such a file as a stream, at no offset)."""
        if not self._seekable:
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))

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
        """Up to `n` bytes: those a cancelled read left first, else one read at the
        position, which advances."""
        if self._rpos < len(self._rbuf):
            return self._take(n)
        return await self._read_once(n)

    async def _read_once(self, n: int) -> bytes:
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

    async def _readinto_once(self, mv: memoryview) -> int:
        """Into `mv`: bytes a cancelled read left, else one read from the file;
        returns the byte count (0 at EOF)."""
        if self._rpos < len(self._rbuf):
            return self._take_into(mv)
        if self._seekable and not self._direct:
            # Straight into the caller's buffer (the kernel may keep it until the
            # op completes, even if we are cancelled).
            pos = await self._raw_pos()
            k = await self._eng.pread(self._fd, mv, pos, self._hint)
            self._pos = pos + k
            return k
        data = await self._read_once(len(mv))
        k = len(data)
        mv[:k] = data
        return k

    def _keep_read_bytes(self, buf: bytearray) -> Any:
        def keep(n: int) -> None:
            # The kernel consumed these from the pipe although our task was
            # cancelled: they are the next bytes a read returns.
            self._append_read(bytes(buf[:n]))

        return keep

    def _set_pending(self, pending: Any) -> None:
        """A cancelled op is still in the kernel: `pending` applies its result
        before the next op (see _settle), and no read is served inline before."""
        self._pending = pending
        self._gate.open = False

    def _inline_read_clear(self) -> bool:
        """Whether a positioned read may be served from the page cache now: nothing
        is due before it. Mirrored into the file's gate, which the native
        ``pread``/``preadinto`` read."""
        clear = (
            self._inline_reads
            and self._seekable
            and self._pending is None
            and self._hint.read
            and not self._closed
        )
        self._gate.open = clear
        return clear and not self._eng.closed

    async def _stream(self, op: Any, buf: Any, on_cancelled: Any) -> int:
        oc = self._outcome
        oc.reset()
        task = self._stream_task = asyncio.current_task()
        try:
            return await op(self._fd, buf, outcome=oc)
        except asyncio.CancelledError:
            if oc.armed:
                self._set_pending(on_cancelled)
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
                self._set_pending(advance)
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

    # -- the read buffer and the position (lock held) ---------------------------------
    def _drop_read_buffer(self) -> None:
        """Forgets the bytes a cancelled read left: the position goes back to the
        logical one. A pipe's are kept (they cannot be read again)."""
        left = len(self._rbuf) - self._rpos
        if left:
            if self._seekable and self._pos is not None:
                self._pos -= left
            elif not self._seekable:
                return
        self._rbuf = b""
        self._rpos = 0

    def _logical_pos(self) -> int:
        assert self._pos is not None
        return self._pos - (len(self._rbuf) - self._rpos)

    async def _flush_locked(self) -> None:
        await self._settle()

    async def _before_read(self) -> None:
        await self._settle()

    async def _before_write(self) -> None:
        await self._settle()
        if self._rpos < len(self._rbuf):
            self._drop_read_buffer()
        else:
            self._rbuf = b""
            self._rpos = 0

    async def _fill_chunk(self, size: int) -> bool:
        """Appends one read of `size` at the position to the read buffer; False at
        EOF."""
        data = await self._read_once(size)
        if not data:
            return False
        self._append_read(data)
        return True

    # -- reading ----------------------------------------------------------------------
    def _may_read_inline(self) -> bool:
        """Whether a read at the position may be served from the page cache now,
        without an await: nothing comes before it (no op holds or awaits the lock,
        no cancelled op's result or bytes are due) and the position is known."""
        return self._may_read_inline_holding_lock() and self._lock.idle()

    def _may_read_inline_holding_lock(self) -> bool:
        """``_may_read_inline`` for the op that holds the file's lock."""
        return (
            self._inline_reads
            and self._seekable
            and self._pending is None
            and self._pos is not None
            and self._rpos == len(self._rbuf)
            and self._hint.read
            and not self._closed
            and not self._eng.closed
        )

    def _read_now(self, size: Any) -> bytes | None:
        """``read(size)`` where the page cache holds the bytes; else None."""
        if type(size) is int and size >= 0 and self._may_read_inline():
            pos: int = self._pos  # type: ignore[assignment]
            try:
                data = pread_nowait(self._fd, size, pos, self._hint.memory)
            except Exception:  # the coroutine says what is wrong
                return None
            if data is not None:
                self._pos = pos + len(data)
            return data
        return None

    def _readinto_now(self, buffer: Any) -> int | None:
        """``readinto(buffer)`` where the page cache holds the bytes; else None."""
        if self._may_read_inline():
            pos: int = self._pos  # type: ignore[assignment]
            try:
                got = preadinto_nowait(self._fd, buffer, pos, self._hint.memory)
            except Exception:  # a read-only buffer: the coroutine says so
                return None
            if got is not None:
                self._pos = pos + got
            return got
        return None

    async def _read_sized(self, size: int) -> bytes:
        """Bytes a cancelled op left, else one read."""
        async with self._lock:
            await self._settle()
            return await self._raw_read(size)

    async def read1(self, size: int = -1) -> bytes:
        """Reads up to `size` bytes with at most one read from the file."""
        self._check_readable()
        size = _index(size, allow_none=False)  # as io's read1: None is a TypeError
        async with self._lock:
            await self._settle()
            if size < 0:
                size = CHUNK_MIN
            if size == 0 and self._rpos >= len(self._rbuf):
                return b""
            return await self._raw_read(size)

    async def readall(self) -> bytes:
        """Reads to the end of the file, in large chunks."""
        self._check_readable()
        async with self._lock:
            await self._settle()
            return await self._readall_locked()

    async def _readall_locked(self, head: bytes = b"") -> bytes:
        """`head` (what the file above had read ahead), then the rest of the file.
        If this raises, what it read is the next bytes read, `head` first."""
        parts = [head, self._take(len(self._rbuf))]
        self._rbuf, self._rpos = b"", 0
        chunk = CHUNK_MIN
        try:
            if self._seekable and not self._direct:
                # Regular files: ask for everything left, plus one byte to see EOF.
                try:
                    st = await self._eng.fstat(self._fd)
                    pos = await self._raw_pos()
                    if st.st_size > pos:
                        chunk = st.st_size - pos + 1
                except OSError:
                    pass
            while True:
                data = await self._read_once(chunk)
                if not data:
                    break
                parts.append(data)
                chunk = max(self._next_chunk(chunk), CHUNK_MIN)
        except BaseException:
            self._unread(b"".join(parts))
            raise
        return b"".join(parts)

    async def _readinto_locked(self, mv: memoryview) -> int:
        """Bytes a cancelled op left, else one read."""
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
            await self._settle()
            out = bytearray(self._take(len(self._rbuf)))
            try:
                while (size < 0 or len(out) < size) and not out.endswith(b"\n"):
                    b = await self._read_once(1)
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

    # -- writing ----------------------------------------------------------------------
    async def _write_checked(self, data: Any, mv: memoryview) -> int:
        """One write, possibly short."""
        async with self._lock:
            await self._before_write()
            return await self._raw_write(mv)

    async def flush(self) -> None:
        """Nothing is buffered: applies the result of a cancelled write."""
        self._check_closed()
        if self._pending is not None:
            async with self._lock:
                await self._settle()

    # -- position ---------------------------------------------------------------------
    async def tell(self) -> int:
        """The current position."""
        self._check_closed()
        if not self._seekable:
            raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))
        async with self._lock:
            await self._settle()
            await self._raw_pos()
            return self._logical_pos()

    async def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Moves the position (whence: SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA,
        SEEK_HOLE); returns the new position."""
        self._check_closed()
        offset = operator.index(offset)
        whence = operator.index(whence)
        self._check_seek(offset, whence)
        async with self._lock:
            await self._settle()
            return await self._seek_locked(offset, whence, self)

    async def _seek_locked(self, offset: int, whence: int, top: Any) -> int:
        """Moves the position of `top` (its buffers written out already)."""
        await self._raw_pos()
        cur = top._logical_pos()
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
        top._drop_read_buffer()
        self._pos = new
        return new

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position); the position stays."""
        self._check_closed()
        self._check_truncatable()
        if not self._seekable:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        async with self._lock:
            await self._settle()
            return await self._truncate_locked(size, self)

    async def _truncate_locked(self, size: int | None, top: Any) -> int:
        """Resizes the file to `size` (default: `top`'s position; its buffers
        written out already)."""
        await self._raw_pos()
        if size is None:
            size = top._logical_pos()
        else:
            size = operator.index(size)
        if size < 0:  # what the builtin's ftruncate(2) says; io_uring's op refuses first
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        top._drop_read_buffer()
        await self._eng.ftruncate(self._fd, size)
        return size

    # -- closing ----------------------------------------------------------------------
    async def close(self) -> None:
        """Closes the fd through the engine (unless closefd=False).

        An op another task has in flight on a pipe, socket or terminal is ended:
        it raises ``ValueError: I/O operation on closed file.``, as do the ops
        waiting behind it. The fd number goes back to the OS only once the kernel
        has completed every op of ours on it."""
        await self._close(self)

    async def _close(self, top: Any) -> None:
        """close(), after which `top` writes out its buffers (behind the ops in
        flight) before the fd is given back."""
        if self._closed:
            if self._closer is not None:  # a close() before us still waits: so do we
                await asyncio.shield(self._closer)
            return
        self._closed = True
        self._gate.open = False
        self._lock.closing = True
        task = self._stream_task
        if task is not None and task is not asyncio.current_task():
            self._interrupted = task
            task.cancel()
        if not self._lock.locked():
            await self._close_after_ops(top)  # nothing in flight: no wait for the lock
            return
        # Done in a task of its own: if this close() is cancelled while the ops in
        # flight end, the fd is still given back, once they have.
        closer = self._closer = asyncio.ensure_future(self._close_after_ops(top))
        closer.add_done_callback(_retrieve)
        await asyncio.shield(closer)

    async def _close_after_ops(self, top: Any) -> None:
        try:
            # Behind the ops in flight, which now end; an unlocked lock is taken
            # without a wait.
            await self._lock.acquire()
            try:
                await top._flush_locked()  # settles a cancelled op first
            finally:
                self._lock.release()
        finally:
            await self._release_fd(top)

    async def _release_fd(self, top: Any) -> None:
        fd = self._fd
        if self._closefd:
            await self._eng.close(fd)
        elif self._seekable and self._pos is not None:
            # The fd goes on living: leave its kernel position where ours is.
            try:
                os.lseek(fd, top._logical_pos(), os.SEEK_SET)
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
        self._gate.open = False
        if self._closefd:
            try:
                os.close(self._fd)
            except OSError:
                pass
