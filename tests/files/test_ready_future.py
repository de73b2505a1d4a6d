"""A read the page cache served at the call (a ``Ready``) is a done asyncio future
to asyncio's helpers: ``gather``, ``wait``, ``wait_for``, ``shield``,
``as_completed`` and ``ensure_future`` take it as it is, with no task made to
await it, and give the same results as for a coroutine (the oracle: ``os.pread``
and the same helpers over plain coroutines). Outside a running loop it is no
future (it has no loop then), so ``run_until_complete`` still takes it as a
coroutine."""

from __future__ import annotations

import asyncio
import contextvars
import os
import random
import sys
import threading

import pytest

import ringio
from ringio._core import Ready

PAYLOAD = random.Random(12).randbytes(300_000)
SPANS = [(0, 4096), (5000, 100), (123_456, 65_536), (299_000, 4096), (400_000, 10), (7, 0)]


@pytest.fixture
def path(cached_file):
    return cached_file(PAYLOAD)


def expected(spans=SPANS) -> list[bytes]:
    return [PAYLOAD[off : off + n] for off, n in spans]


class TaskCount:
    """A task factory that counts the tasks the loop makes."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, loop, coro, **kwargs):
        self.made += 1
        return asyncio.Task(coro, loop=loop, **kwargs)


async def test_gather_of_cached_reads_makes_no_task(engine, path):
    loop = asyncio.get_running_loop()
    count = TaskCount()
    loop.set_task_factory(count)
    try:
        async with ringio.open(path, "rb", buffering=0) as f:
            reads = [f.pread(n, off) for off, n in SPANS]
            assert await asyncio.gather(*reads) == expected()
            if engine.inline_reads:
                assert all(type(r) is Ready for r in reads)
                assert count.made == 0
            else:  # the thread engine's reads are coroutines: a task each
                assert count.made == len(SPANS)
    finally:
        loop.set_task_factory(None)


async def test_asyncio_helpers_take_cached_reads_as_done_futures(engine, path):
    buf = bytearray(4096)
    async with ringio.open(path, "rb") as f:
        assert await asyncio.gather(*(f.pread(n, off) for off, n in SPANS)) == expected()
        got = await asyncio.gather(f.pread(10, 0), f.preadinto(buf, 8192))
        assert got == [PAYLOAD[:10], 4096] and buf == PAYLOAD[8192:12288]
        assert await asyncio.wait_for(f.pread(100, 50), 5) == PAYLOAD[50:150]
        assert await asyncio.shield(f.pread(100, 60)) == PAYLOAD[60:160]
        read = f.pread(100, 70)
        fut = asyncio.ensure_future(read)
        assert fut is read if engine.inline_reads else isinstance(fut, asyncio.Task)
        assert await fut == PAYLOAD[70:170]
        # asyncio.wait refuses coroutines, which a cached read also is: tasks, as
        # asyncio's documentation asks.
        done, pending = await asyncio.wait([asyncio.create_task(f.pread(5, k)) for k in range(4)])
        assert not pending and sorted(d.result() for d in done) == sorted(
            PAYLOAD[k : k + 5] for k in range(4)
        )
        got = [await r for r in asyncio.as_completed([f.pread(3, 1), f.pread(3, 2)])]
        assert sorted(got) == sorted([PAYLOAD[1:4], PAYLOAD[2:5]])
        assert await asyncio.create_task(f.pread(8, 9)) == PAYLOAD[9:17]
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(f.pread(8, 10))
        assert task.result() == PAYLOAD[10:18]


async def test_gather_mixes_cached_reads_with_coroutines_and_errors(engine, path):
    async def fails():
        await asyncio.sleep(0)
        raise OSError(5, "device")

    async def later(value):
        await asyncio.sleep(0.001)
        return value

    async with ringio.open(path, "rb") as f:
        got = await asyncio.gather(f.pread(4, 0), later(1), fails(), f.pread(4, 4),
                                   return_exceptions=True)  # fmt: skip
        assert got[0] == PAYLOAD[:4] and got[1] == 1 and got[3] == PAYLOAD[4:8]
        assert isinstance(got[2], OSError) and got[2].errno == 5
        with pytest.raises(OSError, match="device"):
            await asyncio.gather(f.pread(4, 0), fails())
        # The same read twice is one child, as for a future.
        read = f.pread(6, 100)
        assert await asyncio.gather(read, read) == [PAYLOAD[100:106]] * 2


async def test_cancelling_a_gather_of_cached_reads_cancels_the_rest(engine, path):
    async with ringio.open(path, "rb") as f:
        started = asyncio.Event()

        async def waits():
            started.set()
            await asyncio.sleep(30)

        outer = asyncio.gather(f.pread(4, 0), waits())
        await started.wait()
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer


async def test_ready_is_a_done_future_in_a_running_loop():
    loop = asyncio.get_running_loop()
    r = Ready(b"abc")
    assert asyncio.isfuture(r) and asyncio.iscoroutine(r)
    assert r._asyncio_future_blocking is False
    assert r.get_loop() is loop
    assert r.done() and not r.cancelled()
    assert r.exception() is None
    assert r.result() == b"abc" and r.result() == b"abc"  # not taken by result()
    assert r.cancel() is False and r.cancel(msg="no") is False
    assert r.done() and not r.cancelled()
    assert r.remove_done_callback(print) == 0
    assert await r == b"abc"
    with pytest.raises(RuntimeError, match="already awaited"):
        r.result()


async def test_ready_calls_done_callbacks_soon_in_their_context():
    var = contextvars.ContextVar("var", default="outer")
    r = Ready(7)
    seen = []
    r.add_done_callback(lambda fut: seen.append(("plain", fut, var.get())))
    ctx = contextvars.copy_context()
    ctx.run(var.set, "inner")
    r.add_done_callback(lambda fut: seen.append(("ctx", fut, var.get())), context=ctx)
    assert seen == []  # as a done future: called soon, not at once
    await asyncio.sleep(0)
    assert seen == [("plain", r, "outer"), ("ctx", r, "inner")]


async def test_ready_future_methods_reject_bad_arguments():
    r = Ready(1)
    with pytest.raises(TypeError):
        r.add_done_callback()
    with pytest.raises(TypeError):
        r.add_done_callback(print, print)
    with pytest.raises(TypeError, match="context"):
        r.add_done_callback(print, ctx=None)
    with pytest.raises(TypeError):
        r.cancel(1, 2)
    with pytest.raises(TypeError, match="msg"):
        r.cancel(message="x")
    with pytest.raises(TypeError):
        r.done(1)
    with pytest.raises(AttributeError):
        del r._asyncio_future_blocking
    r._asyncio_future_blocking = False  # what asyncio's task step writes
    assert r._asyncio_future_blocking is False
    assert await r == 1


def test_ready_outside_a_running_loop_is_a_coroutine_only():
    r = Ready(5)
    assert not asyncio.isfuture(r)
    assert r._asyncio_future_blocking is None
    with pytest.raises(RuntimeError, match="no running event loop"):
        r.get_loop()
    with pytest.raises(RuntimeError, match="no running event loop"):
        r.add_done_callback(print)
    for new_loop in (asyncio.new_event_loop, ringio.new_event_loop):
        loop = new_loop()
        try:
            assert loop.run_until_complete(Ready(5)) == 5
        finally:
            loop.close()


def test_run_coroutine_threadsafe_takes_a_ready(tmp_path):
    loop = ringio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        assert asyncio.run_coroutine_threadsafe(Ready(b"x"), loop).result(10) == b"x"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def test_gather_results_equal_the_coroutines_results(engine, path):
    """Differential: gather over the file's reads and over coroutines that call
    os.pread give the same lists, for random spans (cached and past the end)."""
    rng = random.Random(3)
    fd = os.open(path, os.O_RDONLY)

    async def plain(n, off):
        return os.pread(fd, n, off)

    try:
        async with ringio.open(path, "rb", buffering=0) as f:
            for _ in range(20):
                spans = [(rng.randrange(len(PAYLOAD) + 100), rng.choice([0, 1, 700, 4096, 70_000]))
                         for _ in range(rng.randrange(1, 12))]  # fmt: skip
                ours = await asyncio.gather(*(f.pread(n, off) for off, n in spans))
                theirs = await asyncio.gather(*(plain(n, off) for off, n in spans))
                assert ours == theirs
    finally:
        os.close(fd)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks are CPython 3.12+")
async def test_gather_of_cached_reads_under_eager_tasks(engine, path):
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)
    try:
        async with ringio.open(path, "rb") as f:
            assert await asyncio.gather(*(f.pread(n, off) for off, n in SPANS)) == expected()
    finally:
        loop.set_task_factory(None)
