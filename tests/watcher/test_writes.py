"""Stream writes queued on one connection: each completes with its own result, in
order, the peer receives the bytes in order; a deadline fails only its own write;
free() with sends in flight."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from wutil import collect, tcp_pair

import ringio


def _reader(sock: socket.socket, n: int) -> tuple[threading.Thread, bytearray]:
    """A thread reading `n` bytes from `sock` into the returned buffer."""
    got = bytearray()

    def run() -> None:
        sock.settimeout(20)
        while len(got) < n:
            b = sock.recv(1 << 20)
            if not b:
                break
            got.extend(b)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def test_queued_writes_complete_in_order_with_their_own_counts(
    watcher: ringio.Watcher, listener
) -> None:
    c, s = tcp_pair(listener)
    sizes = [1, 5000, 0, 3, 1 << 20, 70_000, 7, 3 << 20, 1, 2048, 2047]
    datas: list[bytes | bytearray | memoryview] = [
        bytes([65 + i % 26]) * n for i, n in enumerate(sizes)
    ]
    datas[3] = bytearray(datas[3])
    datas[5] = memoryview(datas[5])
    for i, d in enumerate(datas):
        watcher.write(i, s, d)
    total = sum(sizes)
    t, got = _reader(c, total)
    rs = collect(watcher, len(datas), timeout=20)
    assert [r.context for r in rs] == list(range(len(datas)))
    assert [(r.error, r.size) for r in rs] == [(None, n) for n in sizes]
    t.join(20)
    assert bytes(got) == b"".join(bytes(d) for d in datas)


def test_hundreds_of_queued_writes_sent_in_short_pieces(watcher: ringio.Watcher, listener) -> None:
    """More writes than one send covers, with a small send buffer: sends stop in
    the middle of requests and across them; every count and byte is still exact."""
    c, s = tcp_pair(listener)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sizes = [(i * 7919) % 9000 for i in range(300)]  # 0 included
    datas = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    for i, d in enumerate(datas):
        watcher.write(i, s, d)
    t, got = _reader(c, sum(sizes))
    rs = collect(watcher, len(datas), timeout=20)
    assert [(r.context, r.error, r.size) for r in rs] == [(i, None, n) for i, n in enumerate(sizes)]
    t.join(20)
    assert bytes(got) == b"".join(datas)


@pytest.mark.parametrize("behind", ["in_the_same_send", "queued_behind_a_send"])
def test_a_write_whose_deadline_passes_behind_a_slow_one_fails_alone(
    watcher: ringio.Watcher, listener, behind: str
) -> None:
    c, s = tcp_pair(listener)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    slow = b"s" * (4 << 20)  # the peer does not read yet: it cannot finish
    watcher.write("slow", s, slow)
    if behind == "queued_behind_a_send":
        watcher.wait_io(0.05)  # the slow write's first send came back short
    t0 = time.monotonic()
    watcher.write_timeout("late", s, b"l" * 100, t0 + 0.3)
    watcher.write("after", s, b"a" * 100)
    (r,) = collect(watcher, 1, timeout=5)
    assert r.context == "late" and isinstance(r.error, TimeoutError), r
    assert r.size == 0
    assert 0.25 <= time.monotonic() - t0 < 3
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)  # no longer slow
    t, got = _reader(c, len(slow) + 100)
    rs = collect(watcher, 2, timeout=20)
    assert [(r.context, r.error, r.size) for r in rs] == [
        ("slow", None, len(slow)),
        ("after", None, 100),
    ]
    t.join(20)
    assert len(got) == len(slow) + 100
    assert got[: len(slow)] == slow and got[len(slow) :] == b"a" * 100


def test_free_with_sends_in_flight_and_queued(watcher: ringio.Watcher, listener) -> None:
    c, s = tcp_pair(listener)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = b"b" * (4 << 20)
    watcher.write("big", s, big)
    watcher.write("covered", s, b"c" * 10)
    watcher.wait_io(0.05)  # now one send covers the rest of big and "covered"
    watcher.write_timeout("queued", s, b"q" * 10, time.monotonic() + 30)
    watcher.free(s)
    assert watcher.connections == 0
    # A connection registered meanwhile is a new one and works.
    c2, s2 = tcp_pair(listener)
    watcher.write("other", s2, b"hello")
    rs = {r.context: r for r in collect(watcher, 4, timeout=5)}
    assert rs["other"].error is None and rs["other"].size == 5
    c2.settimeout(5)
    assert c2.recv(10) == b"hello"
    for ctx in ("big", "covered", "queued"):
        assert isinstance(rs[ctx].error, ringio.ConnFreedError), rs[ctx]
    assert 0 < rs["big"].size < len(big)
    assert rs["covered"].size == 0 and rs["queued"].size == 0
    assert watcher.pending == 0
    c.settimeout(5)
    while c.recv(1 << 20):  # the peer sees what was sent, then the close
        pass
