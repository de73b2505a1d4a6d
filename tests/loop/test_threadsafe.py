"""Waking the loop from other threads (``call_soon_threadsafe``, executors): the core's
eventfd read (``LoopCore.wake``) ends the wait, with asyncio's behaviour."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

import ringio
from ringio.loop import _selector

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}


@pytest.fixture(params=sorted(LOOPS))
def make_loop(request):
    return LOOPS[request.param]


def python_selects() -> int:
    """RingSelector.select() calls: the Python-level iterations (the native ones,
    inside LoopCore.run_iterations, are not counted here)."""
    return _selector._SELECTS[0]


def test_call_soon_threadsafe_wakes_a_loop_waiting_with_nothing_scheduled(make_loop):
    loop = make_loop()
    try:
        fut = loop.create_future()

        def later() -> None:
            time.sleep(0.05)
            loop.call_soon_threadsafe(fut.set_result, "woken")

        t = threading.Thread(target=later)
        start = time.monotonic()
        t.start()
        assert loop.run_until_complete(asyncio.wait_for(fut, 5)) == "woken"
        t.join()
        assert time.monotonic() - start < 2
    finally:
        loop.close()


def test_executor_round_trips_stay_in_the_native_iteration():
    # asyncio's wake-up is a byte on its self-pipe: each one took a Python-level
    # select (the pipe's poll re-armed), dispatch and recv. The core's own wake-up
    # completes inside the native wait.
    loop = ringio.EventLoop()
    try:

        async def hops(n: int) -> int:
            done = 0
            for _ in range(n):
                done += await loop.run_in_executor(None, int, 1)
            return done

        loop.run_until_complete(hops(10))
        before = python_selects()
        assert loop.run_until_complete(hops(300)) == 300
        assert python_selects() - before < 30
    finally:
        loop.close()


def write_syscalls() -> int:
    """The process's write syscalls so far (/proc/self/io)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscw:"))


def test_wake_ups_before_the_loop_runs_write_once():
    # A burst of call_soon_threadsafe while the loop is busy: the first wake-up
    # writes to the eventfd, the rest find the wait already ending and write
    # nothing; every callback runs, and the next burst wakes the loop again.
    loop = ringio.EventLoop()
    try:
        loop.run_until_complete(asyncio.sleep(0))  # the wake-up read is armed
        for burst in range(3):
            seen: list[int] = []
            before = write_syscalls()

            def burst_of_500(out: list[int] = seen) -> None:
                for k in range(500):
                    loop.call_soon_threadsafe(out.append, k)

            t = threading.Thread(target=burst_of_500)
            t.start()
            t.join()
            assert write_syscalls() - before < 10
            # The loop, waiting with nothing else to do, is woken by that write.
            fut = loop.create_future()
            threading.Timer(0.05, loop.call_soon_threadsafe, (fut.set_result, burst)).start()
            assert loop.run_until_complete(asyncio.wait_for(fut, 5)) == burst
            assert seen == list(range(500))
    finally:
        loop.close()


def test_many_threads_each_callback_runs_once(make_loop):
    loop = make_loop()
    threads, per_thread = 8, 300
    seen: list[tuple[int, int]] = []
    try:
        done = loop.create_future()

        def add(item: tuple[int, int]) -> None:
            seen.append(item)
            if len(seen) == threads * per_thread and not done.done():
                done.set_result(None)

        def producer(k: int) -> None:
            for i in range(per_thread):
                loop.call_soon_threadsafe(add, (k, i))

        workers = [threading.Thread(target=producer, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        loop.run_until_complete(asyncio.wait_for(done, 10))
        for w in workers:
            w.join()
        assert sorted(seen) == [(k, i) for k in range(threads) for i in range(per_thread)]
        # Each thread's callbacks run in the order it scheduled them.
        for k in range(threads):
            assert [i for kk, i in seen if kk == k] == list(range(per_thread))
    finally:
        loop.close()


def test_wakes_after_the_loop_moved_to_another_thread(make_loop):
    # The loop's ring is made again in the thread that runs it next: the wake-up
    # read must be armed on the new ring.
    loop = make_loop()
    try:
        assert loop.run_until_complete(loop.run_in_executor(None, int, 7)) == 7
        out: list[object] = []

        def elsewhere() -> None:
            try:
                out.append(loop.run_until_complete(
                    asyncio.wait_for(loop.run_in_executor(None, int, 8), 5)
                ))  # fmt: skip
            except BaseException as exc:  # the assertion below shows it
                out.append(exc)

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join(10)
        assert out == [8]
        assert loop.run_until_complete(loop.run_in_executor(None, int, 9)) == 9
    finally:
        loop.close()


def test_a_wake_before_the_loop_first_runs_is_not_lost(make_loop):
    loop = make_loop()
    try:
        fut = loop.create_future()
        loop.call_soon_threadsafe(fut.set_result, 1)
        assert loop.run_until_complete(asyncio.wait_for(fut, 5)) == 1
    finally:
        loop.close()


def test_call_soon_threadsafe_after_close_raises_as_asyncio(make_loop):
    loop = make_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_soon_threadsafe(print)


def test_signal_handlers_still_run_while_wakes_arrive(make_loop):
    # Signals keep asyncio's self-pipe (signal.set_wakeup_fd writes to it).
    loop = make_loop()
    got: list[int] = []
    try:
        fut = loop.create_future()
        loop.add_signal_handler(signal.SIGUSR1, lambda: (got.append(1), fut.set_result(None)))

        def poke() -> None:
            for _ in range(50):
                loop.call_soon_threadsafe(lambda: None)
            os.kill(os.getpid(), signal.SIGUSR1)

        t = threading.Thread(target=poke)
        t.start()
        loop.run_until_complete(asyncio.wait_for(fut, 5))
        t.join()
        assert got == [1]
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
        loop.close()
