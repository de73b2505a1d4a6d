"""The request a ``ringio.compat.linux_aio`` block describes, and the checks on what
goes into it.

:class:`_Iocb` holds the fields of one kernel iocb as linux_aio's ctypes IOCB did; the
helpers coerce values the way its ctypes fields stored them and refuse what the kernel
must not be handed (a buffer that is not bytes/bytearray, a read into bytes).
"""

from __future__ import annotations

import errno
import operator
from typing import Any

from .linux_aio_bind import IOCBCMD


class UnsupportedBufferError(NotImplementedError, TypeError):
    """A buffer type linux_aio does not take (it takes bytes and bytearray only).

    linux_aio raised NotImplementedError here; this is also a TypeError, which is
    what the mistake is.
    """


class FileNoError(AttributeError, TypeError):
    """`file` is neither an int nor has a fileno() method.

    linux_aio raised AttributeError here; this is also a TypeError.
    """


class _Unset:
    """A block attribute that linux_aio leaves unset after ``change_cmd``."""

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _int16(value: int) -> int:
    # aio_reqprio is a signed 16-bit field in linux_aio's ctypes IOCB: stores wrap.
    return ((operator.index(value) + 0x8000) & 0xFFFF) - 0x8000


def _uint32(value: int) -> int:
    return operator.index(value) & 0xFFFF_FFFF


def _einval(msg: str) -> OSError:
    return OSError(errno.EINVAL, f"{errno.errorcode[errno.EINVAL]}: {msg}")


class _Iocb:
    """The fields of one kernel iocb, as linux_aio's ctypes IOCB held them.

    ``buf`` is what ``aio_buf`` pointed at: the buffer object (a tuple of them for
    vectored commands), the event mask (an int) for POLL, or None for a null pointer.
    Holding the object rather than its address keeps it alive while any block that
    shares this iocb may still submit it.
    """

    __slots__ = (
        "buf",
        "fildes",
        "flags",
        "nbytes",
        "offset",
        "opcode",
        "reqprio",
        "resfd",
        "rw_flags",
    )

    def __init__(
        self,
        opcode: IOCBCMD,
        fildes: int,
        rw_flags: int,
        reqprio: int,
        buf: Any,
        nbytes: int,
        offset: int,
        flags: int,
        resfd: int,
    ) -> None:
        self.opcode = opcode
        self.fildes = fildes
        self.rw_flags = rw_flags
        self.reqprio = reqprio
        self.buf = buf
        self.nbytes = nbytes
        self.offset = offset
        self.flags = flags
        self.resfd = resfd


def _get_fd(file: Any) -> int:
    if isinstance(file, int):
        return file
    try:
        fileno = file.fileno
    except AttributeError:
        raise FileNoError(
            f"`file` must be an int or an object with a fileno() method. current: {file}"
        ) from None
    return operator.index(fileno())


def _check_buffer(buffer: Any) -> None:
    if not isinstance(buffer, (bytes, bytearray)):
        raise UnsupportedBufferError(
            f"Unknown buffer type: {type(buffer)}; linux_aio blocks take bytes or "
            f"bytearray (use ringio.aio for memoryview, mmap, array or ringio.aligned)"
        )


def _check_read_target(buffer: Any, length: int) -> None:
    # The kernel would write into the bytes object's memory, which Python assumes
    # never changes (and may share between equal values).
    if isinstance(buffer, bytes) and length > 0:
        raise TypeError(
            "a read needs a writable buffer: use bytearray, not bytes (linux_aio let "
            "the kernel overwrite the immutable bytes object)"
        )
