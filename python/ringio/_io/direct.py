"""O_DIRECT for binary files: unaligned buffers, offsets and sizes go through
aligned bounce buffers.
"""

from __future__ import annotations

from typing import Any

from .._core import AlignedBuffer
from .._engines.many import read_span
from .._proactor import aligned_in_place


class DirectIO:
    """O_DIRECT reads and writes of a binary file, through aligned bounce buffers
    (the file's ``_mem_align``/``_off_align``)."""

    def _aligned_span(self, pos: int, n: int) -> tuple[int, int]:
        start, length, _ = read_span(pos, n, self._off_align)
        return start, start + length

    async def _direct_read(self, n: int) -> bytes:
        pos = await self._raw_pos()
        start, end = self._aligned_span(pos, n)
        bounce = AlignedBuffer(end - start, self._bounce_align)
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
        bounce = AlignedBuffer(end - start, self._bounce_align)
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
        if not self._in_place(buf, pos):
            return None
        got = await self._eng.pread(self._fd, buf, pos, self._hint)
        self._pos = pos + got
        return got

    def _in_place(self, buffer: Any, offset: int) -> bool:
        """Whether a read at `offset` may go straight into `buffer`: not empty, and its
        address, its length and `offset` aligned."""
        return aligned_in_place(buffer, offset, self._off_align, self._mem_align)
