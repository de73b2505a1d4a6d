"""Bad input to ringio.aio: each case a clear exception, and the context still works."""

from __future__ import annotations

import errno
import os

import pytest

import ringio
from ringio import aio


@pytest.fixture
def ctx():
    with aio.Context(16) as c:
        yield c


def still_healthy(ctx, fd):
    buf = bytearray(4)
    ctx.submit([aio.pread(fd, buf, 0)])
    assert ctx.get_events(1, timeout=5)[0].res == 4


def test_closed_fd_is_ebadf_naming_the_fd(ctx, data_file, tmp_path):
    fd, _ = data_file
    dead = os.open(tmp_path / "x", os.O_RDWR | os.O_CREAT, 0o600)
    os.close(dead)
    with pytest.raises(OSError) as info:
        ctx.submit([aio.pread(dead, bytearray(4), 0)])
    assert info.value.errno == errno.EBADF and info.value.fd == dead
    assert f"fd {dead}" in str(info.value)
    still_healthy(ctx, fd)


def test_fd_not_open_for_reading_is_ebadf(ctx, data_file, tmp_path):
    fd, _ = data_file
    wronly = os.open(tmp_path / "w", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError) as info:
            ctx.submit([aio.pread(wronly, bytearray(4), 0)])
        assert info.value.errno == errno.EBADF
    finally:
        os.close(wronly)
    still_healthy(ctx, fd)


def test_read_into_a_read_only_buffer_is_a_type_error(data_file):
    fd, _ = data_file
    for ro in (b"abcd", memoryview(b"abcd"), memoryview(bytearray(4)).toreadonly()):
        with pytest.raises(TypeError, match="writable"):
            aio.pread(fd, ro, 0)
    with pytest.raises(TypeError, match="writable"):
        aio.preadv(fd, [bytearray(2), b"ro"], 0)


def test_negative_offset_is_a_value_error(data_file):
    fd, _ = data_file
    with pytest.raises(ValueError, match="offset"):
        aio.pread(fd, bytearray(1), -1)
    with pytest.raises(ValueError, match="offset"):
        aio.pwritev(fd, [b"a"], -5)


def test_huge_offset_read_is_empty_and_huge_write_is_efbig(ctx, data_file):
    fd, _ = data_file
    [c] = (ctx.submit([aio.pread(fd, bytearray(1), 2**62)]), ctx.get_events(1, timeout=5))[1]
    assert c.res == 0
    ctx.submit([aio.pwrite(fd, b"x", 2**62)])
    [c] = ctx.get_events(1, timeout=5)
    assert c.res < 0 and c.error.errno in (errno.EFBIG, errno.EINVAL)


@pytest.mark.parametrize(
    "make",
    [
        lambda fd: aio.pread("3", bytearray(1), 0),
        lambda fd: aio.pread(None, bytearray(1), 0),
        lambda fd: aio.pread(True, bytearray(1), 0),
        lambda fd: aio.pread(fd, "text", 0),
        lambda fd: aio.pread(fd, None, 0),
        lambda fd: aio.pwrite(fd, 123, 0),
        lambda fd: aio.pwritev(fd, b"not a list", 0),
        lambda fd: aio.pwritev(fd, 5, 0),
        lambda fd: aio.pwritev(fd, [b"ok", 5], 0),
        lambda fd: aio.pread(fd, bytearray(1), "0"),
        lambda fd: aio.poll(fd, "POLLIN"),
    ],
)
def test_wrong_types_are_type_errors(data_file, make):
    fd, _ = data_file
    with pytest.raises(TypeError):
        make(fd)


def test_negative_fd_is_a_value_error():
    with pytest.raises(ValueError, match="fd"):
        aio.fsync(-1)


def test_a_closed_file_object_is_rejected(tmp_path):
    f = open(tmp_path / "c", "wb")
    f.close()
    with pytest.raises(ValueError, match="closed file"):
        aio.fsync(f)


def test_submit_of_something_else_is_a_type_error(ctx):
    with pytest.raises(TypeError, match=r"ops made by ringio\.aio"):
        ctx.submit(["pread"])
    with pytest.raises(TypeError):
        ctx.submit(42)


def test_the_same_op_twice_in_flight_is_a_value_error(ctx, data_file):
    fd, _ = data_file
    op = aio.pread(fd, bytearray(1), 0)
    with pytest.raises(ValueError, match="already in flight"):
        ctx.submit([op, op])
    assert op.state == "idle" and ctx.in_flight == 0
    ctx.submit([op])
    with pytest.raises(ValueError, match="already in flight"):
        ctx.submit([op])
    ctx.get_events(1, timeout=5)


@pytest.mark.parametrize("n", [0, -1])
def test_context_needs_a_positive_size(n):
    with pytest.raises(ValueError, match="maxevents"):
        aio.Context(n)


def test_context_larger_than_aio_max_nr_is_the_kernels_eagain():
    with open("/proc/sys/fs/aio-max-nr") as f:
        limit = int(f.read())
    with pytest.raises(OSError) as info:
        aio.Context(limit + 1)
    assert info.value.errno == errno.EAGAIN


def test_waiting_for_more_than_is_in_flight_would_hang_and_is_refused(ctx):
    with pytest.raises(ValueError, match="never end"):
        ctx.get_events(1)
    assert ctx.get_events(0, timeout=0) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_nr": 2, "max_nr": 1}, "min_nr"),
        ({"min_nr": -1}, "min_nr"),
        ({"max_nr": 0}, "max_nr"),
        ({"min_nr": 0, "timeout": -1.0}, "timeout"),
    ],
)
def test_get_events_argument_errors(ctx, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ctx.get_events(**kwargs)


def test_partial_submission_says_which_ops_went_in(ctx, data_file):
    fd, _payload = data_file
    good_before = aio.pread(fd, bytearray(4), 0)
    bad = aio.fsync(999_999)
    good_after = aio.pread(fd, bytearray(4), 4)
    with pytest.raises(ringio.PartialSubmitError) as info:
        ctx.submit([good_before, bad, good_after])
    err = info.value
    assert isinstance(err, OSError)
    assert err.submitted == 1 and err.op is bad
    assert err.errno == errno.EBADF and err.fd == 999_999
    assert good_before.state == "in_flight"
    assert bad.state == "idle" and good_after.state == "idle"
    [c] = ctx.get_events(1, timeout=5)
    assert c.op is good_before and ctx.in_flight == 0


def test_unknown_rw_flag_is_eopnotsupp(ctx, data_file):
    fd, _ = data_file
    with pytest.raises(OSError) as info:
        ctx.submit([aio.pread(fd, bytearray(1), 0, rw_flags=1 << 20)])
    assert info.value.errno == errno.EOPNOTSUPP


@pytest.mark.parametrize(("cls", "level"), [(9, 0), (aio.IOPRIO_CLASS_BE, 8), (-1, 0)])
def test_bad_io_priority_is_a_value_error(cls, level):
    with pytest.raises(ValueError, match="priority"):
        aio.ioprio(cls, level)


def test_out_of_range_raw_priority_is_a_value_error(data_file):
    fd, _ = data_file
    with pytest.raises(ValueError, match="priority"):
        aio.pread(fd, bytearray(1), 0, priority=1 << 20)


def test_a_reap_is_not_interrupted_by_signals():
    """io_getevents answers EINTR when it found nothing and a signal is pending,
    even with a zero timeout: a reap (what the asyncio proactor and close() do
    after the eventfd fired) must treat that as "nothing yet", not raise
    InterruptedError (seen once in CI, from a close in a test's teardown)."""
    import signal
    import time

    handled = 0

    def count(signum, frame):
        nonlocal handled
        handled += 1

    previous = signal.signal(signal.SIGUSR1, count)
    ctx = aio.Context(8)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child only sends signals, as fast as it can, for a while
        end = time.monotonic() + 1.1
        while time.monotonic() < end:
            os.kill(parent, signal.SIGUSR1)
        os._exit(0)
    try:
        interrupted = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                assert ctx.reap() == []
            except InterruptedError:
                interrupted += 1
    finally:
        os.waitpid(pid, 0)
        signal.signal(signal.SIGUSR1, previous)
        ctx.close()
    assert handled > 10  # the signals did arrive while reaping
    assert interrupted == 0
