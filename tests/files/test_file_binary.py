"""ringio.open in binary mode, against the builtin open() as the reference."""

from __future__ import annotations

import io
import os
import random

import pytest

import ringio

PAYLOAD = random.Random(7).randbytes(200_000).replace(b"\x00", b"\n")


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "data.bin"
    p.write_bytes(PAYLOAD)
    return p


async def test_read_all_and_sizes(engine, path):
    async with ringio.open(path, "rb") as f:
        assert isinstance(f, ringio.AsyncBufferedFile)
        assert await f.read(10) == PAYLOAD[:10]
        assert await f.tell() == 10
        assert await f.read(0) == b""
        assert await f.read(100_000) == PAYLOAD[10:100_010]
        assert await f.read() == PAYLOAD[100_010:]
        assert await f.read() == b""
        assert await f.read(5) == b""
        assert await f.tell() == len(PAYLOAD)
    assert f.closed


@pytest.mark.parametrize("buffering", [0, 7, -1])
async def test_random_ops_match_stdlib(engine, path, buffering):
    """A seeded random sequence of reads, writes, seeks and truncates on 'r+b'
    gives the same results, positions and file contents as the builtin."""
    ref_path = path.with_name("ref.bin")
    ref_path.write_bytes(PAYLOAD[:5000])
    path.write_bytes(PAYLOAD[:5000])
    rng = random.Random(buffering)
    ref = open(ref_path, "r+b", buffering=buffering)
    f = await ringio.open(path, "r+b", buffering=buffering)
    try:
        for step in range(300):
            op = rng.choice(["read", "read", "write", "seek", "readline", "tell", "truncate",
                             "readinto", "flush", "read1"])  # fmt: skip
            if op == "read":
                n = rng.choice([-1, 0, 1, 5, 100, 3000])
                assert await f.read(n) == ref.read(n), step
            elif op == "read1" and buffering:
                n = rng.choice([1, 5, 100])
                got = await f.read1(n)
                want = ref.read(len(got))
                assert got == want, step
            elif op == "readline":
                n = rng.choice([-1, 3, 50])
                assert await f.readline(n) == ref.readline(n), step
            elif op == "readinto":
                a, b = bytearray(rng.choice([1, 10, 500])), None
                b = bytearray(len(a))
                assert await f.readinto(a) == ref.readinto(b)
                assert a == b
            elif op == "write":
                data = os.urandom(rng.choice([1, 3, 20, 2000]))
                assert await f.write(data) == ref.write(data), step
            elif op == "seek":
                whence = rng.choice([0, 1, 2])
                off = rng.randrange(0, 6000) if whence == 0 else rng.randrange(-50, 50)
                try:
                    want = ref.seek(off, whence)
                except OSError:
                    with pytest.raises(OSError):
                        await f.seek(off, whence)
                else:
                    assert await f.seek(off, whence) == want, step
            elif op == "tell":
                assert await f.tell() == ref.tell(), step
            elif op == "truncate":
                size = rng.choice([None, rng.randrange(0, 6000)])
                assert await f.truncate(size) == ref.truncate(size), step
            else:
                await f.flush()
                ref.flush()
            assert await f.tell() == ref.tell(), (step, op)
    finally:
        ref.close()
        await f.close()
    assert path.read_bytes() == ref_path.read_bytes()


async def test_lines_and_iteration(engine, path):
    with open(path, "rb") as ref:
        want = list(ref)
    assert len(want) > 100
    async with ringio.open(path, "rb") as f:
        assert [line async for line in f] == want
    async with ringio.open(path, "rb") as f:
        assert await f.readline() == want[0]
        assert await f.readlines(hint=1) == [want[1]]
        assert await f.readlines() == want[2:]
        assert await f.readline() == b""


async def test_modes_write_append_exclusive(engine, tmp_path):
    p = tmp_path / "w.bin"
    async with ringio.open(p, "wb") as f:
        assert f.mode == "wb" and f.writable() and not f.readable()
        assert await f.write(b"hello ") == 6
        await f.writelines([b"wor", bytearray(b"ld"), memoryview(b"!")])
        with pytest.raises(io.UnsupportedOperation):
            await f.read()
    assert p.read_bytes() == b"hello world!"
    async with ringio.open(p, "ab") as f:
        assert await f.tell() == 12
        await f.write(b"++")
        assert await f.tell() == 14
        await f.seek(0)
        await f.write(b"--")  # O_APPEND: still at the end
    assert p.read_bytes() == b"hello world!++--"
    async with ringio.open(p, "a+b") as f:
        await f.seek(0)
        assert await f.read(5) == b"hello"
    with pytest.raises(FileExistsError):
        await ringio.open(p, "xb")
    async with ringio.open(tmp_path / "new.bin", "xb") as f:
        assert f.mode == "xb"
        await f.write(b"x")
    async with ringio.open(p, "wb") as f:
        pass
    assert p.read_bytes() == b""  # 'w' truncates


async def test_unbuffered_is_fileio(engine, path):
    async with ringio.open(path, "rb", buffering=0) as f:
        assert type(f) is ringio.AsyncFileIO
        assert await f.read(10) == PAYLOAD[:10]
        assert await f.readall() == PAYLOAD[10:]
    async with ringio.open(path, "r+b", buffering=0) as f:
        assert await f.write(b"abc") == 3
        assert await f.tell() == 3
    assert path.read_bytes()[:3] == b"abc"


async def test_surface(engine, path):
    async with ringio.open(str(path).encode(), "rb") as f:
        assert f.name == str(path).encode()
        assert f.mode == "rb"
        assert f.readable() and not f.writable() and f.seekable() and not f.isatty()
        assert isinstance(f.fileno(), int)
        assert await f.pread(4, 100) == PAYLOAD[100:104]
        assert await f.tell() == 0  # pread leaves the position alone
        a, b = bytearray(3), bytearray(5)
        assert await f.readv([a, b]) == 8
        assert bytes(a + b) == PAYLOAD[:8]
        assert await f.tell() == 8
        assert await f.seek(-4, os.SEEK_END) == len(PAYLOAD) - 4
        assert await f.seek(2, os.SEEK_CUR) == len(PAYLOAD) - 2
    async with ringio.open(path, "r+b") as f:
        assert await f.writev([b"ab", b"cd"]) == 4
        assert await f.tell() == 4
        assert await f.pwrite(b"ZZ", 10) == 2
        await f.fsync()
        await f.fdatasync()
        assert await f.read(2) == PAYLOAD[4:6]
    data = path.read_bytes()
    assert data[:4] == b"abcd" and data[10:12] == b"ZZ"


async def test_int_fd_and_closefd(engine, path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        f = await ringio.open(fd, "rb", closefd=False)
        assert f.name == fd
        assert await f.read(3) == PAYLOAD[5:8]  # starts at the fd's position
        await f.close()
        assert os.lseek(fd, 0, os.SEEK_CUR) == 8  # ...and leaves it where we stopped
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    f = await ringio.open(fd, "rb")
    await f.close()
    with pytest.raises(OSError):
        os.fstat(fd)


async def test_opener(engine, path):
    seen = []

    def opener(p, flags):
        seen.append(flags)
        return os.open(p, flags)

    async with ringio.open(path, "rb", opener=opener) as f:
        assert await f.read(2) == PAYLOAD[:2]
    assert seen and seen[0] & os.O_CLOEXEC


async def test_type_errors(engine, path):
    async with ringio.open(path, "r+b") as f:
        with pytest.raises(TypeError):
            await f.write("text")
        with pytest.raises(TypeError):
            await f.write(5)
        with pytest.raises(TypeError):
            await f.readinto(b"readonly")
        with pytest.raises(ValueError):
            await f.seek(0, 9)
        with pytest.raises(OSError):
            await f.seek(-1)


async def test_garbage_collected_file_closes_fd(engine, path):
    import gc

    f = await ringio.open(path, "rb")
    fd = f.fileno()
    with pytest.warns(ResourceWarning):
        del f
        gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.parametrize("mode", ["rb", "r+b", "wb", "w+b", "ab", "a+b", "xb", "x+b"])
@pytest.mark.parametrize("buffering", [0, -1])
async def test_mode_attribute_matches_builtin(engine, tmp_path, mode, buffering):
    """``mode`` is FileIO's mode string: "w+b" reports "rb+", as the builtin does."""
    p = tmp_path / "m.bin"
    if mode.startswith("r"):
        p.write_bytes(b"")
    with open(p, mode, buffering=buffering) as ref:
        expected = ref.mode
    p.unlink()
    if mode.startswith("r"):
        p.write_bytes(b"")
    async with ringio.open(p, mode, buffering=buffering) as f:
        assert f.mode == expected
