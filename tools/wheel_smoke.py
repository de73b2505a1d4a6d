"""A smoke program for an installed ringio wheel (run with ``python -W error``).

Imports ringio from site-packages, then exercises each layer once through its
documented entry points: a ``start_server`` echo on ringio's loop (``ringio.run``
and ``asyncio.Runner(loop_factory=ringio.new_event_loop)``), a file written and read
back with ``ringio.open``, and a Watcher echo. Prints ``smoke ok`` and the versions.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tempfile

import ringio


async def echo() -> bytes:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()

    assert isinstance(asyncio.get_running_loop(), ringio.EventLoop)
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        data = await reader.read(100)
        writer.close()
        await writer.wait_closed()
    return data


async def files(path: str) -> bytes:
    async with ringio.open(path, "wb") as f:
        await f.write(b"ringio" * 1000)
    async with ringio.open(path, "rb") as f:
        return await f.read()


def watcher_echo() -> bytes:
    a, b = socket.socketpair()
    with a, b, ringio.Watcher() as w:
        w.write("w", a, b"hello")
        w.read("r", b)
        got = b""
        for _ in range(100):
            for res in w.wait_io(timeout=1.0):
                assert res.error is None, res.error
                if res.context == "r":
                    got = bytes(res.buffer)  # a RingBuffer of exactly res.size bytes
            if got:
                break
    return got


def main() -> None:
    assert "site-packages" in ringio.__file__, ringio.__file__
    assert ringio.run(asyncio.wait_for(echo(), 10)) == b"ping"
    with asyncio.Runner(loop_factory=ringio.new_event_loop) as runner:
        assert runner.run(asyncio.wait_for(echo(), 10)) == b"ping"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f")
        assert ringio.run(asyncio.wait_for(files(path), 10)) == b"ringio" * 1000
    assert watcher_echo() == b"hello"
    print(f"smoke ok: ringio {ringio.__version__} on Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
