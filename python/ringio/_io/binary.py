"""What the two binary ``ringio.open`` files share: the unbuffered ``AsyncFileIO``
(``raw``, like ``io.FileIO``) and the buffered ``AsyncBufferedFile`` that wraps one
(``buffered``, like ``io.BufferedReader/Writer/Random``). The package's docstring
(``ringio._io``) has the design in short.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .._core import LineCursor, copy_into
from .base import (
    CHUNK_MAX,
    CHUNK_MIN,
    _Base,
    _closed_error,
    _FileLock,
    _index,
)
from .lines import LineReading

#: The whence values seek knows (lseek's).
WHENCES = (os.SEEK_SET, os.SEEK_CUR, os.SEEK_END, os.SEEK_DATA, os.SEEK_HOLE)


class _BinaryFile(LineReading[bytes], _Base):
    """The public read and write methods' structure (argument checks, the fast
    paths that serve the read buffer without the lock) and the read buffer's
    management, over what each layer supplies.

    Each layer has a read buffer (``_rbuf`` from ``_rpos`` on): the buffered file's
    holds its read-ahead; the raw file's holds only bytes a read took from the
    kernel and could not return (it was cancelled), which the raw file's next read
    returns first, whoever calls it. Each layer supplies ``_check_readable``,
    ``_check_writable`` (io's messages differ), ``_read_now``, ``_readinto_now``,
    ``_read_sized``, ``_readinto_locked``,
    ``_write_checked``, ``_before_read``, ``_fill_chunk`` and ``_lend``.
    """

    _rbuf: bytes
    _rpos: int
    # Line iteration: the cursor the rest of _rbuf is lent to (see _lend).
    _cursor: LineCursor | None
    _lock: _FileLock
    name: Any
    mode: str

    def __repr__(self) -> str:
        state = " [closed]" if self.closed else ""
        return f"<ringio {type(self).__name__} name={self.name!r} mode={self.mode!r}{state}>"

    def _check_closed(self) -> None:
        if self.closed:
            raise _closed_error()

    def _check_readable(self) -> None:  # pragma: no cover - the layer's
        raise NotImplementedError

    def _check_writable(self) -> None:  # pragma: no cover - the layer's
        raise NotImplementedError

    # -- the read buffer (lock held, or no await between looking and taking) ----------
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

    def _unread(self, data: bytes) -> None:
        """Puts back bytes that a read took before it raised (was cancelled): it
        returns nothing, so they are the next bytes read. They come before what the
        buffer holds, and before what the raw file still holds or a cancelled op
        still in the kernel brings (its `_pending` keeps them in the raw file)."""
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

    def _take_into(self, mv: memoryview) -> int:
        """Fills the start of `mv` from the read buffer; returns the byte count."""
        got = copy_into(mv, self._rbuf, self._rpos)
        self._rpos += got
        return got

    def _append_read(self, data: bytes) -> None:
        """Appends bytes read from the file to what the read buffer holds."""
        rest = self._rbuf[self._rpos :]
        self._rbuf = rest + data if rest else data
        self._rpos = 0

    async def _fill_chunk(self, size: int) -> bool:  # pragma: no cover - the layer's
        """Appends one read of `size` to the read buffer; False at EOF."""
        raise NotImplementedError

    def _next_chunk(self, chunk: int) -> int:
        return min(chunk * 2, CHUNK_MAX)

    async def _before_read(self) -> None:  # pragma: no cover - the layer's
        raise NotImplementedError

    # -- reading ----------------------------------------------------------------------
    # read() and readinto() are coroutines: nothing is read before the awaiting task
    # runs them, so a task cancelled before its first step reads and loses nothing,
    # and reads happen in the order they are awaited. Their first step asks the
    # layer's _read_now/_readinto_now, which serve the read at once (from the read
    # buffer, or the page cache) if nothing comes before it; else the rest reads
    # through the engine.
    async def read(self, size: int | None = -1) -> bytes:
        """Reads up to `size` bytes (all, to EOF, when negative or None)."""
        data = self._read_now(size)
        if data is not None:
            return data
        return await self._read_waiting(size)

    async def _read_waiting(self, size: int | None) -> bytes:
        """``read(size)`` where ``_read_now`` could not serve it."""
        self._check_readable()
        size = _index(size)
        if size < 0:
            return await self.readall()
        if self._cursor is not None:
            self._unlines()
        return await self._read_sized(size)

    async def readinto(self, buffer: Any) -> int:
        """Reads into a writable bytes-like object; returns the byte count."""
        got = self._readinto_now(buffer)
        if got is not None:
            return got
        return await self._readinto_waiting(buffer)

    async def _readinto_waiting(self, buffer: Any) -> int:
        """``readinto(buffer)`` where ``_readinto_now`` could not serve it."""
        self._unlines()
        self._check_readable()
        try:
            mv = memoryview(buffer)
        except TypeError:
            mv = None
        if mv is None or mv.readonly or not mv.c_contiguous:  # what io's "w*" refuses
            raise TypeError(
                "readinto() argument must be read-write bytes-like object, "
                f"not {type(buffer).__name__}"
            )
        mv = mv.cast("B")
        async with self._lock:
            await self._before_read()
            return await self._readinto_locked(mv)

    def _read_now(self, size: Any) -> bytes | None:  # pragma: no cover - the layer's
        """``read(size)`` when it can be served without waiting; else None."""
        return None

    def _readinto_now(self, buffer: Any) -> int | None:  # pragma: no cover
        """``readinto(buffer)`` when it can be served without waiting; else None."""
        return None  # the layer's

    async def _read_sized(self, size: int) -> bytes:  # pragma: no cover - the layer's
        raise NotImplementedError

    async def readall(self) -> bytes:  # pragma: no cover - the layer's
        raise NotImplementedError

    async def _readinto_locked(self, mv: memoryview) -> int:  # pragma: no cover
        raise NotImplementedError  # the layer's

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
        raise NotImplementedError  # the layer's

    async def writelines(self, lines: Iterable[Any]) -> None:
        """Writes every bytes-like object of `lines` (no separators added)."""
        self._check_closed()  # as io: not writable fails at the first write
        for line in lines:
            await self.write(line)
