"""ringio.compat.caio: caio's AsyncioContext on ringio's engines, and aiofile on it."""

from __future__ import annotations

import asyncio
import errno
import inspect
import os
from pathlib import Path

import pytest
from tests.engines import conftest as engine_fixtures

from ringio.compat.caio import AsyncioContext

# Every test runs on each engine: uring, aio and thread (and uring on ringio's loop).
engine_name = engine_fixtures.engine_name
event_loop_policy = engine_fixtures.event_loop_policy
engine = engine_fixtures.engine


@pytest.fixture
def rw_file(tmp_path: Path):
    payload = bytes(range(256)) * 64  # 16 KiB
    path = tmp_path / "data"
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDWR)
    yield fd, payload, path
    os.close(fd)


def test_signatures_match_caio():
    caio = pytest.importorskip("caio", reason="caio not installed (aiofile's dependency)")
    for name in ["read", "write", "fsync", "fdsync", "close", "__init__"]:
        ours = inspect.signature(getattr(AsyncioContext, name)).parameters
        theirs = inspect.signature(getattr(caio.asyncio_base.AsyncioContextBase, name)).parameters
        common = [p for p in theirs if p not in ("deferred", "kwargs")]
        assert [p for p in ours if p in common] == common, name
    assert AsyncioContext.MAX_REQUESTS_DEFAULT == 512


async def test_read_write_sync(engine, rw_file):
    fd, payload, path = rw_file
    async with AsyncioContext() as ctx:
        assert ctx.loop is asyncio.get_running_loop()
        assert await ctx.read(100, fd, 0) == payload[:100]
        assert await ctx.read(10, fd, 1000) == payload[1000:1010]
        assert await ctx.read(100, fd, len(payload) - 10) == payload[-10:]  # short at EOF
        assert await ctx.read(100, fd, len(payload) + 5) == b""
        assert await ctx.read(0, fd, 0) == b""
        assert await ctx.write(b"hello", fd, 3) == 5
        assert await ctx.write(bytearray(b"ab"), fd, 0) == 2
        assert await ctx.write(memoryview(b"zz"), fd, len(payload) + 2) == 2  # leaves a hole
        assert await ctx.write(b"", fd, 0) == 0
        assert await ctx.fsync(fd) is None
        assert await ctx.fdsync(fd) is None
    expected = b"ab" + payload[2:3] + b"hello" + payload[8:] + b"\0\0zz"
    assert path.read_bytes() == expected


async def test_same_results_as_caio(engine, rw_file):
    caio = pytest.importorskip("caio", reason="caio not installed (aiofile's dependency)")
    fd, _, _ = rw_file
    theirs = caio.AsyncioContext(loop=asyncio.get_running_loop())
    ours = AsyncioContext()
    try:
        for nbytes, offset in [(1, 0), (4096, 4000), (100000, 0), (10, 16380), (5, 99999)]:
            assert await ours.read(nbytes, fd, offset) == await theirs.read(nbytes, fd, offset)
        assert await ours.write(b"x" * 3000, fd, 7) == await theirs.write(b"x" * 3000, fd, 7)
    finally:
        theirs.close()
        ours.close()


async def test_max_requests_bounds_operations_in_flight(engine, rw_file, monkeypatch):
    fd, payload, _ = rw_file
    in_flight = peak = 0
    real_pread = engine.pread_bytes  # what AsyncioContext.read calls

    async def counting_pread(*args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.001)  # overlap them
            return await real_pread(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(engine, "pread_bytes", counting_pread)
    ctx = AsyncioContext(max_requests=4)
    results = await asyncio.gather(*(ctx.read(16, fd, i * 16) for i in range(64)))
    assert results == [payload[i * 16 : i * 16 + 16] for i in range(64)]
    assert peak == 4


async def test_many_concurrent_writes_and_reads(engine, tmp_path: Path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        async with AsyncioContext(max_requests=16) as ctx:
            blocks = [bytes([i]) * 512 for i in range(128)]
            written = await asyncio.gather(
                *(ctx.write(b, fd, i * 512) for i, b in enumerate(blocks))
            )
            assert written == [512] * 128
            read = await asyncio.gather(*(ctx.read(512, fd, i * 512) for i in range(128)))
            assert read == blocks
    finally:
        os.close(fd)


async def test_close_refuses_new_operations(engine, rw_file):
    fd, payload, _ = rw_file
    ctx = AsyncioContext()
    pending = asyncio.ensure_future(ctx.read(10, fd, 0))
    await asyncio.sleep(0)
    ctx.close()
    assert await pending == payload[:10]  # what was already submitted finishes
    with pytest.raises(RuntimeError, match="closed"):
        await ctx.read(10, fd, 0)
    with pytest.raises(RuntimeError):
        await ctx.fsync(fd)
    ctx.close()  # idempotent
    async with AsyncioContext() as ctx2:
        pass
    assert ctx2.closed


async def test_errors(engine, rw_file, tmp_path: Path):
    fd, _, path = rw_file
    ctx = AsyncioContext()
    with pytest.raises(OSError) as info:
        await ctx.read(10, 99999, 0)
    assert info.value.errno == errno.EBADF
    with pytest.raises(OSError) as info:
        await ctx.write(b"x", 99999, 0)
    assert info.value.errno == errno.EBADF
    ro = os.open(path, os.O_RDONLY)
    wo = os.open(path, os.O_WRONLY)
    d = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            await ctx.write(b"x", ro, 0)
        assert info.value.errno == errno.EBADF
        with pytest.raises(OSError) as info:
            await ctx.read(1, wo, 0)
        assert info.value.errno == errno.EBADF
        with pytest.raises(IsADirectoryError):
            await ctx.read(1, d, 0)
    finally:
        for f in (ro, wo, d):
            os.close(f)
    with pytest.raises(OSError) as info:
        await ctx.read(1, fd, -1)  # io_uring would read "at the position": refused
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError):
        await ctx.write(b"x", fd, -5)
    with pytest.raises(ValueError):
        await ctx.read(-1, fd, 0)
    for bad in [("1", fd, 0), (1, "3", 0), (1, fd, 1.5), (1, fd, 0, "high")]:
        with pytest.raises(TypeError):
            await ctx.read(*bad)
    with pytest.raises(TypeError):
        await ctx.write("text", fd, 0)
    with pytest.raises(TypeError):
        await ctx.write(None, fd, 0)
    with pytest.raises(TypeError):
        await ctx.fsync(None)
    with pytest.raises(ValueError):
        AsyncioContext(max_requests=-1)
    assert AsyncioContext(max_requests=0).max_requests == 512  # caio: 0 means default


async def test_cancelled_read_leaves_the_context_usable(engine, rw_file):
    fd, payload, _ = rw_file
    ctx = AsyncioContext(max_requests=1)
    task = asyncio.ensure_future(ctx.read(100, fd, 0))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.wait_for(ctx.read(4, fd, 0), 5) == payload[:4]  # slot given back


def test_made_before_the_loop_runs(engine_name, rw_file):
    fd, payload, _ = rw_file
    loop = asyncio.new_event_loop()
    try:
        ctx = AsyncioContext(loop=loop)
        assert ctx.loop is loop
        assert loop.run_until_complete(ctx.read(8, fd, 8)) == payload[8:16]
    finally:
        loop.close()


# -- aiofile running on the context ---------------------------------------------------------


@pytest.fixture
def aiofile():
    return pytest.importorskip(
        "aiofile", reason="aiofile not installed (it is in ringio's `test` extra)"
    )


async def test_aiofile_binary(engine, aiofile, tmp_path: Path):
    path = tmp_path / "a.bin"
    data = os.urandom(1 << 20)
    async with AsyncioContext() as ctx:
        async with aiofile.AIOFile(path, "wb+", context=ctx) as afp:
            assert await afp.write(data) == len(data)
            await afp.fsync()
            assert await afp.read(len(data), 0) == data
            assert await afp.read(10, len(data) - 4) == data[-4:]
            await afp.fdsync()
    assert path.read_bytes() == data


async def test_aiofile_async_open_text(engine, aiofile, tmp_path: Path):
    path = tmp_path / "t.txt"
    lines = [f"line {i} é\n" for i in range(500)]
    ctx = AsyncioContext()
    async with aiofile.async_open(path, "w", context=ctx) as f:
        for line in lines:
            await f.write(line)
    assert path.read_text(encoding="utf-8") == "".join(lines)
    async with aiofile.async_open(path, "r", context=ctx) as f:
        assert [line async for line in f] == lines
    async with aiofile.async_open(path, "rb", context=ctx) as f:
        chunks = [c async for c in f.iter_chunked(1000)]
    assert b"".join(chunks) == "".join(lines).encode()
    async with aiofile.AIOFile(path, "r", context=ctx) as afp:
        assert await afp.read() == "".join(lines)
    ctx.close()


async def test_aiofile_errors_surface(engine, aiofile, tmp_path: Path):
    ctx = AsyncioContext()
    async with aiofile.AIOFile(tmp_path / "r.txt", "w+", context=ctx) as afp:
        await afp.write("abc")
    afp = aiofile.AIOFile(tmp_path / "r.txt", "r", context=ctx)
    await afp.open()
    with pytest.raises(OSError) as info:
        await afp.write_bytes(b"x")  # opened read-only
    assert info.value.errno == errno.EBADF
    await afp.close()
