"""The context of ``ringio.compat.linux_aio``: submit, get_events and cancel.

Each ``submit`` turns a block's current request into a fresh immutable
:class:`ringio.aio.Op` whose ``data`` is the block, so every completion leads back to
the very block object that was submitted. The translation refuses what used to be
memory-unsafe in linux_aio (a length beyond the buffer, a read into bytes, a missing
buffer) before the kernel is handed anything.
"""

from __future__ import annotations

import errno
import operator
import time
from types import TracebackType
from typing import Any

from ringio import PartialSubmitError, aio

from ._linux_aio_blocks import AIOBlock, ReadBlock, ReadVBlock, WriteBlock, WriteVBlock
from ._linux_aio_iocb import _check_read_target, _einval
from .linux_aio_bind import IOCBCMD, IOCBFlag

# The kernel's per-op iovec limit (UIO_MAXIOV); more makes io_submit fail with EINVAL.
_UIO_MAXIOV = 1024
# How long cancel() waits for the kernel to deliver a cancelled poll's completion; it
# comes from a kernel workqueue, normally within microseconds.
_CANCEL_WAIT = 10.0


def _to_op(block: AIOBlock) -> aio.Op:
    """A ringio op for one submission of `block`'s current request."""
    iocb = block._iocb
    if iocb.fildes > 0x7FFF_FFFF:
        # What a negative fd (a closed socket's fileno() is -1) became in linux_aio's
        # unsigned field; the kernel refused it the same way.
        raise OSError(errno.EBADF, f"Bad file descriptor (fd {iocb.fildes})")
    common: dict[str, Any] = {
        "priority": iocb.reqprio & 0xFFFF if iocb.flags & IOCBFlag.IOPRIO else None,
        "resfd": iocb.resfd if iocb.flags & IOCBFlag.RESFD else None,
        "data": block,
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
        target = _single_target(block, reading)
        make = aio.pread if reading else aio.pwrite
    else:
        target = _vector_target(block, reading)
        make = aio.preadv if reading else aio.pwritev
    return make(iocb.fildes, target, iocb.offset, rw_flags=iocb.rw_flags, **common)


def _single_target(block: AIOBlock, reading: bool) -> Any:
    buf, nbytes = block._iocb.buf, block._iocb.nbytes
    if buf is None:
        if nbytes == 0:
            # A null buffer of length 0: the kernel transfers nothing and returns 0.
            return bytearray()
        raise ValueError(f"{block} has no buffer (set .buffer before submitting)")
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


def _vector_target(block: AIOBlock, reading: bool) -> list[Any]:
    bufs = block._iocb.buf
    if bufs is None:
        if block._iocb.nbytes == 0:
            return []
        raise ValueError(f"{block} has no buffers (set .buffer before submitting)")
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
        ops = [_to_op(block) for block in blocks]
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
