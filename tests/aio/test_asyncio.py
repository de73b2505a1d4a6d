"""ringio.aio.AsyncContext: kernel AIO on asyncio, with no threads."""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket

import pytest
from tests.conftest import thread_count

from ringio import aio


async def test_read_write_readv_writev_fsync(empty_file):
    async with aio.AsyncContext() as actx:
        assert await actx.write(empty_file, b"0123456789", 0) == 10
        assert await actx.read(empty_file, 4, 3) == b"3456"
        assert await actx.read(empty_file, 100, 8) == b"89"
        assert await actx.writev(empty_file, [b"ab", b"cd"], 10) == 4
        a, b = bytearray(3), bytearray(11)
        assert await actx.readv(empty_file, [a, b], 0) == 14
        assert a + b == b"0123456789abcd"
        buf = bytearray(2)
        assert await actx.readinto(empty_file, buf, 12) == 2 and buf == b"cd"
        assert await actx.fsync(empty_file) is None
        assert await actx.fdsync(empty_file) is None


async def test_concurrent_reads_are_batched_and_all_correct(data_file):
    fd, payload = data_file
    async with aio.AsyncContext(256) as actx:
        offsets = [(i * 997) % (len(payload) - 64) for i in range(200)]
        results = await asyncio.gather(*(actx.read(fd, 64, o) for o in offsets))
        assert results == [payload[o : o + 64] for o in offsets]


async def test_more_ops_than_maxevents_wait_their_turn(data_file):
    fd, payload = data_file
    async with aio.AsyncContext(maxevents=4) as actx:
        results = await asyncio.gather(*(actx.read(fd, 16, i * 16) for i in range(300)))
        assert b"".join(results) == payload[: 300 * 16]


async def test_no_thread_is_started(data_file):
    fd, _ = data_file
    before = thread_count()
    async with aio.AsyncContext() as actx:
        await asyncio.gather(*(actx.read(fd, 128, i) for i in range(100)))
        assert thread_count() == before


async def test_kernel_errors_reach_the_awaiter_as_oserror(tmp_path, data_file):
    fd, payload = data_file
    async with aio.AsyncContext() as actx:
        # Made after the context, so the context's eventfd cannot reuse its number.
        dead = os.open(tmp_path / "d", os.O_RDWR | os.O_CREAT, 0o600)
        os.close(dead)
        good = asyncio.ensure_future(actx.read(fd, 4, 0))
        bad = asyncio.ensure_future(actx.read(dead, 4, 0))
        also_good = asyncio.ensure_future(actx.read(fd, 4, 4))
        with pytest.raises(OSError) as info:
            await bad
        assert info.value.errno == errno.EBADF
        assert await good == payload[:4] and await also_good == payload[4:8]


async def test_poll_is_awaitable_and_cancelling_it_cancels_in_the_kernel():
    a, b = socket.socketpair()
    with a, b:
        async with aio.AsyncContext() as actx:
            task = asyncio.ensure_future(actx.poll(a, select.POLLIN))
            await asyncio.sleep(0.01)
            assert actx.context.in_flight == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):  # the cancelled poll's completion arrives and is reaped
                if actx.context.in_flight == 0:
                    break
                await asyncio.sleep(0.01)
            assert actx.context.in_flight == 0
            b.send(b"x")
            assert await actx.poll(a, select.POLLIN) & select.POLLIN


async def test_cancelled_read_keeps_its_buffer_until_the_kernel_is_done(data_file):
    fd, payload = data_file
    loop = asyncio.get_running_loop()
    async with aio.AsyncContext() as actx:
        efd = actx.context.fileno()
        # Hold back completion delivery so the op is certainly in flight when cancelled.
        loop.remove_reader(efd)
        buf = bytearray(4096)
        task = asyncio.ensure_future(actx.readinto(fd, buf, 0))
        for _ in range(10):
            await asyncio.sleep(0)
        assert actx.context.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert actx.context.in_flight == 1
        with pytest.raises(BufferError):
            buf.extend(b"x")  # the kernel still owns it
        loop.add_reader(efd, actx._proactor._on_completions)
        for _ in range(100):
            if actx.context.in_flight == 0:
                break
            await asyncio.sleep(0.01)
        assert actx.context.in_flight == 0
        assert buf == payload[:4096]  # what the kernel did is visible
        buf.extend(b"x")  # and the buffer is released


async def test_an_op_cancelled_before_submission_never_reaches_the_kernel(empty_file):
    async with aio.AsyncContext() as actx:
        task = asyncio.ensure_future(actx.write(empty_file, b"never", 0))
        await asyncio.sleep(0)  # the task starts and queues its op
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await actx.fsync(empty_file)
        assert os.pread(empty_file, 10, 0) == b""


async def test_closing_with_a_pending_poll_fails_its_awaiter_instead_of_hanging():
    a, b = socket.socketpair()
    with a, b:
        actx = aio.AsyncContext()
        task = asyncio.ensure_future(actx.poll(a, select.POLLIN))
        await asyncio.sleep(0.01)
        actx.close()
        with pytest.raises(OSError) as info:
            await asyncio.wait_for(task, 5)
        assert info.value.errno == errno.ECANCELED
        assert actx.closed
        with pytest.raises(ValueError, match="closed"):
            await actx.read(a, 1)


async def test_read_of_a_negative_size_is_a_value_error(data_file):
    fd, _ = data_file
    async with aio.AsyncContext() as actx:
        with pytest.raises(ValueError, match="size"):
            await actx.read(fd, -1)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["pipe", "socket"])
@pytest.mark.parametrize("how", ["read", "readinto", "readv"])
async def test_reading_an_empty_stream_waits_without_blocking_the_loop(kind, how):
    """Buffered AIO would run the read inside io_submit and block the whole loop
    until data came; the context waits for readiness first."""
    if kind == "pipe":
        r, w = os.pipe()
        send = lambda data: os.write(w, data)  # noqa: E731
        close = lambda: (os.close(r), os.close(w))  # noqa: E731
    else:
        a, b = socket.socketpair()
        r = a.fileno()
        send = b.send
        close = lambda: (a.close(), b.close())  # noqa: E731
    try:
        async with aio.AsyncContext() as actx:
            buf = bytearray(5)
            reads = {
                "read": lambda: actx.read(r, 5),
                "readinto": lambda: actx.readinto(r, buf),
                "readv": lambda: actx.readv(r, [buf]),
            }
            task = asyncio.ensure_future(reads[how]())
            # The loop keeps running while the read waits: this sleep returns.
            await asyncio.wait_for(asyncio.sleep(0.05), timeout=2)
            assert not task.done()
            send(b"hello")
            got = await asyncio.wait_for(task, timeout=5)
            assert (got if how == "read" else bytes(buf[:got])) == b"hello"
            # Cancelling a waiting read consumes nothing.
            waiting = asyncio.ensure_future(actx.read(r, 5))
            await asyncio.sleep(0.02)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            send(b"after")
            assert await asyncio.wait_for(actx.read(r, 5), timeout=5) == b"after"
    finally:
        close()


@pytest.mark.timeout(20)
async def test_writing_to_a_full_pipe_waits_without_blocking_the_loop():
    r, w = os.pipe()
    try:
        os.set_blocking(w, False)
        while True:  # fill the pipe
            try:
                os.write(w, b"x" * 65536)
            except BlockingIOError:
                break
        os.set_blocking(w, True)
        async with aio.AsyncContext() as actx:
            task = asyncio.ensure_future(actx.write(w, b"y"))
            await asyncio.wait_for(asyncio.sleep(0.05), timeout=2)
            assert not task.done()
            while os.read(r, 65536):  # drain until the pipe has room
                if task.done() or select.select([r], [], [], 0)[0] == []:
                    break
            assert await asyncio.wait_for(task, timeout=5) == 1
    finally:
        os.close(r)
        os.close(w)
