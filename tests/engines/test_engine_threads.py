"""One event loop per thread, any number of threads, on every engine.

Each thread's first use of ringio must make an engine of its own and never act on
another thread's (an io_uring ring of the uring engine belongs to the thread that
made it); the engine of a closed loop is released by its own thread or by GC.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import socket
import threading
import weakref

import pytest
from tests.conftest import io_uring_fd_count

import ringio
import ringio._engines as engines

THREADS = 16
JOBS = 200
# Joins and results: generous, but a hang still fails the test instead of blocking it.
DEADLINE = 60

LOOPS = {"asyncio": asyncio.new_event_loop, "ringio": ringio.new_event_loop}


@pytest.fixture(params=["uring", "aio", "thread"])
def engine_name(request, monkeypatch):
    why = None if request.param == "thread" else engines._usable(request.param)
    if why:
        pytest.skip(f"{request.param} engine unavailable: {why}")
    monkeypatch.setenv("RINGIO_ENGINE", request.param)
    engines.reset()
    yield request.param
    engines.reset()


async def _file_work(path: str, tag: int, rounds: int = 3) -> None:
    payload = bytes([tag % 251]) * 5000 + str(tag).encode()
    for _ in range(rounds):
        async with ringio.open(path, "wb") as f:
            await f.write(payload)
            await f.flush()
            await f.fsync()  # a queued op on every engine (never served inline)
        async with ringio.open(path, "rb") as f:
            assert await f.read() == payload
        async with ringio.open(path, "r+b", buffering=0) as f:
            await f.seek(100)
            assert await f.read(10) == payload[100:110]
            await f.write(b"xyz")
            await f.fsync()
        async with ringio.open(path, "rb") as f:
            assert (await f.read())[110:113] == b"xyz"
    assert engines.get().name == os.environ["RINGIO_ENGINE"]


def _run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n, timeout=DEADLINE)

    def body(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


@pytest.mark.parametrize("loop_kind", sorted(LOOPS))
def test_sixteen_threads_each_with_its_own_loop(engine_name, loop_kind, tmp_path):
    def work(i: int) -> None:
        loop = LOOPS[loop_kind]()
        try:
            loop.run_until_complete(
                asyncio.wait_for(_file_work(str(tmp_path / f"t{i}"), i), DEADLINE)
            )
        finally:
            loop.close()

    errors = _run_threads(work, THREADS)
    assert errors == []


@pytest.mark.parametrize("runner", ["asyncio.run", "ringio.run"])
def test_thread_pool_runs_a_loop_per_job(engine_name, runner, tmp_path):
    run = asyncio.run if runner == "asyncio.run" else ringio.run

    def job(i: int) -> int:
        return run(_job(i))

    async def _job(i: int) -> int:
        await _file_work(str(tmp_path / f"j{i % 8}-{threading.get_ident()}"), i, rounds=1)
        return i

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(job, i) for i in range(JOBS)]
        results = [f.result(timeout=DEADLINE) for f in futures]
    assert results == list(range(JOBS))


@pytest.mark.parametrize("loop_kind", sorted(LOOPS))
def test_loop_after_loop_in_new_threads(engine_name, loop_kind, tmp_path):
    """asyncio.run in one thread, then in another: the second thread's first call
    must not touch the first thread's engine (whose loop is closed)."""
    for i in range(6):
        errors = _run_threads(
            lambda k, i=i: _run_closed(LOOPS[loop_kind], _file_work(str(tmp_path / "s"), i)), 1
        )
        assert errors == []


def _run_closed(make, coro) -> None:
    loop = make()
    try:
        loop.run_until_complete(asyncio.wait_for(coro, DEADLINE))
    finally:
        loop.close()


@pytest.mark.parametrize("loop_kind", sorted(LOOPS))
def test_engines_of_closed_loops_in_finished_threads_are_released(engine_name, loop_kind, tmp_path):
    """Neither the loop nor its engine outlives a thread that closed the loop: no
    loop kept alive by ringio, no io_uring instance or eventfd left open."""
    gc.collect()
    rings_before = io_uring_fd_count()
    fds_before = len(os.listdir("/proc/self/fd"))
    loops: list[weakref.ref] = []
    threads_before = set(threading.enumerate())

    async def work(i: int) -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await _file_work(str(tmp_path / f"r{i}"), i, rounds=1)

    for i in range(4):
        assert _run_threads(lambda k, i=i: _run_closed(LOOPS[loop_kind], work(i)), 1) == []
    # Closing the loop shuts its engine's fallback pool down without waiting (a
    # blocking call may still run there). A worker that has just completed a call
    # still holds it, and through its done callbacks the loop, until it takes the
    # next item off its queue: the release is certain once the workers are gone.
    for t in set(threading.enumerate()) - threads_before:
        if t.name.startswith("ringio-") and "-fallback" in t.name:
            t.join(timeout=10)
            assert not t.is_alive(), f"{t.name} outlived the closed loop by 10 s"
    gc.collect()
    assert [r() for r in loops] == [None] * 4
    assert io_uring_fd_count() == rings_before
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_a_loop_run_in_another_thread_gets_an_engine_of_that_thread(engine_name, tmp_path):
    """asyncio lets a stopped loop run again in another thread: new files there work."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_file_work(str(tmp_path / "a"), 1, rounds=1))
        errors = _run_threads(
            lambda k: loop.run_until_complete(
                asyncio.wait_for(_file_work(str(tmp_path / "b"), 2, rounds=1), DEADLINE)
            ),
            1,
        )
        assert errors == []
        loop.run_until_complete(_file_work(str(tmp_path / "c"), 3, rounds=1))
    finally:
        loop.close()


def _echo_with_watcher(on_loop: bool) -> None:
    a, b = socket.socketpair()
    with a, b:
        if on_loop:

            async def main() -> None:
                w = ringio.Watcher(loop=True)
                try:
                    for k in range(20):
                        w.write(None, a, b"ping%d" % k)
                        w.read(None, b, bytearray(64))
                        got = []
                        while len(got) < 2:
                            got += await asyncio.wait_for(w.wait_io_async(), DEADLINE)
                        r = next(r for r in got if r.operation == ringio.watcher.OP_READ)
                        assert bytes(r.buffer[: r.size]) == b"ping%d" % k
                finally:
                    w.close()

            ringio.run(main())
            return
        with ringio.Watcher(loop=False) as w:
            for k in range(20):
                w.write(None, a, b"ping%d" % k)
                w.read(None, b, bytearray(64))
                got = []
                while len(got) < 2:
                    got += w.wait_io(timeout=DEADLINE)
                r = next(r for r in got if r.operation == ringio.watcher.OP_READ)
                assert bytes(r.buffer[: r.size]) == b"ping%d" % k


@pytest.mark.parametrize("on_loop", [False, True], ids=["own-ring", "loop-ring"])
def test_watchers_in_threads(on_loop):
    if (why := engines._usable("uring")) is not None:
        pytest.skip(f"a Watcher needs io_uring: {why}")
    errors = _run_threads(lambda i: _echo_with_watcher(on_loop), THREADS)
    assert errors == []
    # And one after another in fresh threads (a Watcher's ring is its thread's).
    for _ in range(5):
        assert _run_threads(lambda i: _echo_with_watcher(on_loop), 1) == []
