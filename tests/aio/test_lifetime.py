"""Buffers the kernel may still touch stay alive, whatever Python does."""

from __future__ import annotations

import gc
import os
import select
import socket
import weakref

import pytest

from ringio import aio


class Buf(bytearray):
    """A bytearray that can be weakly referenced, to watch its lifetime."""


def test_resizing_a_buffer_in_flight_raises_buffer_error(data_file):
    fd, payload = data_file
    with aio.Context(4) as ctx:
        buf = bytearray(8)
        ctx.submit([aio.pread(fd, buf, 0)])
        with pytest.raises(BufferError):
            buf.extend(b"more")
        with pytest.raises(BufferError):
            del buf[0:4]
        ctx.get_events(1, timeout=5)
        buf.extend(b"!")  # released once the completion is reaped
        assert buf == payload[:8] + b"!"


def test_a_dropped_buffer_lives_until_its_completion_is_reaped(data_file):
    fd, payload = data_file
    with aio.Context(4) as ctx:
        buf = Buf(32)
        alive = weakref.ref(buf)
        ctx.submit([aio.pread(fd, buf, 0)])
        del buf
        gc.collect()
        assert alive() is not None  # the in-flight table owns it
        [c] = ctx.get_events(1, timeout=5)
        assert bytes(c.op.buffer) == payload[:32]
        del c
        gc.collect()
        assert alive() is None  # and releases it after the completion


def test_dropping_the_op_and_buffers_of_a_pending_poll_is_safe():
    a, b = socket.socketpair()
    with a, b, aio.Context(4) as ctx:
        op = aio.poll(a, select.POLLIN, data=Buf(8))
        alive = weakref.ref(op.data)
        ctx.submit([op])
        del op
        gc.collect()
        assert alive() is not None
        b.send(b"x")
        [c] = ctx.get_events(1, timeout=5)
        assert c.res & select.POLLIN and alive() is c.data


def test_collecting_a_context_with_ops_in_flight_waits_for_them(data_file):
    fd, _payload = data_file
    bufs = [Buf(4096) for _ in range(16)]
    refs = [weakref.ref(b) for b in bufs]
    ctx = aio.Context(16)
    ctx.submit([aio.pread(fd, b, i * 4096) for i, b in enumerate(bufs)])
    del bufs, ctx
    gc.collect()
    # io_destroy ran when the context was collected; every buffer is now released.
    assert all(r() is None for r in refs)


def test_vectored_buffers_are_all_owned_while_in_flight(data_file):
    fd, payload = data_file
    with aio.Context(4) as ctx:
        parts = [Buf(100) for _ in range(10)]
        refs = [weakref.ref(p) for p in parts]
        ctx.submit([aio.preadv(fd, parts, 0)])
        del parts
        gc.collect()
        assert all(r() is not None for r in refs)
        [c] = ctx.get_events(1, timeout=5)
        assert b"".join(c.op.buffer) == payload[:1000]


def test_many_rounds_do_not_leak_fds_or_threads(data_file):
    fd, _ = data_file
    fds_before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        with aio.Context(8) as ctx:
            ctx.submit([aio.pread(fd, bytearray(64), 0) for _ in range(8)])
            ctx.get_events(8, timeout=5)
    assert len(os.listdir("/proc/self/fd")) == fds_before


def _read_back(ctx, fd, payload):
    buf = bytearray(16)
    assert ctx.submit([aio.pread(fd, buf, 0)]) == 1
    [done] = ctx.get_events(1, timeout=5)
    assert done.res == min(16, len(payload))
    assert bytes(buf[: done.res]) == payload[:16]


def test_a_context_closed_idle_is_kept_and_serves_the_next_one(data_file):
    """io_destroy waits for an RCU grace period (tens of ms): an idle context is kept
    for the next Context of its size instead, which then works as a new one."""
    from ringio import _core

    fd, payload = data_file
    with aio.Context(37) as first:
        _read_back(first, fd, payload)
    kept = _core._aio_spare_count()
    assert kept >= 1
    with aio.Context(37) as second:
        assert _core._aio_spare_count() == kept - 1  # taken, not made anew
        assert second.in_flight == 0
        assert second.reap() == []  # nothing of the first context's is left in it
        _read_back(second, fd, payload)
        with aio.Context(38) as other_size:  # a size of its own: a new context
            assert _core._aio_spare_count() == kept - 1
            _read_back(other_size, fd, payload)


def test_a_context_closed_with_ops_in_flight_is_destroyed_not_kept():
    from ringio import _core

    r, w = socket.socketpair()
    try:
        base = _core._aio_spare_count()
        ctx = aio.Context(41)
        ctx.submit([aio.poll(r, select.POLLIN)])
        assert ctx.in_flight == 1
        ctx.close()
        assert _core._aio_spare_count() == base  # none kept, none given way
        with aio.Context(41) as again:
            assert again.reap() == []
    finally:
        r.close()
        w.close()


def test_no_more_than_a_few_contexts_are_kept(data_file):
    from ringio import _core

    contexts = [aio.Context(43) for _ in range(10)]
    for c in contexts:
        c.close()
    assert _core._aio_spare_count() <= 4


def test_a_forked_child_makes_its_own_context(data_file):
    """The kernel ties a context to the address space: a child never takes one its
    parent kept."""
    fd, payload = data_file
    with aio.Context(47) as c:
        _read_back(c, fd, payload)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            with aio.Context(47) as mine:
                buf = bytearray(16)
                mine.submit([aio.pread(fd, buf, 0)])
                [done] = mine.get_events(1, timeout=5)
                code = 0 if bytes(buf[: done.res]) == payload[:16] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
