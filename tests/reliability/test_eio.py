"""EIO from the storage: it surfaces on the failing op only, as an OSError with the
errno, and everything else (earlier data, the same file, the context) keeps working.

Two ways to make the kernel return EIO, each skipped where unavailable: a FUSE file
system served by `fuse_eio.py` (needs root and CONFIG_FUSE_FS; no libfuse), and a
device-mapper `error` target (needs the dm driver, absent from some kernels)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.reliability.fuse_eio import pattern

import ringio
import ringio._engines
from ringio import aio, uring

KINDS = {"aio": lambda n: aio.Context(n), "uring": lambda n: uring.Ring(n)}
SIZE = 1 << 20
BAD_FROM = SIZE // 2


@pytest.fixture
def failing_file(fuse_file):
    """`data` on a FUSE mount: [0, BAD_FROM) works, anything past it fails with EIO."""
    return fuse_file(SIZE, BAD_FROM)


@pytest.fixture
def fuse_file(tmp_path: Path):
    """Mounts `fuse_eio.py`; fuse_file(size, bad_from) returns the path of its file."""
    if os.geteuid() != 0:
        pytest.skip("mounting FUSE needs root")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mounted: list[tuple[Path, subprocess.Popen]] = []

    def mount(size: int, bad_from: int) -> Path:
        mnt = tmp_path / f"fuse{len(mounted)}"
        mnt.mkdir()
        server = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("fuse_eio.py")),
                str(mnt),
                str(size),
                str(bad_from),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        mounted.append((mnt, server))
        if server.stdout.readline().strip() != "ready":
            server.wait(timeout=5)
            pytest.skip(f"cannot mount FUSE here: {server.stderr.read().strip()[-200:]}")
        return mnt / "data"

    try:
        yield mount
    finally:
        for mnt, server in mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
            server.kill()
            server.wait(timeout=5)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", KINDS)
def test_eio_on_a_read_fails_that_read_only(kind, failing_file):
    fd = os.open(failing_file, os.O_RDONLY)
    try:
        with KINDS[kind](8) as ctx:
            good, bad = bytearray(4096), bytearray(4096)
            ctx.submit([aio.pread(fd, good, 0), aio.pread(fd, bad, BAD_FROM)])
            results = {id(c.op.buffer): c for c in ctx.get_events(2, timeout=10)}
            assert results[id(good)].res == 4096 and bytes(good) == pattern(4096)
            assert results[id(bad)].res == -errno.EIO
            assert results[id(bad)].error.errno == errno.EIO
            # The context is still usable after the failed op.
            ctx.submit([aio.pread(fd, good, 4096)])
            [again] = ctx.get_events(1, timeout=10)
            assert again.res == 4096
    finally:
        os.close(fd)


@pytest.mark.timeout(60)
async def test_eio_through_ringio_open_on_every_engine(engine_name, failing_file):
    async with ringio.open(failing_file, "r+b", buffering=0) as f:
        assert await f.write(b"a" * 8192) == 8192  # acknowledged before the failure
        with pytest.raises(OSError) as read_err:
            await f.pread(4096, BAD_FROM)
        assert read_err.value.errno == errno.EIO
        with pytest.raises(OSError) as write_err:
            await f.pwrite(b"b" * 4096, BAD_FROM + 4096)
        assert write_err.value.errno == errno.EIO
        # A disk that lost a write says so at the next fsync...
        with pytest.raises(OSError) as sync_err:
            await f.fsync()
        assert sync_err.value.errno == errno.EIO
        # ...and what was acknowledged before reads back intact; the file still works.
        assert await f.pread(8192, 0) == b"a" * 8192
        await f.seek(0)
        assert await f.read(4) == b"aaaa"


@pytest.mark.timeout(60)
async def test_eio_on_a_buffered_read_to_eof(engine_name, failing_file):
    async with ringio.open(failing_file, "rb") as f:
        with pytest.raises(OSError) as err:
            await f.read()  # reads in large chunks, reaching the failing half
        assert err.value.errno == errno.EIO
        # The failed read does not poison the file object.
        assert await f.pread(16, 0) == pattern(16)


@pytest.mark.timeout(60)
async def test_reads_crossing_eof_of_a_fuse_direct_io_file_return_the_file(engine_name, fuse_file):
    """The kernel queue would return a full-length read here, its tail re-read from
    the starting offset (a Linux io_uring/FUSE bug): ringio must return the file."""
    size = 10_000
    path = fuse_file(size, 1 << 30)
    content = pattern(size)
    async with ringio.open(path, "rb") as f:
        assert await f.read() == content
        assert await f.pread(16384, 0) == content
        assert await f.pread(8192, 4096) == content[4096:]
        buf = bytearray(16384)
        await f.seek(0)
        assert await f.readinto(buf) == size and bytes(buf[:size]) == content
    # The raw engine call (no per-file hint) is protected too.
    fd = os.open(path, os.O_RDONLY)
    try:
        engine = ringio._engines.get()
        buf = bytearray(16384)
        assert await engine.pread(fd, buf, 0) == size
        assert bytes(buf[:size]) == content
        a, b = bytearray(6000), bytearray(6000)
        assert await engine.preadv(fd, [a, b], 0) == size
        assert bytes(a) + bytes(b[: size - 6000]) == content
    finally:
        os.close(fd)


@pytest.fixture
def failing_block_device():
    """A device-mapper device whose second half is the `error` target."""
    if os.geteuid() != 0:
        pytest.skip("device-mapper needs root")
    name = f"ringio-eio-{os.getpid()}"
    table = "0 64 zero\n64 64 error\n"
    r = subprocess.run(["dmsetup", "create", name], input=table, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"device-mapper unavailable: {r.stderr.strip().splitlines()[0]}")
    try:
        yield f"/dev/mapper/{name}"
    finally:
        subprocess.run(["dmsetup", "remove", name], check=False, capture_output=True)


@pytest.mark.parametrize("kind", KINDS)
def test_eio_from_a_block_device_surfaces_on_the_failing_read_only(kind, failing_block_device):
    fd = os.open(failing_block_device, os.O_RDONLY | os.O_DIRECT)
    try:
        with KINDS[kind](8) as ctx:
            good, bad = ringio.aligned(4096), ringio.aligned(4096)
            ctx.submit([aio.pread(fd, good, 0), aio.pread(fd, bad, 64 * 512)])
            results = {id(c.op.buffer): c for c in ctx.get_events(2, timeout=10)}
            assert results[id(good)].res == 4096 and bytes(good) == bytes(4096)
            assert results[id(bad)].error.errno == errno.EIO
    finally:
        os.close(fd)
