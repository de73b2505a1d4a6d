"""close() while another task has an operation in flight on the file, and readers
that must never block the loop; on every engine and both loops.

close() ends the operation in flight with ``ValueError("I/O operation on closed
file.")`` and gives the fd number back to the OS only once no op of ours can touch
it: the next file opened with that number is never read or written by the old one's
operations (docs/files.md, "Closing")."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import threading
import time

import pytest
from tests.files.streams import blocked, close_writer, run, send, stream  # noqa: F401

import ringio

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["pipe", "socket"])
@pytest.mark.parametrize("mode", ["rb", "rb0", "r"])
def test_close_ends_a_pending_read_and_the_fd_number_is_not_touched(run, kind, mode):  # noqa: F811
    async def main() -> None:
        r, w = stream(kind)
        buffering = 0 if mode == "rb0" else -1
        enc = {"encoding": "utf-8"} if mode == "r" else {}
        f = await ringio.open(r, mode[:2], buffering=buffering, **enc)
        reads = [asyncio.ensure_future(f.read(10)), asyncio.ensure_future(f.readline())]
        await blocked(reads[0])
        await asyncio.wait_for(f.close(), 5)
        assert f.closed
        for task in reads:  # the one in flight, and the one waiting behind it
            with pytest.raises(ValueError, match="I/O operation on closed file"):
                await asyncio.wait_for(task, 5)
        # The number is free again: the next pipe gets it (lowest free fd), and
        # nothing of the old file's reads may take its bytes.
        r2, w2 = os.pipe()
        try:
            assert r2 == r
            os.write(w2, b"for the new file")
            await asyncio.sleep(0.1)
            os.set_blocking(r2, False)
            assert os.read(r2, 100) == b"for the new file"
        finally:
            os.close(r2)
            os.close(w2)
            close_writer(w)

    run(main())


@pytest.mark.parametrize("kind", ["pipe", "socket"])
def test_close_ends_a_pending_write(run, kind):  # noqa: F811
    async def main() -> None:
        r, w = stream(kind)
        if kind == "pipe":
            fw = await ringio.open(w, "wb", buffering=0)
        else:
            fw = await ringio.open(w.detach(), "wb", buffering=0)
        try:
            payload = b"x" * (8 << 20)  # more than a pipe or socket buffer takes
            while True:  # a raw write takes what fits: until one has to wait
                write = asyncio.ensure_future(fw.write(payload))
                await asyncio.sleep(0.05)
                if not write.done():
                    break
                assert 0 < write.result() < len(payload)
            await asyncio.wait_for(fw.close(), 5)
            with pytest.raises(ValueError, match="I/O operation on closed file"):
                await asyncio.wait_for(write, 5)
        finally:
            os.close(r)

    run(main())


def test_close_waits_for_positioned_reads_in_flight(run, tmp_path):  # noqa: F811
    """Positioned reads without the file's lock (pread) may be in flight when the
    file is closed: none of them may read the file that reuses the fd number."""
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.write_bytes(b"A" * (1 << 20))
    b.write_bytes(b"B" * (1 << 20))

    async def main() -> None:
        f = await ringio.open(a, "rb")
        fd = f.fileno()
        os.fsync(fd)  # clean pages can be dropped from the cache, dirty ones not
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # not cached: queued reads
        reads = [asyncio.ensure_future(f.pread(4096, off)) for off in range(0, 1 << 20, 8192)]
        await asyncio.sleep(0)
        await f.close()
        g = os.open(b, os.O_RDONLY)
        try:
            results = await asyncio.wait_for(asyncio.gather(*reads, return_exceptions=True), 10)
        finally:
            os.close(g)
        assert g == fd
        for res in results:
            if isinstance(res, bytes):
                assert res == b"A" * 4096
            else:
                assert isinstance(res, (ValueError, OSError)), res

    run(main())


def test_a_socket_read_in_flight_then_close_then_a_new_socket(run):  # noqa: F811
    """The fd number of a closed socket file goes to a new socket at once; the old
    file's cancelled read must not take the new socket's bytes."""

    async def main() -> None:
        a, b = socket.socketpair()
        fd = a.detach()
        f = await ringio.open(fd, "rb", buffering=0)
        read = asyncio.ensure_future(f.read(100))
        await blocked(read)
        await f.close()
        c, d = socket.socketpair()
        try:
            assert c.fileno() == fd
            d.sendall(b"new")
            await asyncio.sleep(0.1)
            c.setblocking(False)
            assert c.recv(100) == b"new"
            with pytest.raises(ValueError):
                await read
        finally:
            for s in (b, c, d):
                s.close()

    run(main())


def test_a_cancelled_close_still_closes_once_the_op_has_ended(run):  # noqa: F811
    async def main() -> None:
        r, w = os.pipe()
        try:
            f = await ringio.open(r, "rb")
            read = asyncio.ensure_future(f.read(10))
            await blocked(read)
            closing = asyncio.ensure_future(f.close())
            await asyncio.sleep(0)
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
            with pytest.raises(ValueError, match="I/O operation on closed file"):
                await asyncio.wait_for(read, 5)
            for _ in range(500):
                try:
                    os.fstat(r)
                except OSError:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the fd was never closed")
            await asyncio.wait_for(f.close(), 5)  # a second close: nothing left to do
        finally:
            os.close(w)

    run(main())


def test_close_during_a_buffered_flush_to_a_full_pipe_writes_each_byte_once(run):  # noqa: F811
    """The flush in flight is ended; close() then writes what it had not written,
    once a reader makes room, and nothing twice."""

    async def main() -> None:
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        filler = b"f" * 4096
        os.write(w, filler)  # the pipe is full
        fw = await ringio.open(w, "wb")
        await fw.write(b"hello, " * 100)
        flush = asyncio.ensure_future(fw.flush())
        await blocked(flush)
        got = bytearray()

        def reader() -> None:
            time.sleep(0.2)
            while chunk := os.read(r, 65536):
                got.extend(chunk)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        try:
            await asyncio.wait_for(fw.close(), 5)
            with pytest.raises(ValueError, match="I/O operation on closed file"):
                await asyncio.wait_for(flush, 5)
        finally:
            thread.join(5)
            os.close(r)
        assert bytes(got) == filler + b"hello, " * 100

    run(main())
