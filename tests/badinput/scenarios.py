"""Multi-step bad-input cases: the table's call names one of these when the bad
input needs a setup (an op in flight, a buffer resized under it, a peer closed).
Each returns something the table's check can compare, or raises what it checks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import gc
import os
import socket
import threading
import time
from typing import Any

import ringio
import ringio.tempfile
from ringio import aio, uring
from ringio.compat import linux_aio

# ------------------------------------------------------------------ sync rings


def aio_result(ctx: aio.Context, op: aio.Op) -> int:
    """Submits one op and returns its completion's raw result (negative errno)."""
    ctx.submit([op])
    [done] = ctx.get_events(1, timeout=5)
    return done.res


def ring_result(ring: uring.Ring, op: uring.Op) -> int:
    ring.submit([op])
    [done] = ring.get_events(1, timeout=5)
    return done.res


def failed_statx_result(ring: uring.Ring, missing: str) -> Any:
    op = uring.statx(missing)
    ring_result(ring, op)
    return uring.stat_result(op)


def resize_after_op(make: Any) -> int:
    """An op takes its buffer's address at submit: resizing it before is allowed,
    and the op then reads into the resized buffer, never the freed memory."""
    buf = bytearray(8)
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        op = make(fd, buf, 0)
        buf.extend(b"x")  # may move the memory
        with aio.Context(2) as ctx:
            ctx.submit([op])
            [done] = ctx.get_events(1, timeout=5)
            return done.result()
    finally:
        os.close(fd)


def resize_aligned() -> None:
    buf = ringio.aligned(4096)
    view = memoryview(buf)
    try:
        # An AlignedBuffer is fixed-size: a view cannot grow it; a slice assignment
        # of another length must fail rather than write past the end.
        view[0:1] = b"xy"
    except ValueError as e:
        raise BufferError(str(e)) from e
    finally:
        view.release()


def aio_drop_buffer_in_flight(ctx: aio.Context, fd: int) -> int:
    """Submit, drop every Python reference to the buffer, collect, then reap: the
    op keeps the buffer alive until its completion."""
    buf = bytearray(8192)
    ctx.submit([aio.pread(fd, buf, 0)])
    del buf
    gc.collect()
    [done] = ctx.get_events(1, timeout=5)
    return done.result()


def submit_twice_in_flight(ctx: aio.Context, rpipe: int) -> None:
    op = aio.poll(rpipe, 1)
    ctx.submit([op])
    try:
        ctx.submit([op])
    finally:
        ctx.cancel(op)


def aio_overfill(ctx: aio.Context, fd: int, n: int) -> Any:
    """More ops than maxevents on the synchronous Context: the kernel may refuse
    (EAGAIN) - never a crash; whatever it accepted completes."""
    ops = [aio.pread(fd, bytearray(64), 0) for _ in range(n)]
    submitted = 0
    try:
        submitted = ctx.submit(ops)
    except ringio.PartialSubmitError as e:
        submitted = e.submitted
    except OSError as e:
        return e.errno
    got = 0
    while got < submitted:
        got += len(ctx.get_events(1, None, timeout=5))
    return "done" if submitted == n else errno.EAGAIN


def close_with_poll_in_flight(ctx: aio.Context, rpipe: int) -> bool:
    ctx.submit([aio.poll(rpipe, 1)])
    ctx.close()
    return ctx.closed


def ring_overfill(ring: uring.Ring, fd: int, n: int) -> int:
    """More ops than the SQ (8) and the CQ (16) hold, reaped a CQ's worth at a time."""
    ring.submit([uring.pread(fd, bytearray(64), 0) for _ in range(n)])
    got = 0
    while got < n:
        got += len(ring.get_events(1, ring.maxevents, timeout=5))
    return got


def ring_close_in_flight(ring: uring.Ring, rpipe: int) -> bool:
    buf = bytearray(8)
    ring.submit([uring.read(rpipe, buf)])
    ring.close()
    return ring.closed and buf == bytearray(8)


def ring_resize_in_flight(ring: uring.Ring, rpipe: int, wpipe: int) -> tuple[str, bytes]:
    buf = bytearray(8)
    ring.submit([uring.read(rpipe, buf)])
    outcome = "resized"
    try:
        buf.extend(b"x" * 100000)  # would move the memory the kernel writes to
    except BufferError:
        outcome = "BufferError"
    os.write(wpipe, b"hi")
    [done] = ring.get_events(1, timeout=5)
    return outcome, bytes(buf[: done.result()])


def ring_drop_in_flight(ring: uring.Ring, rpipe: int, wpipe: int) -> int:
    buf = bytearray(8)
    ring.submit([uring.read(rpipe, buf)])
    del buf
    gc.collect()
    # Churn the allocator: freed memory would now hold these objects.
    junk = [bytearray(8) for _ in range(1000)]
    os.write(wpipe, b"hi")
    [done] = ring.get_events(1, timeout=5)
    assert all(j == bytearray(8) for j in junk), "the kernel wrote into freed memory"
    return done.result()


def uring_direct_misaligned(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        with uring.Ring(4) as ring:
            return ring_result(ring, uring.pread(fd, ringio.aligned(4096), 1))
    finally:
        os.close(fd)


def aio_direct_misaligned(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        with aio.Context(4) as ctx:
            view = memoryview(ringio.aligned(8192))[1:4097]
            ctx.submit([aio.pread(fd, view, 0)])
            [done] = ctx.get_events(1, timeout=5)
            return done.result()  # raises OSError(EINVAL) naming the alignment
    finally:
        os.close(fd)


# ------------------------------------------------------------------ AsyncContext


async def actx_resize_in_flight(actx: aio.AsyncContext, fd: int) -> tuple[str, int]:
    buf = bytearray(16)
    task = asyncio.ensure_future(actx.readinto(fd, buf))
    await asyncio.sleep(0)  # started: the op holds the buffer
    outcome = "resized"
    try:
        buf.extend(b"x" * 100000)
    except BufferError:
        outcome = "BufferError"
    return outcome, await task


async def actx_backpressure(actx: aio.AsyncContext, fd: int, n: int) -> int:
    results = await asyncio.gather(*(actx.read(fd, 64, i * 8) for i in range(n)))
    return sum(1 for r in results if len(r) == 64)


async def actx_after_close(actx: aio.AsyncContext, fd: int) -> Any:
    actx.close()
    return await actx.read(fd, 8)


async def caio_after_close(cctx: Any, fd: int) -> Any:
    cctx.close()
    return await cctx.read(8, fd, 0)


async def caio_backpressure(cctx: Any, fd: int, n: int) -> int:
    results = await asyncio.gather(*(cctx.read(64, fd, i * 8) for i in range(n)))
    return sum(1 for r in results if len(r) == 64)


# ------------------------------------------------------------------ files


async def open_socket_fd(s1: socket.socket, s2: socket.socket) -> bytes:
    s2.sendall(b"hi")
    f = await ringio.open(s1.fileno(), "rb", buffering=0, closefd=False)
    try:
        return await f.read(2)
    finally:
        await f.close()


async def close_fd_under(f: Any) -> None:
    """The fd is closed behind the object's back: close() reports EBADF like io."""
    os.close(f.fileno())
    await f.close()


async def read_fd_closed_under(f: Any) -> Any:
    fd = f.fileno()
    # Keep the number taken by something harmless? No: leave it closed, so the
    # read must fail with EBADF rather than read another file.
    os.close(fd)
    try:
        await f.seek(0)
        return await f.read(10)
    finally:
        with contextlib.suppress(OSError):
            await f.close()


async def text_undecodable(path: str) -> str:
    with open(path, "wb") as raw:
        raw.write(b"\xff\xfe\xfa")
    async with ringio.open(path, encoding="utf-8") as f:
        return await f.read()


async def file_resize_in_flight(f: Any) -> str:
    buf = bytearray(4096)
    task = asyncio.ensure_future(f.readinto(buf))
    await asyncio.sleep(0)
    try:
        buf.extend(b"x" * 100000)
    except BufferError:
        await task
        return "BufferError"
    n = await task
    return "ok" if n >= 0 else "bad"


async def many_writes(f: Any, n: int) -> int:
    await f.truncate(0)
    await f.seek(0)
    await asyncio.gather(*(f.write(b"abcd") for _ in range(n)))
    await f.flush()
    size = await f.seek(0, 2)
    await f.seek(0)
    data = await f.read()
    assert data == b"abcd" * n, "interleaved or lost writes"
    return size


async def direct_pwrite_misaligned(f: Any) -> bool:
    await f.pwrite(b"hello", 3)
    return await f.pread(5, 3) == b"hello"


async def direct_readinto_misaligned(f: Any) -> bytes:
    buf = bytearray(101)
    view = memoryview(buf)[1:]
    n = await f.readinto(view)
    return bytes(view[:n])


# ------------------------------------------------------------------ linux_aio


def linux_aio_after_close(fd: int) -> Any:
    from ringio.compat import linux_aio

    ctx = linux_aio.AIOContext(2)
    ctx.close()
    return ctx.submit(linux_aio.FsyncBlock(fd))


# ------------------------------------------------------------------ Watcher


def closed_port() -> tuple[str, int]:
    """A 127.0.0.1 port nothing listens on (bound then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = s.getsockname()
    s.close()
    return addr


def watcher_one(w: ringio.Watcher, submit: Any, timeout: float = 5.0) -> Any:
    """Submits one op and returns its result."""
    submit()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results = w.wait_io(0.5)
        if results:
            return results[0]
    raise TimeoutError("the Watcher op did not complete")


def watcher_loop_arg(kind: str) -> Any:
    """ringio.Watcher(loop=...) with a loop it cannot share: a plain asyncio loop,
    or a closed ringio.EventLoop (the loop is closed again either way)."""
    loop = asyncio.SelectorEventLoop() if kind == "plain" else ringio.new_event_loop()
    try:
        if kind == "closed":
            loop.close()
        w = ringio.Watcher(4096, nbufs=4, loop=loop)
        w.close()
        return w
    finally:
        loop.close()


def _in_fresh_thread(fn: Any) -> Any:
    """fn() in a thread of its own (no event loop running there): its result, or
    its exception raised here."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((None, fn()))
        except BaseException as exc:  # re-raised in the caller's thread
            out.append((exc, None))

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    exc, result = out[0]
    if exc is not None:
        raise exc
    return result


def watcher_loop_bound(call: str) -> Any:
    """A Watcher sharing a ringio.EventLoop's ring: its `fileno()` (it has no
    eventfd), `wait_io_async()` awaited on another loop, or its ops when the loop is
    closed under them (they come back with WatcherClosedError). Run in a thread of
    its own: the cases run inside an asyncio loop."""
    return _in_fresh_thread(lambda: _watcher_loop_bound(call))


def _watcher_loop_bound(call: str) -> Any:
    loop = ringio.new_event_loop()
    w = ringio.Watcher(4096, nbufs=4, loop=loop)
    a, b = socket.socketpair()
    try:
        if call == "fileno":
            return w.fileno()
        if call == "other loop":
            return asyncio.run(w.wait_io_async())
        w.read(1, a)
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.close()
        rest = w.wait_io()
        return [type(r.error).__name__ for r in rest], w.closed
    finally:
        w.close()
        loop.close()
        a.close()
        b.close()


def watcher_write_peer_closed(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    s2.close()
    return watcher_one(w, lambda: w.write(1, s1, b"x" * 1_000_000))


def _fill(w: ringio.Watcher, s1: socket.socket, s2: socket.socket, submit: Any) -> Any:
    submit()
    s2.sendall(b"hi")
    return watcher_one(w, lambda: None)


def watcher_resize_in_flight(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    buf = bytearray(8)
    w.read(1, s1, buf)
    outcome = "resized"
    try:
        buf.extend(b"x" * 100000)
    except BufferError:
        outcome = "BufferError"
    res = _fill(w, s1, s2, lambda: None)
    return outcome, bytes(buf[: res.size])


def watcher_release_in_flight(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    base = bytearray(8)
    view = memoryview(base)
    w.read(1, s1, view)
    outcome = "released"
    try:
        view.release()
    except BufferError:
        outcome = "BufferError"
    res = _fill(w, s1, s2, lambda: None)
    return outcome, bytes(base[: res.size])


def watcher_drop_in_flight(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> int:
    w.read(1, s1, bytearray(8))
    gc.collect()
    junk = [bytearray(8) for _ in range(1000)]
    res = _fill(w, s1, s2, lambda: None)
    assert all(j == bytearray(8) for j in junk), "the kernel wrote into freed memory"
    return res.size


def watcher_stale_ringbuffer(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    res = _fill(w, s1, s2, lambda: w.read(1, s1))
    rb = res.buffer
    w.read(2, s1)
    s2.sendall(b"yo")
    watcher_one(w, lambda: None)  # the next wait_io recycles rb
    return rb.tobytes()


def watcher_close_sock_in_flight(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> bytes:
    buf = bytearray(8)
    w.read(1, s1, buf)
    s1.close()
    res = _fill(w, s1, s2, lambda: None)
    return bytes(buf[: res.size])


def watcher_free_twice(w: ringio.Watcher, s1: socket.socket) -> None:
    w.read(1, s1, bytearray(8))
    w.free(s1)
    w.wait_io(1)
    w.free(s1)


def watcher_free_pending(w: ringio.Watcher, s1: socket.socket) -> Any:
    return watcher_one(w, lambda: (w.read(1, s1, bytearray(8)), w.free(s1)))


def watcher_other_thread(w: ringio.Watcher, s1: socket.socket) -> None:
    w.read(1, s1, bytearray(8))  # the ring now belongs to this thread
    box: list[BaseException] = []

    def other() -> None:
        try:
            w.wait_io(0)
        except BaseException as e:
            box.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    if box:
        raise box[0]


def watcher_close_pending(w: ringio.Watcher, s1: socket.socket) -> bool:
    for i in range(10):
        w.read(i, s1, bytearray(8))
    w.close()
    results = w.wait_io(0)
    return len(results) == 10 and all(
        isinstance(r.error, ringio.WatcherClosedError) for r in results
    )


def watcher_many_ops(w: ringio.Watcher, s1: socket.socket, s2: socket.socket, n: int) -> bool:
    """n writes and n full reads queued at once on one connection pair: the
    Watcher queues them per connection (only the head is in the kernel)."""
    for i in range(n):
        w.write(("w", i), s1, i.to_bytes(4, "big"))
        w.read_full(("r", i), s2, bytearray(4))
    got: dict[Any, Any] = {}
    deadline = time.monotonic() + 20
    while len(got) < 2 * n and time.monotonic() < deadline:
        for r in w.wait_io(1):
            assert r.error is None, r.error
            got[r.context] = bytes(r.buffer) if r.context[0] == "r" else r.size
    return len(got) == 2 * n and all(got[("r", i)] == i.to_bytes(4, "big") for i in range(n))


# ------------------------------------------------------------------ EventLoop


async def nonblocking(fn: Any, sock: socket.socket, *args: Any) -> Any:
    sock.setblocking(False)
    return await fn(sock, *args)


async def loop_close_while_recv(loop: asyncio.AbstractEventLoop, s1: socket.socket) -> Any:
    task = asyncio.ensure_future(loop.sock_recv(s1, 8))
    await asyncio.sleep(0.05)
    s1.close()
    return await asyncio.wait_for(task, 5)


async def loop_resize_while_recv(
    loop: asyncio.AbstractEventLoop, s1: socket.socket, s2: socket.socket
) -> bytes:
    buf = bytearray(8)
    task = asyncio.ensure_future(loop.sock_recv_into(s1, buf))
    await asyncio.sleep(0.05)
    with contextlib.suppress(BufferError):
        buf.extend(b"x" * 100000)
    s2.send(b"hi")
    n = await asyncio.wait_for(task, 5)
    return bytes(buf[:n])


async def loop_send_peer_closed(
    loop: asyncio.AbstractEventLoop, s1: socket.socket, s2: socket.socket
) -> None:
    s2.close()
    for _ in range(100):  # the first sends may land in the buffer before the RST
        await loop.sock_sendall(s1, b"x" * 65536)
        await asyncio.sleep(0)


def loop_add_reader_badfd(loop: asyncio.AbstractEventLoop, badfd: int) -> int:
    calls: list[int] = []
    loop.add_reader(badfd, calls.append, 1)
    loop.remove_reader(badfd)
    return len(calls)


class FakeFile:
    """An object whose fileno() returns whatever the case wants."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def fileno(self) -> Any:
        return self.value


# ------------------------------------------------------------------ rings: reap, results


def ring_reap_after_close(ring: uring.Ring, rpipe: int) -> Any:
    """close() cancels the read; reap() returns its final completion once."""
    ring.submit([uring.read(rpipe, bytearray(8))])
    ring.close()
    return [c.res for c in ring.reap()], ring.reap()


def ring_resolve_non_future(ring: uring.Ring, fd: int) -> Any:
    """resolve_futures() hands back a completion whose data is not a future."""
    ring.submit([uring.pread(fd, bytearray(8), 0, data="not a future")])
    left: list[Any] = []
    for _ in range(1000):
        left += ring.resolve_futures()
        if left:
            break
        time.sleep(0.005)
    return [c.res for c in left]


def ring_resolve_after_close(ring: uring.Ring, rpipe: int) -> Any:
    """close() cancels the read; resolve_futures() hands its final completion back once."""
    ring.submit([uring.read(rpipe, bytearray(8))])
    ring.close()
    return [c.res for c in ring.resolve_futures()], ring.resolve_futures()


def ring_completion(ring: uring.Ring, fd: int) -> Any:
    ring.submit([uring.pread(fd, bytearray(8), 0)])
    [done] = ring.get_events(1, timeout=5)
    return done


def failed_statx_fields(ring: uring.Ring, missing: str) -> Any:
    op = uring.statx(missing)
    ring_result(ring, op)
    return op.statx_result()


def aio_reap_after_close(ctx: aio.Context, rpipe: int) -> Any:
    ctx.submit([aio.poll(rpipe, 1)])
    ctx.close()
    return ctx.reap(), ctx.reap()


def aio_resolve_non_future(ctx: aio.Context, fd: int) -> Any:
    """resolve_futures() hands back a completion whose data is not a future."""
    ctx.submit([aio.pread(fd, bytearray(8), 0, data="not a future")])
    left: list[Any] = []
    for _ in range(1000):
        left += ctx.resolve_futures()
        if left:
            break
        time.sleep(0.005)
    return [c.res for c in left]


def aio_resolve_after_close(ctx: aio.Context, rpipe: int) -> Any:
    ctx.submit([aio.poll(rpipe, 1)])
    ctx.close()
    return ctx.resolve_futures(), ctx.resolve_futures()


def aio_completion(ctx: aio.Context, op: aio.Op) -> Any:
    ctx.submit([op])
    [done] = ctx.get_events(1, timeout=5)
    return done


async def actx_close_in_flight(actx: aio.AsyncContext, rpipe: int) -> bool:
    # A poll: a buffered read of a pipe would run (and block) inside io_submit.
    task = asyncio.ensure_future(actx.poll(rpipe))
    await asyncio.sleep(0.01)
    actx.close()
    try:
        await asyncio.wait_for(task, 5)
    except (OSError, ValueError, asyncio.CancelledError) as e:
        return not isinstance(e, OSError) or e.errno == errno.ECANCELED
    return False


# ------------------------------------------------------------------ ringio.os


async def getcwd_removed(getcwd: Any) -> Any:
    """The current directory removed (run isolated: chdir is process-wide)."""
    import tempfile

    old = os.getcwd()
    gone = tempfile.mkdtemp()
    os.chdir(gone)
    os.rmdir(gone)
    try:
        return await getcwd()
    finally:
        os.chdir(old)


async def scandir_close_twice(scandir: Any, tmp: str) -> Any:
    it = await scandir(tmp)
    return it.close(), it.close(), list(it)


# ------------------------------------------------------------------ files: the rest


async def sync_fd_closed_under(f: Any) -> Any:
    os.close(f.fileno())
    try:
        return await f.fdatasync()
    finally:
        with contextlib.suppress(OSError):
            await f.close()


async def readall_fd_closed_under(f: Any) -> Any:
    os.close(f.fileno())
    try:
        return await f.readall()
    finally:
        with contextlib.suppress(OSError):
            await f.close()


# ------------------------------------------------------------------ Watcher: the rest


async def watcher_close_while_waiting_async(w: ringio.Watcher, s1: socket.socket) -> bool:
    w.read(1, s1, bytearray(8))
    task = asyncio.ensure_future(w.wait_io_async())
    await asyncio.sleep(0.05)
    w.close()
    results = await asyncio.wait_for(task, 5)
    if not results:  # woken by the close: the results come from the next call
        results = w.wait_io(0)
    return len(results) == 1 and isinstance(results[0].error, ringio.WatcherClosedError)


def ringbuffer(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    res = _fill(w, s1, s2, lambda: w.read(1, s1))
    return res.buffer


def ringbuffer_after_close(w: ringio.Watcher, s1: socket.socket, s2: socket.socket) -> Any:
    rb = ringbuffer(w, s1, s2)
    w.close()
    return rb.tobytes()


# ------------------------------------------------------------------ engine, run, install


def engine_with_env(name: str) -> Any:
    """Run isolated: the engine is chosen once per process."""
    import ringio._engines as engines

    os.environ["RINGIO_ENGINE"] = name
    engines.reset()
    try:
        return ringio.engine()
    finally:
        os.environ.pop("RINGIO_ENGINE", None)
        engines.reset()


def in_thread(fn: Any, *args: Any) -> Any:
    """Calls fn in a new thread (no running loop, no current loop); its result or
    its exception."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn(*args)))
        except BaseException as e:
            box.append((False, e))

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    if not box:
        raise TimeoutError("the call did not return")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def run_inside_loop() -> Any:
    """ringio.run inside a running loop: RuntimeError, as asyncio.run, and no
    warning (no loop made and left half shut down)."""
    import warnings

    coro = asyncio.sleep(0)
    message = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ringio.run(coro)
        except RuntimeError as e:
            message = str(e)
        finally:
            coro.close()
        gc.collect()  # the traceback is gone: what it held is collected now
    if caught:
        raise AssertionError(f"warned: {caught[0].message}")
    if message is None:
        return "no error"
    raise RuntimeError(message)


async def raises(exc: BaseException) -> None:
    raise exc


def install_twice() -> str:
    """Run isolated: install() changes the process's policy."""
    old = asyncio.get_event_loop_policy()
    try:
        ringio.install()
        ringio.install()
        loop = asyncio.new_event_loop()
        try:
            return type(loop).__name__
        finally:
            loop.close()
    finally:
        asyncio.set_event_loop_policy(old)


def closed_loop_used() -> Any:
    loop = ringio.new_event_loop()
    loop.close()
    coro = asyncio.sleep(0)
    try:
        return loop.run_until_complete(coro)
    finally:
        coro.close()


def loop_call_soon(call: Any, *, debug: bool = False, closed: bool = False) -> Any:
    """Runs call(loop) on a fresh ringio loop (debug mode, or closed, as asked)."""
    loop = ringio.new_event_loop()
    loop.set_debug(debug)
    try:
        if closed:
            loop.close()
        return call(loop)
    finally:
        loop.close()


def loop_run_not_callable() -> Any:
    """call_soon(5) outside debug mode, as asyncio: accepted; running it reports a
    TypeError to the exception handler. Returns what the handler got. (In a thread
    of its own: the table's rows run inside a running loop.)"""

    def run() -> list[Any]:
        loop = ringio.new_event_loop()
        seen: list[Any] = []
        loop.set_exception_handler(lambda lp, ctx: seen.append(ctx.get("exception")))
        try:
            loop.call_soon(5)
            loop.call_soon(loop.stop)
            loop.run_forever()
        finally:
            loop.close()
        return seen

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result(timeout=10)


def loop_close_while_running() -> Any:
    """close() from a callback of the running loop: asyncio's RuntimeError, and the
    loop, still open, closes once it has stopped. (In a thread of its own.)"""

    def run() -> Any:
        loop = ringio.new_event_loop()
        caught: list[BaseException] = []

        def close_now() -> None:
            try:
                loop.close()
            except RuntimeError as e:
                caught.append(e)
            loop.stop()

        try:
            loop.call_soon(close_now)
            loop.run_forever()
            assert not loop.is_closed()
        finally:
            loop.close()
        raise caught[0]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result(timeout=10)


# ------------------------------------------------------------------ RingSelector


def selector_select(sel: Any) -> Any:
    try:
        return sel.select(0)
    finally:
        sel.close()


def with_selector(fn: Any) -> Any:
    from ringio.loop import RingSelector

    sel = RingSelector(8)
    try:
        return fn(sel)
    finally:
        sel.close()


def selector_unregister_closed_sock() -> bool:
    a, b = socket.socketpair()
    try:

        def go(sel: Any) -> bool:
            key = sel.register(a, 1)
            sel.select(0)  # arms the poll
            a.close()
            return sel.unregister(key.fd) is not None

        return bool(with_selector(go))
    finally:
        a.close()
        b.close()


def selector_close_with_queued(fd: int) -> Any:
    from ringio.loop import RingSelector

    got: list[Any] = []
    sel = RingSelector(8)
    sel.loop_ring.submit_op(uring.noop(fd, data=got.append))
    sel.close()
    return got[0].res if got else None


def loop_ring_made(lring: Any) -> Any:
    try:
        return lring.owned_ring()
    finally:
        lring.close()


def with_loop_ring(fn: Any) -> Any:
    from ringio.loop import LoopRing

    lring = LoopRing(8)
    try:
        return fn(lring)
    finally:
        lring.close()


def loop_ring_close_with_queued(fd: int) -> Any:
    from ringio.loop import LoopRing

    got: list[Any] = []
    lring = LoopRing(8)
    lring.submit_op(uring.noop(fd, data=got.append))
    lring.close()
    return got[0].res if got else None


# ------------------------------------------------------------------ linux_aio: the rest


def linux_aio_retired_block(lctx: Any, fd: int) -> Any:
    from ringio.compat import linux_aio_bind as lab

    block = linux_aio.ReadBlock(fd, bytearray(8))
    block.change_cmd(lab.IOCBCMD.FSYNC)
    return lctx.submit(block)


def linux_aio_bad_priority(lctx: Any, fd: int) -> Any:
    block = linux_aio.ReadBlock(fd, bytearray(8))
    block.set_priority(7, 0)  # no such class: the kernel refuses it (as linux_aio)
    return lctx.submit(block)


def linux_aio_event(lctx: Any, block: Any) -> Any:
    lctx.submit(block)
    [ev] = lctx.get_events(1, 1, 5_000_000_000)
    return ev


def linux_aio_close_in_flight(lctx: Any, rpipe: int) -> bool:
    lctx.submit(linux_aio.PollBlock(rpipe, select_in()))
    lctx.close()
    return bool(lctx.closed)


def select_in() -> int:
    import select

    return select.POLLIN


# ------------------------------------------------------------------ compat.aiofiles

#: Files the aiofiles rows opened: closed after the case (see env.close_group_objects).
OPENED: list[Any] = []


async def opened(aiofiles: Any, path: str, *args: Any, close: bool = False) -> Any:
    f = await aiofiles.open(path, *args)
    OPENED.append(f)
    if close:
        await f.close()
    return f


async def aclosing(cm: Any) -> bool:
    f = await cm
    await f.close()
    return True


async def async_with(cm: Any) -> Any:
    async with cm as f:
        return f


async def std_stream_closed(aiofiles: Any, name: str) -> Any:
    import io
    import sys

    old = getattr(sys, name)
    closed = io.TextIOWrapper(io.BytesIO())
    closed.close()
    setattr(sys, name, closed)
    try:
        return await getattr(aiofiles, name).write("x")
    finally:
        setattr(sys, name, old)


async def tempdir_removed_under(cm: Any) -> None:
    import shutil

    async with cm as name:
        shutil.rmtree(name)


# ------------------------------------------------------------------ ringio.tempfile


def pending_dropped(pending: Any, tmp: str) -> list[str]:
    """A constructor's result dropped without being awaited: nothing is made."""
    import warnings

    before = set(os.listdir(tmp))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del pending
        gc.collect()
    return sorted(set(os.listdir(tmp)) - before)


async def named_removed_under(ntf: Any) -> Any:
    os.unlink(ntf.name)
    return await ntf.close()


async def closed_then(obj: Any, method: str, *args: Any) -> Any:
    await obj.close()
    return await getattr(obj, method)(*args)


async def spool_rollover_dir_gone(tmp: str) -> Any:
    d = os.path.join(tmp, "spool")
    os.mkdir(d)
    sp = await ringio.tempfile.SpooledTemporaryFile(4, dir=d)
    os.rmdir(d)
    try:
        return await sp.write(b"more than four")
    finally:
        await sp.close()


async def tempdir_gone(td: Any) -> Any:
    import shutil

    shutil.rmtree(td.name)
    return await td.cleanup()


async def tempdir_readonly_inside(td: Any) -> bool:
    sub = os.path.join(td.name, "ro")
    os.mkdir(sub)
    with open(os.path.join(sub, "f"), "w"):
        pass
    os.chmod(sub, 0o500)
    await td.cleanup()
    return os.path.exists(td.name)


async def tempdir_odd_entries(td: Any) -> bool:
    sub = os.path.join(td.name, "d")
    os.mkdir(sub)
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(os.path.join(sub, "sock"))
    finally:
        s.close()
    os.mkfifo(os.path.join(td.name, "fifo"))
    os.symlink("/nonexistent", os.path.join(td.name, "dangling"))
    await td.cleanup()
    return os.path.exists(td.name)


async def binary_detached_then_read(aiofiles: Any, path: str) -> Any:
    f = await opened(aiofiles, path, "rb")
    f.detach().close()  # the sync io.FileIO now owns the fd
    return await f.read()


async def detached_then_read(aiofiles: Any, path: str) -> Any:
    f = await opened(aiofiles, path, "r")
    buf = f.detach()
    OPENED.append(buf)
    return await f.read()


def aiofiles_install_twice(aiofiles: Any) -> bool:
    """Run isolated: install() replaces sys.modules entries."""
    import sys

    before = sys.modules.get("aiofiles")
    first = aiofiles.install()
    aiofiles.install()
    ok = sys.modules["aiofiles"] is aiofiles
    aiofiles.uninstall(first)
    return ok and sys.modules.get("aiofiles") is before


async def tempdir_close_twice(cm: Any) -> Any:
    td = await cm
    return await td.close(), await td.close()


async def aiofiles_many(aiofiles: Any, path: str, n: int) -> int:
    """n files opened and read at once (more than any queue depth): all complete."""

    async def one(i: int) -> bool:
        async with aiofiles.open(path, "rb") as f:
            await f.seek(i)
            return await f.read(4) == (await _payload(path))[i : i + 4]

    return sum(await asyncio.gather(*(one(i) for i in range(n))))


async def _payload(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


async def tempfiles_many(tmp: str, n: int) -> bool:
    """n named temporary files made at once: distinct names, all removed on close."""
    files = await asyncio.gather(
        *(ringio.tempfile.NamedTemporaryFile(dir=tmp, prefix="many") for _ in range(n))
    )
    names = {f.name for f in files}
    await asyncio.gather(*(f.close() for f in files))
    left = [x for x in os.listdir(tmp) if x.startswith("many")]
    return len(names) == n and not left


async def with_stdin(aiofiles: Any, rpipe: int, name: str, call: Any) -> Any:
    """sys.stdin over a pipe for the call (under pytest it is a pseudo-file with no
    fd, which aiofiles' stdin cannot use either)."""
    import io
    import sys

    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.FileIO(rpipe, "r", closefd=False), encoding="utf-8")
    try:
        return await call(getattr(aiofiles, name))
    finally:
        sys.stdin = old


def ring_readv_resize_in_flight(ring: uring.Ring, rpipe: int, wpipe: int) -> tuple[str, bytes]:
    """A vectored read holds each buffer of its list as the single read does."""
    first, second = bytearray(1), bytearray(8)
    ring.submit([uring.preadv(rpipe, [first, second], 0)])
    outcome = "resized"
    try:
        second.extend(b"x" * 100000)
    except BufferError:
        outcome = "BufferError"
    os.write(wpipe, b"hi")
    [done] = ring.get_events(1, timeout=5)
    n = done.result()
    return outcome, bytes(first + second)[:n]
