"""``aiofiles.threadpool.text`` over ringio: the text file wrappers, with the same
coroutine methods, plain methods and properties as aiofiles 25.1 (note that there,
as here, ``readable()`` of a text wrapper is a coroutine)."""

from __future__ import annotations

from typing import Any, NoReturn

from ..base import AsyncBase, AsyncIndirectBase
from .utils import delegate_to_executor, proxy_method_directly, proxy_property_directly

__all__ = ["AsyncTextIOWrapper", "AsyncTextIndirectIOWrapper"]


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "readable",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "write",
    "writable",
    "writelines",
)
@proxy_method_directly("detach", "fileno", "readable")
@proxy_property_directly(
    "buffer",
    "closed",
    "encoding",
    "errors",
    "line_buffering",
    "newlines",
    "name",
    "mode",
)
class AsyncTextIOWrapper(AsyncBase):
    """The version of io.TextIOWrapper."""


@delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "readable",
    "readline",
    "readlines",
    "seek",
    "seekable",
    "tell",
    "truncate",
    "write",
    "writable",
    "writelines",
)
@proxy_method_directly("detach", "fileno", "readable")
@proxy_property_directly(
    "buffer",
    "closed",
    "encoding",
    "errors",
    "line_buffering",
    "newlines",
    "name",
    "mode",
)
class AsyncTextIndirectIOWrapper(AsyncIndirectBase):
    """The indirect version of io.TextIOWrapper."""


class _Detached:
    """Stands in for a text file whose buffer was detached: every use raises what
    io.TextIOWrapper raises then."""

    def __getattr__(self, name: str) -> NoReturn:
        raise ValueError("underlying buffer has been detached")


def _buffer(self: Any) -> Any:
    """The binary file under the text one, wrapped as aiofiles would wrap it."""
    from .binary import AsyncBufferedIOBase, AsyncBufferedReader

    buf = self._file.buffer
    cls = AsyncBufferedReader if buf._readable else AsyncBufferedIOBase
    return cls(buf, loop=self._ref_loop, executor=self._executor)


def _detach(self: Any) -> Any:
    """Hands over the binary file (wrapped); this wrapper is unusable afterwards.
    Text writes are already in the binary file's buffer, so nothing is lost."""
    if self._file.closed:  # as io.TextIOWrapper.detach (its flush fails)
        raise ValueError("I/O operation on closed file.")
    buf = _buffer(self)
    self._file = _Detached()
    return buf


AsyncTextIOWrapper.buffer = property(_buffer)  # type: ignore[attr-defined]
AsyncTextIOWrapper.detach = _detach  # type: ignore[attr-defined]
