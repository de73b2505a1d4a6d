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

The selector does readiness only. The ring, the other ops on it and their
completions belong to the loop's ``LoopRing`` (``_ring.py``): ``select()`` hands it
the polls to submit with everything else, and gets back the completions the
native core did not handle; the polls' are the selector's, the rest go back to
the ``LoopRing``.
"""

from __future__ import annotations

import errno
import selectors
from collections.abc import Mapping
from typing import Any

from .. import _core, uring
from ._ring import LoopRing, PollTag

EVENT_READ = selectors.EVENT_READ
EVENT_WRITE = selectors.EVENT_WRITE

# poll(2) masks: a read poll also wakes on POLLPRI (out-of-band data, as epoll's
# EPOLLIN users expect from select()); POLLERR/POLLHUP are always reported.
_POLLIN = 0x001
_POLLPRI = 0x002
_POLLOUT = 0x004
_READ_MASK = _POLLIN | _POLLPRI
_WRITE_MASK = _POLLOUT


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


def select_count() -> int:
    """Waits on the ring by all RingSelectors of the process so far: their select()
    calls and the loop's native iterations."""
    return _SELECTS[0] + _core.loop.LoopCore.iterations()


class RingSelector(selectors.BaseSelector):
    """A selector on io_uring: one-shot ``POLL_ADD`` per fd and direction, on the
    loop's ``LoopRing`` (made here when none is given).

    The ring is created lazily by the first ``select()`` in the thread that runs the
    loop (see ``LoopRing``).
    """

    # What the loop's native iteration reads after every iteration: a slot, read
    # at a fixed place of the instance (src/loopcore/instance_slots.rs).
    __slots__ = ("_to_arm",)

    # The owning loop's ready deque (EventLoop sets it): see select().
    _loop_ready: Any = None

    def __init__(self, entries: int = 256, *, loop_ring: LoopRing | None = None) -> None:
        self.loop_ring = loop_ring if loop_ring is not None else LoopRing(entries)
        self.loop_ring._attach_poller(self._ring_changed, self._polls_armed)
        self._fd_to_key: dict[int, selectors.SelectorKey] = {}
        self._map = _SelectorMapping(self)
        # fd -> the in-flight poll op of that direction.
        self._armed_r: dict[int, Any] = {}
        self._armed_w: dict[int, Any] = {}
        # fds that may need a poll armed at the next select().
        self._to_arm: set[int] = set()
        self._closed = False

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
                cancelled |= self.loop_ring._cancel_in_flight(op)
        if cancelled:
            self.loop_ring._reap_after_cancel()
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

    def _ring_changed(self, ring: Any) -> None:
        # The polls were on the old ring (closed with it): every registered fd
        # needs its polls again on the new one.
        self._armed_r.clear()
        self._armed_w.clear()
        if ring is not None:
            self._to_arm.update(self._fd_to_key)

    def _polls_armed(self) -> int:
        return len(self._armed_r) + len(self._armed_w)

    @property
    def polls_armed(self) -> int:
        """The polls of registered fds now on the ring."""
        return self._polls_armed()

    # ------------------------------------------------------------------ select

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._closed:
            raise RuntimeError("the selector is closed")
        loop_ring = self.loop_ring
        ring = loop_ring.owned_ring()
        _SELECTS[0] += 1
        polls: list[Any] = []
        if self._to_arm:
            fd_to_key = self._fd_to_key
            armed_r = self._armed_r
            armed_w = self._armed_w
            for fd in self._to_arm:
                key = fd_to_key.get(fd)
                if key is None:
                    continue
                if key.events & EVENT_READ and fd not in armed_r:
                    op = uring.poll(fd, _READ_MASK, data=PollTag(fd, EVENT_READ))
                    armed_r[fd] = op
                    polls.append(op)
                if key.events & EVENT_WRITE and fd not in armed_w:
                    op = uring.poll(fd, _WRITE_MASK, data=PollTag(fd, EVENT_WRITE))
                    armed_w[fd] = op
                    polls.append(op)
            self._to_arm.clear()
        # Handles already ready (the loop's _ready, set by EventLoop): the core
        # defers its protocol callbacks to a handle queued behind them, as asyncio
        # queues reader handles after them (EventLoop._process_events queues it).
        done = loop_ring._wait(ring, polls, timeout, bool(self._loop_ready))
        # (Nothing but polls is the common case: transports' completions are
        # handled inside the core.)
        ready = self._dispatch(done) if done else []
        if loop_ring._files:
            loop_ring._after_wait()
        return ready

    def _dispatch(self, done: list[Any]) -> list[tuple[selectors.SelectorKey, int]]:
        """The fds whose polls in `done` completed; the other completions go to
        the ``LoopRing``."""
        ready: dict[int, int] = {}
        fd_to_key = self._fd_to_key
        other = None
        for c in done:
            tag = c.data
            if tag.__class__ is not PollTag:
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
            self.loop_ring._complete(other)
        return [(fd_to_key[fd], ev) for fd, ev in ready.items() if fd in fd_to_key]

    def close(self) -> None:
        """Closes the selector and its ``LoopRing`` (the loop closes it)."""
        if self._closed:
            return
        self._closed = True
        self.loop_ring.close()
        self._fd_to_key.clear()
        self._to_arm.clear()
