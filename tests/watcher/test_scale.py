"""Deadlines at scale, buffer-ring starvation, 10,000 connections, UDP, asyncio,
threads, and bad input."""

from __future__ import annotations

import asyncio
import gc
import resource
import socket
import threading
import time

import pytest
from wutil import collect, tcp_pair

import ringio
from ringio import OP_ACCEPT, OP_CONNECT, OP_READ, OP_WRITE


def test_deadlines_on_1000_idle_connections(watcher: ringio.Watcher) -> None:
    """1,000 reads with deadlines expire on time with TimeoutError (cancelled in the
    kernel), and every connection stays usable afterwards."""
    n = 1000
    pairs = [socket.socketpair() for _ in range(n)]
    try:
        start = time.monotonic()
        deadlines = {}
        for i, (a, _) in enumerate(pairs):
            deadlines[i] = start + 0.3 + (i % 10) * 0.02  # spread over 200 ms
            watcher.read_timeout(i, a, bytearray(16) if i % 2 else None, deadlines[i])
        lateness = []
        seen = set()

        def check(r: ringio.OpResult) -> None:
            assert isinstance(r.error, TimeoutError), r
            now = time.monotonic()
            assert now >= deadlines[r.context] - 0.005, "expired early"
            lateness.append(now - deadlines[r.context])
            seen.add(r.context)

        collect(watcher, n, timeout=10, on_result=check)
        assert seen == set(range(n))
        lateness.sort()
        assert lateness[len(lateness) // 2] < 0.05, f"median lateness {lateness[n // 2]:.3f}s"
        # still usable: a read now gets the peer's bytes
        for i, (a, b) in enumerate(pairs[:50]):
            b.sendall(b"hi %d" % i)
            watcher.read_timeout(("again", i), a, None, time.monotonic() + 5)
        got = {}

        def keep(r: ringio.OpResult) -> None:
            assert r.error is None, r
            got[r.context[1]] = bytes(r.buffer)  # valid until the next wait_io

        collect(watcher, 50, on_result=keep)
        assert got == {i: b"hi %d" % i for i in range(50)}
    finally:
        for a, b in pairs:
            watcher.free(a)
            b.close()


def test_deadline_of_a_queued_op(watcher: ringio.Watcher, listener) -> None:
    """An op waiting behind another (not yet in the kernel) still expires."""
    c, s = tcp_pair(listener)
    watcher.read("head", s, bytearray(10))  # no deadline, never satisfied
    watcher.read_timeout("queued", s, bytearray(10), time.monotonic() + 0.1)
    t0 = time.monotonic()
    (r,) = collect(watcher, 1, timeout=5)
    assert r.context == "queued" and isinstance(r.error, TimeoutError)
    assert 0.09 <= time.monotonic() - t0 < 1.0
    c.sendall(b"data")
    (r,) = collect(watcher, 1)
    assert r.context == "head" and r.buffer[: r.size] == b"data"


def test_write_timeout_and_past_deadline(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = b"q" * (32 << 20)  # the peer never reads: the write cannot finish
    watcher.write_timeout("w", s, big, time.monotonic() + 0.2)
    (r,) = collect(watcher, 1, timeout=5)
    assert isinstance(r.error, TimeoutError) and 0 < r.size < len(big)
    watcher.read_timeout("past", s, None, time.monotonic() - 1)
    (r,) = collect(watcher, 1)
    assert isinstance(r.error, TimeoutError)
    c.close()


def test_buffer_ring_starvation_keeps_progress(make_watcher, listener) -> None:
    """With 4 ring buffers and 200 connections receiving at once, ENOBUFS must lead
    to re-arming, never to a stall (gaio's Test1k..10k hang here)."""
    with make_watcher(bufsize=1024, nbufs=4) as w:
        pairs = [tcp_pair(listener) for _ in range(200)]
        for i, (_, s) in enumerate(pairs):
            w.read(i, s)
        w.wait_io(0)
        for i, (c, _) in enumerate(pairs):
            c.sendall(b"%05d" % i)
        got = {}

        def keep(r: ringio.OpResult) -> None:
            assert r.error is None, r
            got[r.context] = bytes(r.buffer)  # valid until the next wait_io

        collect(w, 200, timeout=20, on_result=keep)
        assert got == {i: b"%05d" % i for i in range(200)}


def test_ring_buffer_valid_until_next_wait(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    c.sendall(b"one")
    watcher.read("a", s)
    (r,) = collect(watcher, 1)
    assert r.is_swap_buffer and r.buffer.valid and bytes(r.buffer) == b"one"
    held = memoryview(r.buffer)  # an export pins the data across wait_io
    c.sendall(b"two")
    watcher.read("b", s)
    (r2,) = collect(watcher, 1)
    assert bytes(held) == b"one" and bytes(r2.buffer) == b"two"
    watcher.wait_io(0)
    with pytest.raises(BufferError):
        bytes(r2.buffer)  # recycled: reading it now would show foreign bytes
    assert bytes(held) == b"one"
    held.release()


def test_read_ahead_is_bounded(make_watcher, listener) -> None:
    """Data the peer sends while no read is pending is bounded by bufsize (then the
    kernel stops reading; TCP flow control pushes back on the sender)."""
    with make_watcher(bufsize=4096, nbufs=16) as w:
        c, s = tcp_pair(listener)
        c.sendall(b"first")
        w.read("r", s)
        (r,) = collect(w, 1)
        c.setblocking(False)
        pushed = 0
        try:
            for _ in range(20_000):  # bounded
                pushed += c.send(b"x" * 65536)
                w.wait_io(0)
        except BlockingIOError:
            pass
        assert pushed < 64 << 20  # the sender was stopped
        got = 0
        while got < pushed:
            w.read("r", s, bytearray(1 << 20))
            (r,) = collect(w, 1)
            assert r.error is None
            got += r.size
        assert got == pushed


def _raise_nofile(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    try:
        # the Watcher sizes its fixed-file table from the soft limit: take it all
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, need), max(hard, need)))
    except (ValueError, OSError):
        pytest.skip(f"RLIMIT_NOFILE {soft}/{hard} and cannot raise it to {need}")


def test_10000_concurrent_connections(make_watcher) -> None:
    """10,000 clients connect, write 1 KiB and read the echo back, server and
    clients in one Watcher, and every client connection stays open until the last
    echo is back. Client sockets are registered in the ring's fixed-file table (no
    dup), the server ends are direct accepts (no fd at all): about one fd per
    connection.

    Connects are paced so that at most ``backlog // 4`` handshakes wait for an
    accept. With more, the kernel overflows the accept queue (the final ACK is
    dropped and SYN-ACKs are resent after 1 s, 2 s, ...) and, once more than half
    the backlog is embryonic, expires the oldest handshakes after two resends
    (``reqsk_timer_handler``): on a loaded machine a client then gets
    ECONNRESET from the kernel, not from ringio."""
    n, size, backlog = 10_000, 1024, 4096
    _raise_nofile(n + 1000)
    payload = bytes(range(256)) * (size // 256)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(backlog)
    w = make_watcher(bufsize=4096, nbufs=4096)
    clients: list[socket.socket] = []

    def connect_one() -> None:
        i = len(clients)
        c = socket.socket()
        clients.append(c)
        w.connect(("c", i), c, ls.getsockname())
        w.write(("w", i), c, payload)
        w.read_full(("r", i), c, bytearray(size))

    try:
        for _ in range(n // 2):
            w.accept("acc", ls, direct=True)
        for _ in range(backlog // 4):
            connect_one()
        ok = 0
        accepted = 0
        end = time.monotonic() + 45
        while ok < n:
            assert time.monotonic() < end, f"{ok} of {n} done, {accepted} accepted"
            for r in w.wait_io(1.0):
                ctx = r.context
                if r.operation == OP_ACCEPT:
                    assert r.error is None, r
                    accepted += 1
                    assert isinstance(r.conn, ringio.Conn)
                    w.accept("acc", ls, direct=True)
                    w.read_full("srv", r.conn, bytearray(size))
                    if len(clients) < n:
                        connect_one()
                elif ctx == "srv":
                    assert r.error is None, r
                    w.write("srv-w", r.conn, r.buffer)
                elif ctx == "srv-w":
                    assert r.error is None, r
                    w.free(r.conn)
                elif ctx[0] == "r":
                    assert r.error is None and r.buffer == payload, (ctx, r)
                    ok += 1
                else:
                    assert r.error is None, (ctx, r)
                    assert r.operation in (OP_CONNECT, OP_WRITE)
        assert accepted == n
    finally:
        w.close()
        ls.close()
        for c in clients:
            c.close()


def test_udp_read_from_write_to(watcher: ringio.Watcher) -> None:
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    try:
        watcher.read_from("ra", a)
        watcher.read_from("ra2", a, bytearray(100))
        watcher.write_to("wb", b, b"datagram one", a.getsockname())
        watcher.write_to("wb2", b, b"two", ("localhost", a.getsockname()[1]))
        data = {}
        rs = {
            r.context: r
            for r in collect(
                watcher, 4, on_result=lambda r: data.setdefault(r.context, bytes(r.buffer))
            )
        }
        assert rs["wb"].error is None and rs["wb"].size == 12
        assert rs["ra"].error is None and data["ra"] == b"datagram one"
        assert rs["ra"].address == b.getsockname()
        assert rs["ra2"].buffer[: rs["ra2"].size] == b"two"
        assert rs["ra2"].address == b.getsockname()
        watcher.write_to("bad", b, b"x", ("127.0.0.1", 0))
        (r,) = collect(watcher, 1)
        assert isinstance(r.error, OSError)
    finally:
        watcher.free(a)
        watcher.free(b)


def test_asyncio_wait_io_async(wenv, listener) -> None:
    """wait_io_async and ``async for``: on a plain asyncio loop (own ring) and on
    the ringio.EventLoop whose ring the Watcher shares."""
    loop = wenv.loop if wenv.loop is not None else asyncio.SelectorEventLoop()
    w = wenv.make()

    async def main() -> None:
        c, s = tcp_pair(listener)
        w.read("r", s)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, c.sendall, b"async hello")
        results = await asyncio.wait_for(w.wait_io_async(), 5)
        assert [bytes(r.buffer) for r in results] == [b"async hello"]
        # async for: a write and a deadline read
        w.write("w", s, b"pong")
        w.read_timeout("t", s, None, time.monotonic() + 0.1)
        seen = []
        async with asyncio.timeout(5):
            async for batch in w:
                seen += [r.context for r in batch]
                if "t" in seen:
                    break
        assert seen == ["w", "t"]
        # a queued op's deadline wakes the awaiting task by itself
        w.read("head", s, bytearray(10))
        w.read_timeout("queued", s, bytearray(10), time.monotonic() + 0.1)
        results = await asyncio.wait_for(w.wait_io_async(), 5)
        assert [r.context for r in results] == ["queued"]
        assert isinstance(results[0].error, TimeoutError)
        w.close()
        # async for ends when the Watcher is closed
        async with asyncio.timeout(5):
            async for batch in w:
                assert all(isinstance(r.error, ringio.WatcherClosedError) for r in batch)
        c.close()

    try:
        loop.run_until_complete(main())
    finally:
        w.close()
        if wenv.loop is None:
            loop.close()


def test_two_watchers_in_two_threads() -> None:
    errors: list[BaseException] = []
    counts: list[int] = []

    def run() -> None:
        try:
            with ringio.Watcher() as w:
                a, b = socket.socketpair()
                total = 0
                for i in range(200):
                    w.write("w", a, b"m%d" % i)
                    w.read_full("r", b, bytearray(len(b"m%d" % i)))
                    for r in collect(w, 2):
                        assert r.error is None
                        total += 1
                counts.append(total)
                w.free(a)
                w.free(b)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert counts == [400, 400]


def test_watcher_belongs_to_its_thread(watcher: ringio.Watcher) -> None:
    errors = []

    def other() -> None:
        try:
            ringio.Watcher.wait_io(watcher, 0)  # the blocking call, in every mode
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(5)
    assert errors and "thread" in str(errors[0])


def test_bad_input(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    with pytest.raises(TypeError):
        watcher.read("x", 5)
    with pytest.raises(TypeError):
        watcher.read("x", "not a socket")
    with pytest.raises(TypeError):
        watcher.read("x", s, b"read-only bytes")
    with pytest.raises(TypeError):
        watcher.write("x", s, "str is not bytes")
    with pytest.raises(ValueError):
        watcher.read_full("x", s, bytearray(0))
    with pytest.raises(ValueError):
        watcher.read("x", s, bytearray(0))
    with pytest.raises(TypeError):
        watcher.read_timeout("x", s, None, "soon")
    with pytest.raises(ValueError):
        watcher.wait_io(-1)
    with pytest.raises(ValueError):
        ringio.Watcher(nbufs=3)
    with pytest.raises(TypeError):
        ringio.Watcher(bufsize="big")
    closed = socket.socket()
    closed.close()
    with pytest.raises(OSError):
        watcher.read("x", closed)
    with pytest.raises(ValueError):
        watcher.connect("x", socket.socket(), ("999.1.2.3", 80))
    with pytest.raises(ValueError):
        watcher.connect("x", socket.socket(), ("127.0.0.1", 70000))
    with pytest.raises(TypeError):
        watcher.connect("x", socket.socket(), "127.0.0.1:80")
    notsock = open(__file__, "rb")
    with pytest.raises(TypeError):
        watcher.read("x", notsock)
    notsock.close()
    # connect errors come back as results with the kernel's errno
    d = socket.socket()
    port = listener.getsockname()[1]
    listener.close()
    watcher.connect("refused", d, ("127.0.0.1", port))
    (r,) = collect(watcher, 1)
    assert isinstance(r.error, ConnectionRefusedError)
    assert watcher.pending == 0
    w2 = ringio.Watcher()
    w2.close()
    for call in (
        lambda: w2.read("x", s),
        lambda: w2.write("x", s, b"x"),
        lambda: w2.accept("x", s),
        lambda: w2.wait_io(0),
    ):
        with pytest.raises(ringio.WatcherClosedError):
            call()
    c.close()
    d.close()
    gc.collect()


def test_op_results_repr_and_constants() -> None:
    assert (OP_READ, OP_WRITE, OP_ACCEPT, OP_CONNECT) == (0, 1, 2, 3)
    assert issubclass(ringio.WatcherClosedError, OSError)
    assert issubclass(ringio.ConnFreedError, OSError)
