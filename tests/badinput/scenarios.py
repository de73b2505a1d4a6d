"""Multi-step bad-input cases: the table's call names one of these when the bad
input needs a setup (an op in flight, a buffer resized under it, a peer closed).
Each returns something the table's check can compare, or raises what it checks."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import socket
import threading
import time
from typing import Any

import ringio
from ringio import aio, uring

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
