"""`EventLoop`: asyncio's Unix selector event loop on an io_uring selector.

It keeps asyncio's streams, TLS, datagram, pipe, subprocess, signal and executor
machinery (it subclasses ``asyncio.SelectorEventLoop``) and swaps the layer
underneath: readiness comes from io_uring polls (`RingSelector`), and the
stream-socket ``sock_recv``/``sock_recv_into``/``sock_sendall`` coroutines, when the
socket is not ready at once, run as io_uring ``read``/``write`` ops that complete
with the data, instead of waiting for readiness and then making the syscall.

Stream sockets get a `RingSocketTransport` (``_transport.py``) whose receive
(multishot RECV into provided buffers) and send queue run in the loop's native core
(``ringio._core.loop.LoopCore``), on the selector's ring, with protocol callbacks called
from the selector step. ``RINGIO_LOOP_TRANSPORT=selector`` keeps asyncio's own
``_SelectorSocketTransport`` (readiness-based, on the ring selector) instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import heapq
import os
import socket
import sys
import threading
import time
import warnings
import weakref
from asyncio import base_events, constants, sslproto
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .. import _ring_hook, uring
from .._core.loop import LoopCalls as _LoopCalls
from .._core.loop import LoopCore as _LoopCore
from .._core.loop import timer_handle_type as _timer_handle_type
from .._engines import uring_refusal
from . import _asyncio_compat as _compat
from ._ring import LoopRing
from ._selector import RingSelector
from ._transport import RingSocketTransport

_T = TypeVar("_T")

# A ring recv reads into a fresh buffer that Python zero-fills: cap it, since a
# stream recv may return less than asked (echo servers ask for 1 MiB and get 1 KiB).
_MAX_RING_RECV = 64 * 1024  # below glibc's mmap threshold: no page faults per call
# Ring reads' buffers are reused (a new bytearray is zero-filled: a 64 KiB memset
# per read); a buffer goes back only once its read's completion has arrived. Up to
# this many are kept between reads.
_RECV_POOL = 64

# RINGIO_LOOP_TRANSPORT=selector keeps asyncio's own readiness-based socket
# transport, running on the ring selector's polls (for A/B comparisons); the default
# is the ring transport.
_Handle = asyncio.Handle
# The timers this loop makes: asyncio's TimerHandle, subclassed with nothing added
# but a native cancel() (asyncio's is three Python frames); asyncio's own where the
# core cannot set its slots.
TimerHandle: type[asyncio.TimerHandle] = _timer_handle_type() or asyncio.TimerHandle
_TimerHandle = TimerHandle
_BASE_TIME = base_events.BaseEventLoop.time
_MIN_SCHEDULED_TIMER_HANDLES = _compat.MIN_SCHEDULED_TIMER_HANDLES
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = _compat.MIN_CANCELLED_TIMER_HANDLES_FRACTION
_get_ident = threading.get_ident
_new_handle = object.__new__
_heappush = heapq.heappush
_monotonic = time.monotonic
_copy_context = contextvars.copy_context
_RING_TRANSPORT = os.environ.get("RINGIO_LOOP_TRANSPORT", "ring") != "selector"
_STREAM_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX)
_report_callback_error = _compat.report_callback_error
_NATIVE_CALLS = (
    "call_soon",
    "call_later",
    "call_at",
    "create_task",
    "is_running",
    "get_debug",
    "create_future",
)

__all__ = ["EventLoop", "install", "new_event_loop", "run"]


class EventLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
    """An asyncio event loop whose I/O runs on io_uring (see ``docs/loop.md``).

    A drop-in replacement for ``asyncio.SelectorEventLoop``: every public method
    behaves, and fails, as asyncio's does.
    """

    # asyncio's own state of the loop, which the native calls and iterations read
    # at every call (three reads per call_soon): as slots, each is a pointer at a
    # fixed place in the instance instead of an entry of its __dict__ (see
    # src/loopcore/instance_slots.rs). asyncio's Python code reads and assigns them as
    # before; they are only missing from vars(loop).
    __slots__ = (
        "_closed",
        "_debug",
        "_ready",
        "_scheduled",
        "_stopping",
        "_task_factory",
        "_thread_id",
        "_timer_cancelled_count",
    )

    def __init__(self, selector: RingSelector | None = None, *, entries: int = 256) -> None:
        if selector is None and (refusal := uring_refusal()) is not None:
            # Here, not in the first select() (where the ring is made): asyncio's
            # runner would then fail twice over and leave the coroutine unawaited.
            self._closed = True  # what BaseEventLoop.__del__ looks at
            raise OSError(
                refusal.errno,
                f"ringio.EventLoop needs io_uring, which this process may not use "
                f"(io_uring_setup: {refusal.strerror}); ringio.new_event_loop() falls "
                "back to asyncio's own loop",
            )
        super().__init__(selector if selector is not None else RingSelector(entries))
        # The loop's proactor (None on a selector of another kind): the ring that
        # the sock_* ops, transports, files and Watchers ride; the selector only
        # adds its polls to it.
        self._loop_ring: LoopRing | None = None
        if isinstance(self._selector, RingSelector):
            self._selector._loop_ready = self._ready
            self._loop_ring = self._selector.loop_ring
        # Bytes that a cancelled ring recv had already taken from a socket: handed
        # to the next sock_recv*/sock_recv_into on that socket, never lost.
        self._leftover: weakref.WeakKeyDictionary[socket.socket, bytes] = (
            weakref.WeakKeyDictionary()
        )
        self._recv_bufs: list[bytearray] = []
        self._install_native_calls()

    # ------------------------------------------------------------ scheduling

    def _install_native_calls(self) -> None:
        # call_soon, call_later, call_at, create_task, is_running, get_debug and
        # create_future as native calls (``_LoopCalls``): instance attributes,
        # which asyncio's C tasks and futures and everyone else find before the
        # class's methods.
        # Each is left out where the loop's class has another method of that name
        # (a subclass's own, or one patched on the class), and call_later also
        # where the class has its own time(); close() removes them.
        if not _LoopCalls.available():
            return
        cls = type(self)
        calls = _LoopCalls(self, cls)
        for name in _NATIVE_CALLS:
            if getattr(cls, name) is not _OWN_METHODS[name]:
                continue
            if name == "call_later" and cls.time is not _BASE_TIME:
                continue
            self.__dict__[name] = getattr(calls, name)

    def call_soon(
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        # The hottest call of a loop: every future's callbacks and every task step
        # come through here. Outside debug mode it does what asyncio's does (a
        # Handle appended to the ready queue) in one frame instead of four.
        if self._debug or self._closed:
            handle = super().call_soon(callback, *args, context=context)
            if handle._source_traceback:
                del handle._source_traceback[-1]  # this frame: the caller's is last
            return handle
        handle = _new_handle(_Handle)
        handle._context = _copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        self._ready.append(handle)
        return handle

    def close(self) -> None:
        super().close()
        # The native calls hold the loop: a closed loop drops them (its class's
        # methods raise asyncio's RuntimeError for a closed loop anyway).
        for name in _NATIVE_CALLS:
            self.__dict__.pop(name, None)

    def call_later(
        self, delay: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        # Every asyncio.sleep, wait_for and timeout comes through here, and servers
        # arm one per request (uvicorn's keep-alive). Outside debug mode, and with
        # the loop's own clock, it does what asyncio's call_later and call_at do
        # (a TimerHandle pushed on the heap) in one frame instead of nine.
        if (
            self._debug
            or self._closed
            or type(self).time is not _BASE_TIME
            or ("time" in self.__dict__)
        ):
            timer = super().call_later(delay, callback, *args, context=context)
            if timer._source_traceback:
                del timer._source_traceback[-1]  # this frame: the caller's is last
            return timer
        if delay is None:
            raise TypeError("delay must not be None")
        return self._push_timer(_monotonic() + delay, callback, args, context)

    def call_at(
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if self._debug or self._closed:
            timer = super().call_at(when, callback, *args, context=context)
            if timer._source_traceback:
                del timer._source_traceback[-1]
            return timer
        if when is None:
            raise TypeError("when cannot be None")
        return self._push_timer(when, callback, args, context)

    def _push_timer(
        self, when: float, callback: Callable[..., object], args: tuple[Any, ...], context: Any
    ) -> asyncio.TimerHandle:
        # asyncio's TimerHandle(when, callback, args, self, context), its fields set
        # here: the object asyncio's call_at pushes (of the loop's subclass), one
        # frame fewer each.
        timer = _new_handle(_TimerHandle)
        timer._context = _copy_context() if context is None else context
        timer._loop = self
        timer._callback = callback
        timer._args = args
        timer._cancelled = False
        timer._repr = None
        timer._source_traceback = None
        timer._when = when
        _heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    def _write_to_self(self) -> None:
        # call_soon_threadsafe's wake-up. asyncio's writes a byte to its self-pipe,
        # whose poll completion then takes a Python-level select, dispatch and
        # recv; the core's eventfd read completes inside the native wait instead
        # (LoopCore.wake). The self-pipe stays registered: signal.set_wakeup_fd
        # writes signal numbers to it.
        lring = self._loop_ring
        if lring is None or not lring.core.wake():
            super()._write_to_self()

    def _run_once(self) -> None:
        # asyncio's iteration (BaseEventLoop._run_once) in native code (LoopCore:
        # select_timeout, run_ready, and run_once for both with the wait between),
        # with the clock read directly instead of through self.time(), no
        # _process_events call for an empty event list, and no clock read at all
        # when no timer is scheduled. Debug mode, a subclass's own time() or one
        # patched on the instance (tests that move the clock), and the rare
        # rebuild of a heap full of cancelled timers take asyncio's own.
        scheduled = self._scheduled
        if (
            self._debug
            or type(self).time is not _BASE_TIME
            or "time" in self.__dict__
            or (
                len(scheduled) > _MIN_SCHEDULED_TIMER_HANDLES
                and self._timer_cancelled_count / len(scheduled)
                > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
            )
        ):
            return super()._run_once()
        sel = self._selector
        lring = self._loop_ring
        if (
            sel.__class__ is RingSelector
            and not sel._to_arm
            # The ring belongs to this thread, with nothing of its own queued.
            and lring._ring is not None
            and not (lring._queued or lring._backlog or lring._cancel_later)
            and lring._ring_thread == _get_ident()
        ):
            # Whole iterations in one native call (LoopCore.run_iterations: run_once until
            # the loop stops or a callback leaves the selector or the ring work of
            # their own): nothing to arm, submit, cancel or dispatch first.
            done = lring.core.run_iterations(self, sel, lring, self._ready, scheduled)
            if done is not None:
                # Completions for Python (polls, sock_* ops): asyncio processes
                # events before the timers due and the handles run.
                events = sel._dispatch(done)
                if events:
                    self._process_events(events)
                events = None
                _LoopCore.run_ready(self, self._ready, scheduled, _report_callback_error)
            if lring._files:
                lring._after_wait()
            return
        # The selector or the ring has work of its own first (polls to arm, ops to
        # submit, a backlog): the same two native halves around the Python select().
        timeout = _LoopCore.select_timeout(self, self._ready, scheduled, self._stopping)
        event_list = sel.select(timeout)
        if event_list or (lring is not None and lring.core.deferred):
            self._process_events(event_list)
        event_list = None  # breaks cycles when an exception occurs
        _LoopCore.run_ready(self, self._ready, scheduled, _report_callback_error)

    def _process_events(self, event_list: list[Any]) -> None:
        # The select deferred the transports' deliveries (handles were ready
        # before it): they run in a handle queued behind those, with the I/O
        # callbacks of this select, before the timers that are due (asyncio's order).
        lring = self._loop_ring
        if lring is not None and lring.core.queue_deferred():
            self.call_soon(lring.core.run_deferred)
        super()._process_events(event_list)

    # ----------------------------------------------------------- transports

    def _ring_transport_ok(self, sock: socket.socket) -> bool:
        return (
            _RING_TRANSPORT
            and self._loop_ring is not None
            and sock.type == socket.SOCK_STREAM
            and sock.family in _STREAM_FAMILIES
            and _plain_io(sock)
        )

    def _make_socket_transport(  # type: ignore[override]
        self,
        sock: socket.socket,
        protocol: Any,
        waiter: Any = None,
        *,
        extra: Any = None,
        server: Any = None,
    ) -> Any:
        if not self._ring_transport_ok(sock):
            return super()._make_socket_transport(
                sock, protocol, waiter, extra=extra, server=server
            )
        return RingSocketTransport(self, sock, protocol, waiter, extra, server)

    def _make_ssl_transport(  # type: ignore[override]
        self,
        rawsock: socket.socket,
        protocol: Any,
        sslcontext: Any,
        waiter: Any = None,
        *,
        server_side: bool = False,
        server_hostname: Any = None,
        extra: Any = None,
        server: Any = None,
        ssl_handshake_timeout: Any = constants.SSL_HANDSHAKE_TIMEOUT,
        ssl_shutdown_timeout: Any = constants.SSL_SHUTDOWN_TIMEOUT,
    ) -> Any:
        if not self._ring_transport_ok(rawsock):
            return super()._make_ssl_transport(
                rawsock,
                protocol,
                sslcontext,
                waiter,
                server_side=server_side,
                server_hostname=server_hostname,
                extra=extra,
                server=server,
                ssl_handshake_timeout=ssl_handshake_timeout,
                ssl_shutdown_timeout=ssl_shutdown_timeout,
            )
        # As asyncio's: the TLS protocol (a BufferedProtocol) over a raw transport.
        ssl_protocol = sslproto.SSLProtocol(
            self,
            protocol,
            sslcontext,
            waiter,
            server_side,
            server_hostname,
            ssl_handshake_timeout=ssl_handshake_timeout,
            ssl_shutdown_timeout=ssl_shutdown_timeout,
        )
        RingSocketTransport(self, rawsock, ssl_protocol, extra=extra, server=server)
        return ssl_protocol._app_transport

    # ------------------------------------------------------------ ring plumbing

    def _ring_op(self, make_op: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queues ``make_op(*args, data=callback)`` for the next select() and returns
        a future resolved with its Completion; cancelling the future cancels the op.
        The callback runs inside select() and must never raise."""
        fut: asyncio.Future[Any] = self.create_future()
        loop_ring = self._loop_ring
        assert loop_ring is not None  # only called when _ringable
        waiter: asyncio.Future[Any] | None = fut

        def done(completion: Any) -> None:
            nonlocal waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(completion)
            else:
                on_orphan(completion)
            # The final completion: the future holds it, it holds the op, the op
            # holds this callback; forgetting the future here leaves no cycle for
            # the cyclic GC (one per receive was: 38 objects a round trip kept
            # until a collection, and the collections took a third of the time).
            waiter = None

        on_orphan: Callable[[Any], None] = _ignore
        op = make_op(*args, data=done)
        loop_ring.submit_op(op)

        def cancelled(f: asyncio.Future[Any]) -> None:
            if f.cancelled() and op.state != "done":
                loop_ring.cancel_op(op)

        fut.add_done_callback(cancelled)
        fut._ringio_op = op  # type: ignore[attr-defined]

        def set_orphan(cb: Callable[[Any], None]) -> None:
            nonlocal on_orphan
            on_orphan = cb

        fut._ringio_orphan = set_orphan  # type: ignore[attr-defined]
        return fut

    def _check_sock(self, sock: socket.socket) -> None:
        _compat.check_ssl_socket(sock)
        if self._debug and sock.gettimeout() != 0:
            raise ValueError("the socket must be non-blocking")

    def _ringable(self, sock: socket.socket) -> bool:
        # read()/write() are recv()/send() without flags only on stream sockets;
        # datagram sockets keep asyncio's selector path (exact recv semantics).
        # A loop built on a selector of another kind has no ring: asyncio's path.
        return (
            sock.type == socket.SOCK_STREAM
            and self._loop_ring is not None
            and not self.is_closed()
            and _plain_io(sock)
        )

    def _take_leftover(self, sock: socket.socket, n: int) -> bytes | None:
        data = self._leftover.pop(sock, None)
        if data is None:
            return None
        if len(data) > n:
            self._leftover[sock] = data[n:]
            data = data[:n]
        return data

    async def _ring_recv(self, sock: socket.socket, nbytes: int) -> bytes:
        """One io_uring read of up to `nbytes` (the socket was not readable)."""
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        nbytes = min(nbytes, _MAX_RING_RECV)
        pool = self._recv_bufs
        buf = pool.pop() if pool else bytearray(_MAX_RING_RECV)
        view = memoryview(buf)[:nbytes]
        fut = self._ring_op(uring.read, fd, view)

        def keep(completion: Any) -> None:
            # The task was cancelled but the kernel had already received: keep
            # the bytes for the next receive on this socket.
            if completion.res > 0:
                old = self._leftover.get(sock, b"")
                self._leftover[sock] = old + bytes(view[: completion.res])
            # The kernel is done with it only now.
            if len(pool) < _RECV_POOL:
                pool.append(buf)

        fut._ringio_orphan(keep)  # type: ignore[attr-defined]
        completion = await fut
        res = completion.res
        data = bytes(view[:res]) if res > 0 else b""
        if len(pool) < _RECV_POOL:
            pool.append(buf)
        if res < 0:
            raise completion.error
        return data

    # ---------------------------------------------------------------- sock_*

    async def sock_recv(self, sock: socket.socket, n: int) -> bytes:
        """Receive up to `n` bytes from the (non-blocking) socket."""
        self._check_sock(sock)
        data = self._take_leftover(sock, n)
        if data is not None:
            return data
        try:
            return sock.recv(n)
        except (BlockingIOError, InterruptedError):
            pass
        if not self._ringable(sock) or n <= 0:
            return await super().sock_recv(sock, n)
        return await self._ring_recv(sock, n)

    async def sock_recv_into(self, sock: socket.socket, buf: Any) -> int:
        """Receive into the writable buffer `buf`; returns the byte count."""
        self._check_sock(sock)
        view = memoryview(buf).cast("B")
        data = self._take_leftover(sock, len(view))
        if data is not None:
            view[: len(data)] = data
            return len(data)
        try:
            return sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            pass
        if not self._ringable(sock) or len(view) == 0:
            return await super().sock_recv_into(sock, buf)
        # Read into a private buffer and copy: if the task is cancelled while the
        # kernel writes, the caller's buffer must not change behind its back.
        data = await self._ring_recv(sock, len(view))
        view[: len(data)] = data
        return len(data)

    async def sock_sendall(self, sock: socket.socket, data: Any) -> None:
        """Send all of `data`; like asyncio, a cancelled call may have sent a part."""
        self._check_sock(sock)
        try:
            n = sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        view = memoryview(data).cast("B")
        if n == len(view):
            return
        if not self._ringable(sock):
            await super().sock_sendall(sock, view[n:])
            return
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        while n < len(view):
            completion = await self._ring_op(uring.write, fd, view[n:])
            res = completion.res
            if res < 0:
                if res in (-errno.EAGAIN, -errno.EINTR):
                    continue
                raise completion.error
            n += res


# The socket methods asyncio's socket transport and sock_* coroutines call for
# the bytes (and the write side's end). The ring moves bytes by fd: a subclass
# that overrides one of them keeps asyncio's readiness-based code, which calls it.
_SOCKET_IO = ("recv", "recv_into", "send", "sendmsg", "shutdown")

# EventLoop's own methods that LoopCalls stands for (compared by identity, so that
# a method patched on the class is the one that runs).
_OWN_METHODS = {name: getattr(EventLoop, name) for name in _NATIVE_CALLS}


def _plain_io(sock: socket.socket) -> bool:
    """Whether the ring may move `sock`'s bytes: its I/O methods are socket.socket's."""
    cls = type(sock)
    if cls is socket.socket:
        return True
    return all(getattr(cls, m, None) is getattr(socket.socket, m) for m in _SOCKET_IO)


def _ignore(completion: Any) -> None:
    return None


class _RingHook:
    """This loop's answers to ``ringio._ring_hook``, which file engines and
    ``ringio.Watcher`` ask instead of importing the loop (they sit below it)."""

    @staticmethod
    def owns(loop: object) -> bool:
        return isinstance(loop, EventLoop)

    @staticmethod
    def ring_of(loop: object) -> LoopRing | None:
        # Any loop whose selector is a RingSelector lends its ring (a plain
        # SelectorEventLoop built on one included).
        selector = getattr(loop, "_selector", None)
        return selector.loop_ring if isinstance(selector, RingSelector) else None


_ring_hook.register(_RingHook())


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new ringio event loop (use as ``asyncio.run(..., loop_factory=...)``).

    Where the kernel refuses io_uring to this process, asyncio's own loop instead,
    with a RuntimeWarning that says why (as the file engines fall back to kernel AIO
    or threads): a program that installs ringio still runs in such a container.
    ``ringio.EventLoop()`` itself raises the OSError."""
    refusal = uring_refusal()
    if refusal is None:
        return EventLoop()
    warnings.warn(
        f"io_uring is refused to this process (io_uring_setup: {refusal.strerror}): "
        "running on asyncio's own event loop instead of ringio's",
        RuntimeWarning,
        stacklevel=2,
    )
    return asyncio.SelectorEventLoop()


if _compat.HAS_POLICIES:

    class EventLoopPolicy(_compat.DEFAULT_POLICY):  # type: ignore[misc,valid-type,name-defined]
        """The default asyncio policy, making ringio event loops (asyncio's own, with a
        warning, where io_uring is refused: see ``new_event_loop``).

        Only where asyncio has policies (CPython 3.11 to 3.15; deprecated since 3.14,
        removed in 3.16): ``ringio.run`` and ``asyncio.run(..., loop_factory=
        ringio.new_event_loop)`` are the ways in on every version."""

        _loop_factory = staticmethod(new_event_loop)

        def __repr__(self) -> str:
            return f"<{type(self).__name__}>"

    __all__.append("EventLoopPolicy")


def install() -> None:
    """Make ringio the default: ``asyncio.new_event_loop()``/``asyncio.run()`` use it.

    Sets ringio's `EventLoopPolicy`, so only where asyncio has policies (CPython 3.11
    to 3.15; on 3.14 and 3.15 without asyncio's deprecation warning). On a CPython
    without them (3.16) it raises RuntimeError: use ``ringio.run(main())`` or
    ``asyncio.run(main(), loop_factory=ringio.new_event_loop)``."""
    if not _compat.HAS_POLICIES:
        raise RuntimeError(
            f"ringio.install() needs asyncio's event loop policies, which Python "
            f"{sys.version_info.major}.{sys.version_info.minor} no longer has: use "
            "ringio.run(main()) or asyncio.run(main(), loop_factory=ringio.new_event_loop)"
        )
    _compat.set_policy(EventLoopPolicy())


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """Run the coroutine `main` on a new ringio loop, like ``asyncio.run``."""
    if _compat.get_running_loop_or_none() is not None:
        # As asyncio.run, before a loop is made (3.11's Runner made one, then failed
        # twice over and left its shutdown_asyncgens coroutine never awaited).
        raise RuntimeError("ringio.run() cannot be called from a running event loop")
    if sys.version_info >= (3, 12):
        return asyncio.run(main, debug=debug, loop_factory=new_event_loop)
    with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
        return runner.run(main)
