"""``aiofiles.tempfile.temptypes`` over ringio: the wrappers of spooled temporary
files and temporary directories, over :mod:`ringio.tempfile`'s objects."""

from __future__ import annotations

import asyncio
from typing import Any

from ..base import AsyncBase
from ..threadpool.utils import (
    cond_delegate_to_executor,
    delegate_to_executor,
    proxy_property_directly,
)

__all__ = ["AsyncSpooledTemporaryFile", "AsyncTemporaryDirectory"]


@delegate_to_executor("fileno", "rollover")
@cond_delegate_to_executor(
    "close",
    "flush",
    "isatty",
    "read",
    "readline",
    "readlines",
    "seek",
    "tell",
    "truncate",
)
@proxy_property_directly("closed", "encoding", "mode", "name", "newlines")
class AsyncSpooledTemporaryFile(AsyncBase):
    """Wrapper of a ``ringio.tempfile.AsyncSpooledTemporaryFile`` (``_file``), which
    keeps the data in memory until it passes ``max_size``, then in a file made by
    the engine."""

    async def _check(self) -> None:
        await self._file._check()

    async def write(self, s: Any) -> int:
        """Writes, then rolls over to a file if past ``max_size``."""
        return await self._file.write(s)  # type: ignore[no-any-return]

    async def writelines(self, iterable: Any) -> None:
        """Writes, then rolls over to a file if past ``max_size``."""
        await self._file.writelines(iterable)


@delegate_to_executor("cleanup")
@proxy_property_directly("name")
class AsyncTemporaryDirectory:
    """Wrapper of a ``ringio.tempfile.AsyncTemporaryDirectory`` (``_file``)."""

    def __init__(
        self, file: Any, loop: asyncio.AbstractEventLoop | None, executor: Any
    ) -> None:
        self._file = file
        self._loop = loop
        self._executor = executor

    async def close(self) -> None:
        await self.cleanup()
