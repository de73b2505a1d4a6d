"""ringio.EventLoop I/O: selector, add_reader/writer, sock_*, servers, TLS, UDP,
unix sockets, pipes, subprocesses, sendfile; errors are asyncio's."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import sys
import tempfile

import pytest

import ringio
from ringio.loop import RingSelector

HOST = "127.0.0.1"


# ------------------------------------------------------------------ selector


def test_selector_argument_errors():
    sel = RingSelector()
    a, b = socket.socketpair()
    try:
        with pytest.raises(ValueError):
            sel.register(a, 0)
        with pytest.raises(ValueError):
            sel.register(a, 4)
        with pytest.raises(ValueError):
            sel.register(-1, 1)
        with pytest.raises(ValueError):
            sel.register(object(), 1)
        key = sel.register(a, 1, "d")
        assert key.fd == a.fileno() and key.data == "d"
        with pytest.raises(KeyError):
            sel.register(a, 1)
        with pytest.raises(KeyError):
            sel.unregister(b)
        with pytest.raises(KeyError):
            sel.modify(b, 1)
        assert sel.get_key(a) is key
        assert len(sel.get_map()) == 1 and sel.get_map()[a] is key
        assert sel.modify(a, 3, "e").events == 3
        assert sel.unregister(a).data == "e"
        with pytest.raises(KeyError):
            sel.get_key(a)
    finally:
        sel.close()
        a.close()
        b.close()
    with pytest.raises(RuntimeError):
        sel.select(0)


def test_selector_readiness_and_timeout():
    sel = RingSelector()
    a, b = socket.socketpair()
    try:
        sel.register(a, 1, "r")
        assert sel.select(0) == []
        assert sel.select(0.02) == []
        b.send(b"x")
        (key, ev), *rest = sel.select(5)
        assert key.fileobj is a and ev == 1 and rest == []
        # Level-triggered like epoll: still readable until read.
        assert sel.select(5)[0][1] == 1
        a.recv(1)
        assert sel.select(0.01) == []
        sel.modify(a, 3)  # add write: writable at once
        evs = dict((k.fd, e) for k, e in sel.select(5))
        assert evs[a.fileno()] & 2
    finally:
        sel.close()
        a.close()
        b.close()


def test_unregister_releases_the_port():
    # An armed poll holds the file: unregister must cancel it before close(), or
    # the listening port stays bound.
    sel = RingSelector()
    try:
        for _ in range(3):
            s = socket.socket()
            s.bind((HOST, 0))
            s.listen()
            port = s.getsockname()[1]
            sel.register(s, 1)
            sel.select(0)
            sel.unregister(s)
            s.close()
            s2 = socket.socket()
            s2.bind((HOST, port))
            s2.close()
    finally:
        sel.close()


# --------------------------------------------------------- add_reader/writer


def test_add_remove_reader_writer(loop, run):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    got = loop.create_future()
    writable = loop.create_future()
    try:
        loop.add_reader(a, lambda: got.done() or got.set_result(a.recv(10)))
        loop.add_writer(b, lambda: writable.done() or writable.set_result(True))
        assert run(writable) is True
        assert loop.remove_writer(b) is True
        assert loop.remove_writer(b) is False
        b.send(b"ping")
        assert run(got) == b"ping"
        assert loop.remove_reader(a) is True
        assert loop.remove_reader(a) is False
    finally:
        a.close()
        b.close()


def test_remove_reader_after_fd_closed(loop, run):
    a, b = socket.socketpair()
    loop.add_reader(a.fileno(), print)
    run(asyncio.sleep(0.01))
    fd = a.fileno()
    a.close()
    assert loop.remove_reader(fd) is True
    run(asyncio.sleep(0.01))
    b.close()


# ------------------------------------------------------------------- sock_*


async def _pair(loop):
    lsock = socket.socket()
    lsock.bind((HOST, 0))
    lsock.listen()
    lsock.setblocking(False)
    csock = socket.socket()
    csock.setblocking(False)
    accept = asyncio.ensure_future(loop.sock_accept(lsock))
    await loop.sock_connect(csock, lsock.getsockname())
    ssock, addr = await accept
    assert addr == csock.getsockname()
    lsock.close()
    return csock, ssock


def test_sock_stream_ops(loop, run):
    async def main():
        c, s = await _pair(loop)
        with c, s:
            await loop.sock_sendall(c, b"hello")
            assert await loop.sock_recv(s, 5) == b"hello"
            # recv before data arrives: the ring read path.
            later = asyncio.ensure_future(loop.sock_recv(s, 100))
            await asyncio.sleep(0.01)
            assert not later.done()
            await loop.sock_sendall(c, b"abc")
            assert await later == b"abc"
            buf = bytearray(10)
            fut = asyncio.ensure_future(loop.sock_recv_into(s, buf))
            await asyncio.sleep(0.01)
            await loop.sock_sendall(c, memoryview(b"xyz"))
            assert await fut == 3 and buf[:3] == b"xyz"
            # A large sendall, read concurrently.
            blob = os.urandom(3 * 1024 * 1024)

            async def reader():
                parts, n = [], 0
                while n < len(blob):
                    part = await loop.sock_recv(s, 65536)
                    parts.append(part)
                    n += len(part)
                return b"".join(parts)

            _, back = await asyncio.gather(loop.sock_sendall(c, blob), reader())
            assert back == blob
            c.shutdown(socket.SHUT_WR)
            assert await loop.sock_recv(s, 10) == b""

    run(main())


def test_sock_recv_cancel_keeps_data(loop, run):
    async def main():
        c, s = await _pair(loop)
        with c, s:
            for _ in range(20):
                t = asyncio.ensure_future(loop.sock_recv(s, 100))
                await asyncio.sleep(0)
                await asyncio.sleep(0)  # the read is now in flight
                c.send(b"data")
                t.cancel()
                try:
                    got = await t
                except asyncio.CancelledError:
                    got = await loop.sock_recv(s, 100)
                assert got == b"data"

    run(main())


def test_sock_recv_buffers_reused_only_after_the_kernel_is_done(loop, run):
    """Ring reads reuse their 64 KiB buffers, but a cancelled read's buffer goes
    back to the pool only when its completion arrives: reused while the kernel
    still owns it, a later read's bytes could be overwritten."""

    async def main():
        c, s = await _pair(loop)
        pool = loop._recv_bufs
        with c, s:
            known = bytearray(64 * 1024)
            pool[:] = [known]
            t = asyncio.ensure_future(loop.sock_recv(s, 100))
            await asyncio.sleep(0.01)  # in flight, reading into `known`
            assert pool == []
            t.cancel()
            # The kernel owns `known` until the cancelled read's completion: the
            # next read, started at once, must get another buffer.
            second = asyncio.ensure_future(loop.sock_recv(s, 100))
            await asyncio.sleep(0.02)
            assert [id(b) for b in pool] == [id(known)]
            c.send(b"second")
            assert await second == b"second"
            assert len(pool) == 2 and len({id(b) for b in pool}) == 2
            # The pooled buffers serve the next reads (large and small ones).
            blob = os.urandom(200_000)
            await asyncio.gather(
                loop.sock_sendall(c, blob),
                _check_reads(loop, s, blob),
            )
            assert 1 <= len(pool) <= 64

    async def _check_reads(loop, s, blob):
        got = bytearray()
        while len(got) < len(blob):
            got += await loop.sock_recv(s, 1000 if len(got) % 2 else 70_000)
        assert got == blob

    run(main())


def test_ring_receives_leave_nothing_behind(loop, run):
    """sock_recv that waits for data (a ring read) keeps no object once it has
    returned: its future held the completion, the completion the op, the op the
    callback holding the future, and that cycle ran through objects the cyclic GC
    cannot see into, so every such receive leaked ~19 objects (a server's memory
    grew without end) and the collections took a third of the loop's time."""
    import gc

    async def round_trips(c, s, n):
        for _ in range(n):
            t = asyncio.ensure_future(loop.sock_recv(s, 4096))
            await asyncio.sleep(0)  # waiting in the kernel: the ring path
            await loop.sock_sendall(c, b"ping")
            assert await t == b"ping"

    async def main():
        c, s = await _pair(loop)
        with c, s:
            rings = 0
            ring_recv = loop._ring_recv

            async def counted(*args):
                nonlocal rings
                rings += 1
                return await ring_recv(*args)

            loop._ring_recv = counted
            await round_trips(c, s, 100)
            gc.collect()
            before = len(gc.get_objects())
            await round_trips(c, s, 2000)
            gc.collect()
            grown = len(gc.get_objects()) - before
            del loop._ring_recv
            assert rings == 2100  # every receive went to the ring
            assert grown < 100, f"{grown} objects more after 2,000 ring receives"

    run(main(), timeout=30)


def test_sock_errors(loop, run):
    async def main():
        s = socket.socket()
        s.setblocking(False)
        port_sock = socket.socket()
        port_sock.bind((HOST, 0))
        port = port_sock.getsockname()[1]
        port_sock.close()
        with s, pytest.raises(ConnectionRefusedError):
            await loop.sock_connect(s, (HOST, port))
        # A blocking socket is refused in debug mode, as asyncio does.
        loop.set_debug(True)
        b = socket.socket()
        with b, pytest.raises(ValueError, match="non-blocking"):
            await loop.sock_recv(b, 1)
        loop.set_debug(False)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        raw = socket.socket()
        wrapped = ctx.wrap_socket(raw, do_handshake_on_connect=False)
        with wrapped, pytest.raises(TypeError):
            await loop.sock_recv(wrapped, 1)
        c, srv = await _pair(loop)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        srv.close()
        with c, pytest.raises(ConnectionResetError):
            await asyncio.sleep(0.01)
            await loop.sock_recv(c, 10)

    run(main())


def test_sock_datagram_ops(loop, run):
    async def main():
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with a, b:
            for s in (a, b):
                s.setblocking(False)
                s.bind((HOST, 0))
            recv = asyncio.ensure_future(loop.sock_recvfrom(b, 100))
            await asyncio.sleep(0.01)
            await loop.sock_sendto(a, b"one", b.getsockname())
            assert await recv == (b"one", a.getsockname())
            buf = bytearray(100)
            recv = asyncio.ensure_future(loop.sock_recvfrom_into(b, buf))
            await asyncio.sleep(0.01)
            await loop.sock_sendto(a, b"two", b.getsockname())
            assert await recv == (3, a.getsockname()) and buf[:3] == b"two"
            # recv() on a datagram socket truncates to n, as recv(2) does.
            await loop.sock_sendto(a, b"long datagram", b.getsockname())
            assert await loop.sock_recv(b, 4) == b"long"

    run(main())


def test_sock_sendfile(loop, run, tmp_path):
    data = os.urandom(200_000)
    path = tmp_path / "f"
    path.write_bytes(data)

    async def main():
        c, s = await _pair(loop)
        with c, s, open(path, "rb") as f:

            async def reader():
                out = bytearray()
                while len(out) < len(data):
                    out += await loop.sock_recv(s, 65536)
                return bytes(out)

            sent, back = await asyncio.gather(loop.sock_sendfile(c, f), reader())
            assert sent == len(data) and back == data
            with pytest.raises(ValueError):
                await loop.sock_sendfile(c, f, offset=-1)

    run(main())


# ----------------------------------------------------------- transports


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


async def _roundtrip(reader, writer, payload=b"x" * 1000):
    writer.write(payload)
    await writer.drain()
    assert await reader.readexactly(len(payload)) == payload


def test_streams_and_server_options(loop, run):
    async def main():
        srv = await loop.create_server(Echo, HOST, 0, backlog=10, reuse_port=True)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(HOST, port)
        await _roundtrip(r, w)
        w.close()
        await w.wait_closed()
        # Address in use, as asyncio reports it.
        with pytest.raises(OSError) as exc:
            await loop.create_server(Echo, HOST, port)
        assert exc.value.errno == errno.EADDRINUSE
        srv.close()
        await srv.wait_closed()
        # start_serving=False: not accepting until start_serving().
        srv2 = await loop.create_server(Echo, HOST, port, start_serving=False)
        assert not srv2.is_serving()
        await srv2.start_serving()
        r, w = await asyncio.open_connection(HOST, port)
        await _roundtrip(r, w)
        w.close()
        srv2.close()
        await srv2.wait_closed()
        with pytest.raises(ConnectionRefusedError):
            await loop.create_connection(asyncio.Protocol, HOST, port)
        with pytest.raises(ValueError):
            await loop.create_connection(asyncio.Protocol, HOST, port, sock=socket.socket())

    run(main())


def test_buffered_protocol_and_flow_control(loop, run):
    class Buffered(asyncio.BufferedProtocol):
        def __init__(self):
            self.buf = bytearray(1024)
            self.got = bytearray()
            self.done = loop.create_future()

        def get_buffer(self, sizehint):
            return self.buf

        def buffer_updated(self, nbytes):
            self.got += self.buf[:nbytes]

        def eof_received(self):
            self.done.set_result(bytes(self.got))

    class Writer(asyncio.Protocol):
        paused = 0

        def pause_writing(self):
            Writer.paused += 1

    async def main():
        proto = Buffered()
        srv = await loop.create_server(lambda: proto, HOST, 0)
        tr, _ = await loop.create_connection(Writer, *srv.sockets[0].getsockname())
        tr.set_write_buffer_limits(high=1024)
        blob = os.urandom(4 * 1024 * 1024)
        tr.write(blob)
        tr.write_eof()
        assert await proto.done == blob
        assert Writer.paused >= 1
        tr.close()
        srv.close()
        await srv.wait_closed()

    run(main())


def test_connect_accepted_socket(loop, run):
    async def main():
        lsock = socket.socket()
        lsock.bind((HOST, 0))
        lsock.listen()
        client = socket.create_connection(lsock.getsockname())
        conn, _ = lsock.accept()
        lsock.close()
        tr, _ = await loop.connect_accepted_socket(Echo, conn)
        client.setblocking(False)
        await loop.sock_sendall(client, b"ping")
        assert await loop.sock_recv(client, 4) == b"ping"
        # The fd now belongs to a transport: asyncio's guard applies.
        with pytest.raises(RuntimeError):
            loop.add_reader(conn.fileno(), print)
        tr.close()
        client.close()

    run(main())


def test_datagram_endpoint(loop, run):
    class Server(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            self.transport.sendto(data.upper(), addr)

    class Client(asyncio.DatagramProtocol):
        def __init__(self):
            self.got = loop.create_future()

        def datagram_received(self, data, addr):
            self.got.set_result(data)

    async def main():
        st, _ = await loop.create_datagram_endpoint(Server, local_addr=(HOST, 0))
        ct, cp = await loop.create_datagram_endpoint(
            Client, remote_addr=st.get_extra_info("sockname")
        )
        ct.sendto(b"hi")
        assert await cp.got == b"HI"
        ct.close()
        st.close()
        with pytest.raises(ValueError):
            await loop.create_datagram_endpoint(Client, local_addr=(HOST, 0), sock=socket.socket())

    run(main())


def test_unix_server_and_connection(loop, run):
    async def main():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s")
            srv = await loop.create_unix_server(Echo, path)
            r, w = await asyncio.open_unix_connection(path)
            await _roundtrip(r, w)
            w.close()
            await w.wait_closed()
            srv.close()
            await srv.wait_closed()
            with pytest.raises(FileNotFoundError):
                await loop.create_unix_connection(asyncio.Protocol, os.path.join(d, "none"))

    run(main())


def _tls_contexts():
    utils = pytest.importorskip("test.test_asyncio.utils")
    return utils.simple_server_sslcontext(), utils.simple_client_sslcontext()


def test_tls_and_start_tls(loop, run):
    server_ctx, client_ctx = _tls_contexts()

    async def handler(r, w):
        line = await r.readline()
        if line == b"STARTTLS\n":
            w.write(b"OK\n")
            await w.drain()
            await w.start_tls(server_ctx)
            line = await r.readline()
        w.write(line.upper())
        await w.drain()
        w.close()

    async def main():
        srv = await asyncio.start_server(
            handler, HOST, 0, ssl=server_ctx, ssl_handshake_timeout=5, ssl_shutdown_timeout=5
        )
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(HOST, port, ssl=client_ctx, ssl_handshake_timeout=5)
        assert w.get_extra_info("sslcontext") is client_ctx
        w.write(b"secret\n")
        assert await r.readline() == b"SECRET\n"
        w.close()
        await w.wait_closed()
        srv.close()
        await srv.wait_closed()
        # Plain, then upgraded.
        srv = await asyncio.start_server(handler, HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(HOST, port)
        w.write(b"STARTTLS\n")
        assert await r.readline() == b"OK\n"
        await w.start_tls(client_ctx)
        w.write(b"upgraded\n")
        assert await r.readline() == b"UPGRADED\n"
        w.close()
        srv.close()
        await srv.wait_closed()
        with pytest.raises(ValueError):
            await loop.create_connection(asyncio.Protocol, HOST, port, ssl_handshake_timeout=1)

    run(main())


def test_subprocess_and_pipes(loop, run):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; sys.stdout.write(sys.stdin.read().upper())",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate(b"pipe")
        assert out == b"PIPE" and proc.returncode == 0
        proc = await asyncio.create_subprocess_shell("exit 3")
        assert await proc.wait() == 3
        with pytest.raises(FileNotFoundError):
            await asyncio.create_subprocess_exec("/nonexistent/binary")

        rfd, wfd = os.pipe()
        reader = asyncio.StreamReader()
        rtr, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(rfd, "rb", 0)
        )
        wtr, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(wfd, "wb", 0))
        wtr.write(b"through a pipe\n")
        assert await reader.readline() == b"through a pipe\n"
        wtr.close()
        assert await reader.read() == b""
        rtr.close()

    run(main())


def test_loop_sendfile(loop, run, tmp_path):
    data = os.urandom(500_000)
    path = tmp_path / "f"
    path.write_bytes(data)

    class Sink(asyncio.Protocol):
        def __init__(self):
            self.buf = bytearray()
            self.done = loop.create_future()

        def data_received(self, d):
            self.buf += d
            if len(self.buf) >= len(data):
                self.done.set_result(bytes(self.buf))

    async def main():
        sink = Sink()
        srv = await loop.create_server(lambda: sink, HOST, 0)
        tr, _ = await loop.create_connection(asyncio.Protocol, *srv.sockets[0].getsockname())
        with open(path, "rb") as f:
            assert await loop.sendfile(tr, f) == len(data)
        assert await sink.done == data
        tr.close()
        srv.close()
        await srv.wait_closed()

    run(main())


def test_many_connections(loop, run):
    async def handler(r, w):
        while data := await r.read(4096):
            w.write(data)
            await w.drain()
        w.close()

    async def client(port):
        r, w = await asyncio.open_connection(HOST, port)
        for i in range(20):
            await _roundtrip(r, w, f"{i}".encode() * 100)
        w.close()
        await w.wait_closed()

    async def main():
        srv = await asyncio.start_server(handler, HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        await asyncio.gather(*(client(port) for _ in range(50)))
        srv.close()
        await srv.wait_closed()

    run(main(), timeout=60)


def test_policy_is_ringio_loop_in_threads():
    policy = ringio.EventLoopPolicy()
    loop = policy.new_event_loop()
    try:
        assert isinstance(loop, ringio.EventLoop)
    finally:
        loop.close()
