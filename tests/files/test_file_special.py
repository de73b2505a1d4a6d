"""Pipes, FIFOs, cancellation, O_DIRECT, bad input and threads."""

from __future__ import annotations

import asyncio
import errno
import io
import mmap
import os
import random

import pytest
from tests.conftest import user_thread_count

import ringio


async def test_pipe_read_write(engine):
    r, w = os.pipe()
    async with ringio.open(r, "rb") as fr, ringio.open(w, "wb", buffering=0) as fw:
        assert not fr.seekable()
        with pytest.raises(io.UnsupportedOperation):
            await fr.seek(0)
        with pytest.raises(OSError):
            await fr.tell()
        await fw.write(b"line one\nline two\n")
        assert await fr.readline() == b"line one\n"
        assert await fr.read(4) == b"line"
        await fw.close()
        assert await fr.read() == b" two\n"


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
@pytest.mark.parametrize(
    "call",
    [
        lambda f: f.pread(4, 0),
        lambda f: f.preadinto(bytearray(4), 0),
        lambda f: f.pread_many(2, [0, 2]),
        lambda f: f.preadinto_many(bytearray(4), [0, 2]),
    ],
    ids=["pread", "preadinto", "pread_many", "preadinto_many"],
)
async def test_positioned_reads_of_a_pipe_raise_espipe_and_take_nothing(engine, buffering, call):
    # As os.pread does: a pipe has no offsets. The kernel queues would read it
    # as a stream instead (io_uring and AIO ignore the offset of a pipe).
    r, w = os.pipe()
    os.write(w, b"pipe")
    try:
        async with ringio.open(r, "rb", buffering=buffering, closefd=False) as f:
            with pytest.raises(OSError) as info:
                await call(f)
            assert info.value.errno == errno.ESPIPE
        assert os.read(r, 10) == b"pipe"  # every byte still in the pipe
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
async def test_a_positioned_write_to_a_pipe_raises_espipe(engine, buffering):
    r, w = os.pipe()
    try:
        async with ringio.open(w, "wb", buffering=buffering, closefd=False) as f:
            with pytest.raises(OSError) as info:
                await f.pwrite(b"data", 0)
            assert info.value.errno == errno.ESPIPE
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 10)  # nothing was written
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_write_bigger_than_the_pipe_while_this_loop_reads(engine, buffering):
    """A blocking pipe: the write must not wait inside a syscall for room that only
    this same loop's reader can make."""
    r, w = os.pipe()
    payload = os.urandom(1 << 20)  # 16 times the pipe's default capacity
    async with ringio.open(r, "rb") as fr, ringio.open(w, "wb", buffering=buffering) as fw:

        async def writer() -> None:
            view = memoryview(payload)
            while view:  # a raw (unbuffered) write may be partial, as FileIO's
                view = view[await fw.write(view) :]
            await fw.close()

        task = asyncio.ensure_future(writer())
        got = await asyncio.wait_for(fr.read(), timeout=20)
        await task
    assert got == payload


async def test_fifo_text(engine, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # Opening a FIFO blocks until the other end opens: open both ends at once.
    fr, fw = await asyncio.gather(
        ringio.open(fifo, encoding="utf-8"), ringio.open(fifo, "w", encoding="utf-8")
    )
    await fw.write("h\u00e9llo\nworld\n")
    await fw.close()
    assert [line async for line in fr] == ["h\u00e9llo\n", "world\n"]
    await fr.close()


async def test_cancel_pipe_read_then_data_arrives(engine):
    r, w = os.pipe()
    async with ringio.open(r, "rb", buffering=0) as f:
        task = asyncio.create_task(f.read(10))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        os.write(w, b"payload")
        assert await asyncio.wait_for(f.read(10), 5) == b"payload"
    os.close(w)


async def test_cancel_write_keeps_position_consistent(engine, tmp_path):
    """A write whose task is cancelled either landed or not; the position tells."""
    p = tmp_path / "c.bin"
    async with ringio.open(p, "wb") as f:
        await f.write(b"a" * 10)
        task = asyncio.create_task(f.write(b"b" * 100_000))  # over the buffer: real I/O
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        pos = await f.tell()
        await f.write(b"END")
    data = p.read_bytes()
    assert data.endswith(b"END")
    assert data[pos : pos + 3] == b"END"
    assert data[:10] == b"a" * 10


@pytest.mark.parametrize("case", ["aligned", "unaligned"])
async def test_direct(engine, tmp_path, case):
    p = tmp_path / "d.bin"
    payload = os.urandom(3 * 4096 + 123)
    p.write_bytes(payload)
    try:
        f = await ringio.open(p, "r+b", direct=True)
    except OSError as e:  # e.g. tmpfs refuses O_DIRECT
        pytest.skip(f"O_DIRECT refused here: {e}")
    async with f:
        if case == "aligned":
            buf = ringio.aligned(8192)
            assert await f.readinto(buf) == 8192
            assert bytes(buf) == payload[:8192]
            assert await f.pread(4096, 4096) == payload[4096:8192]
        else:
            await f.seek(5)
            assert await f.read(5000) == payload[5:5005]
            assert await f.pread(77, 4000) == payload[4000:4077]
            assert await f.pwrite(b"XYZ", 4094) == 3
            await f.seek(len(payload) - 10)
            await f.write(b"tail-grows-file")
            await f.flush()
            payload = payload[:4094] + b"XYZ" + payload[4097:-10] + b"tail-grows-file"
        assert await f.seek(0, os.SEEK_END) == len(payload)
    assert p.read_bytes() == payload


async def _open_direct(path, mode):
    try:
        return await ringio.open(path, mode, direct=True)
    except OSError as e:  # e.g. tmpfs refuses O_DIRECT
        pytest.skip(f"O_DIRECT refused here: {e}")


async def test_direct_preads_run_concurrently_and_leave_the_position(engine, tmp_path):
    p = tmp_path / "d.bin"
    payload = os.urandom(64 * 4096)
    p.write_bytes(payload)
    f = await _open_direct(p, "rb")
    async with f:
        await f.seek(100)
        in_flight = high = 0
        eng = f.raw._eng  # the engine the raw file under the buffered one uses
        real = eng.pread
        # Each read waits until all 32 have reached the engine: a fast thread could
        # otherwise finish one before the last started (seen on 3.14), and a lock
        # between them now fails the wait instead of passing unseen.
        all_in = asyncio.Event()

        async def counting(*args, **kwargs):
            nonlocal in_flight, high
            in_flight += 1
            high = max(high, in_flight)
            if in_flight == 32:
                all_in.set()
            try:
                await asyncio.wait_for(all_in.wait(), 5)
                return await real(*args, **kwargs)
            finally:
                in_flight -= 1

        eng.pread = counting
        # The reads the engine starts at the call (below) take the general path here.
        eng.start_direct_read = lambda *args: None
        try:
            # Aligned and unaligned spans, 32 at once.
            spans = [(i * 4096 + (i % 3) * 7, 4096 - (i % 5) * 100) for i in range(32)]
            got = await asyncio.gather(*(f.pread(n, off) for off, n in spans))
        finally:
            del eng.pread
            del eng.start_direct_read
        assert got == [payload[off : off + n] for off, n in spans]
        assert high == 32  # no lock between them: the device sees them all at once
        assert await f.tell() == 100
        assert await f.read(10) == payload[100:110]


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
async def test_direct_pread_returns_what_os_pread_does(engine, tmp_path, buffering):
    """Differential: O_DIRECT preads (on the kernel engines started at the call, into
    an aligned bounce buffer of their own) against os.pread, aligned or not, across
    and past the end, 32 at a time; then the position and a buffered write."""
    p = tmp_path / "d.bin"
    size = 40 * 4096 + 1234
    p.write_bytes(os.urandom(size))
    rng = random.Random(7)
    spans = [(rng.randrange(size + 6000), rng.choice([1, 77, 4096, 5000, 65536]))
             for _ in range(200)]  # fmt: skip
    spans += [(0, 4096), (4096, 8192), (size - 1, 4096), (size, 10), (size + 4096, 4096)]
    fd = os.open(p, os.O_RDONLY)
    try:
        f = await _open_direct_mode(p, "r+b", buffering)
        async with f:
            await f.seek(3)
            for k in range(0, len(spans), 32):
                part = spans[k : k + 32]
                reads = [f.pread(n, off) for off, n in part]
                assert all(asyncio.iscoroutine(r) for r in reads)
                got = await asyncio.gather(*reads)
                assert got == [os.pread(fd, n, off) for off, n in part]
            assert await f.pread(0, 4096) == b""
            assert await f.tell() == 3
            await f.write(b"new")  # buffered: a pread flushes it first
            assert await f.pread(6, 0) == os.pread(fd, 3, 0) + b"new"
            with pytest.raises(ValueError, match="negative"):
                await f.pread(-1, 0)
            with pytest.raises(ValueError, match="negative"):
                await f.pread(4096, -4096)
            with pytest.raises(TypeError):
                await f.pread(4096, 1.5)
    finally:
        os.close(fd)
    with pytest.raises(ValueError, match="closed"):
        await f.pread(4096, 0)


async def _open_direct_mode(path, mode, buffering):
    try:
        return await ringio.open(path, mode, buffering=buffering, direct=True)
    except OSError as e:  # e.g. tmpfs refuses O_DIRECT
        pytest.skip(f"O_DIRECT refused here: {e}")


async def test_direct_whole_block_pwrites_run_concurrently(engine, tmp_path):
    p = tmp_path / "d.bin"
    p.write_bytes(bytes(16 * 4096))
    f = await _open_direct(p, "r+b")
    blocks = [os.urandom(4096) for _ in range(16)]
    async with f:
        # bytes (unaligned memory) at aligned offsets: whole blocks, no read-back.
        assert await asyncio.gather(
            *(f.pwrite(b, i * 4096) for i, b in enumerate(blocks))
        ) == [4096] * 16
        assert await f.pwrite(b"partial", 4096 + 10) == 7  # the locked path still
        assert await f.tell() == 0
    blocks[1] = blocks[1][:10] + b"partial" + blocks[1][17:]
    assert p.read_bytes() == b"".join(blocks)


def _spy_bounce_alignment(engine, monkeypatch) -> tuple[list[int], list[int]]:
    """Records the address of every ringio-made aligned buffer the engine reads into
    or writes from (pread, pwrite, a batch's lanes), and the memory alignment it is
    asked to give the bounce buffer of an O_DIRECT pread it starts at the call."""
    import ringio._engines.many as many

    addresses: list[int] = []
    asked: list[int] = []

    def note(buf) -> None:
        obj = memoryview(buf).obj
        if isinstance(obj, ringio.AlignedBuffer):
            addresses.append(obj.address)

    def wrap(real):
        def spy(self, fd, buf, *args, **kwargs):
            note(buf)
            return real(self, fd, buf, *args, **kwargs)

        return spy

    real_started = type(engine).start_direct_read

    def spy_started(self, fd, target, offset, hint, off_align, mem_align, *args):
        if isinstance(target, int):
            asked.append(mem_align)
        return real_started(self, fd, target, offset, hint, off_align, mem_align, *args)

    real_op = many._pread

    def spy_op(fd, buf, offset, **kwargs):
        note(buf)
        return real_op(fd, buf, offset, **kwargs)

    monkeypatch.setattr(type(engine), "pread", wrap(type(engine).pread))
    monkeypatch.setattr(type(engine), "pwrite", wrap(type(engine).pwrite))
    monkeypatch.setattr(type(engine), "start_direct_read", spy_started)
    monkeypatch.setattr(many, "_pread", spy_op)
    return addresses, asked


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
async def test_o_direct_bounce_buffers_start_on_a_page(engine, tmp_path, monkeypatch, buffering):
    """Every bounce buffer of an O_DIRECT file starts on a page, whatever smaller
    alignment the device accepts: a 4 KiB read into a buffer across a page boundary
    pins two pages and is two segments for the device (0.8x the reads per second on
    a virtio disk)."""
    p = tmp_path / "d.bin"
    payload = os.urandom(16 * 4096 + 321)
    p.write_bytes(payload)
    f = await _open_direct_mode(p, "r+b", buffering)
    addresses, asked = _spy_bounce_alignment(engine, monkeypatch)
    async with f:
        # pread: whole blocks, a part of one, across blocks; then the general path.
        for off, n in ((4096, 4096), (4000, 77), (100, 9000)):
            assert await f.pread(n, off) == payload[off : off + n]
        eng = getattr(f, "raw", f)._eng
        eng.start_direct_read = lambda *args: None
        try:
            assert await f.pread(4096, 8192) == payload[8192 : 8192 + 4096]
        finally:
            del eng.start_direct_read
        # A batch through the lanes, a read and a write at the position, and a
        # whole-block pwrite of bytes.
        offsets = [7, 4096 * 3, 5000]
        assert await f.pread_many(100, offsets, depth=2) == [payload[o : o + 100] for o in offsets]
        await f.seek(5)
        assert await f.read(5000) == payload[5:5005]
        await f.seek(4090)
        assert await f.write(b"XYZ") == 3
        await f.flush()
        block = os.urandom(4096)
        assert await f.pwrite(block, 4096 * 2) == 4096
    assert p.read_bytes() == payload[:4090] + b"XYZ" + payload[4093:8192] + block + payload[12288:]
    # Seen: the three preads asked to start at the call, and at least the general
    # path's bounce, two lanes, the read's, the write's read-back and write, and the
    # pwrite's.
    assert len(asked) == 3
    assert len(addresses) >= 7
    page = mmap.PAGESIZE
    assert [a % page for a in addresses] == [0] * len(addresses)
    assert [a % page for a in asked] == [0] * len(asked)


@pytest.mark.parametrize(
    ("kwargs", "exc", "closed"),
    [
        ({"encoding": "no-such-codec"}, LookupError, True),
        ({"encoding": "hex"}, LookupError, True),
        ({"buffering": 0}, ValueError, True),
        ({"newline": "x"}, ValueError, True),
        ({"newline": 5}, TypeError, False),
    ],
)
async def test_refused_text_args_close_a_given_fd_as_io_open_does(
    engine, tmp_path, kwargs, exc, closed
):
    p = tmp_path / "t.txt"
    p.write_text("x")
    for opener in (io.open, ringio.open):
        fd = os.open(p, os.O_RDONLY)
        with pytest.raises(exc):
            result = opener(fd, "r", **kwargs)
            if opener is ringio.open:
                await result
        try:
            os.fstat(fd)
            still_open = True
            os.close(fd)
        except OSError:
            still_open = False
        assert still_open is not closed, (opener, kwargs)


async def test_bad_input(engine, tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError) as ei:
        await ringio.open(missing)
    assert ei.value.filename == missing or ei.value.filename == str(missing)
    with pytest.raises(IsADirectoryError):
        await ringio.open(tmp_path)
    with pytest.raises(IsADirectoryError):
        await ringio.open(tmp_path, "w")
    ro = tmp_path / "ro.txt"
    ro.write_text("x")
    if os.geteuid() != 0:
        ro.chmod(0o400)
        with pytest.raises(PermissionError):
            await ringio.open(ro, "w")
    for mode in ("rw", "z", "rr", "tb", ""):
        with pytest.raises(ValueError):
            await ringio.open(ro, mode)
    with pytest.raises(ValueError):
        await ringio.open(ro, "r", buffering=0)
    with pytest.raises(ValueError):
        await ringio.open(ro, "rb", encoding="utf-8")
    with pytest.raises(ValueError):
        await ringio.open(ro, "r", newline="x")
    with pytest.raises(LookupError):
        await ringio.open(ro, "r", encoding="no-such-codec")
    with pytest.raises(ValueError):
        await ringio.open(ro, "r", closefd=False)
    with pytest.raises(OSError):
        await ringio.open(987654, "rb")
    async with ringio.open(ro, "rb") as f:
        with pytest.raises(io.UnsupportedOperation):
            await f.write(b"x")
        with pytest.raises(TypeError):
            await f.read("5")
    f = await ringio.open(ro, "rb")
    await f.close()
    await f.close()  # twice is fine
    for call in (f.read, f.readline, f.tell, f.flush):
        with pytest.raises(ValueError, match="closed file"):
            await call()
    with pytest.raises(ValueError, match="closed file"):
        f.fileno()
    t = await ringio.open(ro, encoding="utf-8")
    await t.close()
    with pytest.raises(ValueError, match="closed file"):
        await t.read()


async def test_no_user_threads(engine_name, tmp_path):
    """uring: nothing starts a thread, open and close included. aio: open/close use
    the engine's fallback pool (kernel AIO has no form for them), so only the I/O on
    open files is checked there."""
    if engine_name == "thread":
        pytest.skip("the thread engine is the thread fallback")
    await asyncio.sleep(0.05)  # let threads of earlier tests wind down
    p = tmp_path / "t.txt"
    p.write_text("a\nb\n" * 10000)
    before = user_thread_count()
    w = await ringio.open(p, "a", encoding="utf-8")
    r = await ringio.open(p, encoding="utf-8")
    rb = await ringio.open(p, "r+b")
    if engine_name == "aio":
        before = user_thread_count()
    await w.write("c\n" * 10000)
    await w.flush()
    assert len([line async for line in r]) == 30000
    await rb.pread(10, 5)
    await rb.pwrite(b"x", 3)
    await rb.fsync()
    assert user_thread_count() <= before
    for f in (w, r, rb):
        await f.close()
    if engine_name == "uring":
        assert user_thread_count() <= before
