"""call_later and call_at on ringio.EventLoop against asyncio's own loop: the handle
made, the errors, cancellation, contexts and debug-mode tracebacks are the same."""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import time

import pytest

import ringio

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


@pytest.fixture(params=sorted(LOOPS))
def any_loop(request):
    lp = LOOPS[request.param]()
    yield lp
    if not lp.is_closed():
        lp.close()


def _made(lp: asyncio.AbstractEventLoop, timer: asyncio.TimerHandle) -> dict:
    return {
        "type": type(timer).__name__,
        "asyncio's": isinstance(timer, asyncio.TimerHandle),
        "scheduled": timer._scheduled,
        "cancelled": timer.cancelled(),
        "in_heap": timer in lp._scheduled,
        "args": timer._args,
        "traceback": timer._source_traceback,
    }


def test_call_later_makes_asyncios_timer_handle():
    made = {}
    for name, cls in LOOPS.items():
        lp = cls()
        try:
            t0 = lp.time()
            timer = lp.call_later(5.0, print, "a", 1)
            assert t0 + 5.0 <= timer.when() <= lp.time() + 5.0
            made[name] = _made(lp, timer)
        finally:
            lp.close()
    assert made["ringio"] == made["asyncio"]
    assert made["ringio"]["type"] == "TimerHandle" and made["ringio"]["asyncio's"]
    assert made["ringio"]["scheduled"] is True


def test_the_loops_timer_class_adds_only_a_native_cancel():
    lp = ringio.EventLoop()
    try:
        kind = type(lp.call_later(5.0, print))
    finally:
        lp.close()
    assert kind.__mro__[1] is asyncio.TimerHandle
    assert kind.__slots__ == ()
    own = set(vars(kind)) - {"__module__", "__qualname__", "__doc__", "__slots__"}
    assert own == {"cancel"}
    assert type(kind.cancel).__name__ == "method_descriptor"


def test_call_at_keeps_the_time_given_and_the_heap_order(any_loop):
    t0 = any_loop.time()
    timers = [any_loop.call_at(t0 + d, print) for d in (3.0, 1.0, 2.0, 1.0)]
    assert [t.when() for t in timers] == [t0 + 3.0, t0 + 1.0, t0 + 2.0, t0 + 1.0]
    assert any_loop._scheduled[0].when() == t0 + 1.0
    assert sorted(any_loop._scheduled) == sorted(timers)
    order = []
    while any_loop._scheduled:
        order.append(heapq.heappop(any_loop._scheduled).when())
    assert order == sorted(order)


@pytest.mark.parametrize(
    "call",
    [
        lambda lp: lp.call_later(None, print),
        lambda lp: lp.call_at(None, print),
        lambda lp: lp.call_later("1", print),
    ],
    ids=["later-None", "at-None", "later-str"],
)
def test_bad_times_raise_what_asyncio_raises(call):
    errors = {}
    for name, cls in LOOPS.items():
        lp = cls()
        try:
            with pytest.raises(Exception) as info:
                call(lp)
            errors[name] = (type(info.value), str(info.value))
            assert not lp._scheduled
        finally:
            lp.close()
    assert errors["ringio"] == errors["asyncio"]
    assert errors["ringio"][0] is TypeError


@pytest.mark.parametrize("method", ["call_later", "call_at"])
def test_a_closed_loop_refuses_timers(method):
    errors = {}
    for name, cls in LOOPS.items():
        lp = cls()
        lp.close()
        with pytest.raises(RuntimeError) as info:
            getattr(lp, method)(lp.time() + 1 if method == "call_at" else 1, print)
        errors[name] = str(info.value)
    assert errors["ringio"] == errors["asyncio"] == "Event loop is closed"


def test_timers_run_in_the_context_given_or_a_copy_of_the_callers(any_loop):
    seen = []
    ctx = contextvars.copy_context()
    ctx.run(var.set, "given")
    var.set("caller")
    try:
        any_loop.call_later(0.001, lambda: seen.append(("later", var.get())), context=ctx)
        any_loop.call_at(any_loop.time() + 0.002, lambda: seen.append(("at", var.get())))
        # The caller's context was copied when the timer was made.
        var.set("changed after")
        any_loop.call_later(0.01, any_loop.stop)
        any_loop.run_forever()
    finally:
        var.set("unset")
    assert seen == [("later", "given"), ("at", "caller")]


def test_a_cancelled_timer_is_counted_and_never_runs(any_loop):
    seen = []
    timer = any_loop.call_later(0.001, seen.append, "x")
    timer.cancel()
    assert timer.cancelled()
    assert any_loop._timer_cancelled_count == 1
    timer.cancel()  # twice: counted once, as asyncio's
    assert any_loop._timer_cancelled_count == 1
    any_loop.call_later(0.01, any_loop.stop)
    any_loop.run_forever()
    assert seen == []


def test_timers_follow_a_time_patched_on_the_instance(any_loop):
    any_loop.time = lambda: 1000.0  # what asyncio's own tests do to move the clock
    timer = any_loop.call_later(2.5, print)
    assert timer.when() == 1002.5


def test_debug_mode_keeps_the_callers_frame_last():
    frames = {}
    for name, cls in LOOPS.items():
        lp = cls()
        lp.set_debug(True)
        try:
            timer = lp.call_later(1, print)
            frames[name] = timer._source_traceback[-1]
        finally:
            lp.close()
    for frame in frames.values():
        assert frame.name == "test_debug_mode_keeps_the_callers_frame_last"
    assert frames["ringio"].lineno == frames["asyncio"].lineno


def test_sleep_and_wait_for_time_out_on_time(loop):
    async def main():
        t0 = time.monotonic()
        await asyncio.sleep(0.02)
        slept = time.monotonic() - t0
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 0.02)
        return slept, time.monotonic() - t0

    slept, total = loop.run_until_complete(main())
    assert 0.02 <= slept < 2
    assert 0.04 <= total < 4
    assert not [t for t in loop._scheduled if not t.cancelled()]
