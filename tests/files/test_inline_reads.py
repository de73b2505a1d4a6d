"""Reads of cached data without waiting: ``pread`` is served when called (a
``Ready``), ``read`` and ``readinto`` at their coroutine's first step.
What a user sees of that: the bytes and positions are the builtin file's, an op
queued earlier is never overtaken, nothing is read or lost by a task cancelled
before it ran, bytes a cancelled op kept come first, and the results work wherever
a coroutine does (``await``, ``create_task``, ``gather``)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import io
import os
import random
import sys

import pytest

import ringio
from ringio._core import Ready

PAYLOAD = random.Random(7).randbytes(300_000)


@pytest.fixture
def path(cached_file):
    return cached_file(PAYLOAD)


def inline(engine) -> bool:
    return engine.inline_reads


@pytest.mark.parametrize("buffering", [0, -1, 4096])
async def test_reads_match_the_builtin_file_op_for_op(engine, path, buffering):
    rng = random.Random(buffering + 3)
    sizes = [0, 1, 7, 100, 4095, 4096, 4097, 8192, 65536, 70_000]
    with open(path, "rb", buffering=buffering) as ref:
        async with ringio.open(path, "rb", buffering=buffering) as f:
            for step in range(300):
                op = rng.choice(["read", "read", "readinto", "pread", "seek", "tell"])
                n = rng.choice(sizes)
                if op == "read":
                    # The unbuffered file is one read, which may be short: the
                    # builtin's too, so the sizes differ only in how they split.
                    assert await f.read(n) == ref.read(n), step
                elif op == "readinto":
                    a, b = bytearray(n), bytearray(n)
                    assert await f.readinto(a) == ref.readinto(b), step
                    assert a == b, step
                elif op == "pread":
                    off = rng.randrange(len(PAYLOAD) + 10)
                    assert await f.pread(n, off) == os.pread(ref.fileno(), n, off), step
                elif op == "seek":
                    off = rng.randrange(len(PAYLOAD) + 10)
                    assert await f.seek(off) == ref.seek(off), step
                else:
                    assert await f.tell() == ref.tell(), step
            assert await f.read() == ref.read()


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_cached_pread_is_complete_when_called(engine, path, buffering):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        call = f.pread(10, 5)
        if not inline(engine):
            assert inspect.iscoroutine(call)
            assert await call == PAYLOAD[5:15]
            return
        assert type(call) is Ready
        with pytest.raises(StopIteration) as stop:
            call.send(None)
        assert stop.value.value == PAYLOAD[5:15]
        assert await f.tell() == 0


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_pread_sees_a_buffered_write_not_yet_written(engine, path, buffering):
    async with ringio.open(path, "r+b", buffering=buffering) as f:
        assert await f.write(b"NEW!") == 4
        assert await f.pread(6, 0) == b"NEW!" + PAYLOAD[4:6]
        read = f.pread(6, 2)
        task = asyncio.ensure_future(read)
        if task is read:
            # Served at the call (a Ready, a done future to asyncio): nothing to
            # cancel; the bytes are the file's as written.
            assert task.cancel() is False
            assert await task == b"W!" + PAYLOAD[4:8]
        else:
            task.cancel()  # before it ran: nothing to lose, the file is as it was
            with pytest.raises(asyncio.CancelledError):
                await task
        assert await f.read(4) == PAYLOAD[4:8]


@pytest.mark.parametrize("buffering", [0, -1])
async def test_read_and_readinto_read_when_started_not_when_called(engine, path, buffering):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        first, second = f.read(10), f.readinto(bytearray(10))
        assert inspect.iscoroutine(first) and inspect.iscoroutine(second)
        assert await f.tell() == 0  # nothing read yet
        buf = bytearray(10)
        assert await f.readinto(buf) == 10
        assert buf == PAYLOAD[:10]
        assert await first == PAYLOAD[10:20]  # read when awaited, after that one
        second.close()  # never started: reads nothing
        assert await f.tell() == 20


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_read_cancelled_before_it_ran_loses_no_byte(engine, path, buffering):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        assert await f.read(3) == PAYLOAD[:3]  # a buffered file now holds read-ahead
        for make in (lambda: f.read(5), lambda: f.readinto(bytearray(5))):
            task = asyncio.ensure_future(make())
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert await f.read(5) == PAYLOAD[3:8]


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_read_does_not_overtake_an_op_waiting_for_the_file(engine, path, buffering):
    async with ringio.open(path, "r+b", buffering=buffering) as f:
        lock = f.raw._lock if buffering else f._lock
        await lock.acquire()
        queued = asyncio.ensure_future(f.write(b"NEW!"))
        await asyncio.sleep(0)  # the write waits for the lock
        lock.release()  # it is woken, and has not run yet
        data = await f.read(4)
        assert await queued == 4
        assert data == PAYLOAD[4:8]  # after the write, as it asked first


async def test_a_ready_result_is_a_coroutine_to_asyncio(engine, path):
    async with ringio.open(path, "rb") as f:
        c = f.pread(4, 0)
        assert asyncio.iscoroutine(c)
        c.close()
        task = asyncio.create_task(f.pread(4, 8))
        assert await task == PAYLOAD[8:12]
        got = await asyncio.gather(f.pread(3, 0), f.read(3), f.read(2))
        assert got == [PAYLOAD[:3], PAYLOAD[:3], PAYLOAD[3:5]]
        r = f.pread(2, 0)
        assert await r == PAYLOAD[:2]
        with pytest.raises(RuntimeError, match="already awaited"):
            await r


def test_ready_behaves_as_a_finished_coroutine():
    r = Ready(b"x")
    assert inspect.isawaitable(r)
    with pytest.raises(StopIteration) as stop:
        r.send(None)
    assert stop.value.value == b"x"
    with pytest.raises(KeyError):
        Ready(1).throw(KeyError("k"))
    with pytest.raises(KeyError):
        Ready(1).throw(KeyError)
    t = Ready((1, 2))
    with pytest.raises(StopIteration) as stop:
        next(t)
    assert stop.value.value == (1, 2)  # a tuple stays one value
    c = Ready(3)
    assert c.close() is None
    with pytest.raises(RuntimeError):
        c.send(None)
    with pytest.raises(TypeError):
        Ready()


async def test_results_made_after_others_were_dropped_are_whole_and_collectable(engine, path):
    # Dropped results' memory is reused for new ones: each must still hold its own
    # value, keep its type alive, and be found by the garbage collector.
    import weakref

    def type_refs_beyond_live_results():
        # Each live result holds a reference to its type: what is left is constant
        # however many results earlier tests left for the collector or freed later.
        gc.collect()
        return sys.getrefcount(Ready) - sum(type(o) is Ready for o in gc.get_objects())

    refs_to_type = type_refs_beyond_live_results()
    async with ringio.open(path, "rb") as f:
        for rounds in range(3):
            pending = [f.pread(3, k) for k in range(100)]
            pending += [Ready(k) for k in range(100)]
            assert [await r for r in pending[:100]] == [PAYLOAD[k : k + 3] for k in range(100)]
            assert [await r for r in pending[100:]] == list(range(100))
            assert all(gc.is_tracked(r) for r in pending), rounds
            del pending

    with pytest.raises(TypeError, match="not an acceptable base type"):
        # Every result has one size, which the reuse of their memory relies on.
        type("LargerResult", (Ready,), {"__slots__": ("extra",)})

    class Box:
        pass

    box = Box()
    box.result = Ready(box)  # a cycle through a result
    gone = weakref.ref(box)
    del box
    gc.collect()
    assert gone() is None
    assert type_refs_beyond_live_results() == refs_to_type


def test_the_read_methods_are_coroutine_functions_to_inspect():
    names = ("read", "readinto", "pread") if sys.version_info >= (3, 12) else ("read", "readinto")
    for cls in (ringio.AsyncFileIO, ringio.AsyncBufferedFile):
        for name in names:  # pread is marked, which 3.11 cannot do
            assert inspect.iscoroutinefunction(getattr(cls, name)), (cls, name)


async def test_bytes_a_cancelled_readall_kept_come_before_a_block_sized_read(engine, path):
    async with ringio.open(path, "rb", buffering=4096) as f:
        assert await f.read(1) == PAYLOAD[:1]  # the rest of a block is read ahead
        os.fsync(f.fileno())  # clean pages, which the advice can drop
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        task = asyncio.ensure_future(f.readall())
        await asyncio.sleep(0)  # in its first await (the file's size, or a read)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with open(path, "rb") as again:
            again.read()  # cached again: the next read may be served at once
        # The read-ahead went to the raw file's leftovers: they come first.
        assert await f.read(8192) == PAYLOAD[1:8193]
        assert await f.tell() == 8193


async def test_a_file_not_in_the_cache_reads_the_same(engine, path):
    async with ringio.open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert await f.pread(5000, 100_000) == PAYLOAD[100_000:105_000]
        assert await f.read(70_000) == PAYLOAD[:70_000]


@pytest.mark.parametrize("buffering", [0, -1])
async def test_misuse_raises_as_the_builtin_does(engine, path, buffering):
    f = await ringio.open(path, "rb", buffering=buffering)
    await f.read(10)
    await f.close()
    with open(path, "rb", buffering=buffering) as ref:
        ref.read(10)
    for call in (lambda g: g.read(0), lambda g: g.read(5), lambda g: g.readinto(bytearray(3))):
        with pytest.raises(ValueError, match="closed file"):
            await call(f)
        with pytest.raises(ValueError, match="closed file"):
            call(ref)
    with pytest.raises(ValueError, match="closed file"):
        await f.pread(5, 0)
    async with ringio.open(path, "ab", buffering=buffering) as w:
        with open(path, "ab", buffering=buffering) as ref:
            for call in (lambda g: g.read(0), lambda g: g.readinto(bytearray(3))):
                with pytest.raises(io.UnsupportedOperation):
                    call(ref)
                with pytest.raises(io.UnsupportedOperation):
                    await call(w)
            with pytest.raises(io.UnsupportedOperation):
                await w.pread(3, 0)
    async with ringio.open(path, "rb", buffering=buffering) as f:
        with pytest.raises(TypeError):
            await f.readinto(b"read-only")
        with pytest.raises(ValueError):
            await f.pread(-1, 0)
        with pytest.raises(ValueError):
            await f.pread(1, -1)


def _ringio_frames(coro_fn):
    """A list, and a coroutine function that awaits `coro_fn()` and fills the list
    with the ringio ``_io`` functions that run meanwhile."""
    names: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and "/ringio/_io/" in frame.f_code.co_filename:
            names.append(frame.f_code.co_name)

    async def run():
        # No collection meanwhile: the finalizers it would run (a file object's
        # __del__ among them) are not the read's own frames.
        collecting = gc.isenabled()
        gc.disable()
        sys.setprofile(profile)
        try:
            return await coro_fn()
        finally:
            sys.setprofile(None)
            if collecting:
                gc.enable()

    return names, run


async def test_a_read_the_read_buffer_holds_runs_no_other_frame(engine, path):
    # read() and readinto() of bytes the read buffer holds are served by the
    # coroutine's own first step: no further method runs.
    async with ringio.open(path, "rb") as f:
        assert await f.read(10) == PAYLOAD[:10]  # fills the read buffer
        names, run = _ringio_frames(lambda: f.read(100))
        assert await run() == PAYLOAD[10:110]
        assert names == ["read"]
        buf = bytearray(50)
        names, run = _ringio_frames(lambda: f.readinto(buf))
        assert await run() == 50 and buf == PAYLOAD[110:160]
        assert names == ["readinto"]
        assert await f.tell() == 160


async def test_reads_from_the_read_buffer_keep_the_files_rules(engine, path):
    # What the served-at-once path must still respect: a line lent to iteration,
    # a refused buffer, and a closed file, each as the builtin file does.
    with open(path, "rb") as ref:
        async with ringio.open(path, "rb") as f:
            assert await f.read(3) == ref.read(3)
            assert await f.readline() == ref.readline()
            assert await f.__anext__() == next(ref)  # the rest of the chunk lent out
            assert await f.read(7) == ref.read(7)
            assert await f.__anext__() == next(ref)
            buf = bytearray(9)
            assert await f.readinto(buf) == ref.readinto(b := bytearray(9)) and buf == b
            with pytest.raises(TypeError, match="read-write bytes-like"):
                await f.readinto(b"immutable")
            with pytest.raises(TypeError, match="read-write bytes-like"):
                ref.readinto(b"immutable")
            assert await f.read(5) == ref.read(5)
        for call in (lambda: f.read(1), lambda: f.readinto(bytearray(1))):
            with pytest.raises(ValueError, match="closed file"):
                await call()


async def test_a_read_from_the_buffer_waits_behind_an_op_holding_the_lock(engine, path):
    # An op that took the file's lock first (here a seek, waiting on the lock
    # held by a read) runs first; a read the buffer could serve waits its turn.
    async with ringio.open(path, "rb") as f:
        await f.read(1)
        async with f._lock:
            seek = asyncio.ensure_future(f.seek(1000))
            read = asyncio.ensure_future(f.read(4))
            await asyncio.sleep(0)
            assert not seek.done() and not read.done()
        assert await seek == 1000
        assert await read == PAYLOAD[1000:1004]


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_gate_given_by_a_property_added_later_is_the_one_read(
    engine, path, buffering, monkeypatch
):
    # The native pread reads a file's gate where its slot keeps it, for files of
    # the type it looked at first, while that type is unchanged; a property that
    # the class gets later replaces the slot, as it does for attribute lookup.
    async with ringio.open(path, "rb", buffering=buffering) as f:
        assert await f.pread(10, 0) == PAYLOAD[:10]
        cls = type(f)
        gate = cls.__dict__["_gate"].__get__(f, cls)
        looked_up = []

        def counted(self):
            looked_up.append(self)
            return gate

        monkeypatch.setattr(cls, "_gate", property(counted))
        assert await f.pread(10, 5) == PAYLOAD[5:15]
        assert looked_up and looked_up[0] is f
        monkeypatch.undo()
        looked_up.clear()
        assert await f.pread(10, 20) == PAYLOAD[20:30]
        assert looked_up == []


@pytest.mark.parametrize("buffering", [0, -1])
async def test_a_file_moved_to_a_subclass_has_its_gate_read_as_the_subclass_says(
    engine, path, buffering
):
    async with ringio.open(path, "rb", buffering=buffering) as f:
        assert await f.pread(10, 0) == PAYLOAD[:10]
        base = type(f)
        gate = base.__dict__["_gate"].__get__(f, base)
        looked_up = []

        class Sub(base):  # type: ignore[valid-type, misc]
            @property
            def _gate(self):
                looked_up.append(self)
                return gate

        f.__class__ = Sub
        try:
            assert await f.pread(10, 5) == PAYLOAD[5:15]
            assert looked_up and looked_up[0] is f
        finally:
            f.__class__ = base
        # A file with no gate at all (deleted) is read by the Python method, which
        # says so as attribute lookup does.
        del f._gate
        with pytest.raises(AttributeError, match="_gate"):
            await f.pread(10, 0)
        f._gate = gate
        assert await f.pread(3, 7) == PAYLOAD[7:10]
