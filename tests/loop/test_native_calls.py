"""``call_soon``, ``call_later``, ``call_at``, ``create_task``, ``create_future``,
``is_running`` and ``get_debug`` as native calls
(``ringio._core.loop.LoopCalls``), and the timers' native ``cancel``: the same
handles, timers, futures and tasks asyncio's loop makes, in the same order, with the
same errors and debug-mode tracebacks, and no Python frame of the loop's on ringio's
loop."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import gc
import itertools
import sys
import weakref

import pytest

import ringio
from ringio._core.loop import timer_handle_type
from ringio.loop import EventLoop

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}
# The loop's TimerHandle: asyncio's, subclassed, with a native cancel().
RING_TIMER = timer_handle_type()


@pytest.fixture(params=sorted(LOOPS))
def make_loop(request):
    loops = []

    def make():
        lp = LOOPS[request.param]()
        loops.append(lp)
        return lp

    yield make
    for lp in loops:
        if not lp.is_closed():
            lp.close()


def run_ready(loop) -> None:
    loop.run_until_complete(asyncio.sleep(0))


def test_handles_run_in_order_with_their_args(make_loop):
    loop = make_loop()
    out = []
    for k in range(50):
        loop.call_soon(out.append, k)
    loop.call_soon(lambda *a: out.append(a), 1, "two", None)
    run_ready(loop)
    assert out == [*range(50), (1, "two", None)]


def test_the_handle_is_asyncios_and_can_be_cancelled(make_loop):
    loop = make_loop()
    out = []
    h = loop.call_soon(out.append, "no")
    assert type(h) is asyncio.Handle
    assert not h.cancelled()
    assert repr(h).startswith("<Handle ")
    h.cancel()
    assert h.cancelled()
    assert repr(h) == "<Handle cancelled>"
    loop.call_soon(out.append, "yes")
    run_ready(loop)
    assert out == ["yes"]


def test_context_given_or_copied(make_loop):
    loop = make_loop()
    var = contextvars.ContextVar("var", default="unset")
    given = contextvars.copy_context()
    given.run(var.set, "given")
    out = []
    token = var.set("current")
    try:
        loop.call_soon(lambda: out.append(var.get()), context=given)
        loop.call_soon(lambda: out.append(var.get()))
        # Set after the call: the copy was taken at call_soon.
        var.set("later")
    finally:
        var.reset(token)
    run_ready(loop)
    assert out == ["given", "current"]


def test_misuse_raises_typeerror_as_asyncio_does(make_loop):
    loop = make_loop()
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        loop.call_soon(print, bogus=1)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'callback'"):
        loop.call_soon()


def test_a_callback_that_raises_goes_to_the_exception_handler(make_loop):
    loop = make_loop()
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(ctx))
    out = []
    loop.call_soon(lambda: 1 / 0)
    loop.call_soon(out.append, "after")
    run_ready(loop)
    assert out == ["after"]
    assert isinstance(seen[0]["exception"], ZeroDivisionError)
    assert type(seen[0]["handle"]) is asyncio.Handle


def _handler_errors(loop) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    loop.set_exception_handler(
        lambda lp, ctx: seen.append((type(ctx["exception"]).__name__, str(ctx["exception"])))
    )
    return seen


def _entered_context_scenario(loop) -> tuple[list[str], list[tuple[str, str]]]:
    """A handle whose context is the one the loop runs in: what ran, and what the
    exception handler saw."""
    seen = _handler_errors(loop)
    ctx = contextvars.copy_context()
    var = contextvars.ContextVar("var", default="unset")
    out: list[str] = []

    async def main():
        # The loop runs inside ctx: a handle that enters ctx again cannot.
        loop.call_soon(out.append, "refused", context=ctx)
        loop.call_soon(lambda: out.append(var.get()))
        await asyncio.sleep(0)

    ctx.run(var.set, "inside")
    ctx.run(loop.run_until_complete, main())
    run_ready(loop)  # the context was left as it was: the loop runs outside it
    loop.call_soon(out.append, "after", context=ctx)
    run_ready(loop)
    return out, seen


def test_a_context_already_entered_is_reported_and_the_rest_run(make_loop):
    out, seen = _entered_context_scenario(make_loop())
    assert out == ["inside", "after"]
    # CPython 3.11 hands the RuntimeError to the exception handler; later versions
    # call the handler in the handle's context too, which cannot be entered either,
    # and log the error instead. Either way, as asyncio's own loop does here.
    assert seen in ([], [("RuntimeError", seen[0][1] if seen else "")])
    assert not seen or "already entered" in seen[0][1]
    reference = asyncio.SelectorEventLoop()
    try:
        _, asyncio_seen = _entered_context_scenario(reference)
    finally:
        reference.close()
    assert [kind for kind, _ in seen] == [kind for kind, _ in asyncio_seen]


class DuckContext:
    """Not a contextvars.Context, with a run() of its own."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def run(self, callback, *args):
        self.calls.append(args)
        return callback(*args)


def test_a_context_that_is_not_a_context_is_used_as_asyncio_uses_it(make_loop):
    loop = make_loop()
    seen = _handler_errors(loop)
    duck, out = DuckContext(), []
    loop.call_soon(out.append, 1, context=duck)
    loop.call_soon(lambda *a: out.append(a), 2, 3, context=duck)
    loop.call_soon(out.append, "no run", context=object())
    loop.call_soon(out.append, "last")
    run_ready(loop)
    assert out == [1, (2, 3), "last"]
    assert duck.calls == [(1,), (2, 3)]
    assert seen == [("AttributeError", "'object' object has no attribute 'run'")]


def test_a_callback_that_clears_its_own_handle_keeps_its_arguments(make_loop):
    loop = make_loop()
    out, handles = [], []

    def clear_own(*args):
        h = handles[0]
        h._args = None  # the running call holds the tuple, not the slot
        h._callback = None
        gc.collect()
        out.append(args)

    handles.append(loop.call_soon(clear_own, "a", object(), 3))
    run_ready(loop)
    assert out[0][0] == "a" and out[0][2] == 3


def test_keyboard_interrupt_from_a_callback_leaves_the_loop(make_loop):
    loop = make_loop()
    out = []

    def interrupt():
        raise KeyboardInterrupt

    loop.call_soon(interrupt)
    loop.call_soon(out.append, "next")
    with pytest.raises(KeyboardInterrupt):
        run_ready(loop)
    run_ready(loop)  # the handles after it are still queued, as asyncio keeps them
    assert out == ["next"]


class Truth:
    """A flag whose truth is Python code, which also replaces the attribute it is
    read from (dropping the loop's reference to this object while it is judged)."""

    def __init__(self, loop, value: bool) -> None:
        self.loop, self.value = loop, value

    def __bool__(self) -> bool:
        self.loop._debug = self.value
        return self.value


@pytest.mark.parametrize("value", [True, False])
def test_a_debug_flag_of_any_type_is_judged_by_its_truth(make_loop, value):
    # asyncio's call_soon tests `if self._debug`: any object's truth, as here.
    loop = make_loop()
    # The loop holds the only reference to the flag (in a slot on ringio's loop, in
    # its __dict__ on asyncio's), which judging it drops.
    loop._debug = Truth(loop, value)
    h = loop.call_soon(print)
    assert loop._debug is value  # judged, and so replaced
    assert (h._source_traceback is not None) is value
    h.cancel()
    loop._debug = 1
    assert loop.call_soon(print)._source_traceback is not None
    loop._debug = 0
    assert loop.call_soon(print)._source_traceback is None
    loop._debug = False


def test_closed_loop_raises_runtimeerror(make_loop):
    loop = make_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_soon(print)


def test_debug_mode_traceback_ends_at_the_caller(make_loop):
    loop = make_loop()
    loop.set_debug(True)
    h = loop.call_soon(print)
    line = sys._getframe().f_lineno - 1
    assert h._source_traceback[-1].lineno == line
    assert h._source_traceback[-1].name == "test_debug_mode_traceback_ends_at_the_caller"
    h.cancel()
    loop.set_debug(False)
    h = loop.call_soon(print)
    assert h._source_traceback is None
    h.cancel()


PYTHON_METHODS = {
    EventLoop.call_soon.__code__,
    EventLoop.call_later.__code__,
    EventLoop.call_at.__code__,
    asyncio.BaseEventLoop.create_task.__code__,
    asyncio.BaseEventLoop.is_running.__code__,
    asyncio.BaseEventLoop.get_debug.__code__,
    asyncio.BaseEventLoop.create_future.__code__,
    asyncio.BaseEventLoop._timer_handle_cancelled.__code__,
    asyncio.TimerHandle.cancel.__code__,
    asyncio.Handle.cancel.__code__,
}


def count_python_calls(fn) -> list[str]:
    """Runs fn() and returns the names of the loop's Python methods it called."""
    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in PYTHON_METHODS:
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_task_steps_call_no_python_call_soon():
    # asyncio's C tasks schedule each step through loop.call_soon: on ringio's loop
    # that call is native, so no frame of EventLoop.call_soon runs.

    async def hops():
        for _ in range(100):
            await asyncio.sleep(0)

    loop = ringio.new_event_loop()
    try:
        assert count_python_calls(lambda: loop.run_until_complete(hops())) == []
    finally:
        loop.close()


def test_a_subclass_keeps_its_own_call_soon():
    calls = []

    class Counting(EventLoop):
        def call_soon(self, callback, *args, context=None):
            calls.append(callback)
            return super().call_soon(callback, *args, context=context)

    loop = Counting()
    try:
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert calls


def test_call_soon_patched_on_the_instance_is_used():
    loop = ringio.new_event_loop()
    seen = []
    native = loop.call_soon

    def spy(callback, *args, context=None):
        seen.append(callback)
        return native(callback, *args, context=context)

    loop.call_soon = spy
    try:
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert seen


def test_a_replaced_ready_queue_still_gets_the_handles():
    loop = ringio.new_event_loop()
    try:
        old = loop._ready
        loop._ready = type(old)(old)
        out = []
        loop.call_soon(out.append, 1)
        assert len(loop._ready) == 1 and not old
    finally:
        loop._ready.clear()
        loop.close()


def test_a_ready_queue_of_a_deque_subclass_runs_through_its_own_popleft():
    # The native iteration calls deque.popleft directly on asyncio's own deque; a
    # subclass (a loop subclass may make one) keeps its method.
    class Ready(collections.deque):
        popped = 0

        def popleft(self):
            type(self).popped += 1
            return super().popleft()

    loop = ringio.new_event_loop()
    try:
        loop._ready = Ready(loop._ready)
        out = []
        for i in range(5):
            loop.call_soon(out.append, i)
        run_ready(loop)
        assert out == [0, 1, 2, 3, 4]
        assert Ready.popped >= 5
    finally:
        loop.close()


def test_a_closed_loop_is_freed_without_the_gc():
    # The native call_soon holds its loop (a cycle through the loop's __dict__):
    # close() breaks it, so a closed loop goes when its last reference does.
    gc.collect()
    gc.disable()
    try:
        loop = ringio.new_event_loop()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        ref = weakref.ref(loop)
        del loop
        assert ref() is None
    finally:
        gc.enable()


def test_an_unclosed_loop_is_collected():
    loop = ringio.new_event_loop()
    ref = weakref.ref(loop)
    del loop
    with pytest.warns(ResourceWarning):
        gc.collect()
    assert ref() is None


# ---------------------------------------------------------------- timers


def test_timers_fire_in_asyncios_order(make_loop):
    # The heap is pushed and popped with heapq's own algorithms: timers due at the
    # same time fire in the order asyncio's loop fires them.
    import random

    loop = make_loop()
    rng = random.Random(7)
    base = loop.time() + 0.05
    offsets = [rng.choice([0.0, 0.001, 0.002, rng.random() * 0.01]) for _ in range(300)]
    fired = []
    handles = []
    for k, off in enumerate(offsets):
        if k % 3:
            handles.append(loop.call_at(base + off, fired.append, k))
        else:
            handles.append(loop.call_later(base + off - loop.time(), fired.append, k))
    loop.run_until_complete(asyncio.sleep(0.1))
    assert sorted(fired) == list(range(300))
    # Due in order: each timer fired at or after every earlier deadline's. A
    # call_later's deadline is the loop's time() inside the call plus the delay, a
    # little after the base + off the delay was computed from, so the deadlines
    # compared are the handles' own.
    deadline = [h.when() for h in handles]
    assert all(deadline[a] <= deadline[b] for a, b in itertools.pairwise(fired))


def test_equal_deadlines_fire_as_on_asyncios_loop():
    import random

    orders = []
    for make in (asyncio.SelectorEventLoop, ringio.EventLoop):
        loop = make()
        try:
            rng = random.Random(11)
            # Far enough ahead that all 400 are scheduled before the first is due
            # (a pop between the pushes would change the heap's shape).
            base = loop.time() + 0.2
            fired = []
            handles = []
            for k in range(400):
                when = base + rng.choice([0.0, 0.002, 0.004]) + rng.randrange(3) * 0.001
                handles.append(loop.call_at(when, fired.append, k))
            for h in handles[::5]:
                h.cancel()
            loop.run_until_complete(asyncio.sleep(0.25))
            orders.append(fired)
        finally:
            loop.close()
    assert len(orders[0]) == 320
    assert orders[0] == orders[1]


def test_timer_is_asyncios_and_cancellable(make_loop):
    loop = make_loop()
    out = []
    before = loop.time()
    t = loop.call_later(0.01, out.append, "no")
    after = loop.time()
    assert isinstance(t, asyncio.TimerHandle) and type(t).__name__ == "TimerHandle"
    assert type(t) is (RING_TIMER if isinstance(loop, EventLoop) else asyncio.TimerHandle)
    assert t._scheduled and t in loop._scheduled
    assert before + 0.01 <= t.when() <= after + 0.01
    t.cancel()
    assert t.cancelled() and loop._timer_cancelled_count == 1
    loop.call_at(loop.time() + 0.01, out.append, "yes")
    loop.run_until_complete(asyncio.sleep(0.05))
    assert out == ["yes"]
    assert not loop._scheduled


def test_cancelled_timers_are_counted_as_asyncio_counts_them(make_loop):
    # The native iteration pops cancelled timers from the heap's head and keeps
    # asyncio's count of the cancelled ones left (which decides the heap's rebuild).
    loop = make_loop()
    timers = [loop.call_later(60, print) for _ in range(10)]
    soon = loop.call_later(0, print)
    for t in timers[:4]:
        t.cancel()
    timers[0].cancel()  # a second cancel counts nothing
    assert loop._timer_cancelled_count == 4
    loop.run_until_complete(asyncio.sleep(0.01))
    soon.cancel()  # run already: no longer scheduled, counts nothing
    assert loop._timer_cancelled_count == 0  # popped from the heap's head, uncounted
    for t in timers[4:]:
        t.cancel()
    assert loop._timer_cancelled_count == 6
    assert all(t.cancelled() for t in timers)


def test_timer_misuse_raises_as_asyncio_does(make_loop):
    loop = make_loop()
    with pytest.raises(TypeError, match="delay must not be None"):
        loop.call_later(None, print)
    with pytest.raises(TypeError, match="when cannot be None"):
        loop.call_at(None, print)
    with pytest.raises(TypeError):
        loop.call_later("1", print)
    assert not loop._scheduled
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_later(1, print)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_at(1, print)


def test_timer_debug_traceback_ends_at_the_caller(make_loop):
    loop = make_loop()
    loop.set_debug(True)
    t = loop.call_later(10, print)
    assert t._source_traceback[-1].lineno == sys._getframe().f_lineno - 1
    u = loop.call_at(loop.time() + 10, print)
    assert u._source_traceback[-1].lineno == sys._getframe().f_lineno - 1
    t.cancel()
    u.cancel()


def test_timers_stay_native_after_asyncio_rebuilds_the_heap():
    # asyncio replaces loop._scheduled with a new list when more than half of over
    # 100 timers are cancelled: the native call_later pushes onto that one.
    loop = ringio.new_event_loop()
    try:
        live = [loop.call_later(60, print) for _ in range(150)]
        for h in live[:120]:
            h.cancel()
        old = loop._scheduled
        loop.run_until_complete(asyncio.sleep(0))
        assert loop._scheduled is not old and len(loop._scheduled) == 30
        out = []

        def arm():
            loop.call_later(0.001, out.append, 1)
            loop.call_at(loop.time() + 0.001, out.append, 2)

        assert count_python_calls(arm) == []
        assert len(loop._scheduled) == 32
        loop.run_until_complete(asyncio.sleep(0.02))
        assert sorted(out) == [1, 2]
        for h in live[120:]:
            h.cancel()
    finally:
        loop.close()


def test_a_loop_with_its_own_time_keeps_pythons_call_later():
    class Clocked(EventLoop):
        def time(self):
            return 1000.0 + super().time()

    loop = Clocked()
    try:
        before = loop.time()
        t = loop.call_later(0.01, print)
        assert before + 0.01 <= t.when() <= loop.time() + 0.01
        t.cancel()
        out = []
        loop.call_later(0.01, out.append, 1)
        loop.run_until_complete(asyncio.sleep(0.05))
        assert out == [1]
    finally:
        loop.close()


# ---------------------------------------------------------------- tasks


def test_create_task_makes_an_asyncio_task(make_loop):
    loop = make_loop()
    var = contextvars.ContextVar("var", default="unset")

    async def work(x):
        return x, var.get()

    ctx = contextvars.copy_context()
    ctx.run(var.set, "ctx")
    t1 = loop.create_task(work(1))
    t2 = loop.create_task(work(2), context=ctx)
    t3 = loop.create_task(work(3), name="named")
    assert type(t1) is asyncio.Task
    assert t3.get_name() == "named"
    assert loop.run_until_complete(asyncio.gather(t1, t2, t3)) == [
        (1, "unset"),
        (2, "ctx"),
        (3, "unset"),
    ]


def test_create_task_with_a_task_factory(make_loop):
    loop = make_loop()
    made = []

    def factory(lp, coro, **kwargs):
        task = asyncio.Task(coro, loop=lp, **kwargs)
        made.append(task)
        return task

    loop.set_task_factory(factory)

    async def work():
        return 5

    task = loop.create_task(work())
    assert made == [task]
    assert loop.run_until_complete(task) == 5


def test_create_task_misuse_as_asyncio(make_loop):
    loop = make_loop()

    async def work():
        return 1

    coro = work()
    with pytest.raises(TypeError):
        loop.create_task(coro, bogus=1)
    coro.close()
    with pytest.raises(TypeError):
        loop.create_task(None)
    coro = work()
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.create_task(coro)
    coro.close()


def test_is_running_as_asyncio(make_loop):
    loop = make_loop()
    seen = []

    async def main():
        seen.append(loop.is_running())
        # asyncio's C task asks the loop whether it runs when it starts eagerly.
        if sys.version_info >= (3, 12):
            task = asyncio.Task(asyncio.sleep(0, "eager"), loop=loop, eager_start=True)
            seen.append(await task)

    seen.append(loop.is_running())
    loop.run_until_complete(main())
    seen.append(loop.is_running())
    loop.close()
    seen.append(loop.is_running())
    expected = [False, True, *(["eager"] if sys.version_info >= (3, 12) else []), False, False]
    assert seen == expected


def test_get_debug_as_asyncio(make_loop):
    loop = make_loop()
    seen = [loop.get_debug()]
    # asyncio's C futures and tasks ask the loop's get_debug() whether to record
    # where they were made.
    seen.append(loop.create_future()._source_traceback)
    loop.set_debug(True)
    seen.append(loop.get_debug())
    seen.append(bool(loop.create_future()._source_traceback))

    async def main():
        loop.set_debug(False)
        return loop.get_debug(), loop.create_future()._source_traceback

    seen.append(loop.run_until_complete(main()))
    loop.set_debug(True)
    loop.close()
    seen.append(loop.get_debug())
    assert seen == [False, None, True, True, (False, None), True]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="create_task(**kwargs) is 3.14+")
def test_create_task_passes_any_task_keyword_as_asyncio(make_loop):
    loop = make_loop()
    steps = []

    async def work(x):
        steps.append(("ran", x))
        await asyncio.sleep(0)
        return x

    async def main():
        eager = loop.create_task(work(1), eager_start=True, name="eager")
        steps.append("created")  # an eager task ran up to its first await already
        lazy = loop.create_task(work(2), eager_start=False)
        steps.append("created")
        return await eager, await lazy, eager.get_name()

    assert loop.run_until_complete(main()) == (1, 2, "eager")
    assert steps == [("ran", 1), "created", "created", ("ran", 2)]
    coro = work(3)
    with pytest.raises(TypeError, match="multiple values for keyword argument 'loop'"):
        loop.create_task(coro, loop=loop)
    with pytest.raises(TypeError):
        loop.create_task(coro, eager_start=True, bogus=1)
    coro.close()


def test_servers_per_request_calls_are_native():
    # What a server does per request: a future it waits on for the request, a
    # task, a keep-alive timer re-armed and cancelled (and each future and task asks
    # the loop's get_debug()).
    loop = ringio.new_event_loop()

    async def request():
        await asyncio.sleep(0)

    async def serve():
        keepalive = None
        for _ in range(50):
            waiter = loop.create_future()
            loop.call_soon(waiter.set_result, None)
            await waiter
            if keepalive is not None:
                keepalive.cancel()
            await loop.create_task(request())
            if sys.version_info >= (3, 14):  # aiohttp's per-request task on 3.14
                await asyncio.create_task(request(), eager_start=True)
            elif sys.version_info >= (3, 12):  # and on 3.12 and 3.13
                await asyncio.Task(request(), loop=loop, eager_start=True)
            keepalive = loop.call_later(5, print)
        keepalive.cancel()

    try:
        assert count_python_calls(lambda: loop.run_until_complete(serve())) == []
    finally:
        loop.close()


def test_a_method_patched_on_the_class_runs_for_loops_made_after(monkeypatch):
    seen = []
    original = EventLoop.call_soon

    def patched(self, callback, *args, context=None):
        seen.append(callback)
        return original(self, callback, *args, context=context)

    monkeypatch.setattr(EventLoop, "call_soon", patched)
    loop = ringio.new_event_loop()
    try:
        assert "call_soon" not in vars(loop)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert seen


# ---------------------------------------------------------------- timer cancel


def _timer_state(loop, timer):
    return (
        timer.cancelled(),
        timer._callback,
        timer._args,
        timer._scheduled,
        loop._timer_cancelled_count,
        repr(timer).split(" when=")[0],
    )


def test_timer_cancel_as_asyncio(make_loop):
    # Each step on ringio's loop leaves the timer and the loop as on asyncio's:
    # scheduled, cancelled twice, one already run, one popped uncancelled.
    loop = make_loop()
    states = []
    t = loop.call_later(60, print, "a")
    states.append(_timer_state(loop, t))
    t.cancel()
    states.append(_timer_state(loop, t))
    t.cancel()
    states.append(_timer_state(loop, t))
    ran = loop.call_later(0, print, "b")
    loop.run_until_complete(asyncio.sleep(0.01))
    states.append(_timer_state(loop, ran))
    ran.cancel()  # already run: no longer scheduled, not counted
    states.append(_timer_state(loop, ran))
    at = loop.call_at(loop.time() + 60, print)
    at.cancel()
    states.append(_timer_state(loop, at))
    expected = [
        (False, print, ("a",), True, 0, "<TimerHandle"),
        (True, None, None, True, 1, "<TimerHandle cancelled"),
        (True, None, None, True, 1, "<TimerHandle cancelled"),
        (False, print, ("b",), False, 0, "<TimerHandle"),
        (True, None, None, False, 0, "<TimerHandle cancelled"),
        (True, None, None, True, 1, "<TimerHandle cancelled"),
    ]
    assert states == expected


def test_timer_cancel_runs_no_python_frame():
    loop = ringio.new_event_loop()
    try:
        timers = [loop.call_later(60, print) for _ in range(10)]
        assert count_python_calls(lambda: [t.cancel() for t in timers]) == []
        assert loop._timer_cancelled_count == 10
        assert all(t.cancelled() for t in timers)
        assert type(timers[0]).cancel.__name__ == "cancel"
        with pytest.raises(TypeError):
            type(timers[0]).cancel(asyncio.Handle(print, (), loop))  # not a timer
        with pytest.raises(TypeError):
            timers[0].cancel(1)
    finally:
        loop.close()


def test_a_cancelled_timer_does_not_run(make_loop):
    loop = make_loop()
    out = []
    timers = [loop.call_later(0.001 * i, out.append, i) for i in range(6)]
    for t in timers[::2]:
        t.cancel()
    loop.run_until_complete(asyncio.sleep(0.03))
    assert out == [1, 3, 5]
    assert not loop._scheduled


def test_timer_cancel_in_debug_mode_keeps_the_repr(make_loop):
    # asyncio keeps a cancelled handle's repr (with its callback) in debug mode.
    loop = make_loop()
    t = loop.call_later(60, print, "x")
    loop.set_debug(True)
    t.cancel()
    assert t._repr.startswith("<TimerHandle cancelled when=") and "print('x')" in t._repr
    assert t._callback is None and repr(t) == t._repr


def test_timer_cancel_calls_a_loops_own_timer_handle_cancelled():
    seen = []

    class Counting(EventLoop):
        def _timer_handle_cancelled(self, handle):
            seen.append(handle)
            super()._timer_handle_cancelled(handle)

    loop = Counting()
    try:
        t = loop.call_later(60, print)
        t.cancel()
        t.cancel()
        assert seen == [t] and loop._timer_cancelled_count == 1
        u = loop.call_later(60, print)
        loop._timer_handle_cancelled = seen.append  # patched on the instance
        u.cancel()
        assert seen == [t, u] and loop._timer_cancelled_count == 1
    finally:
        loop.close()


def test_timer_cancel_error_leaves_the_timer_as_asyncio_does(make_loop):
    # An exception out of _timer_handle_cancelled comes out of cancel(), and the
    # timer is not cancelled, as with asyncio's TimerHandle.cancel.
    loop = make_loop()
    t = loop.call_later(60, print)

    def refuse(handle):
        raise RuntimeError("no")

    loop._timer_handle_cancelled = refuse
    with pytest.raises(RuntimeError, match="no"):
        t.cancel()
    assert not t.cancelled() and t._callback is print
    del loop._timer_handle_cancelled
    t.cancel()
    assert t.cancelled()


def test_timeouts_and_wait_for_as_asyncio(make_loop):
    # asyncio.timeout and wait_for arm a timer and cancel it.
    loop = make_loop()

    async def main():
        async with asyncio.timeout(5):
            await asyncio.sleep(0)
        assert await asyncio.wait_for(asyncio.sleep(0, "done"), 5) == "done"
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(1), 0.01)
        return loop._timer_cancelled_count

    assert loop.run_until_complete(main()) >= 0
    loop.run_until_complete(asyncio.sleep(0))
    assert not any(not t.cancelled() for t in loop._scheduled)


# ---------------------------------------------------------------- futures


def test_create_future_as_asyncio(make_loop):
    loop = make_loop()
    fut = loop.create_future()
    assert type(fut) is asyncio.Future and fut.get_loop() is loop and not fut.done()
    loop.call_soon(fut.set_result, 7)
    assert loop.run_until_complete(fut) == 7
    loop.set_debug(True)
    traced = loop.create_future()
    assert traced._source_traceback is not None
    traced.cancel()
    loop.set_debug(False)
    assert loop.create_future()._source_traceback is None
    with pytest.raises(TypeError):
        loop.create_future(1)


def test_create_future_runs_no_python_frame_and_a_class_override_wins():
    loop = ringio.new_event_loop()
    try:
        assert count_python_calls(loop.create_future) == []
    finally:
        loop.close()

    class Own(EventLoop):
        def create_future(self):
            return "own"

    loop = Own()
    try:
        assert loop.create_future() == "own"
        assert loop.run_until_complete(asyncio.sleep(0, 1)) == 1
    finally:
        loop.close()
