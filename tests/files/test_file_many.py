"""pread_many / preadinto_many: many positional reads, a bounded number in flight
(ringio.open's methods and the engines' own), against os.pread as the reference."""

from __future__ import annotations

import asyncio
import errno
import io
import os
import random
from pathlib import Path

import pytest
from tests.engines.conftest import cancel_with_completions_held, until

import ringio
import ringio._engines as engines

SIZE = 256 * 1024 + 123  # not a whole number of blocks: reads cross the end


@pytest.fixture
def big_file(tmp_path: Path) -> tuple[Path, bytes]:
    payload = os.urandom(SIZE)
    path = tmp_path / "many.bin"
    path.write_bytes(payload)
    return path, payload


def _offsets(seed: int, count: int = 200) -> list[int]:
    rng = random.Random(seed)
    offs = [rng.randrange(SIZE + 9000) for _ in range(count)]
    return [*offs, 0, SIZE - 1, SIZE, SIZE + 4096]  # edges: start, last byte, EOF, past it


def _expected(payload: bytes, n: int, offsets: list[int]) -> list[bytes]:
    return [payload[o : o + n] for o in offsets]


async def _open(path: Path, direct: bool) -> ringio.AsyncFileIO:
    try:
        return await ringio.open(path, "rb", buffering=0, direct=direct)
    except OSError as e:  # e.g. tmpfs refuses O_DIRECT
        if direct and e.errno == errno.EINVAL:
            pytest.skip(f"O_DIRECT refused here: {e}")
        raise


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "o_direct"])
@pytest.mark.parametrize("n", [4096, 1000, 9000, 0])
async def test_pread_many_matches_os_pread_in_the_order_of_the_offsets(
    engine, big_file, n, direct
):
    path, payload = big_file
    offsets = _offsets(n)
    async with await _open(path, direct) as f:
        for depth in (1, 7, 32, 1000):
            assert await f.pread_many(n, offsets, depth=depth) == _expected(payload, n, offsets)
        assert await f.tell() == 0  # the position is left alone


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "o_direct"])
@pytest.mark.parametrize("n", [4096, 1000, 0])
async def test_preadinto_many_fills_one_part_per_offset(engine, big_file, n, direct):
    path, payload = big_file
    offsets = _offsets(n + 1)
    expected = _expected(payload, n, offsets)
    async with await _open(path, direct) as f:
        for buf in (bytearray(n * len(offsets)), ringio.aligned(max(1, n * len(offsets)))):
            view = memoryview(buf)[: n * len(offsets)]
            counts = await f.preadinto_many(view, offsets, depth=5)
            assert counts == [len(e) for e in expected]
            for k, e in enumerate(expected):
                assert view[k * n : k * n + len(e)] == e
            del view


def _spy_read_targets(engine, monkeypatch) -> list[object]:
    """Records the exporter of every buffer a lane reads into."""
    import ringio._engines.many as many

    targets: list[object] = []
    if engine.name == "thread":  # the generic lanes call pread
        real_pread = type(engine).pread

        async def spy(self, fd, b, offset, hint=None, **kw):
            targets.append(memoryview(b).obj)
            return await real_pread(self, fd, b, offset, hint, **kw)

        monkeypatch.setattr(type(engine), "pread", spy)
    else:
        real = many._pread

        def spy_op(fd, b, offset, **kw):
            targets.append(memoryview(b).obj)
            return real(fd, b, offset, **kw)

        monkeypatch.setattr(many, "_pread", spy_op)
    return targets


async def test_aligned_o_direct_reads_go_straight_into_the_callers_buffer(
    engine, big_file, monkeypatch
):
    path, payload = big_file
    offsets = [k * 4096 for k in (5, 0, 60, 3, 3, 17)]
    buf = ringio.aligned(4096 * len(offsets))
    async with await _open(path, True) as f:
        targets = _spy_read_targets(engine, monkeypatch)
        counts = await f.preadinto_many(buf, offsets, depth=4)
        assert counts == [4096] * len(offsets)
        assert bytes(buf) == b"".join(payload[o : o + 4096] for o in offsets)
        assert len(targets) == len(offsets)
        assert all(t is buf for t in targets)  # the parts themselves, no bounce
        # An unaligned part size goes through the lanes' aligned buffers instead.
        targets.clear()
        odd = bytearray(1000 * len(offsets))
        counts = await f.preadinto_many(odd, offsets, depth=4)
        assert counts == [1000] * len(offsets)
        assert bytes(odd) == b"".join(payload[o : o + 1000] for o in offsets)
        assert targets and not any(t is odd for t in targets)


async def test_a_depth_beyond_the_kernel_queue_waits_for_room(engine, big_file):
    # More reads in flight than the ring or AIO context holds: the rest wait in the
    # proactor (back-pressure) and start as completions make room.
    path, payload = big_file
    offsets = [(k * 7919) % SIZE for k in range(3000)]
    async with await _open(path, False) as f:
        hint = f._hint
        f._hint = engines.NowaitHint(read=False)  # every read through the queue
        try:
            got = await f.pread_many(100, offsets, depth=2500)
        finally:
            f._hint = hint
    assert got == _expected(payload, 100, offsets)


async def test_no_offsets_read_nothing(engine, big_file):
    path, _ = big_file
    async with await _open(path, False) as f:
        assert await f.pread_many(10, []) == []
        assert await f.preadinto_many(bytearray(0), []) == []


async def test_partly_cached_ranges_are_read_whole(engine, big_file):
    # RWF_NOWAIT returns the cached part of a range whose end is not cached: that
    # must not come back as a short read (os.pread would not return one).
    path, payload = big_file
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead
        os.pread(fd, 1, 0)  # caches page 0 alone
        data = ringio._core.pread_nowait(fd, 3 * 4096, 0)
        assert data is None or data == payload[: 3 * 4096]
    finally:
        os.close(fd)
    async with await _open(path, False) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(f.fileno(), 1, 8 * 4096)
        assert await f.pread(3 * 4096, 8 * 4096) == payload[8 * 4096 : 11 * 4096]
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        os.pread(f.fileno(), 1, 16 * 4096)
        got = await f.pread_many(2 * 4096, [16 * 4096, 0])
        assert got == [payload[16 * 4096 : 18 * 4096], payload[: 2 * 4096]]


# -- errors ----------------------------------------------------------------------------


async def test_bad_arguments_are_value_and_type_errors(engine, big_file):
    path, _ = big_file
    async with await _open(path, False) as f:
        with pytest.raises(ValueError, match="negative read size"):
            await f.pread_many(-1, [0])
        with pytest.raises(ValueError, match="negative offset -5"):
            await f.pread_many(10, [0, -5])
        with pytest.raises(ValueError, match="depth"):
            await f.pread_many(10, [0], depth=0)
        with pytest.raises(TypeError):
            await f.pread_many(10, [0.5])
        with pytest.raises(TypeError):
            await f.pread_many(10, "0123")
        with pytest.raises(TypeError):
            await f.pread_many("10", [0])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="writable"):
            await f.preadinto_many(b"x" * 20, [0, 10])
        with pytest.raises(ValueError, match="equal parts"):
            await f.preadinto_many(bytearray(21), [0, 10])
        with pytest.raises(TypeError):
            await f.preadinto_many(12, [0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="closed"):
        await f.pread_many(10, [0])
    with pytest.raises(ValueError, match="closed"):
        await f.preadinto_many(bytearray(10), [0])


async def test_a_write_only_file_refuses(engine, tmp_path):
    async with ringio.open(tmp_path / "w.bin", "wb", buffering=0) as f:
        with pytest.raises(io.UnsupportedOperation):
            await f.pread_many(10, [0])


async def test_kernel_errors_are_oserrors_with_the_fd(engine, tmp_path, big_file):
    dfd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError):
            await engine.pread_many(dfd, 10, [0, 10, 20], engines.NowaitHint(read=False))
    finally:
        os.close(dfd)
    path, _ = big_file
    fd = os.open(path, os.O_RDONLY)
    os.close(fd)  # a closed fd: EBADF from every engine
    with pytest.raises(OSError) as exc:
        await engine.pread_many(fd, 10, [0, 10])
    assert exc.value.errno == errno.EBADF


# -- cancellation and buffer ownership -------------------------------------------------


async def test_cancelling_keeps_the_buffers_until_the_completions_arrive(engine, big_file):
    path, payload = big_file
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = bytearray(4 * 4096)
        await cancel_with_completions_held(
            engine,
            lambda: engine.preadinto_many(
                fd, buf, [0, 4096, 8192, 12288], engines.NowaitHint(read=False), depth=4
            ),
            4,
            buf,
        )
        # The engine goes on serving reads.
        assert await engine.pread_many(fd, 5, [7]) == [payload[7:12]]
    finally:
        os.close(fd)


async def test_the_first_error_ends_the_call_and_stops_the_other_reads(
    engine, big_file, monkeypatch
):
    import ringio._engines.many as many

    path, payload = big_file
    fd = os.open(path, os.O_RDONLY)
    bad = os.open(path, os.O_WRONLY)  # reads of it fail with EBADF, in the kernel
    try:
        offsets = list(range(0, 64 * 4096, 4096))
        started: list[int] = []
        seen_at: list[int] = []  # len(started) when the failure reached its lane
        if engine.name == "thread":  # the generic lanes are tasks over pread
            real_pread = type(engine).pread
            failed, next_started = asyncio.Event(), asyncio.Event()

            async def failing(self, fd_, b, offset, hint=None, **kw):
                # The read after the failing one is on the other lane; it completes
                # before the failure reaches its lane and resumes after it.
                started.append(offset)
                if offset != 10 * 4096:
                    got = await real_pread(self, fd_, b, offset, hint, **kw)
                    if offset == 11 * 4096:
                        next_started.set()
                        await failed.wait()
                    return got
                try:
                    return await real_pread(self, bad, b, offset, hint, **kw)
                except OSError:
                    await next_started.wait()
                    seen_at.append(len(started))
                    failed.set()
                    raise

            monkeypatch.setattr(type(engine), "pread", failing)
        else:
            real = many._pread

            def failing_op(fd_, b, offset, **kw):
                started.append(offset)
                return real(bad if offset == 10 * 4096 else fd_, b, offset, **kw)

            monkeypatch.setattr(many, "_pread", failing_op)
        with pytest.raises(OSError) as exc:
            await engine.pread_many(fd, 4096, offsets, engines.NowaitHint(read=False), depth=2)
        assert exc.value.errno == errno.EBADF
        assert 10 * 4096 in started
        await asyncio.sleep(0.05)  # the other lane's read completes: no read follows it
        assert len(started) <= 13 < len(offsets)
        if seen_at:  # no lane starts a read once a lane's read has failed
            assert started[seen_at[0]:] == []
        monkeypatch.undo()
        assert await engine.pread_many(fd, 3, [5]) == [payload[5:8]]
    finally:
        os.close(fd)
        os.close(bad)


def _start_many_reads(engine, fd: int) -> asyncio.Future[list[bytes]]:
    """400 reads, 8 in flight, none tried inline."""
    offsets = [k * 512 for k in range(400)]
    return asyncio.ensure_future(
        engine.pread_many(fd, 512, offsets, engines.NowaitHint(read=False), depth=8)
    )


async def test_cancelling_mid_call_leaves_the_engine_usable(engine, big_file):
    path, payload = big_file
    fd = os.open(path, os.O_RDONLY)
    try:
        task = _start_many_reads(engine, fd)
        for _ in range(3):
            await asyncio.sleep(0)  # a few loop turns: some reads done, some in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        if engine.name != "thread":
            await until(lambda: engine._queue.in_flight == 0, "the cancelled reads ended")
        assert await engine.pread_many(fd, 4, [1, 2]) == [payload[1:5], payload[2:6]]
    finally:
        os.close(fd)


async def test_closing_the_engine_mid_call_ends_the_call(engine, big_file):
    path, _ = big_file
    fd = os.open(path, os.O_RDONLY)
    try:
        task = _start_many_reads(engine, fd)
        await asyncio.sleep(0)
        engine.close_engine()
        with pytest.raises((asyncio.CancelledError, ValueError)):
            await asyncio.wait_for(task, 10)
    finally:
        os.close(fd)
