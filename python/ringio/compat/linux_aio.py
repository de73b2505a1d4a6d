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

import errno
import operator
import select
import time
from abc import ABCMeta
from collections.abc import Iterable
from types import TracebackType
from typing import Any, ClassVar

from ringio import PartialSubmitError, aio

from .linux_aio_bind import (
    IOCBCMD,
    IOPRIO_CLASS_SHIFT,
    IOCBFlag,
    IOCBPriorityClass,
    IOCBRWFlag,
    gen_io_priority,
)

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

# The kernel's per-op iovec limit (UIO_MAXIOV); more makes io_submit fail with EINVAL.
_UIO_MAXIOV = 1024
# How long cancel() waits for the kernel to deliver a cancelled poll's completion; it
# comes from a kernel workqueue, normally within microseconds.
_CANCEL_WAIT = 10.0


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


class AIOBlock(metaclass=ABCMeta):
    """One I/O request, reusable: every ``AIOContext.submit`` sends it to the kernel
    again with its current settings."""

    __slots__ = ("_deleted", "_file_obj", "_iocb")

    _iocb: _Iocb
    _file_obj: Any
    _deleted: bool

    def __init__(
        self,
        file: Any,
        cmd: IOCBCMD,
        rw_flags: int,
        priority_class: int,
        priority_value: int,
        buffer: Any,
        length: int,
        offset: int,
        res_fd: int,
    ) -> None:
        fd = _get_fd(file)
        priority = gen_io_priority(priority_class, priority_value)
        flags = 0
        if priority != 0:
            flags |= IOCBFlag.IOPRIO
        if res_fd != 0:
            flags |= IOCBFlag.RESFD
        self._file_obj = file
        self._deleted = False
        self._iocb = _Iocb(
            opcode=cmd,
            fildes=_uint32(fd),
            rw_flags=_uint32(rw_flags),
            reqprio=_int16(priority),
            buf=buffer,
            nbytes=operator.index(length),
            offset=operator.index(offset),
            flags=int(flags),
            resfd=_uint32(res_fd),
        )

    def change_cmd(self, new_cmd: IOCBCMD) -> AIOBlock:
        """Returns a block of the class for `new_cmd` that shares this block's request;
        this block is retired (submitting or cancelling it raises ValueError).

        As in linux_aio, PREAD<->PWRITE and PREADV<->PWRITEV keep the buffer, length
        and offset in the request (the new block's ``buffer`` is unset until assigned),
        other changes clear them, and changes to FSYNC, FDSYNC or POLL also clear the
        flags and rw_flags. Changing to the same command returns this block.
        """
        try:
            new_cmd = IOCBCMD(new_cmd)
        except ValueError:
            raise ValueError(f"Unknown command :{new_cmd}") from None
        cmd = self.cmd
        if new_cmd is cmd:
            return self

        block_type: type[AIOBlock]
        if new_cmd in (IOCBCMD.PWRITE, IOCBCMD.PREAD):
            block_type = WriteBlock if new_cmd is IOCBCMD.PWRITE else ReadBlock
            if cmd not in (IOCBCMD.PREAD, IOCBCMD.PWRITE):
                self._reset_buf()
        elif new_cmd in (IOCBCMD.PWRITEV, IOCBCMD.PREADV):
            block_type = WriteVBlock if new_cmd is IOCBCMD.PWRITEV else ReadVBlock
            if cmd not in (IOCBCMD.PREADV, IOCBCMD.PWRITEV):
                self._reset_buf()
        else:
            block_type = {
                IOCBCMD.FSYNC: FsyncBlock,
                IOCBCMD.FDSYNC: FDsyncBlock,
                IOCBCMD.POLL: PollBlock,
            }[new_cmd]
            self._iocb.flags = 0
            self._iocb.rw_flags = 0
            self._reset_buf()

        block = block_type.__new__(block_type)
        block._iocb = self._iocb
        block._iocb.opcode = new_cmd
        block._file_obj = self._file_obj
        block._deleted = False
        # linux_aio never set the new block's own buffer / event-mask attribute, so
        # reading them raised AttributeError until assigned; the unset marker does
        # the same here.
        if isinstance(block, RWBlock):
            block._buffer = _UNSET
        if isinstance(block, PollBlock):
            block._event_masks = _UNSET
        self._deleted = True
        return block

    def _reset_buf(self) -> None:
        self._iocb.buf = None
        self._iocb.nbytes = 0
        self._iocb.offset = 0

    @property
    def file(self) -> Any:
        """The file object (or int fd) given; setting it also sets ``fileno``."""
        return self._file_obj

    @file.setter
    def file(self, new_file: Any) -> None:
        self._iocb.fildes = _uint32(_get_fd(new_file))
        self._file_obj = new_file

    @property
    def fileno(self) -> int:
        """The fd the request names (taken from ``file`` when it was set)."""
        return self._iocb.fildes

    @property
    def cmd(self) -> IOCBCMD:
        return IOCBCMD(self._iocb.opcode)

    @property
    def flag(self) -> int:
        """The request's IOCBFlag bits (RESFD, IOPRIO) as an int."""
        return self._iocb.flags

    @flag.setter
    def flag(self, new_flag: int) -> None:
        self._iocb.flags = _uint32(new_flag)

    @property
    def res_fd(self) -> int | None:
        """The eventfd signalled on completion, or None (0 means none, as in linux_aio)."""
        return self._iocb.resfd or None

    @res_fd.setter
    def res_fd(self, fd: int) -> None:
        self.flag |= IOCBFlag.RESFD
        self._iocb.resfd = _uint32(fd)

    @property
    def priority_class(self) -> int:
        return self._iocb.reqprio >> IOPRIO_CLASS_SHIFT

    @priority_class.setter
    def priority_class(self, new_class: IOCBPriorityClass) -> None:
        self.flag |= IOCBFlag.IOPRIO
        self._iocb.reqprio = _int16(new_class << IOPRIO_CLASS_SHIFT | self.priority_value)

    @property
    def priority_value(self) -> int:
        return self._iocb.reqprio & ((1 << IOPRIO_CLASS_SHIFT) - 1)

    @priority_value.setter
    def priority_value(self, value: int) -> None:
        self.flag |= IOCBFlag.IOPRIO
        self._iocb.reqprio = _int16(self.priority_class << IOPRIO_CLASS_SHIFT | value)

    def set_priority(self, io_class: IOCBPriorityClass, priority: int) -> None:
        """Sets class and level at once (and the IOPRIO flag)."""
        self.flag |= IOCBFlag.IOPRIO
        self._iocb.reqprio = _int16(gen_io_priority(io_class, priority))

    def _to_op(self) -> aio.Op:
        """A ringio op for one submission of this block's current request."""
        iocb = self._iocb
        if iocb.fildes > 0x7FFF_FFFF:
            # What a negative fd (a closed socket's fileno() is -1) became in linux_aio's
            # unsigned field; the kernel refused it the same way.
            raise OSError(errno.EBADF, f"Bad file descriptor (fd {iocb.fildes})")
        common: dict[str, Any] = {
            "priority": iocb.reqprio & 0xFFFF if iocb.flags & IOCBFlag.IOPRIO else None,
            "resfd": iocb.resfd if iocb.flags & IOCBFlag.RESFD else None,
            "data": self,
        }
        cmd = IOCBCMD(iocb.opcode)
        if cmd is IOCBCMD.FSYNC:
            return aio.fsync(iocb.fildes, **common)
        if cmd is IOCBCMD.FDSYNC:
            return aio.fdsync(iocb.fildes, **common)
        if cmd is IOCBCMD.POLL:
            mask = iocb.buf or 0
            if not 0 <= mask <= 0xFFFF:
                raise _einval(f"poll event mask {mask:#x} does not fit in 16 bits")
            return aio.poll(iocb.fildes, mask, **common)
        if iocb.offset < 0:
            raise _einval(f"offset must be >= 0, not {iocb.offset}")
        reading = cmd in (IOCBCMD.PREAD, IOCBCMD.PREADV)
        if cmd in (IOCBCMD.PREAD, IOCBCMD.PWRITE):
            target = self._single_target(reading)
            make = aio.pread if reading else aio.pwrite
        else:
            target = self._vector_target(reading)
            make = aio.preadv if reading else aio.pwritev
        return make(iocb.fildes, target, iocb.offset, rw_flags=iocb.rw_flags, **common)

    def _single_target(self, reading: bool) -> Any:
        buf, nbytes = self._iocb.buf, self._iocb.nbytes
        if buf is None:
            if nbytes == 0:
                # A null buffer of length 0: the kernel transfers nothing and returns 0.
                return bytearray()
            raise ValueError(f"{self} has no buffer (set .buffer before submitting)")
        if not 0 <= nbytes <= len(buf):
            raise ValueError(
                f"length {nbytes} does not fit the {len(buf)}-byte buffer (linux_aio let "
                f"the kernel access memory beyond it)"
            )
        if reading:
            _check_read_target(buf, nbytes)
            if nbytes == 0:
                return bytearray()
        return buf if nbytes == len(buf) else memoryview(buf)[:nbytes]

    def _vector_target(self, reading: bool) -> list[Any]:
        bufs = self._iocb.buf
        if bufs is None:
            if self._iocb.nbytes == 0:
                return []
            raise ValueError(f"{self} has no buffers (set .buffer before submitting)")
        if len(bufs) > _UIO_MAXIOV:
            raise _einval(
                f"{len(bufs)} buffers in one vectored op, the kernel's limit is {_UIO_MAXIOV}"
            )
        if not reading:
            return list(bufs)
        for buf in bufs:
            _check_read_target(buf, len(buf))
        # Zero-length bytes are harmless (nothing is written) but not writable.
        return [bytearray() if len(buf) == 0 else buf for buf in bufs]


class RWBlock(AIOBlock):
    """A read or write: adds ``buffer``, ``offset`` and ``rw_flag``."""

    __slots__ = ("_buffer",)

    BUF_TYPE: ClassVar[Any]
    _buffer: Any

    @property
    def buffer(self) -> Any:
        buffer = self._buffer
        if buffer is _UNSET:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '_buffer' (it was made by "
                f"change_cmd(); assign .buffer first)"
            )
        return buffer

    @property
    def offset(self) -> int:
        return self._iocb.offset

    @offset.setter
    def offset(self, new_offset: int) -> None:
        self._iocb.offset = operator.index(new_offset)

    @property
    def rw_flag(self) -> int:
        """The request's IOCBRWFlag bits (RWF_*) as an int."""
        return self._iocb.rw_flags

    @rw_flag.setter
    def rw_flag(self, new_flag: int) -> None:
        self._iocb.rw_flags = _uint32(new_flag)


class NonVectorBlock(RWBlock):
    """A read or write of one buffer: adds ``length``."""

    __slots__ = ()

    BUF_TYPE = bytearray | bytes

    def __init__(
        self,
        file: Any,
        cmd: IOCBCMD,
        buffer: bytes | bytearray,
        length: int,
        offset: int,
        rw_flags: int,
        priority_class: int,
        priority_value: int,
        res_fd: int,
    ) -> None:
        _check_buffer(buffer)
        length = operator.index(length)
        if not 0 <= length <= len(buffer):
            raise ValueError(
                f"length {length} does not fit the {len(buffer)}-byte buffer (linux_aio let "
                f"the kernel access memory beyond it)"
            )
        self._buffer = buffer
        super().__init__(
            file, cmd, rw_flags, priority_class, priority_value, buffer, length, offset, res_fd
        )

    @RWBlock.buffer.setter
    def buffer(self, buffer: bytes | bytearray) -> None:
        """Replaces the buffer; ``length`` becomes its length."""
        _check_buffer(buffer)
        self._buffer = buffer
        self._iocb.buf = buffer
        self._iocb.nbytes = len(buffer)

    @property
    def length(self) -> int:
        """How many bytes to transfer; at most ``len(buffer)`` when submitted."""
        return self._iocb.nbytes

    @length.setter
    def length(self, new_len: int) -> None:
        self._iocb.nbytes = operator.index(new_len)


class ReadBlock(NonVectorBlock):
    """Reads ``length`` bytes (default: the whole buffer) at ``offset`` into a bytearray.

    A str is accepted as in linux_aio (its encoding gives the size); it becomes a
    bytearray, since the kernel cannot write into bytes.
    """

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        buffer: str | bytes | bytearray,
        offset: int = 0,
        length: int | None = None,
        rw_flags: IOCBRWFlag | int = 0,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        if isinstance(buffer, str):
            buffer = bytearray(buffer.encode())
        if length is None and isinstance(buffer, (bytes, bytearray)):
            length = len(buffer)
        if isinstance(buffer, (bytes, bytearray)):
            _check_read_target(buffer, operator.index(length))
        super().__init__(
            file,
            IOCBCMD.PREAD,
            buffer,
            length,
            offset,
            rw_flags,
            priority_class,
            priority_value,
            res_fd,
        )


class WriteBlock(NonVectorBlock):
    """Writes ``length`` bytes (default: all) of ``content`` at ``offset``; a str is
    encoded as UTF-8."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        content: str | bytes | bytearray,
        offset: int = 0,
        length: int | None = None,
        rw_flags: IOCBRWFlag | int = 0,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        if isinstance(content, str):
            content = content.encode()
        if length is None and isinstance(content, (bytes, bytearray)):
            length = len(content)
        super().__init__(
            file,
            IOCBCMD.PWRITE,
            content,
            length,
            offset,
            rw_flags,
            priority_class,
            priority_value,
            res_fd,
        )


class VectorBlock(RWBlock):
    """A scatter read or gather write over a tuple of buffers."""

    __slots__ = ()

    BUF_TYPE = tuple[bytearray | bytes, ...]

    def __init__(
        self,
        file: Any,
        cmd: IOCBCMD,
        buffer: Iterable[bytes | bytearray],
        offset: int,
        rw_flags: int,
        priority_class: int,
        priority_value: int,
        res_fd: int,
    ) -> None:
        buffers = self._as_tuple(buffer)
        self._buffer = buffers
        super().__init__(
            file,
            cmd,
            rw_flags,
            priority_class,
            priority_value,
            buffers,
            len(buffers),
            offset,
            res_fd,
        )

    @staticmethod
    def _as_tuple(buffers: Iterable[bytes | bytearray]) -> tuple[bytes | bytearray, ...]:
        if isinstance(buffers, (str, bytes, bytearray)):
            raise TypeError("vectored blocks take an iterable of buffers, not one buffer")
        try:
            result = tuple(buffers)
        except TypeError:
            raise TypeError(
                f"vectored blocks take an iterable of buffers, not {type(buffers).__name__}"
            ) from None
        for buf in result:
            _check_buffer(buf)
        return result

    @RWBlock.buffer.setter
    def buffer(self, buffer: Iterable[bytes | bytearray]) -> None:
        buffers = self._as_tuple(buffer)
        if self._iocb.opcode == IOCBCMD.PREADV:
            for buf in buffers:
                _check_read_target(buf, len(buf))
        self._buffer = buffers
        self._iocb.buf = buffers
        self._iocb.nbytes = len(buffers)


class ReadVBlock(VectorBlock):
    """Reads at ``offset`` into each bytearray of ``buffer_list`` in turn."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        buffer_list: Iterable[bytearray],
        offset: int = 0,
        rw_flags: IOCBRWFlag | int = 0,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        buffers = self._as_tuple(buffer_list)
        for buf in buffers:
            _check_read_target(buf, len(buf))
        super().__init__(
            file, IOCBCMD.PREADV, buffers, offset, rw_flags, priority_class, priority_value, res_fd
        )


class WriteVBlock(VectorBlock):
    """Writes the buffers of ``content_list`` one after another at ``offset``."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        content_list: Iterable[bytes | bytearray],
        offset: int = 0,
        rw_flags: IOCBRWFlag | int = 0,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        super().__init__(
            file,
            IOCBCMD.PWRITEV,
            content_list,
            offset,
            rw_flags,
            priority_class,
            priority_value,
            res_fd,
        )


class NonRWBlock(AIOBlock):
    """A request without a data buffer: fsync, fdsync or poll."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        cmd: IOCBCMD,
        buf: int | None,
        priority_class: int,
        priority_value: int,
        res_fd: int,
    ) -> None:
        super().__init__(file, cmd, 0, priority_class, priority_value, buf, 0, 0, res_fd)


class PollBlock(NonRWBlock):
    """Waits until ``file`` has one of ``event_masks`` (select.EPOLL*; default
    EPOLLIN | EPOLLOUT | EPOLLPRI); completes with the ready mask. Linux 4.19+.

    As in linux_aio, the mask sent to the kernel is the one given here: assigning
    ``event_masks`` later changes the attribute only.
    """

    __slots__ = ("_event_masks",)

    _event_masks: int

    def __init__(
        self,
        file: Any,
        event_masks: int | None = None,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        if event_masks is None:
            event_masks = select.EPOLLIN | select.EPOLLOUT | select.EPOLLPRI
        self._event_masks = operator.index(event_masks)
        super().__init__(
            file, IOCBCMD.POLL, self._event_masks, priority_class, priority_value, res_fd
        )

    @property
    def event_masks(self) -> int:
        masks = self._event_masks
        if masks is _UNSET:
            raise AttributeError(
                "'PollBlock' object has no attribute '_event_masks' (it was made by "
                "change_cmd(); assign .event_masks first)"
            )
        return masks

    @event_masks.setter
    def event_masks(self, new_masks: int) -> None:
        self._event_masks = new_masks


class FsyncBlock(NonRWBlock):
    """Flushes ``file``'s data and metadata (fsync). Linux 4.18+."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        super().__init__(file, IOCBCMD.FSYNC, None, priority_class, priority_value, res_fd)


class FDsyncBlock(NonRWBlock):
    """Flushes ``file``'s data (fdatasync). Linux 4.18+."""

    __slots__ = ()

    def __init__(
        self,
        file: Any,
        priority_class: IOCBPriorityClass = IOCBPriorityClass.NONE,
        priority_value: int = 0,
        res_fd: int = 0,
    ) -> None:
        super().__init__(file, IOCBCMD.FDSYNC, None, priority_class, priority_value, res_fd)


class AIOEvent:
    """One completion: the block that was submitted and the kernel's result."""

    __slots__ = ("_aio_block", "_res", "_res2")

    def __init__(self, aio_block: AIOBlock, response: int, response2: int) -> None:
        self._aio_block = aio_block
        self._res = response
        self._res2 = response2

    @property
    def aio_block(self) -> AIOBlock:
        """The very block object passed to ``submit``."""
        return self._aio_block

    @property
    def buffer(self) -> Any:
        """The block's buffer (a tuple for vectored blocks); None for fsync and poll."""
        if isinstance(self._aio_block, (ReadBlock, WriteBlock, ReadVBlock, WriteVBlock)):
            return self._aio_block.buffer
        return None

    def stripped_buffer(self) -> Any:
        """The buffer without its trailing NUL bytes; None for fsync and poll. Not
        implemented for vectored blocks (NotImplementedError), as in linux_aio."""
        buffer = self.buffer
        if isinstance(buffer, (bytearray, bytes)):
            return buffer.rstrip(b"\0")
        if isinstance(buffer, tuple):
            raise NotImplementedError("Stripping of buffer vector is not implemented yet.")
        return None

    @property
    def response(self) -> int:
        """The kernel's ``res``: bytes transferred, the ready poll mask, 0, or -errno."""
        return self._res

    @property
    def response2(self) -> int:
        return self._res2

    def __repr__(self) -> str:
        return (
            f"<AIOEvent {type(self._aio_block).__name__} response={self._res} "
            f"response2={self._res2}>"
        )


class AIOContext:
    """A kernel AIO context with room for `max_jobs` requests in flight.

    Closing it (``close()``, the ``with`` statement, or garbage collection) waits for
    the requests the kernel cannot cancel, like io_destroy.
    """

    __slots__ = ("_backlog", "_ctx", "_in_flight", "_max_jobs")

    def __init__(self, max_jobs: int) -> None:
        max_jobs = operator.index(max_jobs)
        # linux_aio passed max_jobs as an unsigned int: 0, negative and huge values
        # all reached io_setup, which refused them with EINVAL.
        if not 0 < max_jobs <= 0x7FFF_FFFF:
            raise _einval(f"max_jobs must be between 1 and {0x7FFF_FFFF}, not {max_jobs}")
        self._max_jobs = max_jobs
        # Completions reaped by cancel() for get_events() to hand out.
        self._backlog: list[Any] = []
        # Per block, the ringio ops submitted for it and not yet reaped (a block may
        # be in flight more than once, as an iocb could be).
        self._in_flight: dict[AIOBlock, list[aio.Op]] = {}
        self._ctx = aio.Context(max_jobs)

    @property
    def closed(self) -> bool:
        return self._ctx.closed

    def close(self) -> None:
        """Destroys the context, waiting for in-flight requests. Idempotent."""
        self._ctx.close()
        self._backlog.clear()
        self._in_flight.clear()

    def _check_open(self) -> None:
        if self._ctx.closed:
            # io_submit/io_getevents/io_cancel on a destroyed context: what linux_aio got.
            raise _einval("the AIOContext is closed")

    @staticmethod
    def _check_usable(block: Any) -> None:
        if not isinstance(block, AIOBlock):
            raise TypeError(f"expected an AIOBlock (ReadBlock, ...), not {type(block).__name__}")
        if block._deleted:
            raise ValueError(
                f"{block} can not be used because it has already been transformed into "
                f"another AIOBlock."
            )

    def submit(self, *blocks: AIOBlock) -> int:
        """Submits `blocks` with one io_submit; returns how many the kernel accepted.

        As with io_submit, when the kernel refuses a block after accepting some, the
        count is short and the rest are not submitted; when it refuses the first, the
        OSError is raised.
        """
        for block in blocks:
            self._check_usable(block)
        self._check_open()
        ops = [block._to_op() for block in blocks]
        try:
            submitted = self._ctx.submit(ops)
        except PartialSubmitError as e:
            submitted = e.submitted
        for op in ops[:submitted]:
            self._in_flight.setdefault(op.data, []).append(op)
        return submitted

    def get_events(self, min_jobs: int, max_jobs: int, timeout_ns: int = 0) -> tuple[AIOEvent, ...]:
        """Waits for at least `min_jobs` completions and returns up to `max_jobs`.

        `timeout_ns` <= 0 means no time limit (as in linux_aio); then asking for more
        completions than requests in flight raises ValueError instead of blocking
        forever. With a limit, fewer than `min_jobs` may come back.
        """
        min_jobs = operator.index(min_jobs)
        max_jobs = operator.index(max_jobs)
        timeout_ns = operator.index(timeout_ns)
        if max_jobs < 0:
            raise ValueError(f"Array length must be >= 0, not {max_jobs}")
        self._check_open()
        if not 0 <= min_jobs <= max_jobs:
            raise _einval(
                f"min_jobs ({min_jobs}) is out of range or max_jobs ({max_jobs}) is out of range"
            )
        done = self._backlog[:max_jobs]
        del self._backlog[:max_jobs]
        want_max = max_jobs - len(done)
        if want_max > 0:
            timeout = timeout_ns / 1e9 if timeout_ns > 0 else None
            want_min = max(0, min_jobs - len(done))
            done.extend(self._ctx.get_events(want_min, want_max, timeout))
        return tuple(self._event(c) for c in done)

    def _event(self, completion: Any) -> AIOEvent:
        block: AIOBlock = completion.data
        ops = self._in_flight.get(block)
        if ops is not None:
            ops[:] = [op for op in ops if op is not completion.op]
            if not ops:
                del self._in_flight[block]
        return self._preview(completion)

    def cancel(self, block: AIOBlock) -> AIOEvent:
        """Cancels `block`'s in-flight request and returns its completion.

        The kernel can cancel only POLL requests; for others, or a block not in
        flight, this raises OSError(EINVAL). The kernel also delivers the cancelled
        completion through get_events, and so does this context: a program written
        for the kernel's behaviour (linux_aio raised EINPROGRESS and left the event to
        get_events) finds it there.
        """
        self._check_usable(block)
        self._check_open()
        op = next((o for o in self._in_flight.get(block, ()) if o.state == "in_flight"), None)
        if op is None:
            raise _einval(f"{block} is not in flight on this context")
        try:
            direct = self._ctx.cancel(op)
        except ValueError as e:  # no longer in flight: raced with its completion
            raise _einval(str(e)) from None
        if direct is not None:
            self._backlog.append(direct)
            return self._preview(direct)
        deadline = time.monotonic() + _CANCEL_WAIT
        while True:
            for c in self._backlog:
                if c.op is op:
                    return self._preview(c)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OSError(
                    errno.ETIMEDOUT, f"the kernel did not complete the cancelled request of {block}"
                )
            self._backlog.extend(self._ctx.get_events(1, None, remaining))

    @staticmethod
    def _preview(completion: Any) -> AIOEvent:
        """The AIOEvent for a ringio completion."""
        res = completion.res
        if completion.op.command == "poll" and res == -errno.ECANCELED:
            # ringio reports a cancelled poll as -ECANCELED; the kernel (and so
            # linux_aio) reports an empty ready mask.
            res = 0
        return AIOEvent(completion.data, res, completion.res2)

    def __enter__(self) -> AIOContext:
        return self

    def __exit__(
        self,
        t: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"in_flight={self._ctx.in_flight}"
        return f"<ringio.compat.linux_aio.AIOContext max_jobs={self._max_jobs} {state}>"
