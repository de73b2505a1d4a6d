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
    """Records the exporter of every buffer the engine's pread reads into."""
    targets: list[object] = []
    real = type(engine).pread

    def spy(self, fd, buf, offset, hint=None, **kw):
        targets.append(memoryview(buf).obj)
        return real(self, fd, buf, offset, hint, **kw)

    monkeypatch.setattr(type(engine), "pread", spy)
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
