"""vmbench-style TCP echo servers for the networking benchmarks.

Flavours (``--flavour``):

``sockets``
    ``loop.sock_accept`` then, per connection, ``loop.sock_recv`` /
    ``loop.sock_sendall`` on a non-blocking socket.
``streams``
    ``asyncio.start_server``. By default each read is ``reader.read(1 MiB)`` and
    whatever arrived is written back (``writer.write`` + ``await writer.drain()``),
    i.e. a chunk echo like vmbench's, which serves the fixed-size, unframed
    messages of ``bench/client/echoclient.c``. ``--streams-read readexactly
    --size N`` instead echoes whole N-byte messages with ``readexactly(N)``.
    No line protocol is used.
``protocol``
    ``asyncio.Protocol``: ``data_received`` -> ``transport.write``.

Event loops (``--loop``): ``asyncio`` (the default loop of this Python),
``uvloop`` (if installed), or ``--loop-factory module:callable`` to plug in any
loop factory (ringio's later), which wins over ``--loop``.

The server binds ``--host`` (127.0.0.1) on port 0 unless ``--port`` is given,
prints the bound port alone on the first line of stdout, and serves until it is
killed (SIGTERM/SIGINT end it cleanly) or for ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
import socket
import sys
from collections.abc import Callable

FLAVOURS = ("sockets", "streams", "protocol")
LOOPS = ("asyncio", "uvloop")
READ_CHUNK = 1024 * 1024


def loop_factory_for(
    loop: str, factory: str | None = None
) -> Callable[[], asyncio.AbstractEventLoop]:
    """Return a callable creating the requested event loop (raises ImportError/ValueError)."""
    if factory:
        module_name, _, attr = factory.partition(":")
        if not module_name or not attr:
            raise ValueError(f"--loop-factory wants module:callable, got {factory!r}")
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[return-value]
    if loop == "asyncio":
        return asyncio.new_event_loop
    if loop == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    raise ValueError(f"unknown loop {loop!r}")


def _nodelay(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


# ----------------------------------------------------------------- sockets


async def _sock_client(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    with conn:
        try:
            while True:
                data = await loop.sock_recv(conn, READ_CHUNK)
                if not data:
                    break
                await loop.sock_sendall(conn, data)
        except (ConnectionError, OSError):
            pass


async def _serve_sockets(host: str, port: int, backlog: int, ready: Callable[[int], None]) -> None:
    loop = asyncio.get_running_loop()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(backlog)
    srv.setblocking(False)
    tasks: set[asyncio.Task[None]] = set()
    ready(srv.getsockname()[1])
    try:
        while True:
            conn, _ = await loop.sock_accept(srv)
            conn.setblocking(False)
            _nodelay(conn)
            task = loop.create_task(_sock_client(loop, conn))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        srv.close()
        for task in tasks:
            task.cancel()


# ----------------------------------------------------------------- streams


def _streams_handler(mode: str, size: int):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _nodelay(writer.get_extra_info("socket"))
        try:
            while True:
                if mode == "readexactly":
                    try:
                        data = await reader.readexactly(size)
                    except asyncio.IncompleteReadError:
                        break
                else:
                    data = await reader.read(READ_CHUNK)
                    if not data:
                        break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    return handle


async def _serve_streams(
    host: str, port: int, backlog: int, ready: Callable[[int], None], mode: str, size: int
) -> None:
    server = await asyncio.start_server(
        _streams_handler(mode, size), host, port, backlog=backlog, reuse_address=True
    )
    ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


# ----------------------------------------------------------------- protocol


class EchoProtocol(asyncio.Protocol):
    # uvloop's transports are not asyncio.Transport subclasses: no isinstance checks.
    transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport.get_extra_info("socket"))

    def data_received(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def _serve_protocol(host: str, port: int, backlog: int, ready: Callable[[int], None]) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoProtocol, host, port, backlog=backlog, reuse_address=True)
    ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


# ----------------------------------------------------------------- main


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass

    def ready(port: int) -> None:
        print(port, flush=True)
        print(
            f"echo_server: {args.flavour} on {type(loop).__module__}.{type(loop).__name__} "
            f"at {args.host}:{port}",
            file=sys.stderr,
            flush=True,
        )

    if args.flavour == "sockets":
        coro = _serve_sockets(args.host, args.port, args.backlog, ready)
    elif args.flavour == "streams":
        coro = _serve_streams(
            args.host, args.port, args.backlog, ready, args.streams_read, args.size
        )
    else:
        coro = _serve_protocol(args.host, args.port, args.backlog, ready)
    server_task = loop.create_task(coro)
    stop_task = loop.create_task(stop.wait())
    timeout = args.duration if args.duration and args.duration > 0 else None
    done, _ = await asyncio.wait(
        {server_task, stop_task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    for task in (server_task, stop_task):
        task.cancel()
    await asyncio.gather(server_task, stop_task, return_exceptions=True)
    if server_task in done and not server_task.cancelled() and server_task.exception():
        raise server_task.exception()  # type: ignore[misc]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flavour", "--flavor", choices=FLAVOURS, default="protocol")
    p.add_argument("--loop", choices=LOOPS, default="asyncio")
    p.add_argument(
        "--loop-factory",
        metavar="MODULE:CALLABLE",
        default=None,
        help="event loop factory; overrides --loop",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--backlog", type=int, default=4096)
    p.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="serve this many seconds, then exit (0: until killed)",
    )
    p.add_argument(
        "--streams-read",
        choices=("read", "readexactly"),
        default="read",
        help="streams flavour: chunk echo with read(1 MiB) or readexactly(--size)",
    )
    p.add_argument(
        "--size", type=int, default=1024, help="message size for --streams-read readexactly"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        factory = loop_factory_for(args.loop, args.loop_factory)
    except (ImportError, AttributeError, ValueError) as exc:
        print(f"echo_server: cannot create loop: {exc}", file=sys.stderr)
        return 3
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
