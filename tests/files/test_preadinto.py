"""preadinto(buffer, offset) of ringio.open's binary files: os.preadv into one buffer
as the reference, every engine, buffered and raw files, O_DIRECT in place or through
a bounce buffer, and the errors a user can make."""

from __future__ import annotations

import array
import asyncio
import errno
import io
import os
import random
from pathlib import Path

import pytest

import ringio

SIZE = 256 * 1024 + 123  # not a whole number of blocks: reads cross the end


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, bytes]:
    payload = os.urandom(SIZE)
    path = tmp_path / "data.bin"
    path.write_bytes(payload)
    return path, payload


async def _open(path: Path, mode: str = "rb", *, buffering: int = -1, direct: bool = False):
    try:
        return await ringio.open(path, mode, buffering=buffering, direct=direct)
    except OSError as e:  # e.g. tmpfs refuses O_DIRECT
        if direct and e.errno == errno.EINVAL:
            pytest.skip(f"O_DIRECT refused here: {e}")
        raise


def _cases(seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    cases = [
        (rng.randrange(SIZE + 5000), rng.choice([1, 100, 4096, 5000, 65536])) for _ in range(60)
    ]
    return [*cases, (0, 4096), (SIZE - 1, 4096), (SIZE, 4096), (SIZE + 8192, 4096), (0, 0)]


def _spy_engine_reads(engine, monkeypatch) -> list[object]:
    """Records the exporter of every buffer the engine reads into: by pread, or by
    an O_DIRECT read it started at once (start_direct_read)."""
    targets: list[object] = []
    real, real_started = type(engine).pread, type(engine).start_direct_read

    def spy(self, fd, buf, offset, hint=None, **kw):
        targets.append(memoryview(buf).obj)
        return real(self, fd, buf, offset, hint, **kw)

    def spy_started(self, fd, buf, offset, *args):
        started = real_started(self, fd, buf, offset, *args)
        if started is not None:
            targets.append(memoryview(buf).obj)
        return started

    monkeypatch.setattr(type(engine), "pread", spy)
    monkeypatch.setattr(type(engine), "start_direct_read", spy_started)
    return targets


@pytest.mark.parametrize("direct", [False, True], ids=["cached", "o_direct"])
@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
async def test_preadinto_fills_the_buffer_as_os_preadv_does(engine, data_file, buffering, direct):
    path, _ = data_file
    fd = os.open(path, os.O_RDONLY)
    try:
        async with await _open(path, buffering=buffering, direct=direct) as f:
            await f.seek(77)
            for offset, n in _cases(1):
                for make in (bytearray, ringio.aligned):
                    got_buf, want_buf = make(max(n, 1)), bytearray(max(n, 1))
                    view = memoryview(got_buf)[:n]
                    want = os.preadv(fd, [memoryview(want_buf)[:n]], offset)
                    assert await f.preadinto(view, offset) == want
                    assert bytes(view) == bytes(memoryview(want_buf)[:n])
                    del view
            assert await f.tell() == 77  # the position is left alone
            assert await f.read(5) == os.pread(fd, 5, 77)
    finally:
        os.close(fd)


async def test_aligned_o_direct_reads_go_straight_into_the_callers_buffer(
    engine, data_file, monkeypatch
):
    path, payload = data_file
    async with await _open(path, buffering=0, direct=True) as f:
        targets = _spy_engine_reads(engine, monkeypatch)
        buf = ringio.aligned(8192)
        assert await f.preadinto(buf, 4096 * 3) == 8192
        assert bytes(buf) == payload[4096 * 3 : 4096 * 5]
        assert targets == [buf]  # no bounce buffer
        # A part of an aligned buffer that starts on a block is aligned too.
        targets.clear()
        part = memoryview(buf)[4096:]
        assert await f.preadinto(part, 0) == 4096
        assert bytes(part) == payload[:4096]
        assert targets == [buf]
        del part
        # Unaligned: the buffer's address, its length, the offset. Each goes through
        # an aligned bounce buffer, and the bytes still land in the caller's.
        for target, offset in ((memoryview(buf)[1:4097], 0), (bytearray(1000), 0), (buf, 10)):
            targets.clear()
            n = len(target)
            assert await f.preadinto(target, offset) == n
            assert bytes(target) == payload[offset : offset + n]
            assert targets and all(t is not target and t is not buf for t in targets)


@pytest.mark.parametrize("direct", [False, True], ids=["cached", "o_direct"])
async def test_concurrent_preadinto_from_many_tasks(engine, data_file, direct):
    path, payload = data_file
    offsets = [k * 4096 for k in range(SIZE // 4096)]
    random.Random(3).shuffle(offsets)
    async with await _open(path, buffering=0, direct=direct) as f:

        async def worker(share: list[int]) -> None:
            buf = ringio.aligned(4096)
            for off in share:
                assert await f.preadinto(buf, off) == 4096
                assert bytes(buf) == payload[off : off + 4096]

        await asyncio.gather(*(worker(offsets[w::32]) for w in range(32)))


async def _until(check, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.001)


async def test_an_aligned_o_direct_read_starts_when_the_method_is_called(engine, data_file):
    """On the kernel engines the read is started at the call, as a cached read is
    served at the call: the bytes arrive while the caller does other work, and the
    await then takes the count."""
    if engine.name == "thread":
        pytest.skip("the thread engine starts a read when it is awaited")
    path, payload = data_file
    async with await _open(path, buffering=0, direct=True) as f:
        for offset in (0, 8192, 4096 * 60):
            buf = ringio.aligned(8192)
            read = f.preadinto(buf, offset)  # not awaited yet
            want = payload[offset : offset + 8192]
            await _until(lambda buf=buf, want=want: bytes(buf) == want, "the bytes arrived")
            assert await read == 8192


@pytest.mark.parametrize("bytes_out", [False, True], ids=["preadinto", "pread"])
async def test_o_direct_reads_enter_the_kernel_at_the_call_while_others_are_in_flight(
    engine, data_file, bytes_out
):
    """An O_DIRECT read goes to the device, so it enters the kernel when it is
    started, not at the loop's next turn, even while the kernel has other reads
    (other ops wait for the turn once the kernel has work: see
    tests/engines/test_engines.py)."""
    if engine.name != "uring":
        pytest.skip("kernel AIO submits at the loop's turn; the thread engine when awaited")
    path, payload = data_file
    async with await _open(path, buffering=0, direct=True) as f:
        ring = engine._proactor._stage_ring
        reads, waiting = [], []
        for k in range(6):  # no await in between: nothing is reaped meanwhile
            offset = 4096 * k
            if bytes_out:
                reads.append(f.pread(4096, offset))
            else:
                buf = ringio.aligned(4096)
                reads.append((f.preadinto(buf, offset), buf))
            waiting.append(ring._sq_waiting)
        assert ring.in_flight >= 6
        assert waiting == [0] * 6
        for k, read in enumerate(reads):
            want = payload[4096 * k : 4096 * (k + 1)]
            if bytes_out:
                assert await read == want
            else:
                assert await read[0] == 4096 and bytes(read[1]) == want


async def test_an_o_direct_read_started_at_the_call_is_a_coroutine_to_asyncio(
    engine, data_file
):
    path, payload = data_file
    async with await _open(path, buffering=0, direct=True) as f:
        bufs = [ringio.aligned(4096) for _ in range(4)]
        read = f.preadinto(bufs[0], 0)
        assert asyncio.iscoroutine(read)
        assert await asyncio.create_task(read) == 4096
        assert await asyncio.wait_for(f.preadinto(bufs[1], 4096), 10) == 4096
        both = await asyncio.gather(f.preadinto(bufs[2], 8192), f.preadinto(bufs[3], 12288))
        assert both == [4096, 4096]
        for k, buf in enumerate(bufs):
            assert bytes(buf) == payload[k * 4096 : (k + 1) * 4096]
        read = f.preadinto(bufs[0], 0)
        assert await read == 4096
        with pytest.raises(RuntimeError, match="already awaited"):
            await read
        read = f.preadinto(bufs[0], 0)
        assert read.close() is None  # the read goes on; its result is dropped
        buf = ringio.aligned(4096)
        assert await f.preadinto(buf, 4096) == 4096
        assert bytes(buf) == payload[4096:8192]


async def test_started_awaits_its_future_as_a_coroutine_would():
    from ringio._core import Started

    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    started = Started(fut)
    assert asyncio.iscoroutine(started)
    assert started.send(None) is fut  # pending: the task sees the future itself
    fut.set_result((1, 2))
    with pytest.raises(StopIteration) as stop:
        started.send(None)
    assert stop.value.value == (1, 2)  # a tuple stays one value
    with pytest.raises(RuntimeError, match="already awaited"):
        started.send(None)

    fut = loop.create_future()
    fut.set_exception(OSError(errno.EIO, "device"))
    with pytest.raises(OSError) as info:
        await Started(fut)
    assert info.value.errno == errno.EIO

    fut = loop.create_future()
    started = Started(fut)
    assert next(started) is fut
    with pytest.raises(KeyError):
        started.throw(KeyError("k"))  # raised at the await; the future stays
    assert not fut.done()
    with pytest.raises(KeyError):
        Started(fut).throw(KeyError)

    fut = loop.create_future()
    task = asyncio.create_task(Started(fut))
    await asyncio.sleep(0)
    task.cancel()  # cancels the future it awaits, as for any task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fut.cancelled()
    with pytest.raises(TypeError):
        Started()
    with pytest.raises(AttributeError):
        Started(42)  # not a future: no __await__


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
async def test_cancelled_o_direct_reads_keep_the_callers_buffers_until_they_end(
    engine, data_file, buffering
):
    """A read the kernel has cannot be recalled: each task's buffer stays exported
    (an mmap cannot close) until the read's completion has arrived; the file then
    reads on, closes, and its fd number goes to the next file untouched."""
    import mmap

    path, payload = data_file
    f = await _open(path, buffering=buffering, direct=True)
    maps = [mmap.mmap(-1, 8192) for _ in range(48)]  # page-aligned: read in place
    offsets = [(k * 4096 * 5) % (SIZE - 8192) // 4096 * 4096 for k in range(len(maps))]
    pairs = list(zip(maps, offsets, strict=True))
    tasks = [asyncio.ensure_future(f.preadinto(m, off)) for m, off in pairs]
    await asyncio.sleep(0)  # every task ran once: its read is started
    for t in tasks:
        t.cancel()
    # On io_uring each read is in the kernel since its call: its buffer closes only
    # once the read has ended (its bytes are there). Elsewhere a read still queued
    # in the engine has exported nothing yet.
    for m, off in pairs:
        ended = m[:] == payload[off : off + 8192]
        try:
            m.close()
        except BufferError:
            continue
        if engine.name == "uring" and not ended:
            pytest.fail("a buffer was given back before its read ended")
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, (asyncio.CancelledError, int)) for r in results), results

    def all_released() -> bool:
        for m in maps:
            if not m.closed:
                try:
                    m.close()
                except BufferError:
                    return False
        return True

    await _until(all_released, "the kernel gave every buffer back")
    buf = ringio.aligned(4096)
    assert await f.preadinto(buf, 4096) == 4096
    assert bytes(buf) == payload[4096:8192]
    fd = f.fileno()
    await f.close()
    other = path.with_name("other.bin")
    other.write_bytes(b"O" * 8192)
    g = os.open(other, os.O_RDONLY)
    try:
        assert g == fd
        assert os.pread(g, 8192, 0) == b"O" * 8192
    finally:
        os.close(g)


async def test_preadinto_called_in_another_thread_reads_when_awaited_in_the_loop(
    engine, data_file
):
    """The awaitable made outside the loop's thread (as for
    ``run_coroutine_threadsafe``) starts nothing there; awaited in the loop, it reads."""
    path, payload = data_file
    loop = asyncio.get_running_loop()
    async with await _open(path, buffering=0, direct=True) as f:
        buf = ringio.aligned(4096)
        await f.preadinto(buf, 0)  # the file's first read has settled its hints
        memoryview(buf)[:] = bytes(4096)
        read = await loop.run_in_executor(None, f.preadinto, buf, 8192)
        await asyncio.sleep(0.01)
        assert bytes(buf) == bytes(4096)  # nothing read yet
        assert await read == 4096
        assert bytes(buf) == payload[8192 : 8192 + 4096]


async def test_a_buffered_file_writes_its_buffer_out_first(engine, tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 100)
    async with await ringio.open(path, "r+b") as f:
        await f.write(b"fresh")
        assert f._wbuf  # still in the write buffer
        buf = bytearray(10)
        assert await f.preadinto(buf, 0) == 10
        assert bytes(buf) == b"fresh" + b"\0" * 5


async def test_preadinto_of_other_buffer_types(engine, data_file):
    path, payload = data_file
    async with await _open(path) as f:
        arr = array.array("i", [0] * 8)  # 32 bytes, items of 4
        assert await f.preadinto(arr, 100) == 32
        assert arr.tobytes() == payload[100:132]
        assert await f.preadinto(bytearray(), 0) == 0


@pytest.mark.parametrize("direct", [False, True], ids=["cached", "o_direct"])
async def test_misuse_raises_what_says_how_to_fix_it(engine, data_file, direct):
    path, _ = data_file
    f = await _open(path, buffering=0, direct=direct)
    with pytest.raises(TypeError, match="writable"):
        await f.preadinto(b"read-only", 0)
    with pytest.raises(TypeError):
        await f.preadinto("text", 0)
    with pytest.raises(ValueError, match="negative offset"):
        await f.preadinto(ringio.aligned(4096), -4096)
    with pytest.raises(TypeError):
        await f.preadinto(bytearray(10), 1.5)
    await f.close()
    with pytest.raises(ValueError, match="closed"):
        await f.preadinto(ringio.aligned(4096), 0)


async def test_a_write_only_file_is_not_readable(engine, tmp_path):
    async with await ringio.open(tmp_path / "w.bin", "wb", buffering=0) as f:
        with pytest.raises(io.UnsupportedOperation):
            await f.preadinto(bytearray(10), 0)


async def test_preadinto_of_a_pipe_raises_espipe(engine):
    r, w = os.pipe()
    os.write(w, b"pipe")
    try:
        async with await ringio.open(r, "rb", buffering=0, closefd=False) as f:
            with pytest.raises(OSError) as info:
                await f.preadinto(bytearray(4), 0)
            assert info.value.errno == errno.ESPIPE
    finally:
        os.close(r)
        os.close(w)
