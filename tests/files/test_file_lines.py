"""`async for line in f` (the native _core.LineIter), against the builtin open():
random contents and newline modes with chunk boundaries everywhere, huge lines,
iteration mixed with readline/read/tell/seek, closing mid-iteration, the awaitable
protocol. Every test runs on each engine."""

from __future__ import annotations

import asyncio
import gc
import io
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringio
import ringio._io.binary as rbinary
import ringio._io.text as rtext
from ringio import _core

NEWLINES = [None, "", "\n", "\r", "\r\n"]

# Pieces whose concatenations stress line splitting and decoding: every line end the
# newline modes know, \r\n pairs that chunk boundaries can split, the line breaks
# only str.splitlines() knows, and multi-byte UTF-8 characters (2, 3 and 4 bytes).
PIECES = [
    "a", "xyz", " ", "\n", "\r", "\r\n", "\n\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c",
    "\x1c", "\u00e9", "\u20ac", "\U0001f600", "\r\r\n",
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), max_size=120).map("".join)
# Binary: arbitrary bytes (invalid UTF-8 included) mixed with line ends.
blobs = st.lists(
    st.one_of(st.sampled_from([b"\n", b"\r", b"\r\n", b"ab"]), st.binary(max_size=12)),
    max_size=60,
).map(b"".join)
# Chunk sizes for the file's line reads: tiny ones put a boundary everywhere (a
# multi-byte character or a \r\n split across two chunks), the real ones too.
chunks = st.sampled_from([1, 2, 3, 5, 16, 64 * 1024])

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def small_chunks(monkeypatch):
    """Sets the line-read chunk sizes (binary and text) to `n` bytes."""

    def set_chunk(n: int) -> None:
        monkeypatch.setattr(rbinary, "CHUNK_MIN", n)
        monkeypatch.setattr(rbinary, "CHUNK_MAX", max(n, 2 * n))
        monkeypatch.setattr(rtext, "TEXT_CHUNK_MAX", max(n, 2 * n))
        monkeypatch.setattr(rtext.AsyncTextFile, "_CHUNK", n)

    return set_chunk


async def collect(path, *args, **kw) -> list:
    async with ringio.open(path, *args, **kw) as f:
        return [line async for line in f]


def reference(path, *args, **kw) -> list:
    with open(path, *args, **kw) as f:
        return list(f)


# -- random contents ---------------------------------------------------------------
@FUZZ
@given(
    text=texts, newline=st.sampled_from(NEWLINES), chunk=chunks,
    encoding=st.sampled_from(["utf-8", "utf-16", "latin-1"]),
)  # fmt: skip
def test_text_iteration_matches_io(engine_name, tmp_path, small_chunks, text, newline, chunk,
                                   encoding):  # fmt: skip
    small_chunks(chunk)
    p = tmp_path / "t.txt"
    p.write_bytes(text.encode(encoding, errors="replace"))
    kw = {"encoding": encoding, "newline": newline, "errors": "replace"}
    assert asyncio.run(collect(p, **kw)) == reference(p, **kw)


@FUZZ
@given(blob=blobs, newline=st.sampled_from(NEWLINES), chunk=chunks,
       errors=st.sampled_from(["strict", "replace", "surrogateescape"]))  # fmt: skip
def test_text_iteration_of_random_bytes(engine_name, tmp_path, small_chunks, blob, newline,
                                        chunk, errors):  # fmt: skip
    """Invalid UTF-8 too: the same lines, or the same exception at the same line."""
    small_chunks(chunk)
    p = tmp_path / "t.txt"
    p.write_bytes(blob)
    kw = {"encoding": "utf-8", "newline": newline, "errors": errors}

    async def ours() -> list:
        got = []
        async with ringio.open(p, **kw) as f:
            try:
                async for line in f:
                    got.append(line)
            except UnicodeDecodeError:
                got.append(UnicodeDecodeError)
        return got

    want = []
    with open(p, **kw) as f:
        try:
            for line in f:
                want.append(line)
        except UnicodeDecodeError:
            want.append(UnicodeDecodeError)
    got = asyncio.run(ours())
    if want[-1:] == [UnicodeDecodeError]:
        # How many lines come out before the error depends on the chunk that fails
        # to decode (the builtin's are 8 KiB): one side's lines start the other's.
        assert got[-1:] == [UnicodeDecodeError]
        a, b = sorted(["".join(got[:-1]), "".join(want[:-1])], key=len)
        assert b.startswith(a)
    else:
        assert got == want


@FUZZ
@given(blob=blobs, chunk=chunks, buffering=st.sampled_from([-1, 0, 7]))
def test_binary_iteration_matches_io(engine_name, tmp_path, small_chunks, blob, chunk,
                                     buffering):  # fmt: skip
    small_chunks(chunk)
    p = tmp_path / "b.bin"
    p.write_bytes(blob)
    assert asyncio.run(collect(p, "rb", buffering)) == reference(p, "rb")


@pytest.mark.parametrize("size", [0, 1, 5])
@pytest.mark.parametrize("newline", NEWLINES)
async def test_empty_and_no_trailing_newline(engine, tmp_path, size, newline):
    p = tmp_path / "s.txt"
    p.write_bytes(b"x\r\ny"[:size] if size < 5 else b"one\ntwo\r\nthree")
    assert await collect(p, "rb") == reference(p, "rb")
    kw = {"encoding": "utf-8", "newline": newline}
    assert await collect(p, **kw) == reference(p, **kw)


@pytest.mark.parametrize("newline", NEWLINES)
async def test_huge_lines(engine, tmp_path, newline):
    """Lines far bigger than the largest chunk (1 MiB binary, 256 KiB text),
    between short ones, with a \u20ac and a \r\n on the chunk boundaries."""
    parts = ["short\n", "\u20ac" * 200_000 + "\r\n", "x\r", "y" * 3_000_000 + "\n", "tail"]
    p = tmp_path / "h.txt"
    p.write_bytes("".join(parts).encode())
    assert await collect(p, "rb") == reference(p, "rb")
    kw = {"encoding": "utf-8", "newline": newline}
    assert await collect(p, **kw) == reference(p, **kw)


# -- mixing iteration with the other methods ---------------------------------------
@pytest.mark.parametrize("buffering", [-1, 0, 7])
@pytest.mark.parametrize("chunk", [3, 64 * 1024])
async def test_binary_interleaved(engine, tmp_path, small_chunks, buffering, chunk):
    """Seeded random steps: the next line through the async iterator, readline,
    read, read1, tell, seek, peeking with pread; same results as the builtin."""
    small_chunks(chunk)
    rng = random.Random(buffering * 31 + chunk)
    data = b"".join(rng.choice([b"line\n", b"\n", b"longer line here\r\n", b"x" * 50 + b"\n",
                                bytes(rng.randrange(256) for _ in range(20))])
                    for _ in range(400))  # fmt: skip
    p = tmp_path / "i.bin"
    p.write_bytes(data)
    ref = open(p, "rb", buffering=buffering)
    f = await ringio.open(p, "rb", buffering=buffering)
    it = aiter(f)
    try:
        for step in range(600):
            op = rng.choice(["next"] * 6 + ["readline", "read", "read1", "tell", "seek", "pread"])
            if op == "next":
                want = next(ref, None)
                if want is None:
                    with pytest.raises(StopAsyncIteration):
                        await anext(it)
                else:
                    assert await anext(it) == want, step
            elif op == "readline":
                n = rng.choice([-1, 1, 10])
                assert await f.readline(n) == ref.readline(n), step
            elif op == "read":
                n = rng.choice([0, 1, 7, 100])
                assert await f.read(n) == ref.read(n), step
            elif op == "read1" and buffering:
                got = await f.read1(rng.choice([1, 30]))
                assert got == ref.read(len(got)), step
            elif op == "seek":
                off = rng.randrange(len(data) + 10)
                assert await f.seek(off) == ref.seek(off), step
            elif op == "pread":
                off = rng.randrange(len(data))
                assert await f.pread(10, off) == data[off : off + 10]
            assert await f.tell() == ref.tell(), (step, op)
    finally:
        ref.close()
        await f.close()


@pytest.mark.parametrize("newline", NEWLINES)
@pytest.mark.parametrize("chunk", [2, 64 * 1024])
async def test_text_interleaved(engine, tmp_path, small_chunks, newline, chunk):
    """Seeded random steps on a text file: next line, readline, read, tell (refused
    alike while iterating), seek to cookies taken earlier. With tiny chunks a cookie
    may be spelt differently from the builtin's (both restore the same place), so
    each side seeks to its own."""
    small_chunks(chunk)
    rng = random.Random(len(newline or "N") * 7 + chunk)
    text = "".join(rng.choice(PIECES + ["plain words "] * 4) for _ in range(3000))
    p = tmp_path / "i.txt"
    p.write_bytes(text.encode())
    kw = {"encoding": "utf-8", "newline": newline}
    ref = open(p, **kw)
    f = await ringio.open(p, **kw)
    it = aiter(f)
    cookies = [(0, 0)]
    try:
        for step in range(500):
            op = rng.choice(["next"] * 6 + ["readline", "read", "tell", "seek"])
            if op == "next":
                want = next(ref, None)
                if want is None:
                    with pytest.raises(StopAsyncIteration):
                        await anext(it)
                else:
                    assert await anext(it) == want, step
            elif op == "readline":
                n = rng.choice([-1, 1, 10])
                assert await f.readline(n) == ref.readline(n), step
            elif op == "read":
                n = rng.choice([0, 1, 7, 100])
                assert await f.read(n) == ref.read(n), step
            elif op == "tell":
                try:
                    want = ref.tell()
                except OSError:
                    with pytest.raises(OSError, match="telling position disabled"):
                        await f.tell()
                else:
                    ours = await f.tell()
                    if chunk > 16:
                        assert ours == want, step
                    cookies.append((ours, want))
            else:
                c, want = rng.choice(cookies)
                assert await f.seek(c) == c and ref.seek(want) == want
    finally:
        ref.close()
        await f.close()


async def test_readline_read_between_lines(engine, tmp_path):
    p = tmp_path / "m.txt"
    p.write_bytes(b"".join(b"line %d\n" % i for i in range(5000)))
    want = reference(p, "rb")
    async with ringio.open(p, "rb") as f:
        got = []
        async for line in f:
            got.append(line)
            if len(got) % 100 == 1:
                got.append(await f.readline())
                got.append(await f.read(3) + await f.readline())
                assert await f.tell() == sum(map(len, got))
        assert got == want
        await f.seek(0)
        assert [line async for line in f] == want  # iteration restarts after a seek
    async with ringio.open(p, encoding="utf-8") as t:
        got = [await anext(aiter(t)) for _ in range(3)]
        got.append(await t.readline())
        got += [line async for line in t]
        assert got == [line.decode() for line in want]
        assert await t.tell() == p.stat().st_size  # EOF ends iteration: tell() is back


async def test_break_then_other_operations(engine, tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(b"".join(b"%05d\n" % i for i in range(20000)))
    async with ringio.open(p, "r+b") as f:
        async for line in f:
            if line == b"00100\n":
                break
        assert await f.tell() == 101 * 6
        await f.write(b"XXXXX\n")  # at the position after the line
        assert await f.readline() == b"00102\n"
        await f.seek(0)
        lines = [line async for line in f]
    assert lines[101] == b"XXXXX\n" and len(lines) == 20000
    async with ringio.open(p, encoding="utf-8") as t:
        async for line in t:
            if line == "00100\n":
                break
        with pytest.raises(OSError, match="telling position disabled"):
            await t.tell()
        assert await t.read(6) == "XXXXX\n"
        await t.seek(0)
        assert await t.tell() == 0
        assert await t.readline() == "00000\n"


async def test_two_iterators_share_the_position(engine, tmp_path):
    p = tmp_path / "s.bin"
    p.write_bytes(b"".join(b"%d\n" % i for i in range(10000)))
    async with ringio.open(p, "rb") as f:
        a, b = aiter(f), aiter(f)
        got = []
        for k in range(10000):
            got.append(await anext(a if k % 3 else b))
        assert got == reference(p, "rb")
        with pytest.raises(StopAsyncIteration):
            await anext(a)


async def test_concurrent_tasks_iterating(engine, tmp_path):
    """Two tasks iterating one file: every line exactly once, each task's in order."""
    p = tmp_path / "c.bin"
    p.write_bytes(b"".join(b"%d\n" % i for i in range(50000)))
    async with ringio.open(p, "rb") as f:

        async def worker() -> list[int]:
            out = []
            async for line in f:
                out.append(int(line))
                if len(out) % 1000 == 0:
                    await asyncio.sleep(0)
            return out

        a, b = await asyncio.gather(worker(), worker())
    assert a == sorted(a) and b == sorted(b)
    assert sorted(a + b) == list(range(50000))


# -- closing ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["rb", "r"])
async def test_close_mid_iteration(engine, tmp_path, mode):
    p = tmp_path / "c.txt"
    p.write_bytes(b"".join(b"line %d\n" % i for i in range(10000)))
    f = await ringio.open(p, mode, encoding=None if "b" in mode else "utf-8")
    seen = 0
    with pytest.raises(ValueError, match="I/O operation on closed file"):
        async for _ in f:
            seen += 1
            if seen == 10:
                await f.close()
    assert seen == 10
    with pytest.raises(ValueError, match="closed file"):
        aiter(f)  # like the builtin's iter(f)


@pytest.mark.parametrize("mode", ["rb", "r"])
async def test_dropped_file_closes_at_once(engine, tmp_path, mode):
    """The iterator holds the file, the file does not hold the iterator: breaking
    out and dropping both closes the fd at once (no cycle left for the GC)."""
    p = tmp_path / "d.txt"
    p.write_bytes(b"a\nb\nc\n" * 1000)
    f = await ringio.open(p, mode, encoding=None if "b" in mode else "utf-8")
    fd = f.fileno()
    async for _ in f:
        break
    gc.disable()
    try:
        with pytest.warns(ResourceWarning):
            del f
        with pytest.raises(OSError):
            os.fstat(fd)
    finally:
        gc.enable()


# -- the awaitable protocol -------------------------------------------------------
async def test_anext_results_are_awaitables(engine, tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(b"one\ntwo\nthree\nfour\nfive\n")
    async with ringio.open(p, "rb") as f:
        it = aiter(f)
        assert aiter(it) is it
        assert await anext(it) == b"one\n"  # through the file's _next_line coroutine
        a = it.__anext__()
        b = it.__anext__()  # before `a` was awaited: an awaitable of its own
        assert a is not b
        assert await b == b"three\n"
        assert await a == b"two\n"
        with pytest.raises(RuntimeError, match="already awaited"):
            await a
        c = it.__anext__()
        with pytest.raises(StopIteration) as e:
            c.__await__().__next__()
        assert e.value.value == b"four\n"
        assert await asyncio.wait_for(anext(it), 5) == b"five\n"
        with pytest.raises(StopAsyncIteration):
            await anext(it)
        with pytest.raises(TypeError):
            await anext(b)


def test_line_cursor_direct():
    c = _core.LineCursor(b"a\nbb\ncc", 0, _core.LINES_BYTES)
    assert c.next_line() == b"a\n" and c.pos == 2
    assert c.next_line() == b"bb\n"
    assert c.next_line() is None  # "cc" is not a complete line
    assert c.take() == 5 and c.take() == -1 and c.next_line() is None
    u = _core.LineCursor("a\r\nb\rc\nd\r", 0, _core.LINES_UNIVERSAL)
    assert [u.next_line() for _ in range(4)] == ["a\r\n", "b\r", "c\n", None]
    crlf = _core.LineCursor("a\rb\r\nc\r", 0, _core.LINES_CRLF)
    assert [crlf.next_line(), crlf.next_line()] == ["a\rb\r\n", None]
    with pytest.raises(TypeError):
        _core.LineCursor("str", 0, _core.LINES_BYTES)
    with pytest.raises(TypeError):
        _core.LineCursor(b"bytes", 0, _core.LINES_LF)
    with pytest.raises(ValueError):
        _core.LineCursor(b"abc", 4, _core.LINES_BYTES)
    with pytest.raises(ValueError):
        _core.LineCursor(b"abc", 0, 99)
    with pytest.raises(TypeError):
        _core.LineIter()


async def test_iterator_in_a_cycle_is_collected(engine, tmp_path):
    p = tmp_path / "g.bin"
    p.write_bytes(b"x\n" * 10)
    gc.collect()
    before = sum(type(o) is _core.LineIter for o in gc.get_objects())
    f = await ringio.open(p, "rb")
    f.it = aiter(f)  # file -> iterator -> file
    await anext(f.it)
    await f.close()
    del f
    gc.collect()
    assert sum(type(o) is _core.LineIter for o in gc.get_objects()) == before


def test_stdlib_lines_unchanged_by_splitlines_breaks(tmp_path):
    """The reference itself: TextIOWrapper does not split at \\u2028 or \\x0c,
    which str.splitlines() would."""
    p = tmp_path / "r.txt"
    p.write_bytes("a\u2028b\x0cc\n".encode())
    assert reference(p, encoding="utf-8") == ["a\u2028b\x0cc\n"]
    assert io.StringIO("a\u2028b\n").readlines() == ["a\u2028b\n"]


@pytest.mark.parametrize("mode", ["rb", "r"])
async def test_pipe_iteration_with_a_slow_writer(engine, mode):
    """A pipe: lines arrive in pieces, a line split across writes, and iteration
    waits for the writer; readline() mixed in."""
    r, w = os.pipe()
    kw = {} if "b" in mode else {"encoding": "utf-8"}
    fr = await ringio.open(r, mode, **kw)
    fw = await ringio.open(w, "wb", buffering=0)
    # A line longer than the 64 KiB pipe, in writes smaller than it (the aio
    # engine's pipe write blocks the loop while a write does not fit).
    pieces = [b"one\ntw", b"o\nthree\nfo", b"ur\n\xe2\x82", b"\xac\n"]
    pieces += [b"x" * 10_000] * 10 + [b"\nend"]

    async def writer() -> None:
        for p in pieces:
            await asyncio.sleep(0.01)
            await fw.write(p)
        await fw.close()

    task = asyncio.create_task(writer())
    got = []
    async for line in fr:
        got.append(line)
        if len(got) == 2:
            got.append(await fr.readline())
    await task
    await fr.close()
    want = b"".join(pieces).splitlines(keepends=True)
    assert got == (want if "b" in mode else [x.decode() for x in want])
