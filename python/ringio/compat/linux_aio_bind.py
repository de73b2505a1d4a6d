"""The ``linux_aio_bind`` 1.0.0 names that ``linux_aio`` programs use: the IOCB enums and
the I/O priority helpers, with the same names, types and values.

The raw ctypes syscall layer of linux_aio_bind (``io_setup``, ``io_submit``, ``IOCB``,
``IOEvent``, ...) is deliberately not provided: ringio owns the kernel context, the
iocbs and the buffers they point to, so that no Python code can hand the kernel a
dangling pointer. Asking for one of those names raises an AttributeError that says
what to use instead (:mod:`ringio.aio`, or :mod:`ringio.compat.linux_aio`).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Any

from ringio import aio

__all__ = (
    "IOCBCMD",
    "IOPRIO_CLASS_SHIFT",
    "IOCBFlag",
    "IOCBPriorityClass",
    "IOCBRWFlag",
    "gen_io_priority",
)


class IOCBCMD(IntEnum):
    """``aio_lio_opcode`` values (linux/aio_abi.h). FSYNC/FDSYNC need Linux 4.18,
    POLL 4.19."""

    PREAD = aio.IOCB_CMD_PREAD
    PWRITE = aio.IOCB_CMD_PWRITE
    FSYNC = aio.IOCB_CMD_FSYNC
    FDSYNC = aio.IOCB_CMD_FDSYNC
    POLL = aio.IOCB_CMD_POLL
    PREADV = aio.IOCB_CMD_PREADV
    PWRITEV = aio.IOCB_CMD_PWRITEV

    # Kept because linux_aio_bind's enums double as ctypes argument types.
    @classmethod
    def from_param(cls, obj: Any) -> int:
        return int(obj)


class IOCBFlag(IntFlag):
    """``aio_flags`` bits: RESFD (signal an eventfd) and IOPRIO (use ``aio_reqprio``)."""

    RESFD = aio.IOCB_FLAG_RESFD
    IOPRIO = aio.IOCB_FLAG_IOPRIO

    @classmethod
    def from_param(cls, obj: Any) -> int:
        return int(obj)


class IOCBRWFlag(IntFlag):
    """``aio_rw_flags`` bits (linux/fs.h RWF_*): the five linux_aio_bind 1.0.0 knows.
    ringio.aio also has RWF_NOAPPEND, RWF_ATOMIC and RWF_DONTCACHE; any int works
    as a block's ``rw_flags``."""

    HIPRI = aio.RWF_HIPRI
    DSYNC = aio.RWF_DSYNC
    SYNC = aio.RWF_SYNC
    NOWAIT = aio.RWF_NOWAIT
    APPEND = aio.RWF_APPEND

    @classmethod
    def from_param(cls, obj: Any) -> int:
        return int(obj)


class IOCBPriorityClass(IntEnum):
    """I/O priority classes (linux/ioprio.h). RT needs CAP_SYS_ADMIN or CAP_SYS_NICE."""

    NONE = aio.IOPRIO_CLASS_NONE
    RT = aio.IOPRIO_CLASS_RT
    BE = aio.IOPRIO_CLASS_BE
    IDLE = aio.IOPRIO_CLASS_IDLE

    @classmethod
    def from_param(cls, obj: Any) -> int:
        return int(obj)


IOPRIO_CLASS_SHIFT = 13
"""Bits below the class in an ioprio value."""


def gen_io_priority(priority_class: int, priority: int) -> int:
    """The raw ioprio value for `priority_class` and level `priority`.

    Like linux_aio_bind, this does not range-check: the kernel refuses a bad class
    or level when the op is submitted (OSError EINVAL, or EPERM for RT without the
    capability). :func:`ringio.aio.ioprio` is the checking equivalent.
    """
    return (priority_class << IOPRIO_CLASS_SHIFT) | priority


# linux_aio_bind's ctypes syscall layer, named so that asking for it explains itself.
_RAW_NAMES = frozenset(
    {
        "IOCB",
        "IOEvent",
        "IOVec",
        "Timespec",
        "aio_context_t",
        "create_c_array",
        "io_cancel",
        "io_destroy",
        "io_getevents",
        "io_setup",
        "io_submit",
        "iocb_p",
    }
)


def __getattr__(name: str) -> Any:
    if name in _RAW_NAMES:
        raise AttributeError(
            f"linux_aio_bind.{name} (the raw ctypes syscall layer) is not provided by "
            f"ringio.compat.linux_aio_bind; use ringio.aio (Context, pread, ...) or "
            f"ringio.compat.linux_aio (AIOContext and the *Block classes) instead",
            name=name,
            obj=__name__,
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}", name=name)
