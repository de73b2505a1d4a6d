"""``pread_many``/``preadinto_many``: many positional reads of one file, a bounded
number of them in flight.

The per-read way to keep a device busy from asyncio is one task per slot of the
queue, each awaiting ``pread`` in turn: every read then costs a future, a
coroutine and a task wake-up (~25k user instructions per read on the uring
engine, about as much CPU as the kernel's side of the read). ``pread_many`` does
what fio does instead: `depth` *lanes*, each with one read in flight, and the
completion of a lane's read starts the lane's next one at once. The lane is the
op's ``data``: the proactor settles it like a future (``done``/``set_result``/
``set_exception``/``cancel``), so the engine's queue, its back-pressure, its
cancellation and its buffer ownership apply unchanged, while no task is woken
per read: one future is awaited for the whole call.

Semantics (the same as ``depth`` tasks calling ``pread``):

* results in the order of the offsets; a read at or past the end of the file gives
  fewer bytes, or none;
* the first error (an ``OSError`` with the fd) is raised at once; the reads still
  in flight are cancelled (in the kernel where the engine can) and no more start;
* cancelling the awaiting task cancels the reads in flight the same way;
* a buffer the kernel is filling stays alive until its completion arrives, whatever
  happens to the call (the op holds it; the engine keeps the op).
"""

from __future__ import annotations

import asyncio
import mmap
import operator
from collections.abc import Iterable, Iterator
from typing import Any

from .. import _core

_pread = _core.pread

_IDLE, _DONE, _CANCELLED = 0, 1, 2


def check_many(n: int, offsets: Iterable[int], depth: int) -> list[int]:
    """Validates the arguments of the ``*_many`` reads; returns the offsets as a
    list of ints."""
    n = operator.index(n)
    depth = operator.index(depth)
    if n < 0:
        raise ValueError(f"negative read size {n}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    if isinstance(offsets, (str, bytes, bytearray)):
        raise TypeError(f"offsets must be an iterable of ints, not {type(offsets).__name__}")
    try:
        offs = list(map(operator.index, offsets))
    except TypeError as e:
        raise TypeError(f"offsets must be an iterable of ints: {e}") from None
    if offs and min(offs) < 0:
        raise ValueError(f"negative offset {min(offs)}")
    return offs


def split_target(buffer: Any, count: int) -> tuple[memoryview, int]:
    """``preadinto_many``'s buffer as a writable byte view, and the size of each of
    its `count` equal parts (one per offset)."""
    try:
        out = memoryview(buffer)
    except TypeError:
        raise TypeError(
            f"a writable bytes-like object is required, not {type(buffer).__name__}"
        ) from None
    if out.readonly:
        raise TypeError(f"preadinto_many() buffer must be writable, not {type(buffer).__name__}")
    if not out.c_contiguous:
        raise ValueError("preadinto_many() buffer must be C-contiguous")
    out = out.cast("B")
    if count == 0:
        return out, 0
    if len(out) % count:
        raise ValueError(
            f"the buffer ({len(out)} bytes) does not split into {count} equal parts, "
            "one per offset"
        )
    return out, len(out) // count


def reads_in_place(
    out: memoryview | None, n: int, offsets: list[int], align: tuple[int, int] | None
) -> bool:
    """Whether each read can go straight into its part of `out`: always for a
    buffered file; for O_DIRECT only when every part and offset is aligned."""
    if out is None:
        return False
    if align is None:
        return True
    a, mem = align
    return (
        n % a == 0
        and n % mem == 0
        and _core.writable_address(out)[0] % mem == 0
        and not any(o % a for o in offsets)
    )


#: The alignment of the bounce buffers O_DIRECT reads and writes go through (a
#: file's, a batch's lanes): at least a page, whatever smaller alignment the device
#: accepts. A 4 KiB read into a buffer that crosses a page boundary is two pages to
#: pin and two segments for the device: on this project's virtio disk 4 KiB reads
#: at depth 32 into buffers 512 bytes past a page ran at 0.81x the page-aligned rate
#: (fio 74k against 91k reads/s, 2026-11-28).
BOUNCE_ALIGN = mmap.PAGESIZE


def lane_buffer(n: int, align: tuple[int, int] | None) -> Any:
    """A lane's buffer: `n` bytes, or for O_DIRECT (`align` = offset alignment,
    memory alignment) the whole blocks any read of `n` bytes can span, on a page or
    more (``BOUNCE_ALIGN``)."""
    if align is None:
        return bytearray(n)
    a = align[0]
    return _core.AlignedBuffer(-(-n // a) * a + a, max(*align, BOUNCE_ALIGN))


def read_span(offset: int, n: int, a: int) -> tuple[int, int, int]:
    """(start, length, skip): the read of whole `a`-byte blocks (O_DIRECT's offset
    alignment; 0 for none) that covers `n` bytes at `offset`, and where those bytes
    begin in it."""
    if not a:
        return offset, n, 0
    start = offset - offset % a
    return start, -(-(offset + n) // a) * a - start, offset - start


def deliver(
    results: list[Any], i: int, got: int, n: int, src: memoryview, skip: int,
    out: memoryview | None,
) -> None:
    """Puts read `i`'s `got` bytes (from `src` at `skip`) where the caller wants them:
    a bytes object, or its part of `out` and the count."""
    if got > n:
        got = n
    if got < 0:
        got = 0
    if out is None:
        results[i] = bytes(src[skip : skip + got]) if got else b""
    else:
        out[i * n : i * n + got] = src[skip : skip + got]
        results[i] = got


class Lane:
    """One read in flight at a time; the proactor settles it as the op's future."""

    __slots__ = ("_index", "_many", "_mv", "_skip", "_state", "op")

    def __init__(self, many: ManyReads, buf: Any) -> None:
        self._many = many
        self._mv = memoryview(buf).cast("B") if buf is not None else None
        self._state = _DONE
        self._index = -1
        self._skip = 0
        self.op: Any = None

    # -- the future protocol the proactors use --------------------------------------
    def done(self) -> bool:
        return self._state != _IDLE

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def cancel(self, msg: Any = None) -> bool:
        if self._state != _IDLE:
            return False
        self._state = _CANCELLED
        many = self._many
        if not many.stopping:
            # Not our own abandon: the engine (closing) cancelled the read.
            many.fail(asyncio.CancelledError("the file engine was closed"))
        return True

    def set_result(self, res: int) -> None:
        self._state = _DONE
        many = self._many
        if many.stopping:
            many.retire(self)  # the call has failed: the result goes nowhere
            return
        try:
            if many.in_place:
                many.results[self._index] = res
            else:
                deliver(many.results, self._index, res - self._skip, many.n, self._mv,
                        self._skip, many.out)  # fmt: skip
            self.start_next()
        except BaseException as e:  # never lost in the engine's completion path
            many.fail(e)

    def set_exception(self, exc: BaseException) -> None:
        self._state = _DONE
        self._many.fail(exc)

    def start_next(self) -> None:
        """Starts the lane's next read, or retires the lane when none is left."""
        many = self._many
        i = None if many.stopping else next(many.todo, None)
        if i is None:
            many.retire(self)
            return
        offset = many.offsets[i]
        n = many.n
        if many.in_place:
            start = offset
            view = many.out[i * n : i * n + n]
        elif many.align:
            # read_span(offset, n, a), inlined: the call cost 4 % of a read's
            # instructions (20.8k -> 21.7k, callgrind).
            a = many.align
            mv = self._mv
            start = offset - offset % a
            length = -(-(offset + n) // a) * a - start
            self._skip = offset - start
            view = mv if length == len(mv) else mv[:length]
        else:
            start = offset
            view = self._mv
        self._index = i
        self._state = _IDLE
        self.op = op = _pread(many.fd, view, start, data=self)
        many.proactor.start(op, watch=False)


class ManyReads:
    """The state of one ``*_many`` read call on a kernel engine's proactor: the
    data of the reads go to bytes objects (`out` None) or into `out`, a part each."""

    def __init__(
        self,
        engine: Any,
        fd: int,
        n: int,
        offsets: list[int],
        out: memoryview | None,
        results: list[Any],
        indices: Iterable[int],
        align: tuple[int, int] | None,
        depth: int,
    ) -> None:
        self.n = n
        self.fd = fd
        self.offsets = offsets
        self.out = out
        self.results = results
        self.todo: Iterator[int] = iter(indices)
        self.align = align[0] if align else 0
        self.in_place = reads_in_place(out, n, offsets, align)
        self.stopping = False
        self.proactor = engine._proactor
        self._waiter: asyncio.Future[list[Any]] = engine._new_future()
        self._lanes = [
            Lane(self, None if self.in_place else lane_buffer(n, align)) for _ in range(depth)
        ]
        self._running = 0

    async def run(self) -> list[Any]:
        try:
            for lane in self._lanes:
                self._running += 1
                lane.start_next()
            if self._running == 0:
                return self.results
            return await self._waiter
        except BaseException:
            self._abandon()
            raise

    def retire(self, lane: Lane) -> None:
        lane.op = None
        self._running -= 1
        if self._running == 0 and not self._waiter.done():
            self._waiter.set_result(self.results)

    def fail(self, exc: BaseException) -> None:
        """The first error ends the call: no more reads start, the awaiter gets it."""
        self.stopping = True
        if not self._waiter.done():
            if isinstance(exc, asyncio.CancelledError):
                self._waiter.cancel(*exc.args)
            else:
                self._waiter.set_exception(exc)

    def _abandon(self) -> None:
        """Cancels the reads in flight (in the kernel where the engine can); their
        buffers stay with their ops until the completions arrive."""
        self.stopping = True
        for lane in self._lanes:
            op = lane.op
            if op is not None and lane._state == _IDLE:
                self.proactor.abandon(op)
            # The engine keeps the op (and the buffer it reads into) until its
            # completion; the lane must not keep it longer (a traceback of the
            # cancel can keep this object alive, and the caller's buffer exported).
            lane.op = None
