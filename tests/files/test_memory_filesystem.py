"""Files on a memory filesystem (tmpfs, as /dev/shm and many distributions' /tmp
are; ramfs). Such a file refuses ``preadv2(RWF_NOWAIT)`` (EOPNOTSUPP, Linux 6.18)
and io_uring hands each of its reads to a kernel worker thread, yet its reads wait
for nothing a device does: the kernel engines read it inline, as they read cached
data elsewhere. What a user sees of that: the bytes are the builtin file's, and a
``pread`` is complete when called, with no trip through the kernel queue."""

from __future__ import annotations

import asyncio
import inspect
import os
import random
from pathlib import Path

import pytest

import ringio
from ringio import _core
from ringio._core import Ready
from ringio._engines.base import NowaitHint

TMPFS_MAGIC = 0x01021994
PAYLOAD = random.Random(11).randbytes(300_000)
LINES = b"".join(b"line %d of a file in memory\n" % i for i in range(5000)) + b"no newline"


@pytest.fixture
def shm_dir(tmp_path_factory):
    """A directory on a tmpfs: /dev/shm where it is one."""
    base = Path("/dev/shm")
    if not base.is_dir():
        pytest.skip("no /dev/shm here")
    fd = os.open(base, os.O_RDONLY)
    try:
        kind = _core.fs_type(fd)
    finally:
        os.close(fd)
    if kind != TMPFS_MAGIC:
        pytest.skip(f"/dev/shm is not a tmpfs here (statfs type {kind:#x})")
    d = Path(os.path.join(base, f"ringio-test-{os.getpid()}-{random.getrandbits(32):08x}"))
    d.mkdir()
    try:
        yield d
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


@pytest.fixture
def shm_file(shm_dir):
    p = shm_dir / "data.bin"
    p.write_bytes(PAYLOAD)
    return p


def test_tmpfs_refuses_rwf_nowait(shm_file):
    """The kernel behaviour this module is about; if a kernel learns RWF_NOWAIT for
    tmpfs, the inline read below is the ordinary cached read."""
    fd = os.open(shm_file, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as refused:
            os.preadv(fd, [bytearray(10)], 0, os.RWF_NOWAIT)
        assert refused.value.errno == 95  # EOPNOTSUPP
    finally:
        os.close(fd)


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_pread_on_tmpfs_is_complete_when_called(engine, shm_file, buffering):
    async with ringio.open(shm_file, "rb", buffering=buffering) as f:
        for _ in range(2):  # and again: the first read did not turn it off
            call = f.pread(10, 5)
            if not engine.inline_reads:
                assert inspect.iscoroutine(call)
                assert await call == PAYLOAD[5:15]
                continue
            assert type(call) is Ready
            with pytest.raises(StopIteration) as stop:
                call.send(None)
            assert stop.value.value == PAYLOAD[5:15]
        into = f.preadinto(bytearray(7), 100)
        if engine.inline_reads:
            assert type(into) is Ready
        assert await into == 7



async def test_buffered_reads_of_tmpfs_read_plainly(engine, shm_file, monkeypatch):
    """A buffered file's inline reads tell the read the file is in memory: one plain
    read, not a refused RWF_NOWAIT read and two checks of the file per read."""
    from ringio._io import buffered

    if not engine.inline_reads:
        pytest.skip("the thread engine reads in its pool")
    flags: list[bool] = []
    pread_nowait = buffered.pread_nowait

    def spy(fd, n, offset, memory=False):
        flags.append(memory)
        return pread_nowait(fd, n, offset, memory)

    monkeypatch.setattr(buffered, "pread_nowait", spy)
    async with ringio.open(shm_file, "rb") as f:
        await f.seek(1000)
        assert await f.read(100_000) == PAYLOAD[1000:101_000]
        assert await f.read(10) == PAYLOAD[101_000:101_010]
        buf = bytearray(50)
        assert await f.readinto(buf) == 50
        assert buf == PAYLOAD[101_010:101_060]
    assert flags and all(flags), flags

async def test_the_engine_reads_tmpfs_without_its_queue(engine, shm_file):
    if not engine.inline_reads:
        pytest.skip("the thread engine reads in its pool")
    fd = os.open(shm_file, os.O_RDONLY)
    try:
        hint = NowaitHint()
        for off in (0, 4096, len(PAYLOAD) - 3, len(PAYLOAD) + 10):
            buf = bytearray(4096)
            coro = engine.pread(fd, buf, off, hint)
            # Complete at its first step: no queued op, no loop turn.
            with pytest.raises(StopIteration) as stop:
                coro.send(None)
            got = stop.value.value
            assert bytes(buf[:got]) == PAYLOAD[off : off + 4096]
            assert hint.read  # still tried inline next time
        coro = engine.pread_bytes(fd, 5000, 10, hint)
        with pytest.raises(StopIteration) as stop:
            coro.send(None)
        assert stop.value.value == PAYLOAD[10:5010]
    finally:
        os.close(fd)


@pytest.mark.parametrize("buffering", [0, -1, 4096])
async def test_reads_on_tmpfs_match_the_builtin_file(engine, shm_file, buffering):
    rng = random.Random(buffering + 5)
    sizes = [0, 1, 100, 4095, 4096, 4097, 65536, 70_000, 200_000]
    with open(shm_file, "rb", buffering=buffering) as ref:
        async with ringio.open(shm_file, "rb", buffering=buffering) as f:
            for step in range(200):
                op = rng.choice(["read", "readinto", "pread", "preadinto", "seek"])
                n = rng.choice(sizes)
                off = rng.randrange(len(PAYLOAD) + 10)
                if op == "read":
                    assert await f.read(n) == ref.read(n), step
                elif op == "readinto":
                    a, b = bytearray(n), bytearray(n)
                    assert await f.readinto(a) == ref.readinto(b), step
                    assert a == b, step
                elif op == "pread":
                    assert await f.pread(n, off) == os.pread(ref.fileno(), n, off), step
                elif op == "preadinto":
                    a, b = bytearray(n), bytearray(n)
                    assert await f.preadinto(a, off) == os.preadv(ref.fileno(), [b], off), step
                    assert a == b, step
                else:
                    assert await f.seek(off) == ref.seek(off), step
            assert await f.read() == ref.read()
            offs = [rng.randrange(len(PAYLOAD) + 10) for _ in range(50)]
            many = await f.pread_many(3000, offs)
            assert many == [os.pread(ref.fileno(), 3000, o) for o in offs]


@pytest.mark.parametrize("mode", ["rb", "r"])
async def test_lines_of_a_tmpfs_file_are_the_builtin_files(engine, shm_dir, mode):
    p = shm_dir / "lines.txt"
    p.write_bytes(LINES)
    with open(p, mode) as ref:
        expected = list(ref)
    async with ringio.open(p, mode) as f:
        got = [line async for line in f]
    assert got == expected


async def test_the_engine_reads_many_offsets_of_a_tmpfs_file(engine, shm_file):
    fd = os.open(shm_file, os.O_RDONLY)
    try:
        offs = [0, 1, 4096, 100_000, len(PAYLOAD) - 100, len(PAYLOAD)]
        out = await engine.pread_many(fd, 4096, offs)
        assert out == [os.pread(fd, 4096, o) for o in offs]
        buf = bytearray(4096 * len(offs))
        counts = await engine.preadinto_many(fd, buf, offs)
        for i, (o, got) in enumerate(zip(offs, counts, strict=True)):
            assert bytes(buf[i * 4096 : i * 4096 + got]) == os.pread(fd, 4096, o)
    finally:
        os.close(fd)


def test_the_synchronous_call_reads_tmpfs_inline(shm_file):
    fd = os.open(shm_file, os.O_RDONLY)
    try:
        assert _core.pread_nowait(fd, 100, 7) == PAYLOAD[7:107]
        assert _core.pread_nowait(fd, 100, len(PAYLOAD) - 5) == PAYLOAD[-5:]
        buf = bytearray(300_001)  # over the size that releases the GIL
        assert _core.preadinto_nowait(fd, buf, 0) == len(PAYLOAD)
        assert bytes(buf[: len(PAYLOAD)]) == PAYLOAD
    finally:
        os.close(fd)


async def test_a_tmpfs_read_cancelled_while_another_task_reads_keeps_the_file(engine, shm_file):
    async with ringio.open(shm_file, "rb") as f:
        tasks = [asyncio.ensure_future(f.pread(1000, i * 1000)) for i in range(20)]
        tasks[3].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for i, r in enumerate(results):
            if i != 3:
                assert r == PAYLOAD[i * 1000 : i * 1000 + 1000]
        assert await f.read(4) == PAYLOAD[:4]


async def test_the_engine_writes_tmpfs_without_its_queue(engine, shm_dir):
    if not engine.inline_reads:
        pytest.skip("the thread engine writes in its pool")
    p = shm_dir / "out.bin"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        hint = NowaitHint(memory=True)
        for off in (0, 5000, 1):
            coro = engine.pwrite(fd, b"abcdef", off, hint)
            with pytest.raises(StopIteration) as stop:
                coro.send(None)  # complete at its first step
            assert stop.value.value == 6
        assert hint.write
    finally:
        os.close(fd)
    expected = bytearray(5006)
    for off in (0, 5000, 1):
        expected[off : off + 6] = b"abcdef"
    assert p.read_bytes() == expected


@pytest.mark.parametrize("buffering", [0, -1])
async def test_writes_to_a_tmpfs_file_are_the_builtin_files(engine, shm_dir, buffering):
    rng = random.Random(buffering + 9)
    ours, theirs = shm_dir / "ours.bin", shm_dir / "theirs.bin"
    with open(theirs, "wb", buffering=buffering) as ref:
        async with ringio.open(ours, "wb", buffering=buffering) as f:
            for step in range(100):
                op = rng.choice(["write", "write", "pwrite", "seek"])
                data = rng.randbytes(rng.choice([1, 100, 4096, 70_000]))
                off = rng.randrange(300_000)
                if op == "write":
                    assert await f.write(data) == ref.write(data), step
                elif op == "pwrite":
                    await f.flush()
                    ref.flush()
                    assert await f.pwrite(data, off) == os.pwrite(ref.fileno(), data, off), step
                else:
                    assert await f.seek(off) == ref.seek(off), step
    assert ours.read_bytes() == theirs.read_bytes()


def test_only_regular_files_of_a_memory_filesystem_count(shm_file, tmp_path):
    cases = [(shm_file, True), (tmp_path, False)]
    fd = os.open("/dev", os.O_RDONLY)
    try:
        if _core.fs_type(fd) == TMPFS_MAGIC:
            # /dev is a devtmpfs here, which reports tmpfs's type: its devices may
            # wait forever, so they are not read or written as memory.
            cases.append((Path("/dev/null"), False))
    finally:
        os.close(fd)
    regular = tmp_path / "regular.bin"
    regular.write_bytes(b"x")
    cases.append((regular, tmp_path.stat().st_dev == shm_file.stat().st_dev))
    for path, expected in cases:
        fd = os.open(path, os.O_RDONLY)
        try:
            assert _core.on_memory_filesystem(fd) is expected, path
        finally:
            os.close(fd)
