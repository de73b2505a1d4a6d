"""The blocks of ``ringio.compat.linux_aio``: one reusable I/O request each.

A block is a mutable description of a request (an emulated iocb, shared by the blocks
that ``change_cmd`` derives from one another, as linux_aio shares its ctypes IOCB). The
context turns its current settings into a ringio op at each submit
(``_linux_aio_context``).
"""

from __future__ import annotations

import operator
import select
from abc import ABCMeta
from collections.abc import Iterable
from typing import Any, ClassVar

from ._linux_aio_iocb import (
    _UNSET,
    _check_buffer,
    _check_read_target,
    _get_fd,
    _int16,
    _Iocb,
    _uint32,
)
from .linux_aio_bind import (
    IOCBCMD,
    IOPRIO_CLASS_SHIFT,
    IOCBFlag,
    IOCBPriorityClass,
    IOCBRWFlag,
    gen_io_priority,
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
