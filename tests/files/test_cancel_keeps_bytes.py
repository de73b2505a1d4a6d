"""A cancelled read keeps the bytes it already took: they are the next bytes read.

On pipes and sockets, on every engine and both loops. The first tests cancel each
kind of read at a known point (part of what it needs has arrived); the property test
streams random bytes and cancels random reads at random points, and the bytes read,
reassembled, must be the bytes written."""

from __future__ import annotations

import asyncio
import os
import pty
import random
import threading
import time
import tty
from typing import Any

import pytest
from tests.files.streams import blocked, close_writer, run, send, stream  # noqa: F401

import ringio

pytestmark = pytest.mark.timeout(60)


async def _readinto(f: Any) -> bytes:
    buf = bytearray(64)
    n = await f.readinto(buf)
    return bytes(buf[:n])


async def _anext(f: Any) -> Any:
    try:
        return await f.__aiter__().__anext__()
    except StopAsyncIteration:
        return b"" if "b" in f.mode else ""


async def _readv(f: Any) -> bytes:
    bufs = [bytearray(3), bytearray(61)]
    n = await f.readv(bufs)
    return bytes(b"".join(bufs)[:n])


# name: (open() arguments, the read that is cancelled, the read that follows)
READS: dict[str, tuple[dict[str, Any], Any]] = {
    "binary-read(n)": ({"mode": "rb"}, lambda f: f.read(64)),
    "binary-read()": ({"mode": "rb"}, lambda f: f.read()),
    "binary-readinto": ({"mode": "rb"}, _readinto),
    "binary-readline": ({"mode": "rb"}, lambda f: f.readline()),
    "binary-readv": ({"mode": "rb"}, _readv),
    "binary-readlines": ({"mode": "rb"}, lambda f: f.readlines()),
    "binary-async-for": ({"mode": "rb"}, _anext),
    "text-read(n)": ({"mode": "r", "encoding": "utf-8"}, lambda f: f.read(64)),
    "text-read()": ({"mode": "r", "encoding": "utf-8"}, lambda f: f.read()),
    "text-readline": ({"mode": "r", "encoding": "utf-8"}, lambda f: f.readline()),
    "text-readlines": ({"mode": "r", "encoding": "utf-8"}, lambda f: f.readlines()),
    "text-async-for": ({"mode": "r", "encoding": "utf-8"}, _anext),
    "unbuffered-read()": ({"mode": "rb", "buffering": 0}, lambda f: f.read()),
    "unbuffered-readline": ({"mode": "rb", "buffering": 0}, lambda f: f.readline()),
    "unbuffered-readlines": ({"mode": "rb", "buffering": 0}, lambda f: f.readlines()),
}


def _joined(parts: list[Any]) -> Any:
    flat = []
    for p in parts:
        flat.extend(p if isinstance(p, list) else [p])
    return type(flat[0])().join(flat)


@pytest.mark.parametrize("kind", ["pipe", "socket"])
@pytest.mark.parametrize("what", list(READS))
def test_a_cancelled_read_keeps_what_it_took(run, what, kind):  # noqa: F811
    """'ab\\nhé' arrives, the read waits for more and is cancelled; then 'llo\\n'
    and EOF: the reads that follow return every byte, in order."""
    args, read = READS[what]

    async def main() -> None:
        r, w = stream(kind)
        try:
            async with ringio.open(r, **args) as f:
                send(w, "ab\nhé".encode())
                first = []
                if what.endswith(("readline", "async-for", "readv")):
                    # Line reads: the complete first line is returned, the partial
                    # second one is what the cancelled read holds.
                    first.append(await asyncio.wait_for(read(f), 5))
                task = asyncio.ensure_future(read(f))
                await blocked(task)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                send(w, b"llo\n")
                close_writer(w)
                w = None
                rest = await asyncio.wait_for(f.read(), 5)
                text = _joined([*first, rest])
                assert text == ("ab\nhéllo\n" if "b" not in f.mode else "ab\nhéllo\n".encode())
        finally:
            if w is not None:
                close_writer(w)

    run(main())


# -- the property test ---------------------------------------------------------------

MODES = {
    "binary": {"mode": "rb"},
    "text": {"mode": "r", "encoding": "utf-8"},
    "unbuffered": {"mode": "rb", "buffering": 0},
}
_ALPHABET = "abcdefghij \u00e9\u20ac\U0001d11e"


def _payload(rng: random.Random, binary: bool, size: int) -> bytes:
    """Lines of random length; in binary any byte, in text UTF-8 with multibyte
    characters (so that chunks end inside a character)."""
    out = []
    total = 0
    while total < size:
        n = rng.choice([0, 1, 5, 40, 300, 2000])
        if binary:
            line = bytes(b if b != 10 else 11 for b in rng.randbytes(n)) + b"\n"
        else:
            line = ("".join(rng.choices(_ALPHABET, k=n)) + "\n").encode()
        out.append(line)
        total += len(line)
    return b"".join(out)


def _ops(mode: str) -> list[tuple[str, Any]]:
    ops: list[tuple[str, Any]] = [
        ("read(n)", lambda f, rng: f.read(rng.choice([1, 7, 100, 3000, 70000]))),
        ("readline", lambda f, rng: f.readline()),
        ("readline(n)", lambda f, rng: f.readline(rng.choice([1, 50, 5000]))),
        ("read()", lambda f, rng: f.read()),
        ("readlines(hint)", lambda f, rng: f.readlines(rng.choice([1, 500, 20000]))),
        ("async-for", lambda f, rng: _anext(f)),
    ]
    if mode != "text":
        ops += [
            ("readinto", lambda f, rng: _readinto(f)),
            ("read1", lambda f, rng: f.read1(rng.choice([1, 100, 5000]))),
        ]
    if mode == "unbuffered":
        ops = [op for op in ops if op[0] not in ("async-for", "read1")]
    return ops


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind", ["pipe", "socket"])
@pytest.mark.parametrize("mode", list(MODES))
def test_random_cancellations_lose_no_byte(run, mode, kind, seed):  # noqa: F811
    rng = random.Random(f"{mode}-{kind}-{seed}")
    payload = _payload(rng, mode != "text", 40_000)
    ops = _ops(mode)

    async def main() -> None:
        r, w = stream(kind)
        os.set_blocking(r, rng.random() < 0.5)
        writer_rng = random.Random(rng.random())
        failed: list[BaseException] = []

        def writer() -> None:
            try:
                view = memoryview(payload)
                while view:
                    n = writer_rng.choice([1, 3, 50, 300, 1000])
                    # Paced by the reader: a chunk when it asks, so that reads
                    # wait for bytes however the threads are scheduled.
                    if not turn.acquire(timeout=10):
                        raise OSError("the reader stopped asking")
                    send(w, bytes(view[:n]))
                    view = view[n:]
            except OSError as e:  # the reader gave up: the test reports why
                failed.append(e)
            finally:
                close_writer(w)

        turn = threading.Semaphore(0)
        thread = threading.Thread(target=writer, daemon=True)
        got: list[Any] = []
        cancels = 0
        try:
            async with ringio.open(r, **MODES[mode]) as f:
                thread.start()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    name, op = rng.choice(ops)
                    task = asyncio.ensure_future(op(f, rng))
                    for _ in range(rng.choice([0, 1, 1, 2, 5])):
                        turn.release()  # chunks arrive while the read runs
                    how = rng.random()
                    if name in ("read()", "readlines(hint)") and thread.is_alive():
                        how *= 0.7  # reads to EOF: cancelled while the writer writes
                    if how < 0.3:
                        for _ in range(rng.randrange(4)):
                            await asyncio.sleep(0)
                        task.cancel()
                    elif how < 0.75:
                        await asyncio.sleep(rng.choice([0.0001, 0.0005, 0.002]))
                        task.cancel()
                    else:
                        while not task.done():  # not cancelled: give it its bytes
                            turn.release()
                            await asyncio.wait([task], timeout=0.002)
                    try:
                        res = await asyncio.wait_for(task, 10)
                    except asyncio.CancelledError:
                        cancels += 1
                        continue
                    got.append(res)
                    if not res and name not in ("readline(n)", "read(n)", "read1"):
                        break  # EOF
                    if not res and f.closed:
                        break
                else:
                    raise AssertionError("the reads did not reach EOF in time")
        finally:
            for _ in range(len(payload)):
                turn.release()  # the writer ends even if the reader failed
            thread.join(10)
        assert not failed
        data = _joined(got) if got else b""
        if mode == "text":
            data = data.encode()
        print("cancelled reads:", cancels)
        assert cancels >= 5  # the run did cancel reads (8-49 with these seeds)
        assert len(data) == len(payload)
        assert data == payload

    run(main())


@pytest.mark.parametrize("what", ["readline", "read(n)", "readlines"])
async def test_a_cancelled_text_read_of_a_regular_file_keeps_tell_right(engine, tmp_path, what):
    """A text read spanning several chunks of a regular file, cancelled at each
    await in turn: either it returned, or the position (tell) and the next read are
    as if it never ran."""
    path = tmp_path / "t.txt"
    text = "start\n" + "\u00e9x" * 200_000 + "\n" + "end\n"
    path.write_text(text, encoding="utf-8")
    ops = {
        "readline": lambda f: f.readline(),
        "read(n)": lambda f: f.read(300_000),
        "readlines": lambda f: f.readlines(),
    }
    for steps in range(6):
        async with ringio.open(path, encoding="utf-8") as f:
            assert await f.readline() == "start\n"
            cookie = await f.tell()
            task = asyncio.ensure_future(ops[what](f))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                assert await f.tell() == cookie
                got = None
            rest = await f.read()
            assert _joined([got, rest] if got is not None else [rest]) == text[6:]
            await f.seek(cookie)
            assert await f.readline() == text[6:].split("\n")[0] + "\n"


@pytest.mark.parametrize("buffering", [0, 4096])
async def test_a_cancelled_readall_of_a_regular_file_keeps_its_bytes(engine, tmp_path, buffering):
    """readall() (which first asks for the file's size), cancelled at each await in
    turn after a read that left bytes read ahead: either it returned, or the
    position and the next reads are as if it never ran."""
    path = tmp_path / "b.bin"
    payload = random.Random(5).randbytes(200_000)
    path.write_bytes(payload)
    for steps in range(4):
        async with ringio.open(path, "rb", buffering=buffering) as f:
            assert await f.read(10) == payload[:10]
            task = asyncio.ensure_future(f.readall())
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                assert await f.tell() == 10, steps
                got = await f.read()
            assert got == payload[10:], steps


@pytest.mark.parametrize(
    "what",
    ["binary-read(n)", "binary-readinto", "text-read(n)", "text-readline", "unbuffered-readline"],
)
def test_a_cancelled_read_of_a_terminal_keeps_what_it_took(run, what):  # noqa: F811
    """The same on a terminal (a pty in raw mode, whose reads return what has
    arrived): terminals refuse RWF_NOWAIT, so the engines that read after a poll
    take another way there."""
    args, read = READS[what]

    async def main() -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)
        try:
            async with ringio.open(slave, closefd=False, **args) as f:
                os.write(master, "ab\nhé".encode())
                first = []
                if what.endswith("readline"):
                    first.append(await asyncio.wait_for(read(f), 5))
                task = asyncio.ensure_future(read(f))
                await blocked(task)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                os.write(master, b"llo\n")
                want = "ab\nhéllo\n" if "b" not in f.mode else "ab\nhéllo\n".encode()
                rest = type(want)()
                while (left := len(want) - len(_joined([*first, rest]))) > 0:
                    rest += await asyncio.wait_for(f.read(left), 5)
                assert _joined([*first, rest]) == want
        finally:
            os.close(master)
            os.close(slave)

    run(main())


@pytest.mark.parametrize("what", ["binary-readv", "binary-read1", "unbuffered-read(n)"])
def test_a_read_cancelled_as_its_bytes_arrive_keeps_them(run, what):  # noqa: F811
    """The bytes arrive and the read is cancelled in the same loop turn: the op may
    have completed in the kernel (its result then comes after the cancel) or not;
    either way no byte is lost."""
    ops = {
        "binary-readv": ({"mode": "rb"}, _readv),
        "binary-read1": ({"mode": "rb"}, lambda f: f.read1(64)),
        "unbuffered-read(n)": ({"mode": "rb", "buffering": 0}, lambda f: f.read(64)),
    }
    args, read = ops[what]

    async def main() -> None:
        r, w = os.pipe()
        sent = b""
        got = []
        try:
            async with ringio.open(r, **args) as f:
                for i in range(20):
                    task = asyncio.ensure_future(read(f))
                    await asyncio.sleep(0.002 * (i % 3))
                    chunk = b"%d," % i
                    os.write(w, chunk)
                    sent += chunk
                    if i % 4:
                        await asyncio.sleep(0)
                    task.cancel()
                    try:
                        got.append(await task)
                    except asyncio.CancelledError:
                        pass
                os.close(w)
                w = -1
                got.append(await asyncio.wait_for(f.read(), 5))
        finally:
            if w >= 0:
                os.close(w)
        assert b"".join(got) == sent

    run(main())
