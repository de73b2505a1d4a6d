"""Ring buffers written straight back (zero-copy echo) and read-ahead held in the ring:
byte-exact echo, buffers pinned by pending writes, recycling that never starves,
free/close with such writes pending."""

from __future__ import annotations

import ctypes
import gc
import hashlib
import os
import socket
import time

import pytest
from wutil import collect, tcp_pair

import ringio
from ringio import OP_READ, OP_WRITE

MSG = 65536


def _nodelay(*socks: socket.socket) -> None:
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _settle(w: ringio.Watcher) -> None:
    """A few rounds: cancellations complete, handed-out buffers are recycled."""
    for _ in range(5):
        w.wait_io(0.02)


def _pool(w: ringio.Watcher) -> tuple[int, int]:
    """(free buffers: in the ring or spare, nbufs)."""
    _defer, _mshot, nbufs, free = w._core.info()
    return free, nbufs


@pytest.mark.parametrize("server", ["own-buffer", "ring-buffer"])
def test_echo_64k_messages_byte_exact(make_watcher, listener, server: str) -> None:
    """The echo benchmark's shape: the client keeps one 64 KiB write and one read
    submitted; the server echoes from its own buffer (read -> write -> read) or
    writes each ring buffer straight back. Every byte comes back, in order."""
    messages = 300
    with make_watcher(bufsize=MSG, nbufs=16) as w:
        c, s = tcp_pair(listener)
        _nodelay(c, s)
        payloads = [os.urandom(MSG) for _ in range(8)]
        sent_digest, got_digest = hashlib.sha256(), hashlib.sha256()
        rx = bytearray(MSG)
        own = bytearray(MSG)
        w.read("srv", s, own if server == "own-buffer" else None)
        tx = payloads[0]
        sent_digest.update(tx)
        w.write("tx", c, tx)
        w.read("rx", c, rx)
        written, received, k = 0, 0, 1
        target = messages * MSG
        end = time.monotonic() + 60
        while received < target:
            assert time.monotonic() < end, f"stalled at {received} of {target} bytes"
            for r in w.wait_io(1.0):
                assert r.error is None, r
                if r.context == "srv":
                    if server == "own-buffer":
                        w.write("srv-tx", s, memoryview(own)[: r.size])
                    else:
                        assert r.is_swap_buffer and len(r.buffer) == r.size
                        w.write("srv-tx", s, r.buffer)
                        w.read("srv", s)
                elif r.context == "srv-tx":
                    if server == "own-buffer":
                        w.read("srv", s, own)
                elif r.context == "tx":
                    written += r.size
                    if written < target:
                        tx = payloads[k % len(payloads)]
                        k += 1
                        sent_digest.update(tx)
                        w.write("tx", c, tx)
                else:
                    got_digest.update(rx[: r.size])
                    received += r.size
                    if received < target:
                        w.read("rx", c, rx)
        assert received == target
        assert got_digest.digest() == sent_digest.digest()


def _fill_until_blocked(w: ringio.Watcher, sock: socket.socket) -> bytes:
    """Queues writes on `sock` until one stays pending (the peer does not read):
    returns every byte queued, in order."""
    block = os.urandom(1 << 20)
    queued = []
    for _ in range(256):  # bounded: a few MB fill any loopback socket's buffers
        w.write("fill", sock, block)
        queued.append(block)
        if not w.wait_io(0.02):
            return b"".join(queued)
        # the write completed: keep going until one stays pending
    pytest.fail("writes never blocked")


def test_write_of_a_ring_buffer_survives_dropping_the_result(make_watcher, listener) -> None:
    """A pending write of a RingBuffer keeps that ring buffer out of the ring until
    its CQE, even after the result (and every Python reference) is gone and the
    ring has been recycled many times over with other data."""
    with make_watcher(bufsize=4096, nbufs=4) as w:
        a_client, a_server = tcp_pair(listener)  # data arrives on a_server
        b_client, b_server = tcp_pair(listener)  # the echo goes out on b_server
        filler = _fill_until_blocked(w, b_server)  # b_client does not read yet
        secret = os.urandom(4000)
        a_client.sendall(secret)
        w.read("in", a_server)
        (r,) = collect(w, 1, on_result=None)
        assert r.is_swap_buffer and bytes(r.buffer) == secret
        w.write("out", b_server, r.buffer)  # queued behind the blocked fill
        del r
        gc.collect()
        # Recycle the ring many times over with other bytes.
        other = b"z" * 4000
        for _ in range(20):
            a_client.sendall(other)
            got = 0
            while got < len(other):
                w.read("more", a_server)
                for x in collect(w, 1):
                    assert bytes(x.buffer) == b"z" * x.size
                    got += x.size
        # Now let b_client drain: the fill, then the secret, byte-exact.
        expect = filler + secret
        got = bytearray()
        b_client.settimeout(10)
        done = []
        while len(got) < len(expect):
            got += b_client.recv(1 << 20)
            done += [x.context for x in w.wait_io(0)]
        assert bytes(got) == expect
        deadline = time.monotonic() + 10
        while "out" not in done:
            assert time.monotonic() < deadline
            done += [x.context for x in w.wait_io(0.1)]


def test_read_ahead_held_in_ring_is_exact_and_never_starves(make_watcher, listener) -> None:
    """One connection streams while no read is pending: its read-ahead holds ring
    buffers (at most half the ring), then copies, then stops the kernel reading.
    Meanwhile 30 other connections keep receiving through the other half; finally
    the stream is read back byte-exact, in order."""
    with make_watcher(bufsize=4096, nbufs=8) as w:
        hog_client, hog = tcp_pair(listener)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        first = b"start"
        hog_client.sendall(first)
        w.read("hog", hog)
        (r,) = collect(w, 1)
        assert bytes(r.buffer) == first
        # The multishot receive stays armed: everything sent now is read-ahead.
        stream = os.urandom(600_000)
        hog_client.setblocking(False)
        pushed = 0
        for _ in range(2000):  # bounded
            try:
                pushed += hog_client.send(stream[pushed : pushed + 65536])
            except BlockingIOError:
                break
            w.wait_io(0)
            if pushed == len(stream):
                break
        available, nbufs = _pool(w)
        assert available >= nbufs // 2 - 1  # read-ahead never takes more than half

        pairs = [tcp_pair(listener) for _ in range(30)]
        for i, (_, s) in enumerate(pairs):
            w.read(("p", i), s)
        for rounds in range(3):
            for i, (c, _) in enumerate(pairs):
                c.sendall(b"%02d:%d" % (i, rounds))
            got = {}

            def keep(r: ringio.OpResult, got: dict = got) -> None:
                assert r.error is None, r
                got[r.context[1]] = bytes(r.buffer)

            collect(w, 30, timeout=20, on_result=keep)
            assert got == {i: b"%02d:%d" % (i, rounds) for i in range(30)}
            for i, (_, s) in enumerate(pairs):
                w.read(("p", i), s)

        # Drain the hog: first what was pushed, then the rest of the stream.
        hog_client.setblocking(True)
        received = bytearray()
        end = time.monotonic() + 30
        while len(received) < len(stream):
            assert time.monotonic() < end
            if pushed < len(stream):
                hog_client.setblocking(False)
                try:
                    pushed += hog_client.send(stream[pushed : pushed + 65536])
                except BlockingIOError:
                    pass
            if len(received) % 3:
                w.read("hog", hog, bytearray(10_000))  # copies out of held buffers
            else:
                w.read("hog", hog)  # held buffers handed out as they are
            for r in collect(w, 1):
                if r.context == "hog":
                    assert r.error is None, r
                    received += memoryview(r.buffer)[: r.size]
        assert bytes(received) == stream
        for c, s in pairs:
            w.free(s)
            c.close()
        w.free(hog)
        hog_client.close()
        _settle(w)
        assert _pool(w)[0] == _pool(w)[1]  # every buffer back in the ring


def test_free_with_ring_buffer_write_pending_and_read_ahead_held(make_watcher, listener) -> None:
    """free() with a write of a ring buffer pending and read-ahead held: the write
    fails with ConnFreedError, every ring buffer goes back, the Watcher carries on."""
    with make_watcher(bufsize=4096, nbufs=8) as w:
        c, s = tcp_pair(listener)
        c2, s2 = tcp_pair(listener)
        _fill_until_blocked(w, s2)  # c2 does not read: writes on s2 stay pending
        c.sendall(b"x" * 3000)
        w.read("in", s)
        (r,) = collect(w, 1)
        w.write("out", s2, r.buffer)  # pending behind the fill, pins the buffer
        del r
        c.sendall(os.urandom(12_000))  # read-ahead on s (no read pending)
        for _ in range(20):
            w.wait_io(0.01)
        w.free(s2)
        w.free(s)
        results = collect(w, 2)
        errors = {(x.context, type(x.error)) for x in results}
        assert ("out", ringio.ConnFreedError) in errors
        _settle(w)
        assert _pool(w)[0] == _pool(w)[1]
        # still working
        c3, s3 = tcp_pair(listener)
        c3.sendall(b"after")
        w.read("after", s3)
        (r,) = collect(w, 1)
        assert bytes(r.buffer) == b"after" and r.operation == OP_READ
        for sock in (c, c2, c3):
            sock.close()


def test_close_with_ring_buffer_writes_pending(make_watcher, listener) -> None:
    w = make_watcher(bufsize=4096, nbufs=4)
    c, s = tcp_pair(listener)
    c2, s2 = tcp_pair(listener)
    _fill_until_blocked(w, s2)
    c.sendall(b"y" * 2000)
    w.read("in", s)
    (r,) = collect(w, 1)
    w.write("out", s2, r.buffer)
    view = memoryview(r.buffer)  # an export still held after close
    c.sendall(b"more" * 1000)  # read-ahead held at close
    w.wait_io(0.05)
    w.close()
    pending = w.wait_io(0)
    assert any(
        x.context == "out"
        and x.operation == OP_WRITE
        and isinstance(x.error, ringio.WatcherClosedError)
        for x in pending
    )
    assert bytes(view[:4]) == b"yyyy"  # the memory stays mapped while exported
    view.release()
    for sock in (c, c2):
        sock.close()


def test_read_ahead_is_handed_out_without_a_copy(make_watcher, listener) -> None:
    """Data a multishot receive delivered while no read was pending stays in its ring
    buffers: later reads without a buffer get those RingBuffers (is_swap_buffer),
    one per buffer, in order; none of it is copied into a bytes object."""
    with make_watcher(bufsize=4096, nbufs=16) as w:
        c, s = tcp_pair(listener)
        c.sendall(b"first")
        w.read("r", s)
        (r,) = collect(w, 1)
        assert bytes(r.buffer) == b"first"
        data = os.urandom(3 * 4096)
        c.sendall(data)
        end = time.monotonic() + 10
        while _pool(w)[0] > 16 - 3 and time.monotonic() < end:
            w.wait_io(0.01)  # until the kernel has filled three buffers (held)
        got = b""
        while len(got) < len(data):
            w.read("r", s)
            (r,) = collect(w, 1)
            assert r.is_swap_buffer and isinstance(r.buffer, ringio.RingBuffer)
            assert 0 < r.size <= 4096
            got += bytes(r.buffer)
        assert got == data


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


def _address(obj: object) -> int:
    """The address of a buffer-protocol object's memory."""
    view = _PyBuffer()
    ctypes.pythonapi.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.c_void_p]
    if ctypes.pythonapi.PyObject_GetBuffer(obj, ctypes.byref(view), 0) != 0:
        raise BufferError("no buffer")
    try:
        return int(view.buf)
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


def test_recycling_reuses_a_small_set_of_buffers(make_watcher, listener) -> None:
    """Buffers go back to the ring most recently returned first, and only as many are
    provided as the traffic needed: 300 messages received one at a time through a
    ring of 256 buffers use a handful of them (still in the CPU caches), not all
    256 in turn. Under a burst the ring provides more (no connection starves)."""
    with make_watcher(bufsize=4096, nbufs=256) as w:
        c, s = tcp_pair(listener)
        seen = set()
        for i in range(300):
            msg = b"%04d" % i
            c.sendall(msg)
            w.read("r", s)
            (r,) = collect(w, 1)
            assert bytes(r.buffer) == msg
            seen.add(_address(r.buffer))
        assert len(seen) <= 16, len(seen)
        # a burst: 100 connections at once, every one completes
        pairs = [tcp_pair(listener) for _ in range(100)]
        for i, (_, srv) in enumerate(pairs):
            w.read(i, srv)
        w.wait_io(0)
        for i, (cli, _) in enumerate(pairs):
            cli.sendall(b"%03d" % i)
        got = {}

        def keep(r: ringio.OpResult) -> None:
            assert r.error is None, r
            got[r.context] = bytes(r.buffer)

        collect(w, 100, timeout=20, on_result=keep)
        assert got == {i: b"%03d" % i for i in range(100)}
