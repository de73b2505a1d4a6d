"""A file used from a loop other than the one it was opened on: a RuntimeError that
names both loops and says what to do, on every engine, and the file still works on
its own loop afterwards."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from tests.engines.test_engine_threads import DEADLINE, LOOPS, engine_name  # noqa: F401 - fixture

import ringio
import ringio._engines as engines

MESSAGE = "belongs to the event loop it was opened on"


async def _open(path: str):
    return await ringio.open(path, "r+b")


async def _use(f) -> None:
    # Operations that always go through the engine's queue, pool or loop (a read
    # of cached data may be served inline, which works from any loop, as buffered
    # data of an asyncio stream does).
    await f.write(b"abc")
    await f.flush()
    await f.fsync()


def _check(error: BaseException, home, other) -> None:
    assert isinstance(error, RuntimeError), repr(error)
    text = str(error)
    assert MESSAGE in text
    assert f"{id(home):#x}" in text and f"{id(other):#x}" in text
    assert "open it again" in text
    assert "StagingProactor" not in text and "SINGLE_ISSUER" not in text


@pytest.mark.parametrize("loop_kind", sorted(LOOPS))
def test_other_loop_in_the_same_thread(engine_name, loop_kind, tmp_path):  # noqa: F811
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    home, other = LOOPS[loop_kind](), LOOPS[loop_kind]()
    try:
        f = home.run_until_complete(_open(str(path)))
        with pytest.raises(RuntimeError) as info:
            other.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
        _check(info.value, home, other)
        # Nothing was half done: the first write waits in the file's buffer (the
        # flush failed) and the file still works on its own loop.
        home.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
        home.run_until_complete(f.close())
        assert path.read_bytes() == b"abcabc6789"
    finally:
        home.close()
        other.close()


@pytest.mark.parametrize("loop_kind", sorted(LOOPS))
def test_other_loop_in_another_thread(engine_name, loop_kind, tmp_path):  # noqa: F811
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    home = LOOPS[loop_kind]()
    try:
        f = home.run_until_complete(_open(str(path)))
        seen: list[tuple[BaseException, object]] = []

        def other_thread() -> None:
            other = LOOPS[loop_kind]()
            try:
                other.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
            except BaseException as e:
                seen.append((e, other))
            finally:
                other.close()

        t = threading.Thread(target=other_thread)
        t.start()
        t.join(DEADLINE)
        assert len(seen) == 1, seen
        _check(seen[0][0], home, seen[0][1])
        home.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
        home.run_until_complete(f.close())
        assert path.read_bytes() == b"abcabc6789"
    finally:
        home.close()


def test_a_closed_loops_file_used_in_the_next_asyncio_run(engine_name, tmp_path):  # noqa: F811
    """asyncio.run() returns a file opened inside it, the next asyncio.run() uses it."""
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    loops = []
    fd = os.open(path, os.O_RDWR)

    async def opener():
        loops.append(asyncio.get_running_loop())
        return await ringio.open(fd, "r+b", closefd=False)

    async def user(f):
        loops.append(asyncio.get_running_loop())
        await _use(f)

    f = asyncio.run(opener())
    with pytest.raises(RuntimeError) as info:
        asyncio.run(user(f))
    _check(info.value, loops[0], loops[1])
    del f  # its loop is gone: nothing to flush it with (closefd=False)
    os.close(fd)


def test_a_file_of_a_loop_now_running_in_another_thread(engine_name, tmp_path):  # noqa: F811
    """asyncio lets a stopped loop run in another thread; the uring engine's own ring
    cannot follow it there (SINGLE_ISSUER): a file opened before says what to do."""
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    loop = asyncio.new_event_loop()
    try:
        f = loop.run_until_complete(_open(str(path)))
        seen: list[BaseException | None] = []

        def elsewhere() -> None:
            try:
                loop.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
                seen.append(None)
            except BaseException as e:
                seen.append(e)

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join(DEADLINE)
        if engines.engine_info().name != "uring":
            assert seen == [None]  # kernel AIO and threads follow the loop anywhere
        else:
            [e] = seen
            assert isinstance(e, RuntimeError), repr(e)
            assert "thread" in str(e) and "open it again" in str(e)
            assert "StagingProactor" not in str(e)
        loop.run_until_complete(asyncio.wait_for(_use(f), DEADLINE))
        loop.run_until_complete(f.close())
    finally:
        loop.close()
