"""ringio.EventLoop: entry points, scheduling, lifecycle, errors (same as asyncio's)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import selectors
import socket
import sys
import threading
import time

import pytest

import ringio
from ringio.loop import RingSelector


def test_entry_points_make_ringio_loops():
    loop = ringio.new_event_loop()
    try:
        assert isinstance(loop, ringio.EventLoop)
        assert isinstance(loop, asyncio.AbstractEventLoop)
        assert isinstance(loop._selector, RingSelector)
    finally:
        loop.close()

    async def which():
        return type(asyncio.get_running_loop())

    assert ringio.run(which()) is ringio.EventLoop
    with asyncio.Runner(loop_factory=ringio.new_event_loop) as runner:
        assert runner.run(which()) is ringio.EventLoop


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.run(loop_factory=) is 3.12+")
def test_asyncio_run_loop_factory():
    async def which():
        return type(asyncio.get_running_loop())

    assert asyncio.run(which(), loop_factory=ringio.new_event_loop) is ringio.EventLoop


def test_install_and_policy():
    old = asyncio.get_event_loop_policy()
    try:
        ringio.install()
        assert isinstance(asyncio.get_event_loop_policy(), ringio.EventLoopPolicy)

        async def which():
            return type(asyncio.get_running_loop())

        assert asyncio.run(which()) is ringio.EventLoop
        loop = asyncio.new_event_loop()
        assert isinstance(loop, ringio.EventLoop)
        loop.close()
    finally:
        asyncio.set_event_loop_policy(old)


def test_run_debug_flag():
    async def debug():
        return asyncio.get_running_loop().get_debug()

    assert ringio.run(debug(), debug=True) is True
    assert ringio.run(debug(), debug=False) is False


def test_the_loops_ring_has_no_eventfd():
    # The loop waits for its ring by entering it: no eventfd is registered, so the
    # kernel signals none per completion.
    loop = ringio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.sleep(0))
        ring = loop._selector.loop_ring.ring
        with pytest.raises(ValueError, match="eventfd=False"):
            ring.fileno()
    finally:
        loop.close()


def test_the_loops_ring_is_entered_through_its_threads_registered_fd():
    # Each io_uring_enter by index skips the fd lookup and the file's reference
    # count; a loop in another thread registers its ring with that thread.
    def setup_in_a_loop() -> dict:
        loop = ringio.new_event_loop()
        try:
            loop.run_until_complete(asyncio.sleep(0))
            return loop._selector.loop_ring.ring.setup
        finally:
            loop.close()

    setups = [setup_in_a_loop()]
    worker = threading.Thread(target=lambda: setups.append(setup_in_a_loop()))
    worker.start()
    worker.join()
    for setup in setups:
        assert setup["registered_fd"] is setup["defer_taskrun"]


def test_loops_run_one_after_another_on_pool_threads_each_register_their_ring():
    # A thread's table has 16 entries: 40 loops on two pool threads find one free
    # only if every loop closed before them gave its entry back.
    async def registered() -> tuple[int, bool, bool]:
        setup = asyncio.get_running_loop()._selector.loop_ring.ring.setup
        await asyncio.sleep(0)
        return threading.get_ident(), setup["registered_fd"], setup["defer_taskrun"]

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: ringio.run(registered()), range(40)))
    assert len({tid for tid, _, _ in runs}) <= 2
    assert all(reg is defer for _, reg, defer in runs)


def test_call_soon_later_at_order(loop):
    seen = []
    t0 = loop.time()
    loop.call_later(0.05, seen.append, "later")
    loop.call_at(t0 + 0.02, seen.append, "at")
    loop.call_soon(seen.append, "soon")
    loop.call_later(0.08, loop.stop)
    loop.run_forever()
    assert seen == ["soon", "at", "later"]
    assert loop.time() - t0 >= 0.08
    assert loop.time() == pytest.approx(time.monotonic(), abs=0.5)


def test_cancelled_handles_do_not_run(loop):
    seen = []
    h = loop.call_soon(seen.append, 1)
    t = loop.call_later(0.01, seen.append, 2)
    h.cancel()
    t.cancel()
    loop.call_later(0.03, loop.stop)
    loop.run_forever()
    assert seen == []


def test_many_cancelled_timers_are_pruned_and_the_rest_run_in_order(loop):
    # More than 100 timers, over half cancelled: the heap is rebuilt (asyncio's
    # rule); the survivors still run in time order and the count is right after.
    seen = []
    t0 = loop.time()
    handles = [loop.call_at(t0 + 0.001 * (k % 50), seen.append, k) for k in range(300)]
    for h in handles[::3] + handles[1::3]:
        h.cancel()
    loop.call_at(t0 + 0.2, loop.stop)
    loop.run_forever()
    kept = list(range(2, 300, 3))
    assert sorted(seen) == kept
    whens = [k % 50 for k in seen]
    assert whens == sorted(whens)  # time order (equal times in any order, as asyncio)
    assert loop._timer_cancelled_count == 0
    assert not loop._scheduled


def test_a_subclass_clock_is_the_one_timers_follow():
    # The loop's iteration reads the clock directly unless time() is overridden.
    class Shifted(ringio.EventLoop):
        def time(self):
            return super().time() + 1000.0

    loop = Shifted()
    try:
        seen = []
        loop.call_later(0.02, seen.append, "later")
        loop.call_later(0.05, loop.stop)
        t0 = time.monotonic()
        loop.run_forever()
        assert seen == ["later"]
        assert 0.04 <= time.monotonic() - t0 < 5
    finally:
        loop.close()


def test_call_soon_threadsafe_wakes_a_blocked_loop(loop):
    # The loop sleeps in io_uring_enter with a 30 s timer; only the self-pipe poll
    # can wake it in time.
    loop.call_later(30, loop.stop)
    woke = []

    def from_thread():
        time.sleep(0.05)
        loop.call_soon_threadsafe(lambda: (woke.append(time.monotonic()), loop.stop()))

    th = threading.Thread(target=from_thread)
    t0 = time.monotonic()
    th.start()
    loop.run_forever()
    th.join()
    assert woke and woke[0] - t0 < 5


def test_run_until_complete_result_and_exception(loop):
    async def ok():
        await asyncio.sleep(0)
        return 42

    async def bad():
        raise ZeroDivisionError

    assert loop.run_until_complete(ok()) == 42
    with pytest.raises(ZeroDivisionError):
        loop.run_until_complete(bad())


def test_closed_loop_errors(loop):
    loop.close()
    assert loop.is_closed()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_soon(print)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_later(1, print)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_forever()
    coro = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_until_complete(coro)
    coro.close()
    loop.close()  # idempotent


def test_close_running_loop_refused(loop):
    async def close_me():
        loop.close()

    with pytest.raises(RuntimeError, match="Cannot close a running event loop"):
        loop.run_until_complete(close_me())


def test_run_forever_twice_refused(loop):
    async def nested():
        loop.run_forever()

    with pytest.raises(RuntimeError, match="already running"):
        loop.run_until_complete(nested())


def test_debug_detects_wrong_thread(loop):
    loop.set_debug(True)
    errors = []

    async def main():
        def other():
            try:
                loop.call_soon(print)
            except RuntimeError as e:
                errors.append(e)

        th = threading.Thread(target=other)
        th.start()
        await loop.run_in_executor(None, th.join)

    loop.run_until_complete(main())
    assert errors and "Non-thread-safe operation" in str(errors[0])


def test_loop_runs_in_another_thread(loop):
    # The loop (and its self-pipe registration) is created here, but runs there:
    # the SINGLE_ISSUER ring must belong to the running thread.
    async def main():
        await asyncio.sleep(0.01)
        return threading.get_ident()

    out = []
    th = threading.Thread(target=lambda: out.append(loop.run_until_complete(main())))
    th.start()
    th.join(10)
    assert out and out[0] != threading.get_ident()
    # ...and afterwards here again.
    assert loop.run_until_complete(main()) == threading.get_ident()


def test_exception_handler(loop):
    got = []
    assert loop.get_exception_handler() is None
    loop.set_exception_handler(lambda lp, ctx: got.append(ctx))

    def boom():
        raise ValueError("x")

    loop.call_soon(boom)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert isinstance(got[0]["exception"], ValueError)
    with pytest.raises(TypeError):
        loop.set_exception_handler(42)


def test_task_factory_and_create_future(loop):
    made = []

    def factory(lp, coro, **kw):
        t = asyncio.Task(coro, loop=lp, **kw)
        made.append(t)
        return t

    loop.set_task_factory(factory)
    assert loop.get_task_factory() is factory

    async def main():
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 7)
        return await fut

    assert loop.run_until_complete(main()) == 7
    assert made
    with pytest.raises(TypeError):
        loop.set_task_factory(1)


def test_slow_callback_warning(loop, caplog):
    loop.set_debug(True)
    loop.slow_callback_duration = 0.01
    loop.call_soon(time.sleep, 0.05)
    loop.call_soon(loop.stop)
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.run_forever()
    assert any("took" in r.getMessage() for r in caplog.records)


def test_shutdown_asyncgens_and_executor(loop):
    closed = []

    async def agen():
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    async def main():
        g = agen()
        assert await g.__anext__() == 1
        return g

    g = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert closed == [True]
    del g
    loop.run_until_complete(loop.run_in_executor(None, time.sleep, 0))
    loop.run_until_complete(loop.shutdown_default_executor())


def test_executor(loop):
    ex = concurrent.futures.ThreadPoolExecutor(1)
    loop.set_default_executor(ex)

    async def main():
        return await loop.run_in_executor(None, threading.get_ident)

    assert loop.run_until_complete(main()) != threading.get_ident()
    with pytest.raises(TypeError):
        loop.set_default_executor(concurrent.futures.ProcessPoolExecutor())
    ex.shutdown()


def test_getaddrinfo_getnameinfo(run, loop):
    infos = run(loop.getaddrinfo("127.0.0.1", 80, type=1))
    assert infos[0][4] == ("127.0.0.1", 80)
    host, _port = run(loop.getnameinfo(("127.0.0.1", 80)))
    assert host
    import socket

    with pytest.raises(socket.gaierror):
        run(loop.getaddrinfo("no-such-host.invalid", 80))


def test_signal_handlers(loop):
    import os
    import signal

    got = []
    loop.add_signal_handler(signal.SIGUSR1, lambda: (got.append(1), loop.stop()))
    loop.call_later(0.02, os.kill, os.getpid(), signal.SIGUSR1)
    loop.call_later(10, loop.stop)
    loop.run_forever()
    assert got == [1]
    assert loop.remove_signal_handler(signal.SIGUSR1) is True
    assert loop.remove_signal_handler(signal.SIGUSR1) is False
    with pytest.raises(RuntimeError):
        loop.add_signal_handler(signal.SIGKILL, print)
    with pytest.raises(TypeError):
        loop.add_signal_handler(signal.SIGUSR1, asyncio.sleep)


def test_timeouts_and_taskgroups(run):
    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        async with asyncio.TaskGroup() as tg:
            t = tg.create_task(asyncio.sleep(0.01, "ok"))
        return t.result()

    assert run(main()) == "ok"


def test_a_loop_on_another_selector_serves_sock_ops_and_streams_as_asyncio_does():
    """``ringio.EventLoop(selector)`` with a selector that is not a RingSelector has
    no ring: sockets and streams take asyncio's own paths."""
    loop = ringio.EventLoop(selectors.DefaultSelector())
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()

    async def main() -> tuple[bytes, bytes]:
        recv = asyncio.ensure_future(loop.sock_recv(b, 100))
        await asyncio.sleep(0.01)  # not ready yet: it has to wait
        await loop.sock_sendall(a, b"x" * 10)
        got = await asyncio.wait_for(recv, 5)
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        echoed = await asyncio.wait_for(reader.read(100), 5)
        writer.close()
        server.close()
        await server.wait_closed()
        return got, echoed

    try:
        assert loop.run_until_complete(main()) == (b"x" * 10, b"ping")
    finally:
        a.close()
        b.close()
        loop.close()
