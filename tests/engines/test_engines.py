"""The file-engine interface behaves the same on every engine."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import user_thread_count
from tests.engines.conftest import (
    cancel_with_completions_held,
    eventfd_queue,
    kernel_queue,
    until,
)

import ringio
import ringio._engines as engines


async def test_the_forced_engine_runs(engine, engine_name):
    assert engine.name == engine_name
    info = ringio.engine()
    assert info.name == engine_name and "RINGIO_ENGINE" in info.reason


async def test_open_write_read_stat_close(engine, tmp_path: Path):
    path = tmp_path / "f"
    fd = await engine.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    assert os.get_inheritable(fd) is False
    assert await engine.pwrite(fd, b"0123456789", 0) == 10
    assert await engine.pwritev(fd, [b"ab", b"cd"], 10) == 4
    buf = bytearray(14)
    assert await engine.pread(fd, buf, 0) == 14 and buf == b"0123456789abcd"
    a, b = bytearray(4), bytearray(4)
    assert await engine.preadv(fd, [a, b], 2) == 8 and a + b == b"23456789"
    await engine.fsync(fd)
    await engine.fdatasync(fd)
    st = await engine.fstat(fd)
    assert st.st_size == 14 and stat.S_ISREG(st.st_mode)
    assert (await engine.stat(path)).st_ino == st.st_ino
    await engine.ftruncate(fd, 3)
    assert os.fstat(fd).st_size == 3
    await engine.close(fd)
    with pytest.raises(OSError):
        os.fstat(fd)


async def test_path_operations(engine, tmp_path: Path):
    await engine.mkdir(tmp_path / "d", 0o700)
    (tmp_path / "a").write_text("A")
    await engine.rename(tmp_path / "a", tmp_path / "d" / "b")
    await engine.link(tmp_path / "d" / "b", tmp_path / "h")
    await engine.symlink("d/b", tmp_path / "s")
    assert (tmp_path / "s").read_text() == "A"
    lst = await engine.stat(tmp_path / "s", follow_symlinks=False)
    assert stat.S_ISLNK(lst.st_mode)
    await engine.unlink(tmp_path / "h")
    await engine.unlink(tmp_path / "d" / "b")
    await engine.rmdir(tmp_path / "d")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


async def test_errors_match_the_os_module(engine, tmp_path: Path):
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as info:
        await engine.open(missing, os.O_RDONLY)
    assert info.value.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        await engine.stat(missing)
    with pytest.raises(IsADirectoryError):
        await engine.open(tmp_path, os.O_WRONLY)
    with pytest.raises(FileExistsError):
        await engine.mkdir(tmp_path)
    with pytest.raises(OSError) as info:
        await engine.rmdir(tmp_path / "nope")
    assert info.value.errno == errno.ENOENT


async def test_bad_fd(engine, tmp_path: Path):
    fd = os.open(tmp_path / "x", os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    with pytest.raises(OSError) as info:
        await engine.pread(fd, bytearray(4), 0)
    assert info.value.errno == errno.EBADF


async def test_pipes_read_and_write_at_the_position(engine):
    rfd, wfd = os.pipe()
    try:
        reader = asyncio.ensure_future(engine.read(rfd, buf := bytearray(32)))
        await asyncio.sleep(0.01)
        assert not reader.done()  # waits for data without blocking the loop
        assert await engine.write(wfd, b"through the pipe") == 16
        n = await asyncio.wait_for(reader, 5)
        assert bytes(buf[:n]) == b"through the pipe"
    finally:
        os.close(rfd)
        os.close(wfd)


async def test_poll(engine):
    rfd, wfd = os.pipe()
    try:
        task = asyncio.ensure_future(engine.poll(rfd, select.POLLIN))
        await asyncio.sleep(0.01)
        assert not task.done()
        os.write(wfd, b"x")
        assert await asyncio.wait_for(task, 5) & select.POLLIN
    finally:
        os.close(rfd)
        os.close(wfd)


async def test_cached_reads_take_the_inline_fast_path(engine, data_file):
    fd, payload = data_file
    if engine.name == "thread":
        pytest.skip("the thread engine has no inline path")
    hint = engines.NowaitHint()
    buf = bytearray(100)
    before = engine._queue.in_flight
    n = await engine.pread(fd, buf, 50, hint)
    assert n == 100 and buf == payload[50:150] and before == engine._queue.in_flight
    assert hint.read  # still worth trying


async def test_many_concurrent_ops_start_no_user_thread(engine, data_file):
    fd, _payload = data_file
    if engine.name == "thread":
        pytest.skip("the thread engine is the thread fallback")
    before = user_thread_count()
    results = await asyncio.gather(
        *(engine.pread(fd, bytearray(64), i * 64) for i in range(200))
    )
    assert results == [64] * 200
    assert user_thread_count() == before


async def test_cancelling_a_read_on_a_pipe_keeps_the_loop_healthy(engine):
    rfd, wfd = os.pipe()
    try:
        buf = bytearray(8)
        task = asyncio.ensure_future(engine.read(rfd, buf))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        os.write(wfd, b"after")
        buf2 = bytearray(8)
        n = await asyncio.wait_for(engine.read(rfd, buf2), 5)
        assert n > 0
    finally:
        os.close(rfd)
        os.close(wfd)


def test_unknown_forced_engine_is_a_value_error(monkeypatch):
    monkeypatch.setenv("RINGIO_ENGINE", "bogus")
    engines.reset()
    try:
        with pytest.raises(ValueError, match="RINGIO_ENGINE"):
            ringio.engine()
    finally:
        monkeypatch.delenv("RINGIO_ENGINE")
        engines.reset()


def test_default_choice_prefers_io_uring(monkeypatch):
    monkeypatch.delenv("RINGIO_ENGINE", raising=False)
    engines.reset()
    info = ringio.engine()
    if engines._usable("uring") is None:
        assert info.name == "uring" and info.refused == {}
    else:
        assert "uring" in info.refused
    engines.reset()


def test_the_aio_probe_is_one_context_per_process():
    """Choosing an engine probes kernel AIO once per process and keeps the probe's
    context (destroying one waits for an RCU grace period, ~30 ms): asking again,
    or choosing again after a reset, makes no new context."""
    if engines._usable("aio"):
        pytest.skip("kernel AIO unavailable")
    script = (
        "import ringio\n"
        "from ringio import _core, _engines\n"
        "nr = lambda: int(open('/proc/sys/fs/aio-nr').read())\n"
        "a = nr(); _core.aio.probe(); b = nr()\n"
        "for _ in range(5):\n"
        "    _core.aio.probe(); _engines.reset(); ringio.engine()\n"
        "print(b - a, nr() - b)\n"
    )
    env = {**os.environ, "RINGIO_ENGINE": "aio"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    first, again = map(int, out.stdout.split())
    assert first > 0 and again == 0, out.stdout


async def test_negative_offset_is_einval_like_os_pread(engine, data_file):
    fd, _ = data_file
    with pytest.raises(OSError) as info:
        await engine.pread(fd, bytearray(4), -1)
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:
        await engine.pwrite(fd, b"x", -1)
    assert info.value.errno == errno.EINVAL


async def test_fstat_of_a_negative_fd_is_ebadf(engine):
    with pytest.raises(OSError) as info:
        await engine.fstat(-100)  # AT_FDCWD must not describe the working directory
    assert info.value.errno == errno.EBADF


def _run_without_suspending(coro):
    """The coroutine's result if it completes at its first step, else None (it
    waited for something: a loop turn)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    return None


def _inline_within(attempts, make):
    """The first result of `make()` that is not None, in up to `attempts` tries.
    A lookup with RESOLVE_CACHED answers EAGAIN now and then even for a cached path
    (the RCU walk it needs fails while another CPU changes the dentry cache), and the
    call then goes through the engine: correct, but not what these tests look at."""
    for _ in range(attempts):
        result = make()
        if result is not None:
            return result
    return None


def _spy_inline(monkeypatch, module, name):
    """Records the answers of `module`'s inline attempt `name` (``open_inline``,
    ``stat_inline``, ``fstat_inline``): None where the call goes to the engine."""
    real = getattr(module, name)
    answers: list[object] = []

    def spy(*args):
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(module, name, spy)
    return answers


def _through_the_engine(engine, coro, answers):
    """Runs `coro`'s first step; whether its call went to the engine's queue or pool
    (the spied inline attempt said None), and its result if it completed. On CPython
    3.14 a pool's call that has ended before its future is awaited completes the
    await at once (asyncio's _chain_future sets a done future's state in the loop's
    thread), result or error: a suspension alone does not show the path there."""
    answers.clear()
    try:
        done = _run_without_suspending(coro)
    except OSError:
        done = None
        assert engine.name in ("aio", "thread") and sys.version_info >= (3, 14)
    if done is not None:
        assert engine.name in ("aio", "thread") and sys.version_info >= (3, 14)
    return answers == [None], done


async def test_fstat_on_a_local_filesystem_needs_no_loop_turn(engine, data_file, monkeypatch):
    # A local filesystem answers getattr from the inode in memory: os.fstat cannot
    # wait there, so the kernel engines make the call inline (io_uring always hands
    # STATX to a kernel worker: 58 µs against 1 µs, 2026-11-26).
    fd, payload = data_file
    if engine.name == "thread":
        pytest.skip("the thread engine calls through its pool")
    st = _run_without_suspending(engine.fstat(fd))
    assert st is not None, "fstat waited for a loop turn"
    assert st == os.fstat(fd) and st.st_size == len(payload)
    # Elsewhere (FUSE, NFS: the server may be asked) it goes through the engine's
    # queue, or its pool, and still gives the same answer.
    monkeypatch.setattr(engines.inline._core, "fs_type", lambda fd: 0x65735546)
    answers = _spy_inline(monkeypatch, engines.kernel, "fstat_inline")
    assert _through_the_engine(engine, engine.fstat(fd), answers)[0]
    assert await engine.fstat(fd) == os.fstat(fd)


async def test_stat_of_a_cached_path_on_a_local_filesystem_needs_no_loop_turn(
    engine, tmp_path, monkeypatch
):
    # Every step of the path in the dentry cache (an O_PATH openat2 with
    # RESOLVE_CACHED) on a local filesystem: the stat is made inline, on every
    # engine (the thread engine's pool is for calls that may wait).
    target = tmp_path / "target.bin"
    target.write_bytes(b"x" * 1234)
    link = tmp_path / "link"
    link.symlink_to(target)
    os.stat(link)  # the lookups are cached now
    # Following a symlink often needs an atime update, which a cached lookup cannot
    # make (EAGAIN): the stat then goes through the engine, with the same result.
    assert await engine.stat(link) == os.stat(link)
    for path, follow in ((target, True), (link, False), (str(link), False)):
        st = _inline_within(
            5, lambda p=path, f=follow: _run_without_suspending(engine.stat(p, follow_symlinks=f))
        )
        assert st is not None, f"stat({path!r}, follow_symlinks={follow}) waited"
        assert st == os.stat(path, follow_symlinks=follow)
    dir_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        st = _inline_within(
            5, lambda: _run_without_suspending(engine.stat("target.bin", dir_fd=dir_fd))
        )
        assert st == os.stat(target)
    finally:
        os.close(dir_fd)
    # Errors, and filesystems that may ask a server, go through the queue or the
    # pool: the same results and exceptions as os.stat.
    with pytest.raises(FileNotFoundError) as info:
        await engine.stat(tmp_path / "missing")
    assert info.value.filename == str(tmp_path / "missing")
    module = engines.base if engine.name in ("aio", "thread") else engines.kernel
    answers = _spy_inline(monkeypatch, module, "stat_inline")
    assert _through_the_engine(engine, engine.stat(tmp_path / "missing"), answers)[0]
    monkeypatch.setattr(engines.inline._core, "fs_type", lambda fd: 0x65735546)
    assert _through_the_engine(engine, engine.stat(target), answers)[0]
    assert await engine.stat(target) == os.stat(target)


async def test_opening_a_cached_regular_file_on_a_local_filesystem_needs_no_loop_turn(
    engine, tmp_path, monkeypatch
):
    target = tmp_path / "target.bin"
    target.write_bytes(b"0123456789")
    link = tmp_path / "link"
    link.symlink_to(target)
    os.stat(link)  # the lookups are cached now
    cases = ((target, os.O_RDONLY), (target, os.O_RDWR | os.O_APPEND), (str(target), os.O_WRONLY))
    # The engines' open makes the inline attempt first (spied on here: a call that
    # waits goes on in the kernel or the pool even once its coroutine is closed).
    made = []

    def spy(*args):
        made.append(real(*args))
        return made[-1]

    module = engines.base if engine.name in ("aio", "thread") else engines.kernel
    real = module.open_inline
    monkeypatch.setattr(module, "open_inline", spy)
    for path, flags in cases:
        fd = _inline_within(5, lambda p=path, f=flags: engines.inline.open_inline(p, f, None))
        assert fd is not None, f"open({path!r}, {flags:#o}) waited"
        os.close(fd)
        fd = await engine.open(path, flags)
        assert made, "the engine made no inline attempt"
        made.clear()
        try:
            assert os.path.samestat(os.fstat(fd), os.stat(target))
            assert os.get_inheritable(fd) is False  # O_CLOEXEC, as os.open
            assert os.O_ACCMODE & fcntl.fcntl(fd, fcntl.F_GETFL) == flags & os.O_ACCMODE
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND == flags & os.O_APPEND
        finally:
            os.close(fd)
    fd = await engine.open(link, os.O_RDONLY)  # inline or not (see the stat test)
    assert os.path.samestat(os.fstat(fd), os.stat(target))
    os.close(fd)
    # What may write (O_CREAT, O_TRUNC), what is not a regular file (a FIFO's open
    # waits for the other end), errors, and filesystems that may ask a server go
    # through the engine's queue or pool, with os.open's results and errors. (A
    # pool's call, once started, runs to its end though the coroutine is closed:
    # new.bin, not target, is the file they may create and truncate.)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, flags in (
        (tmp_path / "new.bin", os.O_WRONLY | os.O_CREAT),
        (tmp_path / "new.bin", os.O_WRONLY | os.O_TRUNC),
        (fifo, os.O_RDONLY | os.O_NONBLOCK),
        (tmp_path / "missing", os.O_RDONLY),
        (link, os.O_RDONLY | os.O_NOFOLLOW),
    ):
        queued, done = _through_the_engine(engine, engine.open(path, flags), made)
        assert queued, f"open({path!r}, {flags:#o}) was inline"
        if done is not None:
            os.close(done)
    with pytest.raises(OSError) as info:
        await engine.open(link, os.O_RDONLY | os.O_NOFOLLOW)
    assert info.value.errno == errno.ELOOP
    monkeypatch.setattr(engines.inline._core, "fs_type", lambda fd: 0x65735546)
    queued, done = _through_the_engine(engine, engine.open(target, os.O_RDONLY), made)
    assert queued
    if done is not None:
        os.close(done)
    fd = await engine.open(target, os.O_RDONLY)
    assert os.read(fd, 4) == b"0123"
    os.close(fd)


async def test_reading_a_directory_is_is_a_directory_error(engine, tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(IsADirectoryError):
            await engine.pread(fd, bytearray(1), 0)
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", ["uring", "aio"])
def test_engines_keep_working_in_a_forked_child(name, monkeypatch):
    if engines._usable(name):
        pytest.skip(f"{name} unavailable")
    monkeypatch.setenv("RINGIO_ENGINE", name)
    engines.reset()

    async def once() -> int:
        return (await engines.get().stat("/proc/self")).st_nlink

    asyncio.run(once())  # leaves the engine of a finished loop behind
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            code = 0 if asyncio.run(once()) > 0 else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    engines.reset()
    assert os.waitstatus_to_exitcode(status) == 0


async def test_a_closed_engine_refuses_even_cached_reads(engine, data_file):
    fd, _ = data_file
    engine.close_engine()
    with pytest.raises(ValueError, match="closed"):
        await engine.pread(fd, bytearray(4), 0, engines.NowaitHint())
    with pytest.raises(ValueError, match="closed"):
        await engine.pread_bytes(fd, 4, 0)


# -- O_DIRECT, cancellation and completion delivery ---------------------------------


def _open_direct(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:  # tmpfs and some filesystems refuse O_DIRECT
        pytest.skip(f"O_DIRECT unavailable here: {e}")


@pytest.fixture
def direct_file(tmp_path: Path):
    payload = os.urandom(8 * 4096)
    path = tmp_path / "direct.bin"
    path.write_bytes(payload)
    fd = _open_direct(path)
    yield fd, payload
    os.close(fd)


def _spy_inline_reads(monkeypatch) -> list[int]:
    """Records the fds of every preadv2(RWF_NOWAIT) attempt, from Python or Rust."""
    seen: list[int] = []
    real_preadv = os.preadv
    real_nowait, real_into = ringio._core.pread_nowait, ringio._core.preadinto_nowait

    def preadv(fd, buffers, offset, flags=0):
        if flags & os.RWF_NOWAIT:
            seen.append(fd)
        return real_preadv(fd, buffers, offset, flags)

    def pread_nowait(fd, n, offset, memory=False):
        seen.append(fd)
        return real_nowait(fd, n, offset, memory)

    def preadinto_nowait(fd, buffer, offset, memory=False):
        seen.append(fd)
        return real_into(fd, buffer, offset, memory)

    monkeypatch.setattr(os, "preadv", preadv)
    monkeypatch.setattr(ringio._core, "pread_nowait", pread_nowait)
    monkeypatch.setattr(ringio._core, "preadinto_nowait", preadinto_nowait)
    return seen


async def test_o_direct_reads_without_a_hint_skip_the_inline_attempt(
    engine, direct_file, data_file, monkeypatch
):
    # preadv2(RWF_NOWAIT) on an O_DIRECT file waits for the device instead of saying
    # EAGAIN: it would serialise every read on the loop's thread.
    fd, payload = direct_file
    seen = _spy_inline_reads(monkeypatch)
    bufs = [ringio.aligned(4096) for _ in range(4)]
    got = await asyncio.gather(*(engine.pread(fd, b, i * 4096) for i, b in enumerate(bufs)))
    assert got == [4096] * 4
    assert b"".join(bytes(b) for b in bufs) == payload[: 4 * 4096]
    assert fd not in seen
    assert engine.nowait_hint(fd).read is False
    # A buffered file keeps the inline attempt.
    bfd, _ = data_file
    assert engine.nowait_hint(bfd).read is True
    await engine.pread(bfd, bytearray(16), 0)
    assert seen.count(bfd) == (0 if engine.name == "thread" else 1)


async def test_the_o_direct_check_reads_the_flags_once_per_fd(
    engine, direct_file, tmp_path, monkeypatch
):
    import fcntl

    calls: list[int] = []
    real = fcntl.fcntl

    def counting(fd, cmd, *args):
        if cmd == fcntl.F_GETFL:
            calls.append(fd)
        return real(fd, cmd, *args)

    monkeypatch.setattr(fcntl, "fcntl", counting)
    fd, _ = direct_file
    buf = ringio.aligned(4096)
    for i in range(3):
        await engine.pread(fd, buf, i * 4096)
        assert engine.nowait_hint(fd).read is False
    assert calls.count(fd) == 1
    # close() through the engine forgets the fd: a file reopened under the same
    # number is looked at afresh.
    (tmp_path / "plain").write_bytes(b"plain")
    dfd = _open_direct(tmp_path / "direct.bin")
    assert engine.nowait_hint(dfd).read is False
    await engine.close(dfd)
    pfd = os.open(tmp_path / "plain", os.O_RDONLY)
    try:
        assert engine.nowait_hint(pfd).read is True
    finally:
        os.close(pfd)


async def test_cancelling_the_awaiting_task_cancels_the_op_in_the_kernel(engine):
    queue = kernel_queue(engine)
    rfd, wfd = os.pipe()
    try:
        task = asyncio.ensure_future(engine.read(rfd, bytearray(8)))
        await until(lambda: queue.in_flight == 1, "the read reached the kernel")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Nothing is ever written: only a cancel in the kernel ends the op.
        await until(lambda: queue.in_flight == 0, "the kernel cancelled the read")
    finally:
        os.close(rfd)
        os.close(wfd)


async def test_a_cancelled_read_keeps_its_buffer_until_its_completion(engine, data_file):
    fd, payload = data_file
    buf = bytearray(4096)
    await cancel_with_completions_held(
        engine, lambda: engine.pread(fd, buf, 0, engines.NowaitHint(read=False)), 1, buf
    )
    assert buf[:4096] == payload[:4096] or buf[:4096] == bytes(4096)


async def test_one_wake_up_resolves_every_ready_completion(engine, data_file):
    queue = eventfd_queue(engine)
    fd, payload = data_file
    loop = asyncio.get_running_loop()
    loop.remove_reader(queue.fileno())
    try:
        hint = engines.NowaitHint(read=False)
        bufs = [bytearray(256) for _ in range(32)]
        tasks = [
            asyncio.ensure_future(engine.pread(fd, b, i * 256, hint)) for i, b in enumerate(bufs)
        ]
        await until(lambda: queue.in_flight == 32, "every read reached the kernel")
        # Cached data: the kernel completed every read inside the submit call.
        engine._proactor._on_completions()
        assert queue.in_flight == 0
        await asyncio.sleep(0)
        assert all(t.done() for t in tasks)
    finally:
        loop.add_reader(queue.fileno(), engine._proactor._on_completions)
    assert [t.result() for t in tasks] == [256] * 32
    assert b"".join(bufs) == payload[: 32 * 256]


async def test_an_op_goes_to_the_kernel_at_once_only_while_the_kernel_is_short_of_work(engine):
    queue = eventfd_queue(engine)
    loop = asyncio.get_running_loop()
    proactor = engine._proactor
    rfd, wfd = os.pipe()
    try:
        futs = []

        def start() -> None:
            fut = loop.create_future()
            futs.append(fut)
            proactor.start(ringio._core.poll(rfd, select.POLLIN, data=fut), watch=False)

        def in_kernel() -> int:
            # The uring engine queues in its ring's SQ (staged ops count as in
            # flight); kernel AIO's queue is the proactor's deque.
            return queue.in_flight - getattr(queue, "_sq_waiting", 0)

        start()
        assert in_kernel() == 1  # nothing in flight: submitted on the spot
        start()
        assert in_kernel() == 2  # as many queued as in flight: submitted too
        start()
        assert in_kernel() == 2  # the kernel has work: waits for the loop turn
        await asyncio.sleep(0)
        assert in_kernel() == 3 and queue.in_flight == 3
        os.write(wfd, b"x")
        assert all(m & select.POLLIN for m in await asyncio.gather(*futs))
    finally:
        os.close(rfd)
        os.close(wfd)


async def test_closing_an_awaiting_coroutine_cancels_its_op(engine):
    # coro.close() (GeneratorExit at the await, as at shutdown) is not a task
    # cancellation, but the op is abandoned all the same.
    queue = kernel_queue(engine)
    rfd, wfd = os.pipe()
    try:
        coro = engine.read(rfd, bytearray(8))
        fut = coro.send(None)  # runs to the await of the op's future
        await until(lambda: queue.in_flight == 1, "the read reached the kernel")
        coro.close()
        assert fut.cancelled()
        await until(lambda: queue.in_flight == 0, "the kernel cancelled the read")
    finally:
        os.close(rfd)
        os.close(wfd)


async def test_the_engine_does_not_cache_the_fuse_check_per_fd(
    engine, direct_file, monkeypatch
):
    # A wrong cached answer would be a wrong result (io_uring misreads FUSE
    # direct_io files), not just a slower read: an fd number closed elsewhere and
    # reused must be looked at again on every queued read without a caller's hint.
    calls: list[int] = []
    real = ringio._core.fs_type

    def counting(fd):
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(ringio._core, "fs_type", counting)
    fd, _ = direct_file
    buf = ringio.aligned(4096)
    for i in range(3):
        assert await engine.pread(fd, buf, i * 4096) == 4096
    assert engine.nowait_hint(fd).queue_reads is None
    assert calls.count(fd) == (3 if engine.name == "uring" else 0)
