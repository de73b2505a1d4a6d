"""The loop's own state (``_debug``, ``_closed``, ``_ready``, ``_stopping``, ...),
which ringio's loop keeps in ``__slots__`` and its native calls and iterations read
there: whatever attribute lookup finds is what they act on, as asyncio's loop does,
when the loop's class is changed or modified after the loop was made, or an
attribute is gone."""

from __future__ import annotations

import asyncio

import pytest

import ringio

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}


@pytest.fixture(params=sorted(LOOPS))
def loop_class(request):
    return LOOPS[request.param]


def test_ringio_keeps_the_state_in_slots_not_in_the_dict():
    loop = ringio.EventLoop()
    try:
        assert "_ready" not in vars(loop) and "_closed" not in vars(loop)
        assert isinstance(loop._ready, type(asyncio.SelectorEventLoop()._ready))
    finally:
        loop.close()


def test_a_property_added_to_the_class_later_is_honoured(loop_class):
    sub = type("Sub", (loop_class,), {})
    loop = sub()
    try:
        assert loop.call_soon(print)._source_traceback is None
        assert loop.get_debug() is False
        sub._debug = property(lambda self: True, lambda self, value: None)
        assert loop.get_debug() is True
        assert loop.call_soon(print)._source_traceback is not None
        assert loop.call_later(5, print)._source_traceback is not None
        # The iteration in debug mode is asyncio's, and still runs the loop.
        assert loop.run_until_complete(asyncio.sleep(0, "done")) == "done"
        del sub._debug
        assert loop.get_debug() is False
        assert loop.call_soon(print)._source_traceback is None
        assert loop.run_until_complete(asyncio.sleep(0, "again")) == "again"
    finally:
        loop.close()


def test_a_loop_moved_to_another_class_follows_it(loop_class):
    closed = type(
        "AlwaysClosed",
        (loop_class,),
        {"_closed": property(lambda self: True, lambda self, value: None)},
    )
    loop = loop_class()
    try:
        loop.call_soon(print)
        loop.__class__ = closed
        for call in (
            lambda: loop.call_soon(print),
            lambda: loop.call_later(1, print),
            lambda: loop.call_at(1, print),
        ):
            with pytest.raises(RuntimeError, match="Event loop is closed"):
                call()
        loop.__class__ = loop_class
        assert loop.call_soon(print)._callback is print
    finally:
        loop.__class__ = loop_class
        loop.close()


def _create_task(loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
    coro = asyncio.sleep(0)
    try:
        return loop.create_task(coro)
    finally:
        coro.close()


@pytest.mark.parametrize(
    ("attr", "call"),
    [
        ("_closed", lambda lp: lp.call_soon(print)),
        ("_debug", lambda lp: lp.call_soon(print)),
        ("_ready", lambda lp: lp.call_soon(print)),
        ("_scheduled", lambda lp: lp.call_later(1, print)),
        ("_debug", lambda lp: lp.get_debug()),
        ("_thread_id", lambda lp: lp.is_running()),
        ("_task_factory", lambda lp: _create_task(lp)),
    ],
)
def test_a_deleted_attribute_fails_as_on_asyncios_loop(loop_class, attr, call):
    loop = loop_class()
    saved = getattr(loop, attr)
    try:
        delattr(loop, attr)
        with pytest.raises(AttributeError, match=attr):
            call(loop)
    finally:
        setattr(loop, attr, saved)
        loop.close()


def test_stop_set_by_a_callback_ends_the_native_iterations(loop_class):
    # run_forever's iterations look at _stopping after every one.
    loop = loop_class()
    out = []
    try:

        def tick(n: int) -> None:
            out.append(n)
            if n == 5:
                loop.stop()
            else:
                loop.call_soon(tick, n + 1)

        loop.call_soon(tick, 0)
        loop.run_forever()
        assert out == [0, 1, 2, 3, 4, 5]
        assert loop._stopping is False
    finally:
        loop.close()
