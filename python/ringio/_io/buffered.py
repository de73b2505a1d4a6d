"""Buffered binary ``ringio.open`` files (``AsyncBufferedFile``, like
``io.BufferedReader/Writer/Random``): what they do differently from the
unbuffered ``AsyncFileIO`` over the same ``binary._BinaryFile``. Reads fill a
read buffer and keep what they read ahead (line iteration borrows it), writes
collect in a write buffer; io's buffered error messages.
"""

from __future__ import annotations

import io
from typing import Any

from .._core import LINES_BYTES, LineCursor
from .base import OFF_T_MAX, _closed_error
from .binary import WHENCES, _BinaryFile


class AsyncBufferedFile(_BinaryFile):
    """A buffered binary file (like ``io.BufferedReader/Writer/Random``)."""

    # As io: a buffered file without the capability has no such method at all
    # (UnsupportedOperation, closed or not).
    def _check_readable(self) -> None:
        if not self._readable:
            raise io.UnsupportedOperation("read")
        if self._closed:
            raise _closed_error()

    def _check_writable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation("write")
        if self._closed:
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

    # -- reading ----------------------------------------------------------------------
    async def _read_sized(self, size: int) -> bytes:
        """`size` bytes (fewer at EOF): from the read buffer, refilled as needed;
        reads of at least the buffer size go straight to the caller."""
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
            self._fill = self._next_chunk(self._fill)
        else:
            self._fill = self._bufsize
        fill = self._fill
        if pos is not None:
            self._last_fill_end = pos + fill
        return fill

    async def _readinto_locked(self, mv: memoryview) -> int:
        """Fills `mv` (less only at EOF): from the read buffer, then straight from
        the file."""
        n = len(mv)
        got = 0
        if self._rpos < len(self._rbuf):
            got = self._take_into(mv)
            if got == n:
                return got
        if self._direct and got == 0:
            direct = await self._direct_readinto(mv)
            if direct is not None:
                return direct
        try:
            while got < n:
                k = await self._readinto_once(mv[got:])
                got += k
                if k == 0:
                    break
        except BaseException:
            self._unread(mv[:got].tobytes())
            raise
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
        """Into the write buffer, written out when it fills; data of at least the
        buffer size goes straight to the file. Returns the whole length."""
        n = mv.nbytes
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
