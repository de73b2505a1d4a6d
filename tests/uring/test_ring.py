"""ringio.uring.Ring: every operation through the kernel, synchronously."""

from __future__ import annotations

import errno
import gc
import os
import select
import socket
import threading
import weakref
from pathlib import Path

import pytest
from tests.conftest import io_uring_fd_count

import ringio
from ringio import uring

try:
    uring.probe()
except OSError as e:  # seccomp or kernel.io_uring_disabled
    pytest.skip(f"io_uring unavailable: {e}", allow_module_level=True)

SUPPORTED = uring.probe()


@pytest.fixture(params=[False, True], ids=["coop", "defer_taskrun"])
def ring(request):
    with uring.Ring(64, single_issuer=request.param) as r:
        yield r


def run(ring, *ops):
    assert ring.submit(list(ops)) == len(ops)
    done = ring.get_events(len(ops), timeout=10)
    by_op = {id(c.op): c for c in done}
    assert len(by_op) == len(ops)
    return [by_op[id(op)] for op in ops]


def test_setup_reports_the_flags_the_kernel_took(ring):
    setup = ring.setup
    assert "SUBMIT_ALL" in setup["flags"]
    assert setup["cq_entries"] >= setup["sq_entries"] >= 64
    if setup["defer_taskrun"]:
        assert "SINGLE_ISSUER" in setup["flags"]


def test_a_single_issuer_ring_registers_its_fd_with_its_thread(ring):
    # Only a ring that one thread alone may enter has its fd registered (the index
    # means something in that thread's table alone).
    assert ring.setup["registered_fd"] is ring.setup["defer_taskrun"]


def _registered_while_making(n: int, end) -> list[bool]:
    registered = []
    for _ in range(n):
        r = uring.Ring(8, single_issuer=True, eventfd=False)
        if not r.setup["defer_taskrun"]:
            pytest.skip("kernel without DEFER_TASKRUN")
        registered.append(r.setup["registered_fd"])
        end(r)
        del r  # the last reference: a ring not closed is dropped here
    return registered


def test_a_closed_ring_gives_its_registered_index_back():
    # A thread's table has 16 entries: without giving them back, the 17th ring
    # would be entered by fd.
    assert _registered_while_making(40, lambda r: r.close()) == [True] * 40


def test_a_ring_collected_without_close_gives_its_registered_index_back():
    assert _registered_while_making(40, lambda r: None) == [True] * 40


def test_rings_beyond_the_threads_table_are_entered_by_fd(data_file):
    fd, payload = data_file
    rings = [uring.Ring(8, single_issuer=True, eventfd=False) for _ in range(20)]
    try:
        if not rings[0].setup["defer_taskrun"]:
            pytest.skip("kernel without DEFER_TASKRUN")
        registered = [r.setup["registered_fd"] for r in rings]
        assert 0 < registered.count(True) <= 16 and registered[-1] is False
        for r in rings:  # both kinds read the file's bytes
            buf = bytearray(64)
            [c] = run(r, uring.pread(fd, buf, 3))
            assert (c.res, buf) == (64, payload[3:67])
    finally:
        for r in rings:
            r.close()


def test_rings_of_two_threads_each_enter_their_own(data_file):
    # Both threads' first registrations may take the same index: each ring's
    # completions must come from its own ring.
    fd, payload = data_file
    results: dict[str, list] = {}

    def reads(name: str, offset: int) -> None:
        with uring.Ring(16, single_issuer=True, eventfd=False) as r:
            got = []
            for k in range(200):
                buf = bytearray(8)
                [c] = run(r, uring.pread(fd, buf, offset + k))
                got.append(bytes(buf[: c.res]))
            results[name] = got

    threads = [threading.Thread(target=reads, args=(n, o)) for n, o in (("a", 0), ("b", 300))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"] == [payload[k : k + 8] for k in range(200)]
    assert results["b"] == [payload[300 + k : 308 + k] for k in range(200)]


def test_probe_lists_the_file_opcodes():
    for name in ("read", "write", "readv", "writev", "fsync", "openat", "statx", "close"):
        assert SUPPORTED[name] is True


def test_pwrite_pread_round_trip(ring, empty_file):
    [w] = run(ring, uring.pwrite(empty_file, b"io_uring!", 3))
    buf = bytearray(9)
    [r] = run(ring, uring.pread(empty_file, buf, 3))
    assert (w.res, r.res, buf) == (9, 9, bytearray(b"io_uring!"))


def test_vectored_round_trip_across_many_buffers(ring, empty_file):
    parts = [bytes([i % 256]) * (i % 13 + 1) for i in range(500)]
    [w] = run(ring, uring.pwritev(empty_file, parts, 0))
    joined = b"".join(parts)
    assert w.res == len(joined)
    back = [bytearray(len(p)) for p in parts]
    [r] = run(ring, uring.preadv(empty_file, back, 0))
    assert r.res == len(joined) and b"".join(back) == joined


def test_read_and_write_at_the_file_position_work_on_pipes(ring):
    rfd, wfd = os.pipe()
    try:
        [w] = run(ring, uring.write(wfd, b"through a pipe"))
        buf = bytearray(64)
        [r] = run(ring, uring.read(rfd, buf))
        assert w.res == 14 and bytes(buf[: r.res]) == b"through a pipe"
    finally:
        os.close(rfd)
        os.close(wfd)


def test_read_at_the_file_position_advances_it(ring, data_file):
    fd, payload = data_file
    os.lseek(fd, 100, os.SEEK_SET)
    buf = bytearray(10)
    [_r] = run(ring, uring.read(fd, buf))
    assert buf == payload[100:110] and os.lseek(fd, 0, os.SEEK_CUR) == 110


def test_fsync_and_fdsync(ring, empty_file):
    os.write(empty_file, b"x")
    assert [c.res for c in run(ring, uring.fsync(empty_file), uring.fdsync(empty_file))] == [0, 0]


def test_noop_completes_with_zero(ring, empty_file):
    [c] = run(ring, uring.noop(empty_file))
    assert c.res == 0


def test_openat_statx_close(ring, tmp_path: Path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"12345")
    [o] = run(ring, uring.openat(path, os.O_RDONLY))
    fd = o.result()
    try:
        assert fd >= 0 and os.get_inheritable(fd) is False  # O_CLOEXEC is added
        assert os.read(fd, 10) == b"12345"
        st_op = uring.statx(path)
        fst_op = uring.fstat(fd)
        run(ring, st_op, fst_op)
        st, fst, ref = uring.stat_result(st_op), uring.stat_result(fst_op), os.stat(path)
        for s in (st, fst):
            assert s == ref and s.st_mtime_ns == ref.st_mtime_ns and s.st_blocks == ref.st_blocks
    finally:
        [c] = run(ring, uring.close(fd))
    assert c.res == 0
    with pytest.raises(OSError):
        os.fstat(fd)


def test_openat_create_with_mode_and_dir_fd(ring, tmp_path: Path):
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        [o] = run(ring, uring.openat("new.bin", os.O_CREAT | os.O_WRONLY, 0o640, dir_fd=dfd))
        os.close(o.result())
    finally:
        os.close(dfd)
    assert (tmp_path / "new.bin").stat().st_mode & 0o777 == 0o640 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_missing_file_is_file_not_found_naming_the_path(ring, tmp_path: Path):
    missing = tmp_path / "nope" / "x"
    [c] = run(ring, uring.openat(missing, os.O_RDONLY))
    err = c.error
    assert isinstance(err, FileNotFoundError) and err.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        c.result()


def test_stat_of_a_missing_path(ring, tmp_path: Path):
    op = uring.statx(tmp_path / "missing")
    [c] = run(ring, op)
    assert isinstance(c.error, FileNotFoundError)
    with pytest.raises(ValueError, match="not completed"):
        uring.stat_result(op)


def test_path_operations(ring, tmp_path: Path):
    (tmp_path / "a").write_text("A")
    results = run(
        ring,
        uring.mkdirat(tmp_path / "d", 0o700),
        uring.renameat(tmp_path / "a", tmp_path / "b"),
    )
    assert [c.res for c in results] == [0, 0]
    results = run(
        ring,
        uring.symlinkat("b", tmp_path / "s"),
        uring.linkat(tmp_path / "b", tmp_path / "h"),
    )
    assert [c.res for c in results] == [0, 0]
    assert os.readlink(tmp_path / "s") == "b" and (tmp_path / "h").read_text() == "A"
    assert os.stat(tmp_path / "h").st_nlink == 2
    results = run(
        ring,
        uring.unlinkat(tmp_path / "h"),
        uring.unlinkat(tmp_path / "d", rmdir=True),
    )
    assert [c.res for c in results] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "s"]


def test_rename_error_names_both_paths(ring, tmp_path: Path):
    [c] = run(ring, uring.renameat(tmp_path / "x", tmp_path / "y"))
    assert c.error.filename == str(tmp_path / "x") and c.error.filename2 == str(tmp_path / "y")


@pytest.mark.skipif(not SUPPORTED.get("ftruncate"), reason="IORING_OP_FTRUNCATE needs 6.9")
def test_ftruncate_and_fallocate(ring, data_file):
    fd, payload = data_file
    [c] = run(ring, uring.ftruncate(fd, 1000))
    assert c.res == 0 and os.fstat(fd).st_size == 1000
    [c] = run(ring, uring.fallocate(fd, 0, 1 << 20))
    assert c.res == 0 and os.fstat(fd).st_size == 1 << 20
    assert os.pread(fd, 1000, 0) == payload[:1000]


def test_embedded_nul_in_a_path_is_a_value_error():
    with pytest.raises(ValueError, match="null"):
        uring.openat("a\0b", os.O_RDONLY)


def test_a_path_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="PathLike"):
        uring.statx(42)


def test_poll_and_cancel(ring):
    a, b = socket.socketpair()
    with a, b:
        op = uring.poll(a, select.POLLIN)
        ring.submit([op])
        assert ring.get_events(1, timeout=0.02) == []
        assert ring.cancel(op) is None
        [c] = ring.get_events(1, timeout=5)
        assert c.op is op and c.res == -errno.ECANCELED


def test_a_blocked_read_owns_its_buffer_until_cancelled_and_reaped(ring):
    a, b = socket.socketpair()

    class Buf(bytearray):
        pass

    with a, b:
        buf = Buf(100)
        alive = weakref.ref(buf)
        op = uring.read(a, buf)
        ring.submit([op])
        del buf
        gc.collect()
        assert alive() is not None and ring.in_flight == 1
        ring.cancel(op)
        [c] = ring.get_events(1, timeout=5)
        assert c.res == -errno.ECANCELED
        del c, op
        gc.collect()
        assert alive() is None and ring.in_flight == 0


def test_a_cycle_through_an_op_and_its_completion_is_collected(ring):
    """An op's data that holds the op's own Completion (a future resolved with it,
    for one) is a reference cycle through ringio's objects: the cyclic GC sees
    into ops and completions, so it collects it; an op in flight, though, stays
    alive with everything it holds however unreachable it is from Python, until
    its completion has been reaped."""
    a, b = socket.socketpair()

    class Box:
        pass

    with a, b:
        box = Box()
        box.op = uring.read(a, bytearray(8), data=box)  # box -> op -> box
        alive = weakref.ref(box)
        ring.submit([box.op])
        del box
        gc.collect()
        assert alive() is not None and ring.in_flight == 1  # the kernel's op
        b.send(b"hi")
        [c] = ring.get_events(1, timeout=5)
        assert c.res == 2 and c.data is alive()
        c.data.completion = c  # box -> completion -> op -> box
        del c
        gc.collect()
        assert alive() is None


def test_per_op_resfd_is_refused_on_io_uring(ring, data_file):
    fd, _ = data_file
    efd = os.eventfd(0)
    try:
        with pytest.raises(OSError) as info:
            ring.submit([uring.pread(fd, bytearray(1), 0, resfd=efd)])
        assert info.value.errno == errno.EOPNOTSUPP
    finally:
        os.close(efd)


def test_a_batch_larger_than_the_submission_queue(data_file):
    fd, payload = data_file
    with uring.Ring(8) as ring:
        bufs = [bytearray(16) for _ in range(200)]
        ring.submit([uring.pread(fd, b, i * 16) for i, b in enumerate(bufs)])
        done = []
        while len(done) < 200:
            done += ring.get_events(1, timeout=5)
        assert b"".join(bufs) == payload[: 200 * 16]


def test_more_completions_than_the_completion_queue_lose_none(data_file):
    # 64 SQ entries -> 256 CQ entries; 2,000 completions overflow it (NODROP).
    fd, _ = data_file
    with uring.Ring(64) as ring:
        ops = [uring.pread(fd, bytearray(8), i) for i in range(2000)]
        for i in range(0, 2000, 500):
            ring.submit(ops[i : i + 500])
        seen = 0
        while seen < 2000:
            seen += len(ring.get_events(1, timeout=5))
        assert seen == 2000 and ring.in_flight == 0
        assert all(op.result == 8 for op in ops)


def test_close_cancels_in_flight_ops_and_hands_back_their_completions():
    a, b = socket.socketpair()
    with a, b:
        ring = uring.Ring(8)
        ops = [uring.read(a, bytearray(10)), uring.poll(a, select.POLLIN)]
        ring.submit(ops)
        ring.close()
        assert ring.closed and all(op.state == "done" for op in ops)
        assert sorted(c.res for c in ring.reap()) == [-errno.ECANCELED] * 2
        with pytest.raises(ValueError, match="closed"):
            ring.submit([uring.noop(a)])
        with pytest.raises(ValueError, match="closed"):
            ring.submit([])


def test_get_events_releases_the_gil(ring):
    if ring.setup["defer_taskrun"]:
        pytest.skip("a DEFER_TASKRUN ring belongs to its creating thread")
    a, b = socket.socketpair()
    with a, b:
        ring.submit([uring.read(a, bytearray(4))])
        t = threading.Timer(0.05, lambda: b.send(b"ping"))
        t.start()
        [c] = ring.get_events(1, timeout=5)  # the timer thread runs meanwhile
        t.join()
        assert c.res == 4


def test_a_defer_taskrun_ring_used_from_another_thread_fails_cleanly():
    ring = uring.Ring(8, single_issuer=True)
    if not ring.setup["defer_taskrun"]:
        pytest.skip("kernel without DEFER_TASKRUN")
    errors = []

    def other():
        try:
            ring.submit([uring.noop(0)])
        except OSError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors and errors[0].errno == errno.EEXIST
    assert "thread" in str(errors[0])
    ring.submit([uring.noop(0)])  # still fine from its own thread
    assert len(ring.get_events(1, timeout=5)) == 1
    ring.close()


def test_o_direct_reads_with_aligned_buffers(ring, tmp_path: Path):
    path = tmp_path / "direct"
    payload = os.urandom(1 << 16)
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        bufs = [ringio.aligned(4096) for _ in range(8)]
        results = run(ring, *(uring.pread(fd, b, i * 4096) for i, b in enumerate(bufs)))
        assert [c.res for c in results] == [4096] * 8
        assert b"".join(bytes(b) for b in bufs) == payload[: 8 * 4096]
    finally:
        os.close(fd)




def test_close_releases_the_ring_fd_even_while_the_object_lives():
    before = io_uring_fd_count()
    rings = [uring.Ring(8) for _ in range(5)]
    assert io_uring_fd_count() == before + 5
    for r in rings:
        r.close()
    assert io_uring_fd_count() == before  # not only at garbage collection
    assert all(r.closed for r in rings)


def _readable(fd: int) -> bool:
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


def _wait_readable(fd: int) -> None:
    p = select.poll()
    p.register(fd, select.POLLIN)
    assert p.poll(10_000), "no completion signalled"


def test_the_reap_that_posts_a_completion_leaves_the_eventfd_quiet(ring):
    # A pipe read completes later, through task work: with DEFER_TASKRUN the kernel
    # signals the eventfd when the data arrives and (before ringio suppressed it)
    # again when reap() runs the task work and posts the CQE, waking the loop twice.
    r, w = os.pipe()
    try:
        for i in range(20):
            buf = bytearray(8)
            ring.submit([uring.read(r, buf)])
            os.write(w, b"%d" % i)
            _wait_readable(ring.fileno())
            done = ring.reap()
            while not done:  # COOP_TASKRUN: the CQE may trail the signal
                _wait_readable(ring.fileno())
                done = ring.reap()
            assert [c.res for c in done] == [len(b"%d" % i)]
            assert not _readable(ring.fileno()), f"eventfd signalled again after reap {i}"
    finally:
        os.close(r)
        os.close(w)


def test_no_completion_is_lost_while_reaps_run_the_deferred_work(ring):
    # Completions keep arriving while reap() has the eventfd notifications off: each
    # one still wakes a poller or is reaped, none waits forever.
    socks = [socket.socketpair() for _ in range(32)]
    try:
        ops = [uring.read(a, bytearray(4)) for a, _ in socks]
        ring.submit(ops)
        got = 0
        writer = threading.Thread(target=lambda: [b.send(b"ping") for _, b in socks])
        writer.start()
        while got < len(ops):
            _wait_readable(ring.fileno())
            got += len(ring.reap())
        writer.join()
        assert got == len(ops) and ring.in_flight == 0
    finally:
        for a, b in socks:
            a.close()
            b.close()


@pytest.mark.parametrize("single_issuer", [False, True])
def test_a_ring_without_an_eventfd_refuses_fileno_and_completes_every_op(single_issuer):
    # eventfd=False: nothing to poll, so fileno() says how to wait instead; every
    # completion, inline or through deferred task work, arrives at get_events().
    with uring.Ring(64, single_issuer=single_issuer, eventfd=False) as ring:
        with pytest.raises(ValueError, match=r"get_events.*eventfd=True"):
            ring.fileno()
        assert ring.get_events(0) == []
        socks = [socket.socketpair() for _ in range(32)]
        try:
            bufs = [bytearray(4) for _ in socks]
            ring.submit([uring.read(a, buf) for (a, _), buf in zip(socks, bufs, strict=True)])
            writer = threading.Thread(target=lambda: [b.send(b"ping") for _, b in socks])
            writer.start()
            got = []
            while len(got) < len(socks):
                got += ring.get_events(1, timeout=10)
            writer.join()
            assert sorted(c.res for c in got) == [4] * len(socks)
            assert all(bytes(buf) == b"ping" for buf in bufs) and ring.in_flight == 0
        finally:
            for a, b in socks:
                a.close()
                b.close()


def test_resolve_futures_settles_many_futures_in_one_call(ring, data_file):
    import asyncio

    fd, payload = data_file
    loop = asyncio.new_event_loop()
    try:
        futs = [loop.create_future() for _ in range(16)]
        bufs = [bytearray(64) for _ in futs]
        ops = [
            uring.pread(fd, b, i * 64, data=f)
            for i, (b, f) in enumerate(zip(bufs, futs, strict=True))
        ]
        bad = loop.create_future()
        ops.append(uring.pread(10_000, bytearray(1), 0, data=bad))  # not an open fd
        ring.submit(ops)
        left: list = []
        while not all(f.done() for f in [*futs, bad]):
            _wait_readable(ring.fileno())
            left += ring.resolve_futures()
        assert left == []
        assert [f.result() for f in futs] == [64] * 16
        assert bufs == [bytearray(payload[i * 64 : (i + 1) * 64]) for i in range(16)]
        assert isinstance(bad.exception(), OSError) and bad.exception().errno == errno.EBADF
        assert ring.in_flight == 0
    finally:
        loop.close()


def test_resolve_futures_hands_back_what_it_cannot_settle(ring, data_file):
    import asyncio

    fd, _ = data_file
    loop = asyncio.new_event_loop()
    try:
        cancelled = loop.create_future()
        cancelled.cancel()
        plain = object()
        ops = [
            uring.pread(fd, bytearray(8), 0, data=cancelled),
            uring.pread(fd, bytearray(8), 8, data=plain),
        ]
        ring.submit(ops)
        left: list = []
        while len(left) < 2:
            _wait_readable(ring.fileno())
            left += ring.resolve_futures()
        assert sorted(c.res for c in left) == [8, 8]
        assert {id(c.data) for c in left} == {id(cancelled), id(plain)}
        assert ring.in_flight == 0
    finally:
        loop.close()
