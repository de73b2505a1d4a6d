"""``pread`` and ``preadinto`` of cached data as one native call (``InlineRead``):
no Python frame runs for a read the page cache serves. What a user sees of that:
the same bytes, counts and errors as the files' Python methods give (the oracle
here: ``type(f).pread.__wrapped__``), and every state that must stop a read from
being served at once (a write buffer not yet written out, a cancelled op still in
the kernel, close, a closed engine, an fd closed behind the file's back) stops it."""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import random
import sys
from collections.abc import Callable

import pytest

import ringio
from ringio._core import Ready

PAYLOAD = random.Random(11).randbytes(200_000)


@pytest.fixture
def path(cached_file):
    return cached_file(PAYLOAD)


def python_frames(call: Callable[..., object], *args: object) -> tuple[object, list[str]]:
    """What `call(*args)` returns, and the Python functions that ran in it.

    The collector is off meanwhile: an allocation in the call may start a
    collection, which runs whatever Python code the garbage and `gc.callbacks`
    have (finalizers, other libraries' callbacks), not the call's own."""
    ran: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            ran.append(frame.f_code.co_name)

    collecting = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        result = call(*args)
    finally:
        sys.setprofile(None)
        if collecting:
            gc.enable()
    return result, ran


async def outcome(call: Callable[..., object], *args: object) -> tuple[str, object]:
    """The result of `call(*args)`, awaited, or the error's type and message."""
    try:
        got = call(*args)
        if inspect.isawaitable(got):
            got = await got
        return ("ok", got)
    except Exception as e:  # the error is what is compared
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_cached_read_runs_no_python_code(engine, path, buffering):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        buf = bytearray(100)
        for _ in range(2):  # the first read, and one after it
            pread, ran_pread = python_frames(f.pread, 50, 1000)
            into, ran_into = python_frames(f.preadinto, buf, 2000)
            if not engine.inline_reads:  # the thread engine: its Python method
                assert "pread" in ran_pread and "preadinto" in ran_into
                assert await pread == PAYLOAD[1000:1050]
                assert await into == 100 and buf == PAYLOAD[2000:2100]
                continue
            assert ran_pread == [] and ran_into == []
            assert type(pread) is Ready and type(into) is Ready
            assert await pread == PAYLOAD[1000:1050]
            assert await into == 100 and buf == PAYLOAD[2000:2100]


@pytest.mark.parametrize("buffering", [0, -1])
@pytest.mark.parametrize(
    "args",
    [
        (10, 5),
        (0, 0),
        (10, len(PAYLOAD) - 3),  # short at the end of the file
        (10, len(PAYLOAD) + 5),  # past it
        (-1, 0),
        (10, -1),
        (10.0, 0),
        ("10", 0),
        (10, 2.0),
        (True, 4),  # an int subclass, as the Python method takes it
        (2**70, 0),
        (10, 2**70),
    ],
)
async def test_a_pread_returns_and_raises_as_the_python_method(engine, path, buffering, args):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        full = type(f).pread.__wrapped__
        native = await outcome(f.pread, *args)
        python = await outcome(full, f, *args)
        assert native == python


@pytest.mark.parametrize("buffering", [0, -1])
@pytest.mark.parametrize(
    "make_buffer, offset",
    [
        (lambda: bytearray(10), 5),
        (lambda: bytearray(0), 5),
        (lambda: bytearray(10), len(PAYLOAD) - 3),
        (lambda: memoryview(bytearray(20))[::2], 0),  # not contiguous
        (lambda: b"read-only!", 0),
        (lambda: bytearray(10), -1),
        (lambda: bytearray(10), 1.5),
        (lambda: 7, 0),
    ],
)
async def test_a_preadinto_returns_and_raises_as_the_python_method(
    engine, path, buffering, make_buffer, offset
):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        full = type(f).preadinto.__wrapped__
        a, b = make_buffer(), make_buffer()
        native = await outcome(f.preadinto, a, offset)
        python = await outcome(full, f, b, offset)
        assert native == python
        if isinstance(a, bytearray):
            assert a == b


async def test_keyword_arguments_take_the_python_method(engine, path):
    async with ringio.open(path, "rb") as f:
        got, ran = python_frames(lambda: f.pread(n=10, offset=3))
        assert "pread" in ran
        assert await got == PAYLOAD[3:13]
        buf = bytearray(4)
        assert await f.preadinto(buffer=buf, offset=8) == 4 and buf == PAYLOAD[8:12]


async def test_a_write_not_yet_written_out_stops_native_reads_until_it_is(engine, path):
    async with ringio.open(path, "r+b") as f:
        assert await f.pread(4, 0) == PAYLOAD[:4]  # served natively: the gate is open
        await f.write(b"NEW!")
        got, ran = python_frames(f.pread, 6, 0)
        if engine.inline_reads:
            assert "pread" in ran  # the Python method writes the buffer out first
        assert await got == b"NEW!" + PAYLOAD[4:6]
        await f.write(b"MORE")
        buf = bytearray(10)
        assert await f.preadinto(buf, 2) == 10
        assert buf == b"W!MORE" + PAYLOAD[8:12]
        assert await f.pread(2, 8) == PAYLOAD[8:10]
        got, ran = python_frames(f.pread, 2, 8)
        assert ran == [] or not engine.inline_reads  # written out: native again
        assert await got == PAYLOAD[8:10]


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_closed_file_refuses_reads_as_the_python_method(engine, path, buffering):
    f = await ringio.open(path, "rb", buffering=buffering)
    assert await f.pread(3, 0) == PAYLOAD[:3]
    await f.close()
    for method in ("pread", "preadinto"):
        target = 3 if method == "pread" else bytearray(3)
        native = await outcome(getattr(f, method), target, 0)
        python = await outcome(getattr(type(f), method).__wrapped__, f, target, 0)
        assert native == python
        assert native[0] == "ValueError", native


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_closed_engine_stops_native_reads(engine, path, buffering):
    f = await ringio.open(path, "rb", buffering=buffering)
    try:
        assert await f.pread(3, 0) == PAYLOAD[:3]
        engine.close_engine()
        for method in ("pread", "preadinto"):
            target = 3 if method == "pread" else bytearray(3)
            got, ran = python_frames(getattr(f, method), target, 0)
            native = await outcome(lambda got=got: got)
            python = await outcome(getattr(type(f), method).__wrapped__, f, target, 0)
            assert native == python
            if engine.inline_reads:
                assert method in ran
    finally:
        getattr(f, "raw", f)._close_now()


@pytest.mark.parametrize("buffering", [0, -1])
async def test_an_fd_closed_behind_the_files_back_raises_ebadf(engine, path, buffering):
    f = await ringio.open(path, "rb", buffering=buffering)
    assert await f.pread(3, 0) == PAYLOAD[:3]
    os.close(f.fileno())
    with pytest.raises(OSError) as e:
        await f.pread(3, 0)
    assert e.value.errno == 9  # EBADF
    with pytest.raises(OSError) as e:
        await f.preadinto(bytearray(3), 0)
    assert e.value.errno == 9
    raw = getattr(f, "raw", f)
    raw._closed = True  # nothing left to close
    raw._gate.open = False


async def test_random_ops_with_cancellations_never_leave_the_gate_open_wrongly(engine, path):
    """After every step, an open gate means a read may be served at once: no write
    buffered, no cancelled op's result due, the file and its engine open; and every
    pread returns what the file holds once the buffer is written out."""
    rng = random.Random(5)
    async with ringio.open(path, "r+b", buffering=8192) as f:
        raw = f.raw

        def check_gate() -> None:
            if f._gate.passes:
                assert not f._wbuf
            if raw._gate.passes:
                assert raw._pending is None and raw._hint.read
                assert not raw._closed and not raw._eng.closed

        for step in range(400):
            op = rng.choice(["pread", "preadinto", "write", "cancelled write", "flush", "seek"])
            off = rng.randrange(len(PAYLOAD) - 100)
            if op == "pread":
                await f.flush()
                expect = await f.pread(40, off)
                with open(path, "rb") as ref:
                    ref.seek(off)
                    assert expect == ref.read(40), step
            elif op == "preadinto":
                buf = bytearray(40)
                n = await f.preadinto(buf, off)
                await f.flush()
                with open(path, "rb") as ref:
                    ref.seek(off)
                    assert bytes(buf[:n]) == ref.read(n), step
            elif op == "write":
                await f.write(rng.randbytes(rng.choice([1, 100, 5000, 20_000])))
            elif op == "cancelled write":
                task = asyncio.ensure_future(f.write(rng.randbytes(rng.choice([10, 50_000]))))
                for _ in range(rng.randrange(3)):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
            elif op == "flush":
                await f.flush()
            else:
                await f.seek(off)
            check_gate()


def test_the_native_methods_carry_the_python_methods_name_and_doc():
    for cls in (ringio.AsyncFileIO, ringio.AsyncBufferedFile):
        for name in ("pread", "preadinto"):
            method = getattr(cls, name)
            assert method.__name__ == name
            assert method.__doc__ and method.__doc__ == method.__wrapped__.__doc__
            params = list(inspect.signature(method).parameters)
            assert params[0] == "self" and len(params) == 3, params
            if sys.version_info >= (3, 12):
                assert inspect.iscoroutinefunction(method)


class _Value:
    """A result whose release a weak reference sees."""


def test_a_ready_frees_its_value_when_the_value_is_taken_by_next_or_send():
    """CPython 3.12+ awaits a non-coroutine through ``tp_iternext`` (StopIteration),
    3.11 through ``am_send``: either way the value is released when its last user
    drops it, not kept by the extension (where a reference dropped outside its
    entry points waits for the next one, which a loop of native calls never makes)."""
    import weakref

    for take in ("next", "send", "await"):
        value = _Value()
        gone = weakref.ref(value)
        ready = Ready(value)
        del value
        if take == "await":

            async def wait(ready=ready):
                return await ready

            got = asyncio.run(wait())
        else:
            with pytest.raises(StopIteration) as stop:
                next(ready) if take == "next" else ready.send(None)
            got = stop.value.value
            del stop
        assert got is not None
        del got, ready
        assert gone() is None, take


@pytest.mark.parametrize("buffering", [0, -1])
async def test_awaiting_cached_reads_keeps_no_memory(engine, path, buffering):
    import tracemalloc

    async with ringio.open(path, "rb", buffering=buffering) as f:
        pread = f.pread
        for _ in range(5):
            await pread(4096, 0)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(1000):  # 8 MiB of results, each dropped at once
                await pread(4096, 0)
                r = pread(4096, 100)
                try:
                    r.send(None)
                except StopIteration:
                    pass
                del r
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert grown < 1 << 20, grown


@pytest.mark.parametrize("value", [b"x" * 10, "line\n", 7, b"", (1, 2), _Value()])
def test_each_stopiteration_carries_its_own_value_and_args(value):
    """A StopIteration a caller caught and kept is never changed by later results
    (ringio raises a spare one again only when nothing else holds it)."""
    kept = []
    for i in range(3):
        with pytest.raises(StopIteration) as stop:
            next(Ready(value if i == 0 else b"later %d" % i))
        kept.append(stop.value)
        del stop
    first = kept[0]
    assert first.value is value or first.value == value
    assert first.args == (value,)
    assert [k.value for k in kept[1:]] == [b"later 1", b"later 2"]
    assert [k.args for k in kept[1:]] == [(b"later 1",), (b"later 2",)]


def test_a_stopiteration_raised_again_has_no_earlier_traceback_or_context():
    def take(ready):
        try:
            next(ready)
        except StopIteration as e:
            return e.value
        raise AssertionError("no StopIteration")

    for i in range(3):  # caught in Python, so given a traceback, then dropped
        assert take(Ready(b"v%d" % i)) == b"v%d" % i
    try:
        raise KeyError("handled")
    except KeyError:
        with pytest.raises(StopIteration) as stop:
            next(Ready(b"last"))
    tb = stop.value.__traceback__
    frames = 0
    while tb is not None:
        frames += 1
        tb = tb.tb_next
    assert frames <= 2, frames  # this frame (and pytest's raises), no earlier ones
    assert stop.value.__cause__ is None
    assert type(stop.value.__context__) is KeyError  # chained, as any raise there
    assert stop.value.value == b"last"
    with pytest.raises(StopIteration) as again:
        next(Ready(b"after"))
    assert again.value.__context__ is None and again.value.value == b"after"


async def test_awaited_results_are_each_their_own(engine, path):
    async with ringio.open(path, "rb") as f:
        got = [await f.pread(5, off) for off in range(0, 50, 5)]
        assert got == [PAYLOAD[off : off + 5] for off in range(0, 50, 5)]
        lines = [x async for x in f]
        assert b"".join(lines) == PAYLOAD
