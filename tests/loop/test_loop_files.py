"""File ops on ringio.EventLoop ride the loop's own ring.

The whole file suite also runs on this loop (the ``uring-loop`` engine parameter of
tests/engines/conftest.py); these tests check what is particular to it: one ring
for everything, no eventfd, completions settled by the loop's select, buffers kept
until the kernel is done, back-pressure, and the loop's close.
"""

from __future__ import annotations

import asyncio
import os
import select

import pytest
from tests.conftest import io_uring_fd_count

import ringio
import ringio._engines as engines
import ringio.os
from ringio import _core
from ringio._proactor import LoopRingProactor
from ringio.loop._selector import select_count


@pytest.fixture(autouse=True)
def uring_engine(monkeypatch):
    if why := engines._usable("uring"):
        pytest.skip(f"uring engine unavailable: {why}")
    monkeypatch.setenv("RINGIO_ENGINE", "uring")
    engines.reset()
    yield
    engines.reset()


@pytest.fixture
def pipe():
    rfd, wfd = os.pipe()
    yield rfd, wfd
    os.close(rfd)
    os.close(wfd)


async def _pending_read(loop, rfd):
    """A read of the empty pipe, in flight on the loop's ring: (ring, ops in flight
    before it, its task)."""
    ring = loop._loop_ring.ring
    before = ring.in_flight
    task = asyncio.ensure_future(engines.get().read(rfd, bytearray(8)))
    await asyncio.sleep(0.01)
    return ring, before, task


def test_file_ops_use_the_loops_ring_and_no_eventfd(run, loop, tmp_path):
    path = tmp_path / "f.bin"

    async def main():
        rings_before = io_uring_fd_count()  # the loop's ring
        keys_before = len(loop._selector.get_map())
        async with await ringio.open(path, "wb+") as f:
            await f.write(b"hello ring")
            await f.flush()
            await f.fsync()
            assert await f.pread(5, 6) == b"ring"
            st = await ringio.os.stat(path)
        eng = engines.get()
        assert isinstance(eng._proactor, LoopRingProactor)
        # No ring of the engine's own, no eventfd registered with the loop.
        assert io_uring_fd_count() == rings_before
        assert len(loop._selector.get_map()) == keys_before
        return st.st_size

    assert run(main()) == 10
    assert path.read_bytes() == b"hello ring"


def test_a_pending_read_is_in_flight_on_the_loops_ring(run, loop, pipe):
    rfd, wfd = pipe

    async def main():
        ring, before, task = await _pending_read(loop, rfd)
        assert not task.done() and ring.in_flight == before + 1
        os.write(wfd, b"data")
        assert await asyncio.wait_for(task, 5) == 4
        assert ring.in_flight == before

    run(main())


def test_one_select_settles_every_ready_completion(run, tmp_path):
    payload = os.urandom(32 * 256)
    path = tmp_path / "data.bin"
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY)

    async def main():
        eng = engines.get()
        hint = engines.NowaitHint(read=False)  # through the ring, not inline
        bufs = [bytearray(256) for _ in range(32)]
        before = select_count()
        got = await asyncio.gather(*(eng.pread(fd, b, i * 256, hint) for i, b in enumerate(bufs)))
        # Cached data: each read completes at its submit; the futures are settled
        # from Rust in the select(s) that reap them, not one wake-up per read.
        assert select_count() - before <= 4
        return got, b"".join(bufs)

    try:
        got, data = run(main())
    finally:
        os.close(fd)
    assert got == [256] * 32 and data == payload


def test_ops_reach_the_kernel_at_once_only_while_it_is_short_of_work(run, loop):
    rfd, wfd = os.pipe()

    async def main():
        proactor = engines.get()._proactor
        ring = loop._loop_ring.ring
        futs = []

        def start() -> None:
            fut = loop.create_future()
            futs.append(fut)
            proactor.start(_core.poll(rfd, select.POLLIN, data=fut), watch=False)

        # Let the selector arm its polls first (they count as work in flight).
        await asyncio.sleep(0)
        waiting = []
        for _ in range(6):
            start()
            waiting.append(ring._sq_waiting)
        # Submitted on the spot while the SQEs waiting would reach the in-flight
        # count, held for the select otherwise: so never more than half wait.
        assert any(w == 0 for w in waiting) and any(w > 0 for w in waiting)
        assert all(2 * w <= ring.in_flight for w in waiting)
        await asyncio.sleep(0)
        assert ring._sq_waiting == 0  # the select's enter took the rest
        os.write(wfd, b"x")
        return await asyncio.gather(*futs)

    try:
        masks = run(main())
    finally:
        os.close(rfd)
        os.close(wfd)
    assert all(m & select.POLLIN for m in masks)


def test_the_kernel_keeps_a_buffer_until_its_completion_then_settled_reports(run, loop):
    rfd, wfd = os.pipe()

    async def main():
        proactor = engines.get()._proactor
        buf = bytearray(16)
        fut = loop.create_future()
        op = _core.read(rfd, buf, data=fut)
        proactor.start(op, watch=False)
        await asyncio.sleep(0.01)
        # The awaiter is gone but the op is not cancelled in the kernel: it still
        # owns the buffer, across loop iterations.
        fut.cancel()
        outcome = proactor.settled(op)
        for _ in range(3):
            await asyncio.sleep(0.01)
            with pytest.raises(BufferError):
                buf.extend(b"x")
        assert not outcome.done()
        os.write(wfd, b"late bytes")
        # The completion of a cancelled future comes back through the selector's
        # future sink, which answers settled() with what the kernel really did.
        assert await asyncio.wait_for(outcome, 5) == 10
        buf.extend(b"x")  # released with the completion
        return bytes(buf[:10])

    try:
        assert run(main()) == b"late bytes"
    finally:
        os.close(rfd)
        os.close(wfd)


def test_cancelling_the_task_cancels_the_read_in_the_kernel(run, loop, pipe):
    rfd, _ = pipe

    async def main():
        ring, before, task = await _pending_read(loop, rfd)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):  # nothing is written: only the kernel's cancel ends it
            if ring.in_flight == before:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the read stayed in flight")

    run(main())


def test_ops_beyond_the_completion_queue_wait_for_room(run, loop, tmp_path):
    path = tmp_path / "data.bin"
    payload = os.urandom(4096)
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY)

    async def main():
        eng = engines.get()
        ring = loop._loop_ring.ring
        hint = engines.NowaitHint(read=False)
        n = ring.maxevents + 200
        bufs = [bytearray(8) for _ in range(n)]
        got = await asyncio.gather(*(eng.pread(fd, b, (i % 512) * 8, hint)
                                     for i, b in enumerate(bufs)))  # fmt: skip
        return got, bufs

    try:
        got, bufs = run(main())
    finally:
        os.close(fd)
    assert got == [8] * len(bufs)
    assert all(b == payload[(i % 512) * 8 : (i % 512) * 8 + 8] for i, b in enumerate(bufs))


def test_closing_the_loop_with_a_file_op_in_flight(tmp_path):
    loop = ringio.new_event_loop()
    rfd, wfd = os.pipe()
    buf = bytearray(8)
    try:

        async def start():
            eng = engines.get()
            return asyncio.ensure_future(eng.read(rfd, buf))

        task = loop.run_until_complete(start())
        loop.run_until_complete(asyncio.sleep(0.01))
        assert not task.done()
        loop.close()  # the ring's shutdown cancels the read and waits for the kernel
        buf.extend(b"x")  # so the buffer is released
    finally:
        os.close(rfd)
        os.close(wfd)
        if not loop.is_closed():
            loop.close()


def test_the_engine_closed_while_the_loop_runs(run, loop, tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")

    async def main():
        eng = engines.get()
        fd = os.open(path, os.O_RDONLY)
        try:
            assert await eng.pread(fd, bytearray(3), 0, engines.NowaitHint(read=False)) == 3
            eng.close_engine()
            with pytest.raises(ValueError, match="closed"):
                await eng.pread(fd, bytearray(3), 0, engines.NowaitHint(read=False))
            # A new engine for the same loop rides the same ring.
            again = engines.get()
            assert again is not eng and isinstance(again._proactor, LoopRingProactor)
            buf = bytearray(3)
            assert await again.pread(fd, buf, 0, engines.NowaitHint(read=False)) == 3
            return bytes(buf)
        finally:
            os.close(fd)

    assert run(main()) == b"abc"


class _CountingLoop(ringio.EventLoop):
    """Counts the Python `_run_once` calls (each may run many native iterations)."""

    python_runs = 0

    def _run_once(self):
        self.python_runs += 1
        super()._run_once()


def test_iterations_stay_native_once_files_have_used_the_ring(tmp_path):
    # A file proactor on the loop must not send every later iteration through
    # Python: only ops waiting for CQ room need it. Reads made between the steps
    # still reach the kernel and settle.
    path = tmp_path / "data.bin"
    payload = os.urandom(64 * 1024)
    path.write_bytes(payload)
    loop = _CountingLoop()
    try:

        async def main():
            f = await ringio.open(path, "rb")
            try:
                assert await f.pread(4096, 0) == payload[:4096]
                runs, iterations = loop.python_runs, _core.loop.LoopCore.iterations()
                for _ in range(2000):
                    await asyncio.sleep(0)
                steps = (loop.python_runs - runs, _core.loop.LoopCore.iterations() - iterations)
                reads = await asyncio.gather(*(f.pread(512, i * 512) for i in range(128)))
            finally:
                await f.close()
            return steps, reads

        (python_runs, iterations), reads = loop.run_until_complete(
            asyncio.wait_for(main(), 10)
        )
    finally:
        loop.close()
    assert iterations >= 2000
    assert python_runs < 100, f"{python_runs} Python iterations for {iterations} native ones"
    assert reads == [payload[i * 512 : (i + 1) * 512] for i in range(128)]
