"""Sequential reads through a buffered file read ahead. As io's buffered reader fills
its buffer for reads smaller than the buffer, ringio's does, and while the reads stay
sequential it also does for reads below ``READ_AHEAD_BELOW``, in fills that double
from the buffer size up to ``READ_AHEAD_MAX``: a loop of ``read(4096)`` or
``readinto`` of 4 KiB over a file with 4 KiB blocks reads from the kernel once per
many reads instead of once per read. What a user sees: the builtin file's bytes and
positions, and fewer kernel reads."""

from __future__ import annotations

import os
import random

import pytest

import ringio
from ringio._io import buffered as buffered_module
from ringio._io.base import READ_AHEAD_BELOW, READ_AHEAD_MAX
from ringio._io.raw import AsyncFileIO

PAYLOAD = random.Random(11).randbytes(600_000)


@pytest.fixture
def path(cached_file):
    return cached_file(PAYLOAD)


@pytest.fixture
def kernel_reads(monkeypatch):
    """Counts the reads a buffered file asks of the kernel: its inline reads of the
    page cache and its raw file's reads (the coroutine path, and every read on the
    thread engine)."""
    calls: list[int] = []
    pread_nowait = buffered_module.pread_nowait
    raw_read, readinto_once = AsyncFileIO._raw_read, AsyncFileIO._readinto_once
    raw_readinto_now = AsyncFileIO._readinto_now

    def counted_pread_nowait(fd, n, offset, *args, **kwargs):
        calls.append(n)
        return pread_nowait(fd, n, offset, *args, **kwargs)

    async def counted_raw_read(self, n):
        calls.append(n)
        return await raw_read(self, n)

    async def counted_readinto_once(self, mv):
        calls.append(len(mv))
        return await readinto_once(self, mv)

    def counted_readinto_now(self, buffer):
        calls.append(memoryview(buffer).nbytes)
        return raw_readinto_now(self, buffer)

    monkeypatch.setattr(buffered_module, "pread_nowait", counted_pread_nowait)
    monkeypatch.setattr(AsyncFileIO, "_raw_read", counted_raw_read)
    monkeypatch.setattr(AsyncFileIO, "_readinto_once", counted_readinto_once)
    monkeypatch.setattr(AsyncFileIO, "_readinto_now", counted_readinto_now)
    return calls


async def test_sequential_reads_of_the_buffer_size_read_ahead(engine, path, kernel_reads):
    async with ringio.open(path, "rb", buffering=4096) as f:
        got = [await f.read(4096) for _ in range(64)]
    assert b"".join(got) == PAYLOAD[: 64 * 4096]
    # Fills of 8, 16, 32, 64 and 128 KiB after the first read: 6 reads, not 64.
    assert len(kernel_reads) <= 8, kernel_reads
    assert max(kernel_reads) <= READ_AHEAD_MAX


async def test_sequential_readinto_reads_ahead(engine, path, kernel_reads):
    buf = bytearray(4096)
    out = bytearray()
    async with ringio.open(path, "rb", buffering=4096) as f:
        for _ in range(64):
            assert await f.readinto(buf) == 4096
            out += buf
    assert out == PAYLOAD[: 64 * 4096]
    assert len(kernel_reads) <= 8, kernel_reads


async def test_readinto_smaller_than_the_buffer_fills_the_buffer(engine, path, kernel_reads):
    # As io's BufferedReader.readinto: a small read fills the buffer, the next ones
    # are served from it.
    buf = bytearray(100)
    out = bytearray()
    async with ringio.open(path, "rb") as f:
        for _ in range(200):
            assert await f.readinto(buf) == 100
            out += buf
    assert out == PAYLOAD[:20_000]
    assert len(kernel_reads) <= 4, kernel_reads


async def test_reads_from_the_read_ahead_limit_go_straight_to_the_caller(
    engine, path, kernel_reads
):
    async with ringio.open(path, "rb", buffering=4096) as f:
        assert await f.read(4096) == PAYLOAD[:4096]
        for k in range(1, 4):
            start = 4096 + (k - 1) * READ_AHEAD_BELOW
            assert await f.read(READ_AHEAD_BELOW) == PAYLOAD[start : start + READ_AHEAD_BELOW]
    # Each large read is one read of its size, straight to the caller.
    assert kernel_reads[-3:] == [READ_AHEAD_BELOW] * 3, kernel_reads


async def test_a_read_after_a_seek_does_not_read_ahead(engine, path, kernel_reads):
    async with ringio.open(path, "rb", buffering=4096) as f:
        for off in (300_000, 10_000, 500_000, 4096):
            await f.seek(off)
            assert await f.read(8192) == PAYLOAD[off : off + 8192]
    # Random reads of at least the buffer size read what they ask for, no more.
    assert kernel_reads == [8192] * 4, kernel_reads


@pytest.mark.parametrize("buffering", [-1, 4096, 10_000])
async def test_sequential_runs_match_the_builtin_file(engine, path, buffering):
    rng = random.Random(buffering)
    sizes = [1, 100, 4096, 8192, 20_000, READ_AHEAD_BELOW - 1, READ_AHEAD_BELOW, 200_000]
    with open(path, "r+b", buffering=buffering) as ref:
        async with ringio.open(path, "r+b", buffering=buffering) as f:
            for step in range(120):
                op = rng.choice(["run", "run", "readinto_run", "seek", "write", "tell"])
                n = rng.choice(sizes)
                if op == "run":
                    for _ in range(rng.randrange(1, 12)):
                        assert await f.read(n) == ref.read(n), step
                elif op == "readinto_run":
                    a, b = bytearray(n), bytearray(n)
                    for _ in range(rng.randrange(1, 12)):
                        assert await f.readinto(a) == ref.readinto(b), step
                        assert a == b, step
                elif op == "seek":
                    off = rng.randrange(len(PAYLOAD) + 10)
                    assert await f.seek(off) == ref.seek(off), step
                elif op == "write":
                    data = os.urandom(rng.choice([1, 100, 5000]))
                    assert await f.write(data) == ref.write(data), step
                else:
                    assert await f.tell() == ref.tell(), step
            await f.flush()
            ref.flush()
            await f.seek(0)
            ref.seek(0)
            assert await f.read() == ref.read()


LINES = b"".join(b"line %d %s\n" % (i, b"x" * (i % 97)) for i in range(12_000))


async def test_line_iteration_reads_each_chunk_behind_the_partial_line(
    engine, cached_file, monkeypatch
):
    # Lines cross the chunks the file reads; a cached chunk is read in behind the
    # partial line into one bytes object (no join copying the chunk again). The
    # lines are the builtin file's.
    path = cached_file(LINES)
    joined: list[int] = []
    append_read = buffered_module.AsyncBufferedFile._append_read

    def counted_append_read(self, data):
        if self._rpos < len(self._rbuf):  # a join: the chunk copied behind the rest
            joined.append(len(data))
        return append_read(self, data)

    monkeypatch.setattr(buffered_module.AsyncBufferedFile, "_append_read", counted_append_read)
    async with ringio.open(path, "rb") as f:
        inline = f.raw._inline_reads
        got = [line async for line in f]
        assert await f.tell() == len(LINES)
    with open(path, "rb") as f:
        assert got == list(f)
    if inline:
        assert joined == []


def test_pread_nowait_reads_behind_a_head(cached_file):
    path = cached_file(LINES)
    fd = os.open(path, os.O_RDONLY)
    try:
        pread_nowait = ringio._core.pread_nowait
        assert pread_nowait(fd, 10, 5, head=b"abcd", head_from=1) == b"bcd" + LINES[5:15]
        assert pread_nowait(fd, 10, 5, head=b"abcd", head_from=4) == LINES[5:15]
        assert pread_nowait(fd, 10, 5, head=b"") == LINES[5:15]
        # Short at the end of the file; nothing at it: the head alone.
        end = len(LINES)
        assert pread_nowait(fd, 10, end - 3, head=b"ab") == b"ab" + LINES[-3:]
        assert pread_nowait(fd, 10, end, head=b"ab") == b"ab"
        with pytest.raises(ValueError, match="head_from"):
            pread_nowait(fd, 10, 0, head=b"ab", head_from=3)
        with pytest.raises(TypeError):
            pread_nowait(fd, 10, 0, head=bytearray(b"ab"))
        with pytest.raises(TypeError):
            pread_nowait(fd, 10, 0, False, b"ab")  # head is keyword-only
    finally:
        os.close(fd)
    with pytest.raises(OSError) as err:
        ringio._core.pread_nowait(fd, 10, 0, head=b"ab")
    assert err.value.errno == 9  # EBADF: the fd is closed
