"""Line reading, written once for binary and text files: ``readlines()`` and
``async for line in f``.

The file class supplies ``readline()``, ``_check_readable()``, ``_lend()`` (lends the
rest of its chunk to the native line cursor) and the hooks below. ``async for`` is
native (``_core.LineIter``): lines already in the lent chunk cost no coroutine, and
the state stays in the file, so ``readline()`` and friends can be mixed in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

from .._core import LineIter
from .base import _index

Line = TypeVar("Line", bytes, str)


class LineReading(Generic[Line]):
    """``readlines()`` and async iteration over ``readline()``."""

    # -- hooks: what differs between binary and text ---------------------------------
    def _lines_begin(self) -> Any:
        """Before ``readlines()`` reads: what ``_lines_undo`` needs."""
        return None

    def _lines_undo(self, mark: Any, taken: list[Line]) -> None:
        """``readlines()`` was interrupted (cancelled, or an error): the lines it
        took go back, so that no byte read from the kernel is lost."""
        raise NotImplementedError

    async def _lines_done(self, mark: Any) -> None:
        """``readlines()`` finished."""

    def _before_next_line(self) -> None:
        """Iteration's slow path is about to read a line."""

    def _after_last_line(self) -> None:
        """Iteration reached EOF."""

    # -- the loops ----------------------------------------------------------------------
    async def readline(self, size: int | None = -1) -> Line:  # pragma: no cover - the file's
        raise NotImplementedError

    def _check_readable(self) -> None:  # pragma: no cover - the file's
        raise NotImplementedError

    def _lend(self) -> None:  # pragma: no cover - the file's
        raise NotImplementedError

    async def readlines(self, hint: int | None = -1) -> list[Line]:
        """Reads lines until EOF, or until their total size reaches `hint`."""
        hint = _index(hint)
        lines: list[Line] = []
        total = 0
        mark = self._lines_begin()
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
            self._lines_undo(mark, lines)
            raise
        await self._lines_done(mark)
        return lines

    async def __anext__(self) -> Line:
        return await self._next_line()

    def __aiter__(self) -> AsyncIterator[Line]:
        self._check_readable()
        return LineIter(self)  # type: ignore[no-any-return]

    async def _next_line(self) -> Line:
        """Iteration's slow path (LineIter calls it when the lent chunk holds no
        complete line): one readline(), then the rest of the chunk is lent out."""
        self._before_next_line()
        line = await self.readline()
        if not line:
            self._after_last_line()
            raise StopAsyncIteration
        self._lend()
        return line
