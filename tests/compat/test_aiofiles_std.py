"""``aiofiles.stdin``/``stdout``/``stderr`` (and ``*_bytes``) over replaced standard
streams, and ``detach()``: the same results as aiofiles 25.1 itself."""

from __future__ import annotations

import io
import sys

import aiofiles as ref
import pytest

import ringio.compat.aiofiles as got

BOTH = pytest.mark.parametrize("lib", [ref, got], ids=["aiofiles", "ringio"])


def _capture_io() -> io.TextIOWrapper:
    """What pytest's capsys puts in sys.stdout: a TextIOWrapper over a BytesIO (it
    has a .buffer, and fileno() raises io.UnsupportedOperation)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)


STREAMS = {"StringIO": lambda text="": io.StringIO(text), "capture": None}


async def _std_ops(lib, monkeypatch, kind: str) -> list:
    out: list = []
    if kind == "StringIO":
        stdin, stdout, stderr = io.StringIO("one\ntwo\nthree"), io.StringIO(), io.StringIO()
    else:
        stdin, stdout, stderr = _capture_io(), _capture_io(), _capture_io()
        stdin.write("one\ntwo\nthree")
        stdin.seek(0)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    out.append(await lib.stdout.write("to stdout\n"))
    out.append(await lib.stderr.write("to stderr\n"))
    await lib.stdout.writelines(["a", "b\n"])
    await lib.stdout.flush()
    out.append(await lib.stdin.readline())
    out.append([line async for line in lib.stdin])
    out.append((lib.stdout.closed, await lib.stdout.writable(), await lib.stdin.readable()))
    with pytest.raises(io.UnsupportedOperation):
        lib.stdout.fileno()
    if kind == "capture":
        out.append(await lib.stdout_bytes.write(b"bytes out\n"))
        out.append(await lib.stderr_bytes.write(b"bytes err\n"))
        stdin.buffer.seek(0)
        out.append(await lib.stdin_bytes.read())
        out.append(stdout.buffer.getvalue())
        out.append(stderr.buffer.getvalue())
    else:
        out.append(stdout.getvalue())
        out.append(stderr.getvalue())
        with pytest.raises(AttributeError):
            await lib.stdout_bytes.write(b"x")  # a StringIO has no .buffer
    return out


@pytest.mark.parametrize("kind", sorted(STREAMS))
async def test_std_streams_without_a_file_descriptor(kind, monkeypatch):
    mine = await _std_ops(got, monkeypatch, kind)
    theirs = await _std_ops(ref, monkeypatch, kind)
    assert mine == theirs
    assert "to stdout" in str(mine)


async def _detach_ops(lib, path) -> list:
    out: list = []
    path.write_bytes(b"0123456789")
    for mode in ("rb", "r+b", "wb"):
        cm = lib.open(path, mode)
        f = await cm.__aenter__()
        if mode != "wb":
            out.append(await f.read(2))
        if mode != "rb":
            await f.write(b"AB")  # still in the buffer: detach() writes it
        raw = f.detach()
        out.append((mode, type(raw).__name__, raw.closed, raw.mode, raw.tell()))
        out.append(raw.name == str(path))
        for call in (lambda f=f: f.read(1), lambda f=f: f.write(b"x"), f.flush, f.tell):
            try:
                await call()
                out.append("no error")
            except Exception as e:
                out.append(type(e).__name__)
        try:
            f.fileno()
            out.append("no error")
        except Exception as e:
            out.append(type(e).__name__)
        try:
            await cm.__aexit__(None, None, None)
            out.append("exit ok")
        except Exception as e:
            out.append(("exit", type(e).__name__))
        # The raw file works on, where io's buffered file leaves it (after the
        # read-ahead of a reader), and owns the fd.
        if "r" in mode:
            out.append(raw.read(3))
        raw.close()
        out.append((raw.closed, path.read_bytes()))
    return out


@BOTH
async def test_detach_of_a_binary_file(lib, tmp_path):
    path = tmp_path / "f"
    out = await _detach_ops(lib, path)
    if lib is ref:
        return
    assert out == await _detach_ops(ref, tmp_path / "f")
