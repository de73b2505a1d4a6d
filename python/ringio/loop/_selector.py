"""A `selectors.BaseSelector` whose readiness comes from io_uring one-shot polls.

Every registered fd gets at most one in-flight ``POLL_ADD`` per direction (read,
write). ``select()`` arms the polls that are missing, in the same ``io_uring_enter``
as any other queued op, waits for completions, and reports the fds whose poll
completed. A completed poll is re-armed at the next ``select()`` only if the fd is
still registered for that direction, so a callback that removes its reader costs
nothing more.

Why per-direction polls instead of one poll with the combined mask: adding a writer
to an fd that already has a reader does not have to cancel and re-arm the reader's
poll (a cancel is a syscall), and a poll left behind by ``remove_writer`` simply
completes once and is dropped.

The selector also carries arbitrary ring ops for the event loop (``submit_op``):
their completions are dispatched to the callable stored as the op's ``data``
while ``select()`` runs, which is how the loop's proactor-style ``sock_*``
coroutines resolve their futures.
"""

from __future__ import annotations

import asyncio
import errno
import selectors
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .. import _core, uring
from .._engines.many import Lane
from . import _asyncio_compat

EVENT_READ = selectors.EVENT_READ
EVENT_WRITE = selectors.EVENT_WRITE

# poll(2) masks: a read poll also wakes on POLLPRI (out-of-band data, as epoll's
# EPOLLIN users expect from select()); POLLERR/POLLHUP are always reported.
_POLLIN = 0x001
_POLLPRI = 0x002
_POLLOUT = 0x004
_READ_MASK = _POLLIN | _POLLPRI
_WRITE_MASK = _POLLOUT

# Rings that could not be closed (another thread owns them, see _retire_ring) are
# kept alive here: dropping a ring with ops in flight would let the kernel write
# into freed memory.
_graveyard: list[Any] = []


class _PollTag:
    """The ``data`` of a poll op: which fd and which direction it watches."""

    __slots__ = ("event", "fd")

    def __init__(self, fd: int, event: int) -> None:
        self.fd = fd
        self.event = event


class _SelectorMapping(Mapping[Any, selectors.SelectorKey]):
    """The read-only fileobj -> key view that `get_map()` returns."""

    def __init__(self, selector: RingSelector) -> None:
        self._selector = selector

    def __len__(self) -> int:
        return len(self._selector._fd_to_key)

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        fd = self._selector._fileobj_lookup(fileobj)
        try:
            return self._selector._fd_to_key[fd]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    def __iter__(self):  # type: ignore[override]
        return iter(self._selector._fd_to_key)


def _fileobj_to_fd(fileobj: Any) -> int:
    if isinstance(fileobj, int):
        fd = fileobj
    else:
        try:
            fd = int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError):
            raise ValueError(f"Invalid file object: {fileobj!r}") from None
    if fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd}")
    return fd


# select() calls made by all selectors of the process (a cheap counter that lets
# tests prove the ring is the one being waited on). Not a class attribute: writing
# one on every select() invalidated the class's attribute cache, so every method and
# attribute lookup on a selector missed it (~0.5 us per loop iteration).
_SELECTS = [0]
_get_ident = threading.get_ident


def select_count() -> int:
    """Waits on the ring by all RingSelectors of the process so far: their select()
    calls and the loop's native iterations."""
    return _SELECTS[0] + _core.LoopCore.iterations()


class RingSelector(selectors.BaseSelector):
    """A selector on io_uring: one-shot ``POLL_ADD`` per fd and direction.

    The ring is created lazily by the first ``select()`` in the thread that runs the
    loop, with ``single_issuer=True`` (SINGLE_ISSUER + DEFER_TASKRUN where the kernel
    allows it): such a ring only accepts the thread that created it, and an event
    loop is often created in one thread and run in another.
    """

    # The owning loop's ready deque (EventLoop sets it): see select().
    _loop_ready: Any = None

    def __init__(self, entries: int = 256) -> None:
        self._entries = entries
        self._fd_to_key: dict[int, selectors.SelectorKey] = {}
        self._map = _SelectorMapping(self)
        self._ring: Any = None
        self._ring_thread: int | None = None
        # fd -> the in-flight poll op of that direction.
        self._armed_r: dict[int, Any] = {}
        self._armed_w: dict[int, Any] = {}
        # fds that may need a poll armed at the next select().
        self._to_arm: set[int] = set()
        # Non-poll ops waiting for the next select()'s submit.
        self._queued: list[Any] = []
        # Completions reaped outside select() (after a cancel), handled at the next one.
        self._backlog: list[Any] = []
        # Cancels requested from a thread that may not touch the ring.
        self._cancel_later: list[Any] = []
        self._closed = False
        # The native half of the loop: stream transports on this ring, and
        # submit + wait + reap in one io_uring_enter per select().
        self._core: Any = _core.LoopCore(
            (asyncio.Future, Lane), _asyncio_compat.report_callback_error
        )
        # File ops on this ring (``ringio._proactor.LoopRingProactor``): gets the
        # completions of ops whose future the core did not settle, and stages ops
        # that waited for room after each select.
        self._files: list[Any] = []
        # Waiters of ``Proactor.settled()``, kept here so that they outlive the
        # file engine that made them (a new engine may be made for this loop).
        self.settled_waiters: dict[Any, Any] = {}

    # ------------------------------------------------------------- registration

    def _fileobj_lookup(self, fileobj: Any) -> int:
        """The fd of `fileobj`; a closed file object is looked up among the keys
        (as selectors' own implementations do) so it can still be unregistered."""
        try:
            return _fileobj_to_fd(fileobj)
        except ValueError:
            for key in self._fd_to_key.values():
                if key.fileobj is fileobj:
                    return key.fd
            raise

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if (not events) or (events & ~(EVENT_READ | EVENT_WRITE)):
            raise ValueError(f"Invalid events: {events!r}")
        if self._closed:
            raise RuntimeError("the selector is closed")
        key = selectors.SelectorKey(fileobj, self._fileobj_lookup(fileobj), events, data)
        if key.fd in self._fd_to_key:
            raise KeyError(f"{fileobj!r} (FD {key.fd}) is already registered")
        self._fd_to_key[key.fd] = key
        self._to_arm.add(key.fd)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        try:
            key = self._fd_to_key.pop(self._fileobj_lookup(fileobj))
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        self._to_arm.discard(key.fd)
        # The polls hold a reference to the file: the fd is usually closed right
        # after this, and the socket (and its port) would stay alive until they
        # complete. Cancel them now and reap, so the kernel drops the reference.
        cancelled = False
        for armed in (self._armed_r, self._armed_w):
            op = armed.pop(key.fd, None)
            if op is not None:
                cancelled |= self._cancel(op)
        if cancelled:
            self._reap_after_cancel()
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        try:
            key = self._fd_to_key[self._fileobj_lookup(fileobj)]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        if (not events) or (events & ~(EVENT_READ | EVENT_WRITE)):
            raise ValueError(f"Invalid events: {events!r}")
        if events != key.events or data is not key.data:
            # In place: a direction that was dropped keeps its poll armed; it
            # completes once and is then forgotten (cheaper than a cancel, and the
            # poll is reused if the direction comes back first).
            key = key._replace(events=events, data=data)
            self._fd_to_key[key.fd] = key
            self._to_arm.add(key.fd)
        return key

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._map

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        try:
            return self._fd_to_key[self._fileobj_lookup(fileobj)]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    # ---------------------------------------------------------------- the ring

    def _owned_ring(self) -> Any:
        """The ring, created (or re-created) for the calling thread."""
        tid = _get_ident()
        ring = self._ring
        if ring is not None and self._ring_thread == tid:
            return ring
        if ring is not None:
            self._retire_ring()
        ring = uring.Ring(self._entries, single_issuer=True)
        self._set_ring(ring)
        self._ring_thread = tid
        self._cancel_later.clear()
        # Every registered fd needs its polls again on the new ring.
        self._to_arm.update(self._fd_to_key)
        return ring

    def watcher_ring(self) -> Any:
        """The ring a loop-bound ``ringio.Watcher`` shares: this thread's (made now
        if the loop has not run yet; the loop must then run in this thread)."""
        if self._closed:
            raise RuntimeError("the selector is closed")
        if self._ring is not None and self._ring_thread != threading.get_ident():
            raise RuntimeError(
                "this event loop's ring belongs to another thread: create the Watcher "
                "in the thread that runs the loop"
            )
        return self._owned_ring()

    def _set_ring(self, ring: Any) -> None:
        # The file proactors read the ring once per op: an attribute of theirs,
        # kept equal to ours here, costs less than a property that reads ours.
        self._ring = ring
        for files in self._files:
            files.use_ring(ring)

    def _retire_ring(self) -> None:
        """Closes the current ring; its polls are gone with it."""
        ring = self._ring
        self._set_ring(None)
        self._armed_r.clear()
        self._armed_w.clear()
        try:
            ring.close()
            done = ring.reap()
        except OSError:
            # Owned by another thread (DEFER_TASKRUN): the kernel refuses us.
            _graveyard.append(ring)
            done = []
        # Fail the proactor-style ops that were in flight on it.
        self._backlog.extend(c for c in done if not isinstance(c.data, _PollTag))

    def _cancel(self, op: Any) -> bool:
        """Asks the kernel to cancel `op`; True when a cancel was submitted."""
        if op.state != "in_flight" or self._ring is None:
            return False
        if self._ring_thread != threading.get_ident():
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

    def submit_op(self, op: Any) -> None:
        """Queues a ring op (its ``data`` a callable taking the Completion) for the
        next select()'s submit."""
        if not isinstance(op, uring.Op):
            raise TypeError(f"submit_op() takes a ringio.uring op, not {type(op).__name__!r}")
        if not callable(op.data):
            raise TypeError("the op's data must be a callable taking its Completion")
        if self._closed:  # it would never be submitted, nor its callback run
            raise RuntimeError("the selector is closed")
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
        if self._cancel(op):
            self._reap_after_cancel()

    def add_file_proactor(self, proactor: Any) -> None:
        """Adds `proactor` (a ``LoopRingProactor``) to those whose file ops ride
        this ring: after each select it stages the ops that waited for room, and
        the newest completes the ops whose future the loop core did not settle
        (any of them can: their ``settled()`` waiters live here)."""
        self._files = [p for p in self._files if not p.closed] + [proactor]
        proactor.use_ring(self._ring)

    def _complete_other(self, completions: list[Any]) -> None:
        """Completions of non-poll ops: a callable ``data`` is called; an asyncio
        future (a file op's) goes to the file proactor."""
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

    @property
    def polls_armed(self) -> int:
        """The polls of registered fds now on the ring."""
        return len(self._armed_r) + len(self._armed_w)

    @property
    def ring(self) -> Any:
        """The ring of the thread running the loop (None before the first select)."""
        return self._ring

    # ------------------------------------------------------------------ select

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._closed:
            raise RuntimeError("the selector is closed")
        ring = self._ring
        if ring is None or self._ring_thread != _get_ident():
            ring = self._owned_ring()
        _SELECTS[0] += 1
        if self._cancel_later:
            pending, self._cancel_later = self._cancel_later, []
            for op in pending:
                if op.state == "in_flight":
                    try:
                        ring.cancel(op)
                    except ValueError:
                        pass
        ops: list[Any] = []
        if self._queued:
            ops, self._queued = self._queued, ops
        if self._to_arm:
            fd_to_key = self._fd_to_key
            armed_r = self._armed_r
            armed_w = self._armed_w
            for fd in self._to_arm:
                key = fd_to_key.get(fd)
                if key is None:
                    continue
                if key.events & EVENT_READ and fd not in armed_r:
                    op = uring.poll(fd, _READ_MASK, data=_PollTag(fd, EVENT_READ))
                    armed_r[fd] = op
                    ops.append(op)
                if key.events & EVENT_WRITE and fd not in armed_w:
                    op = uring.poll(fd, _WRITE_MASK, data=_PollTag(fd, EVENT_WRITE))
                    armed_w[fd] = op
                    ops.append(op)
            self._to_arm.clear()
        # Transports' sends and receives are pushed by the core, with `ops`, into
        # the same enter; their completions run protocol callbacks in there.
        # A timeout <= 0 (negative included, as selectors take it) only reaps; NaN
        # goes on to the core, which refuses it.
        block = not self._backlog and (timeout is None or not timeout <= 0)
        # Handles already ready (the loop's _ready, set by EventLoop): the core
        # defers its protocol callbacks to a handle queued behind them, as asyncio
        # queues reader handles after them (EventLoop._process_events queues it).
        done = self._core.select(
            ring, ops, block, timeout if block else None, bool(self._loop_ready)
        )
        if self._backlog:
            backlog, self._backlog = self._backlog, []
            backlog.extend(done)
            done = backlog
        # (Nothing from the Driver is the common case: transports' completions are
        # handled inside the core.)
        ready = self._dispatch(done) if done else []
        if self._files:
            self._after_select()
        return ready

    def _after_select(self) -> None:
        for files in self._files:
            files.after_select()

    def _dispatch(self, done: list[Any]) -> list[tuple[selectors.SelectorKey, int]]:
        ready: dict[int, int] = {}
        fd_to_key = self._fd_to_key
        other = None
        for c in done:
            tag = c.data
            if tag.__class__ is not _PollTag:
                if other is None:
                    other = [c]
                else:
                    other.append(c)
                continue
            fd = tag.fd
            armed = self._armed_r if tag.event == EVENT_READ else self._armed_w
            if armed.get(fd) is not c.op:
                continue  # a poll cancelled by unregister (or of a retired ring)
            del armed[fd]
            key = fd_to_key.get(fd)
            if key is None or not key.events & tag.event:
                continue  # the direction was dropped while the poll was armed
            res = c.res
            if res < 0:
                if res == -errno.EBADF:
                    # The fd was closed while registered. epoll forgets such fds
                    # silently; do the same rather than spin on re-arming.
                    continue
                if res != -errno.ECANCELED:
                    # Let the callback run into the error itself.
                    ready[fd] = ready.get(fd, 0) | tag.event
                self._to_arm.add(fd)
                continue
            ready[fd] = ready.get(fd, 0) | tag.event
            self._to_arm.add(fd)
        if other is not None:
            self._complete_other(other)
        return [(fd_to_key[fd], ev) for fd, ev in ready.items() if fd in fd_to_key]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        queued, self._queued = self._queued, []
        for op in queued:
            op.data(_NotSubmitted(op))
        if self._ring is not None:
            self._retire_ring()
        backlog, self._backlog = self._backlog, []
        self._complete_other([c for c in backlog if not isinstance(c.data, _PollTag)])
        self._fd_to_key.clear()
        self._to_arm.clear()
        # After the ring is closed (the kernel is done with every buffer): drops the
        # transports the loop still held.
        self._core.close_all()


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


OpCallback = Callable[[Any], None]
