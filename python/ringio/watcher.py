"""Proactor networking on io_uring: ``ringio.Watcher``, after github.com/xtaci/gaio.

You submit operations on sockets (``read``, ``write``, ``accept``, ``connect``, ...);
each completes exactly once, and its :class:`OpResult` comes back from
:meth:`Watcher.wait_io` (blocking, GIL released) or :meth:`Watcher.wait_io_async`
(asyncio). Created while a ``ringio.EventLoop`` runs in the thread, a Watcher shares
that loop's ring (``loop=``). See ``docs/watcher.md`` for the design and the rules.

Deadlines are **absolute** ``time.monotonic()`` values (gaio's are absolute times too):
``watcher.read_timeout(ctx, sock, buf, time.monotonic() + 5)``.
"""

from __future__ import annotations

import asyncio
import errno
import io
import socket
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

from . import _ring_hook
from ._core.net import (
    OP_ACCEPT,
    OP_CONNECT,
    OP_READ,
    OP_WRITE,
    ConnFreedError,
    OpResult,
    RingBuffer,
    WatcherClosedError,
    WatcherCore,
)

__all__ = [
    "OP_ACCEPT",
    "OP_CONNECT",
    "OP_READ",
    "OP_WRITE",
    "Conn",
    "ConnFreedError",
    "OpResult",
    "RingBuffer",
    "Watcher",
    "WatcherClosedError",
]

_INET = (socket.AF_INET, socket.AF_INET6)


class _ConnRef(weakref.ref):  # type: ignore[type-arg]
    """The watcher's weak reference to a user's socket, carrying its connection id:
    when the user forgets the socket, the callback frees the connection."""

    __slots__ = ("cid", "key")

    cid: int
    key: int


class Conn:
    """A connection accepted with ``accept(..., direct=True)``: it lives only in the
    Watcher's ring as a direct descriptor (no fd in the process, so no
    RLIMIT_NOFILE slot). Pass it to the Watcher's ops and to ``free``; it has no
    socket methods. Freed when collected, like a forgotten socket."""

    __slots__ = ("__weakref__", "_cid")

    def __init__(self, cid: int) -> None:
        self._cid = cid

    def __repr__(self) -> str:
        return f"<ringio.watcher.Conn {self._cid:#x}>"


class Watcher:
    """A completion-based socket I/O watcher with its own io_uring.

    ``bufsize`` is the size of each internal receive buffer used by reads without a
    buffer (``buf=None``), ``nbufs`` how many there are (a power of two): together
    the provided-buffer ring the kernel receives into. The memory is reserved, not
    touched, until data arrives.

    Delegation: once an op is submitted on a socket, the Watcher owns the socket's
    I/O (it keeps a private dup of the fd); socket options set before stay. Calling
    ``sock.recv``/``sock.send`` yourself afterwards is a misuse (bytes would be
    split between you and the Watcher). A socket you forget (no reference left and
    no op pending) is freed when it is collected.

    A Watcher belongs to the thread that created it (its ring is SINGLE_ISSUER);
    run one Watcher per thread for several cores.

    ``loop``: which ring the Watcher runs on. ``None`` (the default): the ring of the
    ``ringio.EventLoop`` running in this thread if there is one, else a ring of its
    own. A ``ringio.EventLoop``: that loop's ring (the loop must run in this thread).
    ``True``: the running ``ringio.EventLoop``'s ring, or ``RuntimeError``.
    ``False``: always a ring of its own. On a loop's ring the Watcher's operations
    are submitted and completed by the loop's own ``io_uring_enter`` (no eventfd, no
    second ring); see ``docs/watcher.md`` for the rules.
    """

    def __init__(
        self,
        bufsize: int = 65536,
        *,
        nbufs: int = 256,
        entries: int = 4096,
        loop: asyncio.AbstractEventLoop | bool | None = None,
    ) -> None:
        for name, value in (("bufsize", bufsize), ("nbufs", nbufs), ("entries", entries)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 1:
                # The core takes unsigned ints: a negative one would be an OverflowError.
                raise ValueError(f"{name} must be >= 1, not {value}")
        self_ref = weakref.ref(self)

        def make_conn(listener: socket.socket, handle: int, direct: bool) -> Any:
            if not direct:
                # The listener's family/type/proto: no getsockopt per connection.
                return socket.socket(listener.family, listener.type, listener.proto, handle)
            conn = Conn(handle)
            watcher = self_ref()
            if watcher is not None:
                watcher._track(conn, handle)
            return conn

        bound = _loop_to_share(loop)
        self._loop: asyncio.AbstractEventLoop | None = bound
        if bound is None:
            self._core = WatcherCore(make_conn, bufsize, nbufs, entries)
        else:
            loop_ring = _ring_hook.loop_ring(bound)
            assert loop_ring is not None  # _loop_to_share checked

            def wake() -> None:
                # Called by the loop's select when completions for us were reaped.
                watcher = self_ref()
                if watcher is not None:
                    watcher._wake()

            ring = loop_ring.watcher_ring()
            self._core = WatcherCore(make_conn, bufsize, nbufs, entries, ring, wake)
        self.bufsize = bufsize
        self._conns: dict[int, _ConnRef] = {}
        self._dead: list[int] = []
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

        def collected(ref: _ConnRef) -> None:
            # May run in any thread (GC): only note it; the owner thread frees.
            watcher = self_ref()
            if watcher is not None and watcher._conns.get(ref.key) is ref:
                del watcher._conns[ref.key]
                watcher._dead.append(ref.cid)

        self._collected = collected

    # ------------------------------------------------------------------ plumbing

    def _cid(self, sock: Any) -> int:
        ref = self._conns.get(id(sock))
        if ref is not None:
            return ref.cid
        return self._register(sock)

    def _register(self, sock: Any) -> int:
        if not isinstance(sock, socket.socket):
            if isinstance(sock, Conn):
                raise ConnFreedError(9, "this connection was freed from the Watcher")
            raise TypeError(f"expected a socket.socket, not {type(sock).__name__}")
        if self._dead:
            self._reap_dead()
        cid = self._core.register(sock.fileno())
        self._track(sock, cid)
        return cid

    def _track(self, sock: Any, cid: int) -> None:
        ref = _ConnRef(sock, self._collected)
        ref.cid = cid
        ref.key = id(sock)
        self._conns[ref.key] = ref

    def _reap_dead(self) -> None:
        dead, self._dead = self._dead, []
        if self._core.closed:
            return
        for cid in dead:
            self._core.free(cid)

    def _address(self, sock: socket.socket, address: Any) -> Any:
        # Names are resolved here (blocking getaddrinfo); numeric hosts go straight in.
        if sock.family in _INET and isinstance(address, tuple) and len(address) >= 2:
            host = address[0]
            if isinstance(host, str) and host and not (host[0].isdigit() or ":" in host):
                infos = socket.getaddrinfo(host, address[1], sock.family, sock.type)
                return infos[0][4]
        return address

    # ------------------------------------------------------------------ ops

    def read(self, ctx: Any, sock: socket.socket, buf: Any = None) -> None:
        """Receive once into ``buf`` (a writable buffer) or, with ``buf=None``, into
        the Watcher's buffer ring: the result's ``buffer`` is then a
        :class:`RingBuffer` of exactly ``size`` bytes (``is_swap_buffer``), valid until
        the next ``wait_io`` (hold a memoryview of it, or copy it, to keep it)."""
        self._core.read(self._cid(sock), ctx, sock, buf, None, False)

    def read_timeout(self, ctx: Any, sock: socket.socket, buf: Any, deadline: float) -> None:
        """``read`` that fails with ``TimeoutError`` at ``deadline`` (absolute
        ``time.monotonic()`` seconds). The receive is cancelled in the kernel; the
        connection stays usable."""
        self._core.read(self._cid(sock), ctx, sock, buf, _deadline(deadline), False)

    def read_full(
        self, ctx: Any, sock: socket.socket, buf: Any, deadline: float | None = None
    ) -> None:
        """Complete only when ``buf`` is full (or on error: end of stream gives
        ``EOFError`` with ``size`` = bytes received). An empty ``buf`` is a ValueError."""
        d = None if deadline is None else _deadline(deadline)
        self._core.read(self._cid(sock), ctx, sock, buf, d, True)

    def write(self, ctx: Any, sock: socket.socket, data: Any) -> None:
        """Send every byte of ``data`` (any bytes-like object, held until done)."""
        self._core.write(self._cid(sock), ctx, sock, data, None)

    def write_timeout(self, ctx: Any, sock: socket.socket, data: Any, deadline: float) -> None:
        """``write`` that fails with ``TimeoutError`` at ``deadline`` (absolute
        ``time.monotonic()``); ``size`` tells how much was sent."""
        self._core.write(self._cid(sock), ctx, sock, data, _deadline(deadline))

    def read_from(self, ctx: Any, sock: socket.socket, buf: Any = None) -> None:
        """Receive one datagram (recvmsg); the result's ``address`` is the sender."""
        self._core.read_from(self._cid(sock), ctx, sock, buf)

    def write_to(self, ctx: Any, sock: socket.socket, data: Any, address: Any) -> None:
        """Send one datagram to ``address`` (sendmsg)."""
        cid = self._cid(sock)
        self._core.write_to(cid, ctx, sock, data, sock.family, self._address(sock, address))

    def accept(self, ctx: Any, listener: socket.socket, *, direct: bool = False) -> None:
        """Accept one connection: the result's ``conn`` is the new socket (blocking
        mode, close-on-exec) and ``address`` the listener. A multishot accept stays
        armed on the listener while accepts are wanted.

        ``direct=True``: the connection stays inside the ring as a direct descriptor
        and ``conn`` is a :class:`Conn` handle (no fd used: 10,000s of connections
        under a small RLIMIT_NOFILE). A listener uses one mode at a time."""
        self._core.accept(self._cid(listener), ctx, listener, direct)

    def connect(
        self, ctx: Any, sock: socket.socket, address: Any, deadline: float | None = None
    ) -> None:
        """Connect ``sock``; writes submitted after it wait for it (same queue)."""
        cid = self._cid(sock)
        d = None if deadline is None else _deadline(deadline)
        self._core.connect(cid, ctx, sock, sock.family, self._address(sock, address), d)

    def free(self, sock: socket.socket) -> None:
        """Close ``sock`` now. Its pending ops complete with :class:`ConnFreedError`."""
        if not isinstance(sock, socket.socket | Conn):
            # Silently ignoring it would leave the caller's real socket open.
            raise TypeError(f"expected a socket.socket or a Conn, not {type(sock).__name__}")
        ref = self._conns.pop(id(sock), None)
        if ref is not None:
            self._core.free(ref.cid)
        if isinstance(sock, socket.socket):
            sock.close()

    # ------------------------------------------------------------------ results

    def wait_io(self, timeout: float | None = None) -> list[OpResult]:
        """Completed ops, blocking (GIL released) up to ``timeout`` seconds (None:
        until at least one completes; 0: poll). Buffers handed out by the previous
        call go back to the kernel. After ``close()``, the ops that were pending are
        returned once (with :class:`WatcherClosedError`); then it raises that."""
        if self._dead:
            self._reap_dead()
        return self._core.wait(timeout)

    def fileno(self) -> int:
        """An eventfd that becomes readable when completions may be waiting.
        Raises :class:`WatcherClosedError` after ``close()``, and
        ``io.UnsupportedOperation`` on a loop-bound Watcher (it has no eventfd)."""
        if self._core.closed:
            raise WatcherClosedError(errno.EBADF, "the Watcher is closed")
        if self._loop is not None:
            raise io.UnsupportedOperation(
                "a loop-bound Watcher has no eventfd: its completions arrive through "
                "its event loop's select() (await wait_io_async() there)"
            )
        return self._core.fileno()

    def _on_readable(self) -> None:
        self._core.drain_eventfd()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait_io_async(self) -> list[OpResult]:
        """``wait_io`` for asyncio, so the loop keeps running meanwhile. On its own
        ring the Watcher waits on the ring's eventfd with ``loop.add_reader`` (any
        loop); a loop-bound Watcher is woken by its loop's select (awaiting it on
        another loop raises ``RuntimeError``)."""
        results = self._poll()
        if results:
            return results
        loop = asyncio.get_running_loop()
        if self._loop is not None:
            if loop is not self._loop:
                raise RuntimeError(
                    f"this Watcher shares the ring of {self._loop!r}: await it on that "
                    "loop (or create it with loop=False)"
                )
        elif self._reader_loop is not loop:
            if self._reader_loop is not None and not self._reader_loop.is_closed():
                self._reader_loop.remove_reader(self.fileno())
            loop.add_reader(self.fileno(), self._on_readable)
            self._reader_loop = loop
        while True:
            waiter = loop.create_future()
            self._waiter = waiter
            try:
                nxt = self._core.next_deadline()
                if nxt is None:
                    await waiter
                else:
                    await asyncio.wait([waiter], timeout=max(0.0, nxt - loop.time()))
            finally:
                self._waiter = None
            results = self._poll()
            if results:
                return results

    def _poll(self) -> list[OpResult]:
        # drain=True: the eventfd is reset before the CQ is read, so a completion
        # posted after this poll makes it readable again (no lost wake-up).
        if self._dead:
            self._reap_dead()
        return self._core.wait(0, True)

    def __aiter__(self) -> AsyncIterator[list[OpResult]]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[list[OpResult]]:
        while True:
            try:
                yield await self.wait_io_async()
            except WatcherClosedError:
                return

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Cancel every pending op and wait for the kernel to give back every buffer.
        The pending ops complete with :class:`WatcherClosedError` (one last
        ``wait_io`` returns them)."""
        if self._reader_loop is not None:
            if not self._reader_loop.is_closed():
                self._reader_loop.remove_reader(self._core.fileno())
            self._reader_loop = None
        self._core.close()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._conns.clear()

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The ``ringio.EventLoop`` whose ring this Watcher shares (None: its own)."""
        return self._loop

    @property
    def connections(self) -> int:
        """Sockets the Watcher holds (a dup each)."""
        return self._core.connections

    @property
    def pending(self) -> int:
        """Ops submitted and not yet returned by wait_io."""
        return self._core.pending

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.connections} connections"
        return f"<ringio.Watcher {state}>"


def _loop_to_share(loop: Any) -> asyncio.AbstractEventLoop | None:
    """The ringio.EventLoop whose ring a new Watcher shares, per ``loop=`` (see
    ``Watcher``), or None for a ring of its own."""
    if loop is False:
        return None
    if loop is None or loop is True:
        running = asyncio._get_running_loop()
        if _ring_hook.owns(running) and _ring_hook.loop_ring(running) is not None:
            target: asyncio.AbstractEventLoop = running
        elif loop is True:
            raise RuntimeError(
                "Watcher(loop=True) needs a running ringio.EventLoop in this thread"
            )
        else:
            return None
    elif _ring_hook.owns(loop):
        target = loop
        if target.is_closed():
            raise RuntimeError("the event loop is closed")
        if _ring_hook.loop_ring(target) is None:
            raise TypeError("this ringio.EventLoop has no RingSelector: no ring to share")
    elif isinstance(loop, asyncio.AbstractEventLoop):
        raise TypeError(
            f"only a ringio.EventLoop's ring can be shared, not {type(loop).__name__}'s "
            "(loop=False: a ring of the Watcher's own, which works on any loop)"
        )
    else:
        raise TypeError(
            f"loop must be a ringio.EventLoop, True, False or None, not {type(loop).__name__}"
        )
    if target.is_closed():
        raise RuntimeError("the event loop is closed")
    thread = getattr(target, "_thread_id", None)
    if target.is_running() and thread != threading.get_ident():
        raise RuntimeError(
            "the event loop runs in another thread: create the Watcher in that thread"
        )
    return target


def _deadline(deadline: Any) -> float:
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        raise TypeError(
            f"deadline must be a time.monotonic() value (float), not {type(deadline).__name__}"
        )
    return float(deadline)
