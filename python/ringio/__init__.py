"""ringio: completion-based asynchronous I/O for Python on Linux.

ringio talks to the kernel's completion interfaces directly (io_uring, and kernel
AIO where io_uring is refused), from asyncio, with no thread pools: ``ringio.open``
``ringio.os`` and ``ringio.tempfile`` for files, ``ringio.aio`` and ``ringio.uring`` for the kernel
queues themselves, and an asyncio event loop on io_uring (``ringio.EventLoop``).
"""

from __future__ import annotations

from . import aio, tempfile, uring, watcher
from ._core import AlignedBuffer, PartialSubmitError, dio_alignment
from ._engines import EngineInfo, engine_info
from ._io import AsyncBufferedFile, AsyncFileIO, AsyncTextFile, open
from .loop import EventLoop, install, new_event_loop, run
from .loop._asyncio_compat import HAS_POLICIES
from .watcher import (
    OP_ACCEPT,
    OP_CONNECT,
    OP_READ,
    OP_WRITE,
    Conn,
    ConnFreedError,
    OpResult,
    RingBuffer,
    Watcher,
    WatcherClosedError,
)

__all__ = [
    "OP_ACCEPT",
    "OP_CONNECT",
    "OP_READ",
    "OP_WRITE",
    "AlignedBuffer",
    "AsyncBufferedFile",
    "AsyncFileIO",
    "AsyncTextFile",
    "Conn",
    "ConnFreedError",
    "EngineInfo",
    "EventLoop",
    "OpResult",
    "PartialSubmitError",
    "RingBuffer",
    "Watcher",
    "WatcherClosedError",
    "aio",
    "aligned",
    "dio_alignment",
    "engine",
    "install",
    "new_event_loop",
    "open",
    "run",
    "tempfile",
    "uring",
    "watcher",
]

__version__ = "0.1.0"

if HAS_POLICIES:  # asyncio's policy system: CPython 3.11 to 3.15 (docs/loop.md)
    from .loop import EventLoopPolicy as EventLoopPolicy

    __all__.append("EventLoopPolicy")


def aligned(nbytes: int, alignment: int | None = None) -> AlignedBuffer:
    """A zero-filled writable buffer of `nbytes` whose address is aligned for O_DIRECT.

    `alignment` defaults to the page size, which satisfies every filesystem's
    O_DIRECT memory alignment; it must be a power of two. The buffer supports the
    buffer protocol: slice it with ``memoryview(buf)[a:b]``.
    """
    return AlignedBuffer(nbytes, alignment)


def engine() -> EngineInfo:
    """Which engine ringio's asyncio file operations use in this process, why, and
    why each better engine was refused (``RINGIO_ENGINE`` forces one)."""
    return engine_info()
