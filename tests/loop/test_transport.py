"""The ring stream transport: a multishot receive into provided buffers
and queued sends on the loop's ring, with asyncio's transport semantics."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import gc
import os
import socket
import subprocess
import sys
import tempfile
import termios
import warnings

import pytest
from streamdata import pattern as _pattern

import ringio
from ringio.loop._transport import RingSocketTransport

HOST = "127.0.0.1"


class Recorder(asyncio.Protocol):
    """Records every callback; `done` resolves at connection_lost."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.events: list[str] = []
        self.data = bytearray()
        self.done = self.loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.eof_result: bool | None = None
        self.lost_exc: BaseException | None = None
        self.on_data = None

    def connection_made(self, transport):
        self.events.append("made")
        self.transport = transport

    def data_received(self, data):
        assert isinstance(data, bytes)
        self.data += data
        if self.on_data is not None:
            self.on_data(data)

    def eof_received(self):
        self.events.append("eof")
        return self.eof_result

    def pause_writing(self):
        self.events.append(f"pause:{self.transport.get_write_buffer_size()}")

    def resume_writing(self):
        self.events.append(f"resume:{self.transport.get_write_buffer_size()}")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.lost_exc = exc
        if not self.done.done():
            self.done.set_result(exc)


async def _pair(loop, factory=None, *, client_sock_setup=None):
    """A ring transport on the server side of a TCP connection, and the raw client
    socket (blocking operations on it run in threads)."""
    proto_box: list = []

    def make():
        p = (factory or Recorder)()
        proto_box.append(p)
        return p

    srv = await loop.create_server(make, HOST, 0)
    port = srv.sockets[0].getsockname()[1]
    cli = socket.socket()
    if client_sock_setup is not None:
        client_sock_setup(cli)
    cli.setblocking(False)
    await loop.sock_connect(cli, (HOST, port))
    while not proto_box or proto_box[0].transport is None:
        await asyncio.sleep(0.001)
    srv.close()
    return proto_box[0], cli


async def _recv_exactly(loop, sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = await loop.sock_recv(sock, min(1 << 20, n - len(out)))
        if not chunk:
            break
        out += chunk
    return bytes(out)


async def _received_in_full(protos, data, aborted) -> None:
    """Waits until each Recorder not in `aborted` has received its whole message,
    and checks the bytes (none lost, reordered or duplicated)."""
    for p, d in zip(protos, data, strict=True):
        if p in aborted:
            continue
        while len(p.data) < len(d):
            await asyncio.sleep(0.005)
        assert bytes(p.data) == d


async def _recv_to_eof(loop, sock):
    out = bytearray()
    while True:
        chunk = await loop.sock_recv(sock, 1 << 20)
        if not chunk:
            return bytes(out)
        out += chunk


def test_transport_type_and_extra_info(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        assert isinstance(tr, RingSocketTransport)
        assert isinstance(tr, asyncio.Transport)
        assert tr.get_extra_info("peername") == cli.getsockname()
        assert tr.get_extra_info("sockname") == cli.getpeername()
        assert tr.get_extra_info("socket").fileno() == tr._sock_fd
        assert tr.get_extra_info("nope", 42) == 42
        assert tr.is_reading() and tr.can_write_eof() and not tr.is_closing()
        assert tr.get_protocol() is proto
        assert tr.get_write_buffer_size() == 0
        assert tr.get_write_buffer_limits() == (16 * 1024, 64 * 1024)
        # The fd belongs to the transport, as with asyncio's own transports.
        with pytest.raises(RuntimeError, match="is used by transport"):
            loop.add_reader(tr._sock_fd, lambda: None)
        assert "RingSocketTransport" in repr(tr)
        tr.close()
        assert tr.is_closing() and not tr.is_reading()
        await proto.done
        assert proto.events == ["made", "lost"] and proto.lost_exc is None
        cli.close()

    run(main())


def test_echo_protocol_and_streams(loop, run):
    class Echo(asyncio.Protocol):
        def connection_made(self, t):
            self.t = t

        def data_received(self, d):
            self.t.write(d)

    async def main():
        srv = await loop.create_server(Echo, HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(HOST, port)
        assert isinstance(w.transport, RingSocketTransport)
        for i in range(200):
            msg = b"m%d-" % i * (i % 7 + 1)
            w.write(msg)
            await w.drain()
            assert await r.readexactly(len(msg)) == msg
        big = _pattern(4 << 20)
        w.write(big)
        got = await r.readexactly(len(big))
        assert got == big
        # Many small writes coalesced, one large by reference, mixed buffer types.
        parts = [b"a" * 10, bytearray(b"b" * 3000), memoryview(b"c" * 5000), b"d" * 100000]
        for p in parts:
            w.write(p)
        w.writelines([b"e", b"f"])
        want = b"".join(bytes(p) for p in parts) + b"ef"
        assert await r.readexactly(len(want)) == want
        w.close()
        await w.wait_closed()
        srv.close()
        await srv.wait_closed()

    run(main())


def test_partial_writes_tiny_sndbuf(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        sock = tr.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        data = _pattern(1 << 20)
        # Writes of several size classes: the kernel accepts a little at a time.
        step = 65536 + 123
        for i in range(0, len(data), step):
            tr.write(data[i : i + step // 2])
            tr.write(bytearray(data[i + step // 2 : i + step]))
        # Over the high-water mark write() tries the socket at once (as asyncio):
        # the tiny send buffer took only a little.
        assert len(data) - 200_000 < tr.get_write_buffer_size() <= len(data)
        got = bytearray()
        sizes = set()
        while len(got) < len(data):
            got += await loop.sock_recv(cli, 4096)  # small reads
            sizes.add(tr.get_write_buffer_size())
        # The queue drained in many steps: the kernel took partial sends.
        assert len(sizes) > 10
        assert bytes(got) == data
        for _ in range(100):
            if tr.get_write_buffer_size() == 0:
                break
            await asyncio.sleep(0.01)
        assert tr.get_write_buffer_size() == 0
        tr.close()
        await proto.done
        cli.close()

    run(main())


def test_flow_control_water_marks(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        tr.set_write_buffer_limits(high=100_000, low=20_000)
        assert tr.get_write_buffer_limits() == (20_000, 100_000)
        chunk = b"z" * 30_000
        writes = 0
        while not any(e.startswith("pause") for e in proto.events):
            tr.write(chunk)
            writes += 1
            assert writes < 100
            # write() only queues: the water marks are judged once the kernel
            # has been handed the queue (a send in flight), i.e. after a loop turn.
            await asyncio.sleep(0)
        pause = [e for e in proto.events if e.startswith("pause")]
        assert len(pause) == 1 and int(pause[0].split(":")[1]) > 100_000
        tr.write(chunk)  # still paused: no second pause_writing
        total = (writes + 1) * len(chunk)
        got = await _recv_exactly(loop, cli, total)
        assert len(got) == total
        for _ in range(100):
            if any(e.startswith("resume") for e in proto.events):
                break
            await asyncio.sleep(0.01)
        resume = [e for e in proto.events if e.startswith("resume")]
        assert len(resume) == 1 and int(resume[0].split(":")[1]) <= 20_000
        tr.close()
        await proto.done
        cli.close()

    run(main())


def test_pause_resume_reading_loses_nothing(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        seen_while_paused = []

        def on_data(d):
            if not tr.is_reading():
                seen_while_paused.append(len(d))

        proto.on_data = on_data
        data = _pattern(2 << 20)
        tr.pause_reading()
        assert not tr.is_reading()
        tr.pause_reading()  # idempotent
        await loop.sock_sendall(cli, data[:300_000])
        await asyncio.sleep(0.1)
        assert len(proto.data) == 0
        # Pausing from inside data_received stops delivery in the same batch.
        paused_once = []

        def pause_in_callback(d):
            if not paused_once:
                paused_once.append(True)
                tr.pause_reading()

        proto.on_data = pause_in_callback
        tr.resume_reading()
        await asyncio.sleep(0.05)
        n_paused = len(proto.data)
        assert 0 < n_paused <= 300_000
        await asyncio.sleep(0.05)
        assert len(proto.data) == n_paused
        proto.on_data = on_data
        tr.resume_reading()
        await loop.sock_sendall(cli, data[300_000:])
        cli.shutdown(socket.SHUT_WR)
        await proto.done
        assert bytes(proto.data) == data
        assert proto.events == ["made", "eof", "lost"]
        assert not seen_while_paused
        cli.close()

    run(main())


def test_write_eof_and_half_close(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        proto.eof_result = True  # keep the connection open after the peer's EOF
        await loop.sock_sendall(cli, b"request")
        cli.shutdown(socket.SHUT_WR)
        while "eof" not in proto.events:
            await asyncio.sleep(0.005)
        assert bytes(proto.data) == b"request"
        assert not tr.is_closing()
        big = _pattern(1 << 20)
        tr.write(big)
        tr.write_eof()
        tr.write_eof()  # idempotent
        with pytest.raises(RuntimeError, match="after write_eof"):
            tr.write(b"more")
        assert await _recv_to_eof(loop, cli) == big
        tr.close()
        await proto.done
        assert proto.events == ["made", "eof", "lost"]
        cli.close()

    run(main())


def test_peer_reset_reports_like_asyncio(loop, run):
    handler_calls = []
    loop.set_exception_handler(lambda lp, ctx: handler_calls.append(ctx))

    async def main():
        proto, cli = await _pair(loop)
        cli.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        await loop.sock_sendall(cli, b"x" * 100)
        await asyncio.sleep(0.02)
        cli.close()  # RST
        exc = await proto.done
        assert isinstance(exc, ConnectionResetError)
        assert not handler_calls

    run(main())


def test_abort_with_sends_in_flight(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        payload = [os.urandom(1 << 20) for _ in range(8)]
        for p in payload:
            tr.write(p)
        await asyncio.sleep(0.05)  # the first send is now stuck in the kernel
        assert tr.get_write_buffer_size() > 0
        del payload
        gc.collect()
        tr.abort()
        assert tr.is_closing()
        assert tr.get_write_buffer_size() == 0
        tr.write(b"dropped")  # after abort: silently dropped, as in asyncio
        assert await proto.done is None
        core = loop._loop_ring.core
        for _ in range(200):
            if core.draining == 0:
                break
            await asyncio.sleep(0.005)
        assert core.draining == 0 and core.transports == 0
        # The peer sees the connection end (the cancelled send released the file).
        await asyncio.wait_for(_recv_to_eof_or_reset(loop, cli), 5)
        cli.close()

    run(main())


async def _recv_to_eof_or_reset(loop, sock):
    try:
        await _recv_to_eof(loop, sock)
    except ConnectionResetError:
        pass


def test_close_with_full_queue_delivers_everything(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        data = _pattern(4 << 20)
        tr.write(data[: 1 << 20])
        tr.write(data[1 << 20 :])
        tr.close()
        tr.close()  # idempotent
        assert tr.is_closing()
        # Writes after close() while the queue drains still go out (asyncio too).
        got = await _recv_to_eof(loop, cli)
        assert got == data
        assert await proto.done is None
        # 4 MiB queued: paused, resumed once drained, then connection_lost.
        assert proto.events[0] == "made" and proto.events[-1] == "lost"
        assert proto.events[1].startswith("pause") and proto.events[2].startswith("resume")
        assert int(proto.events[2].split(":")[1]) <= 16 * 1024
        cli.close()

    run(main())


class BufProto(asyncio.BufferedProtocol):
    def __init__(self, size=100, empty=False):
        self.buf = bytearray(size)
        self.empty = empty
        self.data = bytearray()
        self.hints = []
        self.transport = None
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        self.hints.append(sizehint)
        return memoryview(self.buf)[:0] if self.empty else self.buf

    def buffer_updated(self, nbytes):
        self.data += self.buf[:nbytes]

    def eof_received(self):
        return None

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_result(exc)


def test_buffered_protocol(loop, run):
    async def main():
        proto, cli = await _pair(loop, lambda: BufProto(100))
        data = _pattern(300_000)
        await loop.sock_sendall(cli, data)
        cli.shutdown(socket.SHUT_WR)
        assert await proto.done is None
        assert bytes(proto.data) == data
        assert set(proto.hints) == {-1}  # as asyncio's selector transport asks
        cli.close()

    run(main())


def test_buffered_protocol_empty_buffer_is_fatal(loop, run):
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def main():
        proto, cli = await _pair(loop, lambda: BufProto(100, empty=True))
        await loop.sock_sendall(cli, b"hello")
        exc = await proto.done
        assert isinstance(exc, RuntimeError) and "empty buffer" in str(exc)
        assert contexts[0]["message"] == "Fatal error: protocol.get_buffer() call failed."
        cli.close()

    run(main())


def test_data_received_raising_goes_to_exception_handler(loop, run):
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def main():
        proto, cli = await _pair(loop)

        def boom(d):
            raise ValueError("boom")

        proto.on_data = boom
        await loop.sock_sendall(cli, b"hello")
        exc = await proto.done
        assert isinstance(exc, ValueError)
        assert len(contexts) == 1
        ctx = contexts[0]
        assert ctx["message"] == "Fatal error: protocol.data_received() call failed."
        assert ctx["exception"] is exc
        assert ctx["transport"] is proto.transport and ctx["protocol"] is proto
        # The connection is closed: the peer sees EOF.
        assert await _recv_to_eof(loop, cli) == b""
        cli.close()

    run(main())


def test_keyboard_interrupt_in_data_received_propagates(loop, run):
    proto, cli = run(_pair(loop))
    calls = []

    def interrupt(d):
        calls.append(d)
        if len(calls) == 1:
            raise KeyboardInterrupt

    proto.on_data = interrupt
    cli.setblocking(True)
    cli.sendall(b"first")
    cli.setblocking(False)
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(asyncio.sleep(1))
    assert not proto.transport.is_closing()

    async def after():
        await loop.sock_sendall(cli, b"second")
        while bytes(proto.data) != b"firstsecond":
            await asyncio.sleep(0.005)
        proto.transport.close()
        await proto.done
        cli.close()

    run(after())


def test_tls_over_ring_transport(loop, run):
    utils = pytest.importorskip("test.test_asyncio.utils")
    server_ctx, client_ctx = utils.simple_server_sslcontext(), utils.simple_client_sslcontext()

    async def handler(r, w):
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
        w.close()

    async def main():
        srv = await asyncio.start_server(handler, HOST, 0, ssl=server_ctx)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(HOST, port, ssl=client_ctx)
        raw = w.transport._ssl_protocol._transport
        assert isinstance(raw, RingSocketTransport)
        data = _pattern(1 << 20)
        w.write(data)
        assert await r.readexactly(len(data)) == data
        w.close()
        await w.wait_closed()
        srv.close()
        await srv.wait_closed()

    run(main())


def test_sendfile_on_ring_transport(loop, run):
    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        data = _pattern(500_000)
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.flush()
            f.seek(0)
            tr.write(b"head")
            sent = await loop.sendfile(tr, f)
            assert sent == len(data)
            tr.write(b"tail")
        tr.close()
        assert await _recv_to_eof(loop, cli) == b"head" + data + b"tail"
        await proto.done
        cli.close()

    run(main())


def test_unclosed_transport_warns_on_gc():
    loop = ringio.new_event_loop()
    a, b = socket.socketpair()
    try:

        async def main():
            await loop.connect_accepted_socket(asyncio.Protocol, a)

        loop.run_until_complete(main())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loop.close()
            gc.collect()
        assert any(
            issubclass(w.category, ResourceWarning) and "unclosed transport" in str(w.message)
            for w in caught
        ), [str(w.message) for w in caught]
        assert a.fileno() == -1  # __del__ closed the socket
    finally:
        a.close()
        b.close()


def _argument_errors(loop) -> list[str]:
    """Runs the same misuse on `loop`'s transport; returns what each raised."""

    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        out = []
        for bad in ("text", 42, None, [b"x"]):
            try:
                tr.write(bad)
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        try:
            tr.writelines([b"a", "b"])
        except Exception as e:
            out.append(f"{type(e).__name__}: {e}")
        for kw in ({"high": 1, "low": 2}, {"high": -1}):
            try:
                tr.set_write_buffer_limits(**kw)
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        tr.write(b"")  # no-op
        tr.close()
        await proto.done
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                tr.write(b"after close")  # dropped (logged after a few)
        proto2, cli2 = await _pair(loop)
        proto2.transport.write_eof()
        for data in (b"x", b""):
            try:
                proto2.transport.write(data)
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        proto2.transport.close()
        await proto2.done
        cli2.close()
        out.append(f"conn_lost={tr._conn_lost}")
        cli.close()
        return out

    return loop.run_until_complete(asyncio.wait_for(main(), 10))


def test_argument_errors_identical_to_asyncio(loop):
    ours = _argument_errors(loop)
    ref_loop = asyncio.SelectorEventLoop()
    try:
        theirs = _argument_errors(ref_loop)
    finally:
        ref_loop.close()
    assert ours == theirs
    # asyncio's words, which 3.14 changed.
    what = "a bytes-like object"
    if sys.version_info >= (3, 14):
        what = "a bytes, bytearray, or memoryview object"
    assert ours[0] == f"TypeError: data argument must be {what}, not 'str'"


def test_selector_transport_is_reachable():
    code = (
        "import asyncio, socket, ringio\n"
        "async def main():\n"
        "    a, b = socket.socketpair()\n"
        "    loop = asyncio.get_running_loop()\n"
        "    tr, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)\n"
        "    print(type(tr).__name__)\n"
        "    tr.close(); b.close()\n"
        "ringio.run(main())\n"
    )
    env = dict(os.environ, RINGIO_LOOP_TRANSPORT="selector")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "_SelectorSocketTransport", out.stderr
    env["RINGIO_LOOP_TRANSPORT"] = "ring"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "RingSocketTransport", out.stderr


def test_unix_socket_transport(loop, run):
    async def handler(r, w):
        w.write(await r.read(100))
        await w.drain()
        w.close()

    async def main():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s")
            srv = await asyncio.start_unix_server(handler, path)
            r, w = await asyncio.open_unix_connection(path)
            assert isinstance(w.transport, RingSocketTransport)
            w.write(b"unix!")
            assert await r.read() == b"unix!"
            w.close()
            await w.wait_closed()
            srv.close()
            await srv.wait_closed()

    run(main())


def test_many_connections_share_the_buffer_ring(loop, run):
    """More receives in one batch than a small buffer ring would hold: every byte
    arrives, in order, on every connection (ENOBUFS only re-arms)."""

    class Echo(asyncio.Protocol):
        def connection_made(self, t):
            self.t = t

        def data_received(self, d):
            self.t.write(d)

    async def client(port, i):
        r, w = await asyncio.open_connection(HOST, port)
        data = _pattern(20_000 + i)
        w.write(data)
        got = await r.readexactly(len(data))
        w.close()
        await w.wait_closed()
        return got == data

    async def main():
        srv = await loop.create_server(Echo, HOST, 0, backlog=512)
        port = srv.sockets[0].getsockname()[1]
        results = await asyncio.gather(*(client(port, i) for i in range(300)))
        assert all(results)
        srv.close()
        await srv.wait_closed()

    run(main(), timeout=30)


def test_transport_survives_the_loop_moving_to_another_thread(loop, run):
    """A new ring for the new thread: the transport's receive is re-armed on it."""
    import threading

    proto, cli = run(_pair(loop))
    tr = proto.transport
    run(loop.sock_sendall(cli, b"before"))
    run(_wait_for_data(proto, b"before"))
    ring_before = loop._loop_ring.ring

    def in_thread():
        async def main():
            await loop.sock_sendall(cli, b"after")
            await _wait_for_data(proto, b"beforeafter")
            tr.write(b"echo")
            assert await _recv_exactly(loop, cli, 4) == b"echo"

        loop.run_until_complete(asyncio.wait_for(main(), 10))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join(20)
    assert not t.is_alive()
    assert loop._loop_ring.ring is not ring_before
    tr.close()
    run(proto.done)
    cli.close()


async def _wait_for_data(proto, want):
    while bytes(proto.data) != want:
        assert len(proto.data) <= len(want)
        await asyncio.sleep(0.005)


def test_provided_buffers_go_back_whatever_happens_to_the_batch(loop, run):
    """Several transports' receives in one CQE batch: the first callback aborts one
    transport, pauses another and the next raises KeyboardInterrupt. Every provided
    buffer goes back to the kernel (a leaked one would shrink the pool until the
    receives starve), and the kept bytes arrive intact."""
    n = 6
    size = 100_000  # several 16 KiB buffers per transport

    async def setup():
        pairs = [await _pair(loop) for _ in range(n)]
        core = loop._loop_ring.core
        return pairs, core

    pairs, core = run(setup())
    protos = [p for p, _ in pairs]
    data = [_pattern(size + i) for i in range(n)]

    async def warm_up():
        # The pool provides a small window at first and widens it each time the
        # kernel runs dry: widen it so that one batch holds every transport's bytes.
        for _ in range(3):
            for _, cli in pairs:
                await loop.sock_sendall(cli, data[0])
            for p in protos:
                while len(p.data) < size:
                    await asyncio.sleep(0.005)
                p.data.clear()

    run(warm_up())
    acted = []

    def first(d):
        if acted:
            return
        acted.append(True)
        me = next(p for p in protos if p.data)
        others = [p for p in protos if p is not me]
        others[0].transport.abort()  # its bytes in this batch are dropped
        others[1].transport.pause_reading()  # kept for resume_reading
        others[2].on_data = interrupt

    def interrupt(d):
        raise KeyboardInterrupt

    for p in protos:
        p.on_data = first
    for (_, cli), d in zip(pairs, data, strict=True):
        cli.setblocking(True)
        cli.sendall(d)  # all of it queued before the loop's next enter
        cli.setblocking(False)

    async def settle():
        await asyncio.sleep(0.05)

    with pytest.raises(KeyboardInterrupt):
        run(settle())
    aborted = [p for p in protos if p.transport.is_closing()]
    paused = [p for p in protos if not p.transport.is_reading() and p not in aborted]
    assert len(aborted) == 1 and len(paused) == 1 and acted

    async def finish():
        for p in protos:
            p.on_data = None
        for p in paused:
            p.transport.resume_reading()
        await _received_in_full(protos, data, aborted)
        for _ in range(200):
            if core.buffers_out == 0:
                break
            await asyncio.sleep(0.005)
        assert core.buffers_out == 0
        for p, cli in pairs:
            if p.transport is not None:
                p.transport.close()
            cli.close()

    run(finish())


def test_receives_that_run_dry_wait_or_move_to_large_receives(loop, run):
    """Large messages on many new connections: the provided window stays about one
    L2 cache (32 x 16 KiB), so most receives run dry (ENOBUFS) and wait to be
    re-armed a few at a time, or, once they have filled whole buffers, move to the
    large-receive path (no buffers needed). Every byte still arrives, in order,
    also on transports paused once, resumed or aborted on the way; small messages
    then widen the window again."""
    n = 40
    size = 300_000

    async def main():
        pairs = [await _pair(loop) for _ in range(n)]
        core = loop._loop_ring.core
        protos = [p for p, _ in pairs]
        data = [_pattern(size + i) for i in range(n)]
        paused = protos[1::4]
        aborted = protos[2::8]
        dry_seen = []
        paused_once = set()

        def on_data_for(p):
            def on_data(d):
                dry_seen.append(core.starved + core.big_receives)
                if p in paused and p not in paused_once:
                    paused_once.add(p)
                    p.transport.pause_reading()
                if p in aborted and not p.transport.is_closing():
                    p.transport.abort()

            return on_data

        for p in protos:
            p.on_data = on_data_for(p)
        for (_, cli), d in zip(pairs, data, strict=True):
            cli.setblocking(True)
            cli.sendall(d[: size // 2])  # fits the socket buffers: no deadlock
            cli.setblocking(False)
        rest = [
            asyncio.ensure_future(loop.sock_sendall(cli, d[size // 2 :]))
            for (_, cli), d in zip(pairs, data, strict=True)
        ]
        await asyncio.sleep(0.2)
        assert max(dry_seen) > n // 2  # most of them ran dry
        assert core.buffer_window <= 64
        for p in paused:
            assert not p.transport.is_reading()
            p.transport.resume_reading()
        await _received_in_full(protos, data, aborted)
        for t in rest:
            try:
                await t
            except OSError:
                pass  # the aborted ones
        assert core.starved == 0 and core.buffers_out == 0
        # Many small receives per batch: the window widens past the cap again.
        for p in protos:
            p.on_data = None
        live = [(p, cli) for p, cli in pairs if p not in aborted]
        for _ in range(20):
            for p, cli in live:
                p.data.clear()
                cli.send(b"x" * 500)
            for p, _ in live:
                while len(p.data) < 500:
                    await asyncio.sleep(0.001)
        assert core.buffer_window > 32
        for p, cli in pairs:
            if not p.transport.is_closing():
                p.transport.close()
            cli.close()

    run(main(), timeout=30)


_ROUND_TRIP_CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(int(sys.argv[2])):
    msg = b"%05d" % i * 20
    s.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += s.recv(len(msg) - len(got))
    assert got == msg, (got, msg)
s.close()
"""


def test_a_reply_sent_does_not_cost_a_loop_iteration(loop, run):
    # One connection, request then reply: the SEND's completion arrives on its own
    # (before the next request). Waking Python for it made ~2 selects per request;
    # the core goes on waiting instead when handling it calls no Python code.
    from ringio.loop._selector import select_count

    rounds = 300
    done = loop.create_future()

    class Echo(asyncio.Protocol):
        def connection_made(self, t):
            self.t = t

        def data_received(self, d):
            self.t.write(d)

        def connection_lost(self, exc):
            done.set_result(select_count())

    async def main():
        srv = await loop.create_server(Echo, HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ROUND_TRIP_CLIENT, str(port), str(rounds)
        )
        before = select_count()
        assert await asyncio.wait_for(client.wait(), 60) == 0
        after = await asyncio.wait_for(done, 10)
        srv.close()
        await srv.wait_closed()
        return after - before

    selects = run(main())
    # Connection set-up, the subprocess's own pipes and the close add a few dozen.
    assert selects < 1.3 * rounds, selects


def test_large_receives_go_straight_into_bytes(loop, run):
    """A transport that receives large messages moves to the large-receive path
    (a readiness poll, then a receive into the `bytes` that data_received gets, at
    most 128 KiB each) and back to the pool's multishot receive when its messages
    get small again. Every byte arrives, in order, across both moves and across a
    pause in the middle."""
    big_max = 128 * 1024 - 256

    async def main():
        proto, cli = await _pair(loop)
        core = loop._loop_ring.core
        sizes: list[int] = []
        proto.on_data = lambda d: sizes.append(len(d))
        sent = bytearray()

        async def send(msg: bytes) -> None:
            sent.extend(msg)
            await loop.sock_sendall(cli, msg)
            while len(proto.data) < len(sent):
                await asyncio.sleep(0.001)

        assert core.big_receives == 0
        for i in range(6):
            await send(_pattern(100_000 + i))
        assert core.big_receives == 1
        sizes.clear()
        for i in range(4):
            await send(_pattern(300_000 + i))
        assert max(sizes) <= big_max < 300_000  # one bytes per buffer
        # Paused while large messages keep coming: kept, then delivered in order.
        proto.transport.pause_reading()
        msg = _pattern(250_000)
        sent.extend(msg)
        await loop.sock_sendall(cli, msg)
        await asyncio.sleep(0.05)
        assert len(proto.data) < len(sent)
        proto.transport.resume_reading()
        while len(proto.data) < len(sent):
            await asyncio.sleep(0.001)
        for _ in range(30):  # the moving average decays by 1/4 per message
            await send(b"y" * 700)
        assert core.big_receives == 0
        assert bytes(proto.data) == bytes(sent)
        for _ in range(200):
            if core.buffers_out == 0:
                break
            await asyncio.sleep(0.005)
        assert core.buffers_out == 0
        proto.transport.close()
        cli.close()

    run(main(), timeout=30)


def test_buffered_protocol_keeps_the_pool_for_large_receives(loop, run):
    """A BufferedProtocol copies into its own buffer anyway: its transport never
    takes the `bytes`-backed group, and large messages arrive intact."""

    class Buffered(asyncio.BufferedProtocol):
        def __init__(self) -> None:
            self.buf = bytearray(64 * 1024)
            self.data = bytearray()
            self.transport = None

        def connection_made(self, transport):
            self.transport = transport

        def get_buffer(self, sizehint):
            return self.buf

        def buffer_updated(self, nbytes):
            self.data += self.buf[:nbytes]

        def connection_lost(self, exc):
            pass

    async def main():
        proto, cli = await _pair(loop, Buffered)
        core = loop._loop_ring.core
        sent = bytearray()
        for i in range(6):
            msg = _pattern(150_000 + i)
            sent.extend(msg)
            await loop.sock_sendall(cli, msg)
            while len(proto.data) < len(sent):
                await asyncio.sleep(0.001)
        assert core.big_receives == 0
        assert bytes(proto.data) == bytes(sent)
        proto.transport.close()
        cli.close()

    run(main(), timeout=30)


def _echo_enters(loop, run, msgs) -> tuple[int, int]:
    """Echoes each of `msgs` on one ring transport to a blocking client in a thread
    that shares the loop's CPU, as in the benchmarks; returns the selects and the
    io_uring_enter calls the loop made meanwhile."""
    from ringio import _core
    from ringio.loop._selector import select_count

    cpu = min(os.sched_getaffinity(0))
    saved = os.sched_getaffinity(0)
    counts: list[int] = []

    async def main():
        proto, cli = await _pair(loop)
        proto.on_data = proto.transport.write  # echo
        cli.setblocking(True)

        def client() -> None:
            os.sched_setaffinity(0, {cpu})  # this thread
            for msg in msgs:
                cli.sendall(msg)
                got = bytearray()
                while len(got) < len(msg):
                    got += cli.recv(65536)
                assert got == msg

        s0, e0 = select_count(), _core._enter_count()
        await loop.run_in_executor(None, client)
        counts.extend((select_count() - s0, _core._enter_count() - e0))
        proto.transport.close()
        cli.close()

    os.sched_setaffinity(0, {cpu})
    try:
        run(main(), timeout=30)
    finally:
        os.sched_setaffinity(0, saved)
    return counts[0], counts[1]


def test_select_enters_the_kernel_once_per_iteration(loop, run):
    """The select step's io_uring_enter (GETEVENTS) runs the deferred task work
    itself; reaping after it enters again only when more work was queued since
    (it used to enter unconditionally: two syscalls per iteration). 100 KiB
    messages are echoed by write()'s immediate sendmsg (over the high-water mark),
    not by a SEND in the next enter, and the client shares the loop's CPU, as in
    the benchmarks: nothing is queued between the enter and the reap."""
    rounds = 200
    selects, enters = _echo_enters(loop, run, [b"z" * 100_000] * rounds)
    assert selects >= rounds
    assert enters <= selects * 1.25 + 10, (enters, selects)


def test_a_reply_is_sent_by_the_enter_that_waits_for_the_next_request(loop, run):
    """A send queued by write() goes to the kernel with the next select's blocking
    io_uring_enter, as one that ends during its submission (MSG_DONTWAIT), so that
    enter waits past its CQE for the next request: one enter per request-reply
    round at one connection, where a send that completes later would end the wait
    at once and need a second enter (two per round)."""
    rounds = 300
    _, enters = _echo_enters(loop, run, [i.to_bytes(4, "big") * 256 for i in range(rounds)])
    assert enters <= rounds * 1.25 + 10, (enters, rounds)


def test_sends_that_fall_short_of_a_full_socket_buffer_are_finished_later(loop, run):
    """Writes below the high-water mark, more than the socket buffers hold:
    the send that the loop's blocking select submits ends at submission and falls
    short; the transport then waits for room, and everything arrives, in order,
    while the peer reads in a thread. No event but the send's own outcome wakes the
    loop here (the reader's thread reports only when it has everything), so an
    enter that waited past the short send's CQE would wait until the timeout.
    Then the same with writes spread over iterations, while the loop answers
    another connection."""

    async def main():
        stuck, stuck_cli = await _pair(loop)
        echo, echo_cli = await _pair(loop)
        echo.on_data = echo.transport.write
        stuck.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 16384
        )
        stuck_cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        sent = bytearray()
        for i in range(3):  # 60 KB in all, below the high-water mark (64 KiB)
            chunk = _pattern(20_000 + i)
            sent += chunk
            stuck.transport.write(chunk)

        def read_all(n: int) -> bytes:
            stuck_cli.setblocking(True)
            out = bytearray()
            while len(out) < n:
                out += stuck_cli.recv(65536)
            stuck_cli.setblocking(False)
            return bytes(out)

        assert await loop.run_in_executor(None, read_all, len(sent)) == bytes(sent)
        sent.clear()
        for i in range(200):
            chunk = _pattern(20_000 + i)
            sent += chunk
            stuck.transport.write(chunk)
            await asyncio.sleep(0)
            if i % 20 == 19:
                # The other connection is answered while this one's peer does not
                # read.
                await loop.sock_sendall(echo_cli, b"ping")
                assert await _recv_exactly(loop, echo_cli, 4) == b"ping"
        assert stuck.transport.get_write_buffer_size() > 0
        assert await _recv_exactly(loop, stuck_cli, len(sent)) == bytes(sent)
        for t in (stuck.transport, echo.transport):
            t.close()
        stuck_cli.close()
        echo_cli.close()

    run(main(), timeout=20)


@pytest.mark.parametrize("path", ["pool", "resumed backlog", "large receive"])
def test_no_memory_for_received_bytes_fails_the_transport(loop, run, path):
    """When the `bytes` for received data cannot be made (memory ran out: simulated
    with a test hook), those bytes are lost, so the transport fails, as asyncio's
    does for a MemoryError in recv: connection_lost gets the error and the protocol
    never sees the stream with a hole in it. Each way data reaches data_received:
    copied out of the provided-buffer pool, a paused transport's backlog delivered
    on resume, and the large receive straight into a new `bytes`."""
    from ringio import _core

    handled: list[dict] = []
    loop.set_exception_handler(lambda lp, ctx: handled.append(ctx))
    size = 100_000 if path == "large receive" else 700

    async def main():
        proto, cli = await _pair(loop)
        core = loop._loop_ring.core
        before = bytearray()
        for i in range(8 if path == "large receive" else 1):  # 8: onto that path
            msg = _pattern(size + i)
            before += msg
            await loop.sock_sendall(cli, msg)
            while len(proto.data) < len(before):
                await asyncio.sleep(0.001)
        assert core.big_receives == (1 if path == "large receive" else 0)
        if path == "resumed backlog":
            proto.transport.pause_reading()
            await loop.sock_sendall(cli, b"lost" * 100)
            await asyncio.sleep(0.05)
            _core.loop._fail_receive_allocations(1)
            proto.transport.resume_reading()
        else:
            _core.loop._fail_receive_allocations(1)
            await loop.sock_sendall(cli, _pattern(size))
        exc = await asyncio.wait_for(proto.done, 5)
        assert bytes(proto.data) == bytes(before)  # nothing after the hole, nor part of it
        assert proto.transport.is_closing()
        cli.close()
        return exc

    try:
        exc = run(main())
    finally:
        _core.loop._fail_receive_allocations(0)
    if path == "large receive":
        # No object to receive into: the transport fails as when the kernel had
        # written into one that could not be shrunk.
        assert isinstance(exc, OSError) and exc.errno == errno.ENOMEM, exc
    else:
        assert isinstance(exc, MemoryError), exc
        assert [c["message"] for c in handled] == ["Fatal read error on socket transport"]


async def _on_large_path(loop, proto, cli, count: int = 6) -> None:
    """Sends `count` 100 KB messages and waits for them: the transport then takes
    the large-receive path."""
    sent = len(proto.data)
    for i in range(count):
        await loop.sock_sendall(cli, _pattern(100_000 + i))
        sent += 100_000 + i
        while len(proto.data) < sent:
            await asyncio.sleep(0.001)


def test_large_receives_take_turns_in_the_order_data_came(loop, run):
    """Transports on the large-receive path are served in the order their sockets
    became readable, a few per iteration, never a later one before an earlier one:
    with the loop held up while eight peers send in turn, the first bytes each
    transport gets come in the order the peers sent them."""
    import threading
    import time

    async def main():
        pairs = [await _pair(loop) for _ in range(8)]
        core = loop._loop_ring.core
        for proto, cli in pairs:
            await _on_large_path(loop, proto, cli)
        assert core.big_receives == len(pairs)
        order: list[int] = []
        for i, (proto, _) in enumerate(pairs):
            proto.on_data = lambda d, i=i: order.append(i)
        msg = _pattern(100_000)

        def peers() -> None:
            for _, cli in pairs:
                cli.setblocking(True)
                cli.sendall(msg)
                time.sleep(0.01)  # each socket readable before the next

        sender = threading.Thread(target=peers)
        sender.start()
        time.sleep(0.3)  # the loop is held up: every socket is readable by now
        sender.join(5)
        for proto, _ in pairs:
            while len(proto.data) < 600_015 + 100_000:
                await asyncio.sleep(0.001)
        firsts = list(dict.fromkeys(order))
        assert firsts == list(range(len(pairs))), order
        for proto, cli in pairs:
            assert bytes(proto.data[-100_000:]) == msg
            proto.transport.close()
            cli.close()

    run(main(), timeout=30)


@pytest.mark.parametrize("gap", [0.0, 0.05])
def test_large_receive_sees_the_eof_that_came_with_the_data(loop, run, gap):
    """The peer's last message and its EOF arrive together (or apart): the readiness
    poll reports them once, so the transport keeps receiving until the EOF, which
    no later wake-up would report: every byte, then eof_received, then
    connection_lost."""
    import time

    async def main():
        proto, cli = await _pair(loop)
        await _on_large_path(loop, proto, cli)
        assert loop._loop_ring.core.big_receives == 1
        before = len(proto.data)
        tail = _pattern(300_000)

        def peer() -> None:
            cli.setblocking(True)
            cli.sendall(tail)
            time.sleep(gap)
            cli.shutdown(socket.SHUT_WR)

        await loop.run_in_executor(None, peer)
        assert await asyncio.wait_for(proto.done, 5) is None
        assert bytes(proto.data[before:]) == tail
        assert proto.events == ["made", "eof", "lost"]
        cli.close()

    run(main(), timeout=30)


def test_large_receive_reports_a_reset_like_asyncio(loop, run):
    handler_calls = []
    loop.set_exception_handler(lambda lp, ctx: handler_calls.append(ctx))

    async def main():
        proto, cli = await _pair(loop)
        await _on_large_path(loop, proto, cli)
        assert loop._loop_ring.core.big_receives == 1
        cli.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        await loop.sock_sendall(cli, b"x" * 100)
        await asyncio.sleep(0.02)
        cli.close()  # RST
        exc = await asyncio.wait_for(proto.done, 5)
        assert isinstance(exc, ConnectionResetError)
        assert not handler_calls

    run(main(), timeout=30)


def test_large_receive_paused_and_resumed_around_its_turn_loses_nothing(loop, run):
    """Another transport's callback pauses a large-receive transport just before its
    turn in the same select, and a handle resumes it before the next: its readiness
    poll stays armed and reported the waiting data only once, so the resume must
    give it its turn back (no wake-up comes again: all the data is already in the
    socket's buffer)."""

    async def main():
        big, big_cli = await _pair(loop)
        small, small_cli = await _pair(loop)
        await _on_large_path(loop, big, big_cli)
        tr = big.transport
        tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        big_cli.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        paused_before_turn = []

        def on_big(_):
            if not paused_before_turn:
                # Its next turn (a full buffer: another one is queued) and the
                # small transport's data meet in the next select.
                small_cli.send(b"p")

        def on_small(_):
            if not paused_before_turn:
                paused_before_turn.append(True)
                tr.pause_reading()
                loop.call_soon(tr.resume_reading)

        big.on_data = on_big
        small.on_data = on_small
        tr.pause_reading()
        before = len(big.data)
        data = _pattern(1_000_000)
        big_cli.setblocking(True)
        big_cli.sendall(data)
        sock = tr.get_extra_info("socket")
        for _ in range(500):  # until all of it is in the receiver's buffer
            waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
            if int.from_bytes(waiting, "little") == len(data):
                break
            await asyncio.sleep(0.002)
        assert int.from_bytes(waiting, "little") == len(data)
        tr.resume_reading()
        deadline = loop.time() + 5
        while len(big.data) < before + len(data) and loop.time() < deadline:
            await asyncio.sleep(0.001)
        assert paused_before_turn
        assert len(big.data) - before == len(data), "stalled with data waiting"
        assert bytes(big.data[before:]) == data
        for t, c in ((tr, big_cli), (small.transport, small_cli)):
            t.close()
            c.close()

    run(main(), timeout=30)


def test_replaced_protocol_callbacks_are_dropped_outside_the_core_lock(loop, run):
    """The core holds a protocol's bound callbacks. Replacing them may drop the last
    reference to the old protocol, whose __del__ may call the transport, and so the
    core, again: the old callbacks go after the core's lock is released (dropped
    under it, this deadlocked)."""

    async def main():
        proto, cli = await _pair(loop)
        tr = proto.transport
        core = loop._loop_ring.core
        slot, gen = tr._cid
        said = []

        class Old(asyncio.Protocol):
            def data_received(self, data):
                pass

            def __del__(self):
                tr.write(b"from __del__")
                said.append(True)

        core.set_protocol(slot, gen, Old(), False)  # the core holds the only reference
        core.set_protocol(slot, gen, proto, False)
        assert said == [True]
        assert await _recv_exactly(loop, cli, 12) == b"from __del__"
        tr.close()
        cli.close()

    run(main(), timeout=10)


def test_a_new_connection_of_large_messages_moves_after_its_first_batch(loop, run):
    """The average that picks the receive path starts at the first batch's bytes:
    a new connection whose first message is 100 KB is on the large-receive path
    by its second message (the average used to start at zero: four batches)."""

    async def main():
        proto, cli = await _pair(loop)
        core = loop._loop_ring.core
        await _on_large_path(loop, proto, cli, count=2)
        assert core.big_receives == 1
        proto.transport.close()
        cli.close()

    run(main(), timeout=30)
