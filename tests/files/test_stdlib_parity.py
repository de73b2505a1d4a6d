"""Where ringio.open's objects must answer as io.open's do: utf-16/32 cookies, seeks past
what the kernel allows, non-contiguous buffers, the default buffer size, misuse
messages, ResourceWarnings."""

from __future__ import annotations

import errno
import gc
import os
import warnings

import pytest

import ringio


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-le", "utf-8-sig"])
@pytest.mark.parametrize("mode", ["r", "w+"])
async def test_seek_to_a_cookie_before_any_read(engine, tmp_path, encoding, mode):
    """A tell() cookie from one object, then seek() to it on a fresh one before any
    read: the decoder must start in the cookie's state (not expect a BOM there)."""
    path = tmp_path / "t.txt"
    with open(path, "w", encoding=encoding) as f:
        f.write("first\nsecond\nthird\n")
    with open(path, encoding=encoding) as f:
        f.readline()
        cookie = f.tell()
        want = [f.readline(), f.readline()]
    if mode == "w+":
        async with ringio.open(path, "w+", encoding=encoding) as f:
            await f.write("first\nsecond\nthird\n")
            assert await f.seek(cookie) == cookie
            assert [await f.readline(), await f.readline()] == want
            await f.seek(0)
            assert await f.readline() == "first\n"
        return
    async with ringio.open(path, encoding=encoding) as f:
        assert await f.seek(cookie) == cookie
        assert [await f.readline(), await f.readline()] == want
        assert await f.tell() == os.path.getsize(path)


@pytest.mark.parametrize("buffering", [0, -1])
async def test_seek_past_what_the_kernel_allows(engine, tmp_path, buffering):
    path = tmp_path / "b"
    path.write_bytes(b"abc")
    want = []
    with open(path, "rb+", buffering=buffering) as f:
        for args in [(1 << 62,), (2, 0), ((1 << 63) - 1,), (2, 0), ((1 << 63) - 3,), (5, 1)]:
            try:
                want.append(f.seek(*args))
            except OSError as e:
                want.append(e.errno)
        with pytest.raises((OverflowError, ValueError)) as std:
            f.seek(1 << 63)
    assert errno.EINVAL in want  # this filesystem has a limit below 2**63
    async with ringio.open(path, "rb+", buffering=buffering) as f:
        got = []
        for args in [(1 << 62,), (2, 0), ((1 << 63) - 1,), (2, 0), ((1 << 63) - 3,), (5, 1)]:
            try:
                got.append(await f.seek(*args))
            except OSError as e:
                got.append(e.errno)
        assert got == want
        with pytest.raises(std.type) as e:
            await f.seek(1 << 63)
        assert str(e.value) == str(std.value)
        # The position is where the last good seek put it, and writes work there.
        assert await f.tell() == want[-1] == 7
        await f.write(b"Z")
    assert path.read_bytes() == b"abc\0\0\0\0Z"


@pytest.mark.parametrize("buffering", [0, -1, 8])
async def test_write_of_a_non_contiguous_memoryview(engine, tmp_path, buffering):
    view = memoryview(bytearray(b"abcdefgh"))[::2]
    with open(tmp_path / "std", "wb", buffering=buffering) as f:
        with pytest.raises(BufferError) as std:
            f.write(view)
    async with ringio.open(tmp_path / "b", "wb", buffering=buffering) as f:
        with pytest.raises(BufferError) as e:
            await f.write(view)
        assert str(e.value) == str(std.value)
        await f.write(b"ok")
    assert (tmp_path / "b").read_bytes() == b"ok"


async def test_unflushed_writes_reach_the_file_when_the_builtins_do(engine, tmp_path):
    """The default buffer size is the running Python's open()'s (the filesystem's
    block size up to 3.13, at least io.DEFAULT_BUFFER_SIZE, 128 KiB, from 3.14), and
    a write is buffered, flushed first, or written through as io's BufferedWriter
    does it: what the file holds before a flush shows both."""
    probe = tmp_path / "probe"
    probe.write_bytes(bytes(300_000))
    with open(probe, "rb") as f:
        bs = len(f.peek(1))  # a fresh reader fills its whole buffer
    sizes = [100, 5000, 3000, 20_000, 60_000, 50_000, 200_000, 1, bs - 1, 1, bs, bs, 1,
             bs + 1, bs // 2, bs // 2, bs // 2 + 1, 2 * bs, bs - 1, 2]  # fmt: skip
    ours, ref_path = tmp_path / "ours", tmp_path / "ref"
    with open(ref_path, "wb") as ref:
        async with ringio.open(ours, "wb") as f:
            for step, n in enumerate(sizes):
                data = os.urandom(n)
                ref.write(data)
                await f.write(data)
                assert os.path.getsize(ours) == os.path.getsize(ref_path), (step, n, bs)
    assert ours.read_bytes() == ref_path.read_bytes()


async def test_using_the_opener_without_await_says_how(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"data")
    f = ringio.open(path, "rb")
    for name in ("read", "write", "readline", "close", "seek"):
        with pytest.raises(AttributeError) as e:
            getattr(f, name)
        msg = str(e.value)
        assert f"'{name}'" in msg
        assert "await ringio.open(" in msg and "async with ringio.open(" in msg
    assert not hasattr(f, "name")
    # The right way still works on the same object.
    g = await f
    assert await g.read() == b"data"
    await g.close()


def test_resource_warning_names_the_text_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("x")

    async def leak() -> str:
        f = await ringio.open(path, encoding="utf-8")
        fd = f.fileno()
        text = repr(f)
        del f
        gc.collect()
        with pytest.raises(OSError):
            os.fstat(fd)  # closed with the object
        return text

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import asyncio

        text = asyncio.run(leak())
    found = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert str(found[0].message) == f"unclosed file {text}"
    assert "AsyncTextFile" in text


@pytest.mark.parametrize("buffering", [0, -1, 64])
async def test_readinto_targets_as_the_builtin_takes_them(engine, tmp_path, buffering):
    """After a short read (a buffered file then holds bytes ahead), `readinto` of
    each kind of target: what it returns, the bytes it fills, the error it raises."""
    import array

    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 40)

    def targets() -> list:
        return [bytearray(7), memoryview(bytearray(20))[4:12], array.array("i", [0] * 3),
                bytearray(0), b"readonly", memoryview(bytearray(8))[::2],
                bytearray(50), bytearray(10_000)]  # fmt: skip

    def outcome(call) -> object:
        try:
            return call()
        except (TypeError, BufferError) as e:
            return _error(e)

    with open(path, "rb", buffering=buffering) as f:
        f.read(3)
        want = []
        for t in targets():
            want.append((outcome(lambda t=t: f.readinto(t)), bytes(t), f.tell()))
    async with ringio.open(path, "rb", buffering=buffering) as f:
        await f.read(3)
        got = []
        for t in targets():
            got.append((await _aoutcome(f.readinto(t)), bytes(t), await f.tell()))
    assert got == want


async def _aoutcome(awaitable) -> object:
    try:
        return await awaitable
    except (TypeError, BufferError) as e:
        return _error(e)


def _error(e: Exception) -> tuple[type, str]:
    """The error's type and what its message says the argument must be: FileIO's
    names the argument's position from CPython 3.12 ("argument 1 must be"), the
    buffered file's does not."""
    return type(e), str(e).split(" must be ")[-1]
