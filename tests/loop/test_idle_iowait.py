"""An event loop idle on its connections is idle, not in iowait.

Linux counts a thread that waits in ``io_uring_enter`` as in iowait whenever one of
its requests is in flight (an armed receive is one), so without
``IORING_ENTER_NO_IOWAIT`` (Linux 6.15) a server idle on its connections shows its
CPU at 100 % iowait in ``top`` and in every monitor that reads ``/proc/stat``, where
asyncio's loop, waiting in ``epoll_wait``, shows it idle. The oracle is asyncio's
loop; ringio's must read the same.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import ringio

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or tuple(int(x) for x in os.uname().release.split(".")[:2]) < (6, 15),
    reason="IORING_ENTER_NO_IOWAIT needs Linux 6.15",
)

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.SelectorEventLoop,
    "ringio": ringio.EventLoop,
}
IDLE_SECONDS = 0.5


def _cpu_idle_and_iowait(cpu: int) -> tuple[int, int]:
    """(idle, iowait) clock ticks of `cpu` since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0] == f"cpu{cpu}":
                return int(fields[4]), int(fields[5])
    raise LookupError(f"cpu{cpu} not in /proc/stat")


@contextmanager
def _pinned() -> Iterator[int]:
    """Runs the calling thread on one CPU of its set; yields that CPU."""
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, allowed)


def _iowait_share(cpu: int, idle_for: Callable[[], None]) -> float:
    """The share of `cpu`'s idle time that /proc/stat counts as iowait while
    `idle_for()` runs."""
    idle0, iowait0 = _cpu_idle_and_iowait(cpu)
    idle_for()
    idle1, iowait1 = _cpu_idle_and_iowait(cpu)
    waited = (idle1 - idle0) + (iowait1 - iowait0)
    assert waited >= 10, f"the CPU was idle for only {waited} ticks; nothing to judge"
    return (iowait1 - iowait0) / waited


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_a_server_idle_on_its_connections_is_not_in_iowait(name: str) -> None:
    async def serve_idle() -> None:
        handlers: list[asyncio.Task[bytes]] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.current_task())  # type: ignore[arg-type]
            try:
                await reader.read(100)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        while len(handlers) < 4:
            await asyncio.sleep(0.01)
        # Every connection, both ends, has a receive waiting; nothing arrives.
        await asyncio.sleep(IDLE_SECONDS)
        for _, writer in clients:
            writer.close()
        await asyncio.gather(*handlers)
        server.close()
        await server.wait_closed()

    loop = LOOPS[name]()
    try:
        with _pinned() as cpu:
            share = _iowait_share(cpu, lambda: loop.run_until_complete(serve_idle()))
    finally:
        loop.close()
    assert share < 0.5, f"{name}'s loop idle on 8 sockets: {share:.0%} of the idle CPU in iowait"


def test_a_watcher_idle_on_a_pending_read_is_not_in_iowait() -> None:
    a, b = socket.socketpair()
    w = ringio.Watcher()
    try:
        w.read(None, a, bytearray(64))
        with _pinned() as cpu:
            share = _iowait_share(cpu, lambda: w.wait_io(IDLE_SECONDS))
        b.send(b"x")
        results = w.wait_io(5)
        assert [r.size for r in results] == [1]
    finally:
        w.close()
        a.close()
        b.close()
    assert share < 0.5, f"a Watcher waiting on a read: {share:.0%} of the idle CPU in iowait"
