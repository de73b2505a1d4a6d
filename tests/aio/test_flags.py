"""Per-op RWF_* flags, I/O priority and O_DIRECT, as the running kernel treats them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import ringio
from ringio import aio


@pytest.fixture
def ctx():
    with aio.Context(16) as c:
        yield c


def one(ctx, op):
    ctx.submit([op])
    [c] = ctx.get_events(1, timeout=10)
    return c


def kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


@pytest.mark.parametrize("flag", ["RWF_HIPRI", "RWF_DSYNC", "RWF_SYNC"])
def test_write_flags_that_every_file_accepts(ctx, empty_file, flag):
    c = one(ctx, aio.pwrite(empty_file, b"flagged", 0, rw_flags=getattr(aio, flag)))
    assert c.res == 7 and os.pread(empty_file, 7, 0) == b"flagged"


def test_rwf_nowait_read_of_cached_data_succeeds(ctx, data_file):
    fd, payload = data_file
    os.pread(fd, 4096, 0)  # make sure the page is cached
    buf = bytearray(100)
    c = one(ctx, aio.pread(fd, buf, 0, rw_flags=aio.RWF_NOWAIT))
    assert c.res == 100 and buf == payload[:100]


def test_rwf_nowait_buffered_write_is_refused_by_ext4(ctx, empty_file):
    c = one(ctx, aio.pwrite(empty_file, b"x", 0, rw_flags=aio.RWF_NOWAIT))
    # ext4 cannot promise a non-blocking buffered write; other filesystems may.
    if c.res >= 0:
        pytest.skip("this filesystem supports RWF_NOWAIT buffered writes")
    assert c.error.errno in (errno.EOPNOTSUPP, errno.EAGAIN)


def test_rwf_append_writes_at_the_end_whatever_the_offset(ctx, data_file):
    fd, payload = data_file
    c = one(ctx, aio.pwrite(fd, b"tail", 0, rw_flags=aio.RWF_APPEND))
    assert c.res == 4
    assert os.pread(fd, 4, len(payload)) == b"tail"
    assert os.pread(fd, 4, 0) == payload[:4]


@pytest.mark.skipif(not kernel_at_least(6, 9), reason="RWF_NOAPPEND needs Linux 6.9")
def test_rwf_noappend_writes_at_the_offset_of_an_o_append_file(ctx, tmp_path: Path):
    path = tmp_path / "log"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        c = one(ctx, aio.pwrite(fd, b"AB", 2, rw_flags=aio.RWF_NOAPPEND))
        assert c.res == 2
    finally:
        os.close(fd)
    assert path.read_bytes() == b"01AB456789"


@pytest.mark.skipif(not kernel_at_least(6, 11), reason="RWF_ATOMIC needs Linux 6.11")
def test_rwf_atomic_on_a_buffered_file_is_refused(ctx, empty_file):
    # Atomic writes need O_DIRECT (and filesystem support); the kernel says so at submit.
    with pytest.raises(OSError) as info:
        ctx.submit([aio.pwrite(empty_file, b"x" * 4096, 0, rw_flags=aio.RWF_ATOMIC)])
    assert info.value.errno in (errno.EOPNOTSUPP, errno.EINVAL)


@pytest.mark.skipif(not kernel_at_least(6, 14), reason="RWF_DONTCACHE needs Linux 6.14")
def test_rwf_dontcache_read_and_write_on_ext4(ctx, data_file):
    fd, payload = data_file
    buf = bytearray(64)
    c = one(ctx, aio.pread(fd, buf, 0, rw_flags=aio.RWF_DONTCACHE))
    if c.res < 0 or c.res == 0:
        pytest.skip("this filesystem does not support RWF_DONTCACHE")
    assert buf == payload[:64]
    assert one(ctx, aio.pwrite(fd, b"dc", 0, rw_flags=aio.RWF_DONTCACHE)).res == 2


def test_rwf_constants_match_linux_fs_h():
    assert (aio.RWF_HIPRI, aio.RWF_DSYNC, aio.RWF_SYNC, aio.RWF_NOWAIT) == (1, 2, 4, 8)
    assert (aio.RWF_APPEND, aio.RWF_NOAPPEND, aio.RWF_ATOMIC, aio.RWF_DONTCACHE) == (
        0x10,
        0x20,
        0x40,
        0x80,
    )
    assert hasattr(os, "RWF_NOWAIT") and os.RWF_NOWAIT == aio.RWF_NOWAIT


@pytest.mark.parametrize(
    ("cls", "level"),
    [
        (aio.IOPRIO_CLASS_BE, 0),
        (aio.IOPRIO_CLASS_BE, 7),
        (aio.IOPRIO_CLASS_IDLE, 0),
        (aio.IOPRIO_CLASS_NONE, 0),
    ],
)
def test_io_priority_is_accepted(ctx, data_file, cls, level):
    fd, payload = data_file
    buf = bytearray(8)
    op = aio.pread(fd, buf, 0, priority=aio.ioprio(cls, level))
    assert op.priority == (cls << 13) | level
    assert one(ctx, op).res == 8 and buf == payload[:8]


def test_realtime_io_priority_needs_cap_sys_admin(ctx, data_file):
    fd, _ = data_file
    op = aio.pread(fd, bytearray(8), 0, priority=aio.ioprio(aio.IOPRIO_CLASS_RT, 0))
    if os.geteuid() == 0:
        assert one(ctx, op).res == 8
    else:
        with pytest.raises(PermissionError):
            ctx.submit([op])


@pytest.fixture
def direct_fd(tmp_path: Path):
    path = tmp_path / "direct.bin"
    payload = os.urandom(1 << 20)
    path.write_bytes(payload)
    try:
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    except OSError as e:
        pytest.skip(f"O_DIRECT unsupported here: {e}")
    yield fd, payload
    os.close(fd)


def test_o_direct_aligned_reads_and_writes(ctx, direct_fd):
    fd, payload = direct_fd
    bufs = [ringio.aligned(4096) for _ in range(8)]
    ops = [aio.pread(fd, b, i * 8192) for i, b in enumerate(bufs)]
    ctx.submit(ops)
    done = ctx.get_events(8, timeout=10)
    assert sorted(c.res for c in done) == [4096] * 8
    for i, b in enumerate(bufs):
        assert bytes(b) == payload[i * 8192 : i * 8192 + 4096]
    out = ringio.aligned(8192)
    memoryview(out)[:] = b"D" * 8192
    assert one(ctx, aio.pwrite(fd, out, 4096)).res == 8192
    back = ringio.aligned(8192)
    assert one(ctx, aio.pread(fd, back, 4096)).res == 8192 and bytes(back) == b"D" * 8192


def test_o_direct_vectored_with_aligned_slices(ctx, direct_fd):
    fd, payload = direct_fd
    big = ringio.aligned(4 * 4096)
    parts = [memoryview(big)[i * 4096 : (i + 1) * 4096] for i in range(4)]
    assert one(ctx, aio.preadv(fd, parts, 65536)).res == 4 * 4096
    assert bytes(big) == payload[65536 : 65536 + 4 * 4096]


@pytest.mark.parametrize(
    ("offset", "length", "misaligned_buffer"),
    [(100, 4096, False), (0, 1000, False), (0, 4096, True)],
)
def test_o_direct_misalignment_fails_stating_the_alignment(
    ctx, direct_fd, offset, length, misaligned_buffer
):
    fd, _ = direct_fd
    base = ringio.aligned(8192)
    buf = memoryview(base)[1 : 1 + length] if misaligned_buffer else memoryview(base)[:length]
    c = one(ctx, aio.pread(fd, buf, offset))
    assert c.res == -errno.EINVAL
    err = c.error
    assert err.errno == errno.EINVAL and err.fd == fd
    mem, off = ringio.dio_alignment(fd) or (512, 512)
    assert f"aligned to {mem} bytes" in str(err) and f"multiples of {off}" in str(err)
    with pytest.raises(OSError, match="O_DIRECT"):
        c.result()


def test_dio_alignment_reports_statx_values(direct_fd, data_file):
    fd, _ = direct_fd
    mem, off = ringio.dio_alignment(fd)
    assert mem > 0 and off > 0 and mem & (mem - 1) == 0 and off & (off - 1) == 0
