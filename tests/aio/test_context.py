"""ringio.aio.Context: every command through the kernel, synchronously."""

from __future__ import annotations

import array
import errno
import mmap
import os
import select
import socket

import pytest

import ringio
from ringio import aio


@pytest.fixture
def ctx():
    with aio.Context(64) as c:
        yield c


def run(ctx, *ops):
    """Submits ops, waits for all of them, returns their completions in op order."""
    assert ctx.submit(list(ops)) == len(ops)
    done = ctx.get_events(len(ops), timeout=10)
    by_op = {id(c.op): c for c in done}
    return [by_op[id(op)] for op in ops]


def test_pwrite_then_pread_round_trip(ctx, empty_file):
    [w] = run(ctx, aio.pwrite(empty_file, b"hello, kernel", 100))
    assert w.res == 13
    buf = bytearray(13)
    [r] = run(ctx, aio.pread(empty_file, buf, 100))
    assert r.res == 13 and buf == b"hello, kernel"
    assert os.pread(empty_file, 13, 100) == b"hello, kernel"


def test_pread_at_end_of_file_returns_zero(ctx, data_file):
    fd, payload = data_file
    [r] = run(ctx, aio.pread(fd, bytearray(10), len(payload)))
    assert r.res == 0 and r.error is None


def test_short_read_reports_bytes_actually_read(ctx, data_file):
    fd, payload = data_file
    buf = bytearray(100)
    [r] = run(ctx, aio.pread(fd, buf, len(payload) - 30))
    assert r.res == 30 and bytes(buf[:30]) == payload[-30:]


def test_preadv_scatters_across_many_buffers_of_many_kinds(ctx, data_file):
    fd, payload = data_file
    sizes = [1 + (i * 37) % 61 for i in range(700)]
    m = mmap.mmap(-1, 4096)
    buffers = [bytearray(n) for n in sizes]
    buffers += [memoryview(bytearray(50))[10:40], array.array("b", bytes(16)), memoryview(m)[:100]]
    total = sum(memoryview(b).nbytes for b in buffers)
    [r] = run(ctx, aio.preadv(fd, buffers, 5))
    assert r.res == total
    assert b"".join(bytes(b) for b in buffers) == payload[5 : 5 + total]
    # The op (reachable from its completion) holds the buffers it was given.
    del buffers, r
    m.close()


def test_pwritev_gathers_many_buffers_in_one_op(ctx, empty_file):
    parts = [bytes([i % 256]) * (1 + i % 9) for i in range(1000)]
    [w] = run(ctx, aio.pwritev(empty_file, parts, 0))
    joined = b"".join(parts)
    assert w.res == len(joined)
    assert os.pread(empty_file, len(joined) + 1, 0) == joined


def test_more_than_uio_maxiov_buffers_is_a_value_error(empty_file):
    with pytest.raises(ValueError, match="at most 1024"):
        aio.pwritev(empty_file, [b"x"] * 1025)


def test_fsync_and_fdsync_complete_with_zero(ctx, empty_file):
    os.write(empty_file, b"durable")
    results = run(ctx, aio.fsync(empty_file), aio.fdsync(empty_file))
    assert [c.res for c in results] == [0, 0]


def test_noop_is_rejected_by_the_kernel_with_einval(ctx, empty_file):
    # IOCB_CMD_NOOP is in aio_abi.h but io_submit has never implemented it.
    with pytest.raises(OSError) as info:
        ctx.submit([aio.noop(empty_file)])
    assert info.value.errno == errno.EINVAL
    assert info.value.fd == empty_file


def test_one_submit_carries_a_mixed_batch(ctx, data_file, empty_file):
    fd, payload = data_file
    bufs = [bytearray(512) for _ in range(8)]
    ops = [aio.pread(fd, b, i * 512) for i, b in enumerate(bufs)]
    ops.append(aio.pwrite(empty_file, b"batched", 0))
    ops.append(aio.fsync(empty_file))
    results = run(ctx, *ops)
    assert [c.res for c in results] == [512] * 8 + [7, 0]
    assert b"".join(bufs) == payload[:4096]


def test_completion_carries_user_data_and_op_state(ctx, data_file):
    fd, _ = data_file
    tag = object()
    op = aio.pread(fd, bytearray(8), 0, data=tag)
    assert op.state == "idle" and op.result is None
    ctx.submit([op])
    assert op.state == "in_flight" and ctx.in_flight == 1
    [c] = ctx.get_events(1, timeout=5)
    assert c.data is tag and c.op is op
    assert op.state == "done" and op.result == 8 and ctx.in_flight == 0


def test_an_op_can_be_resubmitted_once_done(ctx, data_file):
    fd, payload = data_file
    buf = bytearray(4)
    op = aio.pread(fd, buf, 8)
    for _ in range(3):
        [c] = run(ctx, op)
        assert c.res == 4 and buf == payload[8:12]


def test_file_objects_are_accepted_and_kept(ctx, tmp_path):
    f = open(tmp_path / "f.bin", "w+b")
    op = aio.pwrite(f, b"via fileno()", 0)
    assert op.file is f and op.fd == f.fileno()
    [c] = run(ctx, op)
    assert c.res == 12
    f.close()
    assert (tmp_path / "f.bin").read_bytes() == b"via fileno()"


def test_poll_completes_when_the_socket_becomes_readable(ctx):
    a, b = socket.socketpair()
    with a, b:
        op = aio.poll(a, select.POLLIN)
        ctx.submit([op])
        assert ctx.get_events(1, timeout=0.05) == []
        b.send(b"ping")
        [c] = ctx.get_events(1, timeout=5)
        assert c.res & select.POLLIN


def test_poll_is_cancellable_and_completes_with_ecanceled(ctx):
    a, b = socket.socketpair()
    with a, b:
        op = aio.poll(a, select.POLLIN)
        ctx.submit([op])
        assert ctx.cancel(op) is None  # the completion comes through the ring
        [c] = ctx.get_events(1, timeout=5)
        assert c.op is op and c.res == -errno.ECANCELED
        assert isinstance(c.error, OSError) and c.error.errno == errno.ECANCELED


def test_cancel_of_a_read_is_refused_and_the_read_still_completes(ctx, data_file):
    # Kernel AIO can cancel only POLL: the read must run to completion, and its
    # completion is still delivered with the data.
    fd, payload = data_file
    buf = bytearray(16)
    op = aio.pread(fd, buf, 32)
    ctx.submit([op])
    with pytest.raises(OSError) as info:
        ctx.cancel(op)
    assert info.value.errno == errno.EINVAL and "cannot cancel" in str(info.value)
    [c] = ctx.get_events(1, timeout=5)
    assert c.op is op and c.res == 16 and buf == payload[32:48]


def test_cancel_of_an_op_not_in_flight_is_a_value_error(ctx, data_file):
    fd, _ = data_file
    with pytest.raises(ValueError, match="not in flight"):
        ctx.cancel(aio.pread(fd, bytearray(1), 0))


def test_get_events_times_out_with_what_it_has(ctx):
    a, b = socket.socketpair()
    with a, b:
        op = aio.poll(a, select.POLLIN)
        ctx.submit([op])
        assert ctx.get_events(1, timeout=0.02) == []
        ctx.cancel(op)
        assert len(ctx.get_events(1, timeout=5)) == 1


def test_context_attributes_are_read_only(ctx):
    with pytest.raises(AttributeError):
        ctx.maxevents = 5


def test_eventfd_becomes_readable_on_completion(ctx, data_file):
    fd, _ = data_file
    efd = ctx.fileno()
    assert select.select([efd], [], [], 0)[0] == []
    ctx.submit([aio.pread(fd, bytearray(1), 0)])
    assert select.select([efd], [], [], 5)[0] == [efd]
    assert len(ctx.reap()) == 1
    assert select.select([efd], [], [], 0)[0] == []


def test_per_op_resfd_signals_the_given_eventfd(ctx, data_file):
    fd, _ = data_file
    efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    try:
        ctx.submit([aio.pread(fd, bytearray(1), 0, resfd=efd)])
        assert select.select([efd], [], [], 5)[0] == [efd]
        assert os.eventfd_read(efd) == 1
        assert len(ctx.get_events(1, timeout=5)) == 1
    finally:
        os.close(efd)


def test_close_is_idempotent_and_later_use_is_a_value_error(data_file):
    fd, _ = data_file
    ctx = aio.Context(4)
    ctx.close()
    ctx.close()
    assert ctx.closed
    with pytest.raises(ValueError, match="closed"):
        ctx.submit([aio.pread(fd, bytearray(1), 0)])
    with pytest.raises(ValueError, match="closed"):
        ctx.submit([])  # an empty batch too, like every other call after close
    with pytest.raises(ValueError, match="closed"):
        ctx.get_events(0, timeout=0)
    with pytest.raises(ValueError, match="closed"):
        ctx.fileno()


def test_close_with_a_pending_poll_waits_and_reports_it_cancelled():
    a, b = socket.socketpair()
    with a, b:
        ctx = aio.Context(4)
        op = aio.poll(a, select.POLLIN)
        ctx.submit([op])
        ctx.close()  # io_destroy cancels the poll and waits for it
        assert op.state == "done"
        [c] = ctx.reap()
        assert c.op is op and c.res == -errno.ECANCELED


def test_ringio_aligned_gives_an_aligned_writable_buffer():
    buf = ringio.aligned(10000)
    assert len(buf) == 10000 and buf.address % os.sysconf("SC_PAGE_SIZE") == 0
    view = memoryview(buf)
    assert not view.readonly and bytes(view[:4]) == b"\0\0\0\0"
    view[0:3] = b"abc"
    assert bytes(buf)[:3] == b"abc"
    assert ringio.aligned(100, 4096 * 4).address % (4096 * 4) == 0


@pytest.mark.parametrize("alignment", [0, 3, -8, 24])
def test_ringio_aligned_rejects_a_bad_alignment(alignment):
    with pytest.raises(ValueError, match="power of two"):
        ringio.aligned(100, alignment)


def test_resolve_futures_settles_futures_and_hands_back_the_rest(ctx, data_file):
    import asyncio

    fd, payload = data_file
    loop = asyncio.new_event_loop()
    try:
        futs = [loop.create_future() for _ in range(8)]
        bufs = [bytearray(32) for _ in futs]
        cancelled = loop.create_future()
        cancelled.cancel()
        ops = [
            aio.pread(fd, b, i * 32, data=f)
            for i, (b, f) in enumerate(zip(bufs, futs, strict=True))
        ]
        ops.append(aio.pread(fd, bytearray(4), 0, data=cancelled))
        ctx.submit(ops)
        p = select.poll()
        p.register(ctx.fileno(), select.POLLIN)
        left: list = []
        while ctx.in_flight:
            assert p.poll(10_000), "no completion signalled"
            left += ctx.resolve_futures()
        assert [f.result() for f in futs] == [32] * 8
        assert bufs == [bytearray(payload[i * 32 : (i + 1) * 32]) for i in range(8)]
        assert [(c.data, c.res) for c in left] == [(cancelled, 4)]
    finally:
        loop.close()
