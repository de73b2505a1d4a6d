"""Echo, read_full, EOF, half-close, resets, free, close: the Watcher's contract."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import time

import pytest
from wutil import collect, tcp_pair

import ringio
from ringio import OP_ACCEPT, OP_CONNECT, OP_READ, OP_WRITE


def test_accept_connect_echo_tiny_messages(watcher: ringio.Watcher, listener) -> None:
    """An echo server and 20 clients in one Watcher, 50 tiny messages each."""
    w = watcher
    nclients, rounds = 20, 50
    clients = [socket.socket() for _ in range(nclients)]
    for _ in range(nclients):
        w.accept("accept", listener)
    for i, c in enumerate(clients):
        w.connect(("conn", i), c, listener.getsockname())
        w.write(("tx", i, 0), c, f"{i}:0".encode())
    replies = {i: [] for i in range(nclients)}
    servers: list[socket.socket] = []
    done = 0
    end = time.monotonic() + 20
    while done < nclients:
        assert time.monotonic() < end, "echo did not finish"
        for r in w.wait_io(1.0):
            assert r.error is None, r
            ctx = r.context
            if r.operation == OP_ACCEPT:
                servers.append(r.conn)
                w.read("srv", r.conn)
            elif ctx == "srv":
                assert r.operation == OP_READ and r.is_swap_buffer
                # the ring buffer is pinned while the write holds it: zero-copy echo
                w.write("srv-tx", r.conn, r.buffer)
                w.read("srv", r.conn)
            elif ctx == "srv-tx":
                assert r.operation == OP_WRITE
            elif ctx[0] == "conn":
                assert r.operation == OP_CONNECT
                w.read(("rx", ctx[1]), r.conn, bytearray(64))
            elif ctx[0] == "tx":
                assert r.size == len(f"{ctx[1]}:{ctx[2]}")
            elif ctx[0] == "rx":
                i = ctx[1]
                replies[i].append(bytes(r.buffer[: r.size]))
                k = len(replies[i])
                if k == rounds:
                    done += 1
                    continue
                w.write(("tx", i, k), r.conn, f"{i}:{k}".encode())
                w.read(("rx", i), r.conn, bytearray(64))
    for i in range(nclients):
        assert replies[i] == [f"{i}:{k}".encode() for k in range(rounds)]
    for s in servers + clients:
        w.free(s)


def test_echo_100_mb(watcher: ringio.Watcher, listener) -> None:
    """100 MB through a Watcher echo server (buffer-ring reads, writes of the ring
    buffers) and a Watcher client (64 KiB writes, read_full into its own buffer)."""
    w = watcher
    total, chunk = 100 * 1024 * 1024, 1024 * 1024
    c, s = tcp_pair(listener)
    payload = os.urandom(chunk)
    sent = received = 0
    digest_tx, digest_rx = hashlib.sha256(), hashlib.sha256()
    rx = bytearray(chunk)
    inflight_writes = 0
    w.read("srv", s)
    w.read_full("rx", c, rx)
    end = time.monotonic() + 40
    while received < total:
        assert time.monotonic() < end, f"stalled at {received} of {total} bytes"
        while sent < total and inflight_writes < 2:
            block = payload[sent % 7 :] + payload[: sent % 7]  # vary the content
            digest_tx.update(block)
            w.write("tx", c, block)
            sent += len(block)
            inflight_writes += 1
        for r in w.wait_io(1.0):
            assert r.error is None, r
            if r.context == "srv":
                w.write("srv-tx", s, r.buffer)
                w.read("srv", s)
            elif r.context == "tx":
                assert r.size == chunk
                inflight_writes -= 1
            elif r.context == "rx":
                assert r.size == chunk
                digest_rx.update(rx)
                received += r.size
                if received < total:
                    rx = bytearray(chunk)
                    w.read_full("rx", c, rx)
    assert digest_rx.digest() == digest_tx.digest()


def test_read_full_waits_for_every_byte(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    buf = bytearray(10_000)
    watcher.read_full("full", s, buf)
    for part in (b"a" * 10, b"b" * 3000):
        c.sendall(part)
        time.sleep(0.01)
        assert watcher.wait_io(0.05) == []  # not full yet
    c.sendall(b"c" * 6990 + b"d" * 100)  # the d's go past the buffer: left for the next read
    (r,) = collect(watcher, 1)
    assert r.error is None and r.size == 10_000 and r.buffer is buf
    assert buf == b"a" * 10 + b"b" * 3000 + b"c" * 6990
    watcher.read("rest", s, bytearray(1000))
    (r,) = collect(watcher, 1)
    assert bytes(r.buffer[: r.size]) == b"d" * 100


def test_read_full_eof_reports_partial_size(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    c.sendall(b"x" * 123)
    c.close()
    watcher.read_full("full", s, bytearray(1000))
    (r,) = collect(watcher, 1)
    assert isinstance(r.error, EOFError) and r.size == 123


def test_eof_size_zero(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    watcher.read("a", s)
    watcher.read("b", s, bytearray(10))
    c.close()
    rs = collect(watcher, 2)
    for r in rs:
        assert isinstance(r.error, EOFError) and r.size == 0, r


def test_half_close(watcher: ringio.Watcher, listener) -> None:
    """The peer shuts down its write side: we see EOF, and can still write to it."""
    c, s = tcp_pair(listener)
    c.sendall(b"last words")
    c.shutdown(socket.SHUT_WR)
    watcher.read("r1", s)
    (r,) = collect(watcher, 1)
    assert r.error is None and bytes(r.buffer) == b"last words"
    watcher.read("r2", s)
    (r,) = collect(watcher, 1)
    assert isinstance(r.error, EOFError)
    watcher.write("w", s, b"reply after half-close")
    (r,) = collect(watcher, 1)
    assert r.error is None and r.size == 22
    c.settimeout(5)
    assert c.recv(100) == b"reply after half-close"


def test_peer_reset(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    watcher.read("r", s, bytearray(100))
    time.sleep(0.01)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # RST
    (r,) = collect(watcher, 1)
    assert isinstance(r.error, ConnectionResetError), r


def test_write_to_closed_peer(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    c.close()
    time.sleep(0.01)
    data = b"z" * (1 << 20)
    errors = []
    for i in range(20):  # bounded: the first write may still be accepted
        watcher.write(i, s, data)
    for r in collect(watcher, 20):
        if r.error is not None:
            errors.append(r.error)
    assert errors and all(isinstance(e, BrokenPipeError | ConnectionResetError) for e in errors)


def test_free_while_pending(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    watcher.read("in-kernel", s, bytearray(10))
    watcher.read("queued", s)
    watcher.read_timeout("queued-deadline", s, None, time.monotonic() + 30)
    watcher.wait_io(0)  # the head read is now in the kernel
    watcher.free(s)
    rs = collect(watcher, 3, timeout=5)
    assert {r.context for r in rs} == {"in-kernel", "queued", "queued-deadline"}
    assert all(isinstance(r.error, ringio.ConnFreedError) for r in rs), rs
    assert s.fileno() == -1
    assert watcher.connections == 0
    c.settimeout(5)
    assert c.recv(10) == b""  # the peer sees the close
    assert watcher.pending == 0


def test_close_with_ops_pending(make_watcher, listener) -> None:
    w = make_watcher()
    pairs = [tcp_pair(listener) for _ in range(5)]
    for i, (_, s) in enumerate(pairs):
        w.read(("r", i), s)
        w.read_timeout(("t", i), s, bytearray(10), time.monotonic() + 60)
        w.write(("w", i), s, b"x" * 10)
    w.accept("acc", listener)
    w.wait_io(0.05)
    start = time.monotonic()
    w.close()
    assert time.monotonic() - start < 5
    rest = w.wait_io()
    assert {r.context for r in rest} >= {("r", i) for i in range(5)} | {"acc"}
    for r in rest:
        if r.context[0] in ("r", "t") or r.context == "acc":
            assert isinstance(r.error, ringio.WatcherClosedError), r
    with pytest.raises(ringio.WatcherClosedError):
        w.wait_io(0)
    with pytest.raises(ringio.WatcherClosedError):
        w.read("late", pairs[0][1])
    w.close()  # idempotent


def test_forgotten_socket_is_freed_when_collected(watcher: ringio.Watcher, listener) -> None:
    import gc

    c, s = tcp_pair(listener)
    watcher.write("w", s, b"bye")
    (r,) = collect(watcher, 1)
    assert r.error is None
    assert watcher.connections == 1
    del r, s
    gc.collect()
    watcher.wait_io(0)  # the owner thread frees what the GC reported
    assert watcher.connections == 0
    c.settimeout(5)
    assert c.recv(10) == b"bye"
    assert c.recv(10) == b""  # our dup was closed too


def test_pending_op_keeps_socket_alive(watcher: ringio.Watcher, listener) -> None:
    """A socket only the Watcher references (pending read) is not freed: the
    result hands it back."""
    import gc

    c, s = tcp_pair(listener)
    watcher.read("r", s)
    del s
    gc.collect()
    watcher.wait_io(0.01)
    c.sendall(b"still here")
    (r,) = collect(watcher, 1)
    assert r.error is None and bytes(r.buffer) == b"still here"
    assert isinstance(r.conn, socket.socket)


def test_a_result_kept_in_its_own_context_is_collected(watcher: ringio.Watcher, listener) -> None:
    """A result stored in the object it carries as context (context -> result ->
    context) is a cycle the GC can see through, so it is collected."""
    import gc
    import weakref

    class Ctx:
        pass

    c, s = tcp_pair(listener)
    with c, s:
        ctx = Ctx()
        alive = weakref.ref(ctx)
        watcher.write(ctx, c, b"x")
        (r,) = collect(watcher, 1)
        assert r.context is ctx and r.error is None
        ctx.result = r
        del ctx, r
        gc.collect()
        assert alive() is None


def _a_new_ring_is_registered() -> bool:
    r = ringio.uring.Ring(8, single_issuer=True, eventfd=False)
    try:
        if not r.setup["defer_taskrun"]:
            pytest.skip("kernel without DEFER_TASKRUN")
        return r.setup["registered_fd"]
    finally:
        r.close()


def test_watchers_with_rings_of_their_own_register_them_and_give_them_back(listener) -> None:
    # A thread's table of registered rings has 16 entries: 16 Watchers take what
    # is left of it, and give it back when closed.
    assert _a_new_ring_is_registered()
    watchers = [ringio.Watcher(loop=False) for _ in range(16)]
    try:
        assert not _a_new_ring_is_registered()
        for k, w in enumerate(watchers):  # each still enters its own ring
            c, s = tcp_pair(listener)
            w.write(("tx", k), c, b"%02d" % k)
            w.read(("rx", k), s, bytearray(2))
            got = {r.context[0]: r for r in collect(w, 2)}
            assert got["tx"].size == 2 and bytes(got["rx"].buffer[:2]) == b"%02d" % k
            w.free(c)
            w.free(s)
            c.close()
            s.close()
    finally:
        for w in watchers:
            w.close()
    assert _a_new_ring_is_registered()
