"""ringio.open in text mode, against the builtin open() as the reference."""

from __future__ import annotations

import random

import pytest

import ringio

TEXT = (
    "plain line\nwindows line\r\nold mac line\rmixed \u00e9\u20ac\U0001f600 unicode\n"
    "form\x0cfeed and \u2028 separator\n" + "x" * 70_000 + "\r\n" + "tail without newline"
)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(TEXT.encode("utf-8") * 3)
    return p


@pytest.mark.parametrize("newline", [None, "", "\n", "\r", "\r\n"])
async def test_lines_match_stdlib(engine, path, newline):
    with open(path, encoding="utf-8", newline=newline) as ref:
        want = list(ref)
    async with ringio.open(path, encoding="utf-8", newline=newline) as f:
        assert isinstance(f, ringio.AsyncTextFile)
        assert [line async for line in f] == want
    async with ringio.open(path, encoding="utf-8", newline=newline) as f:
        got = []
        while line := await f.readline():
            got.append(line)
        assert got == want
    async with ringio.open(path, encoding="utf-8", newline=newline) as f:
        assert await f.readlines() == want
    with open(path, encoding="utf-8", newline=newline) as ref:
        whole = ref.read()
    async with ringio.open(path, encoding="utf-8", newline=newline) as f:
        assert await f.read() == whole


@pytest.mark.parametrize("newline", [None, "", "\n", "\r", "\r\n"])
async def test_write_translation(engine, tmp_path, newline):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    s = "one\ntwo\r\nthree\rfour\n"
    with open(a, "w", encoding="utf-8", newline=newline) as ref:
        ref.write(s)
    async with ringio.open(b, "w", encoding="utf-8", newline=newline) as f:
        assert await f.write(s) == len(s)
        await f.writelines(["x\n", "y"])
    with open(a, "a", encoding="utf-8", newline=newline) as ref:
        ref.writelines(["x\n", "y"])
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-8-sig", "latin-1", "shift_jis"])
async def test_encodings_tell_seek(engine, tmp_path, encoding):
    """Multi-byte characters across chunk boundaries; tell() cookies equal the
    builtin's and seek() back to them gives the same text."""
    p = tmp_path / "enc.txt"
    chars = {"latin-1": "a\u00e9", "shift_jis": "a\u3042\u30a2"}.get(encoding, "a\u00e9\u3042")
    line = (chars * 5000)[:9000] + "\n"
    content = "".join(line[: 100 + i * 997] + "\n" for i in range(12))
    p.write_text(content, encoding=encoding)
    with open(p, encoding=encoding) as ref:
        ref_lines, ref_tells = [], []
        while True:
            ref_tells.append(ref.tell())
            line = ref.readline()
            if not line:
                break
            ref_lines.append(line)
    async with ringio.open(p, encoding=encoding) as f:
        lines, tells = [], []
        while True:
            tells.append(await f.tell())
            line = await f.readline()
            if not line:
                break
            lines.append(line)
        assert lines == ref_lines
        assert tells == ref_tells
        for k in (5, 0, 11, 3):
            assert await f.seek(tells[k]) == tells[k]
            assert await f.readline() == ref_lines[k]
        await f.seek(tells[2])
        assert await f.read(7) == ref_lines[2][:7]


async def test_errors_argument(engine, tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\xff\xfeok\n")
    async with ringio.open(p, encoding="utf-8") as f:
        with pytest.raises(UnicodeDecodeError):
            await f.read()
    async with ringio.open(p, encoding="utf-8", errors="replace") as f:
        assert await f.read() == "ok\ufffd\ufffdok\n"
    async with ringio.open(p, encoding="ascii", errors="surrogateescape") as f:
        assert await f.readline() == "ok\udcff\udcfeok\n"


async def test_random_text_ops_match_stdlib(engine, tmp_path):
    """Seeded random reads/readlines/seeks to tell() cookies, then writes after a
    seek, on 'r+' with universal newlines."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    pick = random.Random(3).choice
    body = "".join(pick(["ab", "\u00e9", "\n", "\r\n", "\u3042", "z"]) for _ in range(4000))
    a.write_text(body, encoding="utf-8", newline="")
    b.write_text(body, encoding="utf-8", newline="")
    rng = random.Random(11)
    # Writes may split a multi-byte character: decode what that leaves reversibly.
    ref = open(a, "r+", encoding="utf-8", errors="surrogateescape")
    f = await ringio.open(b, "r+", encoding="utf-8", errors="surrogateescape")
    cookies = [0]
    try:
        for step in range(200):
            op = rng.choice(["read", "readline", "tell", "seek", "write"])
            if op == "read":
                n = rng.choice([0, 1, 7, 300])
                assert await f.read(n) == ref.read(n), step
            elif op == "readline":
                n = rng.choice([-1, 2, 40])
                assert await f.readline(n) == ref.readline(n), step
            elif op == "tell":
                c = await f.tell()
                assert c == ref.tell(), step
                cookies.append(c)
            elif op == "seek":
                c = rng.choice(cookies)
                assert await f.seek(c) == ref.seek(c), step
            else:
                # The builtin writes after its read-ahead when a write follows a read
                # without a seek; both agree once the position is set explicitly.
                c = await f.tell()
                ref.seek(c)
                await f.seek(c)
                s = rng.choice(["W", "\u00e9\n", "line\n"])
                assert await f.write(s) == ref.write(s)
                await f.flush()
                ref.flush()
                assert a.read_bytes() == b.read_bytes(), step
                assert await f.seek(0) == ref.seek(0)
                cookies = [0]
    finally:
        ref.close()
        await f.close()
    assert a.read_bytes() == b.read_bytes()


async def test_text_surface(engine, tmp_path):
    p = tmp_path / "s.txt"
    async with ringio.open(p, "w+", encoding="utf-8") as f:
        assert f.mode == "w+" and f.encoding == "utf-8" and f.errors == "strict"
        await f.write("abc\ndef\n")
        assert await f.seek(0) == 0
        assert await f.read(2) == "ab"
        await f.seek(0, 2)
        await f.write("ghi")
        await f.seek(0)
        assert await f.read() == "abc\ndef\nghi"
        await f.seek(0)
        assert await f.truncate(4) == 4
        with pytest.raises(io_unsupported()):
            await f.seek(1, 1)
        with pytest.raises(io_unsupported()):
            await f.seek(-1, 2)
        with pytest.raises(ValueError):
            await f.seek(-1)
    assert p.read_text() == "abc\n"
    async with ringio.open(p, encoding="utf-8") as f:
        with pytest.raises(io_unsupported()):
            await f.write("x")
        async for _ in f:
            with pytest.raises(OSError, match="telling position disabled"):
                await f.tell()


async def test_line_buffering(engine, tmp_path):
    p = tmp_path / "lb.txt"
    async with ringio.open(p, "w", buffering=1, encoding="utf-8") as f:
        assert f.line_buffering
        await f.write("partial")
        assert p.read_text() == ""
        await f.write(" line\nmore")
        assert p.read_text() == "partial line\nmore"  # the whole buffer, like the builtin
    assert p.read_text() == "partial line\nmore"


def io_unsupported():
    import io

    return io.UnsupportedOperation


async def test_str_bytes_type_errors(engine, tmp_path):
    async with ringio.open(tmp_path / "x.txt", "w", encoding="utf-8") as f:
        with pytest.raises(TypeError):
            await f.write(b"bytes")
