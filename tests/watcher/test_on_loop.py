"""A Watcher on a ringio.EventLoop's ring: the binding rule, proof that the loop's
ring (not a second one, nor an eventfd) carries its ops, several Watchers on one
loop, close and loop close with ops in flight, sync wait_io, bad arguments."""

from __future__ import annotations

import asyncio
import gc
import io
import os
import socket
import threading
import time

import pytest
from wutil import tcp_pair

import ringio
from ringio.loop._selector import select_count


def _anon_fds() -> dict[str, int]:
    """Open anonymous-inode fds of this process by kind (eventfd, io_uring)."""
    kinds: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("anon_inode:"):
            kinds[target] = kinds.get(target, 0) + 1
    return kinds


def test_binding_rule() -> None:
    """loop=None binds to the ringio.EventLoop running in this thread, and only to
    it; loop=False never binds; an explicit loop binds before it runs."""
    with ringio.Watcher() as w:
        assert w.loop is None  # no running loop

    async def plain() -> None:
        with ringio.Watcher() as w:
            assert w.loop is None  # a plain asyncio loop has no ring to share

    asyncio.run(plain())

    async def on_ringio() -> None:
        loop = asyncio.get_running_loop()
        with ringio.Watcher() as w:
            assert w.loop is loop and w._core.loop_bound
        with ringio.Watcher(loop=True) as w:
            assert w.loop is loop
        with ringio.Watcher(loop=False) as w:
            assert w.loop is None
            # its own ring still works on this loop (add_reader on its eventfd)
            a, b = socket.socketpair()
            w.read("r", a)
            b.sendall(b"own ring")
            (r,) = await asyncio.wait_for(w.wait_io_async(), 5)
            assert bytes(r.buffer) == b"own ring"
            w.free(a)
            b.close()

    ringio.run(on_ringio())
    loop = ringio.new_event_loop()
    try:
        with ringio.Watcher(loop=loop) as w:
            assert w.loop is loop
    finally:
        loop.close()


def test_uses_the_loop_ring_no_eventfd_no_second_ring() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        ring = loop._loop_ring.ring  # type: ignore[attr-defined]
        before = _anon_fds()
        w = ringio.Watcher()
        assert _anon_fds() == before  # no eventfd, no io_uring of its own
        with pytest.raises(io.UnsupportedOperation):
            w.fileno()
        assert ring.watchers == 1
        a, b = socket.socketpair()
        w.read("r", a, bytearray(16))
        w.read_timeout("t", a, None, time.monotonic() + 30)
        await asyncio.sleep(0)  # the loop's select submits them
        assert ring.watcher_in_flight == 1  # the head read, in the loop's ring (the next is queued)
        assert w._core.in_flight == ring.watcher_in_flight
        # Waiting before the data arrives: the wait must be woken by the loop. (A
        # wait begun after it may find the completion at once: on 3.12+, whose
        # wait_for runs the awaitable in the same task, without an iteration.)
        waiter = asyncio.ensure_future(asyncio.wait_for(w.wait_io_async(), 5))
        await asyncio.sleep(0)
        assert not waiter.done()
        n0 = select_count()
        b.sendall(b"ping")
        (r,) = await waiter
        assert r.context == "r" and r.buffer[: r.size] == b"ping"
        assert select_count() > n0  # woken by the loop's own select
        # nothing registered for readiness but the loop's own self-pipe
        assert set(loop._selector._fd_to_key) == {loop._ssock.fileno()}  # type: ignore[attr-defined]
        w.free(a)
        b.close()
        (r,) = await asyncio.wait_for(w.wait_io_async(), 5)
        assert isinstance(r.error, ringio.ConnFreedError)
        await asyncio.sleep(0.01)
        assert ring.watcher_in_flight == 0
        w.close()
        assert ring.watchers == 0

    ringio.run(main())


async def _echo_round(w: ringio.Watcher, listener: socket.socket, tag: str, n: int) -> int:
    """n clients of `w` connect to `listener` (served by `w` too, direct accepts)
    and echo one message each; returns the messages echoed."""
    for _ in range(n):
        w.accept((tag, "acc"), listener, direct=True)
    clients = []
    for i in range(n):
        c = socket.socket()
        clients.append(c)
        w.connect((tag, "conn", i), c, listener.getsockname())
        w.write((tag, "tx", i), c, f"{tag}:{i}".encode())
        w.read_full((tag, "rx", i), c, bytearray(len(f"{tag}:{i}")))
    done = 0
    while done < n:
        for r in await asyncio.wait_for(w.wait_io_async(), 10):
            assert r.error is None, r
            assert r.context[0] == tag, (tag, r.context)  # routed to its own Watcher
            kind = r.context[1]
            if kind == "acc":
                w.read((tag, "srv"), r.conn)  # buffer ring of this Watcher
            elif kind == "srv":
                w.write((tag, "srv-tx"), r.conn, r.buffer)
            elif kind == "srv-tx":
                w.free(r.conn)
            elif kind == "rx":
                assert bytes(r.buffer) == f"{tag}:{r.context[2]}".encode()
                done += 1
    for c in clients:
        w.free(c)
    return done


def test_several_watchers_share_one_loop() -> None:
    async def main() -> None:
        ring = asyncio.get_running_loop()._loop_ring.ring  # type: ignore[attr-defined]
        listeners = []
        for _ in range(3):
            ls = socket.socket()
            ls.bind(("127.0.0.1", 0))
            ls.listen(256)
            listeners.append(ls)
        ws = [ringio.Watcher(bufsize=4096, nbufs=64) for _ in range(3)]
        assert ring.watchers == 3
        counts = await asyncio.gather(
            *(_echo_round(w, listeners[i], f"w{i}", 50) for i, w in enumerate(ws))
        )
        assert counts == [50, 50, 50]
        for w in ws:
            w.close()
        assert ring.watchers == 0 and ring.watcher_in_flight == 0
        for ls in listeners:
            ls.close()

    ringio.run(main())


def test_watchers_and_loop_streams_share_the_ring() -> None:
    """A loop-bound Watcher next to the loop's own stream transports and sock_* ops."""

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(await reader.readexactly(5))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        w = ringio.Watcher()
        a, b = socket.socketpair()
        a.setblocking(False)
        w.read("wr", b)
        recv = asyncio.ensure_future(loop.sock_recv(a, 100))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hello")
        a.sendall(b"to watcher")
        w.write("ww", b, b"to sock_recv")
        results = []
        while len(results) < 2:
            results += await asyncio.wait_for(w.wait_io_async(), 5)
        assert {r.context for r in results} == {"wr", "ww"}
        assert await asyncio.wait_for(recv, 5) == b"to sock_recv"
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"hello"
        writer.close()
        server.close()
        await server.wait_closed()
        w.close()
        a.close()

    ringio.run(main())


def test_close_with_ops_in_flight_inside_the_loop(listener) -> None:
    async def main() -> None:
        ring = asyncio.get_running_loop()._loop_ring.ring  # type: ignore[attr-defined]
        w = ringio.Watcher()
        other = ringio.Watcher()
        pairs = [tcp_pair(listener) for _ in range(4)]
        for i, (_, s) in enumerate(pairs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            w.read(("r", i), s)
            w.read_timeout(("t", i), s, bytearray(10), time.monotonic() + 60)
            w.write(("w", i), s, b"x" * (8 << 20))  # never read by the peer
        w.accept("acc", listener)
        await asyncio.sleep(0.05)
        assert ring.watcher_in_flight > 0
        start = time.monotonic()
        w.close()
        assert time.monotonic() - start < 5
        assert ring.watcher_in_flight == 0 and ring.watchers == 1
        rest = w.wait_io()
        assert {r.context for r in rest} >= {("r", i) for i in range(4)} | {"acc"}
        assert all(isinstance(r.error, ringio.WatcherClosedError) for r in rest), rest
        with pytest.raises(ringio.WatcherClosedError):
            await w.wait_io_async()
        # the loop and the other Watcher carry on
        a, b = socket.socketpair()
        other.read("still", a)
        b.sendall(b"alive")
        (r,) = await asyncio.wait_for(other.wait_io_async(), 5)
        assert bytes(r.buffer) == b"alive"
        other.close()
        for c, s in pairs:
            c.close()
            s.close()

    ringio.run(main())


def test_loop_closed_while_the_watcher_has_ops(listener) -> None:
    loop = ringio.new_event_loop()
    w = ringio.Watcher(loop=loop)
    c, s = tcp_pair(listener)
    w.read("r", s)
    w.read_timeout("t", s, bytearray(10), time.monotonic() + 60)
    w.accept("acc", listener)
    loop.run_until_complete(asyncio.sleep(0.02))  # submitted by the loop's select
    assert w._core.in_flight > 0
    loop.close()  # cancels everything on its ring and waits for every CQE
    rest = w.wait_io()
    assert {r.context for r in rest} == {"r", "t", "acc"}
    assert all(isinstance(r.error, ringio.WatcherClosedError) for r in rest), rest
    assert w.closed
    with pytest.raises(ringio.WatcherClosedError, match="loop"):
        w.read("late", s)
    w.close()
    c.close()
    s.close()


def test_sync_wait_io_on_a_loop_bound_watcher(listener) -> None:
    """wait_io (blocking) works on the loop's ring from the loop's thread; the loop's
    own completions it reaps meanwhile are kept for the loop's next select."""
    loop = ringio.new_event_loop()
    try:
        w = ringio.Watcher(loop=loop)
        a, b = socket.socketpair()
        a.setblocking(False)

        async def start_recv() -> asyncio.Future[bytes]:
            fut = asyncio.ensure_future(loop.sock_recv(a, 100))
            await asyncio.sleep(0.01)  # the ring read is in flight
            return fut

        recv = loop.run_until_complete(start_recv())
        c, s = tcp_pair(listener)
        w.read("r", s, bytearray(100))
        w.write("w", c, b"sync")
        b.sendall(b"for the loop")  # completes the loop's ring read meanwhile
        got = []
        end = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < end:
            got += w.wait_io(1.0)
        assert {r.context for r in got} == {"r", "w"}
        assert loop.run_until_complete(asyncio.wait_for(recv, 5)) == b"for the loop"
        assert w.wait_io(0) == []
        w.close()
        for x in (a, b, c, s):
            x.close()
    finally:
        loop.close()


def test_gc_of_an_unclosed_loop_bound_watcher() -> None:
    async def main() -> None:
        ring = asyncio.get_running_loop()._loop_ring.ring  # type: ignore[attr-defined]
        w = ringio.Watcher()
        a, b = socket.socketpair()
        w.read("r", a)
        await asyncio.sleep(0.01)
        a.close()  # the Watcher's own reference (a fixed-file slot) keeps it open
        del w
        gc.collect()
        assert ring.watchers == 0 and ring.watcher_in_flight == 0
        b.settimeout(5)
        assert b.recv(10) == b""  # the Watcher's reference was dropped too
        b.close()

    ringio.run(main())


def test_loop_bound_watcher_is_refused_elsewhere() -> None:
    loop = ringio.new_event_loop()
    try:
        w = ringio.Watcher(loop=loop)
        with pytest.raises(RuntimeError, match="await it on that loop"):
            asyncio.run(w.wait_io_async())
        errors: list[BaseException] = []

        def other() -> None:
            try:
                ringio.Watcher.wait_io(w, 0)
            except RuntimeError as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert errors and "thread" in str(errors[0])
        w.close()
    finally:
        loop.close()


def test_bad_loop_arguments() -> None:
    plain = asyncio.new_event_loop()
    try:
        with pytest.raises(TypeError, match=r"ringio\.EventLoop"):
            ringio.Watcher(loop=plain)
    finally:
        plain.close()
    with pytest.raises(TypeError):
        ringio.Watcher(loop="yes")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"running ringio\.EventLoop"):
        ringio.Watcher(loop=True)
    closed = ringio.new_event_loop()
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        ringio.Watcher(loop=closed)
    # a loop whose ring belongs to another thread
    loop = ringio.new_event_loop()
    try:
        t = threading.Thread(target=lambda: loop.run_until_complete(asyncio.sleep(0)))
        t.start()
        t.join(5)
        with pytest.raises(RuntimeError, match="another thread"):
            ringio.Watcher(loop=loop)
    finally:
        loop.close()


def test_loop_moved_to_another_thread(listener) -> None:
    """The loop runs in another thread (its selector retires the ring and makes a
    new one there): the Watcher stays on the ring it shares, refuses that thread,
    and still closes cleanly from its own."""
    loop = ringio.new_event_loop()
    try:
        w = ringio.Watcher(loop=loop)
        c, s = tcp_pair(listener)
        w.read("r", s)
        loop.run_until_complete(asyncio.sleep(0.01))  # in flight on the first ring
        first = loop._loop_ring.ring  # type: ignore[attr-defined]
        errors: list[BaseException] = []

        def elsewhere() -> None:
            async def main() -> None:
                try:
                    await w.wait_io_async()
                except RuntimeError as exc:
                    errors.append(exc)

            loop.run_until_complete(main())

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join(10)
        assert loop._loop_ring.ring is not first  # type: ignore[attr-defined]
        assert errors and "thread" in str(errors[0])
        c.sendall(b"late")  # still served on the first ring, from this thread
        got = w.wait_io(5)
        assert [bytes(r.buffer) for r in got] == [b"late"]
        w.read("pending", s)
        w.close()
        (r,) = w.wait_io()
        assert isinstance(r.error, ringio.WatcherClosedError)
        c.close()
        s.close()
    finally:
        loop.close()
