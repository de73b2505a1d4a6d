"""An unclosed ringio loop is garbage-collected as asyncio's is (its `__del__` warns
"unclosed event loop" and closes it), also with transports whose ops are still in
the kernel: a send the peer never makes room for, armed multishot receives (into
provided buffers or into `bytes`-backed ones). The ring's fd and the sockets' fds
are released, and nothing the kernel may still use is freed under it."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import threading
import warnings
import weakref

import pytest
from streamdata import pattern as _pattern

import ringio

HOST = "127.0.0.1"
ROUNDS = 5

pytestmark = pytest.mark.timeout(120)


def _fds() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the directory's own fd, closed meanwhile
            pass
    return out


def _new_fds(before: dict[int, str]) -> dict[int, str]:
    return {fd: t for fd, t in _fds().items() if before.get(fd) != t}


class _Server(asyncio.Protocol):
    """Accepts; optionally stops reading (its peer's sends then stay in flight)."""

    paused = False

    def connection_made(self, transport):
        self.transport = transport
        if self.paused:
            transport.pause_reading()


class _Paused(_Server):
    paused = True


class _Echo(_Server):
    def data_received(self, data):
        self.transport.write(data)


class _Sink(asyncio.Protocol):
    def __init__(self) -> None:
        self.received = 0

    def data_received(self, data):
        self.received += len(data)


class _BufferedSink(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.buf = bytearray(64 * 1024)
        self.received = 0

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, nbytes):
        self.received += nbytes


def _run(loop, coro, timeout: float = 10.0):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


async def _connect(loop, server_proto, client_proto):
    server = await loop.create_server(server_proto, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    tr, pr = await loop.create_connection(client_proto, HOST, port)
    await asyncio.sleep(0.02)  # accepted, connection_made run, receives armed
    return server, tr, pr


async def _stuck_send(tr) -> None:
    """Writes until a send stays in the kernel (the peer does not read)."""
    sock = tr.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    # Large bytes are sent from the object itself, a bytearray is copied into
    # the core's chunks: both kinds of memory the kernel reads.
    tr.write(_pattern(1 << 20))
    tr.write(bytearray(_pattern(256 * 1024)))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if tr.get_write_buffer_size() > 0:
            break
    await asyncio.sleep(0.05)  # a few more selects: the send is parked in the kernel
    assert tr.get_write_buffer_size() > 0


def _setup(loop_factory, scenario: str):
    """Runs `scenario` on a new loop, left unclosed; returns weak references to the
    loop and its selector (no strong reference survives this call)."""
    loop = loop_factory()

    async def main():
        if scenario == "open":
            await _connect(loop, _Server, _Sink)
        elif scenario == "send":
            _, tr, _ = await _connect(loop, _Paused, _Sink)
            await _stuck_send(tr)
        elif scenario == "buffered":
            _, tr, pr = await _connect(loop, _Echo, _BufferedSink)
            tr.write(b"x" * 100_000)
            while pr.received < 100_000:
                await asyncio.sleep(0.005)
        elif scenario == "big":
            # Large messages move the receiving transport to the large-receive
            # path: its readiness poll is then armed in the kernel.
            _, tr, pr = await _connect(loop, _Echo, _Sink)
            core = loop._loop_ring.core
            total = 0
            for _ in range(200):
                tr.write(b"y" * (256 * 1024))
                total += 256 * 1024
                while pr.received < total:
                    await asyncio.sleep(0.001)
                if core.big_receives:
                    break
            assert core.big_receives
        else:  # pragma: no cover
            raise AssertionError(scenario)

    _run(loop, main())
    return weakref.ref(loop), weakref.ref(loop._selector)


def _collect(loop_factory, scenario: str) -> list[str]:
    """Leaves a loop unclosed after `scenario`, drops it, collects; checks that
    the loop went away with its fds. Returns the warnings the collection emitted."""
    before = _fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wloop, wsel = _setup(loop_factory, scenario)
        gc.collect()
    messages = [f"{w.category.__name__}: {w.message}" for w in caught]
    # A recorded warning's `source` resurrects the loop until the record goes.
    del caught
    gc.collect()
    assert wloop() is None, "the unclosed loop was not collected"
    assert wsel() is None, "its selector was not collected"
    leaked = _new_fds(before)
    assert not leaked, f"fds left open: {leaked}"
    return messages


@pytest.mark.parametrize("scenario", ["open", "send", "buffered", "big"])
def test_unclosed_loop_with_transports_is_collected(scenario):
    for _ in range(ROUNDS):
        messages = _collect(ringio.EventLoop, scenario)
        assert any(
            m.startswith("ResourceWarning: unclosed event loop <EventLoop") for m in messages
        ), messages
        assert any("unclosed transport <RingSocketTransport" in m for m in messages), messages


def test_asyncio_loop_collected_the_same_way():
    """The reference: asyncio's own loop in the same situation."""
    messages = _collect(asyncio.SelectorEventLoop, "send")
    assert any(m.startswith("ResourceWarning: unclosed event loop") for m in messages)


class _LoopNeverClosed(ringio.EventLoop):
    """A loop whose `__del__` does not close it: the collection then clears and
    frees the core with its transports' ops still in the kernel (a live ring)."""

    def __del__(self):
        pass


@pytest.mark.parametrize("scenario", ["send", "big"])
def test_collected_without_close_with_ops_in_flight(scenario):
    # No close(): the core is cleared and dropped while its ring is live, so a
    # send's chunks are leaked rather than freed; the ring, dropped after the
    # core, then cancels and waits for everything before releasing its fd.
    for _ in range(ROUNDS):
        messages = _collect(_LoopNeverClosed, scenario)
        assert not any("unclosed event loop" in m for m in messages), messages


def test_peer_reads_only_what_was_sent_after_collection():
    """What the peer reads after the loop was collected with a send stuck in the
    kernel is a prefix of what was written: the send is cancelled before its
    memory goes, never sent from freed memory."""
    payload = _pattern(2 << 20)
    for factory in (ringio.EventLoop, _LoopNeverClosed):
        before = _fds()
        listener = socket.create_server((HOST, 0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            wloop, peer = _stuck_sender(factory, listener, payload)
            gc.collect()
        assert wloop() is None
        peer.settimeout(10)
        got = bytearray()
        try:
            while chunk := peer.recv(1 << 16):
                got += chunk
        except ConnectionResetError:
            pass
        peer.close()
        listener.close()
        assert 0 < len(got) < len(payload)
        assert got == payload[: len(got)], "the peer received bytes that were never written"
        assert not _new_fds(before)


def _stuck_sender(factory, listener, payload):
    """A loop (left unclosed) whose transport has a send stuck towards a plain
    socket that does not read; returns a weak reference to it and that socket."""
    loop = factory()
    port = listener.getsockname()[1]

    async def main():
        tr, _ = await loop.create_connection(_Sink, HOST, port)
        peer, _ = listener.accept()  # already in the backlog: does not block
        tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        tr.write(bytearray(payload[: 1 << 20]))  # copied into the core's chunks
        tr.write(payload[1 << 20 :])  # sent from the bytes object
        for _ in range(100):
            await asyncio.sleep(0.01)
            if tr.get_write_buffer_size() > 0:
                break
        await asyncio.sleep(0.05)
        assert tr.get_write_buffer_size() > 0
        return peer

    peer = _run(loop, main())
    return weakref.ref(loop), peer


def test_collected_in_another_thread():
    """The loop ran in a thread; the GC collects it in another one, where its
    SINGLE_ISSUER ring cannot be closed (the selector keeps it alive): the send
    still in flight on it keeps its memory, and nothing crashes."""
    refs = []

    def worker():
        refs.append(_setup(ringio.EventLoop, "send"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = threading.Thread(target=worker)
        t.start()
        t.join(30)
        assert not t.is_alive()
        gc.collect()
    messages = [f"{w.category.__name__}: {w.message}" for w in caught]
    del caught
    gc.collect()
    wloop, wsel = refs[0]
    assert wloop() is None and wsel() is None
    assert any(m.startswith("ResourceWarning: unclosed event loop") for m in messages)
