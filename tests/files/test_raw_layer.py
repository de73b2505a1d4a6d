"""A buffered file wraps an unbuffered one, ``f.raw``, as io's buffered files wrap a
``FileIO``: what a user sees through both layers, against the builtin's where the
builtin defines it."""

from __future__ import annotations

import asyncio
import gc
import io
import os
import random
import warnings

import pytest
from tests.files.streams import blocked, close_writer, run, send, stream  # noqa: F401

import ringio

PAYLOAD = random.Random(11).randbytes(100_000)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "data.bin"
    p.write_bytes(PAYLOAD)
    return p


@pytest.mark.parametrize("mode", ["rb", "r+b", "wb", "ab"])
async def test_raw_is_an_unbuffered_file_on_the_same_fd(engine, path, mode):
    with open(path, mode) as ref:
        ref_raw_type, ref_mode = type(ref.raw), ref.raw.mode
    path.write_bytes(PAYLOAD)
    async with ringio.open(path, mode) as f:
        raw = f.raw
        assert ref_raw_type is io.FileIO
        assert isinstance(raw, ringio.AsyncFileIO)
        assert not isinstance(raw, ringio.AsyncBufferedFile)
        assert not isinstance(f, ringio.AsyncFileIO)
        assert f.raw is raw
        assert raw.fileno() == f.fileno()
        assert raw.name == f.name == str(path)
        assert raw.mode == f.mode == ref_mode
        assert (raw.readable(), raw.writable(), raw.seekable()) == (
            f.readable(), f.writable(), f.seekable(),
        )  # fmt: skip
        assert not raw.closed


async def test_a_text_files_buffer_wraps_the_raw_file(engine, path):
    async with ringio.open(path, "r", encoding="latin-1") as t:
        assert isinstance(t.buffer, ringio.AsyncBufferedFile)
        assert isinstance(t.buffer.raw, ringio.AsyncFileIO)
        assert t.buffer.raw.fileno() == t.fileno()
    assert t.buffer.raw.closed


async def test_an_unbuffered_file_has_no_raw(engine, path):
    with open(path, "rb", buffering=0) as ref:
        assert not hasattr(ref, "raw")
    async with ringio.open(path, "rb", buffering=0) as f:
        assert isinstance(f, ringio.AsyncFileIO)
        assert not hasattr(f, "raw")


async def test_closing_the_buffered_file_flushes_and_closes_the_raw_one(engine, path):
    f = await ringio.open(path, "wb")
    raw = f.raw
    await f.write(b"abc")
    await f.close()
    assert f.closed and raw.closed
    assert path.read_bytes() == b"abc"
    with pytest.raises(ValueError, match="closed file"):
        raw.fileno()
    with pytest.raises(ValueError, match="closed file"):
        await raw.read(1)
    await raw.close()  # again: nothing to do
    await f.close()


async def test_closing_the_raw_file_closes_the_buffered_one(engine, path):
    with open(path, "rb") as ref:
        ref.raw.close()
        assert ref.closed
    f = await ringio.open(path, "rb")
    await f.raw.close()
    assert f.closed
    with pytest.raises(ValueError, match="closed file"):
        await f.read(1)
    await f.close()


async def test_writes_reach_the_raw_file_when_flushed(engine, path):
    """As with io: the raw file sees what was written through the buffered one once
    it is flushed, and writes through the raw one go where it is."""
    path.write_bytes(b"")
    with open(path, "r+b") as ref:
        ref.write(b"hello")
        ref_before = ref.raw.read()  # nothing flushed yet: the file is empty
        ref.flush()
        ref.raw.seek(0)
        ref_after = ref.raw.read()
    assert (ref_before, ref_after) == (b"", b"hello")
    path.write_bytes(b"")
    async with ringio.open(path, "r+b") as f:
        await f.write(b"hello")
        assert await f.raw.pread(5, 0) == b""
        assert await f.raw.read() == b""
        await f.flush()
        assert await f.raw.pread(5, 0) == b"hello"
        assert await f.raw.tell() == 5
        await f.raw.write(b" world")
        await f.write(b"!")
        assert await f.tell() == 12
    assert path.read_bytes() == b"hello world!"


async def test_a_raw_read_continues_after_the_buffered_files_read_ahead(engine, path):
    # A buffer smaller than the file (3.14's default, 128 KiB, holds all of it).
    with open(path, "rb", buffering=8192) as ref:
        ref.read(5)
        ref_raw_pos = ref.raw.tell()
        assert ref.raw.read(10) == PAYLOAD[ref_raw_pos : ref_raw_pos + 10]
        assert ref.read(ref_raw_pos - 5) == PAYLOAD[5:ref_raw_pos]
    async with ringio.open(path, "rb", buffering=8192) as f:
        assert await f.read(5) == PAYLOAD[:5]
        raw_pos = await f.raw.tell()
        assert 5 < raw_pos <= len(PAYLOAD)  # after the read-ahead
        assert await f.raw.read(10) == PAYLOAD[raw_pos : raw_pos + 10]
        # The read-ahead is still the buffered file's.
        assert await f.read(raw_pos - 5) == PAYLOAD[5:raw_pos]
        assert await f.tell() == raw_pos + 10  # as io: after what the raw file read
        assert await f.read(3) == PAYLOAD[raw_pos + 10 : raw_pos + 13]


async def _sync(f, ref) -> None:
    """Brings each stack's raw position back to its logical one, dropping
    read-ahead: io's BufferedRandom.flush() does it, ringio's seek() does."""
    await f.seek(await f.tell())
    ref.flush()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("buffering", [16, -1])
async def test_operations_through_both_layers_match_the_builtins(engine, path, buffering, seed):
    """A random sequence of operations, each through the buffered file or its raw
    one (the buffered file synced before the raw one is used), gives the same
    results, positions and file contents as the builtin's BufferedRandom and its
    FileIO."""
    data = PAYLOAD[:5000]
    path.write_bytes(data)
    ref_path = path.with_name("ref.bin")
    ref_path.write_bytes(data)
    rng = random.Random(seed)
    ref = open(ref_path, "r+b", buffering=buffering)
    f = await ringio.open(path, "r+b", buffering=buffering)
    try:
        for step in range(150):
            op = rng.choice(["read", "readline", "write", "raw.read", "raw.write",
                             "raw.seek", "raw.tell", "tell", "raw.readall"])  # fmt: skip
            if op == "read":
                n = rng.choice([1, 5, 100, 3000])
                assert await f.read(n) == ref.read(n), step
                await _sync(f, ref)
            elif op == "readline":
                assert await f.readline() == ref.readline(), step
                await _sync(f, ref)
            elif op == "write":
                chunk = rng.randbytes(rng.choice([1, 7, 40, 500]))
                assert await f.write(chunk) == ref.write(chunk), step
                await f.flush()
                ref.flush()
            elif op == "raw.read":
                n = rng.choice([1, 5, 100, 3000])
                assert await f.raw.read(n) == ref.raw.read(n), step
            elif op == "raw.readall":
                assert await f.raw.read() == ref.raw.read(), step
            elif op == "raw.write":
                chunk = rng.randbytes(rng.choice([1, 7, 40, 500]))
                assert await f.raw.write(chunk) == ref.raw.write(chunk), step
            elif op == "raw.seek":
                k = rng.randrange(0, 6000)
                assert await f.raw.seek(k) == ref.raw.seek(k), step
            elif op == "raw.tell":
                assert await f.raw.tell() == ref.raw.tell(), step
            else:
                assert await f.tell() == ref.tell(), step
        await f.close()
        ref.close()
        assert path.read_bytes() == ref_path.read_bytes()
    finally:
        ref.close()
        await f.close()


async def test_an_op_through_the_raw_file_waits_for_one_through_the_buffered_file(
    engine, path
):
    """One lock for both layers: their ops run one after the other, in the order
    they were started."""
    path.write_bytes(b"")
    async with ringio.open(path, "r+b", buffering=16) as f:
        big = bytes(range(256)) * 64
        first = asyncio.ensure_future(f.write(big))  # past the buffer: straight out
        second = asyncio.ensure_future(f.raw.write(b"tail"))
        assert await first == len(big)
        assert await second == 4
    assert path.read_bytes() == big + b"tail"


async def test_a_collected_buffered_file_warns_once_naming_itself(engine, path):
    f = await ringio.open(path, "rb")
    fd = f.fileno()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del f
        gc.collect()
    found = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(found) == 1 and "AsyncBufferedFile" in found[0], found
    with pytest.raises(OSError):
        os.fstat(fd)


# -- streams: bytes a cancelled read took ---------------------------------------------


@pytest.mark.parametrize("kind", ["pipe", "socket"])
@pytest.mark.parametrize("cancelled", ["raw.read()", "raw.readline()"])
def test_bytes_a_cancelled_raw_read_took_are_the_next_the_buffered_file_reads(
    run, kind, cancelled  # noqa: F811
):
    """Bytes a cancelled read through ``f.raw`` took stay in the raw file: the next
    read returns them first, also when it goes through the buffered file."""

    async def main() -> None:
        r, w = stream(kind)
        try:
            async with ringio.open(r, "rb") as f:
                send(w, b"ab")
                op = f.raw.read() if cancelled == "raw.read()" else f.raw.readline()
                task = asyncio.ensure_future(op)
                await blocked(task)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                send(w, b"cd\n")
                close_writer(w)
                w = None
                assert await asyncio.wait_for(f.read(1), 5) == b"a"
                assert await asyncio.wait_for(f.read(), 5) == b"bcd\n"
        finally:
            if w is not None:
                close_writer(w)

    run(main())


@pytest.mark.parametrize("kind", ["pipe", "socket"])
def test_a_cancelled_buffered_read_loses_no_byte_the_builtin_returns(run, kind):  # noqa: F811
    """The same bytes through a pipe to io's BufferedReader and to ringio's, whose
    reads are cancelled while they wait: the bytes read, put together, are the
    builtin's."""
    payload = random.Random(3).randbytes(3000).replace(b"\n", b"-")
    pieces = [payload[i : i + 700] for i in range(0, len(payload), 700)]

    ref_r, ref_w = os.pipe()
    with open(ref_r, "rb") as ref:
        for piece in pieces:
            os.write(ref_w, piece)
        os.close(ref_w)
        expected = b"".join(iter(lambda: ref.read(1000), b""))

    async def main() -> None:
        r, w = stream(kind)
        got = []
        try:
            async with ringio.open(r, "rb", buffering=8192) as f:
                for k, piece in enumerate(pieces):
                    send(w, piece)
                    # Waits for more than will ever arrive: it took the piece and
                    # is cancelled, so the piece is the next read's. (5000: through
                    # the read buffer; 10000: straight from the raw file.)
                    task = asyncio.ensure_future(f.read((5000, 10_000)[k % 2]))
                    await blocked(task)
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                    got.append(await asyncio.wait_for(f.read(1), 5))
                close_writer(w)
                w = None
                got.append(await asyncio.wait_for(f.read(), 5))
        finally:
            if w is not None:
                close_writer(w)
        assert b"".join(got) == expected == payload

    run(main())
