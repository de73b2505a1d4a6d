"""Drives a completion engine from an asyncio loop, with no threads.

The engine (for example ``ringio.aio.Context``) is a kernel queue: ops go in with
``submit`` and come back from ``reap`` once the engine's eventfd (``fileno()``)
becomes readable. This driver queues the ops made during one loop turn and submits
them together in one call at the end of that turn, watches the eventfd with
``loop.add_reader``, and resolves each op's future from its completion.

Except when the kernel is starved: while the ops queued outnumber (or equal) those
in flight, an op is submitted at once with whatever is queued. At queue depth 1
that saves a loop turn per op; when a burst of completions wakes many tasks, the
device gets new work after the first few have run instead of after all of them
(batches of 1, 1, 2, 4, 8, ...), rather than idling while Python processes the
whole burst (measured: O_DIRECT reads at queue depth 32 ran in lock-step batches).

Completions are settled in Rust (``engine.resolve_futures()``): one call per
wake-up resolves every future that is ready, with no Python object per completion.

Cancellation semantics: cancelling the awaiting task cancels the future at once.
An op that was still queued is dropped before it reaches the kernel. An op already
in the kernel stays owned by the engine, buffers included, until its completion
arrives; where the kernel can cancel it (``cancellable``), the driver asks it to:
either from a done-callback on the future (``start(op)``), or, cheaper, from the
awaiting coroutine (``start(op, watch=False)`` then ``abandon(op)`` when the await
raises), which spares a callback per op.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from threading import get_ident as _get_ident
from typing import Any, Protocol

from . import _ring_hook
from ._core import (
    AlignedBuffer,
    Completion,
    Op,
    PartialSubmitError,
    Started,
    pread,
    writable_address,
)
from ._core.uring import STAGE_FULL, STAGE_WAITING


def aligned_in_place(buffer: Any, offset: int, off_align: int, mem_align: int) -> bool:
    """Whether an O_DIRECT read at `offset` may go straight into `buffer`: a
    writable, C-contiguous buffer, not empty, whose address (`mem_align`), length
    and `offset` (`off_align`) are aligned. False for anything else: the caller's
    general path says what is wrong, if anything."""
    if offset.__class__ is not int or offset < 0:
        return False
    try:
        address, n = writable_address(buffer)
    except (TypeError, BufferError):
        return False
    return n > 0 and not (offset % off_align or n % off_align or address % mem_align)


class Engine(Protocol):
    maxevents: int
    in_flight: int

    def submit(self, ops: list[Op]) -> int: ...
    def reap(self) -> list[Completion]: ...
    def resolve_futures(self) -> list[Completion]: ...
    def cancel(self, op: Op) -> Completion | None: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


class Proactor:
    def __init__(
        self,
        engine: Engine,
        loop: asyncio.AbstractEventLoop,
        cancellable: Callable[[Op], bool] = lambda op: False,
    ) -> None:
        self._init_state(engine, loop, cancellable, settled={})
        self._fd = engine.fileno()
        loop.add_reader(self._fd, self._on_completions)

    def _init_state(
        self,
        engine: Any,
        loop: asyncio.AbstractEventLoop,
        cancellable: Callable[[Op], bool],
        settled: dict[asyncio.Future[Any], asyncio.Future[int | None]],
    ) -> None:
        self._engine = engine
        self._loop = loop
        # The loop the ops complete on, to refuse them from another one. `loop` may
        # be a weakref.proxy (the engines'): they name the real loop themselves
        # (``home``).
        self._home: asyncio.AbstractEventLoop | None = None
        if not isinstance(loop, weakref.ProxyType):
            self.home(loop)
        self._cancellable = cancellable
        self._queue: deque[Op] = deque()
        self._flush_scheduled = False
        self._closed = False
        # Waiters for the real result of ops whose own future was cancelled
        # (see settled()); keyed by the op's (cancelled) future.
        self._settled = settled

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def home(self, loop: asyncio.AbstractEventLoop) -> None:
        """Names the real loop behind a weakref.proxy given to the constructor.

        (A strong reference: the loop already references this proactor through its
        reader callback, so the two are garbage together.)"""
        self._home = loop

    def start(self, op: Op, *, watch: bool = True) -> asyncio.Future[Any]:
        """Queues `op` (whose `data` is its future) for this loop turn's submit.

        With `watch`, cancelling the future also cancels the op in the kernel
        (where it can be). ``watch=False`` leaves that to the caller, who awaits
        the future and calls ``abandon(op)`` if the await raises."""
        if self._closed:
            raise ValueError("I/O operation on closed context")
        home = self._home  # check_loop's common case, inline (once per op)
        if home is not None and getattr(home, "_thread_id", None) != _get_ident():
            check_loop(home)
        fut: asyncio.Future[Any] = op.data
        self._queue.append(op)
        if len(self._queue) >= self._engine.in_flight:
            # The kernel has less work than we are holding back (none at all, at
            # queue depth 1): submit now instead of at the end of the loop turn.
            # (A flush already scheduled for this turn stays scheduled, so later
            # ops of the turn do not schedule another.)
            self._submit_queued()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if watch and self._cancellable(op):
            fut.add_done_callback(lambda f: self._cancel_in_kernel(f, op))
        return fut

    def start_direct_read(
        self, fd: int, target: Any, offset: int, off_align: int, mem_align: int,
        new_future: Callable[[], asyncio.Future[int]],
    ) -> Started | None:
        """An O_DIRECT read started at once, queued as ``start(op, watch=False)``
        queues it, and a ``Started`` awaiting its op's future, with no coroutine
        frame (see ``FileEngine.start_direct_read``). `target` is a writable buffer
        to read into in place (the read's count is the result; `offset`, the
        buffer's length and address must be multiples of `off_align`, `off_align`
        and `mem_align`), or ``pread``'s size `n` (the aligned span around the bytes
        is read into a new aligned bounce buffer; the bytes are the result). None,
        with nothing started, where those do not hold, or this thread is not the
        loop's. The awaiter does not cancel the op in the kernel, which does not
        recall an O_DIRECT read once issued (kernel AIO answers EINVAL)."""
        home = self._home
        if self._closed or (home is not None and getattr(home, "_thread_id", None) != _get_ident()):
            return None
        if target.__class__ is int:
            if offset.__class__ is not int or offset < 0:
                return None
            if target <= 0:
                return None
            start = offset - offset % off_align
            try:
                bounce = AlignedBuffer(
                    -(-(offset + target) // off_align) * off_align - start, mem_align
                )
            except (ValueError, MemoryError):
                return None  # too large: the general path raises it when awaited
            fut = self.start(pread(fd, bounce, start, data=new_future()), watch=False)
            return Started(fut, bounce, offset - start, target)
        if not aligned_in_place(target, offset, off_align, mem_align):
            return None
        return Started(self.start(pread(fd, target, offset, data=new_future()), watch=False))

    def abandon(self, op: Op) -> None:
        """The awaiter of `op` (started with ``watch=False``) is gone: cancelled, or
        its coroutine closed. Cancels the future if that has not happened yet (a
        queued op is then never submitted) and asks the kernel to cancel the op."""
        fut = op.data
        if not fut.done():
            try:
                fut.cancel()
            except RuntimeError:
                return  # the loop is closed (a coroutine closed at shutdown)
        if fut.cancelled() and self._cancellable(op):
            self._cancel_in_kernel(fut, op)

    def settled(self, op: Op) -> asyncio.Future[int | None]:
        """After `op`'s future was cancelled: a future of what the kernel really did.

        It resolves, once the op's completion has arrived, to the op's result when
        it succeeded (bytes transferred, poll mask, 0) and to None when the op never
        reached the kernel, was cancelled there, or failed. Callers that keep a file
        position use it to learn how far a cancelled read or write really got.
        """
        waiter: asyncio.Future[int | None] = self._loop.create_future()
        state = op.state
        if state == "in_flight":
            self._settled[op.data] = waiter
        else:  # "idle": dropped before submission; "done": its result is on the op
            res = op.result if state == "done" else None
            waiter.set_result(res if res is not None and res >= 0 else None)
        return waiter

    @property
    def closed(self) -> bool:
        return self._closed

    def queued_on(self, fd: int) -> bool:
        """Whether ops on `fd` (their futures not done) still wait in this
        proactor for room in the kernel queue, not yet in the kernel."""
        return any(op.fd == fd and not op.data.done() for op in self._queue)

    def submit_queued(self) -> None:
        """Hands the kernel the ops waiting for room, as far as it has room."""
        self._submit_queued()

    def _cancel_in_kernel(self, fut: asyncio.Future[Any], op: Op) -> None:
        if fut.cancelled() and op.state == "in_flight" and not self._closed:
            try:
                self._engine.cancel(op)
            except (OSError, ValueError):
                pass  # already completing; the completion still arrives

    def _flush(self) -> None:
        """The end-of-turn callback."""
        self._flush_scheduled = False
        self._submit_queued()

    def _submit_queued(self) -> None:
        queue = self._queue
        while queue and not self._closed:
            room = self._engine.maxevents - self._engine.in_flight
            if room <= 0:
                return  # back-pressure: resumed when completions free room
            batch = []
            while queue and len(batch) < room:
                op = queue.popleft()
                if not op.data.done():  # skip ops cancelled before submission
                    batch.append(op)
            if not batch:
                return
            try:
                self._engine.submit(batch)
            except PartialSubmitError as e:
                self._refused(batch, e.submitted, e)
            except OSError as e:
                self._refused(batch, 0, e)

    def _refused(self, batch: list[Op], submitted: int, error: OSError) -> None:
        rest = batch[submitted + 1 :]
        if error.errno == errno.EAGAIN and self._engine.in_flight > 0:
            # The kernel queue is full: retry once completions have made room.
            self._queue.extendleft(reversed(batch[submitted:]))
            return
        op = batch[submitted]
        if not op.data.done():
            if isinstance(error, PartialSubmitError):
                # Report it to the op's awaiter as the plain OSError it is for that op.
                error = OSError(error.errno, f"{os.strerror(error.errno)} (fd {op.fd})")
                error.fd = op.fd  # type: ignore[attr-defined]
            op.data.set_exception(error)
        self._queue.extendleft(reversed(rest))

    def _on_completions(self) -> None:
        left = self._engine.resolve_futures()
        if left:
            self._resolve(left)
        if self._queue and not self._flush_scheduled:
            self._flush()

    def _resolve(self, completions: list[Completion]) -> None:
        for c in completions:
            fut = c.data
            if fut.done():
                # Its task was cancelled; the engine has released the buffers. Tell
                # whoever asked (settled()) what the kernel really did.
                if self._settled:
                    waiter = self._settled.pop(fut, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(c.res if c.res >= 0 else None)
                continue
            if c.res < 0:
                fut.set_exception(c.error)
            else:
                fut.set_result(c.res)

    def close(self) -> None:
        """Cancels queued ops, closes the engine (which waits for the ops in the
        kernel) and resolves every in-flight future from the engine's last
        completions, so that no awaiter is left waiting."""
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._fd)
        while self._queue:
            fut = self._queue.popleft().data
            if not fut.done():
                fut.cancel()
        self._engine.close()
        self._resolve(self._engine.reap())


def _name(loop: object) -> str:
    return f"<{type(loop).__name__} at {id(loop):#x}>"


def check_loop(home: asyncio.AbstractEventLoop) -> None:
    """Raises the wrong-loop RuntimeError unless `home` is the running loop.

    Where the loop records the thread running it (asyncio's ``_thread_id``, None
    while it is not running) one comparison settles the common case: only one loop
    runs in a thread at a time, so the home loop running in this thread is the
    running loop. (``asyncio._get_running_loop()`` costs ~4x more, per op.)"""
    if getattr(home, "_thread_id", None) != _get_ident():
        running = asyncio._get_running_loop()
        if running is not home:
            raise wrong_loop(home, running)


def wrong_loop(
    home: asyncio.AbstractEventLoop | None, running: asyncio.AbstractEventLoop | None
) -> RuntimeError:
    """The error for a file (or context) used from another loop than its own."""
    where = "outside any running event loop" if running is None else f"on {_name(running)}"
    return RuntimeError(
        f"this ringio file belongs to the event loop it was opened on ({_name(home)}) "
        f"and was used {where}: its operations complete on their own loop only. "
        "Use it from that loop, or open it again in the loop that uses it (for "
        "example inside the coroutine given to asyncio.run())"
    )


class StagingProactor(Proactor):
    """The proactor of the uring engine on a ring of its own (any loop but
    ``ringio.EventLoop``): the same policy as the base class, with the queue in
    the ring's SQ instead of a Python deque.

    An op is staged into the SQ when it starts (``Ring._stage``, which enters
    the kernel at once while the kernel is short of work: the base class's rule,
    decided in Rust with no call back per op); what still waits is submitted by one
    flush at the end of the loop turn (``Ring._submit_staged``). Ops find the deque
    only when the CQ is full; they are staged after the next wake-up.
    """

    def __init__(
        self,
        engine: Any,
        loop: asyncio.AbstractEventLoop,
        cancellable: Callable[[Op], bool] = lambda op: False,
    ) -> None:
        super().__init__(engine, loop, cancellable)
        # The ring ops are staged into (None: none to stage into now). An attribute,
        # read once per op; for LoopRingProactor, its selector keeps it equal to
        # the selector's own ring (``use_ring``).
        self._stage_ring = engine

    def start(self, op: Op, *, watch: bool = True) -> asyncio.Future[Any]:
        if self._closed:
            raise ValueError("I/O operation on closed context")
        home = self._home  # check_loop's common case, inline (once per op)
        if home is not None and getattr(home, "_thread_id", None) != _get_ident():
            check_loop(home)
        fut: asyncio.Future[Any] = op.data
        ring = self._stage_ring
        if ring is None:
            raise RuntimeError("the event loop's ring is not running")
        if self._queue:
            self._queue.append(op)  # behind those already waiting for room
        else:
            try:
                where = ring._stage(op)
            except OSError as e:
                if e.errno == errno.EEXIST:
                    # SINGLE_ISSUER: the loop now runs in another thread than the
                    # one that made this ring. Nothing was staged.
                    raise RuntimeError(
                        f"this ringio file's io_uring ring belongs to the thread that "
                        f"opened the file, and its event loop {self._home_repr()} now "
                        f"runs in another thread ({threading.current_thread().name}): "
                        "open it again in this thread (a ring made with SINGLE_ISSUER "
                        "works only in its own thread)"
                    ) from None
                self._refused([op], 0, e)
            else:
                if where == STAGE_FULL:
                    self._queue.append(op)  # the CQ is full: after a wake-up
                elif where == STAGE_WAITING and not self._flush_scheduled:
                    self._flush_scheduled = True
                    self._loop.call_soon(self._flush)
        if watch and self._cancellable(op):
            fut.add_done_callback(lambda f: self._cancel_in_kernel(f, op))
        return fut

    def start_direct_read(
        self, fd: int, target: Any, offset: int, off_align: int, mem_align: int,
        new_future: Callable[[], asyncio.Future[int]],
    ) -> Started | None:
        # Staged by the ring in one native call (the checks, the op, its future, a
        # bounce buffer), as start() would stage it: from the loop's thread, with
        # nothing waiting for room.
        ring = self._stage_ring
        home = self._home
        if (
            ring is None
            or self._queue
            or self._closed
            or (home is not None and getattr(home, "_thread_id", None) != _get_ident())
        ):
            return None
        stage = ring._stage_pread_bytes if target.__class__ is int else ring._stage_pread_in_place
        try:
            started = stage(fd, target, offset, off_align, mem_align, new_future)
        except (OSError, ValueError, MemoryError):
            # Nothing was staged: the general path reports it when awaited.
            return None
        if started is not None and not self._flush_scheduled and ring._sq_waiting:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return started

    def _home_repr(self) -> str:
        return _name(self._home)

    # The base class's _flush (end of turn) and _on_completions (after a wake-up)
    # both come here: stage what waited for room, then submit what the SQ holds.
    def _submit_queued(self) -> None:
        ring = self._stage_ring
        if self._closed or ring is None:
            return
        queue = self._queue
        while queue and not self._closed:
            op = queue[0]
            if op.data.done():  # cancelled before it was staged
                queue.popleft()
                continue
            try:
                where = ring._stage(op)
            except OSError as e:
                queue.popleft()
                op.data.set_exception(e)
                continue
            if where == STAGE_FULL:
                break  # the CQ is full again: after the next wake-up
            queue.popleft()
        self._submit_staged(ring)

    def _submit_staged(self, ring: Any) -> None:
        try:
            ring._submit_staged()
        except OSError:
            pass  # the SQEs stay queued; the next enter submits them or says why


class LoopRingProactor(StagingProactor):
    """The proactor of file ops on ``ringio.EventLoop``: they ride the loop's own ring.

    Staging as in ``StagingProactor``, into the loop's ring (its ``LoopRing``, made
    again if the loop moves to another thread), with the loop's next ``select()``
    as the flush: it submits what waits in the same ``io_uring_enter`` that waits,
    and settles the futures from Rust when the completions come back. So there is
    no eventfd, no reader callback and no end-of-turn callback: one syscall per
    loop iteration for everything. Completions the core left alone (a future
    already cancelled, or completions reaped after a cancel or at close) come back
    through ``LoopRing.add_file_proactor`` to ``complete``, which also answers
    ``settled()``; the loop's ring keeps the ``settled()`` waiters, so that an engine
    made again for the same loop still answers those of the one before it.

    Back-pressure: ops the CQ has no room for wait here and are staged after the
    next select. Cancellation is the base class's: the ring's async cancel, the
    op's buffers owned by the ring until its completion arrives.
    """

    def __init__(
        self,
        loop_ring: _ring_hook.LoopRing,
        loop: asyncio.AbstractEventLoop,
        cancellable: Callable[[Op], bool] = lambda op: False,
    ) -> None:
        self._init_state(_SharedRing(loop_ring), loop, cancellable, loop_ring.settled_waiters)
        # The loop's select is the flush and always comes: none is ever scheduled.
        self._flush_scheduled = True
        loop_ring.add_file_proactor(self)

    @property
    def ring(self) -> _SharedRing:
        """The loop's ring, as the engine's kernel queue (``in_flight``, ...)."""
        return self._engine

    def _submit_staged(self, ring: Any) -> None:
        pass  # the select that follows submits them

    def use_ring(self, ring: Any) -> None:
        """Called by the selector whenever its ring changes (None: it has none)."""
        self._stage_ring = ring

    def complete(self, completions: list[Completion]) -> None:
        """Called by the selector with completions of this proactor's ops whose
        future the loop core did not settle."""
        self._resolve(completions)

    def after_select(self) -> None:
        """Called by the selector after each select: stages what waited for room."""
        if self._queue and not self._closed:
            self._submit_queued()

    def _resolve(self, completions: list[Completion]) -> None:
        if self._loop.is_closed():
            # Final completions of the loop's close (the ring's shutdown): nobody
            # can await these futures any more, and settling one would schedule
            # its callbacks on the closed loop. The buffers are released already.
            return
        super()._resolve(completions)

    def close(self) -> None:
        """Cancels the ops still waiting for room. Those already on the ring are
        the loop's: they complete, and their futures are settled, as the loop runs
        (and are cancelled by the kernel when the loop closes)."""
        if self._closed:
            return
        self._closed = True
        while self._queue:
            fut = self._queue.popleft().data
            if not fut.done():
                fut.cancel()


class _SharedRing:
    """The loop's ring as the file engine's kernel queue: what the base class and
    the engine ask of it besides staging (``in_flight``, ``cancel``, ``close``)."""

    def __init__(self, loop_ring: _ring_hook.LoopRing) -> None:
        self._loop_ring = loop_ring

    @property
    def in_flight(self) -> int:
        """Ops in flight on the ring other than the selector's polls (file ops,
        and the loop's own ``sock_*`` ops, rare: those try the syscall first)."""
        return self._loop_ring.ops_in_flight

    def cancel(self, op: Op) -> Completion | None:
        self._loop_ring.cancel_op(op)
        return None

    def close(self) -> None:
        """Nothing to do: the ring is the loop's, closed with the loop."""
