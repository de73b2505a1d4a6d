"""The loop's iteration (``LoopCore.run_iterations``): the same order of callbacks, timers
and I/O events as asyncio's ``BaseEventLoop._run_once``, run natively when the
selector has nothing of its own to do first."""

from __future__ import annotations

import asyncio
import itertools
import socket

import pytest

import ringio
from ringio.loop import RingSelector
from ringio.loop._selector import select_count

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}


def trace_of(make_loop, scenario) -> list:
    loop = make_loop()
    try:
        seen: list = []
        scenario(loop, seen)
        loop.run_forever()
        return seen
    finally:
        loop.close()


def same_as_asyncio(scenario) -> list:
    expected = trace_of(LOOPS["asyncio"], scenario)
    got = trace_of(LOOPS["ringio"], scenario)
    assert got == expected
    return got


def test_due_timers_run_after_the_handles_already_ready():
    def scenario(loop, seen):
        now = loop.time()
        loop.call_at(now - 1, seen.append, "due timer")
        loop.call_soon(seen.append, "soon")
        loop.call_later(0.01, seen.append, "later")
        loop.call_later(0.02, loop.stop)

    assert same_as_asyncio(scenario) == ["soon", "due timer", "later"]


def test_handles_scheduled_by_a_handle_wait_for_the_next_iteration():
    def scenario(loop, seen):
        def first():
            seen.append("first")
            loop.call_soon(second)

        def second():
            seen.append("second")
            loop.stop()

        loop.call_soon(first)
        loop.call_soon(seen.append, "queued before second")

    assert same_as_asyncio(scenario) == ["first", "queued before second", "second"]


def test_each_iteration_selects_once_between_generations_of_handles(loop):
    counts = []

    def step(n):
        counts.append(select_count())
        if n:
            loop.call_soon(step, n - 1)
        else:
            loop.stop()

    loop.call_soon(step, 3)
    loop.run_forever()
    assert [b - a for a, b in itertools.pairwise(counts)] == [1, 1, 1]


def test_a_cancelled_timer_at_the_head_is_dropped_and_counted(loop):
    seen = []
    timers = {}

    def arm():
        # Once the loop runs (its ring made, the native iteration in use).
        timers["early"] = loop.call_later(0.01, seen.append, "early")
        loop.call_later(0.03, seen.append, "late")
        loop.call_later(0.05, loop.stop)
        loop.call_soon(cancel)

    def cancel():
        timers["early"].cancel()
        seen.append(loop._timer_cancelled_count)
        loop.call_soon(check)

    def check():
        # The next iteration dropped it from the head of the heap.
        seen.append(loop._timer_cancelled_count)
        seen.append(len(loop._scheduled))

    loop.call_soon(loop.call_soon, arm)
    loop.run_forever()
    assert seen == [1, 0, 2, "late"]
    assert timers["early"]._scheduled is False
    assert loop._scheduled == []


def test_a_cancelled_timer_does_not_set_the_wait(loop):
    # With the cancelled 10 ms timer at the head, the iteration must wait for the
    # next live one (200 ms), not wake at 10 ms: count the selects.
    counts = []

    def arm():
        loop.call_later(0.01, lambda: None).cancel()
        loop.call_later(0.2, loop.stop)
        counts.append(select_count())

    loop.call_soon(loop.call_soon, arm)
    loop.run_forever()
    assert select_count() - counts[0] <= 2


def test_cancelled_ready_handles_are_skipped():
    def scenario(loop, seen):
        doomed = loop.call_soon(seen.append, "cancelled")
        loop.call_soon(seen.append, "kept")
        doomed.cancel()
        loop.call_soon(loop.stop)

    assert same_as_asyncio(scenario) == ["kept"]


def test_io_callbacks_run_before_the_timers_due_in_the_same_iteration():
    # A reader's handle goes to the ready queue when events are processed, before
    # due timers are moved there, as in asyncio.
    def scenario(loop, seen):
        a, b = socket.socketpair()
        b.send(b"x")

        def readable():
            seen.append("reader")
            loop.remove_reader(a)
            a.close()
            b.close()

        def start():
            loop.add_reader(a, readable)
            loop.call_at(loop.time() - 1, seen.append, "timer")
            loop.call_later(0.02, loop.stop)

        loop.call_soon(start)

    assert same_as_asyncio(scenario) == ["reader", "timer"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_a_fatal_exception_stops_the_iteration_and_keeps_the_rest_queued(exc, loop):
    def boom():
        raise exc()

    seen = []
    loop.call_soon(seen.append, "before")
    loop.call_soon(boom)
    loop.call_soon(seen.append, "after")
    with pytest.raises(exc):
        loop.run_forever()
    assert seen == ["before"]
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == ["before", "after"]


def test_an_exception_in_a_callback_goes_to_the_handler_and_the_loop_goes_on(loop):
    errors = []
    loop.set_exception_handler(lambda lp, ctx: errors.append(ctx["exception"]))
    seen = []
    loop.call_soon(lambda: 1 / 0)
    loop.call_soon(seen.append, "next")
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == ["next"]
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_the_native_iteration_leaves_the_python_select_alone(monkeypatch, loop):
    # Callbacks and timers only: no poll to arm, nothing for the selector to
    # dispatch, so RingSelector.select (the Python step) is not entered.
    calls = []
    original = RingSelector.select

    def counting(self, timeout=None):
        calls.append(timeout)
        return original(self, timeout)

    monkeypatch.setattr(RingSelector, "select", counting)

    async def main():
        for _ in range(20):
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return "done"

    # The first iteration makes the ring (in the thread that runs the loop).
    assert loop.run_until_complete(main()) == "done"
    calls.clear()
    assert loop.run_until_complete(main()) == "done"
    assert calls == []


def test_stop_from_a_callback_ends_run_forever_after_that_iteration():
    def scenario(loop, seen):
        def stopper():
            seen.append("stop")
            loop.stop()
            loop.call_soon(seen.append, "next run")

        loop.call_soon(stopper)
        loop.call_soon(seen.append, "same iteration")

    assert same_as_asyncio(scenario) == ["stop", "same iteration"]


def test_a_callback_error_reaches_the_handler_as_asyncio_reports_it():
    # asyncio's own handles run natively (LoopCore.run_ready): the handler gets the
    # context Handle._run would give it, for call_soon's handles and for timers.
    def scenario(loop, seen):
        def handler(lp, ctx):
            seen.append(
                (
                    sorted(ctx),
                    ctx["message"],
                    type(ctx["exception"]).__name__,
                    type(ctx["handle"]).__name__,
                    ctx["handle"]._callback is fail,
                )
            )

        def fail(what):
            raise ValueError(what)

        loop.set_exception_handler(handler)
        loop.call_soon(fail, "soon")
        loop.call_later(0.001, fail, "later")
        loop.call_later(0.05, loop.stop)

    got = same_as_asyncio(scenario)
    assert [entry[2:] for entry in got] == [
        ("ValueError", "Handle", True),
        ("ValueError", "TimerHandle", True),
    ]
    assert got[0][1].startswith("Exception in callback ")


def test_a_handle_subclass_runs_through_its_own_run(loop):
    seen = []

    class Traced(asyncio.Handle):
        __slots__ = ()

        def _run(self):
            seen.append("own _run")
            super()._run()

    loop._ready.append(Traced(seen.append, ("callback",), loop))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == ["own _run", "callback"]


def test_io_and_timers_arrive_while_callbacks_keep_every_iteration_busy(loop):
    # A callback that always schedules another leaves no iteration free to wait,
    # and with nothing to submit the iteration does not enter the kernel unless it
    # flagged completions (IORING_SQ_TASKRUN): those must still be delivered.
    a, b = socket.socketpair()
    got = []
    iterations = [0]

    class Receiver(asyncio.Protocol):
        def data_received(self, data):
            got.append(("data", data, iterations[0]))

    async def connect():
        return await loop.create_connection(Receiver, sock=a)

    transport, _ = loop.run_until_complete(connect())
    try:

        def busy():
            iterations[0] += 1
            if len(got) < 2 and iterations[0] < 2_000_000:
                loop.call_soon(busy)
            else:
                loop.stop()

        loop.call_later(0.02, lambda: got.append(("timer", None, iterations[0])))
        loop.call_later(0.05, b.send, b"ping")  # the peer's data arrives meanwhile
        loop.call_soon(busy)
        loop.run_forever()
        assert [kind for kind, _, _ in got] == ["timer", "data"]
        assert got[1][1] == b"ping"
        assert iterations[0] < 2_000_000  # delivered while still busy
    finally:
        transport.close()
        b.close()
        loop.run_until_complete(asyncio.sleep(0))
