"""The loop's proactor: the one io_uring of a ``ringio.EventLoop`` and what rides it.

``LoopRing`` owns the ring (made by the first wait in the thread that runs the
loop, and made again if the loop moves to another thread), the ops staged for
its next submit, cancellation, and the delivery of completions to their owners:

- the loop's ``sock_*`` ops (``submit_op``), whose ``data`` is a callable;
- file ops of ``ringio.open`` on this loop, through the ``LoopRingProactor``s
  registered with ``add_file_proactor``;
- stream transports and loop-bound ``Watcher``s, whose completions the native
  core (``core``, a ``ringio._core.loop.LoopCore``) handles inside the wait;
- the ``RingSelector``'s polls (data a ``PollTag``), handed back to the selector.

The selector does readiness only: it asks ``wait`` to submit its polls with the
rest and gets the completions back. This is asyncio's proactor loop's shape
(``BaseProactorEventLoop(proactor)``): the loop and the engines below it talk to
one object through a narrow interface (``ringio._ring_hook.LoopRing``).
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Callable
from typing import Any

from .. import _core, uring
from .._engines.many import Lane
from . import _asyncio_compat

__all__ = ["LoopRing", "PollTag"]

# Rings that could not be closed (another thread owns them, see _retire) are kept
# alive here: dropping a ring with ops in flight would let the kernel write into
# freed memory.
_graveyard: list[Any] = []

_get_ident = threading.get_ident


class PollTag:
    """The ``data`` of a selector's poll: which fd, which direction."""

    __slots__ = ("event", "fd")

    def __init__(self, fd: int, event: int) -> None:
        self.fd = fd
        self.event = event


class LoopRing:
    """One io_uring for everything on a ``ringio.EventLoop``.

    It is created lazily with ``single_issuer=True`` (SINGLE_ISSUER + DEFER_TASKRUN
    where the kernel allows it): such a ring only accepts the thread that created
    it, and an event loop is often created in one thread and run in another.
    """

    # What the loop's native iteration reads after every iteration: slots, read at
    # fixed places of the instance (src/loopcore/instance_slots.rs); the rest of
    # the state stays in the instance's __dict__.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_backlog",
        "_cancel_later",
        "_files",
        "_queued",
        "_ring",
    )

    def __init__(self, entries: int = 256) -> None:
        self._entries = entries
        # The native ring (``ringio.uring.Ring``) and the thread it belongs to.
        self._ring: Any = None
        self._ring_thread: int | None = None
        # Ops waiting for the next wait's submit.
        self._queued: list[Any] = []
        # Completions reaped outside a wait (after a cancel), returned by the next one.
        self._backlog: list[Any] = []
        # Cancels requested from a thread that may not touch the ring.
        self._cancel_later: list[Any] = []
        self._closed = False
        # The native half of the loop: stream transports on this ring, and
        # submit + wait + reap in one io_uring_enter per wait.
        self.core: Any = _core.loop.LoopCore(
            (asyncio.Future, Lane), _asyncio_compat.report_callback_error
        )
        # File ops on this ring (``ringio._proactor.LoopRingProactor``): they get the
        # completions of ops whose future the core did not settle, and stage ops
        # that waited for room after each wait.
        self._files: list[Any] = []
        # Waiters of ``Proactor.settled()``, kept here so that they outlive the file
        # engine that made them (a new engine may be made for this loop).
        self.settled_waiters: dict[Any, Any] = {}
        # Called with the new ring (None: retired) whenever it changes: the
        # selector's polls were on the old one.
        self._on_ring_change: Callable[[Any], None] | None = None
        # How many of the ring's in-flight ops are the selector's polls.
        self._polls_armed: Callable[[], int] = lambda: 0

    def _attach_poller(
        self, on_ring_change: Callable[[Any], None], polls_armed: Callable[[], int]
    ) -> None:
        """Called by the ``RingSelector`` that submits its polls here."""
        self._on_ring_change = on_ring_change
        self._polls_armed = polls_armed

    # ----------------------------------------------------------------- the ring

    @property
    def ring(self) -> Any:
        """The ring of the thread running the loop (None before the first wait)."""
        return self._ring

    @property
    def ops_in_flight(self) -> int:
        """Ops in flight on the ring other than the selector's polls (file ops,
        the loop's own ``sock_*`` ops, transports' and Watchers' ops)."""
        ring = self._ring
        if ring is None:
            return 0
        return ring.in_flight - self._polls_armed()

    def owned_ring(self) -> Any:
        """The ring, created (or re-created) for the calling thread."""
        if self._closed:
            raise RuntimeError("the loop's ring is closed")
        tid = _get_ident()
        ring = self._ring
        if ring is not None and self._ring_thread == tid:
            return ring
        if ring is not None:
            self._retire()
        # No eventfd: the loop waits for its ring by entering it, so the kernel need
        # not signal one for each completion (and, with DEFER_TASKRUN, for each
        # completion's task work as it is queued, in the sender's context).
        ring = uring.Ring(self._entries, single_issuer=True, eventfd=False)
        self._ring_thread = tid
        self._cancel_later.clear()
        self._set_ring(ring)
        return ring

    def watcher_ring(self) -> Any:
        """The ring a loop-bound ``ringio.Watcher`` shares: this thread's (made now
        if the loop has not run yet; the loop must then run in this thread)."""
        if self._closed:
            raise RuntimeError("the selector is closed")
        if self._ring is not None and self._ring_thread != _get_ident():
            raise RuntimeError(
                "this event loop's ring belongs to another thread: create the Watcher "
                "in the thread that runs the loop"
            )
        return self.owned_ring()

    def _set_ring(self, ring: Any) -> None:
        # The file proactors read the ring once per op: an attribute of theirs,
        # kept equal to ours here, costs less than a property that reads ours.
        self._ring = ring
        for files in self._files:
            files.use_ring(ring)
        if self._on_ring_change is not None:
            self._on_ring_change(ring)

    def _retire(self) -> None:
        """Closes the current ring; its polls are gone with it, and the ops in
        flight on it complete (cancelled) into the backlog."""
        ring = self._ring
        self._set_ring(None)
        try:
            ring.close()
            done = ring.reap()
        except OSError:
            # Owned by another thread (DEFER_TASKRUN): the kernel refuses us.
            _graveyard.append(ring)
            done = []
        self._backlog.extend(c for c in done if c.data.__class__ is not PollTag)

    # ---------------------------------------------------------------------- ops

    def submit_op(self, op: Any) -> None:
        """Queues a ring op (its ``data`` a callable taking the Completion) for the
        next wait's submit."""
        if not isinstance(op, uring.Op):
            raise TypeError(f"submit_op() takes a ringio.uring op, not {type(op).__name__!r}")
        if not callable(op.data):
            raise TypeError("the op's data must be a callable taking its Completion")
        if self._closed:  # it would never be submitted, nor its callback run
            raise RuntimeError("the loop's ring is closed")
        self._queued.append(op)

    def cancel_op(self, op: Any) -> None:
        """Cancels a queued or in-flight op; its callback still runs with the final
        completion (-ECANCELED, or its result if it won the race)."""
        if not isinstance(op, uring.Op):
            raise TypeError(f"cancel_op() takes a ringio.uring op, not {type(op).__name__!r}")
        try:
            self._queued.remove(op)
        except ValueError:
            pass
        else:
            # Never submitted: complete it as cancelled ourselves.
            op.data(_NotSubmitted(op))
            return
        if self._cancel_in_flight(op):
            self._reap_after_cancel()

    def _cancel_in_flight(self, op: Any) -> bool:
        """Asks the kernel to cancel `op`; True when a cancel was submitted (then
        ``reap_after_cancel`` lets the kernel free it)."""
        if op.state != "in_flight" or self._ring is None:
            return False
        if self._ring_thread != _get_ident():
            self._cancel_later.append(op)
            return False
        try:
            self._ring.cancel(op)
        except ValueError:  # completed meanwhile
            return False
        return True

    def _reap_after_cancel(self) -> None:
        # With DEFER_TASKRUN the cancelled request is only freed (and its file
        # reference dropped) when task work runs, which reap() does.
        self._backlog.extend(self._ring.reap())

    def add_file_proactor(self, proactor: Any) -> None:
        """Adds `proactor` (a ``LoopRingProactor``) to those whose file ops ride
        this ring: after each wait it stages the ops that waited for room, and
        the newest completes the ops whose future the loop core did not settle
        (any of them can: their ``settled()`` waiters live here)."""
        self._files = [p for p in self._files if not p.closed] + [proactor]
        proactor.use_ring(self._ring)

    # ----------------------------------------------------------------- the wait

    def _wait(self, ring: Any, polls: list[Any], timeout: float | None, defer: bool) -> list[Any]:
        """Submits what is queued and `polls` in one ``io_uring_enter`` that also
        waits (up to `timeout` s; None: until something completes; <= 0: only
        reaps), and returns the completions the core did not handle itself, the
        backlog first. `defer`: handles were ready before the wait, so the core
        defers its protocol callbacks behind them (asyncio's order)."""
        if self._cancel_later:
            pending, self._cancel_later = self._cancel_later, []
            for op in pending:
                if op.state == "in_flight":
                    try:
                        ring.cancel(op)
                    except ValueError:
                        pass
        ops = polls
        if self._queued:
            ops, self._queued = self._queued, []
            ops.extend(polls)
        # Transports' sends and receives are pushed by the core, with `ops`, into
        # the same enter; their completions run protocol callbacks in there.
        # A timeout <= 0 (negative included, as selectors take it) only reaps; NaN
        # goes on to the core, which refuses it.
        block = not self._backlog and (timeout is None or not timeout <= 0)
        done = self.core.select(ring, ops, block, timeout if block else None, defer)
        if self._backlog:
            backlog, self._backlog = self._backlog, []
            backlog.extend(done)
            done = backlog
        return done

    def _after_wait(self) -> None:
        """Lets the file proactors stage the ops that waited for room."""
        for files in self._files:
            files.after_select()

    def _complete(self, completions: list[Any]) -> None:
        """Completions of ops other than polls: a callable ``data`` is called; an
        asyncio future (a file op's) goes to the file proactor."""
        futures = []
        for c in completions:
            tag = c.data
            if tag is None:
                continue
            if callable(tag):
                tag(c)
            else:
                futures.append(c)
        if futures and self._files:
            self._files[-1].complete(futures)

    def close(self) -> None:
        """Fails what was never submitted, closes the ring (the kernel cancels what
        is in flight), delivers the final completions, then drops the transports."""
        if self._closed:
            return
        self._closed = True
        queued, self._queued = self._queued, []
        for op in queued:
            op.data(_NotSubmitted(op))
        if self._ring is not None:
            self._retire()
        backlog, self._backlog = self._backlog, []
        self._complete([c for c in backlog if c.data.__class__ is not PollTag])
        # After the ring is closed (the kernel is done with every buffer): drops the
        # transports the loop still held.
        self.core.close_all()


class _NotSubmitted:
    """Stands in for the Completion of an op cancelled before it was submitted."""

    __slots__ = ("data", "op")
    res = -errno.ECANCELED

    def __init__(self, op: Any) -> None:
        self.op = op
        self.data = op.data

    @property
    def error(self) -> OSError:
        return OSError(errno.ECANCELED, "operation cancelled before submission")
