"""``linux_aio`` 0.4.1 on ringio's kernel AIO core.

Programs written for ``linux_aio`` run unchanged once the import names are aliased::

    import sys
    from ringio.compat import linux_aio, linux_aio_bind
    sys.modules["linux_aio"] = linux_aio
    sys.modules["linux_aio_bind"] = linux_aio_bind

The public names, signatures, defaults, properties and return values are those of
linux_aio 0.4.1, including its limits (bytes/bytearray buffers only, ``timeout_ns=0``
meaning "wait without limit", a partial ``submit`` returning a short count). What
changes is what used to be memory-unsafe: the kernel is never handed a pointer into
an immutable or too-short buffer, or into a buffer nobody keeps alive. Each
difference is listed in ``docs/compat-linux_aio.md``.

How it maps onto ringio: a block is a mutable description (an emulated iocb, shared
by the blocks that ``change_cmd`` derives from one another, as linux_aio shares its
ctypes IOCB); each ``submit`` turns it into a fresh immutable :class:`ringio.aio.Op`
whose ``data`` is the block, so every completion leads back to the very block object
that was submitted.
"""

from __future__ import annotations

from ._linux_aio_blocks import (
    AIOBlock,
    FDsyncBlock,
    FsyncBlock,
    NonRWBlock,
    NonVectorBlock,
    PollBlock,
    ReadBlock,
    ReadVBlock,
    RWBlock,
    VectorBlock,
    WriteBlock,
    WriteVBlock,
)
from ._linux_aio_context import AIOContext, AIOEvent
from ._linux_aio_iocb import FileNoError, UnsupportedBufferError

__all__ = (
    "AIOBlock",
    "AIOContext",
    "AIOEvent",
    "FDsyncBlock",
    "FsyncBlock",
    "NonRWBlock",
    "NonVectorBlock",
    "PollBlock",
    "RWBlock",
    "ReadBlock",
    "ReadVBlock",
    "VectorBlock",
    "WriteBlock",
    "WriteVBlock",
)

# The classes live in private modules; they keep this module as theirs, so reprs,
# error messages and tracebacks name them as before (ringio.compat.linux_aio.ReadBlock).
for _cls in (
    AIOBlock,
    AIOContext,
    AIOEvent,
    FDsyncBlock,
    FileNoError,
    FsyncBlock,
    NonRWBlock,
    NonVectorBlock,
    PollBlock,
    RWBlock,
    ReadBlock,
    ReadVBlock,
    UnsupportedBufferError,
    VectorBlock,
    WriteBlock,
    WriteVBlock,
):
    _cls.__module__ = __name__
del _cls
