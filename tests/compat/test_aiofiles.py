"""ringio.compat.aiofiles against the real aiofiles 25.1 as the reference: the same
operations give the same results, types and exceptions; the classes have the same
coroutine methods, plain methods and properties; the functions the same signatures."""

from __future__ import annotations

import inspect
import io
import os
import sys

import aiofiles as ref
import aiofiles.os
import aiofiles.tempfile
import aiofiles.tempfile.temptypes
import aiofiles.threadpool.binary
import aiofiles.threadpool.text
import pytest

import ringio.compat.aiofiles as got

# The submodules are looked up in sys.modules by the surface test.
import ringio.compat.aiofiles.os
import ringio.compat.aiofiles.tempfile
import ringio.compat.aiofiles.tempfile.temptypes
import ringio.compat.aiofiles.threadpool.binary
import ringio.compat.aiofiles.threadpool.text  # noqa: F401

BOTH = pytest.mark.parametrize("lib", [ref, got], ids=["aiofiles", "ringio"])


def _kind(cls, name):
    attr = inspect.getattr_static(cls, name)
    if isinstance(attr, property):
        return "property"
    return "coroutine" if inspect.iscoroutinefunction(attr) else "method"


def _surface(cls):
    return {
        n: _kind(cls, n) for n in dir(cls)
        if not n.startswith("_") or n in ("__aiter__", "__anext__")
    }  # fmt: skip


@pytest.mark.parametrize("module, names", [
    ("threadpool.binary", ["AsyncBufferedIOBase", "AsyncBufferedReader", "AsyncFileIO",
                           "AsyncIndirectBufferedIOBase", "AsyncIndirectBufferedReader",
                           "AsyncIndirectFileIO"]),
    ("threadpool.text", ["AsyncTextIOWrapper", "AsyncTextIndirectIOWrapper"]),
    ("tempfile.temptypes", ["AsyncSpooledTemporaryFile", "AsyncTemporaryDirectory"]),
])  # fmt: skip
def test_class_surfaces_match(module, names):
    rmod = sys.modules[f"aiofiles.{module}"]
    gmod = sys.modules[f"ringio.compat.aiofiles.{module}"]
    for name in names:
        assert _surface(getattr(gmod, name)) == _surface(getattr(rmod, name)), name


@pytest.mark.parametrize("path", [
    "open", "threadpool.open", "tempfile.TemporaryFile", "tempfile.NamedTemporaryFile",
    "tempfile.SpooledTemporaryFile", "tempfile.TemporaryDirectory", "os.stat",
    "os.remove", "os.listdir", "os.path.exists",
])  # fmt: skip
def test_signatures_match(path):
    def resolve(root):
        obj = root
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    rsig = inspect.signature(resolve(ref))
    gsig = inspect.signature(resolve(got))
    if path.startswith("os."):
        # aiofiles.os shows os's signature (functools.wraps) and takes loop/executor
        # through **kwargs; ringio.os spells those two out: a superset.
        assert list(gsig.parameters)[: len(rsig.parameters)] == list(rsig.parameters)
        assert {"loop", "executor"} <= set(gsig.parameters)
    else:
        assert list(gsig.parameters) == list(rsig.parameters)
    for name, p in rsig.parameters.items():
        assert gsig.parameters[name].kind == p.kind, name
        assert gsig.parameters[name].default == p.default, name


def test_module_contents():
    assert set(got.__all__) == set(ref.__all__)
    assert set(got.tempfile.__all__) == set(ref.tempfile.__all__)
    assert set(got.os.__all__) == set(ref.os.__all__)
    assert set(got.os.path.__all__) == set(ref.os.path.__all__)
    assert got.threadpool.sync_open is open


async def _run_ops(lib, path):
    """A sequence of file operations; returns everything observable."""
    out = []
    async with lib.open(path, "w") as f:
        out.append(type(f).__name__)
        out.append(await f.write("line one\nline two\nthree"))
        out.append((f.name == os.fspath(path), f.mode, f.closed, f.encoding))
        out.append((await f.writable(), await f.readable(), await f.seekable()))
    out.append(f.closed)
    f = await lib.open(path, "rb")
    out.append(type(f).__name__)
    out.append((f.readable(), await f.writable(), f.mode, isinstance(f.fileno(), int)))
    out.append(await f.read(4))
    out.append(await f.tell())
    out.append(await f.seek(-3, os.SEEK_END))
    out.append(await f.read())
    await f.seek(0)
    out.append(await f.readline())
    out.append(await f.readlines())
    await f.seek(0)
    out.append([line async for line in f])
    buf = bytearray(5)
    await f.seek(1)
    out.append((await f.readinto(buf), bytes(buf)))
    out.append(await f.read1(3))
    await f.close()
    out.append(f.closed)
    for call in (f.read, f.tell, f.seekable):
        with pytest.raises(ValueError):
            await call()
    with pytest.raises(ValueError):
        f.fileno()
    async with lib.open(path, "r+b", buffering=0) as f:
        out.append(type(f).__name__)
        out.append(await f.readall())
        out.append(await f.truncate(4))
        await f.seek(0)
        out.append(await f.write(b"LINE"))
    async with lib.open(path, "ab") as f:
        out.append((type(f).__name__, f.mode))
        out.append(await f.write(b"+tail"))
        await f.writelines([b"1", b"2"])
        await f.flush()
    async with lib.open(path, encoding="utf-8", newline="") as f:
        out.append(await f.read())
        out.append(f.newlines)
    return out


@BOTH
async def test_same_operations_same_results(lib, tmp_path):
    mine = await _run_ops(lib, tmp_path / "a.txt")
    theirs = await _run_ops(ref, tmp_path / "b.txt")
    assert mine == theirs
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()


async def test_isinstance_checks(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"x")
    b, t = got.threadpool.binary, got.threadpool.text
    async with got.open(p, "rb") as f:
        assert isinstance(f, b.AsyncBufferedReader) and isinstance(f, b.AsyncBufferedIOBase)
    async with got.open(p, "wb") as f:
        assert type(f) is b.AsyncBufferedIOBase
        await f.write(b"x")
    async with got.open(p, "rb", buffering=0) as f:
        assert type(f) is b.AsyncFileIO
    async with got.open(p, "r+", encoding="utf-8") as f:
        assert type(f) is t.AsyncTextIOWrapper
        assert isinstance(f.buffer, b.AsyncBufferedReader)
        assert await f.buffer.read() == b"x"


@BOTH
async def test_errors(lib, tmp_path):
    missing = tmp_path / "missing" / "f"
    with pytest.raises(FileNotFoundError) as e:
        await lib.open(missing)
    assert e.value.filename == os.fspath(missing)
    with pytest.raises(FileNotFoundError):
        async with lib.open(missing):
            pass
    with pytest.raises(IsADirectoryError):
        await lib.open(tmp_path)
    with pytest.raises(ValueError):
        await lib.open(tmp_path / "x", "rw")
    with pytest.raises(ValueError):
        await lib.open(tmp_path / "x", "wb", encoding="utf-8")
    with pytest.raises(TypeError):
        await lib.open(1.5)
    async with lib.open(tmp_path / "y", "w", encoding="utf-8") as f:
        with pytest.raises(io.UnsupportedOperation):
            await f.read()
        with pytest.raises(TypeError):
            await f.write(b"bytes")
    with pytest.raises(FileNotFoundError):
        await lib.os.stat(missing)
    with pytest.raises(FileNotFoundError):
        await lib.os.remove(missing)


@BOTH
async def test_loop_and_executor_accepted(lib, tmp_path):
    import asyncio

    loop = asyncio.get_running_loop()
    async with lib.open(tmp_path / "z", "w", loop=loop, executor=None) as f:
        await f.write("z")
    async with lib.tempfile.TemporaryFile(loop=loop, executor=None) as f:
        await f.write(b"z")


@BOTH
async def test_tempfile_surface(lib, tmp_path):
    async with lib.tempfile.NamedTemporaryFile("w+", dir=tmp_path, encoding="utf-8") as f:
        assert type(f).__name__ == "AsyncTextIOWrapper"
        assert os.path.dirname(f.name) == str(tmp_path)
        assert os.stat(f.name).st_mode & 0o777 == 0o600
        if sys.version_info < (3, 12):
            assert f.delete is True
        else:  # the stdlib's wrapper has no `delete` since 3.12, nor has aiofiles'
            assert not hasattr(f, "delete")
        await f.write("abc")
        await f.seek(0)
        assert await f.read() == "abc"
    assert not os.path.exists(f.name)
    async with lib.tempfile.NamedTemporaryFile(dir=tmp_path, delete=False) as f:
        assert type(f).__name__ == "AsyncBufferedReader"
    assert os.path.exists(f.name)
    os.unlink(f.name)
    async with lib.tempfile.TemporaryFile("wb", dir=tmp_path) as f:
        assert type(f).__name__ == "AsyncBufferedIOBase"
        assert f.name == f.fileno() and os.listdir(tmp_path) == []
    async with lib.tempfile.SpooledTemporaryFile(4, dir=tmp_path) as f:
        assert type(f).__name__ == "AsyncSpooledTemporaryFile"
        await f.write(b"1234")
        assert f.name is None and f._file._rolled is False
        await f.write(b"5")
        assert f._file._rolled is True and isinstance(f.name, int)
        await f.seek(0)
        assert await f.read() == b"12345"
        assert isinstance(await f.fileno(), int)
    assert f.closed
    async with lib.tempfile.TemporaryDirectory(dir=tmp_path) as d:
        assert isinstance(d, str) and os.stat(d).st_mode & 0o777 == 0o700
        (tmp_path / d / "f").write_text("x")
    assert not os.path.exists(d)
    d = await lib.tempfile.TemporaryDirectory(dir=tmp_path)
    assert type(d).__name__ == "AsyncTemporaryDirectory" and os.path.isdir(d.name)
    await d.close()
    assert not os.path.exists(d.name)
