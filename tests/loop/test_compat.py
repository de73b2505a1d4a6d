"""What real libraries rely on, compared with asyncio's own loop: the context
protocol callbacks run in, bytes written just before abort(), and overrides
(a patched ``loop.time``, a ``socket.socket`` subclass) that asyncio honours."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

import ringio

HOST = "127.0.0.1"

LOOPS = {"asyncio": asyncio.SelectorEventLoop, "ringio": ringio.EventLoop}

var: contextvars.ContextVar[str] = contextvars.ContextVar("var")


def _on(factory: Callable[[], asyncio.AbstractEventLoop], coro_fn, timeout: float | None = 10.0):
    """Runs coro_fn(loop) on a new loop, in a copy of the caller's context (what
    one run sets or leaks stays out of the next)."""
    return contextvars.copy_context().run(_run_on, factory, coro_fn, timeout)


def _run_on(factory, coro_fn, timeout):
    loop = factory()
    try:
        # timeout None: the scenario bounds itself (a test that moves the loop's
        # clock would fire a wait_for's timer early).
        coro = coro_fn(loop) if timeout is None else asyncio.wait_for(coro_fn(loop), timeout)
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _both(coro_fn, timeout: float | None = 10.0) -> dict[str, Any]:
    """The scenario's result on asyncio's loop and on ringio's."""
    return {name: _on(f, coro_fn, timeout) for name, f in LOOPS.items()}


# ------------------------------------------------------------------ contexts


class CtxProto(asyncio.Protocol):
    """Records var.get() in every callback; data_received also sets a second
    variable, which the next callbacks should see (one context per transport)."""

    seen_var = contextvars.ContextVar("seen")
    made_var = contextvars.ContextVar("made")

    def __init__(self, log: list, done: asyncio.Future) -> None:
        self.log = log
        self.done = done
        self.transport: Any = None

    def _note(self, what: str) -> None:
        self.log.append(
            (what, var.get("MISSING"), self.seen_var.get("unset"), self.made_var.get("unset"))
        )

    def connection_made(self, transport):
        self.transport = transport
        self._note("connection_made")
        # connection_made runs in a copy of its own (asyncio's call_soon): the
        # other callbacks do not see this.
        self.made_var.set("set-in-connection_made")

    def data_received(self, data):
        self._note("data_received")
        self.seen_var.set("set-in-data_received")
        if data == b"big":
            # Flow control: pause above 1 byte, resumed once the peer reads.
            self.transport.set_write_buffer_limits(high=1, low=0)
            self.transport.write(b"x" * (4 << 20))

    def eof_received(self):
        self._note("eof_received")
        return None  # close

    def pause_writing(self):
        self._note("pause_writing")

    def resume_writing(self):
        self._note("resume_writing")

    def connection_lost(self, exc):
        self._note("connection_lost")
        if not self.done.done():
            self.done.set_result(None)


class CtxBufProto(CtxProto, asyncio.BufferedProtocol):
    def __init__(self, log: list, done: asyncio.Future) -> None:
        super().__init__(log, done)
        self.buf = bytearray(64 * 1024)

    def get_buffer(self, sizehint):
        self._note("get_buffer")
        return self.buf

    def buffer_updated(self, nbytes):
        self._note("buffer_updated")
        self.seen_var.set("set-in-data_received")
        if bytes(self.buf[:nbytes]) == b"big":
            self.transport.set_write_buffer_limits(high=1, low=0)
            self.transport.write(b"x" * (4 << 20))


def _dedup(log: list) -> list:
    """The distinct records in order of first appearance (how many times a
    callback runs depends on how the kernel splits the bytes)."""
    out: list = []
    for item in log:
        if item not in out:
            out.append(item)
    return out


async def _server_callbacks(loop, proto_cls) -> list:
    """A server whose protocol is made in a context where var is 'server'; the
    loop itself runs with var unset. A client sends, then reads a large reply
    slowly (pause/resume_writing), then shuts down its side."""
    log: list = []
    done = loop.create_future()
    var.set("server")
    srv = await loop.create_server(lambda: proto_cls(log, done), HOST, 0)
    var.set("client-task")  # later changes of the creator's context are not seen
    port = srv.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(b"hello")
    await writer.drain()
    while not any(w == "data_received" or w == "buffer_updated" for w, *_ in log):
        await asyncio.sleep(0.005)
    writer.write(b"big")
    await writer.drain()
    await asyncio.sleep(0.05)
    await reader.readexactly(4 << 20)
    writer.write_eof()
    await asyncio.wait_for(done, 5)
    writer.close()
    srv.close()
    await srv.wait_closed()
    return _dedup(log)


@pytest.mark.parametrize("proto_cls", [CtxProto, CtxBufProto], ids=["Protocol", "BufferedProtocol"])
def test_stream_callbacks_run_in_the_transports_context(proto_cls):
    got = _both(lambda loop: _server_callbacks(loop, proto_cls))
    assert got["ringio"] == got["asyncio"]
    # The callbacks see the server's context, and what data_received set.
    seen = {what: (v, s) for what, v, s, made in got["ringio"]}
    assert all(v == "server" for v, _ in seen.values()), got["ringio"]
    assert {made for *_, made in got["ringio"]} == {"unset"}
    assert seen["connection_lost"] == ("server", "set-in-data_received")
    assert seen["resume_writing"] == ("server", "set-in-data_received")
    assert "pause_writing" in seen
    assert "eof_received" in seen


def test_client_callbacks_run_in_the_context_of_create_connection():
    async def main(loop):
        log: list = []
        done = loop.create_future()

        async def serve(reader, writer):
            writer.write(b"hi")
            await writer.drain()
            writer.close()

        srv = await asyncio.start_server(serve, HOST, 0)
        port = srv.sockets[0].getsockname()[1]

        async def connect():
            var.set("connector")
            return await loop.create_connection(lambda: CtxProto(log, done), HOST, port)

        # The connection is made in a task of its own: its context is a copy.
        await loop.create_task(connect())
        await asyncio.wait_for(done, 5)
        srv.close()
        await srv.wait_closed()
        return _dedup(log)

    got = _both(main)
    assert got["ringio"] == got["asyncio"]
    assert {v for _, v, *_ in got["ringio"]} == {"connector"}


class CtxDatagram(asyncio.DatagramProtocol):
    def __init__(self, log: list, done: asyncio.Future) -> None:
        self.log = log
        self.done = done

    def datagram_received(self, data, addr):
        self.log.append(("datagram_received", var.get("MISSING")))

    def error_received(self, exc):
        self.log.append(("error_received", var.get("MISSING")))
        if not self.done.done():
            self.done.set_result(None)


def test_datagram_callbacks_run_in_the_transports_context():
    async def main(loop):
        log: list = []
        done = loop.create_future()
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind((HOST, 0))
        var.set("udp")
        # Connected, so that an ICMP port-unreachable is reported (ECONNREFUSED).
        tr, _ = await loop.create_datagram_endpoint(
            lambda: CtxDatagram(log, done), remote_addr=peer.getsockname()
        )
        var.set("changed")
        peer.sendto(b"ping", tr.get_extra_info("sockname"))
        while not log:
            await asyncio.sleep(0.005)
        peer.close()
        # The peer's port is closed now: error_received(ConnectionRefusedError).
        for _ in range(100):
            tr.sendto(b"x")
            if done.done():
                break
            await asyncio.sleep(0.01)
        await asyncio.wait_for(done, 5)
        tr.close()
        return _dedup(log)

    got = _both(main)
    assert got["ringio"] == got["asyncio"]
    assert got["ringio"] == [("datagram_received", "udp"), ("error_received", "udp")]


def test_callbacks_do_not_leak_into_the_loops_context():
    """A variable data_received sets stays in the transport's context: the
    context that runs the loop does not see it."""

    async def main(loop):
        log: list = []
        done = loop.create_future()
        srv = await loop.create_server(lambda: CtxProto(log, done), HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"hello")
        await writer.drain()
        while not log or log[-1][0] != "data_received":
            await asyncio.sleep(0.005)
        writer.close()
        await asyncio.wait_for(done, 5)
        srv.close()
        await srv.wait_closed()

    def outer(factory):
        _run_on(factory, main, 10.0)
        return CtxProto.seen_var.get("unset")

    got = {name: contextvars.copy_context().run(outer, f) for name, f in LOOPS.items()}
    assert got == {"asyncio": "unset", "ringio": "unset"}


def test_connection_lost_after_a_failing_callback_runs_in_the_transports_context():
    """data_received raises: the exception handler is called and connection_lost
    comes through _fatal_error, both in the transport's context."""

    class Failing(CtxProto):
        def data_received(self, data):
            self._note("data_received")
            raise ValueError("boom")

    async def main(loop):
        log: list = []
        done = loop.create_future()
        handled: list = []
        loop.set_exception_handler(
            lambda lp, c: handled.append((type(c["exception"]).__name__, var.get("MISSING")))
        )
        var.set("server")
        srv = await loop.create_server(lambda: Failing(log, done), HOST, 0)
        var.set("changed")
        port = srv.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"hello")
        await asyncio.wait_for(done, 5)
        writer.close()
        srv.close()
        await srv.wait_closed()
        return _dedup(log), handled

    got = _both(main)
    assert got["ringio"] == got["asyncio"]
    log, handled = got["ringio"]
    assert [(w, v) for w, v, *_ in log] == [
        ("connection_made", "server"),
        ("data_received", "server"),
        ("connection_lost", "server"),
    ]
    assert handled == [("ValueError", "server")]


# ------------------------------------------------------------ write + abort


class WriteThenAbort(asyncio.Protocol):
    """Answers the first message with `reply` (in several writes) and aborts at
    once, as a server that rejects a request does; `when` = where it happens."""

    def __init__(self, reply: list[bytes], when: str) -> None:
        self.reply = reply
        self.when = when

    def _answer(self, transport):
        for part in self.reply:
            transport.write(part)
        transport.abort()

    def connection_made(self, transport):
        self.transport = transport
        if self.when == "connection_made":
            self._answer(transport)

    def data_received(self, data):
        if self.when == "data_received":
            self._answer(self.transport)


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    try:
        while chunk := await reader.read(1 << 16):
            out += chunk
    except ConnectionResetError:
        pass
    return bytes(out)


@pytest.mark.parametrize("when", ["connection_made", "data_received"])
def test_bytes_written_just_before_abort_reach_the_peer(when):
    """asyncio's write() hands the bytes to an idle socket at once, so abort()
    right after it loses nothing; ringio flushes what is queued before aborting."""
    reply = [b"HTTP/1.1 101 Switching Protocols\r\n", b"Upgrade: websocket\r\n\r\n", bytes(4000)]

    async def main(loop):
        srv = await loop.create_server(lambda: WriteThenAbort(reply, when), HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        got = await asyncio.wait_for(_read_all(reader), 5)
        writer.close()
        srv.close()
        await srv.wait_closed()
        return got

    got = _both(main)
    assert got["ringio"] == got["asyncio"] == b"".join(reply)


def test_abort_after_a_write_larger_than_the_socket_takes_does_not_block():
    """The flush before abort is non-blocking: the peer gets a prefix of the
    data, the rest is dropped (asyncio: what its direct send took)."""
    data = bytes(range(256)) * (32 << 12)  # 8 MiB

    class Big(asyncio.Protocol):
        def connection_made(self, transport):
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
            transport.write(data)
            transport.abort()

    async def main(loop):
        srv = await loop.create_server(Big, HOST, 0)
        port = srv.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(HOST, port)
        got = await asyncio.wait_for(_read_all(reader), 5)
        writer.close()
        srv.close()
        await srv.wait_closed()
        return got

    for name, got in _both(main).items():
        assert 0 < len(got) < len(data), name
        assert got == data[: len(got)], name


# ----------------------------------------------------------------- overrides


def test_timers_follow_a_patched_loop_time():
    """A loop.time patched on the instance (aiohttp's tests move time forward
    this way) decides when timers fire, as in asyncio's _run_once."""

    async def main(loop):
        real = loop.time
        offset = [0.0]
        loop.time = lambda: real() + offset[0]
        fired = loop.create_future()
        loop.call_later(50, lambda: fired.done() or fired.set_result("fired"))
        # A real-time bound that does not depend on the loop's clock.
        guard = threading.Timer(
            3, loop.call_soon_threadsafe, (lambda: fired.done() or fired.set_result("stuck"),)
        )
        guard.start()
        try:
            await asyncio.sleep(0)
            offset[0] = 100.0
            return await fired
        finally:
            guard.cancel()
            del loop.time

    got = _both(main, timeout=None)  # bounded by the guard, in real time
    assert got == {"asyncio": "fired", "ringio": "fired"}


def test_a_patched_loop_time_while_the_loop_runs_natively():
    """The patch arrives while the loop already iterates (in ringio's native
    iterations): the next iteration must use it."""

    async def main(loop):
        for _ in range(20):
            await asyncio.sleep(0)  # native iterations under way
        real = loop.time
        shift = [0.0]
        loop.time = lambda: real() + shift[0]
        try:
            waiter = loop.create_task(asyncio.sleep(500, "done"))
            for _ in range(5):
                await asyncio.sleep(0)
            shift[0] = 501.0
            guard = threading.Timer(3, loop.call_soon_threadsafe, (waiter.cancel,))
            guard.start()
            try:
                return await waiter
            except asyncio.CancelledError:
                return "stuck"
            finally:
                guard.cancel()
        finally:
            del loop.time

    got = _both(main, timeout=None)
    assert got == {"asyncio": "done", "ringio": "done"}


class CountingSocket(socket.socket):
    """A socket.socket subclass whose I/O methods count their calls and pass
    the bytes through (a library's instrumented or wrapped socket)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def recv(self, *args: Any) -> bytes:
        self._count("recv")
        return super().recv(*args)

    def recv_into(self, *args: Any) -> int:
        self._count("recv_into")
        return super().recv_into(*args)

    def send(self, *args: Any) -> int:
        self._count("send")
        return super().send(*args)

    def sendmsg(self, *args: Any) -> int:
        self._count("sendmsg")
        return super().sendmsg(*args)


async def _echo_server():
    async def echo(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(echo, HOST, 0)


def test_a_socket_subclass_passed_to_create_connection_has_its_methods_called():
    async def main(loop):
        srv = await _echo_server()
        port = srv.sockets[0].getsockname()[1]
        sock = CountingSocket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await loop.sock_connect(sock, (HOST, port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(b"ping" * 1000)
        got = await reader.readexactly(4000)
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
        # Which receive method and how often depend on the loop and the timing;
        # that the subclass saw the bytes go both ways does not.
        return (
            got == b"ping" * 1000,
            sock.calls.get("send", 0) + sock.calls.get("sendmsg", 0) > 0,
            sock.calls.get("recv", 0) + sock.calls.get("recv_into", 0) > 0,
        )

    got = _both(main)
    assert got == {"asyncio": (True, True, True), "ringio": (True, True, True)}


def test_sock_methods_of_the_loop_call_a_socket_subclass():
    async def main(loop):
        srv = await _echo_server()
        port = srv.sockets[0].getsockname()[1]
        sock = CountingSocket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await loop.sock_connect(sock, (HOST, port))
        # Nothing to read yet: the receive waits (asyncio: readiness, then
        # sock.recv; ringio's own sockets: a ring read).
        pending = loop.create_task(loop.sock_recv(sock, 100))
        await asyncio.sleep(0.02)
        await loop.sock_sendall(sock, b"hello")
        got = await pending
        buf = bytearray(100)
        reading = loop.create_task(loop.sock_recv_into(sock, buf))
        await asyncio.sleep(0.02)
        await loop.sock_sendall(sock, b"again")
        n = await reading
        sock.close()
        srv.close()
        await srv.wait_closed()
        return got, bytes(buf[:n]), sock.calls.get("recv", 0), sock.calls.get("recv_into", 0)

    got = _both(main)
    assert got["ringio"][:2] == got["asyncio"][:2] == (b"hello", b"again")
    # Each receive called the subclass's method at least twice: the first try
    # (nothing there) and the one that got the bytes.
    assert got["ringio"][2] >= 2 and got["ringio"][3] >= 2, got
    assert got["asyncio"][2] >= 2 and got["asyncio"][3] >= 2, got


def test_a_socket_subclass_without_io_overrides_keeps_the_ring_transport(loop, run):
    from ringio.loop._transport import RingSocketTransport

    class Tagged(socket.socket):
        tag = "mine"

    async def main():
        srv = await _echo_server()
        port = srv.sockets[0].getsockname()[1]
        kinds = []
        for cls in (Tagged, CountingSocket):
            sock = cls(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            await loop.sock_connect(sock, (HOST, port))
            reader, writer = await asyncio.open_connection(sock=sock)
            kinds.append(type(writer.transport))
            writer.write(b"x")
            assert await reader.readexactly(1) == b"x"
            writer.close()
            await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
        return kinds

    kinds = run(main())
    assert kinds[0] is RingSocketTransport
    assert kinds[1] is not RingSocketTransport


# ------------------------------------------------------------------ ordering


@pytest.mark.parametrize("debug", [False, True], ids=["native", "debug"])
def test_handles_ready_before_the_select_run_before_its_data_received(debug):
    """asyncio runs the handles that were ready when an iteration began before the
    I/O callbacks its select reports (aiohttp's concurrent ws.close() tasks rely
    on it). ringio's core delivers received bytes during the select: it must keep
    that order (debug: asyncio's own _run_once drives the selector)."""

    async def main(loop):
        loop.set_debug(debug)
        log: list = []

        class P(asyncio.Protocol):
            def data_received(self, data):
                log.append(("data_received", data))

            def eof_received(self):
                log.append(("eof_received", None))

        a, b = socket.socketpair()
        await loop.create_connection(P, sock=a)
        await asyncio.sleep(0.01)
        for i in range(3):
            b.send(b"x%d" % i)  # in the kernel before the next select
            loop.call_soon(log.append, ("call_soon", i))  # ready before it
            await asyncio.sleep(0.01)
        b.shutdown(socket.SHUT_WR)
        loop.call_soon(log.append, ("call_soon", "eof"))
        await asyncio.sleep(0.01)
        b.close()
        return log

    got = _both(main)
    assert got["ringio"] == got["asyncio"]
    assert got["ringio"][:2] == [("call_soon", 0), ("data_received", b"x0")]
