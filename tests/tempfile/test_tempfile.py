"""ringio.tempfile against the standard tempfile module as the reference."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import tempfile

import pytest

import ringio
import ringio.tempfile as rt


def _perm(path_or_fd) -> int:
    st = os.fstat(path_or_fd) if isinstance(path_or_fd, int) else os.lstat(path_or_fd)
    return stat.S_IMODE(st.st_mode)


# -- TemporaryFile -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["w+b", "wb", "rb", "w+", "x+b"])
async def test_temporary_file_matches_stdlib(engine, tmp_path, mode):
    kwargs = {} if "b" in mode else {"encoding": "utf-8"}
    with tempfile.TemporaryFile(mode, dir=tmp_path, **kwargs) as ref:
        ref_mode, ref_name_is_fd = ref.mode, ref.name == ref.fileno()
    async with rt.TemporaryFile(mode, dir=tmp_path, **kwargs) as f:
        fd = f.fileno()
        assert f.mode == ref_mode
        assert (f.name == fd) is ref_name_is_fd
        assert _perm(fd) == 0o600
        assert os.fstat(fd).st_nlink == 0  # no directory entry
        assert os.listdir(tmp_path) == []
        expected_type = ringio.AsyncBufferedFile if "b" in mode else ringio.AsyncTextFile
        assert isinstance(f, expected_type)
    assert f.closed
    with pytest.raises(OSError):
        os.fstat(fd)


async def test_temporary_file_read_write(engine, tmp_path):
    async with rt.TemporaryFile(dir=tmp_path) as f:
        assert await f.write(b"hello world") == 11
        await f.seek(6)
        assert await f.read() == b"world"
        assert await f.tell() == 11
    f = await rt.TemporaryFile("w+", dir=tmp_path, encoding="utf-8", newline="")
    await f.write("a\r\nb")
    await f.seek(0)
    assert await f.readline() == "a\r\n"
    await f.close()


async def test_temporary_file_unbuffered(engine, tmp_path):
    async with rt.TemporaryFile(buffering=0, dir=tmp_path) as f:
        assert type(f) is ringio.AsyncFileIO
        await f.write(b"x")


async def test_temporary_file_without_o_tmpfile(engine, tmp_path, monkeypatch):
    """The mkstemp-and-unlink path (filesystems without O_TMPFILE)."""
    monkeypatch.setattr(rt, "_o_tmpfile_works", False)
    async with rt.TemporaryFile(dir=tmp_path, prefix="p") as f:
        assert os.listdir(tmp_path) == []
        assert _perm(f.fileno()) == 0o600
        await f.write(b"abc")
        await f.seek(0)
        assert await f.read() == b"abc"


# -- NamedTemporaryFile ------------------------------------------------------------


async def test_named_temporary_file(engine, tmp_path):
    with tempfile.NamedTemporaryFile(dir=tmp_path, prefix="pre", suffix=".suf") as ref:
        ref_mode = ref.mode
    async with rt.NamedTemporaryFile(dir=tmp_path, prefix="pre", suffix=".suf") as f:
        name = f.name
        assert isinstance(name, str) and os.path.isabs(name)
        assert os.path.dirname(name) == str(tmp_path)
        base = os.path.basename(name)
        assert base.startswith("pre") and base.endswith(".suf") and len(base) == 3 + 8 + 4
        assert _perm(name) == 0o600
        assert f.mode == ref_mode
        assert f.file.name == name
        await f.write(b"data")
        await f.flush()
        with open(name, "rb") as check:
            assert check.read() == b"data"
    assert not os.path.exists(name)


async def test_named_default_dir_and_prefix(engine):
    async with rt.NamedTemporaryFile() as f:
        assert os.path.dirname(f.name) == tempfile.gettempdir()
        assert os.path.basename(f.name).startswith(tempfile.gettempprefix())
    assert not os.path.exists(f.name)


async def test_named_close_deletes_and_delete_false_keeps(engine, tmp_path):
    f = await rt.NamedTemporaryFile(dir=tmp_path)
    await f.close()
    assert f.closed and os.listdir(tmp_path) == []
    await f.close()  # twice is fine

    async with rt.NamedTemporaryFile("w", dir=tmp_path, delete=False, encoding="utf-8") as f:
        await f.write("kept")
    assert open(f.name).read() == "kept"
    assert f.closed


async def test_named_delete_on_close_false(engine, tmp_path):
    """3.12 semantics: closing keeps the file; leaving the block removes it."""
    async with rt.NamedTemporaryFile(dir=tmp_path, delete_on_close=False) as f:
        await f.write(b"x")
        await f.close()
        assert os.path.exists(f.name)
    assert not os.path.exists(f.name)


async def test_named_bytes_names(engine, tmp_path):
    with pytest.raises(TypeError) as ref:
        tempfile.NamedTemporaryFile(dir=tmp_path, prefix=b"b")
    with pytest.raises(TypeError) as got:
        await rt.NamedTemporaryFile(dir=tmp_path, prefix=b"b")
    assert str(got.value) == str(ref.value)
    async with rt.NamedTemporaryFile(dir=os.fsencode(tmp_path), prefix=b"b") as f:
        assert isinstance(f.name, bytes) and os.path.basename(f.name).startswith(b"b")
        assert os.path.exists(f.name)
    assert not os.path.exists(f.name)


async def test_named_iteration_and_delegation(engine, tmp_path):
    async with rt.NamedTemporaryFile("w+", dir=tmp_path, encoding="utf-8") as f:
        await f.writelines(["a\n", "b\n"])
        await f.seek(0)
        assert [line async for line in f] == ["a\n", "b\n"]
        assert f.encoding == "utf-8" and f.readable() and not f.closed


async def test_collected_named_file_is_removed(engine, tmp_path):
    f = await rt.NamedTemporaryFile(dir=tmp_path)
    name = f.name
    await f.file.close()
    del f
    assert not os.path.exists(name)


@pytest.mark.parametrize("kwargs, exc", [
    ({"mode": "rw"}, ValueError),
    ({"mode": "wb", "encoding": "utf-8"}, ValueError),
    ({"mode": "w", "newline": "x"}, ValueError),
    ({"mode": "w", "buffering": 0}, ValueError),
])  # fmt: skip
async def test_bad_input_like_stdlib(engine, tmp_path, kwargs, exc):
    for ctor, rctor in ((tempfile.NamedTemporaryFile, rt.NamedTemporaryFile),
                        (tempfile.TemporaryFile, rt.TemporaryFile)):  # fmt: skip
        with pytest.raises(exc):
            ctor(dir=tmp_path, **kwargs)
        with pytest.raises(exc):
            await rctor(dir=tmp_path, **kwargs)
    assert os.listdir(tmp_path) == []


async def test_missing_dir_like_stdlib(engine, tmp_path):
    missing = tmp_path / "nope"
    for ctor, rctor in ((tempfile.NamedTemporaryFile, rt.NamedTemporaryFile),
                        (tempfile.TemporaryFile, rt.TemporaryFile),
                        (tempfile.TemporaryDirectory, rt.TemporaryDirectory)):  # fmt: skip
        with pytest.raises(FileNotFoundError):
            ctor(dir=missing)
        with pytest.raises(FileNotFoundError):
            await rctor(dir=missing)


async def test_cancelled_creation_leaves_nothing(engine, tmp_path):
    for ctor in (rt.NamedTemporaryFile, rt.TemporaryFile, rt.TemporaryDirectory):
        for spins in range(4):
            task = asyncio.ensure_future(_make(ctor, tmp_path))
            for _ in range(spins):
                await asyncio.sleep(0)
            task.cancel()
            try:
                obj = await task
            except asyncio.CancelledError:
                pass
            else:  # finished before the cancel: clean up normally
                await (obj.cleanup() if hasattr(obj, "cleanup") else obj.close())
        await asyncio.sleep(0.05)
        assert os.listdir(tmp_path) == []


async def _make(ctor, tmp_path):
    return await ctor(dir=tmp_path)


# -- SpooledTemporaryFile ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["w+b", "w+"])
async def test_spooled_rolls_over_like_stdlib(engine, tmp_path, mode):
    enc = {} if "b" in mode else {"encoding": "utf-8"}
    chunks = ["abc", "defgh", "ij", "klmnopq", "r"]
    if "b" in mode:
        chunks = [c.encode() for c in chunks]
    ref = tempfile.SpooledTemporaryFile(10, mode, dir=tmp_path, **enc)
    async with rt.SpooledTemporaryFile(10, mode, dir=tmp_path, **enc) as f:
        assert f.name is None and f.mode == ref.mode == mode
        for c in chunks:
            assert await f.write(c) == ref.write(c)
            assert f._rolled == ref._rolled
            assert await f.tell() == ref.tell()
        assert f._rolled
        assert f.mode == ref.mode
        assert isinstance(f.name, int) and f.name == await f.fileno()
        assert _perm(await f.fileno()) == 0o600
        await f.seek(2)
        ref.seek(2)
        assert await f.read() == ref.read()
        await f.seek(0)
        ref.seek(0)
        assert await f.readline() == ref.readline()
    ref.close()
    assert f.closed
    assert os.listdir(tmp_path) == []


async def test_spooled_in_memory_until_fileno(engine, tmp_path):
    async with rt.SpooledTemporaryFile(dir=tmp_path) as f:  # max_size 0: never by size
        await f.write(b"x" * 100_000)
        assert not f._rolled and f.name is None
        await f.seek(10)
        fd = await f.fileno()
        assert f._rolled and f.name == fd
        assert await f.tell() == 10
        assert await f.read(5) == b"xxxxx"


async def test_spooled_truncate_and_text_position(engine, tmp_path):
    ref = tempfile.SpooledTemporaryFile(5, "w+", encoding="utf-8")
    async with rt.SpooledTemporaryFile(5, "w+", encoding="utf-8", dir=tmp_path) as f:
        for obj in (ref, f):
            r = obj.write("héé")
            if asyncio.iscoroutine(r):
                await r
        assert f._rolled == ref._rolled is False
        ref.truncate(6)
        await f.truncate(6)  # past max_size: rolls over first, as the stdlib
        assert f._rolled and ref._rolled
        ref.seek(0)
        await f.seek(0)
        assert await f.read() == ref.read()
        assert await f.tell() == ref.tell()
    ref.close()


async def test_spooled_closed_and_context(engine, tmp_path):
    f = await rt.SpooledTemporaryFile(dir=tmp_path)
    await f.close()
    with pytest.raises(ValueError):
        await f.read()
    with pytest.raises(ValueError):
        async with f:
            pass


# -- TemporaryDirectory ------------------------------------------------------------


async def test_temporary_directory(engine, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    with tempfile.TemporaryDirectory(dir=tmp_path) as ref:
        ref_abs = os.path.isabs(ref)
    async with rt.TemporaryDirectory(suffix="-s", prefix="p-", dir=tmp_path) as d:
        assert isinstance(d, str) and os.path.isabs(d) == ref_abs
        assert os.path.basename(d).startswith("p-") and d.endswith("-s")
        assert _perm(d) == 0o700
        os.makedirs(os.path.join(d, "a", "b"))
        for p in ("f", "a/g", "a/b/h"):
            with open(os.path.join(d, p), "w") as fh:
                fh.write(p)
        os.symlink(outside, os.path.join(d, "link"))
        os.symlink(outside / "keep", os.path.join(d, "a", "filelink"))
        os.chmod(os.path.join(d, "a", "b"), 0o500)  # its entries cannot be removed as is
        os.chmod(os.path.join(d, "a"), 0o000)
    assert not os.path.exists(d)
    assert (outside / "keep").read_text() == "keep"  # symlinks were not followed


async def test_temporary_directory_object(engine, tmp_path):
    d = await rt.TemporaryDirectory(dir=tmp_path)
    assert os.path.isdir(d.name)
    await d.cleanup()
    assert not os.path.exists(d.name)
    await d.cleanup()  # twice is fine
    await d.close()

    async with rt.TemporaryDirectory(dir=tmp_path, delete=False) as name:
        pass
    assert os.path.isdir(name)


async def test_collected_directory_is_removed_with_warning(engine, tmp_path):
    d = await rt.TemporaryDirectory(dir=tmp_path)
    name = d.name
    with pytest.warns(ResourceWarning, match="Implicitly cleaning up"):
        del d
    assert not os.path.exists(name)


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
async def test_exported(engine):
    assert ringio.tempfile is rt
    assert set(rt.__all__) >= {
        "TemporaryFile", "NamedTemporaryFile", "SpooledTemporaryFile", "TemporaryDirectory",
    }
